"""Learning-rate schedulers: each one rewrites ``group["lr"]`` of an optimizer's
parameter groups when its ``step()`` is called (once per epoch, or per batch for
OneCycleLR and CyclicLR), with PyTorch's names, formulas and state dicts.

Most schedules are *chainable*: they update the current ``lr`` recursively
(``lr *= gamma``), so several schedulers can act on one optimizer. ``state_dict()``
holds plain numbers, lists and strings (JSON-serialisable); functions such as
``LambdaLR``'s lambdas are not saved.

>>> sched = ember.optim.lr_scheduler.StepLR(opt, step_size=30, gamma=0.1)
>>> for epoch in range(100):
...     train_one_epoch(); sched.step()
"""
from __future__ import annotations

import math
from bisect import bisect_right
from typing import Any, Callable, Iterable

from ..errors import EmberTypeError
from ._lr_base import LRScheduler, callable_state, check_optimizer, per_group
from ._lr_combine import ChainedScheduler, SequentialLR
from ._lr_cyclic import CyclicLR, OneCycleLR
from ._lr_plateau import ReduceLROnPlateau
from .optimizer import Optimizer, OptimizerError

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR",
           "ConstantLR", "LinearLR", "ExponentialLR", "SequentialLR", "CosineAnnealingLR",
           "ChainedScheduler", "ReduceLROnPlateau", "CyclicLR", "CosineAnnealingWarmRestarts",
           "OneCycleLR", "PolynomialLR"]


class LambdaLR(LRScheduler):
    """Set each group's lr to ``initial_lr * lr_lambda(epoch)``.

    Args:
        lr_lambda: a function of the epoch, or one function per parameter group.

    >>> sched = LambdaLR(opt, lr_lambda=lambda epoch: 0.95 ** epoch)
    """

    def __init__(self, optimizer: Optimizer, lr_lambda: Callable | list[Callable],
                 last_epoch: int = -1) -> None:
        check_optimizer(type(self).__name__, optimizer)
        self.optimizer = optimizer
        self.lr_lambdas = per_group(type(self).__name__, "lr_lambda", optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        return [base_lr * fn(self.last_epoch) for fn, base_lr in zip(self.lr_lambdas,
                                                                       self.base_lrs)]

    def state_dict(self) -> dict[str, Any]:
        """The state, without the lambdas: a plain function is saved as ``None``, a
        callable object as its attribute dict."""
        state = {k: v for k, v in self.__dict__.items()
                 if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [callable_state(fn) for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        saved = state.pop("lr_lambdas")
        self.__dict__.update(state)
        for fn, attrs in zip(self.lr_lambdas, saved):
            if attrs is not None:
                fn.__dict__.update(attrs)


class MultiplicativeLR(LambdaLR):
    """Multiply each group's lr by ``lr_lambda(epoch)`` at every step.

    >>> sched = MultiplicativeLR(opt, lr_lambda=lambda epoch: 0.95)
    """

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        if self._is_initial:
            return [group["lr"] for group in self.optimizer.param_groups]
        return [group["lr"] * fn(self.last_epoch)
                for fn, group in zip(self.lr_lambdas, self.optimizer.param_groups)]


class StepLR(LRScheduler):
    """Multiply the lr by ``gamma`` every ``step_size`` epochs.

    >>> sched = StepLR(opt, step_size=30, gamma=0.1)  # lr 0.05 until epoch 29, then 0.005
    """

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        groups = self.optimizer.param_groups
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [group["lr"] for group in groups]
        return [group["lr"] * self.gamma for group in groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size)
                for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the lr by ``gamma`` at each epoch listed in ``milestones``.

    >>> sched = MultiStepLR(opt, milestones=[30, 80], gamma=0.1)
    """

    def __init__(self, optimizer: Optimizer, milestones: Iterable[int], gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.milestones = sorted(milestones)  # a list (not a Counter) stays JSON-able
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        groups = self.optimizer.param_groups
        hits = self.milestones.count(self.last_epoch)
        if hits == 0:
            return [group["lr"] for group in groups]
        return [group["lr"] * self.gamma ** hits for group in groups]

    def _get_closed_form_lr(self) -> list[float]:
        passed = bisect_right(self.milestones, self.last_epoch)
        return [base_lr * self.gamma ** passed for base_lr in self.base_lrs]


class ConstantLR(LRScheduler):
    """Scale the lr by ``factor`` until epoch ``total_iters``, then restore it.

    >>> sched = ConstantLR(opt, factor=0.5, total_iters=4)
    """

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1) -> None:
        if not 0 <= factor <= 1.0:
            raise OptimizerError(f"ConstantLR: factor must be between 0 and 1, got {factor}")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [group["lr"] * self.factor for group in groups]
        if self.last_epoch != self.total_iters:
            return [group["lr"] for group in groups]
        return [group["lr"] * (1.0 / self.factor) for group in groups]

    def _get_closed_form_lr(self) -> list[float]:
        reached = self.last_epoch >= self.total_iters
        return [base_lr * (self.factor + reached * (1 - self.factor))
                for base_lr in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale the lr by a factor going linearly from ``start_factor`` to ``end_factor``
    over ``total_iters`` epochs (a warm-up when ``start_factor`` < 1).

    >>> sched = LinearLR(opt, start_factor=0.1, total_iters=10)
    """

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3,
                 end_factor: float = 1.0, total_iters: int = 5, last_epoch: int = -1) -> None:
        if not 0 < start_factor <= 1.0:
            raise OptimizerError(f"LinearLR: start_factor must be in (0, 1], got "
                                 f"{start_factor}")
        if not 0 <= end_factor <= 1.0:
            raise OptimizerError(f"LinearLR: end_factor must be in [0, 1], got {end_factor}")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [group["lr"] * self.start_factor for group in groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return [group["lr"] for group in groups]
        span = self.end_factor - self.start_factor
        ratio = 1.0 + span / (self.total_iters * self.start_factor
                              + (self.last_epoch - 1) * span)
        return [group["lr"] * ratio for group in groups]

    def _get_closed_form_lr(self) -> list[float]:
        done = min(self.total_iters, self.last_epoch) / self.total_iters
        factor = self.start_factor + (self.end_factor - self.start_factor) * done
        return [base_lr * factor for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the lr by ``gamma`` every epoch.

    >>> sched = ExponentialLR(opt, gamma=0.9)
    """

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        groups = self.optimizer.param_groups
        if self._is_initial or self.last_epoch == 0:
            return [group["lr"] for group in groups]
        return [group["lr"] * self.gamma for group in groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * self.gamma ** self.last_epoch for base_lr in self.base_lrs]


class PolynomialLR(LRScheduler):
    """Decay the lr to 0 over ``total_iters`` epochs as ``(1 - epoch/total_iters)^power``.

    >>> sched = PolynomialLR(opt, total_iters=4, power=2.0)
    """

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0,
                 last_epoch: int = -1) -> None:
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        groups = self.optimizer.param_groups
        if self._is_initial or self.last_epoch == 0 or self.last_epoch > self.total_iters:
            return [group["lr"] for group in groups]
        decay = ((1.0 - self.last_epoch / self.total_iters)
                 / (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return [group["lr"] * decay for group in groups]

    def _get_closed_form_lr(self) -> list[float]:
        left = 1.0 - min(self.total_iters, self.last_epoch) / self.total_iters
        return [base_lr * left ** self.power for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    r"""Anneal the lr from its initial value to ``eta_min`` along half a cosine over
    ``T_max`` epochs (and back up over the next ``T_max``, and so on):
    :math:`\eta_t = \eta_{min} + (\eta_{max} - \eta_{min})(1 + \cos(\pi t / T_{max})) / 2`,
    computed recursively from the current lr, as PyTorch does.

    >>> sched = CosineAnnealingLR(opt, T_max=100, eta_min=1e-5)
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        groups = self.optimizer.param_groups
        t, T, eta_min = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial or t == 0:
            return [group["lr"] for group in groups]
        if (t - 1 - T) % (2 * T) == 0:  # the bottom of the cosine: start climbing back
            return [group["lr"] + (base_lr - eta_min) * (1 - math.cos(math.pi / T)) / 2
                    for base_lr, group in zip(self.base_lrs, groups)]
        ratio = (1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T))
        return [ratio * (group["lr"] - eta_min) + eta_min for group in groups]

    def _get_closed_form_lr(self) -> list[float]:
        cos = math.cos(math.pi * self.last_epoch / self.T_max)
        return [self.eta_min + (base_lr - self.eta_min) * (1 + cos) / 2
                for base_lr in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing that restarts from the initial lr after ``T_0`` epochs, the
    period growing by ``T_mult`` at each restart (SGDR). ``step(epoch)`` accepts
    fractional epochs, e.g. ``sched.step(epoch + i / iters_per_epoch)`` per batch.

    >>> sched = CosineAnnealingWarmRestarts(opt, T_0=10, T_mult=2)
    """

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:
        if not isinstance(T_0, int) or T_0 <= 0:
            raise OptimizerError(f"CosineAnnealingWarmRestarts: T_0 must be a positive "
                                 f"integer, got {T_0!r}")
        if not isinstance(T_mult, int) or T_mult < 1:
            raise OptimizerError(f"CosineAnnealingWarmRestarts: T_mult must be an integer "
                                 f">= 1, got {T_mult!r}")
        if not isinstance(eta_min, (float, int)):
            raise EmberTypeError(f"CosineAnnealingWarmRestarts: eta_min must be a number, "
                                 f"got {type(eta_min).__name__}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        cos = math.cos(math.pi * self.T_cur / self.T_i)
        return [self.eta_min + (base_lr - self.eta_min) * (1 + cos) / 2
                for base_lr in self.base_lrs]

    def step(self, epoch: float | None = None) -> None:
        """Advance one epoch, or go to ``epoch`` (may be fractional; not deprecated here)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise OptimizerError(f"CosineAnnealingWarmRestarts: expected a non-negative "
                                     f"epoch, got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        self._set_lrs(self._compute_lr())

