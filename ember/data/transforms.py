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
from typing import Callable, Sequence

import numpy as np

from ..errors import EmberTypeError, ShapeError, describe
from ..ops.creation import from_numpy
from ..ops.random import Generator
from ..tensor import Tensor
from .errors import DataError
from ._image import (InterpolationMode, _Image, _check_generator, _rng, _check_probability,
                     _size_pair, _range_pair, _interpolation, _fill_value, _round_back,
                     _work_dtype, _PADDING_MODES, _padding_ltrb, _pad, _resize,
                     _resized_output_size, _gather)
from .photometric import ColorJitter, RandomErasing  # noqa: F401  (public here)

__all__ = ["Compose", "ToTensor", "Normalize", "RandomCrop", "RandomHorizontalFlip",
           "RandomVerticalFlip", "RandomRotation", "RandomResizedCrop", "Resize",
           "CenterCrop", "ColorJitter", "RandomErasing", "Lambda", "InterpolationMode"]


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
