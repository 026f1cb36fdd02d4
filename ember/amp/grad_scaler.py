"""``ember.amp.GradScaler``: dynamic loss scaling for float16 training.

The loss is multiplied by a scale before ``backward()`` so that small float16 gradients
do not flush to zero; ``step`` divides the gradients by it again and skips the
optimizer step when any gradient is inf or NaN; ``update`` shrinks the scale after an
overflow and grows it after ``growth_interval`` clean steps. The arithmetic is
PyTorch's (a float32 scale, its reciprocal taken in float64, a growth tracker).
"""
from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Any

import numpy as np

from .. import dtypes as dt
from ..autograd import grad_mode
from ..errors import EmberError, EmberTypeError, EmberValueError
from ..ops.creation import tensor as _tensor
from ..backends import is_device_type
from ..ops.logical import isfinite, logical_not, logical_or
from ..tensor import Tensor

__all__ = ["GradScaler", "GradScalerStateError"]


class GradScalerStateError(EmberError, AssertionError):
    """GradScaler methods called out of order (``step`` before ``scale``, ``unscale_``
    twice). Also an ``AssertionError``, which PyTorch raises in some of these places."""


class _Stage(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_state() -> dict:
    return {"stage": _Stage.READY, "found_inf_per_device": {}}


_FIX = ("This may indicate your script did not use scaler.scale(loss or outputs) earlier "
        "in the iteration.")


class GradScaler:
    """Scales the loss, unscales gradients, skips steps with inf/NaN gradients and
    adapts the scale.

    Args:
        device: the device type of the scale (``"cpu"``).
        init_scale: the initial scale.
        growth_factor: the scale is multiplied by this after ``growth_interval``
            consecutive steps without inf/NaN gradients (must be > 1).
        backoff_factor: the scale is multiplied by this after a step with inf/NaN
            gradients (must be < 1).
        growth_interval: clean steps between growths.
        enabled: False makes every method a pass-through (``scale`` returns its input,
            ``step`` just calls ``optimizer.step()``).

    >>> model = ember.nn.Linear(3, 1)
    >>> opt = ember.optim.SGD(model.parameters(), lr=0.1)
    >>> scaler = ember.amp.GradScaler()
    >>> loss = model(ember.randn(4, 3)).pow(2).mean()
    >>> scaler.scale(loss).backward()
    >>> scaler.step(opt)
    >>> scaler.update()
    >>> scaler.get_scale()
    65536.0
    """

    def __init__(self, device: str = "cpu", init_scale: float = 2.0 ** 16,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True):
        if not is_device_type(device):
            raise EmberError(f"GradScaler: unsupported device {device!r}; expected 'cpu' "
                             "or 'cuda'")
        self._device = device
        self._enabled = bool(enabled)
        if self._enabled:
            if not growth_factor > 1.0:
                raise EmberValueError(f"GradScaler: the growth factor must be > 1.0, got "
                                      f"{growth_factor}")
            if not backoff_factor < 1.0:
                raise EmberValueError(f"GradScaler: the backoff factor must be < 1.0, got "
                                      f"{backoff_factor}")
            if not isinstance(growth_interval, int) or growth_interval <= 0:
                raise EmberValueError(f"GradScaler: growth_interval must be a positive "
                                      f"int, got {growth_interval!r}")
        self._init_scale = float(init_scale)
        self._scale: np.float32 | None = None  # made at the first scale()
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._init_growth_tracker = 0
        self._growth_tracker: int | None = None
        self._per_optimizer_states: dict[int, dict] = {}

    # Scaling -------------------------------------------------------------------------
    def scale(self, outputs):
        """``outputs`` (a tensor, or a list/tuple/iterable of them) times the scale.

        Returns ``outputs`` unchanged when the scaler is disabled.
        """
        if not self._enabled:
            return outputs
        if self._scale is None:
            self._lazy_init()
        scales: dict = {}  # one float32 0-d scale tensor per device

        def apply_scale(value):
            if isinstance(value, Tensor):
                scale = scales.get(value.device)
                if scale is None:
                    scale = scales[value.device] = _tensor(float(self._scale),
                                                           dtype=dt.float32,
                                                           device=value.device)
                return value * scale
            if isinstance(value, (list, tuple)):
                return type(value)(apply_scale(v) for v in value)
            if isinstance(value, Iterable) and not isinstance(value, (str, bytes, dict)):
                return map(apply_scale, value)
            raise EmberTypeError(f"GradScaler.scale: outputs must be a Tensor or an "
                                 f"iterable of Tensors, got {type(value).__name__}")
        return apply_scale(outputs)

    def _lazy_init(self) -> None:
        self._scale = np.float32(self._init_scale)
        self._growth_tracker = int(self._init_growth_tracker)

    def _check_started(self, funcname: str) -> None:
        if self._scale is None:
            raise GradScalerStateError(f"GradScaler.{funcname}: attempted {funcname} but "
                                       f"the scale is not set yet. {_FIX}")

    def _state_of(self, optimizer) -> dict:
        state = self._per_optimizer_states.get(id(optimizer))
        if state is None:
            state = self._per_optimizer_states[id(optimizer)] = _fresh_state()
        return state

    def unscale_(self, optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale, in place, and record whether
        any is inf or NaN. Call it before clipping gradients; ``step`` then does not
        unscale again. At most once per optimizer between ``update`` calls."""
        if not self._enabled:
            return
        self._check_started("unscale_")
        state = self._state_of(optimizer)
        if state["stage"] is _Stage.UNSCALED:
            raise GradScalerStateError("GradScaler.unscale_: unscale_() has already been "
                                       "called on this optimizer since the last update()")
        if state["stage"] is _Stage.STEPPED:
            raise GradScalerStateError("GradScaler.unscale_: unscale_() is being called "
                                       "after step(); call update() first")
        # The reciprocal in float64, rounded to float32, as PyTorch takes it.
        inv_scale = np.float32(1.0 / np.float64(self._scale))
        state["found_inf_per_device"] = self._unscale_grads(optimizer, inv_scale)
        state["stage"] = _Stage.UNSCALED

    def _unscale_grads(self, optimizer, inv_scale: np.float32) -> dict:
        found: dict[str, float] = {}
        inverses: dict = {}
        nonfinite: dict = {}  # device -> 0-d bool tensor: a gradient there has inf/NaN
        with grad_mode.no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    grad = param.grad
                    if grad is None:
                        continue
                    if grad._dtype is dt.float16:
                        raise EmberValueError("GradScaler.unscale_: attempting to unscale "
                                              "float16 gradients; keep the parameters in "
                                              "float32 and use autocast for the ops")
                    device = grad.device
                    bad = logical_not(isfinite(grad).all())
                    nonfinite[device] = bad if device not in nonfinite else \
                        logical_or(nonfinite[device], bad)
                    inv = inverses.get(device)
                    if inv is None:
                        inv = inverses[device] = _tensor(float(inv_scale), dtype=dt.float32,
                                                         device=device)
                    grad.mul_(inv)  # (as PyTorch: also when inf/NaN was found)
        # One read per device (on a GPU, each read waits for the queued work).
        for device, bad in nonfinite.items():
            found[device.type] = max(found.get(device.type, 0.0), float(bad.item()))
        return found

    def step(self, optimizer, *args, **kwargs):
        """Unscale ``optimizer``'s gradients (unless ``unscale_`` did already) and call
        ``optimizer.step(*args, **kwargs)`` when they are all finite.

        Returns what ``optimizer.step`` returned, or None when the step was skipped.
        """
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise EmberError("GradScaler.step: a closure is not supported while the "
                             "GradScaler is enabled")
        self._check_started("step")
        state = self._state_of(optimizer)
        if state["stage"] is _Stage.STEPPED:
            raise GradScalerStateError("GradScaler.step: step() has already been called "
                                       "since the last update()")
        if state["stage"] is _Stage.READY:
            self.unscale_(optimizer)
        if not state["found_inf_per_device"]:
            raise GradScalerStateError("GradScaler.step: no inf checks were recorded for "
                                       "this optimizer: none of its parameters has a "
                                       "gradient")
        result = None
        if not sum(state["found_inf_per_device"].values()):
            result = optimizer.step(*args, **kwargs)
        state["stage"] = _Stage.STEPPED
        return result

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Adapt the scale after an iteration: times ``backoff_factor`` if any optimizer
        saw inf/NaN gradients, times ``growth_factor`` after ``growth_interval`` clean
        iterations; or set it to ``new_scale``. Call once per iteration, after ``step``.
        """
        if not self._enabled:
            return
        self._check_started("update")
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                if new_scale.numel() != 1:
                    raise EmberValueError(f"GradScaler.update: new_scale must have one "
                                          f"element, got shape {tuple(new_scale.shape)}")
                if new_scale.requires_grad:
                    raise EmberValueError("GradScaler.update: new_scale must not require "
                                          "grad")
                new_scale = new_scale.item()
            self._scale = np.float32(new_scale)
        else:
            found = [v for state in self._per_optimizer_states.values()
                     for v in state["found_inf_per_device"].values()]
            if not found:
                raise GradScalerStateError("GradScaler.update: no inf checks were recorded "
                                           "prior to update(); call step() or unscale_() "
                                           "first")
            self._update_scale(sum(found) != 0)
        self._per_optimizer_states = {}

    def _update_scale(self, found_inf: bool) -> None:
        # PyTorch's _amp_update_scale_: float32 scale, factors applied in float64.
        if found_inf:
            self._scale = np.float32(float(self._scale) * self._backoff_factor)
            self._growth_tracker = 0
            return
        successful = self._growth_tracker + 1
        if successful == self._growth_interval:
            grown = np.float32(float(self._scale) * self._growth_factor)
            if np.isfinite(grown):
                self._scale = grown
            self._growth_tracker = 0
        else:
            self._growth_tracker = successful

    # Accessors ---------------------------------------------------------------------------
    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale)

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = int(new_interval)

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None \
            else self._growth_tracker

    def is_enabled(self) -> bool:
        """Whether the scaler scales at all."""
        return self._enabled

    # State -------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The scale, factors, interval and growth tracker (plain JSON values); empty
        when disabled."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise EmberError("GradScaler.load_state_dict: the state dict is empty, possibly "
                             "because it was saved from a disabled GradScaler")
        missing = {"scale", "growth_factor", "backoff_factor", "growth_interval",
                   "_growth_tracker"} - set(state_dict)
        if missing:
            raise EmberError(f"GradScaler.load_state_dict: missing keys "
                             f"{', '.join(sorted(missing))}")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale = np.float32(self._init_scale)
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker = self._init_growth_tracker

    def __repr__(self) -> str:
        return (f"GradScaler(scale={self.get_scale()}, growth_factor={self._growth_factor}, "
                f"backoff_factor={self._backoff_factor}, "
                f"growth_interval={self._growth_interval}, enabled={self._enabled})")
