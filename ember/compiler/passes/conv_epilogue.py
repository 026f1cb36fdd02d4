"""Convolution epilogues: a 2-D ``convolution`` whose result only a ``relu`` reads, and
whose ReLU (or, without one, whose result) only a ``max_pool_values`` reads, becomes one
``conv2d_fused`` instruction (:mod:`ember.ops.conv_fused`): the C loop pools each image's
result while it is in cache and writes the pooled values only.

The same numbers: max pooling commutes with adding a per-channel bias and with ReLU
(both are monotone), and the fused loop takes the same products as the convolution.

Only where fused kernels are C (the loop is the CPU's) and only for one group, no
padding or dilation in the pooling, and float32/float64. A pooling that keeps its
indices (``max_pool``, in training) is never fused: the backward reads the
convolution's result through them.
"""
from __future__ import annotations

import numpy as np

from ...ops.conv_fused import CONV2D_FUSED
from ...ops.registry import OPS
from ..codegen import backend_name
from ..ir import Graph, Instr, Value

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def fuse_conv_epilogues(graph: Graph, renderer: str | None = None) -> Graph:
    """Replace convolution [-> relu] [-> max_pool_values] chains by ``conv2d_fused``
    (where ``renderer``, default :func:`~ember.compiler.codegen.backend_name`, is
    ``"c"``).

    >>> g = fuse_conv_epilogues(g)   # conv -> relu -> max_pool_values: one conv2d_fused
    """
    if (backend_name() if renderer is None else renderer) != "c":
        return graph
    users = graph.users()
    roots = {v.id for v in graph.live_roots()}

    def only_reader(v: Value, name: str):
        """The one instruction reading ``v`` if it is a registry ``name``, else None."""
        readers = users.get(v.id, ())
        if len(readers) != 1 or v.id in roots:
            return None
        ins = readers[0]
        if ins.effect or ins.op is not OPS.get(name) or ins.inputs[0] is not v:
            return None
        return ins

    fused: dict[int, Instr] = {}  # id of the chain's last instruction -> the fused one
    absorbed = set()
    for ins in graph.instrs:
        if not _plain_conv2d(ins):
            continue
        chain = [ins]
        relu = only_reader(ins.outputs[0], "relu")
        if relu is not None:
            chain.append(relu)
        pool = only_reader(chain[-1].outputs[0], "max_pool_values")
        if pool is not None and _plain_pool(pool):
            chain.append(pool)
        else:
            pool = None
        if len(chain) == 1:
            continue
        last = chain[-1].outputs[0]
        params = {k: ins.params[k] for k in ("stride", "padding", "dilation", "out_size")}
        params["relu"] = relu is not None
        params["pool"] = None if pool is None else (
            pool.params["kernel"], pool.params["stride"], pool.params["out_size"])
        new = Instr(CONV2D_FUSED, ins.inputs, params, [(last.shape, last.dtype)],
                    where=ins.where)
        new.region = ins.region
        fused[id(chain[-1])] = new
        absorbed.update(id(c) for c in chain)
    if not fused:
        return graph
    instrs, replaced = [], {}
    for ins in graph.instrs:
        if id(ins) in fused:  # (at the chain's end: every input of the chain exists there)
            new = fused[id(ins)]
            instrs.append(new)
            replaced[ins.outputs[0].id] = new.outputs[0]
        elif id(ins) not in absorbed:
            instrs.append(ins)
    graph.instrs = instrs
    graph.replace_uses(replaced)
    return graph


def _plain_conv2d(ins: Instr) -> bool:
    if ins.effect or ins.op is not OPS.get("convolution") or ins.params["groups"] != 1:
        return False
    x, w = ins.inputs[:2]
    return len(x.shape) == 4 and x.dtype.np in _FLOATS and w.dtype is x.dtype and \
        all(v.dtype is x.dtype for v in ins.inputs[2:])


def _plain_pool(ins: Instr) -> bool:
    p = ins.params
    if len(p["kernel"]) != 2 or any(p["padding"]) or any(d != 1 for d in p["dilation"]):
        return False
    floor = tuple((s - k) // st + 1 for s, k, st in
                  zip(ins.inputs[0].shape[2:], p["kernel"], p["stride"]))
    return floor == tuple(p["out_size"])  # (not a ceil-mode window past the edge)
