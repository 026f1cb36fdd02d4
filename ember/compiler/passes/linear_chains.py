"""Linear chains: ``linear`` instructions each reading the one before's result, which
nothing else reads, become one ``linear_chain`` instruction (:mod:`ember.ops.linear_chain`)
that runs them in one call of the BLAS driver. That is an MLP in inference (in training
the backward reads each layer's input, so no chain forms). The same products, to
rounding (a layer too small for the driver alone is NumPy's product outside the chain).

Only where fused kernels are C (the driver is the CPU's), for float32/float64 layers of
one dtype with 2-D weights and 1-D biases, and after :func:`~ember.compiler.passes.
epilogues.fuse_epilogues` (a layer's ReLU is then its ``relu`` flag).
"""
from __future__ import annotations

import numpy as np

from ...ops.linear_chain import LINEAR_CHAIN
from ...ops.registry import OPS
from ..codegen import backend_name
from ..ir import Graph, Instr
from .epilogues import _splice

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def fuse_linear_chains(graph: Graph, renderer: str | None = None) -> Graph:
    """Replace each chain of two or more ``linear`` layers by one ``linear_chain``
    (where ``renderer``, default :func:`~ember.compiler.codegen.backend_name`, is
    ``"c"``).

    >>> g = fuse_linear_chains(g)   # linear(relu) -> linear(relu) -> linear: one op
    """
    if (backend_name() if renderer is None else renderer) != "c":
        return graph
    users = graph.users()
    roots = {v.id for v in graph.live_roots()}
    linear = OPS.get("linear")

    def layer(ins: Instr) -> bool:
        return not ins.effect and ins.op is linear and set(ins.params) <= {"relu"} and \
            ins.inputs[0].dtype.np in _FLOATS and len(ins.inputs[0].shape) >= 2 and \
            all(v.dtype is ins.inputs[0].dtype for v in ins.inputs + ins.outputs) and \
            len(ins.inputs[1].shape) == 2 and \
            (len(ins.inputs) == 2 or len(ins.inputs[2].shape) == 1)

    def next_layer(ins: Instr):
        out = ins.outputs[0]
        readers = users.get(out.id, ())
        if out.id in roots or len(readers) != 1 or not layer(readers[0]) or \
                readers[0].inputs[0] is not out or \
                readers[0].inputs[0].dtype is not ins.inputs[0].dtype:
            return None
        return readers[0]

    fused, absorbed = {}, set()
    for ins in graph.instrs:
        if id(ins) in absorbed or not layer(ins):
            continue
        chain = [ins]
        while (after := next_layer(chain[-1])) is not None:
            chain.append(after)
        if len(chain) < 2:
            continue
        inputs = [ins.inputs[0]] + [v for c in chain for v in c.inputs[1:]]
        layers = tuple((len(c.inputs) == 3, bool(c.params.get("relu"))) for c in chain)
        out = chain[-1].outputs[0]
        new = Instr(LINEAR_CHAIN, inputs, {"layers": layers}, [(out.shape, out.dtype)],
                    where=ins.where)
        new.region = ins.region
        fused[id(chain[-1])] = [new]
        absorbed.update(id(c) for c in chain)
    return _splice(graph, fused, absorbed)
