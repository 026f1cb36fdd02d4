"""Iterative pruning while the Trainer fine-tunes: :class:`PruningCallback`."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..errors import EmberValueError
from ..nn import Module
from ..train.callbacks import Callback
from .methods import _current, global_unstructured, l1_unstructured, prunable_parameters

__all__ = ["PruningCallback", "current_sparsity"]


def current_sparsity(parameters) -> float:
    """The share of masked-out entries over ``(module, name)`` pairs."""
    masked = total = 0
    for module, name in parameters:
        _, mask = _current(module, name)
        masked += int(np.count_nonzero(mask == 0))
        total += mask.size
    return masked / total if total else 0.0


class PruningCallback(Callback):
    """Raise the sparsity of the model's weights at the start of each epoch, so pruning
    and fine-tuning alternate (Zhu & Gupta's gradual pruning).

    Args:
        schedule: the target sparsity per epoch: a list (epoch ``e`` uses entry ``e``,
            the last entry after the end) or a function ``epoch -> sparsity``, each in
            [0, 1) and never decreasing.
        parameters: ``(module, name)`` pairs to prune (default: the weights of every
            Linear and Conv layer of the trainer's model).
        scope: ``"global"`` (one magnitude threshold over all of them) or ``"layer"``
            (each reaches the target sparsity on its own).

    >>> cb = ember.prune.PruningCallback(schedule=[0.5, 0.7, 0.8, 0.8])
    >>> ember.train.Trainer(net, opt, F.cross_entropy, callbacks=[cb], max_epochs=4).fit(train)
    """

    def __init__(self, schedule: Sequence[float] | Callable[[int], float],
                 parameters: list[tuple[Module, str]] | None = None,
                 scope: str = "global") -> None:
        if scope not in ("global", "layer"):
            raise EmberValueError(f"PruningCallback: scope must be 'global' or 'layer', got "
                                  f"{scope!r}")
        if not callable(schedule):
            schedule = list(schedule)
            if not schedule:
                raise EmberValueError("PruningCallback: schedule is empty; give a sparsity "
                                      "per epoch")
        self.schedule, self.parameters, self.scope = schedule, parameters, scope
        self.history: list[float] = []

    def target(self, epoch: int) -> float:
        """The sparsity the schedule asks for at ``epoch``."""
        if callable(self.schedule):
            value = float(self.schedule(epoch))
        else:
            value = float(self.schedule[min(epoch, len(self.schedule) - 1)])
        if not 0.0 <= value < 1.0:
            raise EmberValueError(f"PruningCallback: the schedule gave sparsity {value} for "
                                  f"epoch {epoch}; expected a value in [0, 1)")
        return value

    def on_epoch_start(self, trainer) -> None:
        params = self.parameters or prunable_parameters(trainer.model)
        goal = self.target(trainer.epoch)
        groups = [params] if self.scope == "global" else [[pair] for pair in params]
        for group in groups:
            now = current_sparsity(group)
            if goal <= now:
                continue
            # The share of the still unpruned weights to take away to reach the goal.
            share = min(1.0, (goal - now) / (1.0 - now))
            if self.scope == "global":
                global_unstructured(group, amount=share)
            else:
                l1_unstructured(*group[0], amount=share)
        self.history.append(current_sparsity(params))

    def state_dict(self) -> dict:
        return {"history": list(self.history)}

    def load_state_dict(self, state: dict) -> None:
        self.history = list(state.get("history", []))
