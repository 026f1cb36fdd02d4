"""``sparsity_report``: how many weights of each layer are zero."""
from __future__ import annotations

import numpy as np

from ..nn import Module
from .methods import _current, pruned_parameters

__all__ = ["SparsityReport", "sparsity_report"]


class SparsityReport:
    """Zeros per parameter and in total. ``layers`` maps ``"<module>.<param>"`` to
    ``{"params", "zeros", "sparsity", "pruned"}``; ``total`` holds the same over them
    all; ``str(report)`` is a table.

    Attributes:
        layers: the per-parameter rows, in the model's order.
        total: the sums (``sparsity`` = zeros / params).
    """

    def __init__(self, layers: dict[str, dict]) -> None:
        self.layers = layers
        params = sum(row["params"] for row in layers.values())
        zeros = sum(row["zeros"] for row in layers.values())
        self.total = {"params": params, "zeros": zeros,
                      "sparsity": zeros / params if params else 0.0}

    def to_dict(self) -> dict:
        """``{"layers": ..., "total": ...}``, JSON-ready."""
        return {"layers": self.layers, "total": self.total}

    def __str__(self) -> str:
        width = max([len("total")] + [len(name) for name in self.layers])
        lines = [f"{'parameter':<{width}}  {'params':>10}  {'zeros':>10}  {'sparsity':>8}"]
        for name, row in self.layers.items():
            mark = " (pruned)" if row["pruned"] else ""
            lines.append(f"{name:<{width}}  {row['params']:>10,d}  {row['zeros']:>10,d}  "
                         f"{row['sparsity']:>8.2%}{mark}")
        t = self.total
        lines.append(f"{'total':<{width}}  {t['params']:>10,d}  {t['zeros']:>10,d}  "
                     f"{t['sparsity']:>8.2%}")
        return "\n".join(lines)

    __repr__ = __str__


def sparsity_report(model: Module, names: tuple[str, ...] = ("weight",)) -> SparsityReport:
    """Count the zeros of every ``weight`` (or of the parameters in ``names``) of
    ``model``, pruned or not (a pruned one is counted as ``orig * mask``).

    >>> print(prune.sparsity_report(net))
    parameter   params   zeros  sparsity
    0.weight    32,768  26,214    80.00% (pruned)
    ...
    """
    rows = {}
    for prefix, module in model.named_modules():
        pruned = set(pruned_parameters(module))
        for name in names:
            if name not in pruned and module._parameters.get(name) is None:
                continue
            orig, mask = _current(module, name)
            values = orig * mask
            rows[f"{prefix}.{name}" if prefix else name] = {
                "params": int(values.size), "zeros": int(np.count_nonzero(values == 0)),
                "sparsity": float(np.count_nonzero(values == 0) / values.size) if values.size
                else 0.0, "pruned": name in pruned}
    return SparsityReport(rows)
