"""Image transforms with the names, arguments and formulas of ``torchvision.transforms``
(v1), in vectorised NumPy.

A transform takes an image and returns one of the same kind:

* an ember :class:`~ember.Tensor` of shape ``(..., C, H, W)`` or ``(H, W)``, any dtype;
* a NumPy array: ``(H, W, C)`` when its dtype is ``uint8`` (the layout of a PIL image
  and of what :class:`ToTensor` reads), ``(..., C, H, W)`` or ``(H, W)`` otherwise;
* a PIL image (or anything ``np.asarray`` reads as ``(H, W[, C])``), returned as a NumPy
  ``(H, W[, C])`` array.

Random transforms draw from ``generator`` (an :class:`ember.Generator`) when given one and
from ember's default generator otherwise, so ``ember.manual_seed`` makes them repeat.
Colour formulas are torchvision's tensor formulas (uint8 results truncate, as there).

>>> from ember.data import transforms as T
>>> tf = T.Compose([T.RandomCrop(28, padding=4), T.RandomHorizontalFlip(), T.ToTensor(),
...                 T.Normalize((0.5,), (0.25,))])
>>> tf(np.zeros((28, 28, 1), np.uint8)).shape
ember.Size([1, 28, 28])
"""
from __future__ import annotations

import math
import numbers
from enum import Enum
from typing import Callable, Sequence

import numpy as np

from ..errors import EmberTypeError, ShapeError, describe
from ..ops.creation import from_numpy
from ..ops.random import Generator, default_generator
from ..tensor import Tensor
from .errors import DataError

__all__ = ["Compose", "ToTensor", "Normalize", "RandomCrop", "RandomHorizontalFlip",
           "RandomVerticalFlip", "RandomRotation", "RandomResizedCrop", "Resize",
           "CenterCrop", "ColorJitter", "RandomErasing", "Lambda", "InterpolationMode"]


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


# The transforms -------------------------------------------------------------------------
class Compose:
    """Apply ``transforms`` in order.

    >>> T.Compose([T.ToTensor(), T.Normalize((0.5,), (0.5,))])(np.zeros((2, 2), np.uint8))
    tensor([[[-1., -1.],
             [-1., -1.]]])
    """

    def __init__(self, transforms: Sequence[Callable]):
        for t in transforms:
            if not callable(t):
                raise EmberTypeError(f"Compose: every transform must be callable, got "
                                     f"{type(t).__name__}")
        self.transforms = list(transforms)

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self) -> str:
        body = "".join(f"\n    {t}" for t in self.transforms)
        return f"{type(self).__name__}({body}\n)"


class ToTensor:
    """A ``(H, W, C)`` uint8 array or PIL image (values 0–255) to a float32
    ``(C, H, W)`` tensor in [0, 1].

    A 2-D ``(H, W)`` input gains a channel axis. Float arrays and tensors are taken as
    ``(C, H, W)`` already and only become float32 tensors; a uint8 tensor is ``(C, H, W)``
    and is scaled by 1/255. Booleans become 0 and 1.

    >>> T.ToTensor()(np.full((2, 2, 3), 255, np.uint8)).shape
    ember.Size([3, 2, 2])
    """

    def __call__(self, pic) -> Tensor:
        image = _Image(pic, "ToTensor")
        arr = image.array
        if arr.ndim == 2:
            arr = arr[None]
        if arr.dtype == np.uint8:
            # One pass into a contiguous (C, H, W) result: the cast to float32 is exact,
            # so this equals astype(float32) / 255 without the intermediate copy.
            out = np.empty(arr.shape, np.float32)
            np.divide(arr, np.float32(255.0), out=out)
        elif arr.dtype.kind in "biuf":
            out = arr.astype(np.float32)
        else:
            raise EmberTypeError(f"ToTensor: expected a numeric image, got {describe([pic])}")
        return from_numpy(np.ascontiguousarray(out))

    def __repr__(self) -> str:
        return "ToTensor()"


class Normalize:
    """``(image - mean) / std`` per channel, on a float image ``(..., C, H, W)``.

    Args:
        mean: one value per channel (or one for all).
        std: one value per channel (or one for all); none may be zero.
        inplace: write the result into the input.

    >>> T.Normalize([0.5], [0.5])(ember.ones(1, 2, 2))
    tensor([[[1., 1.],
             [1., 1.]]])
    """

    def __init__(self, mean: Sequence[float], std: Sequence[float], inplace: bool = False):
        self.mean = tuple(np.atleast_1d(np.asarray(mean, dtype=np.float64)).tolist())
        self.std = tuple(np.atleast_1d(np.asarray(std, dtype=np.float64)).tolist())
        self.inplace = inplace
        # Checked (C, 1, 1) mean and std arrays, built once per dtype and channel count
        # (keyed by the values too, so assigning new ``mean``/``std`` still takes effect).
        self._stats: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}

    def __call__(self, tensor):
        image = _Image(tensor, "Normalize")
        arr = image.array
        if arr.dtype.kind != "f":
            raise EmberTypeError(f"Normalize: input should be a float image, got "
                                 f"{describe([tensor])}")
        if arr.ndim < 3:
            raise ShapeError(f"Normalize: expected an image of shape (..., C, H, W), got "
                             f"{describe([tensor])}")
        key = (arr.dtype, arr.shape[-3], self.mean, self.std)
        stats = self._stats.get(key)
        if stats is None:
            stats = self._stats[key] = self._checked_stats(arr, tensor)
        mean, std = stats
        if self.inplace and arr.flags.writeable:
            np.subtract(arr, mean, out=arr)
            np.divide(arr, std, out=arr)
            return tensor
        out = arr - mean
        np.divide(out, std, out=out)
        return image.wrap(out)

    def _checked_stats(self, arr: np.ndarray, tensor) -> tuple[np.ndarray, np.ndarray]:
        mean = np.asarray(self.mean, arr.dtype)
        std = np.asarray(self.std, arr.dtype)
        if (std == 0).any():
            raise DataError(f"Normalize: std evaluated to zero after conversion to "
                            f"{arr.dtype}, leading to division by zero (std={self.std})")
        for name, values in (("mean", mean), ("std", std)):
            if values.size not in (1, arr.shape[-3]):
                raise ShapeError(f"Normalize: {name} has {values.size} values but the image "
                                 f"of {describe([tensor])} has {arr.shape[-3]} channels")
        return mean.reshape(-1, 1, 1), std.reshape(-1, 1, 1)

    def __repr__(self) -> str:
        return f"Normalize(mean={list(self.mean)}, std={list(self.std)})"


class RandomCrop:
    """Crop a random ``size`` patch, after optional padding.

    Args:
        size: ``(h, w)`` or an int for a square.
        padding: added to the borders first: an int (all sides), ``(lr, tb)`` or
            ``(left, top, right, bottom)``.
        pad_if_needed: pad an image smaller than ``size`` up to it.
        fill: the value (or per-channel values) of ``constant`` padding.
        padding_mode: ``constant``, ``edge``, ``reflect`` (mirror without the edge
            pixel) or ``symmetric`` (mirror with it).
        generator: the :class:`ember.Generator` to draw offsets from.

    >>> T.RandomCrop(2)(ember.zeros(3, 5, 5)).shape
    ember.Size([3, 2, 2])
    """

    def __init__(self, size, padding=None, pad_if_needed: bool = False, fill=0,
                 padding_mode: str = "constant", generator: Generator | None = None):
        self.size = _size_pair("RandomCrop", size)
        self.padding = None if padding is None else _padding_ltrb("RandomCrop", padding)
        if padding_mode not in _PADDING_MODES:
            raise DataError(f"RandomCrop: padding_mode must be one of {_PADDING_MODES}, got "
                            f"{padding_mode!r}")
        _check_generator("RandomCrop", generator)
        self.pad_if_needed = pad_if_needed
        self.fill = fill
        self.padding_mode = padding_mode
        self.generator = generator

    @staticmethod
    def get_params(img, output_size: tuple[int, int],
                   generator: Generator | None = None) -> tuple[int, int, int, int]:
        """A random ``(top, left, height, width)`` crop of ``output_size`` inside ``img``."""
        h, w = _Image(img, "RandomCrop").array.shape[-2:]
        return RandomCrop._offsets(h, w, output_size, generator)

    @staticmethod
    def _offsets(h: int, w: int, output_size, generator) -> tuple[int, int, int, int]:
        th, tw = output_size
        if h < th or w < tw:
            raise DataError(f"RandomCrop: required crop size {(th, tw)} is larger than the "
                            f"input image size {(h, w)}")
        if h == th and w == tw:
            return 0, 0, h, w
        rng = _rng(generator)
        i = int(rng.integers(0, h - th + 1))
        j = int(rng.integers(0, w - tw + 1))
        return i, j, th, tw

    def __call__(self, img):
        image = _Image(img, "RandomCrop")
        arr = image.array
        if self.padding is not None:
            arr = _pad(image, arr, self.padding, self.fill, self.padding_mode, "RandomCrop")
        h, w = arr.shape[-2:]
        th, tw = self.size
        if self.pad_if_needed and (w < tw or h < th):
            dw, dh = max(tw - w, 0), max(th - h, 0)
            arr = _pad(image, arr, (dw, dh, dw, dh), self.fill, self.padding_mode,
                       "RandomCrop")
            h, w = arr.shape[-2:]
        i, j, th, tw = self._offsets(h, w, self.size, self.generator)
        return image.wrap(arr[..., i:i + th, j:j + tw])

    def __repr__(self) -> str:
        return f"RandomCrop(size={self.size}, padding={self.padding})"


class RandomHorizontalFlip:
    """Mirror left–right with probability ``p``.

    >>> T.RandomHorizontalFlip(p=1.0)(ember.tensor([[1, 2, 3]]))
    tensor([[3, 2, 1]])
    """
    _axis = -1

    def __init__(self, p: float = 0.5, generator: Generator | None = None):
        self.p = _check_probability(type(self).__name__, p)
        _check_generator(type(self).__name__, generator)
        self.generator = generator

    def __call__(self, img):
        image = _Image(img, type(self).__name__)
        if _rng(self.generator).random() < self.p:
            return image.wrap(np.flip(image.array, self._axis))
        return img

    def __repr__(self) -> str:
        return f"{type(self).__name__}(p={self.p})"


class RandomVerticalFlip(RandomHorizontalFlip):
    """Mirror top–bottom with probability ``p``.

    >>> T.RandomVerticalFlip(p=1.0)(ember.tensor([[1], [2]]))
    tensor([[2],
            [1]])
    """
    _axis = -2


class RandomRotation:
    """Rotate counter-clockwise by an angle drawn uniformly from ``degrees``.

    Sampling is torchvision's: output pixel centres mapped back into the input, ``nearest``
    (round half to even) or ``bilinear``; points outside the input take ``fill``.

    Args:
        degrees: ``(min, max)`` in degrees, or ``d`` for ``(-d, d)``.
        interpolation: ``"nearest"`` or ``"bilinear"`` (or :class:`InterpolationMode`).
        expand: grow the output to hold the whole rotated image.
        center: ``(x, y)`` from the upper-left corner (default: the image centre).
        fill: the value (or per-channel values) of the area outside the input.
        generator: the :class:`ember.Generator` to draw the angle from.

    >>> T.RandomRotation((90, 90))(ember.tensor([[1, 2], [3, 4]]))
    tensor([[2, 4],
            [1, 3]])
    """

    def __init__(self, degrees, interpolation=InterpolationMode.NEAREST, expand: bool = False,
                 center: Sequence[float] | None = None, fill=0,
                 generator: Generator | None = None):
        if isinstance(degrees, numbers.Real):
            if degrees < 0:
                raise DataError(f"RandomRotation: if degrees is a single number it must be "
                                f"non-negative, got {degrees}")
            degrees = (-degrees, degrees)
        self.degrees = _range_pair("RandomRotation", "degrees", degrees)
        self.interpolation = _interpolation("RandomRotation", interpolation)
        if center is not None and (not isinstance(center, Sequence) or len(center) != 2):
            raise DataError(f"RandomRotation: center should be a sequence (x, y), got "
                            f"{center!r}")
        _check_generator("RandomRotation", generator)
        self.expand = expand
        self.center = center
        self.fill = fill
        self.generator = generator

    @staticmethod
    def get_params(degrees: tuple[float, float], generator: Generator | None = None) -> float:
        """A random angle in ``[degrees[0], degrees[1]]``."""
        return float(_rng(generator).uniform(degrees[0], degrees[1]))

    def __call__(self, img):
        image = _Image(img, "RandomRotation")
        angle = self.get_params(self.degrees, self.generator)
        return image.wrap(self._rotate(image, angle))

    def _rotate(self, image: _Image, angle: float) -> np.ndarray:
        arr = image.array
        h, w = arr.shape[-2:]
        cx, cy = (0.0, 0.0) if self.center is None else (
            self.center[0] - 0.5 * w, self.center[1] - 0.5 * h)
        # The inverse map, output -> input, in coordinates centred on the image.
        rad = math.radians(-angle)
        a, b, c, d = math.cos(rad), math.sin(rad), -math.sin(rad), math.cos(rad)
        tx, ty = cx - a * cx - b * cy, cy - c * cx - d * cy
        oh, ow = h, w
        if self.expand:
            corners = np.array([[-0.5 * w, -0.5 * h], [-0.5 * w, 0.5 * h],
                                [0.5 * w, 0.5 * h], [0.5 * w, -0.5 * h]])
            moved = corners @ np.array([[a, c], [b, d]]) + (tx, ty)
            tol = 1e-4
            hi = np.ceil(np.trunc(moved.max(0) / tol) * tol)
            lo = np.floor(np.trunc(moved.min(0) / tol) * tol)
            ow, oh = (int(v) for v in hi - lo)
        xs = np.arange(ow) - (ow - 1) / 2.0
        ys = (np.arange(oh) - (oh - 1) / 2.0)[:, None]
        src_x = a * xs + b * ys + tx + (w - 1) / 2.0
        src_y = c * xs + d * ys + ty + (h - 1) / 2.0
        fill = _fill_value("RandomRotation", self.fill, image)
        if self.interpolation == "nearest":
            ix, iy = np.rint(src_x).astype(np.int64), np.rint(src_y).astype(np.int64)
            inside = (ix >= 0) & (ix < w) & (iy >= 0) & (iy < h)
            out = _gather(arr, iy, ix)
            return np.where(inside, out, fill).astype(arr.dtype, copy=False)
        work = arr.astype(_work_dtype(arr.dtype), copy=False)
        x0, y0 = np.floor(src_x), np.floor(src_y)
        fx, fy = (src_x - x0).astype(work.dtype), (src_y - y0).astype(work.dtype)
        x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
        total = np.zeros(arr.shape[:-2] + (oh, ow), work.dtype)
        mask = np.zeros((oh, ow), work.dtype)
        for dy, wy in ((0, 1 - fy), (1, fy)):
            for dx, wx in ((0, 1 - fx), (1, fx)):
                yy, xx = y0 + dy, x0 + dx
                weight = wy * wx * ((xx >= 0) & (xx < w) & (yy >= 0) & (yy < h))
                total += _gather(work, yy, xx) * weight
                mask += weight
        # torchvision blends with the sampled in-bounds mask: img * mask + (1 - mask) * fill
        out = total * mask + (1 - mask) * fill.astype(work.dtype)
        return _round_back(out, arr.dtype)

    def __repr__(self) -> str:
        return (f"RandomRotation(degrees={self.degrees}, interpolation={self.interpolation}, "
                f"expand={self.expand}, fill={self.fill})")


class Resize:
    """Resize to ``size``: ``(h, w)``, or an int to match the shorter edge keeping the
    aspect ratio (the longer edge capped at ``max_size``).

    ``bilinear`` is ``torch.nn.functional.interpolate(mode="bilinear",
    align_corners=False)``; with ``antialias`` (the default) downscaling widens the filter
    as PIL does. ``nearest`` is interpolate's ``nearest``.

    >>> T.Resize((4, 6))(ember.zeros(3, 8, 8)).shape
    ember.Size([3, 4, 6])
    """

    def __init__(self, size, interpolation=InterpolationMode.BILINEAR,
                 max_size: int | None = None, antialias: bool = True):
        if isinstance(size, numbers.Integral) and not isinstance(size, bool):
            size = (int(size),)
        if not isinstance(size, Sequence) or len(size) not in (1, 2) or min(size) <= 0:
            raise DataError(f"Resize: size should be a positive int or a sequence of one "
                            f"or two, got {size!r}")
        if max_size is not None and len(size) != 1:
            raise DataError(f"Resize: max_size is only supported when size is an int or a "
                            f"sequence of one (got size={tuple(size)})")
        self.size = tuple(int(s) for s in size)
        self.interpolation = _interpolation("Resize", interpolation)
        self.max_size = max_size
        self.antialias = antialias

    def __call__(self, img):
        image = _Image(img, "Resize")
        h, w = image.array.shape[-2:]
        out_size = _resized_output_size(h, w, self.size, self.max_size)
        return image.wrap(_resize(image.array, out_size, self.interpolation, self.antialias))

    def __repr__(self) -> str:
        return (f"Resize(size={self.size}, interpolation={self.interpolation}, "
                f"max_size={self.max_size}, antialias={self.antialias})")


class CenterCrop:
    """Crop the centre ``size`` patch; an image smaller than ``size`` is zero-padded.

    >>> T.CenterCrop(1)(ember.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9]]))
    tensor([[5]])
    """

    def __init__(self, size):
        self.size = _size_pair("CenterCrop", size)

    def __call__(self, img):
        image = _Image(img, "CenterCrop")
        arr = image.array
        h, w = arr.shape[-2:]
        ch, cw = self.size
        if ch > h or cw > w:
            ltrb = ((cw - w) // 2 if cw > w else 0, (ch - h) // 2 if ch > h else 0,
                    (cw - w + 1) // 2 if cw > w else 0, (ch - h + 1) // 2 if ch > h else 0)
            arr = _pad(image, arr, ltrb, 0, "constant", "CenterCrop")
            h, w = arr.shape[-2:]
        top, left = int(round((h - ch) / 2.0)), int(round((w - cw) / 2.0))
        return image.wrap(arr[..., top:top + ch, left:left + cw])

    def __repr__(self) -> str:
        return f"CenterCrop(size={self.size})"


class RandomResizedCrop:
    """Crop a random box of random area and aspect ratio, then resize it to ``size``.

    The box is torchvision's: up to 10 tries of an area fraction uniform in ``scale`` and
    an aspect ratio log-uniform in ``ratio``; if none fits, a central crop clamped to
    ``ratio``.

    Args:
        size: output ``(h, w)`` or an int for a square.
        scale: range of the box's area as a fraction of the image's.
        ratio: range of the box's width / height.
        interpolation: ``"bilinear"`` or ``"nearest"``.
        antialias: widen the bilinear filter when downscaling (as :class:`Resize`).
        generator: the :class:`ember.Generator` to draw from.

    >>> T.RandomResizedCrop(4)(ember.zeros(3, 10, 12)).shape
    ember.Size([3, 4, 4])
    """

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 interpolation=InterpolationMode.BILINEAR, antialias: bool = True,
                 generator: Generator | None = None):
        self.size = _size_pair("RandomResizedCrop", size)
        self.scale = _range_pair("RandomResizedCrop", "scale", scale)
        self.ratio = _range_pair("RandomResizedCrop", "ratio", ratio)
        if self.ratio[0] <= 0:
            raise DataError(f"RandomResizedCrop: ratio must be positive, got {ratio!r}")
        self.interpolation = _interpolation("RandomResizedCrop", interpolation)
        _check_generator("RandomResizedCrop", generator)
        self.antialias = antialias
        self.generator = generator

    @staticmethod
    def get_params(img, scale: Sequence[float], ratio: Sequence[float],
                   generator: Generator | None = None) -> tuple[int, int, int, int]:
        """A random ``(top, left, height, width)`` box of ``img``."""
        height, width = _Image(img, "RandomResizedCrop").array.shape[-2:]
        return RandomResizedCrop._box(height, width, scale, ratio, generator)

    @staticmethod
    def _box(height: int, width: int, scale, ratio, generator):
        rng = _rng(generator)
        area = height * width
        log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
        for _ in range(10):
            target_area = area * rng.uniform(scale[0], scale[1])
            aspect = math.exp(rng.uniform(log_lo, log_hi))
            w = int(round(math.sqrt(target_area * aspect)))
            h = int(round(math.sqrt(target_area / aspect)))
            if 0 < w <= width and 0 < h <= height:
                i = int(rng.integers(0, height - h + 1))
                j = int(rng.integers(0, width - w + 1))
                return i, j, h, w
        in_ratio = width / height
        if in_ratio < min(ratio):
            w, h = width, int(round(width / min(ratio)))
        elif in_ratio > max(ratio):
            h, w = height, int(round(height * max(ratio)))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def __call__(self, img):
        image = _Image(img, "RandomResizedCrop")
        height, width = image.array.shape[-2:]
        i, j, h, w = self._box(height, width, self.scale, self.ratio, self.generator)
        crop = image.array[..., i:i + h, j:j + w]
        return image.wrap(_resize(crop, self.size, self.interpolation, self.antialias))

    def __repr__(self) -> str:
        return (f"RandomResizedCrop(size={self.size}, scale={self.scale}, "
                f"ratio={self.ratio}, interpolation={self.interpolation})")


class ColorJitter:
    """Randomly change brightness, contrast, saturation and hue, in a random order.

    Each factor is drawn uniformly from its range: a number ``x`` means
    ``[max(0, 1 - x), 1 + x]`` (``[-x, x]`` for hue), a pair is the range itself.
    Brightness blends with black, contrast with the mean of the grayscale image,
    saturation with the grayscale image (torchvision's formulas); hue rotates the HSV hue.
    Images have 1 or 3 channels; saturation and hue leave a 1-channel image as it is.

    >>> cj = T.ColorJitter(brightness=(0.5, 0.5))
    >>> cj(ember.full((3, 1, 1), 0.8))
    tensor([[[0.4000]],
    <BLANKLINE>
            [[0.4000]],
    <BLANKLINE>
            [[0.4000]]])
    """

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0,
                 generator: Generator | None = None):
        self.brightness = self._check_input(brightness, "brightness")
        self.contrast = self._check_input(contrast, "contrast")
        self.saturation = self._check_input(saturation, "saturation")
        self.hue = self._check_input(hue, "hue", center=0.0, bound=(-0.5, 0.5),
                                     clip_first_on_zero=False)
        _check_generator("ColorJitter", generator)
        self.generator = generator

    @staticmethod
    def _check_input(value, name: str, center: float = 1.0, bound=(0.0, float("inf")),
                     clip_first_on_zero: bool = True):
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            if value < 0:
                raise DataError(f"ColorJitter: if {name} is a single number, it must be "
                                f"non-negative, got {value}")
            value = [center - float(value), center + float(value)]
            if clip_first_on_zero:
                value[0] = max(value[0], 0.0)
        elif isinstance(value, Sequence) and len(value) == 2:
            value = [float(value[0]), float(value[1])]
        else:
            raise DataError(f"ColorJitter: {name} should be a single number or a sequence "
                            f"of length 2, got {value!r}")
        if not bound[0] <= value[0] <= value[1] <= bound[1]:
            raise DataError(f"ColorJitter: {name} values should be between {bound}, got "
                            f"{value}")
        return None if value[0] == value[1] == center else tuple(value)

    @staticmethod
    def get_params(brightness, contrast, saturation, hue, generator: Generator | None = None):
        """The order of the four adjustments (a permutation of 0..3) and the factor of each
        (``None`` for one that is off)."""
        rng = _rng(generator)
        order = rng.permutation(4).tolist()
        factors = [None if r is None else float(rng.uniform(r[0], r[1]))
                   for r in (brightness, contrast, saturation, hue)]
        return (order, *factors)

    def __call__(self, img):
        image = _Image(img, "ColorJitter")
        arr = image.array
        channels = image.channels
        order, *factors = self.get_params(self.brightness, self.contrast, self.saturation,
                                          self.hue, self.generator)
        if channels not in (1, 3):
            raise ShapeError(f"ColorJitter: expected an image with 1 or 3 channels, got "
                             f"{describe([img])}")
        if arr.ndim == 2:
            arr = arr[None]
        for fn in order:
            factor = factors[fn]
            if factor is None:
                continue
            if fn == 0:
                arr = _blend(arr, np.zeros((), arr.dtype), factor)
            elif fn == 1:
                arr = _adjust_contrast(arr, factor)
            elif fn == 2 and channels == 3:
                arr = _blend(arr, _grayscale(arr), factor)
            elif fn == 3 and channels == 3:
                arr = _adjust_hue(arr, factor)
        return image.wrap(arr.reshape(image.array.shape))

    def __repr__(self) -> str:
        return (f"ColorJitter(brightness={self.brightness}, contrast={self.contrast}, "
                f"saturation={self.saturation}, hue={self.hue})")


class RandomErasing:
    """With probability ``p``, set a random rectangle of a ``(..., C, H, W)`` image to
    ``value`` (Zhong et al., 2017), as torchvision.

    Args:
        p: the probability of erasing.
        scale: range of the rectangle's area as a fraction of the image's.
        ratio: range of the rectangle's aspect ratio.
        value: a number, one number per channel, or ``"random"`` (standard normal noise).
        inplace: write into the input.
        generator: the :class:`ember.Generator` to draw from.

    >>> out = T.RandomErasing(p=1.0, value=-1)(ember.zeros(3, 8, 8))
    >>> bool((out == -1).any())
    True
    """

    def __init__(self, p: float = 0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0,
                 inplace: bool = False, generator: Generator | None = None):
        self.p = _check_probability("RandomErasing", p)
        self.scale = _range_pair("RandomErasing", "scale", scale)
        self.ratio = _range_pair("RandomErasing", "ratio", ratio)
        if self.scale[0] < 0 or self.scale[1] > 1:
            raise DataError(f"RandomErasing: scale should be between 0 and 1, got {scale}")
        if isinstance(value, str) and value != "random":
            raise DataError(f"RandomErasing: if value is a str it should be 'random', got "
                            f"{value!r}")
        if not isinstance(value, (numbers.Number, str, tuple, list)):
            raise EmberTypeError(f"RandomErasing: value should be a number, a sequence or "
                                 f"'random', got {type(value).__name__}")
        _check_generator("RandomErasing", generator)
        self.value = value
        self.inplace = inplace
        self.generator = generator

    @staticmethod
    def get_params(img, scale, ratio, value=None, generator: Generator | None = None):
        """A random ``(top, left, height, width, values)`` rectangle of ``img``; ``value``
        None draws standard normal values. If 10 tries don't fit, the whole image and
        ``img`` itself (erasing changes nothing)."""
        arr = _Image(img, "RandomErasing").array
        return RandomErasing._box(arr, scale, ratio, value, _rng(generator))

    @staticmethod
    def _box(arr: np.ndarray, scale, ratio, value, rng):
        channels, height, width = arr.shape[-3:]
        area = height * width
        log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
        for _ in range(10):
            erase_area = area * rng.uniform(scale[0], scale[1])
            aspect = math.exp(rng.uniform(log_lo, log_hi))
            h = int(round(math.sqrt(erase_area * aspect)))
            w = int(round(math.sqrt(erase_area / aspect)))
            if not (h < height and w < width):
                continue
            if value is None:
                v = rng.standard_normal((channels, h, w), dtype=np.float32)
            else:
                v = np.asarray(value, dtype=np.float64).reshape(-1, 1, 1)
            i = int(rng.integers(0, height - h + 1))
            j = int(rng.integers(0, width - w + 1))
            return i, j, h, w, v
        return 0, 0, height, width, arr

    def __call__(self, img):
        image = _Image(img, "RandomErasing")
        arr = image.array
        if arr.ndim < 3:
            raise ShapeError(f"RandomErasing: expected an image of shape (..., C, H, W), got "
                             f"{describe([img])}")
        rng = _rng(self.generator)
        if not rng.random() < self.p:
            return img
        value = None if isinstance(self.value, str) else np.atleast_1d(self.value)
        if value is not None and value.size not in (1, arr.shape[-3]):
            raise DataError(f"RandomErasing: value has {value.size} values but the image of "
                            f"{describe([img])} has {arr.shape[-3]} channels")
        i, j, h, w, v = self._box(arr, self.scale, self.ratio, value, rng)
        if v is arr:
            return img
        inplace = self.inplace and arr.flags.writeable
        out = arr if inplace else arr.copy()
        out[..., i:i + h, j:j + w] = v.astype(arr.dtype)
        return img if inplace else image.wrap(out)

    def __repr__(self) -> str:
        return (f"RandomErasing(p={self.p}, scale={self.scale}, ratio={self.ratio}, "
                f"value={self.value}, inplace={self.inplace})")


class Lambda:
    """Apply a user function as a transform.

    >>> T.Lambda(lambda x: x * 2)(ember.ones(1))
    tensor([2.])
    """

    def __init__(self, lambd: Callable):
        if not callable(lambd):
            raise EmberTypeError(f"Lambda: argument should be callable, got "
                                 f"{type(lambd).__name__}")
        self.lambd = lambd

    def __call__(self, img):
        return self.lambd(img)

    def __repr__(self) -> str:
        return "Lambda()"
