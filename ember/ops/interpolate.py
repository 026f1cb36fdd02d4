"""``interpolate``: resampling by nearest, (bi/tri)linear, bicubic or area modes, with
PyTorch's rules for the source coordinates. Linear and cubic interpolation are linear
maps along each axis, applied as a matmul by a small (output, input) matrix; nearest
interpolation is an ``index_select`` per axis; area is adaptive average pooling. All
differentiate through existing ops.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, EmberTypeError, ShapeError
from ..tensor import Tensor
from .conv import ntuple
from .pooling import _adaptive_avg_poolnd, _apply_along, _constant

__all__ = ["interpolate"]

_F32 = np.dtype(np.float32)
_LINEAR_MODES = {"linear": 1, "bilinear": 2, "trilinear": 3, "bicubic": 2}
_MODES = ("nearest", "nearest-exact", "area") + tuple(_LINEAR_MODES)
_CUBIC_A = -0.75  # PyTorch's (and OpenCV's) cubic convolution coefficient


def _source_scale(in_size, out_size, scale, align_corners, work):
    """PyTorch's ratio from output to input coordinates, in the kernels' precision."""
    if align_corners:
        return work.type((in_size - 1) / (out_size - 1)) if out_size > 1 else work.type(0)
    if scale is not None and scale > 0:
        return work.type(1.0 / scale)
    return work.type(in_size) / work.type(out_size)


def _nearest_index(in_size, out_size, scale, exact, planar):
    if planar and not exact:  # PyTorch's 2-D kernel (only): a copy, or each index twice
        if out_size == in_size:
            return np.arange(out_size)
        if out_size == 2 * in_size:
            return np.arange(out_size) >> 1
    ratio = _source_scale(in_size, out_size, scale, False, _F32)
    dst = np.arange(out_size, dtype=_F32)
    if exact:
        dst = dst + _F32.type(0.5)
    return np.minimum(np.floor(dst * ratio).astype(np.int64), in_size - 1)


def _linear_matrix(in_size, out_size, scale, align_corners, work):
    ratio = _source_scale(in_size, out_size, scale, align_corners, work)
    dst = np.arange(out_size, dtype=work)
    if align_corners:
        src = ratio * dst
    else:
        src = np.maximum(ratio * (dst + work.type(0.5)) - work.type(0.5), 0)
    low = np.minimum(src.astype(np.int64), in_size - 1)
    high = np.minimum(low + 1, in_size - 1)
    frac = np.clip(src - low, 0, 1).astype(work)
    matrix = np.zeros((out_size, in_size), dtype=work)
    rows = np.arange(out_size)
    np.add.at(matrix, (rows, low), work.type(1) - frac)
    np.add.at(matrix, (rows, high), frac)
    return matrix


def _cubic_matrix(in_size, out_size, scale, align_corners, work):
    """Bicubic resampling along one axis as PyTorch does it: taps at floor(src) - 1 ..
    floor(src) + 2 with the cubic convolution weights (A = -0.75), indices clamped to
    the border (so edge taps add onto the edge pixel), source coordinates not clamped."""
    ratio = _source_scale(in_size, out_size, scale, align_corners, work)
    dst = np.arange(out_size, dtype=work)
    src = ratio * dst if align_corners else ratio * (dst + work.type(0.5)) - work.type(0.5)
    base = np.floor(src)
    t = (src - base).astype(work)
    a = work.type(_CUBIC_A)

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    one = work.type(1)
    weights = (far(t + one), near(t), near(one - t), far(2 * one - t))
    matrix = np.zeros((out_size, in_size), dtype=work)
    rows = np.arange(out_size)
    for k, w in enumerate(weights):
        index = np.clip(base.astype(np.int64) - 1 + k, 0, in_size - 1)
        np.add.at(matrix, (rows, index), w)
    return matrix


def _interpolate_sizes(input, d, size, scale_factor, recompute_scale_factor, area):
    name = "interpolate"
    if (size is None) == (scale_factor is None):
        which = "either" if size is None else "only one of"
        raise EmberError(f"{name}: {which} size or scale_factor should be defined")
    spatial = tuple(input.shape[2:])
    if size is not None:
        sizes = ntuple(name, "size", size, d)
        if any(s <= 0 for s in sizes):
            raise EmberError(f"{name}: size must be positive, got {sizes}")
        return sizes, (None,) * d
    factors = scale_factor if isinstance(scale_factor, (tuple, list)) else (scale_factor,) * d
    if len(factors) != d or not all(isinstance(f, numbers.Real) and f > 0 for f in factors):
        raise EmberError(f"{name}: expected scale_factor to be a positive number or a tuple "
                         f"of {d}, got {scale_factor!r} for input of shape "
                         f"{tuple(input.shape)}")
    sizes = tuple(math.floor(float(s) * float(f)) for s, f in zip(spatial, factors))
    if any(s <= 0 for s in sizes) and not area:  # (area pools: an empty result, as in PyTorch)
        raise ShapeError(f"{name}: scale_factor {scale_factor!r} makes an empty output "
                         f"{sizes} from input of shape {tuple(input.shape)}")
    scales = (None,) * d if recompute_scale_factor else tuple(float(f) for f in factors)
    return sizes, scales


def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resize the spatial dims of ``(N, C, L)``, ``(N, C, H, W)`` or ``(N, C, D, H, W)``.

    Args:
        size: the output's spatial size; or ``scale_factor``: a multiplier per dim (the
            size is ``floor(input_size * scale_factor)``, and the factor itself sets the
            sampling ratio unless ``recompute_scale_factor`` is True).
        mode: ``'nearest'`` (source index ``floor(dst * in/out)``), ``'nearest-exact'``
            (``floor((dst + 0.5) * in/out)``), ``'linear'`` (3-D), ``'bilinear'`` or
            ``'bicubic'`` (4-D; cubic convolution with A = -0.75, border taps clamped),
            ``'trilinear'`` (5-D) or ``'area'`` (adaptive average pooling).
        align_corners: for the linear modes: map the corner pixels' centres onto each
            other (True) or the corners of the images (False, the default).

    >>> F.interpolate(ember.tensor([[[1., 2.]]]), scale_factor=2, mode="linear")
    tensor([[[1.0000, 1.2500, 1.7500, 2.0000]]])
    """
    name = "interpolate"
    if not isinstance(input, Tensor):
        raise EmberTypeError(f"{name}: expected input to be a Tensor, got "
                             f"{type(input).__name__}")
    if input.ndim not in (3, 4, 5):
        raise ShapeError(f"{name}: expected input with 3, 4 or 5 dims (N, C, *spatial), got "
                         f"shape {tuple(input.shape)}")
    if mode not in _MODES:
        raise EmberError(f"{name}: mode must be one of {', '.join(_MODES)}, got {mode!r}")
    if antialias:
        raise EmberError(f"{name}: antialias=True is not supported")
    if not (input.dtype.is_floating_point
            or (input.dtype is dt.uint8 and mode in ("nearest", "nearest-exact"))):
        raise EmberTypeError(f"{name}: expected a floating-point input (or uint8 with the "
                             f"nearest modes), got {input.dtype.name} with mode={mode!r}")
    d = input.ndim - 2
    linear = mode in _LINEAR_MODES
    if align_corners is not None and not linear:
        raise EmberError(f"{name}: align_corners can only be set with the linear modes "
                         f"(linear, bilinear, bicubic, trilinear), not mode={mode!r}")
    if linear and _LINEAR_MODES[mode] != d:
        raise ShapeError(f"{name}: mode {mode!r} needs a {_LINEAR_MODES[mode] + 2}-D input, "
                         f"got shape {tuple(input.shape)}")
    sizes, scales = _interpolate_sizes(input, d, size, scale_factor, recompute_scale_factor,
                                       mode == "area")
    if 0 in sizes:  # area with a scale that floors a size to 0: an empty result
        from .index import slice_dim
        from .shape import reshape
        empty = slice_dim(input, 2 + sizes.index(0), 0, 0)
        return reshape(empty, tuple(input.shape[:2]) + tuple(sizes))
    if mode == "area":
        return _adaptive_avg_poolnd(name, d, input, sizes)
    from .selection import index_select
    work = np.dtype(np.float64) if input.dtype is dt.float64 else _F32
    out = input
    for axis, (s, o, scale) in enumerate(zip(input.shape[2:], sizes, scales), start=2):
        if s == o and linear and mode != "bicubic":
            continue  # PyTorch copies an axis whose size is unchanged (bicubic's it resamples)
        if linear:
            build = _cubic_matrix if mode == "bicubic" else _linear_matrix
            matrix = build(s, o, scale, bool(align_corners), work)
            out = _apply_along(out, axis, _constant(matrix, input.dtype, input.device))
        else:
            index = _nearest_index(s, o, scale, mode == "nearest-exact", d == 2)
            out = index_select(out, axis, _constant(index, dt.int64, input.device))
    return out
