"""``History``: every value the Trainer logged, with the step and epoch it was logged at."""
from __future__ import annotations

import math
from typing import Any, Iterator

__all__ = ["History"]


class History:
    """The log of a training run: rows of ``{"step", "epoch", name: value, ...}``.

    ``history["val_loss"]`` gives the values logged under a name, in order;
    :meth:`series` gives them with their steps. A Trainer's history goes into its
    checkpoints, so a resumed run continues the same history.

    >>> trainer.history["val_accuracy"][-1]
    0.97
    """

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def append(self, values: dict[str, float], step: int, epoch: int) -> None:
        """Add one row of values logged at ``step`` during ``epoch``."""
        self.rows.append({"step": step, "epoch": epoch, **values})

    def names(self) -> list[str]:
        """Every logged name (not ``step``/``epoch``), in first-logged order."""
        seen: dict[str, None] = {}
        for row in self.rows:
            for key in row:
                if key not in ("step", "epoch"):
                    seen.setdefault(key)
        return list(seen)

    def series(self, name: str) -> tuple[list[int], list[float]]:
        """``(steps, values)`` of everything logged under ``name``."""
        pairs = [(row["step"], row[name]) for row in self.rows if name in row]
        if not pairs and name not in self.names():
            from .errors import TrainerError
            raise TrainerError(f"History: nothing was logged under {name!r}; logged names: "
                               f"{self.names()}")
        return [p[0] for p in pairs], [p[1] for p in pairs]

    def __getitem__(self, name: str) -> list[float]:
        return self.series(name)[1]

    def __contains__(self, name: str) -> bool:
        return any(name in row for row in self.rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def last(self, name: str, default: float = math.nan) -> float:
        """The most recent value logged under ``name`` (``default`` if none)."""
        for row in reversed(self.rows):
            if name in row:
                return row[name]
        return default

    def state_dict(self) -> dict[str, Any]:
        """The rows, as JSON-able values (for checkpoints)."""
        return {"rows": [dict(row) for row in self.rows]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Replace the rows with those of :meth:`state_dict`."""
        self.rows = [dict(row) for row in state["rows"]]

    def __repr__(self) -> str:
        return f"History({len(self.rows)} rows: {', '.join(self.names())})"
