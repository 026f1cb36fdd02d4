"""``ReduceLROnPlateau``: lower the learning rate when a metric stops improving."""
from __future__ import annotations

import math
import warnings
from typing import Any

from ._lr_base import EPOCH_DEPRECATED, LRScheduler, check_optimizer
from .optimizer import Optimizer, OptimizerError


class ReduceLROnPlateau(LRScheduler):
    """Multiply the lr by ``factor`` when a metric has stopped improving for
    ``patience`` epochs. Call ``step(metric)`` after each validation.

    Args:
        mode: ``"min"`` (the metric should fall, e.g. a loss) or ``"max"``.
        factor: the multiplier, < 1.
        patience: epochs without improvement to tolerate before reducing.
        threshold: the least change that counts as an improvement.
        threshold_mode: ``"rel"`` (relative to the best value) or ``"abs"``.
        cooldown: epochs to wait after a reduction before counting again.
        min_lr: the lowest lr, for all groups or one per group.
        eps: reductions smaller than this are skipped.

    >>> sched = ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=3)
    >>> sched.step(val_loss)
    """

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, threshold_mode: str = "rel",
                 cooldown: int = 0, min_lr: float | list[float] = 0, eps: float = 1e-8) -> None:
        if factor >= 1.0:
            raise OptimizerError(f"ReduceLROnPlateau: factor should be < 1.0, got {factor}")
        self.factor = factor
        check_optimizer("ReduceLROnPlateau", optimizer)
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise OptimizerError(f"ReduceLROnPlateau: expected "
                                     f"{len(optimizer.param_groups)} min_lrs, got "
                                     f"{len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = [group["lr"] for group in optimizer.param_groups]
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _init_is_better(self, mode: str, threshold: float, threshold_mode: str) -> None:
        if mode not in ("min", "max"):
            raise OptimizerError(f"ReduceLROnPlateau: mode must be 'min' or 'max', got "
                                 f"{mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise OptimizerError(f"ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', "
                                 f"got {threshold_mode!r}")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def _reset(self) -> None:
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def is_better(self, a: float, best: float) -> bool:
        """Whether metric ``a`` improves on ``best`` by more than the threshold."""
        if self.mode == "min":
            bound = best * (1.0 - self.threshold) if self.threshold_mode == "rel" \
                else best - self.threshold
            return a < bound
        bound = best * (self.threshold + 1.0) if self.threshold_mode == "rel" \
            else best + self.threshold
        return a > bound

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def step(self, metrics: Any, epoch: int | None = None) -> None:
        """Record this epoch's metric (a number or a one-element tensor) and reduce the
        lr if it has not improved for more than ``patience`` epochs.

        With ``ember.jit``, call it outside the compiled step, on the metric the step
        returns: a metric computed inside the traced function raises a ``TraceError``."""
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(EPOCH_DEPRECATED, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _reduce_lr(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise OptimizerError(f"ReduceLROnPlateau: the optimizer has {len(groups)} "
                                     f"parameter groups but min_lr gave {len(self.min_lrs)} "
                                     "values; set the scheduler's min_lrs to match")
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, min_lr in zip(groups, self.min_lrs):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, min_lr)
            if old_lr - new_lr > self.eps:
                group["lr"] = new_lr

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)
