"""Rewrites made while tracing: an op about to be recorded whose inputs were made by a
known chain of ops is recorded as one fused op instead.

A graph pass sees the joint graph after the trace, where the backward of a chain is a
second chain of ops that the autograd engine emitted one VJP at a time; a rewrite here
sees the forward before it is differentiated, so the fused op's own VJP (one fused
backward) is what gets recorded. The ops the chain recorded stay in the graph; where
nothing else reads them, dead-code elimination removes them, and no gradient reaches
them. Where something else does read them (the attention weights returned too), they
are computed as well, and gradients through both paths add up, as they would eagerly.

``ember.jit`` turns rewrites on when it optimises (``ember.jit(fn, optimize=False)``
and the ONNX exporter record ops as written).

Attention: ``softmax(masked_fill(q @ k^T * c, mask, -inf)) @ v`` (the scaling by a
number and the mask each optional; a division by a number counts as a scaling) becomes
:func:`~ember.nn.functional.scaled_dot_product_attention`'s primitive, whose CPU kernels
do everything for one head in cache (:mod:`ember.ops.attention_kernels`), with
``plain_softmax`` so that a row masked entirely still gives NaN, as ``F.softmax`` does.
"""
from __future__ import annotations

import math

from ..ops import registry
from ..tensor import Tensor


def _producer(value, name: str):
    """The instruction that made ``value`` when it is op ``name``'s, else None."""
    ins = value.producer
    op = getattr(ins, "op", None)  # (not an input's or a constant's)
    return ins if op is not None and op.name == name else None


def _number(trace, value):
    """The value of a Python number the function used (turned into a 0-d tensor while
    tracing), or None: a tensor of the caller's (a learnable temperature, a buffer) is
    read at every call, not baked in."""
    if value.shape != ():
        return None
    t = trace.tensor_of(value)
    if t is None or trace.numbers.get(id(t)) is not t:
        return None
    rec = trace.lifted.get(id(t))
    if rec is None or rec.input.value is not value:
        return None
    return float(rec.host_data())


def _scaled(trace, value):
    """(the unscaled value, the scale) for ``value = x * c`` or ``x / c`` with c a
    number; (value, 1.0) otherwise."""
    for name in ("mul", "div"):
        ins = _producer(value, name)
        if ins is None or len(ins.inputs) != 2:
            continue
        x, c = ins.inputs
        number = _number(trace, c)
        if number is None and name == "mul":
            c, x = ins.inputs
            number = _number(trace, c)
        if number is None or x.shape != value.shape or number == 0:
            continue
        return x, (number if name == "mul" else 1.0 / number)
    return value, 1.0


def _tensor(trace, value):
    """A traced tensor standing for ``value``: the one that holds it, with its autograd
    history, or, where that is gone, a fresh one (an operand of the product is gone only
    where no gradient flows through it: the product's autograd node keeps both). None
    where that tensor now holds another value (changed in place since)."""
    t = trace.tensor_of(value)
    if t is None:
        from .trace import TracerArray
        return Tensor._make(TracerArray(value, trace), trace.device)
    return t if trace.traced_value(t) is value else None


def fuse_attention(trace, op, inputs, params):
    """``matmul(p, v)`` with ``p`` an attention's softmax: the fused attention's output,
    or None (then the matmul is recorded as it is)."""
    from ..ops._promote import scalar_tensor
    from ..ops.attention import _ATTENTION
    from ..ops.elementwise import where
    if registry._autocasting and registry._autocast.cast is not None:
        return None  # (the fused op's own autocast rule would apply instead)
    p, v = inputs
    pv = trace.traced_value(p)
    if pv is None or v.ndim < 2 or p.ndim < 2:
        return None
    soft = _producer(pv, "softmax")
    if soft is None or soft.params.get("dim") not in (-1, len(pv.shape) - 1):
        return None
    scores = soft.inputs[0]
    mask = None
    fill = _producer(scores, "masked_fill")
    if fill is not None:
        if len(fill.inputs) != 3 or _number(trace, fill.inputs[2]) != -math.inf:
            return None
        scores, mask = fill.inputs[:2]
        if mask.dtype.name != "bool":
            return None
    scores, scale = _scaled(trace, scores)
    product = _producer(scores, "matmul")
    if product is None:
        return None
    qv, ktv = product.inputs
    dtype = pv.dtype
    if len(qv.shape) < 2 or len(ktv.shape) < 2 or not dtype.is_floating_point or \
            not qv.dtype is ktv.dtype is v._dtype is dtype or \
            tuple(v.shape[-2:-1]) != tuple(ktv.shape[-1:]):
        return None
    if product.op.saves_inputs is not True:
        return None  # (see _tensor)
    q, kt = _tensor(trace, qv), _tensor(trace, ktv)
    m = None if mask is None else _tensor(trace, mask)
    if q is None or kt is None or (mask is not None and m is None):
        return None
    extra = ()
    if m is not None:  # (the additive mask: a constant, where the mask is one)
        extra = (where(m, scalar_tensor(-math.inf, dtype, q.device),
                       scalar_tensor(0.0, dtype, q.device)),)
    return registry.apply(_ATTENTION, q, kt.transpose(-2, -1), v, *extra, scale=scale,
                          has_mask=m is not None, has_dropout=False,
                          plain_softmax=True)[0]


# registry op name -> rewrite(trace, op, inputs, params) -> a result or None
REWRITES = {"matmul": fuse_attention}

__all__ = ["REWRITES", "fuse_attention"]
