"""Padding layers: ``ConstantPad``, ``ZeroPad``, ``ReflectionPad``, ``ReplicationPad`` and
``CircularPad`` in 1, 2 and 3 dims, each :func:`ember.nn.functional.pad` with its mode."""
from __future__ import annotations

import numbers

from ...errors import EmberError
from ...tensor import Tensor
from .. import functional as F
from ..module import Module

__all__ = [f"{kind}Pad{d}d" for kind in ("Constant", "Zero", "Reflection", "Replication",
                                         "Circular") for d in (1, 2, 3)]


class _PadNd(Module):
    """Pads the last ``dims`` dims: ``padding`` an int (every side) or 2 * dims ints
    (left, right[, top, bottom[, front, back]]), as PyTorch's layers take it."""
    mode = "constant"
    dims = 1

    def __init__(self, padding, value: float = 0.0):
        super().__init__()
        if isinstance(padding, numbers.Integral):
            padding = (int(padding),) * (2 * self.dims)
        padding = tuple(padding)
        if len(padding) != 2 * self.dims or \
                not all(isinstance(p, numbers.Integral) for p in padding):
            raise EmberError(f"{type(self).__name__}: padding must be an int or "
                             f"{2 * self.dims} ints, got {padding!r}")
        self.padding, self.value = padding, value

    def forward(self, input: Tensor) -> Tensor:
        if self.mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self) -> str:
        if type(self).__name__.startswith("Constant"):
            return f"padding={self.padding}, value={self.value}"
        return f"{self.padding}"  # (PyTorch's reprs)


_FILLS = {"Constant": "with ``value``", "Zero": "with zeros",
          "Reflection": "with the input mirrored at its edges (the edge not repeated)",
          "Replication": "with the edge values repeated", "Circular": "with the input wrapped around"}


def _layer(kind: str, mode: str, dims: int):
    """The class ``{kind}Pad{dims}d``."""
    name = f"{kind}Pad{dims}d"
    if kind == "Constant":
        def init(self, padding, value: float):
            _PadNd.__init__(self, padding, value)
    else:
        def init(self, padding):
            _PadNd.__init__(self, padding)
    value = ", 0.5" if kind == "Constant" else ""
    size_in = ", ".join(["1", "1"] + ["2"] * dims)
    size_out = ", ".join(["1", "1"] + ["4"] * dims)
    doc = (f"Pads the last {dims} dim(s) {_FILLS[kind]}; ``padding`` is an int (every side) "
           f"or {2 * dims} ints.\n\n    >>> ember.nn.{name}(1{value})(ember.ones({size_in}))"
           f".shape\n    ember.Size([{size_out}])\n")
    return type(name, (_PadNd,), {"mode": mode, "dims": dims, "__init__": init,
                                  "__doc__": doc, "__module__": __name__})


for _kind, _mode in (("Constant", "constant"), ("Zero", "constant"), ("Reflection", "reflect"),
                     ("Replication", "replicate"), ("Circular", "circular")):
    for _d in (1, 2, 3):
        globals()[f"{_kind}Pad{_d}d"] = _layer(_kind, _mode, _d)
