"""ONNX mappings of the neural-network ops: linear and matmul, convolution, pooling,
normalisation and attention."""
from __future__ import annotations

import math

import numpy as np

from .map_elementwise import reduce
from .mapping import maps


@maps("matmul")
def _matmul(b, ins):
    x, y = ins.inputs
    return b.node("MatMul", [b.name(x), b.name(y)])


@maps("linear")
def _linear(b, ins):
    x, w, *bias = ins.inputs
    if len(x.shape) == 2:
        inputs = [b.name(x), b.name(w)] + [b.name(v) for v in bias]
        return b.node("Gemm", inputs, transB=1)
    y = b.node("MatMul", [b.name(x), b.node("Transpose", [b.name(w)], perm=[1, 0])])
    return b.node("Add", [y, b.name(bias[0])]) if bias else y


@maps("convolution")
def _convolution(b, ins):
    x, w, *bias = ins.inputs
    p = ins.params
    lo = [int(pad[0]) if isinstance(pad, (tuple, list)) else int(pad) for pad in p["padding"]]
    hi = [int(pad[1]) if isinstance(pad, (tuple, list)) else int(pad) for pad in p["padding"]]
    return b.node("Conv", [b.name(x), b.name(w)] + [b.name(v) for v in bias],
                  kernel_shape=list(w.shape[2:]), strides=list(p["stride"]), pads=lo + hi,
                  dilations=list(p["dilation"]), group=int(p["groups"]))


def _ceil_mode(size, kernel, stride, dilation, padding, out_size) -> int:
    """1 where the traced output size is the one ``ceil_mode=True`` gives."""
    for n, k, s, d, pad, o in zip(size, kernel, stride, dilation, padding, out_size):
        if (n + 2 * pad - d * (k - 1) - 1) // s + 1 != o:
            return 1
    return 0


@maps("max_pool_values", "max_pool")
def _max_pool(b, ins):
    x, p = ins.inputs[0], ins.params
    pads = [int(v) for v in p["padding"]]
    ceil = _ceil_mode(x.shape[2:], p["kernel"], p["stride"], p["dilation"], pads,
                      p["out_size"])
    y = b.node("MaxPool", [b.name(x)], kernel_shape=list(p["kernel"]),
               strides=list(p["stride"]), pads=pads + pads, dilations=list(p["dilation"]),
               ceil_mode=ceil)
    return y if ins.op.n_outputs == 1 else [y, None]  # ONNX's indices count differently


@maps("avg_pool")
def _avg_pool(b, ins):
    x, p = ins.inputs[0], ins.params
    if p["divisor_override"]:
        b.fail("uses divisor_override, which ONNX AveragePool has no attribute for")
    pads = [int(v) for v in p["padding"]]
    ceil = _ceil_mode(x.shape[2:], p["kernel"], p["stride"], (1,) * len(pads), pads,
                      p["out_size"])
    return b.node("AveragePool", [b.name(x)], kernel_shape=list(p["kernel"]),
                  strides=list(p["stride"]), pads=pads + pads, ceil_mode=ceil,
                  count_include_pad=int(bool(p["count_include_pad"])))


@maps("adaptive_max_pool")
def _adaptive_max_pool(b, ins):
    x, out = ins.inputs[0], ins.params["out_size"]
    size = x.shape[2:]
    if any(n % o for n, o in zip(size, out)):
        b.fail(f"pools {tuple(size)} adaptively to {tuple(out)}; ONNX export needs output "
               "sizes that divide the input's")
    kernel = [n // o for n, o in zip(size, out)]
    return [b.node("MaxPool", [b.name(x)], kernel_shape=kernel, strides=kernel), None]


# Normalisation --------------------------------------------------------------------------------
@maps("native_layer_norm", "native_batch_norm", "native_group_norm", "rms_norm")
def _normalize(b, ins):
    x, *affine = ins.inputs
    p = ins.params
    ndim = len(x.shape)
    axes = [int(a) % ndim for a in p["axes"]]
    trailing = axes == list(range(ndim - len(axes), ndim))
    param_shape = tuple(x.shape[ndim - len(axes):])
    if ins.op.name == "native_layer_norm" and p["center"] and trailing and \
            all(tuple(a.shape) == param_shape for a in affine):
        scale = b.name(affine[0]) if p["has_weight"] else \
            b.const(np.ones(param_shape, dtype=x.dtype.np))
        inputs = [b.name(x), scale] + ([b.name(affine[-1])] if p["has_bias"] else [])
        y = b.node("LayerNormalization", inputs, axis=axes[0], epsilon=float(p["eps"]))
        return [y, None, None]
    dyn = b.cap.dynamic_dims(x)
    if any(dyn[a] for a in axes):
        b.fail("normalises over a dynamic axis; its size would be fixed at the traced one")
    n = math.prod(x.shape[a] for a in axes)
    dtype = x.dtype.np
    name = b.name(x)
    if p["center"]:
        mean = b.node("Div", [reduce(b, "ReduceSum", name, axes, True), b.const(n, dtype)])
        name = b.node("Sub", [name, mean])
    var = b.node("Div", [reduce(b, "ReduceSum", b.node("Mul", [name, name]), axes, True),
                         b.const(n, dtype)])
    rstd = b.node("Reciprocal", [b.node("Sqrt", [b.node("Add", [var, b.const(p["eps"], dtype)])])])
    y = b.node("Mul", [name, rstd])
    if p["has_weight"]:
        y = b.node("Mul", [y, b.name(affine[0])])
    if p["has_bias"]:
        y = b.node("Add", [y, b.name(affine[-1])])
    return [y, None, rstd]


# Attention ------------------------------------------------------------------------------------
@maps("scaled_dot_product_attention")
def _attention(b, ins):
    q, k, v, *extra = ins.inputs
    p = ins.params
    if p["has_dropout"]:
        b.fail("applies attention dropout; export the model in eval mode (model.eval())")
    rank = len(k.shape)
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    kt = b.node("Transpose", [b.name(k)], perm=perm)
    scores = b.node("MatMul", [b.name(q), kt])
    scores = b.node("Mul", [scores, b.const(p["scale"], q.dtype.np)])
    if p["has_mask"]:
        scores = b.node("Add", [scores, b.input_as(extra[0], q.dtype)])
    weights = b.node("Softmax", [scores], axis=-1)
    return [b.node("MatMul", [weights, b.name(v)]), weights]
