"""More pooling: power-average (LP) pooling, 3-D adaptive max pooling, max unpooling and
fractional max pooling (max, average and adaptive pooling: ``pooling.py``).

LP pooling is composed of existing ops, as PyTorch composes it: the window average of
``x ** p``, times the window size, to the power ``1/p``. PyTorch routes that sum through
``sign(s) * relu(abs(s))``, whose value is ``s`` but whose gradient is zero where ``s``
is zero (so a window of zeros gets no NaN from ``0 ** (1/p - 1)``); a ``where`` that
passes the gradient only where ``s != 0`` does the same here.

Max unpooling writes each value into zeros at its flat index in the output plane; its
gradient gathers from those indices. Fractional max pooling takes the max over windows
of a fixed size whose starts follow PyTorch's pseudo-random sequence, one per plane
and axis, made from ``_random_samples`` in the input's dtype (so given the same samples
the windows, values and indices equal PyTorch's); its gradient scatters through the
indices like max pooling's.
"""
from __future__ import annotations

import itertools
import math
import numbers

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, EmberIndexError, EmberTypeError, EmberValueError, ShapeError
from ..tensor import Tensor
from .conv import check_input_rank, ntuple
from .elementwise import where
from .pooling import (_adaptive_max_poolnd, _check_pool_input, _finish, _max_pool_vjp,
                      _max_unpool_vjp, _pool_args, _pool_output_size, avg_pool1d, avg_pool2d,
                      avg_pool3d, max_pool1d, max_pool2d, max_pool3d)
from .registry import AbstractValue, apply, register

__all__ = ["lp_pool1d", "lp_pool2d", "lp_pool3d", "adaptive_max_pool3d", "max_unpool1d",
           "max_unpool2d", "max_unpool3d", "fractional_max_pool2d", "fractional_max_pool3d"]

_AVG_POOLS = {1: avg_pool1d, 2: avg_pool2d, 3: avg_pool3d}
_MAX_POOLS = {1: max_pool1d, 2: max_pool2d, 3: max_pool3d}


# LP pooling ----------------------------------------------------------------------------------
def _lp_poolnd(name, d, input, norm_type, kernel_size, stride, ceil_mode):
    _, x = _check_pool_input(name, input, d)
    if not (x.dtype.is_floating_point or x.dtype is dt.int64):
        raise EmberTypeError(f"{name}: expected a floating-point or int64 input, got "
                             f"{x.dtype.name}")
    if isinstance(norm_type, bool) or not isinstance(norm_type, numbers.Real):
        raise EmberTypeError(f"{name}: expected norm_type to be a number, got "
                             f"{type(norm_type).__name__}")
    if norm_type == 0:
        raise EmberValueError(f"{name}: norm_type must be non-zero (the result is the "
                              "window's power sum to the power 1/norm_type)")
    kernel, strides, _, _ = _pool_args(name, d, kernel_size, stride, 0, 1)
    _pool_output_size(name, tuple(x.shape[2:]), kernel, strides, (0,) * d, (1,) * d,
                      ceil_mode)
    if math.isinf(norm_type):  # the largest (or, for -inf, smallest) magnitude
        if norm_type > 0:
            return _MAX_POOLS[d](input.abs(), kernel, strides, 0, 1, ceil_mode)
        return -_MAX_POOLS[d](-input.abs(), kernel, strides, 0, 1, ceil_mode)
    mean = _AVG_POOLS[d](input.pow(norm_type), kernel, strides, 0, ceil_mode)
    # the value of mean, with PyTorch's gradient of sign(s) * relu(abs(s)): zero at s == 0
    # (a NaN passes it, as relu's gradient does)
    total = where(mean != 0, mean, mean.detach()) * math.prod(kernel)
    return total.pow(1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size, stride=None,
              ceil_mode: bool = False) -> Tensor:
    """1-D power-average pooling of ``(N, C, L)`` (or ``(C, L)``); see :func:`lp_pool2d`.

    >>> F.lp_pool1d(ember.tensor([[[3., 4., 1., 0.]]]), 2, 2)
    tensor([[[5., 1.]]])
    """
    return _lp_poolnd("lp_pool1d", 1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size, stride=None,
              ceil_mode: bool = False) -> Tensor:
    """2-D power-average pooling of ``(N, C, H, W)`` (or ``(C, H, W)``): over each window,
    ``(sum x ** p) ** (1 / p)``. ``p = inf`` gives the largest ``|x|`` of each window
    (``-inf`` the smallest); ``p = 1`` the window sum.

    As in PyTorch the sum is the window's mean times the full window size, so with
    ``ceil_mode`` a window cut short by the input's end is scaled up to a full one; where
    a window's power sum is zero its gradient is zero.

    Args:
        norm_type: the power ``p`` (non-zero).
        kernel_size, stride: an int or a pair; ``stride`` defaults to ``kernel_size``.
        ceil_mode: round the output size up instead of down.

    >>> F.lp_pool2d(ember.ones(1, 1, 4, 4), 2, 2)
    tensor([[[[2., 2.],
              [2., 2.]]]])
    """
    return _lp_poolnd("lp_pool2d", 2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size, stride=None,
              ceil_mode: bool = False) -> Tensor:
    """3-D power-average pooling of ``(N, C, D, H, W)`` (or unbatched); see
    :func:`lp_pool2d`.

    >>> F.lp_pool3d(ember.ones(1, 1, 2, 2, 2), 1, 2)
    tensor([[[[[8.]]]]])
    """
    return _lp_poolnd("lp_pool3d", 3, input, norm_type, kernel_size, stride, ceil_mode)


def adaptive_max_pool3d(input: Tensor, output_size, return_indices: bool = False):
    """3-D adaptive max pooling of ``(N, C, D, H, W)`` (or unbatched) to ``output_size``
    (an int or a triple; None keeps that input size); see :func:`adaptive_max_pool2d`.
    The indices are flat within each input volume (``(d * H + h) * W + w``).

    >>> F.adaptive_max_pool3d(ember.randn(1, 2, 5, 6, 7), (2, 3, None)).shape
    ember.Size([1, 2, 2, 3, 7])
    """
    return _adaptive_max_poolnd("adaptive_max_pool3d", 3, input, output_size,
                                return_indices)


# Max unpooling -------------------------------------------------------------------------------
def _max_unpool_forward(xp, x, index, size):
    lead, plane = x.shape[:2], math.prod(size)
    rows = math.prod(lead)
    out = xp.zeros((rows, plane), dtype=x.dtype)
    flat = index.reshape(rows, math.prod(index.shape[2:]))
    if flat.size:
        bad = (flat < 0) | (flat >= plane)
        if bad.any():
            raise EmberIndexError(
                f"max_unpool{len(size)}d: found an invalid max index {int(flat[bad][0])} "
                f"(the output planes are of size {'x'.join(map(str, size))})")
        out[xp.arange(rows)[:, None], flat] = x.reshape(flat.shape)
    return out.reshape(tuple(lead) + tuple(size))


_MAX_UNPOOL = register(
    "max_unpool", _max_unpool_forward, _max_unpool_vjp, saves_inputs=(1,),
    infer=lambda x, index, size: AbstractValue(tuple(x.shape[:2]) + tuple(size), x.dtype))


def _unpool_size(name, d, x, kernel, stride, padding, output_size):
    default = tuple((s - 1) * st + k - 2 * p for s, k, st, p in
                    zip(x.shape[2:], kernel, stride, padding))
    if output_size is None:
        size = default
    else:
        if not isinstance(output_size, (tuple, list)) or not all(
                isinstance(o, (int, np.integer)) and not isinstance(o, bool)
                for o in output_size):
            raise EmberTypeError(f"{name}: expected output_size to be a sequence of ints, "
                                 f"got {output_size!r}")
        size = tuple(int(o) for o in output_size)
        if len(size) == d + 2:
            size = size[2:]
        if len(size) != d:
            raise EmberValueError(f"{name}: output_size should be a sequence of {d} or "
                                  f"{d + 2} ints, got {len(size)}: {tuple(output_size)}")
        for axis, (o, s, st) in enumerate(zip(size, default, stride)):
            if not s - st < o < s + st:
                raise EmberValueError(
                    f"{name}: invalid output_size {size} (dim {axis} must be between "
                    f"{s - st} and {s + st}, both excluded, for input shape "
                    f"{tuple(x.shape)})")
    if any(o < 0 for o in size):
        raise EmberValueError(f"{name}: the output size {size} has a negative dim (input "
                              f"shape {tuple(x.shape)}, kernel_size {kernel}, stride "
                              f"{stride}, padding {padding})")
    return size


def _max_unpoolnd(name, d, input, indices, kernel_size, stride, padding, output_size):
    batched = check_input_rank(name, input, d)
    if not isinstance(indices, Tensor):
        raise EmberTypeError(f"{name}: expected indices to be a Tensor, got "
                             f"{type(indices).__name__}")
    if not input.dtype.is_floating_point:
        raise EmberTypeError(f"{name}: expected a floating-point input, got "
                             f"{input.dtype.name}")
    if indices.dtype is not dt.int64:
        raise EmberTypeError(f"{name}: expected int64 indices, got {indices.dtype.name}")
    if tuple(indices.shape) != tuple(input.shape):
        raise ShapeError(f"{name}: expected indices of the input's shape "
                         f"{tuple(input.shape)}, got {tuple(indices.shape)}")
    if any(s == 0 for s in input.shape[-d - 1:]):
        raise ShapeError(f"{name}: expected non-empty channel and spatial dims, got shape "
                         f"{tuple(input.shape)}")
    kernel = ntuple(name, "kernel_size", kernel_size, d)
    stride = kernel if stride is None else ntuple(name, "stride", stride, d)
    padding = ntuple(name, "padding", padding, d)
    if any(s <= 0 for s in stride):
        raise EmberError(f"{name}: stride must be positive, got {stride}")
    if any(p < 0 for p in padding):
        raise EmberError(f"{name}: padding must be non-negative, got {padding}")
    x, index = (input, indices) if batched else (input.unsqueeze(0), indices.unsqueeze(0))
    size = _unpool_size(name, d, x, kernel, stride, padding, output_size)
    return _finish(apply(_MAX_UNPOOL, x, index, size=size), batched)


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """The partial inverse of :func:`max_pool1d`: each value of ``(N, C, L)`` (or
    ``(C, L)``) goes to position ``indices`` of zeros; see :func:`max_unpool2d`.

    >>> x = ember.tensor([[[1., 4., 2., 3.]]])
    >>> F.max_unpool1d(*F.max_pool1d(x, 2, return_indices=True), 2)
    tensor([[[0., 4., 0., 3.]]])
    """
    return _max_unpoolnd("max_unpool1d", 1, input, indices, kernel_size, stride, padding,
                         output_size)


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """The partial inverse of :func:`max_pool2d`: zeros of the pooled input's size, with
    each value of ``input`` ``(N, C, H, W)`` (or ``(C, H, W)``) at its flat index
    ``indices`` (``h * W_out + w``, as ``max_pool2d(..., return_indices=True)`` gives).

    Args:
        input, indices: the pooled values and their int64 indices (the same shape).
        kernel_size, stride, padding: those of the max pooling (``stride`` defaults to
            ``kernel_size``); they give the output size
            ``(in - 1) * stride + kernel_size - 2 * padding``.
        output_size: the size to restore instead (``d`` or ``d + 2`` ints, within one
            stride of that default): the pooled tensor's size where pooling rounded down.

    The gradient with respect to ``input`` is the output's gradient at ``indices``.

    >>> x = ember.arange(16.).reshape(1, 1, 4, 4)
    >>> F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2)[0, 0, 1]
    tensor([0., 5., 0., 7.])
    """
    return _max_unpoolnd("max_unpool2d", 2, input, indices, kernel_size, stride, padding,
                         output_size)


def max_unpool3d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """The partial inverse of :func:`max_pool3d`, over ``(N, C, D, H, W)`` (or
    unbatched); see :func:`max_unpool2d`.

    >>> x = ember.randn(1, 2, 4, 4, 4)
    >>> F.max_unpool3d(*F.max_pool3d(x, 2, return_indices=True), 2).shape
    ember.Size([1, 2, 4, 4, 4])
    """
    return _max_unpoolnd("max_unpool3d", 3, input, indices, kernel_size, stride, padding,
                         output_size)


# Fractional max pooling ----------------------------------------------------------------------
def _fractional_starts(xp, u, size, out, kernel):
    """Window starts ``(*u.shape, out)`` along an axis of ``size`` for samples ``u``, in
    the samples' dtype as PyTorch computes them: ``int((i + u) * alpha) - int(u * alpha)``
    with ``alpha = (size - kernel) / (out - 1)``; the last window ends at the input's end."""
    starts = xp.full(u.shape + (out,), size - kernel, dtype=np.int64)
    if out > 1:
        kind = u.dtype.type
        alpha = kind(size - kernel) / kind(out - 1)
        u = u[..., None]
        steps = xp.arange(out - 1).astype(u.dtype)
        starts[..., :-1] = ((steps + u) * alpha).astype(np.int64) - \
            (u * alpha).astype(np.int64)
    return starts


def _fractional_forward(xp, x, samples, kernel, out_size, overlaps):
    n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
    d = len(spatial)
    plane_strides = [math.prod(spatial[a + 1:]) for a in range(d)]
    origin = xp.zeros((n, c) + tuple(out_size), dtype=np.int64)
    # PyTorch's sample order: (W, H) in 2-D, but (D, H, W) in 3-D
    sample_of_axis = (1, 0) if d == 2 else tuple(range(d))
    for a, (s, o, k) in enumerate(zip(spatial, out_size, kernel)):
        starts = _fractional_starts(xp, samples[:n, :, sample_of_axis[a]], s, o, k)
        if starts.size and (int(starts.min()) < 0 or int(starts.max()) + k > s):
            raise EmberIndexError(
                f"fractional_max_pool{d}d: _random_samples put a window of size {k} at "
                f"{int(starts.min())}..{int(starts.max())} on an axis of size {s}; the "
                "samples should lie in [0, 1)")
        origin += starts.reshape((n, c) + (1,) * a + (o,) + (1,) * (d - a - 1)) * \
            plane_strides[a]
    planes = x.reshape(n, c, math.prod(spatial))
    origin = origin.reshape(n, c, math.prod(out_size))
    best = index = None
    # taps in row-major order: the first maximum wins a tie, the last NaN wins outright
    for offsets in itertools.product(*(range(k) for k in kernel)):
        where = origin + sum(o * st for o, st in zip(offsets, plane_strides))
        cand = xp.take_along_axis(planes, where, axis=2)
        if best is None:
            best, index = cand, where
            continue
        better = cand > best
        if x.dtype.kind in "fV":
            better |= xp.isnan(cand)
        best, index = xp.where(better, cand, best), xp.where(better, where, index)
    shape = (n, c) + tuple(out_size)
    return best.reshape(shape), index.reshape(shape)


def _fractional_vjp(n, grads):
    return _max_pool_vjp(n, grads), None


_FRACTIONAL_MAX_POOL = register(
    "fractional_max_pool", _fractional_forward, _fractional_vjp, n_outputs=2,
    saves_inputs=False, saves_outputs=True,
    infer=lambda x, samples, out_size, **p: (
        AbstractValue(tuple(x.shape[:2]) + tuple(out_size), x.dtype),
        AbstractValue(tuple(x.shape[:2]) + tuple(out_size), dt.int64)))


def _ratio_sizes(name, d, output_ratio, spatial):
    ratios = output_ratio if isinstance(output_ratio, (tuple, list)) else (output_ratio,) * d
    if len(ratios) == 1:
        ratios = tuple(ratios) * d
    if len(ratios) != d or not all(isinstance(r, numbers.Real) and not isinstance(r, bool)
                                   for r in ratios):
        raise EmberValueError(f"{name}: expected output_ratio to be a number or a tuple of "
                              f"{d} numbers, got {output_ratio!r}")
    return tuple(int(s * r) for s, r in zip(spatial, ratios))


def _fractional_max_poolnd(name, d, input, kernel_size, output_size, output_ratio,
                           return_indices, samples):
    batched, x = _check_pool_input(name, input, d)
    if not x.dtype.is_floating_point:
        raise EmberTypeError(f"{name}: expected a floating-point input, got {x.dtype.name}")
    kernel = ntuple(name, "kernel_size", kernel_size, d)
    if any(k <= 0 for k in kernel):
        raise EmberError(f"{name}: kernel_size must be positive, got {kernel}")
    spatial = tuple(x.shape[2:])
    if output_size is not None:
        out = ntuple(name, "output_size", output_size, d)
    elif output_ratio is not None:
        out = _ratio_sizes(name, d, output_ratio, spatial)
    else:
        raise EmberValueError(f"{name}: requires specifying either an output_size or an "
                              "output_ratio")
    if any(o < 0 for o in out):
        raise EmberValueError(f"{name}: output_size must be non-negative, got {out}")
    # PyTorch's bounds: output + kernel - 1 at most the input size in 2-D, below it in 3-D
    if any(o + k - 1 > s - (d == 3) for o, k, s in zip(out, kernel, spatial)):
        relation = "<" if d == 3 else "<="
        raise ShapeError(f"{name}: kernel_size {kernel} is too large for output size {out} "
                         f"and input size {spatial} (needs output + kernel - 1 {relation} "
                         "input)")
    n, c = x.shape[0], x.shape[1]
    if samples is None:
        from .random import rand
        samples = rand(n, c, d, dtype=x.dtype, device=x.device)
    elif not isinstance(samples, Tensor):
        raise EmberTypeError(f"{name}: expected _random_samples to be a Tensor, got "
                             f"{type(samples).__name__}")
    elif samples.ndim != 3 or samples.shape[0] < n or samples.shape[1] != c or \
            samples.shape[2] != d:
        raise ShapeError(f"{name}: expected _random_samples of shape (N, C, {d}) with at "
                         f"least N = {n} rows and C = {c}, got {tuple(samples.shape)}")
    elif samples.dtype is not x.dtype:
        raise EmberTypeError(f"{name}: expected _random_samples of the input's dtype "
                             f"{x.dtype.name}, got {samples.dtype.name}")
    values, indices = apply(_FRACTIONAL_MAX_POOL, x, samples, kernel=kernel, out_size=out,
                            overlaps=True)
    return _finish((values, indices) if return_indices else values, batched)


def fractional_max_pool2d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples: Tensor | None = None):
    """2-D fractional max pooling (Graham, 2014) of ``(N, C, H, W)`` (or ``(C, H, W)``):
    the max over ``kernel_size`` windows whose starts step pseudo-randomly by about
    ``(in - kernel) / (out - 1)``, so the output has any size up to
    ``in - kernel + 1``.

    Args:
        kernel_size: the window size, an int or a pair.
        output_size: the output's spatial size, an int or a pair; or else
        output_ratio: the output size as a fraction of the input's (``int(in * ratio)``).
        return_indices: also return each maximum's flat index in its input plane (for
            :func:`max_unpool2d`).
        _random_samples: ``(N, C, 2)`` numbers in ``[0, 1)`` of the input's dtype
            (``[..., 0]`` places the columns, ``[..., 1]`` the rows); by default drawn
            from ember's generator. Equal samples give PyTorch's windows exactly.

    >>> F.fractional_max_pool2d(ember.randn(2, 3, 9, 9), 2, output_size=5).shape
    ember.Size([2, 3, 5, 5])
    """
    return _fractional_max_poolnd("fractional_max_pool2d", 2, input, kernel_size,
                                  output_size, output_ratio, return_indices, _random_samples)


def fractional_max_pool3d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples: Tensor | None = None):
    """3-D fractional max pooling of ``(N, C, D, H, W)`` (or unbatched); see
    :func:`fractional_max_pool2d`. ``_random_samples`` is ``(N, C, 3)``.

    >>> F.fractional_max_pool3d(ember.randn(1, 2, 8, 8, 8), 2, output_ratio=0.5).shape
    ember.Size([1, 2, 4, 4, 4])
    """
    return _fractional_max_poolnd("fractional_max_pool3d", 3, input, kernel_size,
                                  output_size, output_ratio, return_indices, _random_samples)
