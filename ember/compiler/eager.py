"""Fused primitives in eager mode, run as the compiler's kernels.

Softmax, layer norm, GELU, cross-entropy and their backwards are single registry ops
with NumPy forwards; each NumPy step reads and writes the whole tensor, so on large
inputs they cost several times what one loop over the data would. ``ember.jit`` already
turns such an op into one generated C loop nest (its ``decompose`` rule, then the
fusion pass). Here eager mode takes the same road, per shape: the first time an op is
called with given shapes, dtypes and arguments, a one-instruction graph of it is lowered
with the compiler's passes and its kernels compiled (through the on-disk kernel cache,
so each distinct kernel is compiled once per machine); every call with those shapes runs
them, so the values never depend on how often an op was called before.

Only where it pays and is safe: float32/float64 inputs of at least
:data:`MIN_ELEMENTS` elements, the C backend available, not in a forked child (OpenMP
is not fork-safe), and an op whose rule lowers to fused kernels alone. Anything else —
and any failure to compile — runs the op's own NumPy forward, which computes the same
values (within float rounding).
"""
from __future__ import annotations

import os
from collections import OrderedDict

import numpy as np

from ..dtypes import as_dtype
from ..errors import EmberError
from ..ops import registry
from ..ops.registry import AbstractValue
from .fused import FusedKernel
from .ir import Graph, Input, Instr, Value

# Smaller inputs run the op's NumPy forward (a kernel call saves little there).
MIN_ELEMENTS = 4096
# Shapes remembered per op (least recently used dropped first).
MAX_ENTRIES = 64

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_DECLINED = object()  # this key runs the NumPy forward for good
_pid = os.getpid()


class EagerKernel:
    """``forward(xp, *arrays, **params)`` for ``op`` that runs compiled kernels where it
    can, and ``op.forward`` otherwise."""
    __slots__ = ("op", "entries")

    def __init__(self, op):
        self.op = op
        self.entries: OrderedDict = OrderedDict()

    def __call__(self, xp, *arrays, **params):
        forward = self.op.forward
        if xp is not np or os.getpid() != _pid:
            return forward(xp, *arrays, **params)
        size = 0
        for a in arrays:
            # float32/float64 data; integer and bool inputs (targets, masks) pass
            if a.__class__ is not np.ndarray or \
                    (a.dtype not in _FLOATS and a.dtype.kind not in "biu"):
                return forward(xp, *arrays, **params)
            size = max(size, a.size)
        if size < MIN_ELEMENTS:
            return forward(xp, *arrays, **params)
        try:
            key = (tuple((a.shape, a.dtype.char) for a in arrays),
                   tuple(sorted(params.items())))
            entry = self.entries.get(key)
        except TypeError:  # an unhashable argument
            return forward(xp, *arrays, **params)
        if entry is None and _collected is not None:  # (``ember kernels`` is gathering)
            _collected.extend(self._sources(arrays, params))
            return forward(xp, *arrays, **params)
        if entry is None:  # built at the first call: every call then runs the same code
            entry = self.entries[key] = self._build(arrays, params)
            if len(self.entries) > MAX_ENTRIES:
                self.entries.popitem(last=False)
        else:
            self.entries.move_to_end(key)
        if entry is _DECLINED:
            return forward(xp, *arrays, **params)
        outputs = entry.run(list(arrays))[0]
        for i, o in enumerate(outputs):  # a result never shares an input's memory
            if any(np.may_share_memory(o, a) for a in arrays):
                outputs[i] = o.copy()
        return outputs[0] if self.op.n_outputs == 1 else tuple(outputs)

    def _lowered(self, arrays, params):
        """The op as a one-instruction graph lowered to fused kernels, or None where it
        does not lower to kernels alone (or the C backend is not in use)."""
        from . import codegen
        from .passes import optimize
        from .passes.cse import eliminate_common_subexpressions
        from .passes.dce import eliminate_dead_code
        from .passes.decompose import decompose_composites
        from .passes.fuse import fuse_elementwise
        if codegen.backend_name() != "c":
            return None
        graph = Graph()
        values = [Value(a.shape, as_dtype(a.dtype)) for a in arrays]
        graph.inputs = [Input("arg", i, v) for i, v in enumerate(values)]
        out = registry.infer(self.op, *[AbstractValue(v.shape, v.dtype) for v in values],
                             **params)
        outs = out if self.op.n_outputs != 1 else (out,)
        instr = Instr(self.op, values, params, [(o.shape, o.dtype) for o in outs])
        graph.instrs = [instr]
        graph.outputs = list(instr.outputs)
        graph = optimize(graph, (decompose_composites, eliminate_common_subexpressions,
                                 eliminate_dead_code, fuse_elementwise))
        if not any(isinstance(ins.op, FusedKernel) for ins in graph.instrs) or \
                any(ins.op is self.op for ins in graph.instrs):
            return None
        return graph

    def _sources(self, arrays, params) -> list:
        """``(name, C source)`` of the kernels :meth:`_build` would compile."""
        from .codegen import build
        from .codegen.c import render
        try:
            graph = self._lowered(arrays, params)
        except EmberError:
            return []
        if graph is None:
            return []
        offset = build.array_data_offset()
        return [(ins.op.name, render(ins.op, offset)) for ins in graph.instrs
                if isinstance(ins.op, FusedKernel)]

    def _build(self, arrays, params):
        """An executor running the op as fused kernels, or ``_DECLINED``."""
        from .runtime import NumpyExecutor
        try:
            graph = self._lowered(arrays, params)
            if graph is None:
                return _DECLINED
            executor = NumpyExecutor(graph, compile_now=True)
            if any(isinstance(ins.op, FusedKernel) and ins.op.backend != "c"
                   for ins in graph.instrs):
                return _DECLINED
            return executor
        except EmberError:  # no usable compiler, a kernel it rejected: stay on NumPy
            return _DECLINED


_collected = None  # a list while kernel_sources() gathers instead of compiling


def kernel_sources(run) -> list:
    """``(name, C source)`` of the eager kernels ``run()`` (eager code) would compile at
    the first call of each op and shape, gathered without compiling (the ops run their
    NumPy forwards meanwhile): for ``ember kernels`` to build ahead of time."""
    global _collected
    _collected = found = []
    try:
        run()
    finally:
        _collected = None
    return _unique(found)


def _unique(pairs) -> list:
    seen, out = set(), []
    for name, source in pairs:
        if source not in seen:
            seen.add(source)
            out.append((name, source))
    return out


def accelerate(ops=None) -> None:
    """Give every op with a ``decompose`` rule (or those of ``ops``) an eager kernel."""
    for op in (registry.OPS.values() if ops is None else ops):
        if op.decompose is not None and op.fast is None:
            op.fast = EagerKernel(op)


__all__ = ["EagerKernel", "accelerate", "MIN_ELEMENTS"]
