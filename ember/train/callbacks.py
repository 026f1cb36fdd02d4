"""Callbacks: code the Trainer calls at fixed points of training.

The hooks, in the order a run calls them::

    on_train_start
      on_epoch_start
        on_step_start, on_step_end          (once per optimizer step)
        on_validation_start, on_validation_end   (every eval_every_n_steps)
      on_validation_start, on_validation_end     (every eval_every_n_epochs)
      on_epoch_end
    on_train_end
    on_exception                            (training raised; before it propagates)
    on_save_checkpoint, on_load_checkpoint  (with the checkpoint dict)

Each hook takes the trainer (and the checkpoint dict, or the exception). A callback
with state that must survive a resume returns it from ``state_dict()``.
"""
from __future__ import annotations

import math
from typing import Any

from .errors import TrainerError

__all__ = ["Callback", "EarlyStopping", "LearningRateMonitor"]


class Callback:
    """Base class of callbacks: override the hooks you need (each does nothing here).

    >>> class PrintLoss(ember.train.Callback):
    ...     def on_step_end(self, trainer):
    ...         print(trainer.global_step, trainer.logged["train_loss_step"])
    """

    def on_train_start(self, trainer) -> None:
        """Before the first epoch (after a resume has been loaded)."""

    def on_train_end(self, trainer) -> None:
        """After the last epoch or step (not when training raised)."""

    def on_epoch_start(self, trainer) -> None:
        """Before the first batch of an epoch (``trainer.epoch``)."""

    def on_epoch_end(self, trainer) -> None:
        """After an epoch, its validation and its scheduler step."""

    def on_step_start(self, trainer) -> None:
        """Before an optimizer step's first batch is processed."""

    def on_step_end(self, trainer) -> None:
        """After an optimizer step (``trainer.global_step`` counts it; the step's loss
        is ``trainer.last_loss``)."""

    def on_validation_start(self, trainer) -> None:
        """Before the validation loader is run."""

    def on_validation_end(self, trainer) -> None:
        """After validation; its values are in ``trainer.logged`` (``val_loss``, ...)."""

    def on_exception(self, trainer, exception: BaseException) -> None:
        """Training raised ``exception`` (the emergency checkpoint is written)."""

    def on_save_checkpoint(self, trainer, checkpoint: dict) -> None:
        """A checkpoint is about to be written; entries may be added to it."""

    def on_load_checkpoint(self, trainer, checkpoint: dict) -> None:
        """A checkpoint was loaded (after the trainer restored its own state)."""

    def state_dict(self) -> dict[str, Any]:
        """State to keep in checkpoints (JSON-able values or tensors)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""

    @property
    def state_key(self) -> str:
        """The key of this callback's state in a checkpoint."""
        return type(self).__name__


def check_mode(owner: str, mode: str) -> None:
    if mode not in ("min", "max"):
        raise TrainerError(f"{owner}: mode must be 'min' or 'max', got {mode!r}")


def monitored(owner: str, trainer, monitor: str) -> float:
    """The latest value logged under ``monitor``; an error naming the logged names if
    there is none."""
    if monitor not in trainer.logged:
        raise TrainerError(f"{owner}: monitor={monitor!r} was not logged; logged names are "
                           f"{sorted(trainer.logged)} (val_ names need a val_loader)")
    return float(trainer.logged[monitor])


def improves(value: float, best: float | None, mode: str, min_delta: float) -> bool:
    """Whether ``value`` beats ``best`` by more than ``min_delta`` in direction
    ``mode``."""
    if best is None:
        return math.isfinite(value)
    return value < best - min_delta if mode == "min" else value > best + min_delta


class EarlyStopping(Callback):
    """Stop training when a monitored value stops improving.

    Checked after each validation: when ``monitor`` has not improved by more than
    ``min_delta`` on its best for ``patience`` validations in a row (or is NaN/inf),
    the trainer stops at the end of that step or epoch.

    Args:
        monitor: a logged name (``"val_loss"``, ``"val_accuracy"``, ...).
        mode: ``"min"`` (lower is better) or ``"max"``.
        patience: validations without improvement before stopping.
        min_delta: the smallest change that counts as an improvement.

    Attributes:
        best: the best value seen.
        wait: validations since the last improvement.
        stopped_epoch: the epoch at which it stopped training (None if it did not).

    >>> ember.train.EarlyStopping("val_loss", mode="min", patience=3)
    """

    def __init__(self, monitor: str = "val_loss", mode: str = "min", patience: int = 3,
                 min_delta: float = 0.0) -> None:
        check_mode("EarlyStopping", mode)
        if not isinstance(patience, int) or patience < 0:
            raise TrainerError(f"EarlyStopping: patience must be an int >= 0, got "
                               f"{patience!r}")
        if min_delta < 0:
            raise TrainerError(f"EarlyStopping: min_delta must be >= 0, got {min_delta}")
        self.monitor, self.mode = monitor, mode
        self.patience, self.min_delta = patience, min_delta
        self.best: float | None = None
        self.wait = 0
        self.stopped_epoch: int | None = None

    def on_validation_end(self, trainer) -> None:
        value = monitored("EarlyStopping", trainer, self.monitor)
        if improves(value, self.best, self.mode, self.min_delta):
            self.best, self.wait = value, 0
            return
        self.wait += 1
        if self.wait >= self.patience or not math.isfinite(value):
            trainer.should_stop = True
            self.stopped_epoch = trainer.epoch

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "wait": self.wait, "stopped_epoch": self.stopped_epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best, self.wait = state["best"], state["wait"]
        self.stopped_epoch = state["stopped_epoch"]


class LearningRateMonitor(Callback):
    """Log the learning rate each optimizer step (or epoch) uses: ``lr`` for one
    parameter group, ``lr/group{i}`` for several.

    Args:
        logging_interval: ``"step"`` or ``"epoch"``.

    Attributes:
        lrs: ``(step, {name: lr})`` for every value logged.
    """

    def __init__(self, logging_interval: str = "step") -> None:
        if logging_interval not in ("step", "epoch"):
            raise TrainerError(f"LearningRateMonitor: logging_interval must be 'step' or "
                               f"'epoch', got {logging_interval!r}")
        self.logging_interval = logging_interval
        self.lrs: list[tuple[int, dict[str, float]]] = []

    def _log(self, trainer) -> None:
        groups = trainer.optimizer.param_groups
        values = {"lr": float(groups[0]["lr"])} if len(groups) == 1 else \
            {f"lr/group{i}": float(g["lr"]) for i, g in enumerate(groups)}
        self.lrs.append((trainer.global_step, values))
        trainer.log(values)

    def on_step_start(self, trainer) -> None:
        if self.logging_interval == "step":
            self._log(trainer)

    def on_epoch_start(self, trainer) -> None:
        if self.logging_interval == "epoch":
            self._log(trainer)

    def state_dict(self) -> dict[str, Any]:
        return {"lrs": [[step, values] for step, values in self.lrs]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lrs = [(step, values) for step, values in state["lrs"]]
