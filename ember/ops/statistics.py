"""Order statistics and NaN-ignoring reductions: median, nanmedian, mode, nansum,
nanmean.

``median``/``nanmedian``/``mode`` along a dim are primitives returning ``(values,
indices)``; their gradient goes to the position each index names, as for ``max(dim)``.
Without a dim, ``median`` splits its gradient evenly among the elements equal to the
result, as PyTorch does.
"""
from __future__ import annotations

import collections

import numpy as np

from .. import dtypes as dt
from ..errors import EmberIndexError, EmberTypeError
from . import elementwise as ew, logical as lg
from .reduce import _select_infer, _select_vjp, reduce_dims, reduced_shape, sum
from .registry import AbstractValue, apply, register
from .shape import wrap_dim

__all__ = ["median", "nanmedian", "mode", "nansum", "nanmean"]

median_result = collections.namedtuple("median", ["values", "indices"])
nanmedian_result = collections.namedtuple("nanmedian", ["values", "indices"])
mode_result = collections.namedtuple("mode", ["values", "indices"])


def _sortable(xp, a):
    # NumPy sorts the bfloat16 extension type generically and misplaces NaN
    return a.astype(np.float32) if a.dtype.kind == "V" else a


def _median_forward(xp, a, dim, keepdim, ignore_nan):
    """The lower median along ``dim`` and where it came from (a stable sort puts NaN
    last: with NaN in a slice, ``median`` picks its first NaN; ``nanmedian`` picks the
    lower median of the numbers, or the first NaN when there are none)."""
    if a.ndim == 0:
        return a.copy(), xp.zeros((), np.int64)
    keys = _sortable(xp, a)
    order = xp.argsort(keys, axis=dim, kind="stable")
    size = a.shape[dim]
    if ignore_nan:
        count = (~xp.isnan(keys)).sum(axis=dim, keepdims=True) if keys.dtype.kind == "f" \
            else xp.full(reduced_shape(a.shape, (dim,), True), size)
        k = xp.maximum((count - 1) // 2, 0)
    else:
        nan = xp.isnan(keys).any(axis=dim, keepdims=True) if keys.dtype.kind == "f" \
            else xp.zeros(reduced_shape(a.shape, (dim,), True), bool)
        first_nan = (~xp.isnan(keys)).sum(axis=dim, keepdims=True) if keys.dtype.kind == "f" \
            else 0
        k = xp.where(nan, first_nan, (size - 1) // 2)
    idx = xp.take_along_axis(order, xp.asarray(k, dtype=np.int64), axis=dim)
    values = xp.take_along_axis(a, idx, axis=dim)
    if not keepdim:
        idx, values = idx.squeeze(dim), values.squeeze(dim)
    return values, idx.astype(np.int64)


_MEDIAN = register("median", _median_forward, _select_vjp, n_outputs=2, saves_inputs=False,
                   saves_outputs=True,
                   infer=lambda a, dim, keepdim, ignore_nan: _select_infer(a, dim, keepdim))


def _median_all_forward(xp, a, ignore_nan):
    if a.size == 0:
        return xp.full((), np.nan, a.dtype)
    values, _ = _median_forward(xp, a.reshape(-1), 0, False, ignore_nan)
    return values


def _median_all_vjp(n, g):
    """Split evenly among the elements equal to the result (NaN equals a NaN result)."""
    x, = n.saved_inputs()
    out = n.output(0).detach()
    hit = ew.cast(lg.eq(x, out) | (lg.isnan(x) & lg.isnan(out)), x.dtype)
    return g * hit / sum(hit)


_MEDIAN_ALL = register("median_all", _median_all_forward, _median_all_vjp,
                       saves_outputs=True,
                       infer=lambda a, ignore_nan: AbstractValue((), a.dtype))


def _along(name, op, result, input, dim, keepdim, **params):
    d = wrap_dim(dim, input.ndim, name)
    if input.ndim and input.shape[d] == 0:
        raise EmberIndexError(f"{name}(): Expected reduction dim {d} to have non-zero size "
                              f"(input shape {tuple(input.shape)}).")
    return result(*apply(op, input, dim=d, keepdim=bool(keepdim), **params))


def median(input, dim=None, keepdim: bool = False):
    """``median(input)``: the lower median of all elements (NaN if any is NaN).
    ``median(input, dim, keepdim=False)``: a ``(values, indices)`` named tuple of the
    lower medians along ``dim``.

    >>> ember.median(ember.tensor([3.0, 1.0, 4.0, 2.0]))
    tensor(2.)
    >>> ember.tensor([[1.0, 5.0, 3.0]]).median(dim=1)
    median(values=tensor([3.]), indices=tensor([2]))
    """
    if dim is None:
        return apply(_MEDIAN_ALL, input, ignore_nan=False)
    return _along("median", _MEDIAN, median_result, input, dim, keepdim, ignore_nan=False)


def nanmedian(input, dim=None, keepdim: bool = False):
    """:func:`median` ignoring NaN: the lower median of the numbers (NaN where there are
    none).

    >>> ember.nanmedian(ember.tensor([1.0, float("nan"), 3.0, 2.0]))
    tensor(2.)
    """
    if dim is None:
        return apply(_MEDIAN_ALL, input, ignore_nan=True)
    return _along("nanmedian", _MEDIAN, nanmedian_result, input, dim, keepdim,
                  ignore_nan=True)


def _mode_forward(xp, a, dim, keepdim):
    """The most frequent value along ``dim`` (the smallest of equally frequent ones) and
    the last index where it occurs, as PyTorch's CPU kernel gives."""
    if a.ndim == 0:
        return a.copy(), xp.zeros((), np.int64)
    keys = xp.moveaxis(_sortable(xp, a), dim, -1)
    order = xp.argsort(keys, axis=-1, kind="stable")
    s = xp.take_along_axis(keys, order, axis=-1)
    n = s.shape[-1]
    # run lengths: position j starts a run where s[j] != s[j-1]
    starts = xp.ones(s.shape, bool)
    starts[..., 1:] = (s[..., 1:] != s[..., :-1]) & ~(xp.isnan(s[..., 1:]) &
                                                     xp.isnan(s[..., :-1]))
    pos = xp.broadcast_to(xp.arange(n), s.shape)
    run_start = xp.maximum.accumulate(xp.where(starts, pos, 0), axis=-1)
    length = pos - run_start + 1  # length so far of the run ending at j
    best = xp.max(length, axis=-1, keepdims=True)
    # the first run reaching the largest length is the smallest value; its last element
    # (in stable order, the largest original index) is where it ends
    end = xp.argmax(length == best, axis=-1)[..., None]
    idx = xp.take_along_axis(order, end, axis=-1)
    values = xp.take_along_axis(xp.moveaxis(a, dim, -1), idx, axis=-1)
    idx, values = xp.moveaxis(idx, -1, dim), xp.moveaxis(values, -1, dim)
    if not keepdim:
        idx, values = idx.squeeze(dim), values.squeeze(dim)
    # (ascontiguousarray would make a 0-d result 1-d)
    return values.copy(order="C"), idx.astype(np.int64, order="C")


_MODE = register("mode", _mode_forward, _select_vjp, n_outputs=2, saves_inputs=False,
                 saves_outputs=True, infer=_select_infer)


def mode(input, dim: int = -1, keepdim: bool = False):
    """``(values, indices)``: the most frequent value along ``dim`` (the smallest of
    equally frequent ones) and the last index where it occurs.

    >>> ember.mode(ember.tensor([2.0, 1.0, 2.0, 3.0]))
    mode(values=tensor(2.), indices=tensor(2))
    """
    return _along("mode", _MODE, mode_result, input, dim, keepdim)


def nansum(input, dim=None, keepdim: bool = False, *, dtype=None):
    """The sum over ``dim`` treating NaN as zero (integers and bools give int64).

    >>> ember.nansum(ember.tensor([1.0, float("nan"), 2.0]))
    tensor(3.)
    """
    if input.dtype.is_floating_point:
        input = ew.where(lg.isnan(input), 0.0, input)
    return sum(input, dim, keepdim, dtype=dtype)


def nanmean(input, dim=None, keepdim: bool = False, *, dtype=None):
    """The mean over ``dim`` of the elements that are not NaN (NaN where all are).

    >>> ember.nanmean(ember.tensor([1.0, float("nan"), 2.0]))
    tensor(1.5000)
    """
    if not input.dtype.is_floating_point:
        raise EmberTypeError("nanmean(): expected input to have floating point dtype but "
                             f"got {input.dtype.name}")
    if dtype is not None:
        input = ew.cast(input, dt.as_dtype(dtype))
    dims = reduce_dims(input, dim, "nanmean")
    present = lg.logical_not(lg.isnan(input))
    total = sum(ew.where(present, input, 0.0), dims, keepdim)
    return total / sum(present, dims, keepdim)
