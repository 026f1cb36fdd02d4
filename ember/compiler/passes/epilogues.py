"""Epilogues: the ReLU (and max pooling) after a product, done by the product's own loop
while each block of its result is in cache, instead of by passes over memory after it.

- A 2-D ``convolution`` whose result only a ``relu`` reads, and whose ReLU (or, without
  one, whose result) only a ``max_pool_values`` reads, becomes one ``conv2d_fused``
  instruction (:mod:`ember.ops.conv_fused`): the C loop pools each image's result while
  it is in cache and writes the pooled values only. With a ``max_pool`` that keeps its
  indices (in training) it becomes ``conv2d_fused_indexed``, which gives the same
  values and indices.
- In training the ReLU's gradient mask reads the ReLU's full-size result; first,
  :func:`pool_relu_masks` moves that mask below the pooling's backward (onto the pooled
  values), so that the pooling is the ReLU's only reader.
- A ``linear`` whose result only a ``relu`` reads becomes a ``linear`` with
  ``relu=True``: the BLAS driver applies the bias and the ReLU block by block
  (:mod:`ember.backends.cpu_blas`).

The same numbers: max pooling commutes with adding a per-channel bias and with ReLU
(both are monotone), and the products are the same products.

Only where fused kernels are C (the loops are the CPU's), for float32/float64, and for
the convolution only with one group and a pooling without padding or dilation whose
windows fit (no ceil mode past the edge).
"""
from __future__ import annotations

import numpy as np

from ...ops.conv_fused import CONV2D_FUSED, CONV2D_FUSED_INDEXED
from ...ops.registry import OPS
from ..codegen import backend_name
from ..ir import Graph, Instr, Value

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def fuse_epilogues(graph: Graph, renderer: str | None = None) -> Graph:
    """Replace convolution [-> relu] [-> max_pool(_values)] chains by ``conv2d_fused``
    (``conv2d_fused_indexed``) and linear -> relu by ``linear(relu=True)`` (where
    ``renderer``, default :func:`~ember.compiler.codegen.backend_name`, is ``"c"``).

    >>> g = fuse_epilogues(g)   # conv -> relu -> max_pool_values: one conv2d_fused
    """
    if (backend_name() if renderer is None else renderer) != "c":
        return graph
    pool_relu_masks(graph)
    users = graph.users()
    roots = {v.id for v in graph.live_roots()}

    def only_reader(v: Value, *names: str):
        """The one instruction reading ``v`` if it is a registry op of ``names``."""
        readers = users.get(v.id, ())
        if len(readers) != 1 or v.id in roots:
            return None
        ins = readers[0]
        if ins.effect or ins.op not in [OPS.get(n) for n in names] or \
                ins.inputs[0] is not v:
            return None
        return ins

    fused: dict[int, Instr] = {}  # id of a chain's last instruction -> the fused one
    absorbed = set()
    for ins in graph.instrs:
        if _plain_conv2d(ins):
            op, params = CONV2D_FUSED, {k: ins.params[k] for k in
                                        ("stride", "padding", "dilation", "out_size")}
        elif _plain_linear(ins):
            op, params = ins.op, dict(ins.params)
        else:
            continue
        chain = [ins]
        relu = only_reader(ins.outputs[0], "relu")
        if relu is not None:
            chain.append(relu)
        if op is CONV2D_FUSED:
            params["pool"] = None
            pool = only_reader(chain[-1].outputs[0], "max_pool_values", "max_pool")
            if pool is not None and _plain_pool(pool):
                chain.append(pool)
                params["pool"] = tuple(pool.params[k] for k in ("kernel", "stride", "out_size"))
                if pool.op is OPS["max_pool"]:
                    op = CONV2D_FUSED_INDEXED
        if len(chain) == 1:
            continue
        params["relu"] = relu is not None
        outs = chain[-1].outputs
        new = Instr(op, ins.inputs, params, [(v.shape, v.dtype) for v in outs],
                    where=ins.where)
        new.region = ins.region
        fused[id(chain[-1])] = new
        absorbed.update(id(c) for c in chain)
    # (at the chain's end: every input of the chain exists there)
    return _splice(graph, {k: [v] for k, v in fused.items()}, absorbed)


def pool_relu_masks(graph: Graph) -> Graph:
    """Move a ReLU's gradient mask below the max pooling after the ReLU: in training,
    ``mul(max_pool_backward(g, idx), cast(gt(r, 0)))`` with ``(vals, idx) = max_pool(r)``
    becomes ``max_pool_backward(mul(g, cast(gt(vals, 0))), idx)``: the mask taken on the
    pooled values (a window's winner is ``vals``) before the scatter instead of on the
    whole ``r`` after it. The same numbers (the mask is 0 or 1, and the scatter writes
    each window's gradient at its winner only); afterwards the pooling alone reads ``r``,
    so the convolution, ReLU and pooling fuse.
    """
    users = graph.users()
    roots = {v.id for v in graph.live_roots()}
    producer = {v.id: ins for ins in graph.instrs for v in ins.outputs}
    zeros = {c.value.id for c in graph.constants
             if np.size(c.array) == 1 and np.asarray(c.array).reshape(()) == 0}

    def sole(v: Value, name: str):
        """The producer of ``v`` if a registry ``name`` whose only reader is one instr."""
        ins = producer.get(v.id)
        if ins is None or ins.effect or ins.op is not OPS.get(name) or v.id in roots or \
                len(users.get(v.id, ())) != 1:
            return None
        return ins

    rewrites = {}
    for mul in graph.instrs:
        if mul.op is not OPS.get("mul") or mul.effect or len(mul.inputs) != 2:
            continue
        for side in (0, 1):
            back = sole(mul.inputs[side], "max_pool_backward")
            cast = sole(mul.inputs[1 - side], "cast")
            gt = cast and sole(cast.inputs[0], "gt")
            if back is None or gt is None or gt.inputs[1].id not in zeros:
                continue
            pool = producer.get(back.inputs[1].id)
            if pool is None or pool.op is not OPS.get("max_pool") or \
                    back.inputs[1] is not pool.outputs[1] or gt.inputs[0] is not pool.inputs[0]:
                continue
            g, vals = back.inputs[0], pool.outputs[0]
            if g.shape != vals.shape or mul.outputs[0].dtype is not g.dtype:
                continue
            new_gt = Instr(gt.op, [vals, gt.inputs[1]], gt.params,
                           [(vals.shape, gt.outputs[0].dtype)], where=gt.where)
            new_cast = Instr(cast.op, new_gt.outputs, cast.params,
                             [(vals.shape, cast.outputs[0].dtype)], where=cast.where)
            pair = [g, new_cast.outputs[0]] if side == 0 else [new_cast.outputs[0], g]
            new_mul = Instr(mul.op, pair, mul.params, [(vals.shape, g.dtype)], where=mul.where)
            new_back = Instr(back.op, [new_mul.outputs[0], back.inputs[1]], back.params,
                             [(mul.outputs[0].shape, mul.outputs[0].dtype)], where=back.where)
            for made in (new_gt, new_cast, new_mul, new_back):
                made.region = mul.region
            rewrites[id(mul)] = ([new_gt, new_cast, new_mul, new_back], {id(back), id(cast),
                                                                         id(gt)})
            break
    dropped = set().union(*(gone for _, gone in rewrites.values()))
    return _splice(graph, {k: made for k, (made, _) in rewrites.items()}, dropped)


def _splice(graph: Graph, replace: dict, dropped: set) -> Graph:
    """``graph`` with each instruction whose id is in ``replace`` swapped for that list of
    instructions (the last one's outputs taking the place of its outputs) and those in
    ``dropped`` (ids) removed."""
    if not replace:
        return graph
    instrs, replaced = [], {}
    for ins in graph.instrs:
        made = replace.get(id(ins))
        if made is not None:
            instrs.extend(made)
            for old, value in zip(ins.outputs, made[-1].outputs):
                replaced[old.id] = value
        elif id(ins) not in dropped:
            instrs.append(ins)
    graph.instrs = instrs
    graph.replace_uses(replaced)
    return graph


def _floats(ins: Instr) -> bool:
    dtype = ins.inputs[0].dtype
    return dtype.np in _FLOATS and all(v.dtype is dtype for v in ins.inputs + ins.outputs)


def _plain_conv2d(ins: Instr) -> bool:
    return not ins.effect and ins.op is OPS.get("convolution") and \
        ins.params["groups"] == 1 and len(ins.inputs[0].shape) == 4 and _floats(ins)


def _plain_linear(ins: Instr) -> bool:
    return not ins.effect and ins.op is OPS.get("linear") and \
        not ins.params.get("relu") and _floats(ins) and \
        (len(ins.inputs) == 2 or len(ins.inputs[2].shape) == 1)


def _plain_pool(ins: Instr) -> bool:
    p = ins.params
    if len(p["kernel"]) != 2 or any(p["padding"]) or any(d != 1 for d in p["dilation"]):
        return False
    floor = tuple((s - k) // st + 1 for s, k, st in
                  zip(ins.inputs[0].shape[2:], p["kernel"], p["stride"]))
    return floor == tuple(p["out_size"])  # (not a ceil-mode window past the edge)
