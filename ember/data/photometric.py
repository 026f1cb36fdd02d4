"""The photometric transforms of :mod:`ember.data.transforms`: :class:`ColorJitter` and
:class:`RandomErasing` (they change pixel values, not the geometry), with torchvision's
names, arguments and formulas. Import them from :mod:`ember.data.transforms`.
"""
from __future__ import annotations

import math
import numbers
from typing import Sequence

import numpy as np

from ..errors import EmberTypeError, ShapeError, describe
from ..ops.random import Generator
from .errors import DataError
from ._image import (_Image, _check_generator, _rng, _check_probability, _range_pair,
                     _blend, _grayscale, _adjust_contrast, _adjust_hue)


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
