"""The errors ``ember.train`` raises: a bad Trainer argument, a loss that is not a
scalar, a loss that is not finite, a checkpoint that does not fit."""
from __future__ import annotations

from ..errors import EmberError, EmberValueError

__all__ = ["TrainerError", "NonFiniteLossError"]


class TrainerError(EmberValueError):
    """A Trainer, callback, metric or logger given something it cannot use; the message
    names the argument, what it got and what it expected."""


class NonFiniteLossError(EmberError):
    """The loss came out NaN or infinite; the message names the step, epoch and batch.

    Attributes:
        step: the global step (optimizer steps completed before this one).
        epoch: the epoch of the batch.
        batch: the index of the batch within its epoch.
    """

    def __init__(self, message: str, step: int, epoch: int, batch: int) -> None:
        super().__init__(message)
        self.step, self.epoch, self.batch = step, epoch, batch
