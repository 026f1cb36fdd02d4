"""Convolution backward in one pass over the images: a ``conv_weight_grad`` together
with the ``conv_bias_grad`` and ``conv_transpose`` (the input gradient) that read the
same output gradient, and the ``max_pool_backward`` that made that gradient, become one
``conv2d_backward_fused`` instruction (:mod:`ember.ops.conv_fused`). Its C loop builds
each image's output gradient from the pooled gradients and indices in a thread's buffer,
adds its rows into the bias gradient, multiplies it into the weight gradient and back
into the image's input gradient, while it is in cache; the full-size gradient is never
written out.

The same numbers as the separate ops: the same products image by image, the weight
gradient summed over fixed runs of images as ``conv2d_weight_grad`` does, the bias
gradient summed in double.

Only where fused kernels are C, for 2-D convolutions of one group in float32/float64,
when nothing else reads the output gradient (or returns it), and for a pooling backward
without overlapping windows.
"""
from __future__ import annotations

from ...ops.conv_fused import CONV2D_BACKWARD_FUSED
from ...ops.registry import OPS
from ..codegen import backend_name
from ..ir import Graph, Instr
from .epilogues import _FLOATS

_GEOMETRY = ("stride", "padding", "dilation")


def fuse_conv_backward(graph: Graph, renderer: str | None = None) -> Graph:
    """Replace a convolution's gradient ops (and the pooling backward feeding them) by one
    ``conv2d_backward_fused`` (where ``renderer``, default
    :func:`~ember.compiler.codegen.backend_name`, is ``"c"``).

    >>> g = fuse_conv_backward(g)   # max_pool_backward -> weight, bias, input grads: one op
    """
    if (backend_name() if renderer is None else renderer) != "c":
        return graph
    users = graph.users()
    roots = {v.id for v in graph.live_roots()}
    producer = {v.id: ins for ins in graph.instrs for v in ins.outputs}
    position = {id(ins): i for i, ins in enumerate(graph.instrs)}
    at: dict[int, Instr] = {}       # id of the group's first instruction -> the fused one
    dropped: set = set()
    values: dict = {}               # old value id -> new value
    for ins in graph.instrs:
        group = _group(ins, users, roots)
        if group is None:
            continue
        weight, bias, transpose = group
        x, g = weight.inputs
        inputs, pooled_from, members = [x, g], None, [weight, bias, transpose]
        back = producer.get(g.id)
        if back is not None and back.op is OPS.get("max_pool_backward") and \
                not back.effect and not back.params["overlaps"]:
            inputs = [x, back.inputs[0], back.inputs[1]]
            pooled_from = tuple(back.params["size"])
            members.append(back)
        if transpose is not None:
            inputs.append(transpose.inputs[1])
        members = [m for m in members if m is not None]
        params = {k: weight.params[k] for k in _GEOMETRY}
        params.update(kernel_size=tuple(weight.params["kernel_size"]),
                      pooled_from=pooled_from, need_db=bias is not None,
                      need_dx=transpose is not None)
        dtype = x.dtype
        shapes = [weight.outputs[0].shape,
                  bias.outputs[0].shape if bias is not None else (),
                  transpose.outputs[0].shape if transpose is not None else ()]
        new = Instr(CONV2D_BACKWARD_FUSED, inputs, params, [(s, dtype) for s in shapes],
                    where=weight.where)
        new.region = weight.region
        first = min(members, key=lambda m: position[id(m)])
        at[id(first)] = new
        dropped.update(id(m) for m in members)
        for old, value in zip((weight, bias, transpose), new.outputs):
            if old is not None:
                values[old.outputs[0].id] = value
    if not at:
        return graph
    instrs = []
    for ins in graph.instrs:  # (at the first member: every input of the group exists there)
        if id(ins) in at:
            instrs.append(at[id(ins)])
        elif id(ins) not in dropped:
            instrs.append(ins)
    graph.instrs = instrs
    graph.replace_uses(values)
    return graph


def _group(ins: Instr, users, roots):
    """(weight grad, bias grad or None, input grad or None) when ``ins`` is a fusable
    ``conv_weight_grad`` and every reader of its output gradient is one of the three."""
    if ins.effect or ins.op is not OPS.get("conv_weight_grad") or \
            ins.params["groups"] != 1 or len(ins.params["kernel_size"]) != 2:
        return None
    x, g = ins.inputs
    if x.dtype.np not in _FLOATS or g.dtype is not x.dtype or g.id in roots:
        return None
    bias = transpose = None
    for reader in users.get(g.id, ()):
        if reader is ins:
            continue
        if reader.effect:
            return None
        if reader.op is OPS.get("conv_bias_grad") and bias is None:
            bias = reader
        elif reader.op is OPS.get("conv_transpose") and transpose is None and \
                len(reader.inputs) == 2 and reader.inputs[0] is g and \
                reader.params["groups"] == 1 and \
                all(reader.params[k] == ins.params[k] for k in _GEOMETRY) and \
                tuple(reader.params["out_size"]) == tuple(x.shape[2:]) and \
                reader.inputs[1].dtype is x.dtype:
            transpose = reader
        else:
            return None
    return ins, bias, transpose
