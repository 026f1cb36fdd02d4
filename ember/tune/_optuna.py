"""Optuna, imported on first use so ``import ember.tune`` works without it."""
from __future__ import annotations

from .errors import MissingDependencyError


def require_optuna():
    """The ``optuna`` module, or a :class:`MissingDependencyError` saying how to get it."""
    try:
        import optuna
    except ImportError:
        raise MissingDependencyError(
            "ember.tune needs Optuna, which is not installed: pip install 'ember[tune]' "
            "(or pip install optuna)") from None
    return optuna
