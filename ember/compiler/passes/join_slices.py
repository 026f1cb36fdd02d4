"""Joining slice gradients: the gradient of a tensor that was split into pieces
(``q, k, v = qkv.split(d, dim=-1)``, ``chunk``, slicing) is a sum of ``index_backward``
instructions — each a zero tensor of the whole shape with one piece's gradient written
into its slice. When the slices tile one dim exactly, that sum is the pieces' gradients
concatenated: one ``cat`` instead of k zero-filled buffers and k - 1 additions.

The same numbers: every element of the sum is one piece's element plus zeros, which is
that element (a ``-0.0`` stays ``-0.0`` here where the sum gives ``+0.0``; they compare
equal, as with ``simplify``'s ``x + 0``).
"""
from __future__ import annotations

from ...ops.registry import OPS
from ..ir import Graph, Instr, Value


def join_slice_gradients(graph: Graph) -> Graph:
    """Replace sums of ``index_backward`` slices that tile a dim by one ``cat``.

    >>> g = join_slice_gradients(g)   # add(add(ib(gq), ib(gk)), ib(gv)) -> cat(gq, gk, gv)
    """
    users = graph.users()
    roots = {v.id for v in graph.live_roots()}
    producer = {v.id: ins for ins in graph.instrs for v in ins.outputs}

    def only_read_once(v: Value) -> bool:
        return len(users.get(v.id, ())) == 1 and v.id not in roots

    def registry_op(ins, name) -> bool:
        return ins is not None and not ins.effect and ins.op.name == name and \
            OPS.get(name) is ins.op

    def leaves(v: Value, shape, dtype, top: bool):
        ins = producer.get(v.id)
        if registry_op(ins, "add") and (top or only_read_once(v)) and \
                v.shape == shape and v.dtype is dtype and not ins.params:
            return leaves(ins.inputs[0], shape, dtype, False) + \
                leaves(ins.inputs[1], shape, dtype, False)
        return [v]

    replaced: dict[int, Value] = {}
    instrs = []
    for ins in graph.instrs:
        out = ins.outputs[0] if ins.outputs else None
        if registry_op(ins, "add") and not _inside_a_larger_sum(out, users, roots) and \
                not ins.params:
            parts = _tiling(leaves(out, out.shape, out.dtype, True), producer, only_read_once,
                            registry_op, out)
            if parts is not None:
                dim, pieces = parts
                cat = Instr(OPS["cat"], pieces, {"dim": dim}, [(out.shape, out.dtype)],
                            where=ins.where)
                cat.region = ins.region
                instrs.append(cat)
                replaced[out.id] = cat.outputs[0]
                continue
        instrs.append(ins)
    graph.instrs = instrs
    graph.replace_uses(replaced)
    return graph


def _inside_a_larger_sum(v: Value, users, roots) -> bool:
    readers = users.get(v.id, ())
    return len(readers) == 1 and v.id not in roots and readers[0].op.name == "add" and \
        readers[0].outputs[0].shape == v.shape and not readers[0].params


def _tiling(values, producer, only_read_once, registry_op, out):
    """(dim, gradients of the pieces in order) when every value is an ``index_backward``
    of one slice of ``out``'s shape and the slices tile one dim; else None."""
    if len(values) < 2:
        return None
    spans = []
    dims = set()
    for v in values:
        ins = producer.get(v.id)
        if not registry_op(ins, "index_backward") or not only_read_once(v):
            return None
        p = ins.params
        if tuple(p["shape"]) != out.shape or p["accumulate"]:
            return None
        span = _one_slice(p["index"], out.shape)
        g = ins.inputs[0]
        if span is None or g.dtype is not out.dtype:
            return None
        dim, start, stop = span
        want = out.shape[:dim] + (stop - start,) + out.shape[dim + 1:]
        if g.shape != want:
            return None
        dims.add(dim)
        spans.append((start, stop, g))
    if len(dims) != 1:
        return None
    spans.sort(key=lambda s: s[0])
    dim = dims.pop()
    position = 0
    for start, stop, _ in spans:
        if start != position or stop <= start:
            return None
        position = stop
    if position != out.shape[dim]:
        return None
    return dim, [g for _, _, g in spans]


def _one_slice(index, shape):
    """(dim, start, stop) for a basic index that takes a step-1 slice of one dim and
    all of every other; else None."""
    if not isinstance(index, tuple) or len(index) > len(shape):
        return None
    found = None
    for d, item in enumerate(index):
        if not isinstance(item, slice):
            return None
        start, stop, step = item.indices(shape[d])
        if step != 1:
            return None
        if (start, stop) == (0, shape[d]):
            continue
        if found is not None:
            return None
        found = (d, start, stop)
    return found


__all__ = ["join_slice_gradients"]
