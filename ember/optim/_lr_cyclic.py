"""Per-batch cyclical schedules: ``CyclicLR`` and ``OneCycleLR`` (both can cycle the
momentum too)."""
from __future__ import annotations

import math
from typing import Any, Callable

from ._lr_base import LRScheduler, callable_state, check_optimizer, per_group
from .optimizer import Optimizer, OptimizerError


def _cycles_momentum(optimizer: Optimizer, use_beta1: bool) -> None:
    """Tell the optimizer that its momentum (or betas) changes at every step, so that a
    step compiled with ember.jit reads it at every call instead of retracing."""
    optimizer._scheduled_options.add("betas" if use_beta1 else "momentum")


def _set_momentum(group: dict[str, Any], momentum: float, use_beta1: bool) -> None:
    if use_beta1:
        group["betas"] = (momentum, *group["betas"][1:])
    else:
        group["momentum"] = momentum


class CyclicLR(LRScheduler):
    """Cycle the lr between ``base_lr`` and ``max_lr`` (Smith, 2017), stepping once per
    batch; with ``cycle_momentum`` the momentum (or Adam's beta1) cycles inversely.

    Args:
        base_lr, max_lr: the cycle's bounds, for all groups or one per group.
        step_size_up, step_size_down: steps of the rising and falling halves.
        mode: ``"triangular"``, ``"triangular2"`` (amplitude halves each cycle) or
            ``"exp_range"`` (amplitude scaled by ``gamma**step``).
        scale_fn, scale_mode: a custom amplitude function of the cycle (or of the step,
            with ``scale_mode="iterations"``), replacing ``mode``.
        base_momentum, max_momentum: the momentum's bounds.

    >>> sched = CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=2000)
    """

    def __init__(self, optimizer: Optimizer, base_lr: float | list[float],
                 max_lr: float | list[float], step_size_up: int = 2000,
                 step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn: Callable[[float], float] | None = None,
                 scale_mode: str = "cycle", cycle_momentum: bool = True,
                 base_momentum: float = 0.8, max_momentum: float = 0.9,
                 last_epoch: int = -1) -> None:
        check_optimizer("CyclicLR", optimizer)
        base_lrs = per_group("CyclicLR", "base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                group["lr"] = lr
        self.max_lrs = per_group("CyclicLR", "max_lr", optimizer, max_lr)
        step_size_up = float(step_size_up)
        step_size_down = float(step_size_down) if step_size_down is not None else step_size_up
        self.total_size = step_size_up + step_size_down
        self.step_ratio = step_size_up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise OptimizerError(f"CyclicLR: mode must be 'triangular', 'triangular2' or "
                                 f"'exp_range' when no scale_fn is given, got {mode!r}")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise OptimizerError(f"CyclicLR: {type(optimizer).__name__} has neither "
                                     "momentum nor betas, needed by cycle_momentum=True")
            self.use_beta1 = "betas" in optimizer.defaults
            _cycles_momentum(optimizer, self.use_beta1)
            self.base_momentums = per_group("CyclicLR", "base_momentum", optimizer,
                                             base_momentum)
            self.max_momentums = per_group("CyclicLR", "max_momentum", optimizer,
                                            max_momentum)
            if last_epoch == -1:
                for m_max, m_base, group in zip(self.max_momentums, self.base_momentums,
                                                optimizer.param_groups):
                    _set_momentum(group, m_max, self.use_beta1)
                    group["max_momentum"] = m_max
                    group["base_momentum"] = m_base
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self) -> None:
        # A built-in mode fixes whether its scale is a function of the cycle or the step.
        if self._scale_fn_custom is None:
            self.scale_mode = "iterations" if self.mode == "exp_range" else "cycle"

    def scale_fn(self, x: float) -> float:
        """The amplitude's scale at cycle (or step) ``x``."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [base_lr + (max_lr - base_lr) * scale_factor * scale
               for base_lr, max_lr in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group, m_base, m_max in zip(self.optimizer.param_groups, self.base_momentums,
                                            self.max_momentums):
                _set_momentum(group, m_max - (m_max - m_base) * scale_factor * scale,
                              self.use_beta1)
        return lrs

    def state_dict(self) -> dict[str, Any]:
        """The state; a custom ``scale_fn`` is saved as ``None`` if it is a function,
        as its attribute dict if it is a callable object."""
        state = super().state_dict()
        state["_scale_fn_custom"] = callable_state(state.pop("_scale_fn_custom"))
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        attrs = state.pop("_scale_fn_custom")
        super().load_state_dict(state)
        if attrs is not None:
            self._scale_fn_custom.__dict__.update(attrs)
        self._init_scale_fn()


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin, 2017), stepped once per batch: the lr rises from
    ``max_lr / div_factor`` to ``max_lr`` over ``pct_start`` of the steps, then anneals
    to ``initial_lr / final_div_factor``; momentum (or Adam's beta1) moves inversely
    between ``max_momentum`` and ``base_momentum``. ``three_phase`` adds a symmetric
    descent back to the initial lr before the final annealing.

    Args:
        max_lr: the peak lr, for all groups or one per group.
        total_steps: steps in the cycle, or give ``epochs`` and ``steps_per_epoch``.
        anneal_strategy: ``"cos"`` or ``"linear"``.

    >>> sched = OneCycleLR(opt, max_lr=0.1, total_steps=1000)
    """

    def __init__(self, optimizer: Optimizer, max_lr: float | list[float],
                 total_steps: int | None = None, epochs: int | None = None,
                 steps_per_epoch: int | None = None, pct_start: float = 0.3,
                 anneal_strategy: str = "cos", cycle_momentum: bool = True,
                 base_momentum: float | list[float] = 0.85,
                 max_momentum: float | list[float] = 0.95, div_factor: float = 25.0,
                 final_div_factor: float = 1e4, three_phase: bool = False,
                 last_epoch: int = -1) -> None:
        check_optimizer("OneCycleLR", optimizer)
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise OptimizerError(f"OneCycleLR: total_steps must be a positive integer, "
                                     f"got {total_steps!r}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            for name, value in (("epochs", epochs), ("steps_per_epoch", steps_per_epoch)):
                if not isinstance(value, int) or value <= 0:
                    raise OptimizerError(f"OneCycleLR: {name} must be a positive integer, "
                                         f"got {value!r}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise OptimizerError("OneCycleLR: give either total_steps or both epochs and "
                                 "steps_per_epoch")
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise OptimizerError(f"OneCycleLR: pct_start must be a float between 0 and 1, "
                                 f"got {pct_start!r}")
        if anneal_strategy not in ("cos", "linear"):
            raise OptimizerError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', "
                                 f"got {anneal_strategy!r}")
        warmup_end = float(pct_start * self.total_steps) - 1
        if three_phase:
            self._schedule_phases = [
                _phase(warmup_end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                _phase(float(2 * pct_start * self.total_steps) - 2, "max_lr", "initial_lr",
                       "base_momentum", "max_momentum"),
                _phase(self.total_steps - 1, "initial_lr", "min_lr", "max_momentum",
                       "max_momentum"),
            ]
        else:
            self._schedule_phases = [
                _phase(warmup_end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                _phase(self.total_steps - 1, "max_lr", "min_lr", "base_momentum",
                       "max_momentum"),
            ]
        self._anneal_func_type = anneal_strategy

        max_lrs = per_group("OneCycleLR", "max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for peak, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = peak / div_factor
                group["max_lr"] = peak
                group["min_lr"] = group["initial_lr"] / final_div_factor

        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise OptimizerError(f"OneCycleLR: {type(optimizer).__name__} has neither "
                                     "momentum nor betas, needed by cycle_momentum=True")
            self.use_beta1 = "betas" in optimizer.defaults
            _cycles_momentum(optimizer, self.use_beta1)
            max_momentums = per_group("OneCycleLR", "max_momentum", optimizer, max_momentum)
            base_momentums = per_group("OneCycleLR", "base_momentum", optimizer,
                                        base_momentum)
            if last_epoch == -1:
                for m_max, m_base, group in zip(max_momentums, base_momentums,
                                                optimizer.param_groups):
                    _set_momentum(group, m_max, self.use_beta1)
                    group["max_momentum"] = m_max
                    group["base_momentum"] = m_base
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise OptimizerError(f"OneCycleLR: tried to step {step_num} times, but the "
                                 f"schedule has {self.total_steps} steps")
        lrs = []
        phases = self._schedule_phases
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, phase in enumerate(phases):
                end_step = phase["end_step"]
                if step_num <= end_step or i == len(phases) - 1:
                    pct = (step_num - start_step) / (end_step - start_step)
                    lr = self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        momentum = self._anneal(group[phase["start_momentum"]],
                                                group[phase["end_momentum"]], pct)
                    break
                start_step = phase["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                _set_momentum(group, momentum, self.use_beta1)
        return lrs


def _phase(end_step: float, start_lr: str, end_lr: str, start_momentum: str,
           end_momentum: str) -> dict[str, Any]:
    """One phase of a OneCycleLR schedule: where it ends and which group entries hold
    its starting and ending lr and momentum."""
    return {"end_step": end_step, "start_lr": start_lr, "end_lr": end_lr,
            "start_momentum": start_momentum, "end_momentum": end_momentum}
