"""Static int8 quantized models (``ember.quant.convert``'s output) as ONNX in QDQ form.

The quantized modules compute on NumPy arrays held in ``QTensor``s, so the tracer cannot
see inside them. While an export traces, each one records a single stand-in
instruction instead (as ``nn.LSTM`` does in :mod:`.map_rnn`), and the activations flow
between modules as the uint8 integers together with their scale and zero point. The
stand-ins map to the QDQ form ONNX Runtime fuses into integer kernels:

- ``Quantize`` → ``QuantizeLinear`` (per-tensor uint8);
- a quantized Linear/Conv2d → ``DequantizeLinear`` of its uint8 input, of its int8
  weight (per output channel, axis 0) and of its int32 bias (scale ``s_x·s_w[c]``,
  zero point 0), then ``Gemm``/``MatMul``/``Conv`` in float, ``Relu`` when fused, and
  ``QuantizeLinear`` to the output's scale and zero point;
- a pass-through layer (pooling, flatten, ReLU) → ``DequantizeLinear``, its float ops,
  ``QuantizeLinear`` with the same scale and zero point;
- ``DeQuantize`` → ``DequantizeLinear``.

The weights stay the modules' buffers (initializers ``<path>.weight`` int8,
``<path>.weight_scale``, ``<path>.weight_zero_point``); the int32 bias is made from the
float ``bias`` at the input's scale, exactly as the quantized module rounds it.
"""
from __future__ import annotations


import numpy as np

from ..ops.creation import from_numpy
from ..ops.registry import AbstractValue, Op, apply
from .mapping import maps


class TracedQTensor:
    """What a quantized activation is while an export traces: the integers as a traced
    uint8 tensor, with the scale and zero point they were quantized with."""
    __slots__ = ("data", "scale", "zero_point")

    def __init__(self, data, scale: float, zero_point: int):
        self.data, self.scale, self.zero_point = data, float(scale), int(zero_point)

    @property
    def shape(self):
        return self.data.shape


def _never_run(xp, *arrays, **params):
    raise NotImplementedError("the export-only quantized ops are traced, never run")


def _same_shape(dtype_name: str):
    from .. import dtypes

    def infer(x, **params):
        return AbstractValue(x.shape, getattr(dtypes, dtype_name))
    return infer


def _qlinear_infer(x, weight, *rest, **params):
    from .. import dtypes
    return AbstractValue(tuple(x.shape[:-1]) + (weight.shape[0],), dtypes.uint8)


def _qconv_infer(x, weight, *rest, out_size, **params):
    from .. import dtypes
    return AbstractValue((x.shape[0], weight.shape[0]) + tuple(out_size), dtypes.uint8)


QUANTIZE_OP = Op("quantize_linear", _never_run, infer=_same_shape("uint8"))
DEQUANTIZE_OP = Op("dequantize_linear", _never_run, infer=_same_shape("float32"))
QLINEAR_OP = Op("quantized_linear", _never_run, infer=_qlinear_infer)
QCONV_OP = Op("quantized_conv2d", _never_run, infer=_qconv_infer)


def stand_in_forward(m):
    """The forward that records one stand-in instruction (passing
    :class:`TracedQTensor` activations on), for a static quantized module; else None
    (see ``capture._stand_ins``)."""
    from ..quant.quantized import (DeQuantize, Quantize, QuantizedConv2d, QuantizedLinear,
                                   QuantizedPassThrough)
    makers = [(Quantize, _quantize_forward), (DeQuantize, _dequantize_forward),
              (QuantizedLinear, _linear_forward), (QuantizedConv2d, _conv_forward),
              (QuantizedPassThrough, _pass_through_forward)]
    maker = next((f for cls, f in makers if isinstance(m, cls)), None)
    return None if maker is None else maker(m)


def _expect_traced(m, x) -> TracedQTensor:
    if not isinstance(x, TracedQTensor):
        from .capture import OnnxExportError
        raise OnnxExportError(f"ember.onnx.export: {type(m).__name__} expects a quantized "
                              f"activation, got {type(x).__name__}; a quantized model "
                              "starts with Quantize (a QuantStub before convert)")
    return x


def _quantize_forward(m):
    if m.dtype.name != "quint8":
        raise NotImplementedError(f"ember.onnx.export: Quantize with dtype {m.dtype.name} "
                                  "does not export; the quantized layers take quint8 "
                                  "activations")

    def forward(x):
        q = apply(QUANTIZE_OP, x, scale=m.scale, zero_point=m.zero_point)
        return TracedQTensor(q, m.scale, m.zero_point)
    return forward


def _dequantize_forward(m):
    def forward(x):
        x = _expect_traced(m, x)
        return apply(DEQUANTIZE_OP, x.data, scale=x.scale, zero_point=x.zero_point)
    return forward


def _pass_through_forward(m):
    def forward(x):
        if not isinstance(x, TracedQTensor):
            return m.module(x)
        real = apply(DEQUANTIZE_OP, x.data, scale=x.scale, zero_point=x.zero_point)
        q = apply(QUANTIZE_OP, m.module(real), scale=x.scale, zero_point=x.zero_point)
        return TracedQTensor(q, x.scale, x.zero_point)
    return forward


def _bias_inputs(m, input_scale: float) -> list:
    """The int32 bias and its per-channel scale, as constants of the trace (made from the
    float bias exactly as the module rounds it)."""
    bias = m.bias_int32(input_scale)
    if bias is None:
        return []
    scale = (np.float64(input_scale) * m.weight_scale.numpy().astype(np.float64))
    return [from_numpy(bias), from_numpy(scale.astype(np.float32))]


def _weighted_params(m, x: TracedQTensor) -> dict:
    return dict(x_scale=x.scale, x_zero_point=x.zero_point, y_scale=m.scale,
                y_zero_point=m.zero_point, relu=bool(m.relu))


def _linear_forward(m):
    def forward(x):
        x = _expect_traced(m, x)
        q = apply(QLINEAR_OP, x.data, m.weight, m.weight_scale, m.weight_zero_point,
                  *_bias_inputs(m, x.scale), **_weighted_params(m, x))
        return TracedQTensor(q, m.scale, m.zero_point)
    return forward


def _conv_forward(m):
    def forward(x):
        x = _expect_traced(m, x)
        h, w = x.shape[2:]
        out = tuple((s + lo + hi - d * (k - 1) - 1) // st + 1 for s, (lo, hi), d, k, st in
                    zip((h, w), m._pads, m.dilation, m.kernel_size, m.stride))
        q = apply(QCONV_OP, x.data, m.weight, m.weight_scale, m.weight_zero_point,
                  *_bias_inputs(m, x.scale), stride=m.stride, pads=m._pads,
                  dilation=m.dilation, groups=m.groups, out_size=out,
                  **_weighted_params(m, x))
        return TracedQTensor(q, m.scale, m.zero_point)
    return forward


# Mappings ----------------------------------------------------------------------------------
def _activation_qparams(b, scale: float, zero_point: int) -> list[str]:
    return [b.const(np.float32(scale)), b.const(np.uint8(zero_point))]


@maps("quantize_linear")
def _quantize(b, ins):
    (x,) = ins.inputs
    p = ins.params
    return b.node("QuantizeLinear", [b.input_as(x, "float32")] +
                  _activation_qparams(b, p["scale"], p["zero_point"]))


@maps("dequantize_linear")
def _dequantize(b, ins):
    (x,) = ins.inputs
    p = ins.params
    return b.node("DequantizeLinear", [b.name(x)] +
                  _activation_qparams(b, p["scale"], p["zero_point"]))


def _dequantized_operands(b, ins) -> tuple[str, str, list[str]]:
    """``(x, weight, [bias])`` as float32 ONNX values, each a DequantizeLinear."""
    x, weight, w_scale, w_zero_point, *bias = ins.inputs
    p = ins.params
    xf = b.node("DequantizeLinear", [b.name(x)] +
                _activation_qparams(b, p["x_scale"], p["x_zero_point"]))
    wf = b.node("DequantizeLinear", [b.name(weight), b.name(w_scale), b.name(w_zero_point)],
                axis=0)
    bf = []
    if bias:
        q_bias, bias_scale = bias
        zero = b.const(np.zeros(q_bias.shape, dtype=np.int32))
        bf = [b.node("DequantizeLinear", [b.name(q_bias), b.name(bias_scale), zero], axis=0)]
    return xf, wf, bf


def _requantized(b, ins, y: str) -> str:
    p = ins.params
    if p["relu"]:
        y = b.node("Relu", [y])
    return b.node("QuantizeLinear", [y] + _activation_qparams(b, p["y_scale"],
                                                              p["y_zero_point"]))


@maps("quantized_linear")
def _quantized_linear(b, ins):
    xf, wf, bf = _dequantized_operands(b, ins)
    if len(ins.inputs[0].shape) == 2:
        y = b.node("Gemm", [xf, wf] + bf, transB=1)
    else:
        y = b.node("MatMul", [xf, b.node("Transpose", [wf], perm=[1, 0])])
        y = b.node("Add", [y, bf[0]]) if bf else y
    return _requantized(b, ins, y)


@maps("quantized_conv2d")
def _quantized_conv2d(b, ins):
    xf, wf, bf = _dequantized_operands(b, ins)
    p = ins.params
    (top, bottom), (left, right) = p["pads"]
    y = b.node("Conv", [xf, wf] + bf, kernel_shape=list(ins.inputs[1].shape[2:]),
               strides=list(p["stride"]), pads=[int(top), int(left), int(bottom), int(right)],
               dilations=list(p["dilation"]), group=int(p["groups"]))
    return _requantized(b, ins, y)


# Opset ---------------------------------------------------------------------------------------
_QUANTIZED_OPS = {op.name for op in (QUANTIZE_OP, DEQUANTIZE_OP, QLINEAR_OP, QCONV_OP)}
_probed: dict = {}


def uses_quantized_ops(graph) -> bool:
    """Whether a captured graph holds quantized stand-ins."""
    return any(ins.op.name in _QUANTIZED_OPS for ins in graph.instrs)


def newest_qdq_opset() -> int:
    """The newest opset whose QuantizeLinear/DequantizeLinear the installed ONNX Runtime
    implements (it can load a newer opset for other ops before it has kernels for a new
    version of these two), found once per process by loading a two-node model."""
    if "qdq" not in _probed:
        from .export import MIN_OPSET
        import onnx
        newest = onnx.defs.onnx_opset_version()
        _probed["qdq"] = next((v for v in range(newest, MIN_OPSET - 1, -1)
                               if _runtime_runs_qdq(v)), MIN_OPSET)
    return _probed["qdq"]


def _runtime_runs_qdq(opset: int) -> bool:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    try:
        import onnxruntime as ort
    except ImportError:
        return opset <= 21  # no runtime to ask: an opset every recent release runs
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    qparams = [numpy_helper.from_array(np.array(0.1, np.float32), "s"),
               numpy_helper.from_array(np.array(3, np.uint8), "z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])]
    graph = helper.make_graph(nodes, "probe", [x], [y], initializer=qparams)
    opsets = [helper.make_opsetid("", opset)]
    proto = helper.make_model(graph, opset_imports=opsets)
    proto.ir_version = onnx.helper.find_min_ir_version_for(opsets)
    try:
        ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        return True
    except Exception:  # the runtime has no kernel for this opset's Q/DQ
        return False
