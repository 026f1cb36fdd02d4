"""The errors ``ember.tune`` raises."""
from __future__ import annotations

from ..errors import EmberError, EmberValueError

__all__ = ["TuneError", "MissingDependencyError"]


class TuneError(EmberValueError):
    """A search space, sampler, pruner or study setting that cannot be used; the message
    names the entry, what it got and what it expected."""


class MissingDependencyError(EmberError, ImportError):
    """An optional package ember needs here is not installed; the message says which
    extra to install."""
