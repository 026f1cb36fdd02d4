"""ONNX mappings of elementwise, comparison, activation and reduction ops."""
from __future__ import annotations

import math

import numpy as np

from .builder import onnx_type
from .mapping import maps

_UNARY = {"abs": "Abs", "neg": "Neg", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
          "tanh": "Tanh", "sigmoid": "Sigmoid", "relu": "Relu", "erf": "Erf", "sin": "Sin",
          "cos": "Cos", "tan": "Tan", "asin": "Asin", "acos": "Acos", "atan": "Atan",
          "sinh": "Sinh", "cosh": "Cosh", "floor": "Floor", "ceil": "Ceil",
          "reciprocal": "Reciprocal", "sign": "Sign", "round": "Round",
          "logical_not": "Not", "isnan": "IsNaN", "bitwise_not": "BitwiseNot",
          "clone": "Identity", "softsign": "Softsign"}
_ARITH = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow",
          "maximum": "Max", "minimum": "Min", "fmax": "Max", "fmin": "Min"}
_COMPARE = {"eq": "Equal", "lt": "Less", "gt": "Greater", "le": "LessOrEqual",
            "ge": "GreaterOrEqual", "logical_and": "And", "logical_or": "Or",
            "logical_xor": "Xor", "bitwise_and": "BitwiseAnd", "bitwise_or": "BitwiseOr",
            "bitwise_xor": "BitwiseXor"}


@maps(*_UNARY)
def _unary(b, ins):
    return b.node(_UNARY[ins.op.name], [b.name(ins.inputs[0])])


@maps(*_ARITH)
def _arith(b, ins):
    out = ins.outputs[0].dtype
    x, y = (b.input_as(v, out) for v in ins.inputs)
    return b.node(_ARITH[ins.op.name], [x, y])


@maps(*_COMPARE)
def _compare(b, ins):
    x, y = ins.inputs
    common = np.promote_types(x.dtype.np, y.dtype.np)
    if ins.op.name.startswith("logical"):
        common = np.dtype(bool)
    names = [b.cast(b.name(v), v.dtype.name, common.name) for v in (x, y)]
    return b.node(_COMPARE[ins.op.name], names)


@maps("ne")
def _not_equal(b, ins):
    return b.node("Not", [_compare_as(b, ins, "Equal")])


def _compare_as(b, ins, op_type):
    x, y = ins.inputs
    common = np.promote_types(x.dtype.np, y.dtype.np).name
    return b.node(op_type, [b.cast(b.name(v), v.dtype.name, common) for v in (x, y)])


@maps("cast")
def _cast(b, ins):
    return b.node("Cast", [b.name(ins.inputs[0])], to=onnx_type(ins.outputs[0].dtype))


@maps("square")
def _square(b, ins):
    x = b.name(ins.inputs[0])
    return b.node("Mul", [x, x])


@maps("rsqrt")
def _rsqrt(b, ins):
    return b.node("Reciprocal", [b.node("Sqrt", [b.name(ins.inputs[0])])])


@maps("log1p")
def _log1p(b, ins):
    v = ins.inputs[0]
    return b.node("Log", [b.node("Add", [b.name(v), b.const(1, v.dtype.np)])])


@maps("expm1")
def _expm1(b, ins):
    v = ins.inputs[0]
    return b.node("Sub", [b.node("Exp", [b.name(v)]), b.const(1, v.dtype.np)])


@maps("where")
def _where(b, ins):
    c, x, y = ins.inputs
    out = ins.outputs[0].dtype
    return b.node("Where", [b.input_as(c, "bool"), b.input_as(x, out), b.input_as(y, out)])


@maps("masked_fill")
def _masked_fill(b, ins):
    x, mask, value = ins.inputs
    out = ins.outputs[0].dtype
    return b.node("Where", [b.input_as(mask, "bool"), b.input_as(value, out), b.name(x)])


@maps("clamp")
def _clamp(b, ins):
    x, lo, hi = ins.inputs
    out = ins.outputs[0].dtype
    y = b.node("Max", [b.name(x), b.input_as(lo, out)])
    return b.node("Min", [y, b.input_as(hi, out)])


# Activations ------------------------------------------------------------------------------
@maps("gelu")
def _gelu(b, ins):
    v = ins.inputs[0]
    x, np_dtype = b.name(v), v.dtype.np
    if ins.params.get("approximate", "none") == "tanh":
        # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = b.node("Mul", [b.node("Mul", [x, x]), x])
        inner = b.node("Add", [x, b.node("Mul", [cube, b.const(0.044715, np_dtype)])])
        t = b.node("Tanh", [b.node("Mul", [inner, b.const(math.sqrt(2 / math.pi), np_dtype)])])
    else:  # 0.5 x (1 + erf(x / sqrt(2)))
        t = b.node("Erf", [b.node("Mul", [x, b.const(1 / math.sqrt(2), np_dtype)])])
    half_x = b.node("Mul", [x, b.const(0.5, np_dtype)])
    return [b.node("Mul", [half_x, b.node("Add", [t, b.const(1, np_dtype)])]), None]


@maps("silu")
def _silu(b, ins):
    x = b.name(ins.inputs[0])
    return b.node("Mul", [x, b.node("Sigmoid", [x])])


@maps("mish")
def _mish(b, ins):
    x = b.name(ins.inputs[0])
    return b.node("Mul", [x, b.node("Tanh", [b.node("Softplus", [x])])])


@maps("leaky_relu")
def _leaky_relu(b, ins):
    return b.node("LeakyRelu", [b.name(ins.inputs[0])],
                  alpha=float(ins.params["negative_slope"]))


@maps("elu")
def _elu(b, ins):
    p, v = ins.params, ins.inputs[0]
    x = b.name(v)
    if p.get("input_scale", 1) != 1:
        x = b.node("Mul", [x, b.const(p["input_scale"], v.dtype.np)])
    y = b.node("Elu", [x], alpha=float(p["alpha"]))
    if p.get("scale", 1) != 1:
        y = b.node("Mul", [y, b.const(p["scale"], v.dtype.np)])
    return y


@maps("hardtanh")
def _hardtanh(b, ins):
    v, p = ins.inputs[0], ins.params
    return b.node("Clip", [b.name(v), b.const(p["min_val"], v.dtype.np),
                           b.const(p["max_val"], v.dtype.np)])


@maps("hardsigmoid")
def _hardsigmoid(b, ins):
    return b.node("HardSigmoid", [b.name(ins.inputs[0])], alpha=1 / 6, beta=0.5)


@maps("hardswish")
def _hardswish(b, ins):
    return b.node("HardSwish", [b.name(ins.inputs[0])])


@maps("softplus")
def _softplus(b, ins):
    v, p = ins.inputs[0], ins.params
    x, beta = b.name(v), float(p["beta"])
    # beta and threshold as PyTorch: x itself where beta * x > threshold
    bx = b.node("Mul", [x, b.const(beta, v.dtype.np)]) if beta != 1 else x
    soft = b.node("Softplus", [bx])
    if beta != 1:
        soft = b.node("Div", [soft, b.const(beta, v.dtype.np)])
    linear = b.node("Greater", [bx, b.const(p["threshold"], v.dtype.np)])
    return b.node("Where", [linear, x, soft])


@maps("log_sigmoid")
def _log_sigmoid(b, ins):
    x = b.name(ins.inputs[0])
    return b.node("Neg", [b.node("Softplus", [b.node("Neg", [x])])])


@maps("softmax", "log_softmax")
def _softmax(b, ins):
    op = "Softmax" if ins.op.name == "softmax" else "LogSoftmax"
    return b.node(op, [b.name(ins.inputs[0])], axis=int(ins.params["dim"]))


# Reductions ---------------------------------------------------------------------------------
def _axes(ins, dims):
    ndim = len(ins.inputs[0].shape)
    if dims is None:
        return list(range(ndim))
    dims = (dims,) if isinstance(dims, int) else dims
    return [int(d) % max(ndim, 1) for d in dims]


def reduce(b, op_type: str, x: str, axes, keepdim: bool) -> str:
    """``op_type`` (ReduceSum, ReduceMax, ...) over ``axes``: axes as an input from the
    opset that takes them so (13 for ReduceSum, 18 for the rest)."""
    keep = int(bool(keepdim))
    if not axes:
        return b.node("Identity", [x])
    if op_type == "ReduceSum" or b.opset >= 18:
        return b.node(op_type, [x, b.ints(axes)], keepdims=keep)
    return b.node(op_type, [x], axes=list(axes), keepdims=keep)


@maps("sum", "prod")
def _sum(b, ins):
    op = "ReduceSum" if ins.op.name == "sum" else "ReduceProd"
    x = b.input_as(ins.inputs[0], ins.outputs[0].dtype)
    return reduce(b, op, x, _axes(ins, ins.params["dims"]), ins.params["keepdim"])


@maps("amax", "amin")
def _amax(b, ins):
    op = "ReduceMax" if ins.op.name == "amax" else "ReduceMin"
    return reduce(b, op, b.name(ins.inputs[0]), _axes(ins, ins.params["dims"]),
                  ins.params["keepdim"])


@maps("logsumexp")
def _logsumexp(b, ins):
    return reduce(b, "ReduceLogSumExp", b.name(ins.inputs[0]),
                  _axes(ins, ins.params["dims"]), ins.params["keepdim"])


@maps("var", "std")
def _var(b, ins):
    v, p = ins.inputs[0], ins.params
    axes = _axes(ins, p["dims"])
    n = int(np.prod([v.shape[a] for a in axes]))
    if b.cap.dynamic_dims(v) and any(b.cap.dynamic_dims(v)[a] for a in axes):
        b.fail("reduces over a dynamic axis; the divisor would be fixed at its traced size")
    x = b.name(v)
    mean = reduce(b, "ReduceSum", x, axes, True)
    mean = b.node("Div", [mean, b.const(n, v.dtype.np)])
    d = b.node("Sub", [x, mean])
    total = reduce(b, "ReduceSum", b.node("Mul", [d, d]), axes, p["keepdim"])
    y = b.node("Div", [total, b.const(max(n - p["correction"], 0), v.dtype.np)])
    return b.node("Sqrt", [y]) if ins.op.name == "std" else y


@maps("max", "min")
def _max(b, ins):
    p, x = ins.params, b.name(ins.inputs[0])
    axis = int(p["dim"]) % len(ins.inputs[0].shape)
    values = reduce(b, "ReduceMax" if ins.op.name == "max" else "ReduceMin", x, [axis],
                    p["keepdim"])
    arg = "ArgMax" if ins.op.name == "max" else "ArgMin"
    return [values, b.node(arg, [x], axis=axis, keepdims=int(bool(p["keepdim"])),
                           select_last_index=0)]


@maps("argmax", "argmin")
def _argmax(b, ins):
    p, v = ins.params, ins.inputs[0]
    x = b.name(v)
    op = "ArgMax" if ins.op.name == "argmax" else "ArgMin"
    if p["dim"] is None:
        flat = b.node("Reshape", [x, b.ints([-1])])
        y = b.node(op, [flat], axis=0, keepdims=0)
        if p["keepdim"]:
            y = b.node("Reshape", [y, b.ints([1] * len(v.shape))])
        return y
    return b.node(op, [x], axis=int(p["dim"]) % len(v.shape), keepdims=int(bool(p["keepdim"])))
