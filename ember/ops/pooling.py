"""Pooling: max_pool, avg_pool, adaptive pooling (interpolate: ``interpolate.py``).

Pooling windows are boxes, so a window's max or sum is taken one spatial axis at a
time (separably): along each axis the ``k`` taps are strided views of the input, and a
few whole-array NumPy operations per tap replace any loop over pixels (max pooling
without padding instead visits each tap of the box once, which carries no winner between
axes and is faster for small kernels). Max pooling keeps, per output, the flat index of
its winner in the input plane (PyTorch's ``return_indices``); its gradient scatters
through those indices and the gradient of that scatter gathers through them. Average
pooling's gradient spreads evenly over each window, the adjoint of the window sum, whose
gradient is the window sum again.

Adaptive average pooling is a linear map along each axis, applied as a matmul by a
small (output, input) matrix, and differentiates through existing ops.
"""
from __future__ import annotations

import itertools
import math
import numbers

import numpy as np

from .. import dtypes as dt
from ..autograd import grad_mode
from ..errors import EmberError, EmberTypeError, ShapeError
from ..tensor import Tensor
from . import pool_kernels
from .conv import check_input_rank, compute_dtype, ntuple
from .registry import AbstractValue, apply, register
from .shape import squeeze, unsqueeze

__all__ = ["max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d",
           "avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
           "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d"]

_F32 = np.dtype(np.float32)


def _lowest(dtype):
    return -np.inf if dtype.kind in "fV" else np.iinfo(dtype).min


def _on_axis(ndim: int, axis: int, index) -> tuple:
    return (slice(None),) * axis + (index,) + (slice(None),) * (ndim - axis - 1)


def _along(arr, axis: int, ndim: int):
    """A 1-D array shaped to broadcast along ``axis`` of an ``ndim``-dim array."""
    return arr.reshape((1,) * axis + (-1,) + (1,) * (ndim - axis - 1))


# Window geometry per axis ------------------------------------------------------------------
class _Regular:
    """Windows ``[o*stride - pad, ... + dilation*(kernel-1)]`` over an axis padded by
    ``pad`` below and ``hi`` above (enough for every window)."""

    def __init__(self, size, kernel, stride, dilation, pad, out):
        self.size, self.kernel, self.stride, self.dilation = size, kernel, stride, dilation
        self.pad, self.out = pad, out
        self.hi = max(pad, (out - 1) * stride + dilation * (kernel - 1) + 1 - size - pad)
        self.taps = kernel

    def tap(self, xp, v, axis, k):
        start = k * self.dilation
        return v[_on_axis(v.ndim, axis, slice(start, start + self.stride * (self.out - 1) + 1,
                                             self.stride))]

    def positions(self, xp, choice, axis):
        """Input positions (int64) of the chosen taps. A window whose real elements are
        all the lowest value ties with its padding; PyTorch then names its first real
        element, and so does this."""
        starts = np.arange(self.out) * self.stride - self.pad
        pos = xp.multiply(choice, self.dilation, dtype=np.int64)
        pos += _along(xp.asarray(starts), axis, choice.ndim)
        if self.pad:
            first = starts + -(-np.maximum(-starts, 0) // self.dilation) * self.dilation
            xp.maximum(pos, _along(xp.asarray(first), axis, choice.ndim), out=pos)
        return pos


class _Adaptive:
    """PyTorch's adaptive windows: ``[floor(o*size/out), ceil((o+1)*size/out))``."""

    def __init__(self, size, out):
        self.size, self.out, self.pad, self.hi = size, out, 0, 0
        starts, ends = _adaptive_bounds(size, out)
        self.taps = int((ends - starts).max())
        # tap k of window o reads min(start + k, end - 1): repeats never win a tie
        self.index = np.minimum(starts[:, None] + np.arange(self.taps), ends[:, None] - 1)

    def tap(self, xp, v, axis, k):
        return xp.take(v, xp.asarray(self.index[:, k]), axis=axis)

    def positions(self, xp, choice, axis):
        rows = _along(xp.arange(self.out), axis, choice.ndim)
        return xp.asarray(self.index)[rows, choice.astype(np.int64)]


def _adaptive_bounds(size: int, out: int):
    o = np.arange(out)
    return (o * size) // out, -((-(o + 1) * size) // out)


def _pad_spatial(xp, x, axes_plans, fill):
    if not any(p.pad or p.hi for p in axes_plans):
        return x
    shape = x.shape[:2] + tuple(p.size + p.pad + p.hi for p in axes_plans)
    out = xp.full(shape, fill, dtype=x.dtype)
    inner = tuple(slice(p.pad, p.pad + p.size) for p in axes_plans)
    out[(slice(None), slice(None)) + inner] = x
    return out


# Max pooling -------------------------------------------------------------------------------
def _window_max(xp, x, plans, with_indices, nan_aware=False):
    """Max over each window, one axis at a time from the last; with the flat index of
    the winner in its input plane. Ties go to the first element in row-major order and
    NaN wins (the last NaN), as in PyTorch.

    Only plain ufuncs run over the data (masked copies are several times slower): the
    winning tap per axis is the last tap that beat the running max, kept as a small
    unsigned integer and carried through the later axes by arithmetic selection."""
    v = _pad_spatial(xp, x, plans, _lowest(x.dtype))
    tap_dtype = np.uint8 if max(p.taps for p in plans) < 256 else np.uint32
    choices = []  # the winning tap of each axis done so far, shaped like v
    for axis in range(v.ndim - 1, 1, -1):
        plan = plans[axis - 2]
        best = plan.tap(xp, v, axis, 0).copy()
        choice = xp.zeros(best.shape, dtype=tap_dtype) if with_indices else None
        for k in range(1, plan.taps):
            cand = plan.tap(xp, v, axis, k)
            if with_indices:
                # NumPy compares strided operands several times slower than it copies them
                cand = xp.ascontiguousarray(cand)
                better = cand > best
                if nan_aware:
                    better |= xp.isnan(cand)
                xp.maximum(choice, better.astype(tap_dtype) * tap_dtype(k), out=choice)
            xp.maximum(best, cand, out=best)  # propagates NaN, as PyTorch's max does
        if with_indices:
            choices = [_select_taps(xp, plan, c, axis, choice) for c in choices] + [choice]
        v = best
    if not with_indices:
        return v
    if not nan_aware and v.dtype.kind in "fV" and xp.isnan(v).any():
        return _window_max(xp, x, plans, True, nan_aware=True)
    index, plane = None, 1
    for axis, choice in zip(range(v.ndim - 1, 1, -1), choices):
        plan = plans[axis - 2]
        term = plan.positions(xp, choice, axis)
        if plane != 1:
            term *= plane
        index = term if index is None else xp.add(index, term, out=index)
        plane *= plan.size
    return v, index


def _select_taps(xp, plan, values, axis, choice):
    """``values`` (shaped like the input of this axis's stage) at the chosen taps; the
    unsigned arithmetic wraps around but the selected result is exact."""
    first = plan.tap(xp, values, axis, 0)
    out = first.copy()
    for k in range(1, plan.taps):
        out += (choice == k).astype(values.dtype) * (plan.tap(xp, values, axis, k) - first)
    return out


def _regular_plans(shape, kernel, stride, dilation, padding, out_size):
    return [_Regular(s, k, st, d, p, o) for s, k, st, d, p, o in
            zip(shape, kernel, stride, dilation, padding, out_size)]


def _unpadded_window_max(xp, x, plans):
    """``_window_max`` with indices for windows inside the input (no padding), taking
    every tap of the window box in turn, so nothing is carried between axes; None where
    a NaN won (the separable path handles NaN's ordering)."""
    taps = list(itertools.product(*(range(p.kernel) for p in plans)))
    tap_dtype = np.uint8 if len(taps) < 256 else np.uint32

    def tap(offsets):
        return x[(Ellipsis,) + tuple(slice(o * p.dilation, o * p.dilation
                                           + p.stride * (p.out - 1) + 1, p.stride)
                                     for o, p in zip(offsets, plans))]
    best = tap(taps[0]).copy()
    choice = xp.zeros(best.shape, dtype=tap_dtype)
    for k, offsets in enumerate(taps[1:], 1):
        cand = xp.ascontiguousarray(tap(offsets))
        # the last tap to beat the running max is the first maximum (copyto with where
        # is slow for small integers)
        xp.maximum(choice, (cand > best).astype(tap_dtype) * tap_dtype(k), out=choice)
        xp.maximum(best, cand, out=best)
    if best.dtype.kind in "fV" and xp.isnan(best).any():
        return None
    # flat plane index = window origin + the chosen tap's offset
    plane_strides = [math.prod(p.size for p in plans[d + 1:]) for d in range(len(plans))]
    offset = np.array([sum(o * p.dilation * st for o, p, st in zip(offsets, plans,
                                                                    plane_strides))
                       for offsets in taps], dtype=np.int64)
    index = xp.take(xp.asarray(offset), choice)
    for d, (p, st) in enumerate(zip(plans, plane_strides)):
        index += _along(xp.arange(p.out, dtype=np.int64) * (p.stride * st), d + 2, index.ndim)
    return best, index


def _max_pool_forward(xp, x, kernel, stride, dilation, padding, out_size, overlaps):
    if xp is np:  # 2-D float planes: one C loop (ops/pool_kernels.py)
        done = pool_kernels.max_pool2d(x, kernel, stride, dilation, padding, out_size)
        if done is not None:
            return done
    plans = _regular_plans(x.shape[2:], kernel, stride, dilation, padding, out_size)
    if not any(p.pad or p.hi for p in plans):
        result = _unpadded_window_max(xp, x, plans)
        if result is not None:
            return result
    return _window_max(xp, x, plans, True)


def _max_pool_values_forward(xp, x, kernel, stride, dilation, padding, out_size, overlaps):
    if xp is np and len(kernel) == 2:  # the usual 2 x 2 window: one C pass
        done = pool_kernels.max_pool2d_values(x, kernel, stride, dilation, padding, out_size)
        if done is not None:
            return done
    plans = _regular_plans(x.shape[2:], kernel, stride, dilation, padding, out_size)
    return _window_max(xp, x, plans, False)


def _adaptive_max_pool_forward(xp, x, out_size, overlaps):
    return _window_max(xp, x, [_Adaptive(s, o) for s, o in zip(x.shape[2:], out_size)], True)


def _max_unpool_forward(xp, g, index, size, overlaps):
    """Scatter ``g`` into zeros of spatial ``size`` at the flat plane positions ``index``."""
    if xp is np:
        done = pool_kernels.max_unpool2d(g, index, size)
        if done is not None:
            return done
    n, c = g.shape[:2]
    plane = math.prod(size)
    if index.size and (int(index.max()) >= plane or int(index.min()) < 0):
        # a window entirely in the padding (its max is -inf, at no input position): no
        # input gets its gradient
        inside = (index >= 0) & (index < plane)
        g, index = xp.where(inside, g, 0), xp.where(inside, index, 0)
    per_plane = math.prod(index.shape[2:])
    where = (index.reshape(n * c, per_plane) + xp.arange(n * c)[:, None] * plane).reshape(-1)
    if overlaps:  # a position may win several windows: accumulate
        summed = xp.bincount(where, weights=g.reshape(-1).astype(np.float64),
                             minlength=n * c * plane)
        return summed.astype(g.dtype).reshape((n, c) + tuple(size))
    out = xp.zeros(n * c * plane, dtype=g.dtype)
    out[where] = g.reshape(-1)
    return out.reshape((n, c) + tuple(size))


def _max_pool_vjp(n, grads):
    return apply(_MAX_UNPOOL, grads[0], n.output(1), size=tuple(n.inputs[0].shape[2:]),
                 overlaps=n.params["overlaps"])


def _max_unpool_vjp(n, u):
    from .selection import gather
    index = n.saved_inputs()[1]
    lead = tuple(index.shape[:2])
    picked = gather(u.reshape(lead + (math.prod(u.shape[2:]),)), 2,
                    index.reshape(lead + (math.prod(index.shape[2:]),)))
    return picked.reshape(tuple(index.shape)), None


def _pool_infer(x, out_size, **p):
    shape = tuple(x.shape[:2]) + tuple(out_size)
    return AbstractValue(shape, x.dtype), AbstractValue(shape, dt.int64)


_MAX_POOL = register("max_pool", _max_pool_forward, _max_pool_vjp, n_outputs=2,
                     saves_inputs=False, saves_outputs=True, infer=_pool_infer)
_MAX_POOL_VALUES = register(
    "max_pool_values", _max_pool_values_forward,
    infer=lambda x, out_size, **p: AbstractValue(tuple(x.shape[:2]) + tuple(out_size), x.dtype))
_ADAPTIVE_MAX_POOL = register("adaptive_max_pool", _adaptive_max_pool_forward, _max_pool_vjp,
                              n_outputs=2, saves_inputs=False, saves_outputs=True,
                              infer=_pool_infer)
_MAX_UNPOOL = register("max_pool_backward", _max_unpool_forward, _max_unpool_vjp,
                       saves_inputs=(1,),
                       infer=lambda g, i, size, overlaps: AbstractValue(
                           tuple(g.shape[:2]) + tuple(size), g.dtype))


# Argument checking -------------------------------------------------------------------------
def _check_pool_input(name, input, d):
    batched = check_input_rank(name, input, d)
    if input.dtype is dt.bool:
        raise EmberTypeError(f"{name}: bool tensors are not supported")
    if any(s == 0 for s in input.shape[1:]):
        raise ShapeError(f"{name}: expected non-empty channel and spatial dims, got shape "
                         f"{tuple(input.shape)}")
    return batched, (input if batched else unsqueeze(input, 0))


def _pool_args(name, d, kernel_size, stride, padding, dilation):
    kernel = ntuple(name, "kernel_size", kernel_size, d)
    stride = kernel if stride is None or (isinstance(stride, (tuple, list)) and
                                          not stride) else ntuple(name, "stride", stride, d)
    pads = ntuple(name, "padding", padding, d)
    dilation = ntuple(name, "dilation", dilation, d)
    for what, values in (("kernel_size", kernel), ("stride", stride), ("dilation", dilation)):
        if any(v <= 0 for v in values):
            raise EmberError(f"{name}: {what} must be positive, got {values}")
    if any(p < 0 or p > k // 2 for p, k in zip(pads, kernel)):
        raise EmberError(f"{name}: padding should be at most half of the kernel size, got "
                         f"padding {pads} and kernel_size {kernel}")
    return kernel, stride, pads, dilation


def _pool_output_size(name, spatial, kernel, stride, pads, dilation, ceil_mode):
    out = []
    for s, k, st, p, dl in zip(spatial, kernel, stride, pads, dilation):
        span = s + 2 * p - dl * (k - 1) - 1
        o = (span + (st - 1 if ceil_mode else 0)) // st + 1
        if ceil_mode and (o - 1) * st >= s + p:  # the last window must start inside
            o -= 1
        out.append(o)
    if any(o <= 0 for o in out):
        raise ShapeError(f"{name}: input of spatial size {tuple(spatial)} is too small for "
                         f"kernel_size {kernel} (dilation {dilation}, padding {pads}); the "
                         f"output size would be {tuple(out)}")
    return tuple(out)


def _finish(out, batched):
    if isinstance(out, tuple):
        return tuple(o if batched else squeeze(o, 0) for o in out)
    return out if batched else squeeze(out, 0)


def _max_poolnd(name, d, input, kernel_size, stride, padding, dilation, ceil_mode,
                return_indices):
    batched, x = _check_pool_input(name, input, d)
    kernel, stride, pads, dilation = _pool_args(name, d, kernel_size, stride, padding,
                                                dilation)
    out_size = _pool_output_size(name, tuple(x.shape[2:]), kernel, stride, pads, dilation,
                                 ceil_mode)
    overlaps = any(dl * (k - 1) + 1 > s for k, s, dl in zip(kernel, stride, dilation))
    params = dict(kernel=kernel, stride=stride, dilation=dilation, padding=pads,
                  out_size=out_size, overlaps=overlaps)
    if return_indices or (x.requires_grad and grad_mode.is_grad_enabled()):
        values, indices = apply(_MAX_POOL, x, **params)
        return _finish((values, indices) if return_indices else values, batched)
    return _finish(apply(_MAX_POOL_VALUES, x, **params), batched)


def max_pool1d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """1-D max pooling over ``(N, C, L)`` (or ``(C, L)``); see :func:`max_pool2d`.

    >>> F.max_pool1d(ember.tensor([[[1., 3., 2., 5.]]]), 2)
    tensor([[[3., 5.]]])
    """
    return _max_poolnd("max_pool1d", 1, input, kernel_size, stride, padding, dilation,
                       ceil_mode, return_indices)


def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """2-D max pooling over ``(N, C, H, W)`` (or ``(C, H, W)``).

    Args:
        kernel_size, stride, padding, dilation: an int or a pair; ``stride`` defaults to
            ``kernel_size``; padding (implicitly ``-inf``) is at most half the kernel.
        ceil_mode: round the output size up, so windows may hang over the end.
        return_indices: also return, per output, the flat index of the maximum within
            its input plane (``h * W + w``), as ``max_unpool2d`` expects.

    >>> F.max_pool2d(ember.arange(16.).reshape(1, 1, 4, 4), 2)
    tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    """
    return _max_poolnd("max_pool2d", 2, input, kernel_size, stride, padding, dilation,
                       ceil_mode, return_indices)


def max_pool3d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """3-D max pooling over ``(N, C, D, H, W)`` (or unbatched); see :func:`max_pool2d`.

    >>> F.max_pool3d(ember.randn(1, 2, 4, 4, 4), 2).shape
    ember.Size([1, 2, 2, 2, 2])
    """
    return _max_poolnd("max_pool3d", 3, input, kernel_size, stride, padding, dilation,
                       ceil_mode, return_indices)


def _adaptive_sizes(name, d, output_size, spatial):
    if isinstance(output_size, (int, np.integer)) or output_size is None:
        output_size = (output_size,) * d
    if not isinstance(output_size, (tuple, list)) or len(output_size) != d:
        raise EmberError(f"{name}: expected output_size to be an int or a tuple of {d} ints "
                         f"(None keeps an input size), got {output_size!r}")
    sizes = tuple(s if o is None else o for o, s in zip(output_size, spatial))
    if any(not isinstance(o, (int, np.integer)) or o <= 0 for o in sizes):
        raise EmberError(f"{name}: output_size must be positive, got {tuple(output_size)}")
    return tuple(int(o) for o in sizes)


def _adaptive_max_poolnd(name, d, input, output_size, return_indices):
    batched, x = _check_pool_input(name, input, d)
    if not x.dtype.is_floating_point:
        raise EmberTypeError(f"{name}: expected a floating-point input, got "
                             f"{x.dtype.name}")
    out_size = _adaptive_sizes(name, d, output_size, tuple(x.shape[2:]))
    overlaps = any(s % o for s, o in zip(x.shape[2:], out_size))
    values, indices = apply(_ADAPTIVE_MAX_POOL, x, out_size=out_size, overlaps=overlaps)
    return _finish((values, indices) if return_indices else values, batched)


def adaptive_max_pool1d(input: Tensor, output_size, return_indices: bool = False):
    """1-D adaptive max pooling: ``output_size`` windows of near-equal length cover the
    input, as in :func:`adaptive_max_pool2d`.

    >>> F.adaptive_max_pool1d(ember.tensor([[[1., 3., 2., 5., 4.]]]), 2)
    tensor([[[3., 5.]]])
    """
    return _adaptive_max_poolnd("adaptive_max_pool1d", 1, input, output_size, return_indices)


def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False):
    """2-D adaptive max pooling to ``output_size`` (an int or a pair; None keeps that
    input size). Window ``o`` along an axis of size ``S`` spans
    ``[floor(o*S/out), ceil((o+1)*S/out))``. ``return_indices`` as in :func:`max_pool2d`.

    >>> F.adaptive_max_pool2d(ember.randn(2, 3, 7, 9), (2, 3)).shape
    ember.Size([2, 3, 2, 3])
    """
    return _adaptive_max_poolnd("adaptive_max_pool2d", 2, input, output_size,
                                return_indices)


# Average pooling ---------------------------------------------------------------------------
def _window_sum(xp, x, plans):
    v = _pad_spatial(xp, x, plans, 0)
    for axis in range(2, v.ndim):
        plan = plans[axis - 2]
        acc = plan.tap(xp, v, axis, 0).copy()
        for k in range(1, plan.taps):
            acc += plan.tap(xp, v, axis, k)
        v = acc
    return v


def _window_sum_adjoint(xp, g, plans):
    """Each output's value added back over its window (the adjoint of _window_sum)."""
    v = g
    for axis in range(v.ndim - 1, 1, -1):
        plan = plans[axis - 2]
        shape = list(v.shape)
        shape[axis] = plan.size + plan.pad + plan.hi
        acc = xp.zeros(shape, dtype=v.dtype)
        for k in range(plan.taps):
            plan.tap(xp, acc, axis, k)[...] += v
        v = acc[_on_axis(acc.ndim, axis, slice(plan.pad, plan.pad + plan.size))]
    return xp.ascontiguousarray(v)


def _divisor(xp, plans, count_include_pad, divisor_override, dtype):
    if divisor_override:
        return dtype.type(divisor_override)
    div = None
    for axis, plan in enumerate(plans):
        starts = np.arange(plan.out) * plan.stride - plan.pad
        ends = np.minimum(starts + plan.kernel, plan.size + plan.pad)
        if not count_include_pad:
            starts, ends = np.maximum(starts, 0), np.minimum(ends, plan.size)
        count = _along(ends - starts, axis, len(plans))
        div = count if div is None else div * count
    return xp.asarray(div.astype(dtype))


def _avg_plans(shape, kernel, stride, padding, out_size):
    return _regular_plans(shape, kernel, stride, (1,) * len(shape), padding, out_size)


def _divide(xp, total, div):
    if total.dtype.kind in "iu":  # integer average: truncate towards zero, as PyTorch
        return xp.sign(total) * (xp.abs(total) // div)
    return total / div


def _avg_pool_forward(xp, x, kernel, stride, padding, out_size, count_include_pad,
                      divisor_override):
    plans = _avg_plans(x.shape[2:], kernel, stride, padding, out_size)
    work = compute_dtype(x)
    total = _window_sum(xp, x.astype(work, copy=False), plans)
    div = _divisor(xp, plans, count_include_pad, divisor_override,
                   np.dtype(np.int64) if work.kind in "iu" else work)
    return _divide(xp, total, div).astype(x.dtype, copy=False)


def _avg_pool_backward_forward(xp, g, size, kernel, stride, padding, out_size,
                               count_include_pad, divisor_override):
    plans = _avg_plans(size, kernel, stride, padding, out_size)
    work = compute_dtype(g)
    div = _divisor(xp, plans, count_include_pad, divisor_override, work)
    spread = _window_sum_adjoint(xp, g.astype(work, copy=False) / div, plans)
    return spread.astype(g.dtype, copy=False)


def _avg_pool_vjp(n, g):
    return apply(_AVG_POOL_BACKWARD, g, size=tuple(n.inputs[0].shape[2:]), **n.params)


def _avg_pool_backward_vjp(n, u):
    p = dict(n.params)
    del p["size"]
    return apply(_AVG_POOL, u, **p)


_AVG_POOL = register(
    "avg_pool", _avg_pool_forward, _avg_pool_vjp, saves_inputs=False,
    infer=lambda x, out_size, **p: AbstractValue(tuple(x.shape[:2]) + tuple(out_size),
                                                 x.dtype))
_AVG_POOL_BACKWARD = register(
    "avg_pool_backward", _avg_pool_backward_forward, _avg_pool_backward_vjp,
    saves_inputs=False,
    infer=lambda g, size, **p: AbstractValue(tuple(g.shape[:2]) + tuple(size), g.dtype))


def _avg_poolnd(name, d, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                divisor_override):
    batched, x = _check_pool_input(name, input, d)
    if not x.dtype.is_floating_point and x.dtype is not dt.int64:
        raise EmberTypeError(f"{name}: expected a floating-point or int64 input, got "
                             f"{x.dtype.name}")
    kernel, stride, pads, _ = _pool_args(name, d, kernel_size, stride, padding, 1)
    if divisor_override is not None and (not isinstance(divisor_override, numbers.Integral)
                                         or divisor_override == 0):
        raise EmberError(f"{name}: divisor_override must be a non-zero integer, got "
                         f"{divisor_override!r}")
    out_size = _pool_output_size(name, tuple(x.shape[2:]), kernel, stride, pads, (1,) * d,
                                 ceil_mode)
    out = apply(_AVG_POOL, x, kernel=kernel, stride=stride, padding=pads, out_size=out_size,
                count_include_pad=bool(count_include_pad),
                divisor_override=None if divisor_override is None else int(divisor_override))
    return _finish(out, batched)


def avg_pool1d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """1-D average pooling over ``(N, C, L)`` (or ``(C, L)``); see :func:`avg_pool2d`.

    >>> F.avg_pool1d(ember.tensor([[[1., 3., 2., 6.]]]), 2)
    tensor([[[2., 4.]]])
    """
    return _avg_poolnd("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode,
                       count_include_pad, None)


def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """2-D average pooling over ``(N, C, H, W)`` (or ``(C, H, W)``).

    Args:
        kernel_size, stride, padding: an int or a pair; ``stride`` defaults to
            ``kernel_size``; zero padding of at most half the kernel.
        ceil_mode: round the output size up; the part of a window past the padded input
            is never counted.
        count_include_pad: divide by the window size including padding (True) or by the
            number of real elements under the window (False).
        divisor_override: divide every window's sum by this instead.

    >>> F.avg_pool2d(ember.arange(16.).reshape(1, 1, 4, 4), 2)
    tensor([[[[ 2.5000,  4.5000],
              [10.5000, 12.5000]]]])
    """
    return _avg_poolnd("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode,
                       count_include_pad, divisor_override)


def avg_pool3d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """3-D average pooling over ``(N, C, D, H, W)`` (or unbatched); see :func:`avg_pool2d`.

    >>> F.avg_pool3d(ember.ones(1, 1, 4, 4, 4), 2).shape
    ember.Size([1, 1, 2, 2, 2])
    """
    return _avg_poolnd("avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode,
                       count_include_pad, divisor_override)


# Adaptive average pooling: a matmul by an averaging matrix per axis ----------------------
def _apply_along(x, axis: int, matrix):
    """``matrix`` (out, in) applied along ``axis`` of ``x``."""
    from .linalg import matmul
    if axis == x.ndim - 1:
        return matmul(x, matrix.t())
    moved = x.movedim(axis, -1)
    return matmul(moved, matrix.t()).movedim(-1, axis)


def _constant(array, dtype, device):
    from .creation import tensor
    return tensor(array, dtype=dtype, device=device)


def _averaging_matrix(size: int, out: int):
    starts, ends = _adaptive_bounds(size, out)
    cols = np.arange(size)
    inside = (cols >= starts[:, None]) & (cols < ends[:, None])
    return inside / (ends - starts)[:, None]


def _adaptive_avg_poolnd(name, d, input, output_size):
    batched, x = _check_pool_input(name, input, d)
    if not x.dtype.is_floating_point:
        raise EmberTypeError(f"{name}: expected a floating-point input, got "
                             f"{x.dtype.name}")
    out_size = _adaptive_sizes(name, d, output_size, tuple(x.shape[2:]))
    if all(o == 1 for o in out_size):  # global average pooling
        return _finish(x.mean(dim=tuple(range(2, d + 2)), keepdim=True), batched)
    out = x
    for axis, (s, o) in enumerate(zip(x.shape[2:], out_size), start=2):
        if s != o:
            out = _apply_along(out, axis, _constant(_averaging_matrix(s, o), x.dtype, x.device))
    return _finish(out, batched)


def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    """1-D adaptive average pooling to ``output_size`` windows; see
    :func:`adaptive_avg_pool2d`.

    >>> F.adaptive_avg_pool1d(ember.tensor([[[1., 3., 2., 6.]]]), 2)
    tensor([[[2., 4.]]])
    """
    return _adaptive_avg_poolnd("adaptive_avg_pool1d", 1, input, output_size)


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """2-D adaptive average pooling of ``(N, C, H, W)`` to ``output_size`` (an int or a
    pair; None keeps that input size). Window ``o`` along an axis of size ``S`` spans
    ``[floor(o*S/out), ceil((o+1)*S/out))``; ``output_size=1`` is global average pooling.

    >>> F.adaptive_avg_pool2d(ember.randn(2, 3, 7, 9), 1).shape
    ember.Size([2, 3, 1, 1])
    """
    return _adaptive_avg_poolnd("adaptive_avg_pool2d", 2, input, output_size)


def adaptive_avg_pool3d(input: Tensor, output_size) -> Tensor:
    """3-D adaptive average pooling of ``(N, C, D, H, W)``; see :func:`adaptive_avg_pool2d`.

    >>> F.adaptive_avg_pool3d(ember.randn(1, 2, 5, 6, 7), (2, 3, 1)).shape
    ember.Size([1, 2, 2, 3, 1])
    """
    return _adaptive_avg_poolnd("adaptive_avg_pool3d", 3, input, output_size)
