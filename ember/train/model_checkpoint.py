"""``ModelCheckpoint``: save Trainer checkpoints every N steps or epochs, keep the last
K, and keep the best by a monitored value."""
from __future__ import annotations

import os
from typing import Any

from .callbacks import Callback, check_mode, improves, monitored
from .checkpoint import checkpoint_name
from .errors import TrainerError

__all__ = ["ModelCheckpoint"]


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


class ModelCheckpoint(Callback):
    """Write full Trainer checkpoints (model, optimizer, scheduler, RNG states, loader
    position, ...; see :meth:`Trainer.save_checkpoint`) during training.

    Args:
        dirpath: the folder (default: the Trainer's ``checkpoint_dir``).
        every_n_steps: save after every N-th optimizer step.
        every_n_epochs: save after every N-th epoch.
        keep_last_k: keep only the K most recent periodic checkpoints (None: all).
        monitor: a logged name for ``save_best`` (``"val_loss"``).
        mode: ``"min"`` or ``"max"``: which direction of ``monitor`` is better.
        save_best: after each validation, save ``best-epoch=E-step=S.safetensors`` when
            ``monitor`` improved (replacing the previous best).

    Attributes:
        saved: the periodic checkpoints written and kept, oldest first.
        best_path: the best checkpoint's path; ``best_score`` its value.

    >>> ckpt = ember.train.ModelCheckpoint(every_n_steps=100, keep_last_k=3,
    ...                                    monitor="val_loss", save_best=True)
    """

    def __init__(self, dirpath: str | os.PathLike | None = None,
                 every_n_steps: int | None = None, every_n_epochs: int | None = None,
                 keep_last_k: int | None = None, monitor: str | None = None,
                 mode: str = "min", save_best: bool = False) -> None:
        check_mode("ModelCheckpoint", mode)
        for name, value in (("every_n_steps", every_n_steps),
                            ("every_n_epochs", every_n_epochs),
                            ("keep_last_k", keep_last_k)):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise TrainerError(f"ModelCheckpoint: {name} must be a positive int or "
                                   f"None, got {value!r}")
        if save_best and monitor is None:
            raise TrainerError("ModelCheckpoint: save_best=True needs monitor= (the logged "
                               "name to compare, e.g. 'val_loss')")
        self.dirpath = None if dirpath is None else os.fspath(dirpath)
        self.every_n_steps, self.every_n_epochs = every_n_steps, every_n_epochs
        self.keep_last_k = keep_last_k
        self.monitor, self.mode, self.save_best = monitor, mode, save_best
        self.saved: list[str] = []
        self.best_path: str | None = None
        self.best_score: float | None = None

    def _dir(self, trainer) -> str:
        dirpath = self.dirpath or trainer.checkpoint_dir
        if dirpath is None:
            raise TrainerError("ModelCheckpoint: no folder to save in; give dirpath= or "
                               "the Trainer's checkpoint_dir=")
        return dirpath

    def on_train_start(self, trainer) -> None:
        self._dir(trainer)  # fail before training, not at the first save

    def _save_periodic(self, trainer) -> None:
        epoch, _ = trainer.position()
        path = os.path.join(self._dir(trainer), checkpoint_name(epoch, trainer.global_step))
        if self.saved and self.saved[-1] == path:
            return  # (the step and the epoch boundary coincide: already written)
        self.saved.append(path)  # (before writing, so the checkpoint lists itself)
        try:
            trainer.save_checkpoint(path)
        except BaseException:
            self.saved.pop()
            raise
        if self.keep_last_k is not None:
            while len(self.saved) > self.keep_last_k:
                _remove(self.saved.pop(0))

    def on_step_end(self, trainer) -> None:
        if self.every_n_steps and trainer.global_step % self.every_n_steps == 0:
            self._save_periodic(trainer)

    def on_epoch_end(self, trainer) -> None:
        if self.every_n_epochs and (trainer.epoch + 1) % self.every_n_epochs == 0:
            self._save_periodic(trainer)

    def on_validation_end(self, trainer) -> None:
        if not self.save_best:
            return
        value = monitored("ModelCheckpoint", trainer, self.monitor)
        if not improves(value, self.best_score, self.mode, 0.0):
            return
        path = os.path.join(self._dir(trainer),
                            checkpoint_name(trainer.epoch, trainer.global_step, "best-"))
        previous = self.best_path
        self.best_score, self.best_path = value, path
        trainer.save_checkpoint(path)
        if previous is not None and previous != path:
            _remove(previous)

    def state_dict(self) -> dict[str, Any]:
        return {"saved": list(self.saved), "best_path": self.best_path,
                "best_score": self.best_score}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.saved = [p for p in state["saved"] if os.path.exists(p)]
        self.best_path, self.best_score = state["best_path"], state["best_score"]
