"""More writing at indices: ``put`` (flat indices), ``index_reduce`` (reducing slices
into the slices of ``dim`` at ``index``), the ``index_put`` methods, and
``fill_diagonal_``; with their in-place forms.

All are composites: ``put`` is ``scatter``/``scatter_add`` on the flattened tensor,
``index_reduce`` is ``scatter_reduce`` with the index spread over the source's shape,
``fill_diagonal_`` a ``where`` with a fixed mask, so gradients match PyTorch's (ties of
``amax``/``amin`` share the gradient evenly) and ``ember.jit`` captures them.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, EmberIndexError, EmberTypeError, ShapeError
from ..tensor import Tensor
from ._promote import scalar_tensor
from .elementwise import where
from .index import index_put as _index_put_fn
from .inplace import inplace
from .selection import (_INT32_64, _INT64, _check_index, _check_same_dtype, _lift,
                        _restore, scatter, scatter_add, scatter_reduce)
from .shape import expand, reshape, wrap_dim

__all__ = ["put", "index_reduce"]
_REDUCTIONS = ("prod", "mean", "amax", "amin")


def _known(t) -> bool:
    """Whether ``t``'s values can be read now (not while ember.jit traces them)."""
    return not getattr(t._data, "_ember_tracer", False)


# put -------------------------------------------------------------------------------------
def put(input, index, source, accumulate: bool = False):
    """A copy of ``input`` with the values of ``source`` written at the flat positions
    ``index`` (``input`` seen as 1-d in row-major order; negative positions count from
    the end), or added there with ``accumulate=True``.

    Args:
        index: an int64 tensor of positions (any shape).
        source: values, as many as ``index`` has, of ``input``'s dtype.

    >>> ember.tensor([[1, 2], [3, 4]]).put(ember.tensor([0, -1]), ember.tensor([9, 8]))
    tensor([[9, 2],
            [3, 8]])
    """
    _check_index("put", index, _INT64)
    _check_same_dtype("put", input, source, "source")
    if index.numel() != source.numel():
        raise EmberIndexError(f"put: Expected source and index to have the same number of "
                              f"elements, but got source.numel() = {source.numel()}, "
                              f"index.numel() = {index.numel()}")
    n = input.numel()
    if index.numel() and _known(index):
        lo, hi = int(index._data.min()), int(index._data.max())
        if lo < -n or hi >= n:
            raise EmberIndexError(f"put: out of range: tried to access index "
                                  f"{lo if lo < -n else hi} on a tensor of {n} elements.")
    flat = reshape(input, (-1,))
    at = reshape(index, (-1,))
    at = where(at < 0, at + n, at)
    values = reshape(source, (-1,))
    out = scatter_add(flat, 0, at, values) if accumulate else scatter(flat, 0, at, values)
    return reshape(out, tuple(input.shape))


def put_(self, index, source, accumulate: bool = False):
    """In-place version of :func:`put`."""
    return inplace("put_", self, lambda x: put(x, index, source, accumulate), (source,))


# index_reduce ----------------------------------------------------------------------------
def index_reduce(input, dim: int, index, source, reduce: str, *, include_self: bool = True):
    """A copy of ``input`` with each slice ``source[..., i, ...]`` (along ``dim``) reduced
    into the slice ``index[i]`` of ``input``: ``reduce`` is ``'prod'``, ``'mean'``,
    ``'amax'`` or ``'amin'``. With ``include_self=False`` the slices written to start
    from the reduction of the source values alone. Integer ``'mean'`` rounds down.

    Args:
        dim: the dim indexed.
        index: a 1-d int32/int64 tensor, one entry per slice of ``source`` along ``dim``.
        source: ``input``'s shape and dtype, apart from ``dim`` (of ``len(index)``).

    >>> ember.ones(2).index_reduce(0, ember.tensor([0, 0]), ember.tensor([2.0, 3.0]), "prod")
    tensor([6., 1.])
    """
    op = "index_reduce"
    if reduce not in _REDUCTIONS:
        raise EmberError(f"{op}: Expected reduce to be one of prod, mean, amax or amin but "
                         f"got {reduce}.")
    _check_index(op, index, _INT32_64)
    if index.ndim > 1:
        raise EmberIndexError(f"{op}: Index is supposed to be a vector, but got dim: "
                              f"{index.ndim} with type: {index.dtype.name} and size: "
                              f"{list(index.shape)}")
    _check_same_dtype(op, input, source, "source")
    x, s, idx = _lift(input), _lift(source), _lift(index)
    d = wrap_dim(dim, x.ndim, op)
    if idx.shape[0] != s.shape[d]:
        raise EmberError(f"{op}: Number of indices ({idx.shape[0]}) should be equal to "
                         f"source.size(dim): ({s.shape[d]}), for dim: {d}")
    if s.ndim != x.ndim or any(s.shape[k] != x.shape[k] for k in range(x.ndim) if k != d):
        raise ShapeError(f"{op}: source tensor shape must match self tensor shape, excluding "
                         f"the specified dimension. Got self.shape = {list(input.shape)} "
                         f"source.shape = {list(source.shape)}")
    if idx.numel() and _known(idx):
        lo, hi = int(idx._data.min()), int(idx._data.max())
        if lo < 0 or hi >= x.shape[d]:
            raise EmberIndexError(f"{op}: index {lo if lo < 0 else hi} is out of range for "
                                  f"dimension {d} of self (size {x.shape[d]})")
    if idx.dtype is not dt.int64:
        idx = idx.long()
    spread = expand(reshape(idx, tuple(-1 if k == d else 1 for k in range(x.ndim))),
                    tuple(s.shape))
    out = scatter_reduce(x, d, spread, s, reduce, include_self=include_self)
    return _restore(out, input)


def index_reduce_(self, dim: int, index, source, reduce: str, *, include_self: bool = True):
    """In-place version of :func:`index_reduce`."""
    return inplace("index_reduce_", self, lambda x: index_reduce(
        x, dim, index, source, reduce, include_self=include_self), (source,))


# index_put methods -----------------------------------------------------------------------
def _index_tuple(op, input, indices) -> tuple:
    """``indices`` (a tuple or list of index tensors, None meaning a whole dim) as an
    index ``ember.index_put`` takes."""
    if isinstance(indices, Tensor) or not isinstance(indices, (tuple, list)):
        raise EmberTypeError(f"{op}: expected indices to be a tuple or list of Tensors, got "
                             f"{type(indices).__name__}")
    out = []
    for i in indices:
        if i is None:
            out.append(slice(None))
        elif isinstance(i, Tensor):
            out.append(i)
        else:
            raise EmberTypeError(f"{op}: expected each index to be a Tensor or None, got "
                                 f"{type(i).__name__}")
    if len(out) > max(input.ndim, 1):
        raise EmberIndexError(f"{op}: too many indices for tensor of dimension {input.ndim} "
                              f"(got {len(out)})")
    return tuple(out)


def _index_put_values(op, input, values):
    if isinstance(values, Tensor) and values.dtype is not input.dtype:
        raise EmberTypeError(f"{op}: Index put requires the source and destination dtypes "
                             f"match, got {input.dtype.name} for the destination and "
                             f"{values.dtype.name} for the source.")
    return values


def index_put_method(self, indices, values, accumulate: bool = False):
    """A copy of this tensor with ``self[indices] = values`` (or ``+=`` with
    ``accumulate``, adding repeated positions up). ``indices`` is a tuple of index
    tensors (None for a whole dim); ``values`` broadcasts and has this tensor's dtype.

    >>> ember.zeros(3).index_put((ember.tensor([0, 0]),), ember.tensor(1.0), accumulate=True)
    tensor([2., 0., 0.])
    """
    idx = _index_tuple("index_put", self, indices)
    values = _index_put_values("index_put", self, values)
    return _index_put_fn(self, idx, values, accumulate)


def index_put_(self, indices, values, accumulate: bool = False):
    """In-place version of :meth:`index_put`."""
    idx = _index_tuple("index_put_", self, indices)
    values = _index_put_values("index_put_", self, values)
    others = (values,) if isinstance(values, Tensor) else ()
    return inplace("index_put_", self, lambda x: _index_put_fn(x, idx, values, accumulate),
                   others)


# fill_diagonal_ --------------------------------------------------------------------------
def _diagonal_mask(shape: tuple, wrap: bool) -> np.ndarray:
    """True on the main diagonal of a matrix (every ``cols + 1``-th element in row-major
    order; with ``wrap``, on past the square top of a tall matrix), or of a cube."""
    total = int(np.prod(shape))
    if len(shape) == 2:
        rows, cols = shape
        step = cols + 1
        end = total if wrap else min(total, cols * cols)
    else:
        step = sum(int(np.prod(shape[k + 1:])) for k in range(len(shape)))
        end = total
    mask = np.zeros(total, dtype=bool)
    mask[0:end:step] = True
    return mask.reshape(shape)


def fill_diagonal_(self, fill_value, wrap: bool = False):
    """Fill the main diagonal with ``fill_value``, in place. A matrix's diagonal is where
    row and column index agree; with ``wrap=True`` a tall matrix's diagonal starts again
    below every ``cols + 1`` rows (NumPy's ``fill_diagonal``). A tensor of more dims must
    have all dims equal.

    >>> ember.zeros(2, 3).fill_diagonal_(5.0)
    tensor([[5., 0., 0.],
            [0., 5., 0.]])
    """
    if self.ndim < 2:
        raise EmberError(f"fill_diagonal_: dimensions must larger than 1, got a tensor of "
                         f"{self.ndim} dims")
    if self.ndim > 2 and len(set(self.shape)) != 1:
        raise EmberError(f"fill_diagonal_: all dimensions of input must be of equal length, "
                         f"got shape {list(self.shape)}")
    if isinstance(fill_value, Tensor):
        if fill_value.numel() != 1:
            raise EmberError(f"fill_diagonal_: expected a number or a one-element tensor as "
                             f"fill_value, got shape {list(fill_value.shape)}")
        fill_value = fill_value.item()
    if not isinstance(fill_value, (numbers.Number, np.bool_)) or isinstance(fill_value, complex):
        raise EmberTypeError(f"fill_diagonal_: expected fill_value to be a number, got "
                             f"{type(fill_value).__name__}")
    value = scalar_tensor(fill_value, self.dtype, self.device)
    mask_np = _diagonal_mask(tuple(self.shape), bool(wrap))
    mask = Tensor._make(self.device.backend.asarray(mask_np), self.device)

    def direct(arr):
        arr[mask._data] = value._data
    return inplace("fill_diagonal_", self, lambda x: where(mask, value, x), (), direct)
