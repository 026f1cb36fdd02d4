"""Constant folding: evaluate at compile time what depends only on constants.

An instruction whose inputs are all constants (the causal mask ``triu(ones(t, t))`` of a
transformer, arithmetic on numbers the function baked in) computes the same array at
every call, so it is run once here, with the same NumPy forward the executor would
call, and becomes a constant. Equal small constants are then merged, so later passes
see one value where the trace made several (``lr * weight_decay`` written once per
parameter becomes one computation after common-subexpression elimination).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import byte_bounds

from ...dtypes import as_dtype
from ..ir import Constant, Graph, Value
from ..runtime import LAYOUT_FREE

# A folded constant is held for as long as the compiled function is: results whose
# memory (counted by the bytes they span, so a broadcast scalar costs a few bytes) is
# above this stay computed at every call. 4 MiB holds a 2048 x 2048 bool mask or a
# 1024 x 1024 float32 matrix; anything bigger is cheap to recompute next to the
# matmuls and convolutions that read it.
FOLD_LIMIT_BYTES = 4 << 20

# Constants up to this size are compared byte for byte and merged when equal.
MERGE_LIMIT_BYTES = 4096


def fold_constants(graph: Graph) -> Graph:
    """Replace each instruction whose inputs are all constants by constants holding
    its results, then merge equal small constants.

    Not folded: instructions with an effect (random draws run at every call), those
    producing an output or update value (the caller gets a fresh array at every call,
    never the compiler's own copy), those whose results are above
    :data:`FOLD_LIMIT_BYTES`, and those whose forward fails or disagrees with the traced
    shape and dtype (left to fail, or run, at call time exactly as before).

    Example: ``mask = triu(ones(64, 64), 1)`` is traced as a constant ``ones`` and a
    ``triu`` instruction; after this pass the mask itself is the constant.
    """
    known = {c.value.id: c.array for c in graph.constants}
    roots = {v.id for v in graph.live_roots()}
    mapping: dict[int, Value] = {}
    kept = []
    for ins in graph.instrs:
        ins.inputs = [mapping.get(v.id, v) for v in ins.inputs]
        results = None
        if not ins.effect and all(v.id in known for v in ins.inputs) and \
                not any(v.id in roots for v in ins.outputs):
            results = _evaluate(ins, [known[v.id] for v in ins.inputs])
        if results is None:
            kept.append(ins)
            continue
        for old, array in zip(ins.outputs, results):
            new = Value(old.shape, old.dtype)
            graph.constants.append(Constant(array, new))
            known[new.id] = array
            mapping[old.id] = new
    graph.instrs = kept
    graph.replace_uses(mapping)
    _merge_equal_constants(graph, roots)
    return graph


def _evaluate(ins, arrays) -> list | None:
    """The instruction's results as arrays, or None when it should not be folded."""
    forward = LAYOUT_FREE.get(ins.op.name, ins.op.forward)
    try:
        out = forward(np, *arrays, **ins.params)
    except Exception:  # the executor will raise the same error, with the user's line
        return None
    results = list(out) if len(ins.outputs) != 1 else [out]
    if len(results) != len(ins.outputs):
        return None
    results = [np.asarray(r) for r in results]
    for r, v in zip(results, ins.outputs):
        if r.shape != v.shape or as_dtype(r.dtype) is not v.dtype or \
                _footprint(r) > FOLD_LIMIT_BYTES:
            return None
    return results


def _footprint(array: np.ndarray) -> int:
    """Bytes of memory ``array`` spans (a broadcast view spans only its source)."""
    if array.size == 0:
        return 0
    low, high = byte_bounds(array)
    return high - low


def _merge_equal_constants(graph: Graph, roots: set) -> None:
    """Read one constant wherever several equal small ones (same dtype, shape and bytes)
    were read. Constants returned to the caller keep their own arrays."""
    first: dict = {}
    mapping: dict[int, Value] = {}
    kept = []
    for c in graph.constants:
        a, v = c.array, c.value
        if v.id in roots or a.nbytes > MERGE_LIMIT_BYTES:
            kept.append(c)
            continue
        key = (v.dtype, v.shape, np.asarray(a).tobytes())
        same = first.get(key)
        if same is None:
            first[key] = v
            kept.append(c)
        else:
            mapping[v.id] = same
    graph.constants = kept
    graph.replace_uses(mapping)
