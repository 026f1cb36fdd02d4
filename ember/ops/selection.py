"""Selecting and scattering by index: gather, scatter, scatter_add, scatter_reduce,
index_select/add/copy/fill. The mask ops (masked_fill/select/scatter) are in ``masked.py``,
take, take_along_dim, nonzero and argwhere in ``take.py``, the sorting family (sort, topk,
unique, searchsorted, ...) in ``sorting.py``: all of them use the checks here and are
exported from here too.

The index-driven primitives take their index as a tensor input and check its values in
the forward, where they are known: an index out of range is an EmberIndexError that
names the op and the size, never a NumPy traceback or a silent wrap-around. As in
PyTorch, a 0-d input, index or source is treated as a 1-d tensor of one element.
In-place variants (``x.scatter_(...)``, ``x.index_add_(...)``) are attached to Tensor at
the bottom of this file (``x.masked_fill_(...)`` in ``masked.py``).
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes as dt
from ..autograd import grad_mode
from ..errors import EmberError, EmberIndexError, EmberTypeError, ShapeError
from ..tensor import Tensor
from ._promote import scalar_tensor
from .elementwise import where
from .inplace import inplace
from .reduce import sum as _sum
from .registry import apply, register
from .shape import expand, reshape, wrap_dim

__all__ = ["gather", "scatter", "scatter_add", "scatter_reduce", "index_select", "index_add",
           "index_copy", "index_fill", "masked_fill", "masked_select", "masked_scatter",
           "take", "take_along_dim", "nonzero", "argwhere", "sort", "argsort", "msort",
           "topk", "kthvalue", "unique", "unique_consecutive", "searchsorted", "bucketize",
           "unravel_index"]
NOT_METHODS = ("searchsorted", "bucketize", "unravel_index")


# Argument checks -------------------------------------------------------------------------
_INT32_64 = (dt.int32, dt.int64)
_INT64 = (dt.int64,)


def _check_index(op, index, allowed, name="index"):
    if not isinstance(index, Tensor):
        raise EmberTypeError(f"{op}: expected {name} to be a Tensor, got "
                             f"{type(index).__name__}")
    if index.dtype not in allowed:
        want = " or ".join(d.name for d in allowed)
        raise EmberTypeError(f"{op}: expected dtype {want} for {name}, got {index.dtype.name}")


def _check_range(op, index, size, dim, negative=False):
    """Every value of the backend array ``index`` must address a dim of length ``size``
    (negative values count from the end when ``negative``)."""
    if index.size == 0:
        return
    lo, hi = int(index.min()), int(index.max())
    low = -size if negative else 0
    if lo < low or hi >= size:
        raise EmberIndexError(f"{op}: index {lo if lo < low else hi} is out of bounds for "
                              f"dimension {dim} with size {size}")


def _check_same_dtype(op, input, other, name):
    if not isinstance(other, Tensor):
        raise EmberTypeError(f"{op}: expected {name} to be a Tensor, got {type(other).__name__}")
    if other.dtype is not input.dtype:
        raise EmberTypeError(f"{op}: expected self and {name} to have the same dtype, got "
                             f"{input.dtype.name} and {other.dtype.name}")


def _check_mask(op, mask):
    if not isinstance(mask, Tensor) or mask.dtype is not dt.bool:
        got = mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__
        raise EmberTypeError(f"{op}: expected a bool tensor for mask, got {got}")


def _fill_value(op, value, input):
    """``value`` (a number or a 0-d tensor) as a 0-d tensor of ``input``'s dtype."""
    if isinstance(value, Tensor):
        if value.ndim:
            raise EmberError(f"{op}: only supports a 0-dimensional value tensor, but got a "
                             f"tensor with {value.ndim} dimension(s)")
        return value if value.dtype is input.dtype else value.to(input.dtype)
    if not isinstance(value, (numbers.Number, np.bool_)) or \
            (isinstance(value, complex) and not input.dtype.is_complex):
        raise EmberTypeError(f"{op}: expected value to be a number or a 0-d Tensor, got "
                             f"{type(value).__name__}")
    return scalar_tensor(value, input.dtype, input.device)


def _lift(t):
    """A 0-d tensor as 1-d of one element (PyTorch's rule for the index ops)."""
    return reshape(t, (1,)) if t.ndim == 0 else t


def _lift_array(a):
    return a.reshape(1) if a.ndim == 0 else a


def _restore(out, like):
    return reshape(out, ()) if like.ndim == 0 else out


# Writing at an index: shared by the forwards and the in-place fast paths ------------------
_UFUNCS = {"sum": "add", "mean": "add", "prod": "multiply", "amax": "maximum",
           "amin": "minimum"}


def _identity(reduce, dtype):
    """The value a position starts from when ``include_self=False``."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype == np.bool_:
        return reduce == "amin"
    if dt.as_dtype(dtype).is_floating_point:
        return -np.inf if reduce == "amax" else np.inf
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _scatter_coords(xp, index, dim):
    """Where each element of ``index`` writes: its value along ``dim``, its own position
    along the other dims (broadcasting index arrays)."""
    nd = index.ndim
    return tuple(index if d == dim else xp.arange(s).reshape((1,) * d + (s,) + (1,) * (nd - d - 1))
                 for d, s in enumerate(index.shape))


def _scatter_write(xp, out, index, src, dim, reduce, include_self, op):
    """``out[..., index[i], ...] = src[i]`` (or combined by ``reduce``), in place."""
    _check_range(op, index, out.shape[dim], dim)
    at = _scatter_coords(xp, index, dim)
    if reduce is None:
        out[at] = src
        return out
    if not include_self:
        out[at] = _identity(reduce, out.dtype)
    getattr(xp, _UFUNCS[reduce]).at(out, at, src)
    if reduce == "mean":
        count = xp.zeros(out.shape, np.int64)
        xp.add.at(count, at, 1)
        count = xp.maximum(count + 1 if include_self else count, 1)
        out[...] = out / count if out.dtype.kind not in "iub" else out // count
    return out


def _index_write(xp, out, index, src, dim, accumulate, op, negative=False):
    """``out.index_copy_``/``index_add_``/``index_fill_`` along ``dim``, in place."""
    _check_range(op, index, out.shape[dim], dim, negative)
    at = (slice(None),) * dim + (index,)
    if accumulate:
        xp.add.at(out, at, src)
    else:
        out[at] = src
    return out


# gather / scatter -------------------------------------------------------------------------
def _gather_forward(xp, a, index, dim):
    _check_range("gather", index, a.shape[dim], dim)
    region = a[tuple(slice(None) if d == dim else slice(0, s) for d, s in enumerate(index.shape))]
    return xp.take_along_axis(region, index, axis=dim)


def _gather_vjp(n, g):
    index = n.saved_inputs()[1]
    return apply(_SCATTER_ADD, g.new_zeros(n.inputs[0].shape), index, g,
                 dim=n.params["dim"]), None


def _scatter_vjp(n, g):
    index = n.saved_inputs()[1]
    dim = n.params["dim"]
    ga = gs = None
    if n.edges[0]:  # positions overwritten by src get no gradient
        ga = apply(_SCATTER, g, index, expand(g.new_zeros(()), tuple(index.shape)), dim=dim)
    if n.edges[2]:
        gs = apply(_GATHER, g, index, dim=dim)
    return ga, None, gs


def _scatter_add_vjp(n, g):
    index = n.saved_inputs()[1]
    gs = apply(_GATHER, g, index, dim=n.params["dim"]) if n.edges[2] else None
    return g, None, gs


_GATHER = register("gather", _gather_forward, _gather_vjp, saves_inputs=(1,))
_SCATTER = register(
    "scatter", lambda xp, a, index, src, dim:
    _scatter_write(xp, a.copy(), index, src, dim, None, True, "scatter"), _scatter_vjp, saves_inputs=(1,))
_SCATTER_ADD = register(
    "scatter_add", lambda xp, a, index, src, dim:
    _scatter_write(xp, a.copy(), index, src, dim, "sum", True, "scatter_add"), _scatter_add_vjp, saves_inputs=(1,))


def gather(input, dim: int, index, *, sparse_grad: bool = False):
    """Values of ``input`` along ``dim`` at ``index``: for dim=1,
    ``out[i][j] = input[i][index[i][j]]``. ``index`` has input's number of dims and is
    no larger than it along the other dims; the result has index's shape.

    >>> ember.gather(ember.tensor([[1, 2], [3, 4]]), 1, ember.tensor([[0, 0], [1, 0]]))
    tensor([[1, 1],
            [4, 3]])
    """
    if sparse_grad:
        raise NotImplementedError("gather: sparse_grad=True is not supported (ember has no "
                                  "sparse tensors)")
    _check_index("gather", index, _INT32_64)
    x, idx = _lift(input), _lift(index)
    d = wrap_dim(dim, x.ndim, "gather")
    if idx.ndim != x.ndim:
        raise ShapeError(f"gather: index tensor must have the same number of dimensions as "
                         f"input tensor (got index of shape {tuple(index.shape)} and input "
                         f"of shape {tuple(input.shape)})")
    for k in range(x.ndim):
        if k != d and idx.shape[k] > x.shape[k]:
            raise ShapeError(f"gather: expected index {list(index.shape)} to be no larger than "
                             f"self {list(input.shape)} apart from dimension {d}")
    out = apply(_GATHER, x, idx, dim=d)
    return reshape(out, tuple(index.shape)) if index.ndim == 0 else out


def _prep_scatter(op, input, dim, index, src):
    """Check a scatter's arguments; returns (input, dim, index, src) with 0-d lifted and
    src cut down to index's shape."""
    _check_index(op, index, _INT32_64)
    x, idx, s = _lift(input), _lift(index), _lift(src)
    d = wrap_dim(dim, x.ndim, op)
    if not idx.ndim == x.ndim == s.ndim:
        raise ShapeError(f"{op}: index, self and src must have the same number of dimensions "
                         f"(got shapes {tuple(index.shape)}, {tuple(input.shape)} and "
                         f"{tuple(src.shape)})")
    for k in range(x.ndim):
        if idx.shape[k] > s.shape[k] or (k != d and idx.shape[k] > x.shape[k]):
            raise ShapeError(f"{op}: expected index {list(index.shape)} to be no larger than "
                             f"self {list(input.shape)} apart from dimension {d} and no "
                             f"larger than src {list(src.shape)}")
    if s.shape != idx.shape:
        s = s[tuple(slice(0, n) for n in idx.shape)]
    return x, d, idx, s


def _scatter_src(op, input, index, src, value):
    if (src is None) == (value is None):
        raise EmberTypeError(f"{op}: expected exactly one of src (a Tensor) and value "
                             "(a number)")
    if isinstance(src, Tensor):
        _check_same_dtype(op, input, src, "src")
        return src
    v = _fill_value(op, src if value is None else value, input)
    return expand(v, tuple(index.shape)) if isinstance(index, Tensor) else v


_SCATTER_MODES = {None: None, "add": "sum", "multiply": "prod"}  # scatter's reduce names


def scatter(input, dim: int, index, src=None, value=None, *, reduce: str | None = None):
    """A copy of ``input`` with ``src`` (a tensor, or the number ``value``) written at
    ``index`` along ``dim``: for dim=0, ``out[index[i][j]][j] = src[i][j]``. With
    ``reduce='add'`` or ``'multiply'`` the written values are combined with what is there.
    Where ``index`` repeats a position, the last write wins.

    >>> ember.zeros(3).scatter(0, ember.tensor([2, 0]), ember.tensor([5.0, 6.0]))
    tensor([6., 0., 5.])
    """
    s = _scatter_src("scatter", input, index, src, value)
    if reduce not in _SCATTER_MODES:
        raise EmberError(f"scatter: reduce argument must be either add or multiply, got "
                         f"{reduce!r}")
    x, d, index, s = _prep_scatter("scatter", input, dim, index, s)
    if reduce is None:
        out = apply(_SCATTER, x, index, s, dim=d)
    elif reduce == "add":
        out = apply(_SCATTER_ADD, x, index, s, dim=d)
    else:
        out = apply(_SCATTER_REDUCE, x, index, s, dim=d, reduce="prod", include_self=True)
    return _restore(out, input)


def scatter_add(input, dim: int, index, src):
    """A copy of ``input`` with ``src`` added at ``index`` along ``dim`` (repeated
    positions accumulate): for dim=0, ``out[index[i][j]][j] += src[i][j]``.

    >>> ember.zeros(3).scatter_add(0, ember.tensor([2, 2, 0]), ember.tensor([1.0, 2.0, 3.0]))
    tensor([3., 0., 3.])
    """
    _check_same_dtype("scatter_add", input, src, "src")
    x, d, index, s = _prep_scatter("scatter_add", input, dim, index, src)
    return _restore(apply(_SCATTER_ADD, x, index, s, dim=d), input)


# scatter_reduce ------------------------------------------------------------------------
def _scatter_reduce_vjp(n, g):
    a, index, src = n.saved_inputs()
    dim, reduce, include_self = n.params["dim"], n.params["reduce"], n.params["include_self"]
    out = n.output(0)

    def gather_(t):
        return apply(_GATHER, t, index, dim=dim)

    def scatter_(t, s, how, self_too=True):
        return apply(_SCATTER_REDUCE, t, index, s, dim=dim, reduce=how, include_self=self_too)

    def zero_scattered(t):
        return apply(_SCATTER, t, index, expand(t.new_zeros(()), tuple(index.shape)), dim=dim)

    if reduce in ("sum", "mean"):
        if reduce == "mean":
            count = scatter_(g.new_zeros(a.shape) + (1 if include_self else 0),
                             g.new_ones(()).expand(tuple(index.shape)), "sum")
            g = g / where(count == 0, 1.0, count)
        ga, gs = g, gather_(g)
    elif reduce in ("amax", "amin"):
        # the gradient is shared evenly by every element equal to the result
        self_hit = (a == out).to(g.dtype)
        if not include_self:
            self_hit = zero_scattered(self_hit)
        src_hit = (src == gather_(out)).to(g.dtype)
        share = g / scatter_(self_hit, src_hit, "sum")
        ga, gs = self_hit * share, src_hit * gather_(share)
    else:
        ga = g * scatter_(g.new_ones(a.shape), src, "prod")  # product of the others
        # d out / d src_j is out / src_j, or, for the one zero at a position, the product
        # of the rest (there is none to take when a position has several zeros)
        zero = src == 0
        zeros_there = gather_(scatter_(g.new_zeros(a.shape), zero.to(g.dtype), "sum"))
        if grad_mode.is_grad_enabled() and n.edges[2] and bool((zeros_there._data > 1).any()):
            raise EmberError("scatter_reduce: double backward is unsupported for src when "
                             "more than one zero of src is reduced into the same position")
        rest = gather_(g * scatter_(a, where(zero, 1.0, src), "prod", include_self))
        gs = where(zero, where(zeros_there == 1, rest, 0.0),
                   gather_(g * out) / where(zero, 1.0, src))
    if not include_self:
        ga = zero_scattered(ga)
    return (ga if n.edges[0] else None), None, (gs if n.edges[2] else None)


_SCATTER_REDUCE = register(
    "scatter_reduce", lambda xp, a, index, src, dim, reduce, include_self:
    _scatter_write(xp, a.copy(), index, src, dim, reduce, include_self, "scatter_reduce"),
    _scatter_reduce_vjp, saves_outputs=True)


def scatter_reduce(input, dim: int, index, src, reduce: str, *, include_self: bool = True):
    """A copy of ``input`` with the values of ``src`` reduced into it at ``index`` along
    ``dim``: ``reduce`` is ``'sum'``, ``'prod'``, ``'mean'``, ``'amax'`` or ``'amin'``.
    With ``include_self=False`` the values of ``input`` at the written positions are left
    out of the reduction. Integer ``'mean'`` rounds down, as PyTorch does.

    >>> ember.tensor([1.0, 2.0]).scatter_reduce(0, ember.tensor([0, 0]),
    ...                                          ember.tensor([5.0, 3.0]), "amax")
    tensor([5., 2.])
    """
    if reduce not in _UFUNCS:
        raise EmberError(f"scatter_reduce: reduce argument must be one of sum, prod, mean, "
                         f"amax, amin, got {reduce!r}")
    _check_same_dtype("scatter_reduce", input, src, "src")
    x, d, index, s = _prep_scatter("scatter_reduce", input, dim, index, src)
    return _restore(apply(_SCATTER_REDUCE, x, index, s, dim=d, reduce=reduce,
                          include_self=bool(include_self)), input)


# index_select / index_add / index_copy / index_fill ----------------------------------------
def _index_select_forward(xp, a, index, dim):
    _check_range("index_select", index, a.shape[dim], dim)
    return xp.take(a, index, axis=dim)


def _index_select_vjp(n, g):
    index = n.saved_inputs()[1]
    return apply(_INDEX_ADD, g.new_zeros(n.inputs[0].shape), index, g, dim=n.params["dim"],
                 alpha=1), None


def _index_add_vjp(n, g):
    index = n.saved_inputs()[1]
    gs = None
    if n.edges[2]:
        gs = apply(_INDEX_SELECT, g, index, dim=n.params["dim"])
        gs = gs * n.params["alpha"] if n.params["alpha"] != 1 else gs
    return g, None, gs


def _index_copy_vjp(n, g):
    index = n.saved_inputs()[1]
    dim = n.params["dim"]
    ga = apply(_INDEX_FILL, g, index, g.new_zeros(()), dim=dim) if n.edges[0] else None
    gs = apply(_INDEX_SELECT, g, index, dim=dim) if n.edges[2] else None
    return ga, None, gs


def _index_fill_vjp(n, g):
    index = n.saved_inputs()[1]
    kept = apply(_INDEX_FILL, g, index, g.new_zeros(()), dim=n.params["dim"])
    gv = _sum(g - kept) if n.edges[2] else None  # exactly g at the filled positions
    return (kept if n.edges[0] else None), None, gv


def _index_add_forward(xp, a, index, source, dim, alpha):
    if alpha != 1:
        source = source * xp.asarray(alpha, dtype=a.dtype)
    return _index_write(xp, a.copy(), index, source, dim, True, "index_add")


_INDEX_SELECT = register("index_select", _index_select_forward, _index_select_vjp, saves_inputs=(1,))
_INDEX_ADD = register("index_add", _index_add_forward, _index_add_vjp, saves_inputs=(1,))
_INDEX_COPY = register(
    "index_copy", lambda xp, a, index, source, dim:
    _index_write(xp, a.copy(), index, source, dim, False, "index_copy"), _index_copy_vjp,
    saves_inputs=(1,))
_INDEX_FILL = register(
    "index_fill", lambda xp, a, index, value, dim:
    _index_write(xp, a.copy(), index, value, dim, False, "index_fill", negative=True),
    _index_fill_vjp, saves_inputs=(1,))


def _prep_index(op, input, dim, index, allowed):
    _check_index(op, index, allowed)
    if index.ndim > 1:
        raise EmberIndexError(f"{op}: index is supposed to be a vector, got shape "
                              f"{tuple(index.shape)}")
    x = _lift(input)
    return x, wrap_dim(dim, x.ndim, op), _lift(index)


def _prep_source(op, input, dim, index, source):
    """Check an index_add/index_copy: returns (input, dim, index, source), 0-d lifted."""
    x, d, idx = _prep_index(op, input, dim, index, _INT32_64 if op.startswith("index_add")
                            else _INT64)
    _check_same_dtype(op, input, source, "source")
    s = _lift(source)
    want = tuple(x.shape[:d]) + (idx.shape[0],) + tuple(x.shape[d + 1:])
    if tuple(s.shape) != want:
        raise ShapeError(f"{op}: source must have self's shape apart from dimension {d}, "
                         f"where its size is the number of indices ({idx.shape[0]}); got "
                         f"self.shape = {list(input.shape)}, index.shape = "
                         f"{list(index.shape)}, source.shape = {list(source.shape)}")
    return x, d, idx, s


def index_select(input, dim: int, index):
    """The slices of ``input`` at positions ``index`` (a 1-d int32/int64 tensor) along
    ``dim``, in that order (a copy).

    >>> ember.index_select(ember.tensor([[1, 2], [3, 4]]), 0, ember.tensor([1, 1]))
    tensor([[3, 4],
            [3, 4]])
    """
    x, d, idx = _prep_index("index_select", input, dim, index, _INT32_64)
    return _restore(apply(_INDEX_SELECT, x, idx, dim=d), input)


def _alpha(alpha, dtype):
    # an integer tensor takes alpha truncated to its dtype, as PyTorch does
    return alpha if dtype.is_floating_point else np.asarray(alpha).astype(dtype.np).item()


def index_add(input, dim: int, index, source, *, alpha=1):
    """A copy of ``input`` with ``alpha * source`` added at positions ``index`` along
    ``dim`` (repeated indices accumulate). ``source`` has input's shape, except that along
    ``dim`` its size is ``len(index)``.

    >>> ember.zeros(3).index_add(0, ember.tensor([0, 0, 2]), ember.tensor([1.0, 2.0, 3.0]))
    tensor([3., 0., 3.])
    """
    x, d, idx, s = _prep_source("index_add", input, dim, index, source)
    return _restore(apply(_INDEX_ADD, x, idx, s, dim=d, alpha=_alpha(alpha, input.dtype)),
                    input)


def index_copy(input, dim: int, index, source):
    """A copy of ``input`` with the slices of ``source`` written at positions ``index``
    (int64) along ``dim``.

    >>> ember.zeros(3).index_copy(0, ember.tensor([2, 0]), ember.tensor([1.0, 2.0]))
    tensor([2., 0., 1.])
    """
    x, d, idx, s = _prep_source("index_copy", input, dim, index, source)
    return _restore(apply(_INDEX_COPY, x, idx, s, dim=d), input)


def index_fill(input, dim: int, index, value):
    """A copy of ``input`` with the slices at positions ``index`` (int64; negative
    positions count from the end) along ``dim`` set to ``value`` (a number or 0-d tensor).

    >>> ember.zeros(2, 2).index_fill(1, ember.tensor([1]), 5.0)
    tensor([[0., 5.],
            [0., 5.]])
    """
    x, d, idx = _prep_index("index_fill", input, dim, index, _INT64)
    v = _fill_value("index_fill", value, input)
    return _restore(apply(_INDEX_FILL, x, idx, v, dim=d), input)


# In-place variants (Tensor methods) ---------------------------------------------------------
def _xp(t):
    return t.device.backend.xp


def scatter_(self, dim: int, index, src=None, value=None, *, reduce: str | None = None):
    """In-place version of :func:`scatter`."""
    if reduce not in _SCATTER_MODES:
        raise EmberError(f"scatter_: reduce argument must be either add or multiply, got "
                         f"{reduce!r}")
    s = _scatter_src("scatter_", self, index, src, value)
    _, d, idx, s = _prep_scatter("scatter_", self, dim, index, s)
    how = _SCATTER_MODES[reduce]
    return inplace("scatter_", self, lambda x: scatter(x, d, idx, s, reduce=reduce), (s,),
                   lambda arr: _scatter_write(_xp(self), _lift_array(arr), idx._data, s._data,
                                              d, how, True, "scatter_"))


def scatter_add_(self, dim: int, index, src):
    """In-place version of :func:`scatter_add`."""
    _check_same_dtype("scatter_add_", self, src, "src")
    _, d, idx, s = _prep_scatter("scatter_add_", self, dim, index, src)
    return inplace("scatter_add_", self, lambda x: scatter_add(x, d, idx, s), (s,),
                   lambda arr: _scatter_write(_xp(self), _lift_array(arr), idx._data, s._data,
                                              d, "sum", True, "scatter_add_"))


def scatter_reduce_(self, dim: int, index, src, reduce: str, *, include_self: bool = True):
    """In-place version of :func:`scatter_reduce`."""
    return inplace("scatter_reduce_", self, lambda x: scatter_reduce(
        x, dim, index, src, reduce, include_self=include_self), (src,))


def index_add_(self, dim: int, index, source, *, alpha=1):
    """In-place version of :func:`index_add`."""
    _, d, idx, s = _prep_source("index_add_", self, dim, index, source)
    alpha = _alpha(alpha, self.dtype)

    def direct(arr):
        xp = _xp(self)
        src = s._data if alpha == 1 else s._data * xp.asarray(alpha, dtype=arr.dtype)
        _index_write(xp, _lift_array(arr), idx._data, src, d, True, "index_add_")
    return inplace("index_add_", self, lambda x: index_add(x, d, idx, s, alpha=alpha), (s,),
                   direct)


def index_copy_(self, dim: int, index, source):
    """In-place version of :func:`index_copy`."""
    _, d, idx, s = _prep_source("index_copy_", self, dim, index, source)
    return inplace("index_copy_", self, lambda x: index_copy(x, d, idx, s), (s,),
                   lambda arr: _index_write(_xp(self), _lift_array(arr), idx._data, s._data,
                                            d, False, "index_copy_"))


def index_fill_(self, dim: int, index, value):
    """In-place version of :func:`index_fill`."""
    _, d, idx = _prep_index("index_fill_", self, dim, index, _INT64)
    v = _fill_value("index_fill_", value, self)
    return inplace("index_fill_", self, lambda x: index_fill(x, d, idx, v), (v,),
                   lambda arr: _index_write(_xp(self), _lift_array(arr), idx._data, v._data,
                                            d, False, "index_fill_", negative=True))


for _fn in (scatter_, scatter_add_, scatter_reduce_, index_add_, index_copy_, index_fill_):
    setattr(Tensor, _fn.__name__, _fn)


# Masked ops, take and nonzero live in masked.py and take.py; they use the checks above,
# so they are imported here, after them (and exported from here too).
from .masked import masked_fill, masked_scatter, masked_select  # noqa: E402,F401
from .take import argwhere, nonzero, take, take_along_dim, unravel_index  # noqa: E402,F401

# The sorting family builds on gather and take_along_dim above, so it is imported last.
from .sorting import (argsort, bucketize, kthvalue, msort, searchsorted, sort,  # noqa: E402
                      topk, unique, unique_consecutive)
