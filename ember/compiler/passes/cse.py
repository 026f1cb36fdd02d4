"""Common-subexpression elimination: one instruction for each distinct computation."""
from __future__ import annotations

import numpy as np

from ..ir import Graph


def _param_key(v):
    """A hashable stand-in for a parameter value (None when it cannot be compared)."""
    if isinstance(v, np.ndarray):
        return ("array", v.shape, v.dtype.str, v.tobytes()) if v.size <= 64 else None
    if isinstance(v, (list, tuple)):
        parts = tuple(_param_key(x) for x in v)
        return None if any(p is None for p in parts) else (type(v).__name__, parts)
    if isinstance(v, dict):
        parts = tuple((k, _param_key(x)) for k, x in sorted(v.items()))
        return None if any(p[1] is None for p in parts) else ("dict", parts)
    if isinstance(v, slice):
        return ("slice", v.start, v.stop, v.step)
    try:
        hash(v)
    except TypeError:
        return None
    return (type(v).__name__, v)


def eliminate_common_subexpressions(graph: Graph) -> Graph:
    """Replace an instruction that repeats an earlier one (same op, same inputs, same
    parameters) by the earlier one's outputs. Effects are never merged."""
    seen: dict = {}
    mapping: dict = {}
    kept = []
    for ins in graph.instrs:
        ins.inputs = [mapping.get(v.id, v) for v in ins.inputs]
        key = None
        if not ins.effect:
            params = _param_key(ins.params)
            if params is not None:
                key = (ins.op, tuple(v.id for v in ins.inputs), params, id(ins.region))
        earlier = seen.get(key) if key is not None else None
        if earlier is not None:
            for old, new in zip(ins.outputs, earlier.outputs):
                mapping[old.id] = new
            continue
        if key is not None:
            seen[key] = ins
        kept.append(ins)
    graph.instrs = kept
    graph.replace_uses(mapping)
    return graph
