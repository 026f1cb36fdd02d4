"""The table from ember registry ops to ONNX: one function per op (or family), filled
by the ``map_*`` modules.

A mapping is ``fn(b, ins)``: ``b`` is the :class:`~ember.onnx.builder.Builder`,
``ins`` the instruction (``ins.inputs`` ember values, ``ins.params`` the op's
parameters, ``ins.outputs`` with shapes and dtypes). It returns the ONNX name of each
output (a string for a one-output op; a list, with None for an output ONNX does not
give, for several).
"""
from __future__ import annotations

from typing import Callable

MAPPINGS: dict[str, Callable] = {}


def maps(*names: str):
    """Decorator: ``fn`` maps the ember ops ``names``."""
    def deco(fn):
        for name in names:
            MAPPINGS[name] = fn
        return fn
    return deco


def supported_ops() -> list[str]:
    """The registry ops ``ember.onnx.export`` can write, sorted."""
    from . import map_elementwise, map_nn, map_quant, map_rnn, map_shape  # noqa: F401
    return sorted(MAPPINGS)
