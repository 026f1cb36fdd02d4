"""Schedulers made of schedulers: ``SequentialLR`` (one after another) and
``ChainedScheduler`` (all at once)."""
from __future__ import annotations

from bisect import bisect_right
from typing import Any, Sequence

from ..errors import EmberTypeError
from ._lr_base import LRScheduler, check_optimizer
from ._lr_plateau import ReduceLROnPlateau
from .optimizer import Optimizer, OptimizerError


class _Composite(LRScheduler):
    """A scheduler made of other schedulers: its state dict nests theirs."""

    def _check_parts(self, schedulers: Sequence[LRScheduler], optimizer: Optimizer) -> None:
        owner = type(self).__name__
        if len(schedulers) < 1:
            raise OptimizerError(f"{owner}: expects at least one scheduler, got none")
        for i, scheduler in enumerate(schedulers):
            if not hasattr(scheduler, "optimizer"):
                raise EmberTypeError(f"{owner}: the scheduler at index {i} "
                                     f"({type(scheduler).__name__}) has no optimizer")
            if isinstance(scheduler, ReduceLROnPlateau):
                raise OptimizerError(f"{owner}: ReduceLROnPlateau (index {i}) can't be "
                                     "combined, as its step() needs a metric")
            if scheduler.optimizer is not optimizer:
                raise OptimizerError(f"{owner}: all schedulers must belong to the same "
                                     f"optimizer, but the {type(scheduler).__name__} at "
                                     f"index {i} has another one")

    def state_dict(self) -> dict[str, Any]:
        """The state, with each wrapped scheduler's state dict under ``_schedulers``."""
        state = {k: v for k, v in self.__dict__.items()
                 if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        parts = state.pop("_schedulers")
        self.__dict__.update(state)
        for scheduler, part in zip(self._schedulers, parts):
            scheduler.load_state_dict(part)


class SequentialLR(_Composite):
    """Run schedulers one after another, switching at the epochs in ``milestones``
    (one milestone fewer than schedulers); each restarts from its own epoch 0.

    >>> warmup = LinearLR(opt, start_factor=0.1, total_iters=5)
    >>> decay = CosineAnnealingLR(opt, T_max=95)
    >>> sched = SequentialLR(opt, [warmup, decay], milestones=[5])
    """

    def __init__(self, optimizer: Optimizer, schedulers: list[LRScheduler],
                 milestones: list[int], last_epoch: int = -1) -> None:
        check_optimizer("SequentialLR", optimizer)
        self._check_parts(schedulers, optimizer)
        if len(milestones) != len(schedulers) - 1:
            raise OptimizerError(f"SequentialLR: expects one milestone fewer than schedulers, "
                                 f"got {len(schedulers)} schedulers and {len(milestones)} "
                                 "milestones")
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        # Building each scheduler took a step; undo them all and start the first afresh.
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        for scheduler in self._schedulers:
            scheduler.last_epoch -= 1
        self._schedulers[0]._initial_step()
        self._last_lr = self._schedulers[0].get_last_lr()

    def step(self) -> None:
        """Advance one epoch with the scheduler whose turn it is."""
        self.last_epoch += 1
        index = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[index]
        if index > 0 and self._milestones[index - 1] == self.last_epoch:
            scheduler._step_count += 1
            scheduler._set_lrs(scheduler._jump_to(0))
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(_Composite):
    """Step several schedulers together each epoch; their effects multiply (for
    chainable schedules).

    >>> sched = ChainedScheduler([ConstantLR(opt, factor=0.1, total_iters=2),
    ...                           ExponentialLR(opt, gamma=0.9)])
    """

    def __init__(self, schedulers: Sequence[LRScheduler],
                 optimizer: Optimizer | None = None) -> None:
        if len(schedulers) < 1:
            raise OptimizerError("ChainedScheduler: expects at least one scheduler, got none")
        optimizer = optimizer if optimizer is not None else schedulers[0].optimizer
        self._check_parts(schedulers, optimizer)
        self._schedulers = list(schedulers)
        self.optimizer = optimizer
        self._last_lr = [group["lr"] for group in optimizer.param_groups]

    def step(self) -> None:
        """Step every scheduler once."""
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]
