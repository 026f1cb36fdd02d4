"""Observers: modules that watch the values passing through them during calibration and
turn what they saw into a scale and a zero point (``calculate_qparams``).

:class:`MinMaxObserver` and :class:`PerChannelMinMaxObserver` follow
``torch.ao.quantization``'s observers exactly (same arguments, same results);
:class:`PercentileObserver` clips the rarest values, which usually costs less accuracy
than stretching the range to a single outlier.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..errors import EmberTypeError, EmberValueError
from ..nn.module import Module
from ..ops.creation import from_numpy, tensor
from ..tensor import Tensor
from .qparams import (QDType, calculate_qparams, check_dtype, check_scheme,
                      per_channel_affine, per_channel_symmetric, per_tensor_affine,
                      per_tensor_symmetric, quant_range, quint8, qint8)

__all__ = ["ObserverBase", "MinMaxObserver", "PerChannelMinMaxObserver",
           "PercentileObserver"]


def _values(owner: str, x) -> np.ndarray:
    if not isinstance(x, Tensor):
        raise EmberTypeError(f"{owner}: expected a Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise EmberTypeError(f"{owner}: expected a floating-point tensor, got dtype "
                             f"{x.dtype}")
    return x.detach().numpy().astype(np.float32, copy=False)


class ObserverBase(Module):
    """What the observers share: dtype, scheme and integer range.

    Args:
        dtype: ``qint8`` or ``quint8``.
        qscheme: ``per_tensor_affine`` / ``per_tensor_symmetric`` (per-channel schemes
            for the per-channel observer).
        reduce_range: use 7 bits of the 8 (for backends whose accumulation overflows).
        quant_min, quant_max: a custom integer range inside the dtype's.
    """
    _per_channel = False

    def __init__(self, dtype: QDType = quint8, qscheme: str = per_tensor_affine,
                 reduce_range: bool = False, quant_min: int | None = None,
                 quant_max: int | None = None):
        super().__init__()
        name = type(self).__name__
        self.dtype = check_dtype(name, dtype)
        self.qscheme = check_scheme(name, qscheme, self._per_channel)
        self.reduce_range = bool(reduce_range)
        self.quant_min, self.quant_max, self._customised = quant_range(
            name, dtype, reduce_range, quant_min, quant_max)
        if self.symmetric and dtype is quint8 and reduce_range:
            # PyTorch refuses it too: the zero point 128 lies outside [0, 127]
            raise NotImplementedError(f"{name}: reduce_range is not supported for "
                                      "symmetric quint8 (its zero point 128 needs 8 bits)")

    @property
    def symmetric(self) -> bool:
        return self.qscheme in (per_tensor_symmetric, per_channel_symmetric)

    def _observed_range(self):
        """``(min_val, max_val)`` as float32 arrays, or None before any data."""
        raise NotImplementedError(f"{type(self).__name__} does not define its range")

    @property
    def has_data(self) -> bool:
        return self._observed_range() is not None

    def calculate_qparams(self) -> tuple[Tensor, Tensor]:
        """``(scale, zero_point)`` tensors (float32, int64) for what was observed; before
        any data, scale 1 and zero point 0 with a warning, as PyTorch does."""
        arrays = self.qparams_arrays()
        return from_numpy(arrays[0]), from_numpy(arrays[1])

    def qparams_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`calculate_qparams` as NumPy arrays."""
        observed = self._observed_range()
        if observed is None:
            warnings.warn(f"{type(self).__name__}: no data was observed; using scale 1.0 "
                          "and zero point 0 (run calibration data through the model "
                          "before convert)", stacklevel=3)
            shape = (0,) if self._per_channel else ()
            return np.ones(shape, np.float32), np.zeros(shape, np.int64)
        return calculate_qparams(observed[0], observed[1], self.quant_min, self.quant_max,
                                 self.symmetric, self.dtype, self._customised)

    def extra_repr(self) -> str:
        return (f"dtype={self.dtype.name}, qscheme={self.qscheme}, "
                f"quant_min={self.quant_min}, quant_max={self.quant_max}")


class MinMaxObserver(ObserverBase):
    """Tracks the running minimum and maximum of everything it sees (PyTorch's
    ``MinMaxObserver``): ``scale = (max - min) / (quant_max - quant_min)`` for affine
    schemes, ``max(|min|, |max|) / ((quant_max - quant_min) / 2)`` for symmetric ones.

    >>> obs = ember.quant.MinMaxObserver()
    >>> _ = obs(ember.tensor([-1.0, 3.0]))
    >>> scale, zero_point = obs.calculate_qparams()
    >>> round(scale.item(), 6), zero_point.item()
    (0.015686, 64)
    """

    def __init__(self, dtype: QDType = quint8, qscheme: str = per_tensor_affine,
                 reduce_range: bool = False, quant_min: int | None = None,
                 quant_max: int | None = None):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max)
        self.register_buffer("min_val", tensor(float("inf")))
        self.register_buffer("max_val", tensor(float("-inf")))

    def forward(self, x: Tensor) -> Tensor:
        values = _values(type(self).__name__, x)
        if values.size:
            lo = min(float(self.min_val.item()), float(values.min()))
            hi = max(float(self.max_val.item()), float(values.max()))
            self.min_val = tensor(lo)
            self.max_val = tensor(hi)
        return x

    def _observed_range(self):
        lo, hi = float(self.min_val.item()), float(self.max_val.item())
        if lo == float("inf") and hi == float("-inf"):
            return None
        return np.float32(lo), np.float32(hi)


class PerChannelMinMaxObserver(ObserverBase):
    """The minimum and maximum of each slice along ``ch_axis`` (PyTorch's
    ``PerChannelMinMaxObserver``): one scale and zero point per output channel of a
    weight.

    >>> obs = ember.quant.PerChannelMinMaxObserver(
    ...     dtype=ember.quant.qint8, qscheme=ember.quant.per_channel_symmetric)
    >>> _ = obs(ember.tensor([[1.0, -2.0], [0.5, 0.25]]))
    >>> obs.calculate_qparams()[1].tolist()
    [0, 0]
    """
    _per_channel = True

    def __init__(self, ch_axis: int = 0, dtype: QDType = quint8,
                 qscheme: str = per_channel_affine, reduce_range: bool = False,
                 quant_min: int | None = None, quant_max: int | None = None):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max)
        self.ch_axis = int(ch_axis)
        self.register_buffer("min_val", tensor([]))
        self.register_buffer("max_val", tensor([]))

    def forward(self, x: Tensor) -> Tensor:
        values = _values(type(self).__name__, x)
        if values.ndim == 0 or not -values.ndim <= self.ch_axis < values.ndim:
            raise EmberValueError(f"{type(self).__name__}: ch_axis={self.ch_axis} is out of "
                                  f"range for an input of shape {values.shape}")
        rows = np.moveaxis(values, self.ch_axis, 0).reshape(values.shape[self.ch_axis], -1)
        if rows.shape[1] == 0:
            return x
        lo, hi = rows.min(axis=1), rows.max(axis=1)
        if self.min_val.numel():
            old_lo, old_hi = self.min_val.numpy(), self.max_val.numpy()
            if old_lo.shape != lo.shape:
                raise EmberValueError(f"{type(self).__name__}: saw {lo.shape[0]} channels "
                                      f"after {old_lo.shape[0]} along ch_axis="
                                      f"{self.ch_axis}")
            lo, hi = np.minimum(lo, old_lo), np.maximum(hi, old_hi)
        self.min_val = from_numpy(lo.astype(np.float32))
        self.max_val = from_numpy(hi.astype(np.float32))
        return x

    def _observed_range(self):
        if not self.min_val.numel():
            return None
        return self.min_val.numpy(), self.max_val.numpy()

    def extra_repr(self) -> str:
        return f"ch_axis={self.ch_axis}, " + super().extra_repr()


class PercentileObserver(ObserverBase):
    """The range that holds all but the rarest ``100 - percentile`` percent of values
    at each end, read from a histogram of everything seen (2048 bins over the running
    min/max; when the range grows the old counts are re-binned into the new bins).

    Args:
        percentile: the share of values kept inside the range, in (50, 100].

    >>> obs = ember.quant.PercentileObserver(percentile=99.0)
    >>> x = ember.cat([ember.linspace(-1, 1, 10000), ember.tensor([100.0])])
    >>> _ = obs(x)
    >>> obs.calculate_qparams()[0].item() < 0.01
    True
    """
    bins = 2048

    def __init__(self, percentile: float = 99.99, dtype: QDType = quint8,
                 qscheme: str = per_tensor_affine, reduce_range: bool = False,
                 quant_min: int | None = None, quant_max: int | None = None):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max)
        if not 50.0 < percentile <= 100.0:
            raise EmberValueError(f"PercentileObserver: percentile must be in (50, 100], got "
                                  f"{percentile}")
        self.percentile = float(percentile)
        self.register_buffer("histogram", from_numpy(np.zeros(self.bins, np.float64)))
        self.register_buffer("min_val", tensor(float("inf")))
        self.register_buffer("max_val", tensor(float("-inf")))

    def forward(self, x: Tensor) -> Tensor:
        values = _values(type(self).__name__, x).ravel()
        values = values[np.isfinite(values)]
        if not values.size:
            return x
        old_lo, old_hi = float(self.min_val.item()), float(self.max_val.item())
        lo, hi = min(old_lo, float(values.min())), max(old_hi, float(values.max()))
        if hi == lo:
            hi = lo + 1e-8
        counts = np.histogram(values, bins=self.bins, range=(lo, hi))[0].astype(np.float64)
        if old_lo <= old_hi:
            # re-bin the old counts at their bins' centres into the new range
            old_edges = np.linspace(old_lo, old_hi, self.bins + 1)
            centres = (old_edges[:-1] + old_edges[1:]) / 2
            counts += np.histogram(centres, bins=self.bins, range=(lo, hi),
                                   weights=self.histogram.numpy())[0]
        self.histogram = from_numpy(counts)
        self.min_val, self.max_val = tensor(lo), tensor(hi)
        return x

    def _observed_range(self):
        counts = self.histogram.numpy()
        total = counts.sum()
        if total == 0:
            return None
        lo, hi = float(self.min_val.item()), float(self.max_val.item())
        edges = np.linspace(lo, hi, self.bins + 1)
        cumulative = np.cumsum(counts) / total
        tail = (100.0 - self.percentile) / 100.0
        low_bin = int(np.searchsorted(cumulative, tail, side="right"))
        high_bin = int(np.searchsorted(cumulative, 1.0 - tail, side="left"))
        low = edges[min(low_bin, self.bins - 1)]
        high = edges[min(high_bin, self.bins - 1) + 1]
        return np.float32(low), np.float32(high)

    def extra_repr(self) -> str:
        return f"percentile={self.percentile}, " + super().extra_repr()
