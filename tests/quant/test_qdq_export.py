"""QDQ export of static int8 models: the Digits CNN exports, passes onnx.checker's full
check, runs in ONNX Runtime and agrees with ember's integer model; the QDQ nodes carry
the modules' int8 weights, per-channel scales and int32 biases."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import nn, quant

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from tests.quant.test_static import digits  # noqa: E402,F401  (the trained Digits CNN)


def _session(path):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _initializers(path) -> dict:
    model = onnx.load(str(path))
    return {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}


@pytest.fixture(scope="module")
def quantized_digits(digits):  # noqa: F811
    model, train, test = digits
    prepared = quant.prepare(model)
    quant.calibrate(prepared, train, num_batches=8)
    return quant.convert(prepared), test


def test_digits_cnn_qdq_export_agrees_with_ember(quantized_digits, tmp_path):
    qmodel, test = quantized_digits
    path = tmp_path / "digits_int8.onnx"
    x0 = next(iter(test))[0]
    quant.export_onnx(qmodel, x0[:5], path)
    onnx.checker.check_model(str(path), full_check=True)

    proto = onnx.load(str(path))
    ops = [n.op_type for n in proto.graph.node]
    assert ops.count("Conv") == 2 and ops.count("Gemm") == 2
    # every weighted layer reads its input, weight and bias through DequantizeLinear
    assert ops.count("DequantizeLinear") >= 4 * 3 and "QuantizeLinear" in ops
    inits = _initializers(path)
    conv = qmodel.module[0]
    np.testing.assert_array_equal(inits["module.0.weight"], conv.weight.numpy())
    assert inits["module.0.weight"].dtype == np.int8
    np.testing.assert_array_equal(inits["module.0.weight_scale"], conv.weight_scale.numpy())
    bias_dq = [n for n in proto.graph.node if n.op_type == "DequantizeLinear"
               and inits.get(n.input[0], np.zeros(0, np.int8)).dtype == np.int32]
    assert sorted(inits[n.input[0]].size for n in bias_dq) == [10, 32, 64, 128]
    assert all(not inits[n.input[2]].any() for n in bias_dq)  # zero point 0
    weight_dq = [n for n in proto.graph.node if n.op_type == "DequantizeLinear"
                 and n.input[0] == "module.0.weight"]
    assert [a.i for a in weight_dq[0].attribute if a.name == "axis"] == [0]

    session = _session(path)
    out_step = qmodel.module[-1].scale  # one quantization step of the logits
    ours, theirs = [], []
    for x, _ in test:  # batches of 128 and a smaller last one: the dynamic batch axis
        (y,) = session.run(None, {"input": x.numpy()})
        ours.append(qmodel(x).numpy())
        theirs.append(y)
    ours, theirs = np.concatenate(ours), np.concatenate(theirs)
    assert theirs.shape == ours.shape == (len(test.dataset), 10)
    steps = np.abs(ours - theirs) / out_step
    assert steps.max() <= 2.0 + 1e-3, steps.max()
    assert (steps < 0.5).mean() > 0.99  # almost every logit is the same integer
    agree = (ours.argmax(1) == theirs.argmax(1)).mean()
    assert agree >= 0.99, agree


def test_onnx_runtime_fuses_the_qdq_graph_into_integer_kernels(quantized_digits, tmp_path):
    """The point of the QDQ form: ONNX Runtime's optimizer turns DQ -> Conv/Gemm -> Q
    into its integer kernels, so the exported model runs in int8 there too."""
    qmodel, test = quantized_digits
    path, optimized = tmp_path / "digits_int8.onnx", tmp_path / "optimized.onnx"
    quant.export_onnx(qmodel, next(iter(test))[0][:2], path)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(optimized)
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    ops = [n.op_type for n in onnx.load(str(optimized)).graph.node]
    assert ops.count("QLinearConv") == 2, ops
    assert "Conv" not in ops and "Gemm" not in ops, ops


def test_linear_on_3d_input_and_strided_grouped_conv(tmp_path):
    """The MatMul path of Linear (inputs with more than two dims), and Conv2d geometry:
    stride, asymmetric size, groups, no bias, no fused ReLU."""
    ember.manual_seed(3)
    linear = nn.Sequential(nn.Linear(12, 6), nn.Linear(6, 5))
    conv = nn.Sequential(nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=2, bias=False),
                         nn.Conv2d(8, 6, (1, 3)))
    for model, shape in ((linear, (3, 7, 12)), (conv, (2, 4, 11, 9))):
        prepared = quant.prepare(model)
        quant.calibrate(prepared, [ember.randn(*shape) for _ in range(3)])
        qmodel = quant.convert(prepared)
        path = tmp_path / "model.onnx"
        ember.onnx.export(qmodel, ember.randn(*shape), path, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": [0], "y": [0]})
        onnx.checker.check_model(str(path), full_check=True)
        x = ember.randn(5, *shape[1:])
        (y,) = _session(path).run(None, {"x": x.numpy()})
        expected = qmodel(x).numpy()
        last = qmodel.module[-1]
        assert y.shape == expected.shape
        assert np.abs(y - expected).max() <= 2 * last.scale + 1e-6


def test_export_onnx_refuses_what_it_cannot_write(tmp_path):
    model = nn.Sequential(nn.Linear(4, 3))
    with pytest.raises(ember.EmberTypeError, match="static quantized model"):
        quant.export_onnx(model, ember.randn(2, 4), tmp_path / "f.onnx")
    dynamic = quant.quantize_dynamic(model, {nn.Linear})
    with pytest.raises(NotImplementedError, match="dynamically quantized"):
        quant.export_onnx(dynamic, ember.randn(2, 4), tmp_path / "d.onnx")
    assert not list(tmp_path.iterdir())
