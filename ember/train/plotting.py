"""``plot_history``: training and validation curves as a PNG, through matplotlib."""
from __future__ import annotations

import os

from .errors import TrainerError
from .history import History

__all__ = ["plot_history"]


def _panels(history: History) -> dict[str, list[str]]:
    """Logged names grouped by what they measure: ``{"loss": ["train_loss",
    "val_loss", "train_loss_step"], "accuracy": [...], "lr": ["lr"]}``."""
    panels: dict[str, list[str]] = {}
    for name in history.names():
        base = name
        for prefix in ("train_", "val_", "test_"):
            if name.startswith(prefix):
                base = name[len(prefix):]
                break
        if base.endswith("_step"):
            base = base[:-len("_step")]
        panels.setdefault(base.split("/")[0], []).append(name)
    return panels


def plot_history(history: History, path: str | os.PathLike,
                 names: list[str] | None = None) -> str:
    """Save one panel per measured quantity (loss, accuracy, lr, ...) with its training
    and validation curves against the optimizer step, as a PNG; returns the path.

    Args:
        history: a Trainer's :attr:`~Trainer.history`.
        path: the PNG file to write.
        names: only these logged names (default: all).

    >>> ember.train.plot_history(trainer.history, "curves.png")
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise TrainerError("plot_history needs matplotlib: pip install matplotlib") from None
    if not isinstance(history, History):
        raise TrainerError(f"plot_history: expected a Trainer's History, got "
                           f"{type(history).__name__}")
    panels = _panels(history)
    if names is not None:
        panels = {k: [n for n in v if n in names] for k, v in panels.items()}
        panels = {k: v for k, v in panels.items() if v}
    if not panels:
        raise TrainerError("plot_history: nothing to plot (the history is empty)")
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.5), squeeze=False)
    for ax, (title, members) in zip(axes[0], panels.items()):
        for name in members:
            steps, values = history.series(name)
            style = {"alpha": 0.4, "linewidth": 0.8} if name.endswith("_step") else \
                {"marker": "o" if len(values) < 30 else None}
            ax.plot(steps, values, label=name, **style)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.legend(fontsize="small")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path = os.fspath(path)
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)
    return path
