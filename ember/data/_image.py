"""The image plumbing behind :mod:`ember.data.transforms`: reading an image of any
accepted kind (ember tensor, NumPy array, PIL image) as a ``(..., C, H, W)`` array and
handing results back in the caller's form, argument checks, padding, resampling
(nearest, bilinear, antialiased) and torchvision's colour formulas, in vectorised NumPy.
"""
from __future__ import annotations

import numbers
from enum import Enum
from typing import Sequence

import numpy as np

from ..errors import EmberTypeError, ShapeError, describe
from ..ops.creation import from_numpy
from ..ops.random import Generator, default_generator
from ..tensor import Tensor
from .errors import DataError


class InterpolationMode(str, Enum):
    """How resampling transforms interpolate (torchvision's enum; plain strings work too)."""
    NEAREST = "nearest"
    BILINEAR = "bilinear"


# Images in, images out ------------------------------------------------------------------
class _Image:
    """An input image as an array whose last two axes are (H, W) (channels at -3), and
    how to hand a result back in the caller's form."""
    __slots__ = ("array", "kind", "source")

    def __init__(self, img, owner: str):
        self.source = img
        if isinstance(img, Tensor):
            self.kind, arr = "tensor", img.numpy(force=True)
        elif isinstance(img, np.ndarray):
            hwc = img.ndim == 3 and img.dtype == np.uint8
            self.kind, arr = ("hwc", img.transpose(2, 0, 1)) if hwc else ("chw", img)
        elif hasattr(img, "__array_interface__") or hasattr(img, "__array__"):
            arr = np.asarray(img)
            self.kind = "hwc" if arr.ndim == 3 else "chw"
            arr = arr.transpose(2, 0, 1) if arr.ndim == 3 else arr
        else:
            raise EmberTypeError(f"{owner}: expected an ember Tensor, a NumPy array or a "
                                 f"PIL image, got {type(img).__name__}")
        if arr.ndim < 2:
            raise ShapeError(f"{owner}: expected an image of shape (..., C, H, W) or (H, W), "
                             f"got {describe([img])}")
        self.array = arr

    @property
    def channels(self) -> int:
        return self.array.shape[-3] if self.array.ndim >= 3 else 1

    def wrap(self, arr: np.ndarray):
        if self.kind == "hwc":
            return np.ascontiguousarray(arr.transpose(1, 2, 0))
        arr = np.ascontiguousarray(arr)
        if self.kind == "tensor":
            out = from_numpy(arr)
            return out if self.source.device == out.device else out.to(self.source.device)
        return arr


def _check_generator(owner: str, generator) -> None:
    if generator is not None and not isinstance(generator, Generator):
        raise EmberTypeError(f"{owner}: generator must be an ember.Generator or None, got "
                             f"{type(generator).__name__}")


def _rng(generator) -> np.random.Generator:
    return (generator or default_generator())._rng


def _check_probability(owner: str, p) -> float:
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0:
        raise DataError(f"{owner}: p should be a probability in [0, 1], got p={p!r}")
    return float(p)


def _size_pair(owner: str, size, name: str = "size") -> tuple[int, int]:
    if isinstance(size, numbers.Integral) and not isinstance(size, bool):
        size = (int(size), int(size))
    elif isinstance(size, Sequence) and len(size) == 1:
        size = (int(size[0]), int(size[0]))
    elif isinstance(size, Sequence) and len(size) == 2:
        size = (int(size[0]), int(size[1]))
    else:
        raise DataError(f"{owner}: {name} should be an int or a sequence (h, w), got "
                        f"{size!r}")
    if size[0] <= 0 or size[1] <= 0:
        raise DataError(f"{owner}: {name} must be positive, got {size}")
    return size


def _range_pair(owner: str, name: str, value) -> tuple[float, float]:
    if not isinstance(value, Sequence) or len(value) != 2:
        raise DataError(f"{owner}: {name} should be a sequence of length 2, got {value!r}")
    lo, hi = float(value[0]), float(value[1])
    if lo > hi:
        raise DataError(f"{owner}: {name} should be (min, max), got {value!r}")
    return lo, hi


def _interpolation(owner: str, mode) -> str:
    try:
        return InterpolationMode(mode).value
    except ValueError:
        raise DataError(f"{owner}: interpolation must be one of 'nearest', 'bilinear', got "
                        f"{mode!r}") from None


def _fill_value(owner: str, fill, image: _Image):
    """``fill`` as a scalar or a (C, 1, 1) array of the image's dtype."""
    if isinstance(fill, numbers.Number):
        return np.asarray(fill).astype(image.array.dtype)
    values = np.asarray(fill, dtype=np.float64).reshape(-1)
    if values.size == 1:
        return values[0].astype(image.array.dtype)
    if values.size != image.channels or image.array.ndim < 3:
        raise DataError(f"{owner}: fill has {values.size} values but the image of "
                        f"{describe([image.source])} has {image.channels} channel(s)")
    return values.astype(image.array.dtype).reshape(-1, 1, 1)


def _round_back(arr: np.ndarray, dtype) -> np.ndarray:
    """A float result cast back to the input's dtype (integers rounded and clipped)."""
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return np.clip(np.rint(arr), info.min, info.max).astype(dtype)
    return arr.astype(dtype, copy=False)


def _work_dtype(dtype) -> type:
    """The float type arithmetic on an image of ``dtype`` runs in."""
    return np.dtype(dtype).type if np.issubdtype(dtype, np.floating) else np.float32


# Geometry -------------------------------------------------------------------------------
_PADDING_MODES = ("constant", "edge", "reflect", "symmetric")


def _padding_ltrb(owner: str, padding) -> tuple[int, int, int, int]:
    if isinstance(padding, numbers.Integral) and not isinstance(padding, bool):
        padding = (padding,) * 4
    elif isinstance(padding, Sequence) and len(padding) in (1, 2, 4):
        padding = tuple(padding)
        padding = padding * 4 if len(padding) == 1 else (
            padding * 2 if len(padding) == 2 else padding)
    else:
        raise DataError(f"{owner}: padding should be an int or a sequence of 1, 2 or 4 "
                        f"ints, got {padding!r}")
    if any(not isinstance(p, numbers.Integral) or p < 0 for p in padding):
        raise DataError(f"{owner}: padding must be non-negative ints, got {padding!r}")
    return tuple(int(p) for p in padding)


def _pad(image: _Image, arr: np.ndarray, ltrb, fill, mode: str, owner: str) -> np.ndarray:
    left, top, right, bottom = ltrb
    if mode == "constant":
        h, w = arr.shape[-2:]
        shape = arr.shape[:-2] + (top + h + bottom, left + w + right)
        zero = isinstance(fill, numbers.Number) and fill == 0
        new = np.zeros if zero else np.empty
        if arr.ndim == 3 and arr.strides[0] < arr.strides[2]:
            # Channels-last memory (an HWC image): pad in that layout, so that this copy
            # and the one back to (H, W, C) read and write memory in order.
            out = new(shape[1:] + shape[:1], arr.dtype).transpose(2, 0, 1)
        else:
            out = new(shape, arr.dtype)
        if not zero:
            out[...] = _fill_value(owner, fill, image)
        out[..., top:top + h, left:left + w] = arr
        return out
    widths = [(0, 0)] * (arr.ndim - 2) + [(top, bottom), (left, right)]
    return np.pad(arr, widths, mode=mode)


def _nearest_taps(in_size: int, out_size: int):
    # torch's legacy 'nearest': floor(dst * scale), computed in float32 as there.
    scale = np.float32(in_size / out_size)
    idx = np.floor(np.arange(out_size, dtype=np.float32) * scale).astype(np.int64)
    return np.minimum(idx, in_size - 1)[:, None], np.ones((out_size, 1), np.float32)


def _bilinear_taps(in_size: int, out_size: int):
    # align_corners=False: src = (dst + 0.5) * scale - 0.5, clamped at 0 (float32 as torch).
    scale = np.float32(in_size / out_size)
    src = (np.arange(out_size, dtype=np.float32) + np.float32(0.5)) * scale - np.float32(0.5)
    src = np.maximum(src, np.float32(0.0))
    i0 = src.astype(np.int64)
    lam = src - i0.astype(np.float32)
    i1 = np.minimum(i0 + 1, in_size - 1)
    return np.stack([i0, i1], 1), np.stack([np.float32(1.0) - lam, lam], 1)


def _antialias_taps(in_size: int, out_size: int):
    # A triangle filter widened by the downscale factor (PIL's, and torch's antialias).
    scale = in_size / out_size
    support = max(scale, 1.0)
    inv = 1.0 / support
    center = scale * (np.arange(out_size) + 0.5)
    lo = np.maximum(np.trunc(center - support + 0.5), 0).astype(np.int64)
    hi = np.minimum(np.trunc(center + support + 0.5), in_size).astype(np.int64)
    taps = int((hi - lo).max())
    idx = lo[:, None] + np.arange(taps)
    weights = np.maximum(0.0, 1.0 - np.abs((idx - center[:, None] + 0.5) * inv))
    weights[idx >= hi[:, None]] = 0.0
    weights /= weights.sum(1, keepdims=True)
    return np.minimum(idx, in_size - 1), weights.astype(np.float32)


def _resample_axis(arr: np.ndarray, out_size: int, axis: int, mode: str, antialias: bool):
    in_size = arr.shape[axis]
    if in_size == out_size:
        return arr
    if mode == "nearest":
        idx, weights = _nearest_taps(in_size, out_size)
        return arr.take(idx[:, 0], axis)
    if antialias and out_size < in_size:
        idx, weights = _antialias_taps(in_size, out_size)
    else:
        idx, weights = _bilinear_taps(in_size, out_size)
    weights = weights.astype(arr.dtype, copy=False)
    # Gather every tap at once, then contract the taps with a batched matmul,
    # (out, 1, K) @ (..., out, K, W): rows of W values per product, several times faster
    # than a multiply-add per tap. The last axis goes through a transposed view.
    if axis == -1:
        swapped = (weights[:, None, :] @ arr.swapaxes(-1, -2).take(idx, -2))[..., 0, :]
        return swapped.swapaxes(-1, -2)
    return (weights[:, None, :] @ arr.take(idx, -2))[..., 0, :]


def _resize(arr: np.ndarray, size: tuple[int, int], mode: str, antialias: bool):
    if arr.shape[-2:] == tuple(size):
        return arr
    dtype = arr.dtype
    if mode == "nearest":
        return _resample_axis(_resample_axis(arr, size[0], -2, mode, False),
                              size[1], -1, mode, False)
    work = arr.astype(_work_dtype(dtype), copy=False)
    out = _resample_axis(_resample_axis(work, size[0], -2, mode, antialias),
                         size[1], -1, mode, antialias)
    return _round_back(out, dtype)


def _resized_output_size(h: int, w: int, size, max_size) -> tuple[int, int]:
    if len(size) == 2:
        return size[0], size[1]
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = size[0], int(size[0] * long / short)
    if max_size is not None:
        if max_size <= size[0]:
            raise DataError(f"Resize: max_size = {max_size} must be strictly greater than "
                            f"the requested size for the smaller edge, {size[0]}")
        if new_long > max_size:
            new_short, new_long = int(max_size * new_short / new_long), max_size
    return (new_long, new_short) if w <= h else (new_short, new_long)  # (h, w)


# Colour ---------------------------------------------------------------------------------
def _bound(dtype) -> float:
    return 1.0 if np.issubdtype(dtype, np.floating) else float(np.iinfo(dtype).max)


def _blend(img: np.ndarray, other: np.ndarray, ratio: float) -> np.ndarray:
    work = _work_dtype(img.dtype)
    out = img.astype(work) * work(ratio) + work(1.0 - ratio) * other.astype(work, copy=False)
    return np.clip(out, 0, _bound(img.dtype)).astype(img.dtype)


def _grayscale(img: np.ndarray) -> np.ndarray:
    work = _work_dtype(img.dtype)
    r, g, b = (img[..., c:c + 1, :, :].astype(work, copy=False) for c in range(3))
    return (work(0.2989) * r + work(0.587) * g + work(0.114) * b).astype(img.dtype)


def _adjust_contrast(img: np.ndarray, factor: float) -> np.ndarray:
    work = _work_dtype(img.dtype)
    base = _grayscale(img) if img.shape[-3] == 3 else img
    mean = base.astype(work).mean(axis=(-3, -2, -1), keepdims=True, dtype=work)
    return _blend(img, mean, factor)


def _rgb_to_hsv(img: np.ndarray) -> np.ndarray:
    r, g, b = img[..., 0, :, :], img[..., 1, :, :], img[..., 2, :, :]
    maxc, minc = img.max(axis=-3), img.min(axis=-3)
    flat = maxc == minc
    spread = maxc - minc
    s = spread / np.where(flat, 1, maxc)
    spread = np.where(flat, 1, spread)
    rc, gc, bc = (maxc - r) / spread, (maxc - g) / spread, (maxc - b) / spread
    h = np.where(maxc == r, bc - gc, np.where(maxc == g, 2.0 + rc - bc, 4.0 + gc - rc))
    h = np.fmod(h / 6.0 + 1.0, 1.0).astype(img.dtype)
    return np.stack([h, s.astype(img.dtype), maxc], axis=-3)


def _hsv_to_rgb(hsv: np.ndarray) -> np.ndarray:
    h, s, v = hsv[..., 0, :, :], hsv[..., 1, :, :], hsv[..., 2, :, :]
    sector = np.floor(h * 6.0)
    f = h * 6.0 - sector
    sector = sector.astype(np.int64) % 6
    p = np.clip(v * (1.0 - s), 0.0, 1.0)
    q = np.clip(v * (1.0 - s * f), 0.0, 1.0)
    t = np.clip(v * (1.0 - s * (1.0 - f)), 0.0, 1.0)
    table = ((v, q, p, p, t, v), (t, v, v, q, p, p), (p, p, t, v, v, q))
    channels = [np.choose(sector, rows) for rows in table]
    return np.stack(channels, axis=-3).astype(hsv.dtype)


def _adjust_hue(img: np.ndarray, factor: float) -> np.ndarray:
    dtype = img.dtype
    work = img.astype(np.float32) / np.float32(255.0) if dtype == np.uint8 else img
    hsv = _rgb_to_hsv(work)
    hsv[..., 0, :, :] = np.mod(hsv[..., 0, :, :] + work.dtype.type(factor), 1.0)
    out = _hsv_to_rgb(hsv)
    return (out * np.float32(255.0)).astype(dtype) if dtype == np.uint8 else out


def _gather(arr: np.ndarray, iy: np.ndarray, ix: np.ndarray) -> np.ndarray:
    """``arr[..., iy, ix]`` with the indices clipped into the image (a flat ``take``,
    several times faster than fancy indexing on two axes)."""
    h, w = arr.shape[-2:]
    flat = np.clip(iy, 0, h - 1) * w + np.clip(ix, 0, w - 1)
    lead = arr.shape[:-2]
    return arr.reshape(lead + (h * w,)).take(flat, axis=-1)
