"""Checking and normalising the Trainer's arguments, and reading batches."""
from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from .errors import TrainerError
from .metrics import Metric

__all__ = ["state_of", "check_duck", "check_positive", "named_metrics", "batch_size",
           "loader_length"]


def state_of(obj) -> Any:
    """``obj.state_dict()``, or None for no object."""
    return None if obj is None else obj.state_dict()


def check_duck(name: str, obj, *methods: str) -> None:
    """Raise unless ``obj`` has each of ``methods`` (duck typing, named in the error)."""
    missing = [m for m in methods if not callable(getattr(obj, m, None))]
    if missing:
        raise TrainerError(f"Trainer: {name} must have {', '.join(methods)}; a "
                           f"{type(obj).__name__} lacks {', '.join(missing)}")


def check_positive(name: str, value, allow_none: bool = True) -> None:
    """Raise unless ``value`` is a positive int (or None when allowed)."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TrainerError(f"Trainer: {name} must be a positive int"
                           f"{' or None' if allow_none else ''}, got {value!r}")


def named_metrics(metrics) -> dict[str, Metric]:
    """``{name: metric}`` from a Metric, a list of them or a dict."""
    if metrics is None:
        return {}
    if isinstance(metrics, Metric):
        metrics = [metrics]
    if isinstance(metrics, dict):
        items = list(metrics.items())
    else:
        items = [(getattr(m, "name", None), m) for m in metrics]
    out: dict[str, Metric] = {}
    for name, metric in items:
        if not isinstance(metric, Metric):
            raise TrainerError(f"Trainer: metrics must be ember.train.metrics.Metric "
                               f"objects, got {type(metric).__name__}")
        if name in out:
            raise TrainerError(f"Trainer: two metrics are named {name!r}; pass a dict "
                               "{name: metric} to name them apart")
        out[name] = metric
    return out


def batch_size(batch) -> int:
    """The number of samples in a batch: the first dimension of its first tensor."""
    if isinstance(batch, Tensor):
        return int(batch.shape[0]) if batch.ndim else 1
    if isinstance(batch, (list, tuple)) and batch:
        return batch_size(batch[0])
    if isinstance(batch, dict) and batch:
        return batch_size(next(iter(batch.values())))
    return 1


def loader_length(loader) -> int | None:
    """``len(loader)``, or None for a loader without a length."""
    try:
        return len(loader)
    except TypeError:
        return None
