"""ONNX export: the reference models, an LSTM and a Transformer encoder written by
``ember.onnx.export`` pass onnx.checker's full check, and ONNX Runtime's outputs match
ember's at other batch sizes (and sequence lengths) through the dynamic axes."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import ember

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from training import build  # noqa: E402

RTOL = ATOL = 1e-5


def _run(path, feeds):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {k: v.numpy() for k, v in feeds.items()})


def _check_matches(model, path, name, inputs):
    """ONNX Runtime agrees with ember on ``inputs`` (compared here and by verify)."""
    model.eval()
    with ember.no_grad():
        expected = model(inputs).numpy()
    (got,) = _run(path, {name: inputs})
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL)
    report = ember.onnx.verify(model, path, inputs, rtol=RTOL, atol=ATOL, verbose=False)
    assert report["max_abs"] <= ATOL + RTOL * np.abs(expected).max()


def _dim_params(proto, value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


REFERENCE = {
    "mlp": (lambda b: ember.randn(b, 784), {0: "batch"}, [(5, None), (1, None)]),
    "cnn": (lambda b: ember.randn(b, 1, 28, 28), {0: "batch"}, [(5, None), (2, None)]),
    # the gpt model adds a (64, 128) position table: its context length is fixed
    "gpt": (lambda b: ember.randint(0, 256, (b, 64)), {0: "batch"}, [(5, None), (1, None)]),
}


@pytest.mark.parametrize("workload", list(REFERENCE))
def test_reference_model_exports_and_matches(workload, tmp_path):
    ember.manual_seed(0)
    model, _, _ = build(ember, workload)
    model.train()
    make, axes, sizes = REFERENCE[workload]
    path = tmp_path / f"{workload}.onnx"
    ember.onnx.export(model, make(3), path, input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": axes, "logits": {0: "batch"}})
    assert model.training  # the mode is restored after the export
    onnx.checker.check_model(str(path), full_check=True)
    proto = onnx.load(str(path))
    assert _dim_params(proto, proto.graph.input[0])[0] == "batch"
    assert _dim_params(proto, proto.graph.output[0])[0] == "batch"
    # parameters are initializers named by their state-dict keys
    inits = {t.name for t in proto.graph.initializer}
    assert set(model.state_dict()) <= inits
    assert proto.producer_name == "ember" and proto.producer_version == ember.__version__
    props = {p.key: p.value for p in proto.metadata_props}
    assert props["dynamic_axes"] == "batch" and "model_class" in props
    for batch, _ in sizes:
        _check_matches(model, path, "x", make(batch))


class _LSTMClassifier(ember.nn.Module):
    """Reads a sequence with a two-layer LSTM and classifies its last step."""

    def __init__(self):
        super().__init__()
        self.lstm = ember.nn.LSTM(8, 16, num_layers=2, batch_first=True)
        self.head = ember.nn.Linear(16, 4)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.head(y[:, -1])


def test_lstm_exports_with_dynamic_batch_and_sequence(tmp_path):
    ember.manual_seed(1)
    model = _LSTMClassifier()
    path = tmp_path / "lstm.onnx"
    ember.onnx.export(model, ember.randn(3, 5, 8), path, input_names=["x"],
                      dynamic_axes={"x": {0: "batch", 1: "seq"}})
    assert "forward" not in vars(model.lstm)  # the export-time forward is gone
    onnx.checker.check_model(str(path), full_check=True)
    proto = onnx.load(str(path))
    assert proto.doc_string == _LSTMClassifier.__doc__
    assert [n.op_type for n in proto.graph.node].count("LSTM") == 2  # one per layer
    assert {"lstm.weight_ih_l0", "lstm.weight_hh_l1", "head.bias"} <= \
        {t.name for t in proto.graph.initializer}
    for batch, seq in ((2, 9), (6, 3)):
        _check_matches(model, path, "x", ember.randn(batch, seq, 8))


def test_bidirectional_lstm_with_initial_state(tmp_path):
    ember.manual_seed(4)
    lstm = ember.nn.LSTM(6, 10, num_layers=2, bidirectional=True)  # (seq, batch, ...)
    path = tmp_path / "bilstm.onnx"
    args = (ember.randn(5, 3, 6), (ember.randn(4, 3, 10), ember.randn(4, 3, 10)))
    ember.onnx.export(lstm, args, path, input_names=["x", "h0", "c0"],
                      output_names=["y", "hn", "cn"],
                      dynamic_axes={"x": {0: "seq", 1: "batch"}, "h0": {1: "batch"},
                                    "c0": {1: "batch"}})
    onnx.checker.check_model(str(path), full_check=True)
    for batch, seq in ((2, 7), (4, 2)):
        x, h, c = ember.randn(seq, batch, 6), ember.randn(4, batch, 10), ember.randn(4, batch, 10)
        with ember.no_grad():
            y, (hn, cn) = lstm(x, (h, c))
        got = _run(path, {"x": x, "h0": h, "c0": c})
        for g, e in zip(got, (y, hn, cn)):
            np.testing.assert_allclose(g, e.numpy(), rtol=RTOL, atol=ATOL)


def test_unrolled_recurrence_with_dynamic_sequence_is_refused(tmp_path):
    # ember's GRU unrolls over the sequence, so its graph depends on the length
    model = ember.nn.GRU(4, 8, batch_first=True)
    with pytest.raises(ember.onnx.OnnxExportError, match="unrolled recurrence"):
        ember.onnx.export(model, ember.randn(3, 5, 4), tmp_path / "gru.onnx",
                          dynamic_axes={"input_0": {0: "batch", 1: "seq"}})
    assert not (tmp_path / "gru.onnx").exists()
    ember.onnx.export(model, ember.randn(3, 5, 4), tmp_path / "gru.onnx",
                      dynamic_axes={"input_0": {0: "batch"}})
    report = ember.onnx.verify(model, tmp_path / "gru.onnx", ember.randn(2, 5, 4),
                               verbose=False)
    assert report["outputs"] == 2


def test_transformer_encoder_dynamic_batch_and_sequence(tmp_path):
    ember.manual_seed(2)
    layer = ember.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
    model = ember.nn.TransformerEncoder(layer, 2)
    path = tmp_path / "encoder.onnx"
    ember.onnx.export(model, ember.randn(3, 5, 32), path, input_names=["src"],
                      dynamic_axes={"src": {0: "batch", 1: "seq"}})
    onnx.checker.check_model(str(path), full_check=True)
    proto = onnx.load(str(path))
    assert _dim_params(proto, proto.graph.output[0]) == ["batch", "seq", 32]
    for batch, seq in ((2, 7), (4, 3)):
        _check_matches(model, path, "src", ember.randn(batch, seq, 32))


class _Common(ember.nn.Module):
    """Elementwise, reduction and shape ops beyond the reference models."""

    def __init__(self):
        super().__init__()
        self.bn = ember.nn.BatchNorm2d(3)
        self.drop = ember.nn.Dropout(0.5)

    def forward(self, x):
        F = ember.nn.functional
        y = self.drop(self.bn(x))
        a = F.adaptive_avg_pool2d(y, (1, 1)).flatten(1)
        b = F.avg_pool2d(y, 2).mean(dim=(2, 3))
        c = ember.clamp(a, -1, 1) + b.unsqueeze(1).squeeze(1) ** 2 + ember.where(a > 0, a, b)
        d = c.sum(-1, keepdim=True).expand(-1, 3) + c.amax(dim=1, keepdim=True)
        e = ember.cat([d, d.abs().exp().log().sqrt(), (d < 0).float(), ember.tanh(-d)], 1)
        f = ember.stack([e, e.sigmoid()], 1).transpose(1, 2).reshape(x.shape[0], -1)
        return F.log_softmax(f, -1) + ember.zeros(x.shape[0], 24) + F.softmax(f, 1)


def test_common_ops_in_eval_mode(tmp_path):
    ember.manual_seed(3)
    model = _Common()
    model.bn.running_mean.fill_(0.3)
    model.bn.running_var.fill_(2.0)
    path = tmp_path / "common.onnx"
    ember.onnx.export(model, ember.randn(2, 3, 8, 8), path, dynamic_axes={"input_0": [0]})
    onnx.checker.check_model(str(path), full_check=True)
    assert "bn.running_mean" in {t.name for t in onnx.load(str(path)).graph.initializer}
    for batch in (1, 5):
        _check_matches(model, path, "input_0", ember.randn(batch, 3, 8, 8))


class _Sorter(ember.nn.Module):
    def forward(self, x):
        return x.argsort(dim=-1)  # argsort has no ONNX mapping


class _WithSorter(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = ember.nn.Linear(4, 4)
        self.rank = _Sorter()

    def forward(self, x):
        return self.rank(self.fc(x))


def test_unsupported_op_names_the_op_and_the_module(tmp_path):
    assert "argsort" not in ember.onnx.supported_ops()
    with pytest.raises(ember.onnx.OnnxExportError) as info:
        ember.onnx.export(_WithSorter(), ember.randn(2, 4), tmp_path / "bad.onnx")
    text = str(info.value)
    assert "'argsort'" in text and "rank (_Sorter)" in text and "test_export.py" in text
    assert not (tmp_path / "bad.onnx").exists()


def test_verify_raises_on_a_mismatch(tmp_path):
    model = ember.nn.Sequential(ember.nn.Linear(4, 3))
    path = tmp_path / "lin.onnx"
    ember.onnx.export(model, ember.randn(2, 4), path, dynamic_axes={"input_0": {0: "b"}})
    report = ember.onnx.verify(model, path, ember.randn(3, 4), verbose=False)
    assert report["outputs"] == 1 and report["max_abs"] < 1e-5
    with ember.no_grad():
        model[0].bias.add_(1.0)
    with pytest.raises(ember.onnx.OnnxMismatchError, match="differs"):
        ember.onnx.verify(model, path, ember.randn(3, 4), verbose=False)


def test_opset_default_and_bad_request(tmp_path):
    model = ember.nn.Sequential(ember.nn.Linear(4, 3))
    path = tmp_path / "lin.onnx"
    ember.onnx.export(model, ember.randn(2, 4), path)
    opset = onnx.load(str(path)).opset_import[0].version
    assert opset >= 17
    ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    with pytest.raises(ember.onnx.OnnxExportError, match="opset_version 11"):
        ember.onnx.export(model, ember.randn(2, 4), path, opset_version=11)
