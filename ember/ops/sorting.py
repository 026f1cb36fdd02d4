"""Sorting and searching: sort, argsort, msort, topk, kthvalue, unique,
unique_consecutive, searchsorted, bucketize (exported through ``selection.py``).

One primitive sorts (``argsort``, always stable, NaN above every number as in PyTorch);
the values are gathered through the indices, so gradients flow back to the positions
the values came from (gather's VJP scatters them there).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import EmberError, EmberIndexError, ShapeError
from ..tensor import Tensor
from ._promote import promote
from .registry import apply, register
from .selection import _INT64, _check_index, gather, take_along_dim
from .shape import narrow, squeeze, wrap_dim

__all__ = ["sort", "argsort", "msort", "topk", "kthvalue", "unique", "unique_consecutive",
           "searchsorted", "bucketize"]


class SortResult(NamedTuple):
    """What :func:`sort` returns: ``values`` and the ``indices`` they came from."""
    values: Tensor
    indices: Tensor


class TopkResult(NamedTuple):
    """What :func:`topk` returns."""
    values: Tensor
    indices: Tensor


class KthvalueResult(NamedTuple):
    """What :func:`kthvalue` returns."""
    values: Tensor
    indices: Tensor


# sort / argsort / topk / kthvalue -----------------------------------------------------------
def _sortable(a):
    """``a`` in a dtype NumPy sorts natively: its generic sort of the bfloat16 extension
    type misplaces NaN, and float32 holds every bfloat16 value exactly."""
    return a.astype(np.float32) if a.dtype.kind == "V" else a


def _argsort_forward(xp, a, dim, descending):
    if a.ndim == 0:
        return xp.zeros((), np.int64)
    a = _sortable(a)
    if not descending:
        return xp.argsort(a, axis=dim, kind="stable")
    # a stable ascending sort of the reversed array, reversed back, is a stable descending
    # sort that puts NaN first, as PyTorch does
    order = xp.argsort(xp.flip(a, axis=dim), axis=dim, kind="stable")
    return (a.shape[dim] - 1) - xp.flip(order, axis=dim)


_ARGSORT = register("argsort", _argsort_forward, saves_inputs=False)


def argsort(input, dim: int = -1, descending: bool = False, *, stable: bool = False):
    """The indices that sort ``input`` along ``dim`` (int64). The sort is always stable
    (equal elements keep their order); NaN sorts above every number.

    >>> ember.argsort(ember.tensor([3.0, 1.0, 2.0]))
    tensor([1, 2, 0])
    """
    return apply(_ARGSORT, input, dim=wrap_dim(dim, input.ndim, "argsort"),
                 descending=bool(descending))


def sort(input, dim: int = -1, descending: bool = False, *, stable: bool = False) -> SortResult:
    """``(values, indices)``: ``input`` sorted along ``dim`` and where each value came from.
    The sort is always stable; NaN sorts above every number. Gradients flow back to the
    positions the values came from.

    >>> ember.sort(ember.tensor([3.0, 1.0, 2.0]), descending=True).values
    tensor([3., 2., 1.])
    """
    d = wrap_dim(dim, input.ndim, "sort")
    indices = apply(_ARGSORT, input, dim=d, descending=bool(descending))
    return SortResult(gather(input, d, indices), indices)


def msort(input):
    """``input`` sorted along its first dim: ``sort(input, dim=0).values``.

    >>> ember.msort(ember.tensor([[3, 1], [1, 2]]))
    tensor([[1, 1],
            [3, 2]])
    """
    return sort(input, 0).values


def _dim_size(input, dim, op):
    d = wrap_dim(dim, input.ndim, op)
    return d, (input.shape[d] if input.ndim else 1)


def topk(input, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> TopkResult:
    """``(values, indices)`` of the ``k`` largest (or, with ``largest=False``, smallest)
    elements along ``dim``. They always come sorted (``sorted=False`` allows any order);
    NaN counts as larger than every number.

    >>> ember.topk(ember.tensor([1.0, 5.0, 3.0, 4.0]), 2)
    TopkResult(values=tensor([5., 4.]), indices=tensor([1, 3]))
    """
    d, size = _dim_size(input, dim, "topk")
    if not 0 <= k <= size:
        raise EmberIndexError(f"topk: k ({k}) is out of range for dimension {d} with size {size}")
    order = apply(_ARGSORT, input, dim=d, descending=bool(largest))
    indices = narrow(order, d, 0, k) if input.ndim else order
    return TopkResult(gather(input, d, indices), indices)


def kthvalue(input, k: int, dim: int = -1, keepdim: bool = False) -> KthvalueResult:
    """``(values, indices)`` of the ``k``-th smallest element (counting from 1) along
    ``dim``; ``keepdim`` keeps ``dim`` with size 1.

    >>> ember.kthvalue(ember.tensor([5.0, 1.0, 4.0]), 2)
    KthvalueResult(values=tensor(4.), indices=tensor(2))
    """
    d, size = _dim_size(input, dim, "kthvalue")
    if not 1 <= k <= size:
        raise EmberIndexError(f"kthvalue: selected number k ({k}) is out of range for "
                              f"dimension {d} with size {size}")
    order = apply(_ARGSORT, input, dim=d, descending=False)
    if not input.ndim:
        return KthvalueResult(gather(input, d, order), order)
    indices = narrow(order, d, k - 1, 1)
    values = gather(input, d, indices)
    if not keepdim:
        values, indices = squeeze(values, d), squeeze(indices, d)
    return KthvalueResult(values, indices)


# unique / unique_consecutive ------------------------------------------------------------------
def _unique_forward(xp, a, dim):
    keys = _sortable(a)
    if dim is None:
        values, inverse, counts = xp.unique(keys.reshape(-1), return_inverse=True,
                                            return_counts=True, equal_nan=False)
        inverse = inverse.reshape(a.shape)
    else:
        values, inverse, counts = xp.unique(keys, return_inverse=True, return_counts=True,
                                            axis=dim, equal_nan=False)
        inverse = inverse.reshape(-1)
    return (values.astype(a.dtype, copy=False), inverse.astype(np.int64, copy=False),
            counts.astype(np.int64, copy=False))


def _unique_consecutive_forward(xp, a, dim):
    moved = a.reshape(-1) if dim is None else xp.moveaxis(a, dim, 0)
    n = moved.shape[0]
    rows = moved.reshape(n, int(np.prod(moved.shape[1:], dtype=np.int64)))
    starts = xp.ones(n, dtype=bool)
    starts[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    values = moved[starts]
    if dim is not None:
        values = xp.moveaxis(values, 0, dim)
    inverse = xp.cumsum(starts, dtype=np.int64) - 1
    first = xp.flatnonzero(starts)
    counts = xp.diff(xp.concatenate([first, xp.asarray([n])])).astype(np.int64)
    return values, inverse.reshape(a.shape if dim is None else -1), counts


_UNIQUE = register("unique", _unique_forward, n_outputs=3, dynamic_shape=True,
                   saves_inputs=False)
_UNIQUE_CONSECUTIVE = register("unique_consecutive", _unique_consecutive_forward, n_outputs=3,
                               dynamic_shape=True, saves_inputs=False)


def _unique_result(outs, return_inverse, return_counts):
    values, inverse, counts = outs
    if not (return_inverse or return_counts):
        return values
    return (values,) + ((inverse,) if return_inverse else ()) + \
        ((counts,) if return_counts else ())


def _unique_dim(input, dim, op):
    if dim is None:
        return None
    if input.ndim == 0:
        raise EmberIndexError(f"{op}: dimension specified as {dim} but tensor has no "
                              "dimensions")
    return wrap_dim(dim, input.ndim, op)


def unique(input, sorted: bool = True, return_inverse: bool = False,
           return_counts: bool = False, dim: int | None = None):
    """The distinct elements of ``input`` (flattened), or its distinct slices along
    ``dim``, in ascending order; optionally also ``inverse`` (where each element went:
    ``values[inverse]`` rebuilds ``input``) and ``counts``. The result is always sorted
    (``sorted=False`` allows any order). Each NaN is distinct. Not differentiable.

    >>> ember.unique(ember.tensor([3, 1, 3, 2]), return_counts=True)
    (tensor([1, 2, 3]), tensor([1, 1, 2]))
    """
    d = _unique_dim(input, dim, "unique")
    return _unique_result(apply(_UNIQUE, input, dim=d), return_inverse, return_counts)


def unique_consecutive(input, return_inverse: bool = False, return_counts: bool = False,
                       dim: int | None = None):
    """Like :func:`unique`, but only collapses runs of equal consecutive elements (or
    slices along ``dim``), keeping their order.

    >>> ember.unique_consecutive(ember.tensor([1, 1, 2, 2, 1]))
    tensor([1, 2, 1])
    """
    d = _unique_dim(input, dim, "unique_consecutive")
    return _unique_result(apply(_UNIQUE_CONSECUTIVE, input, dim=d), return_inverse,
                          return_counts)


# searchsorted / bucketize -------------------------------------------------------------------
def _binary_search_nan(xp, seq, values, side):
    """PyTorch's binary search, whose comparisons are false for NaN: a NaN value lands at
    the end, and a NaN in the sequence sends the search right (NumPy instead sorts NaN
    last). Vectorised over the values; only called when a NaN is present."""
    n = seq.shape[-1]
    if n == 0:
        return xp.zeros(values.shape, np.int64)
    rows = seq.reshape(-1, n)
    vals = values.reshape(rows.shape[0] if seq.ndim > 1 else 1, -1)
    lo = xp.zeros(vals.shape, np.int64)
    hi = xp.full(vals.shape, n, np.int64)
    which = xp.arange(rows.shape[0])[:, None] if seq.ndim > 1 else 0
    for _ in range(max(n, 1).bit_length() + 1):
        active = lo < hi
        mid = (lo + hi) >> 1
        probe = rows[which, xp.minimum(mid, n - 1)]
        right_of = ~(probe > vals) if side == "right" else ~(probe >= vals)
        lo = xp.where(active & right_of, mid + 1, lo)
        hi = xp.where(active & ~right_of, mid, hi)
    return lo.reshape(values.shape)


def _searchsorted_forward(xp, seq, values, side, out_int32):
    seq, values = _sortable(seq), _sortable(values)
    if seq.dtype.kind == "f" and (xp.isnan(seq).any() or xp.isnan(values).any()):
        out = _binary_search_nan(xp, seq, values, side)
    elif seq.ndim == 1:
        out = xp.searchsorted(seq, values, side=side)
    else:
        n = int(np.prod(seq.shape[:-1], dtype=np.int64))  # rows; values has the same leading dims
        rows, vals = seq.reshape(n, seq.shape[-1]), values.reshape(n, values.shape[-1])
        out = xp.empty(vals.shape, np.int64)
        for r in range(rows.shape[0]):
            out[r] = xp.searchsorted(rows[r], vals[r], side=side)
        out = out.reshape(values.shape)
    return xp.asarray(out).astype(np.int32 if out_int32 else np.int64, copy=False)


_SEARCHSORTED = register("searchsorted", _searchsorted_forward, saves_inputs=False)


def searchsorted(sorted_sequence, input, *, out_int32: bool = False, right: bool = False,
                 side: str | None = None, sorter=None):
    """Where each value of ``input`` (a tensor or a number) would be inserted into
    ``sorted_sequence`` (sorted along its last dim) to keep it sorted: the first such
    position, or with ``right=True`` (or ``side='right'``) the last. An N-d sequence
    searches the rows matching ``input``'s leading dims. ``sorter`` (int64) gives the
    order that sorts an unsorted sequence.

    >>> ember.searchsorted(ember.tensor([1, 3, 5, 7]), ember.tensor([3, 6]))
    tensor([1, 3])
    """
    if side is not None:
        if side not in ("left", "right"):
            raise EmberError(f"searchsorted: side can only be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise EmberError("searchsorted: side and right can't be set to opposites, got "
                             "side of left while right was True")
        right = side == "right"
    if not isinstance(sorted_sequence, Tensor) or sorted_sequence.ndim == 0:
        raise ShapeError("searchsorted: sorted_sequence must be a tensor of at least 1 "
                         "dimension")
    if sorter is not None:
        _check_index("searchsorted", sorter, _INT64, "sorter")
        if tuple(sorter.shape) != tuple(sorted_sequence.shape):
            raise ShapeError(f"searchsorted: sorter must have the shape of sorted_sequence "
                             f"{tuple(sorted_sequence.shape)}, got {tuple(sorter.shape)}")
        sorted_sequence = take_along_dim(sorted_sequence, sorter, -1)
    seq, values = promote("searchsorted", (sorted_sequence, input))[0]
    if seq.ndim > 1 and tuple(seq.shape[:-1]) != tuple(values.shape[:-1]):
        raise ShapeError(f"searchsorted: sorted_sequence should be 1-d or have the leading "
                         f"dims of input: got shapes {tuple(seq.shape)} and "
                         f"{tuple(values.shape)}")
    return apply(_SEARCHSORTED, seq, values, side="right" if right else "left",
                 out_int32=bool(out_int32))


def bucketize(input, boundaries, *, out_int32: bool = False, right: bool = False):
    """The bucket of each value of ``input`` given the sorted 1-d ``boundaries``: ``i``
    such that ``boundaries[i-1] < x <= boundaries[i]`` (with ``right=True``,
    ``boundaries[i-1] <= x < boundaries[i]``).

    >>> ember.bucketize(ember.tensor([1, 5, 9]), ember.tensor([1, 3, 5, 7]))
    tensor([0, 2, 4])
    """
    if not isinstance(boundaries, Tensor) or boundaries.ndim != 1:
        got = boundaries.ndim if isinstance(boundaries, Tensor) else type(boundaries).__name__
        raise ShapeError(f"bucketize: boundaries must be a 1-d tensor, got {got} dims")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)
