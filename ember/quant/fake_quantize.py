"""Fake quantization for quantization-aware training: round to the quantized grid in
the forward pass, let the gradient through unchanged (straight-through estimator) where
the value lies inside the clamp range and zero outside it."""
from __future__ import annotations

import numpy as np

from ..nn.module import Module
from ..nn.parameter import Parameter
from ..ops.creation import from_numpy
from ..ops.elementwise import clamp, round as _round
from ..tensor import Tensor
from .observer import MinMaxObserver, _values
from .qparams import per_tensor_affine, quint8, QDType

__all__ = ["MovingAverageMinMaxObserver", "FakeQuantize", "fake_quantize"]


class MovingAverageMinMaxObserver(MinMaxObserver):
    """Like :class:`MinMaxObserver`, but the range follows an exponential moving average
    of each batch's min and max (the first batch sets it), as PyTorch's
    ``MovingAverageMinMaxObserver``: a range that tracks activations while QAT changes
    them.

    >>> obs = ember.quant.MovingAverageMinMaxObserver(averaging_constant=0.5)
    >>> _ = obs(ember.tensor([0.0, 2.0])); _ = obs(ember.tensor([0.0, 4.0]))
    >>> obs.max_val.item()
    3.0
    """

    def __init__(self, averaging_constant: float = 0.01, dtype: QDType = quint8,
                 qscheme: str = per_tensor_affine, reduce_range: bool = False,
                 quant_min: int | None = None, quant_max: int | None = None):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max)
        self.averaging_constant = float(averaging_constant)

    def forward(self, x: Tensor) -> Tensor:
        values = _values(type(self).__name__, x)
        if not values.size:
            return x
        lo, hi = float(values.min()), float(values.max())
        old_lo = float(self.min_val.item())
        if old_lo != float("inf"):
            c = self.averaging_constant
            lo = old_lo + c * (lo - old_lo)
            old_hi = float(self.max_val.item())
            hi = old_hi + c * (hi - old_hi)
        self.min_val = from_numpy(np.asarray(lo, np.float32))
        self.max_val = from_numpy(np.asarray(hi, np.float32))
        return x


def fake_quantize(x: Tensor, scale: Tensor, zero_point: Tensor, quant_min: int,
                  quant_max: int) -> Tensor:
    """``(clamp(round(x / scale) + zero_point) - zero_point) * scale`` with a
    straight-through gradient: 1 where ``x`` maps inside ``[quant_min, quant_max]``,
    0 outside; ``scale`` gets a gradient too when it requires one (LSQ-style).
    ``scale`` and ``zero_point`` broadcast against ``x``.

    >>> x = ember.tensor([-1.0, 0.26, 9.0], requires_grad=True)
    >>> y = ember.quant.fake_quantize(x, ember.tensor(0.1), ember.tensor(0.0), -10, 10)
    >>> y.sum().backward(); x.grad.tolist()
    [1.0, 1.0, 0.0]
    """
    v = x / scale + zero_point
    rounded = v + (_round(v) - v).detach()
    return (clamp(rounded, quant_min, quant_max) - zero_point) * scale


class FakeQuantize(Module):
    """Simulates quantization in training. An observer (fed every batch while
    ``observer_enabled``) sets ``scale`` and ``zero_point``; with ``learnable=True`` the
    observer only initialises them on the first batch and ``scale`` becomes a
    :class:`~ember.nn.Parameter` trained by the optimizer through the STE.

    Args:
        observer: the observer class; remaining keyword arguments go to it.
        learnable: train the scale (initialised from the first batch).

    >>> fq = ember.quant.FakeQuantize()
    >>> [round(v, 4) for v in fq(ember.tensor([0.0, 0.3, 1.0])).tolist()]
    [0.0, 0.298, 1.0]
    """

    def __init__(self, observer=MovingAverageMinMaxObserver, learnable: bool = False,
                 **observer_kwargs):
        super().__init__()
        self.activation_post_process = observer(**observer_kwargs)
        obs = self.activation_post_process
        self.quant_min, self.quant_max = obs.quant_min, obs.quant_max
        self.dtype, self.qscheme = obs.dtype, obs.qscheme
        self.ch_axis = getattr(obs, "ch_axis", None)
        self.learnable = bool(learnable)
        self.fake_quant_enabled = True
        self.observer_enabled = True
        self.register_buffer("zero_point", from_numpy(np.zeros((), np.int64)))
        if self.learnable:
            self.scale = Parameter(from_numpy(np.ones((), np.float32)))
        else:
            self.register_buffer("scale", from_numpy(np.ones((), np.float32)))
        self._initialised = False

    def enable_fake_quant(self, enabled: bool = True) -> "FakeQuantize":
        self.fake_quant_enabled = enabled
        return self

    def disable_fake_quant(self) -> "FakeQuantize":
        return self.enable_fake_quant(False)

    def enable_observer(self, enabled: bool = True) -> "FakeQuantize":
        self.observer_enabled = enabled
        return self

    def disable_observer(self) -> "FakeQuantize":
        return self.enable_observer(False)

    def _set_qparams(self, scale: np.ndarray, zero_point: np.ndarray) -> None:
        if self.learnable:
            self.scale = Parameter(from_numpy(scale.astype(np.float32)))
        else:
            self.scale = from_numpy(scale.astype(np.float32))
        self.zero_point = from_numpy(zero_point.astype(np.int64))
        self._initialised = True

    def forward(self, x: Tensor) -> Tensor:
        observe = self.observer_enabled and not (self.learnable and self._initialised)
        if observe:
            self.activation_post_process(x.detach())
            self._set_qparams(*self.activation_post_process.qparams_arrays())
        if not self.fake_quant_enabled:
            return x
        scale, zero_point = self.scale, self.zero_point.float()
        if self.ch_axis is not None:
            shape = [1] * x.ndim
            shape[self.ch_axis] = -1
            scale, zero_point = scale.reshape(shape), zero_point.reshape(shape)
        if self.learnable:
            # a scale pushed to zero or below by a step would divide by zero
            scale = clamp(scale, min=float(np.finfo(np.float32).eps))
        return fake_quantize(x, scale, zero_point, self.quant_min, self.quant_max)

    def qparams_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The current ``(scale, zero_point)`` as NumPy arrays (what convert uses)."""
        if not self._initialised:
            return self.activation_post_process.qparams_arrays()
        scale = np.maximum(self.scale.detach().numpy(), np.finfo(np.float32).eps)
        return scale.astype(np.float32), self.zero_point.numpy().astype(np.int64)

    def calculate_qparams(self) -> tuple[Tensor, Tensor]:
        scale, zero_point = self.qparams_arrays()
        return from_numpy(scale), from_numpy(zero_point)

    def extra_repr(self) -> str:
        return (f"learnable={self.learnable}, fake_quant_enabled={self.fake_quant_enabled}, "
                f"observer_enabled={self.observer_enabled}, quant_min={self.quant_min}, "
                f"quant_max={self.quant_max}")
