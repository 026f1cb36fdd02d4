"""``PruningCallback``: report a Trainer's validation metric to an Optuna trial and stop
the trial when the study's pruner says it is not worth finishing."""
from __future__ import annotations

import math
from typing import Any

from ..train import Callback
from ._optuna import require_optuna
from .errors import TuneError

__all__ = ["PruningCallback"]


class PruningCallback(Callback):
    """After each validation, report ``trainer.logged[monitor]`` to ``trial`` and raise
    ``optuna.TrialPruned`` when ``trial.should_prune()``.

    The step reported is the validation's index in the run (0, 1, 2, ...): one per
    epoch with the Trainer's default ``eval_every_n_epochs=1``, one per
    ``eval_every_n_steps`` otherwise — so trials with different batch sizes still
    compare at the same points, and a pruner's ``n_warmup_steps`` counts validations.

    Args:
        trial: the ``optuna.Trial`` the objective was given.
        monitor: the logged name to report (``"val_loss"``, ``"val_accuracy"``, ...);
            the study's ``direction`` says whether lower or higher is better.

    Attributes:
        reported: ``(step, value)`` for every value reported.
        pruned_at: the step at which the trial was pruned (None if it was not).

    >>> def objective(trial):
    ...     lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
    ...     ...
    ...     trainer = Trainer(model, opt, F.cross_entropy, train_loader=train,
    ...                       val_loader=val, max_epochs=10,
    ...                       callbacks=[ember.tune.PruningCallback(trial, "val_loss")])
    ...     trainer.fit()
    ...     return trainer.logged["val_loss"]
    """

    def __init__(self, trial, monitor: str = "val_loss") -> None:
        if not (callable(getattr(trial, "report", None))
                and callable(getattr(trial, "should_prune", None))):
            raise TuneError(f"PruningCallback: trial must be an optuna.Trial (with report "
                            f"and should_prune), got {type(trial).__name__}")
        if not isinstance(monitor, str) or not monitor:
            raise TuneError(f"PruningCallback: monitor must be a logged name such as "
                            f"'val_loss', got {monitor!r}")
        self.trial, self.monitor = trial, monitor
        self.reported: list[tuple[int, float]] = []
        self.pruned_at: int | None = None

    def on_validation_end(self, trainer) -> None:
        if self.monitor not in trainer.logged:
            raise TuneError(f"PruningCallback: monitor={self.monitor!r} was not logged; "
                            f"logged names are {sorted(trainer.logged)}")
        value = float(trainer.logged[self.monitor])
        step = len(self.reported)
        self.reported.append((step, value))
        reported = value
        if not math.isfinite(value):  # Optuna cannot rank NaN: report the worst value
            reported = math.inf if _minimizing(self.trial) else -math.inf
        self.trial.report(reported, step)
        if self.trial.should_prune():
            self.pruned_at = step
            optuna = require_optuna()
            raise optuna.TrialPruned(f"trial {getattr(self.trial, 'number', '?')} pruned "
                                     f"at validation {step}: {self.monitor} = {value:.6g}")

    def state_dict(self) -> dict[str, Any]:
        return {"reported": [list(r) for r in self.reported]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.reported = [(int(s), float(v)) for s, v in state["reported"]]


def _minimizing(trial) -> bool:
    study = getattr(trial, "study", None)
    direction = getattr(study, "direction", None)
    return getattr(direction, "name", "MINIMIZE") != "MAXIMIZE"
