"""Dynamic int8 quantization: Linear within the analytic quantization-error bound and
close to torch's dynamic Linear; LSTM close to float; save/load round trip."""
import io

import numpy as np
import pytest

import ember
from ember import nn, quant


def _linear(seed=0, k=96, n=40):
    ember.manual_seed(seed)
    return nn.Linear(k, n)


def test_dynamic_linear_within_analytic_error_bound():
    lin = _linear()
    qlin = quant.quantize_dynamic(lin, {nn.Linear}, dtype=quant.qint8)
    assert isinstance(qlin, quant.DynamicQuantizedLinear)
    assert qlin.weight.dtype == ember.int8
    x = np.random.default_rng(1).standard_normal((32, 96)).astype(np.float32) * 2
    got = qlin(ember.from_numpy(x)).numpy().astype(np.float64)
    w = lin.weight.detach().numpy().astype(np.float64)
    exact = x.astype(np.float64) @ w.T + lin.bias.detach().numpy()
    # x = x^ + ex with |ex| <= sx/2 and w = w^ + ew with |ew| <= sw/2 per row:
    # |x.w - x^.w^| <= sum_k |ex| |w^| + |x^| |ew| + |ex| |ew|
    sx = (max(x.max(), 0) - min(x.min(), 0)) / 255
    sw = qlin.weight_scale.numpy().astype(np.float64)
    w_hat = qlin.weight.numpy().astype(np.float64) * sw[:, None]
    x_hat_abs = np.abs(x) + sx / 2
    bound = (sx / 2) * np.abs(w_hat).sum(1)[None] + x_hat_abs @ (np.ones_like(w) * sw[:, None] / 2).T \
        + x.shape[1] * sx * sw[None] / 4
    err = np.abs(got - exact)
    assert np.all(err <= bound + 1e-5)
    assert err.max() > 0  # it really is quantized
    assert err.max() < 0.1 * np.abs(exact).max()


def test_dynamic_linear_close_to_torch_dynamic_linear():
    torch = pytest.importorskip("torch")
    lin = _linear(3, 64, 24)
    tl = torch.nn.Linear(64, 24)
    with torch.no_grad():
        tl.weight.copy_(torch.from_numpy(lin.weight.detach().numpy()))
        tl.bias.copy_(torch.from_numpy(lin.bias.detach().numpy()))
    tq = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(tl), {torch.nn.Linear},
                                               dtype=torch.qint8)
    x = np.random.default_rng(2).standard_normal((16, 64)).astype(np.float32)
    ours = quant.quantize_dynamic(lin)(ember.from_numpy(x)).numpy()
    theirs = tq(torch.from_numpy(x)).numpy()
    exact = lin(ember.from_numpy(x)).detach().numpy()
    # torch uses 7-bit activations (reduce_range) and per-tensor weights: ember's error
    # is at most torch's, and the two differ by no more than torch's own error
    torch_error = np.abs(theirs - exact).max()
    assert np.abs(ours - exact).max() <= torch_error
    assert np.abs(ours - theirs).max() <= 1.5 * torch_error
    assert torch_error < 0.02 * np.abs(exact).max()


def test_dynamic_accumulator_is_exact_int32():
    lin = _linear(4, 512, 8)
    qlin = quant.DynamicQuantizedLinear.from_float(lin)
    packed = qlin.packed()
    assert packed.dtype == np.float32  # 512 * 255 * 127 < 2**24: float32 BLAS is exact
    rng = np.random.default_rng(0)
    a = rng.integers(-255, 256, size=(7, 512))
    acc = quant.int_matmul(a.astype(packed.dtype), packed.matrix)
    reference = a.astype(np.int64) @ qlin.weight.numpy().astype(np.int64).T
    assert acc.dtype == np.int32
    np.testing.assert_array_equal(acc, reference)


def test_activation_qparams_as_calculate_qparams():
    from ember.quant.dynamic import _uint8_qparams, quantize_activation_uint8
    from ember.quant.qparams import calculate_qparams, quint8
    rng = np.random.default_rng(2)
    spans = rng.standard_normal((3000, 2)) * 10.0 ** rng.integers(-12, 12, (3000, 1))
    ranges = [(0.0, 0.0), (-1e-45, 0.0), (0.0, 3e-8), (-3e38, 3e38), (-2.0, -1.0),
              (1.0, 2.5)] + [tuple(np.sort(s).astype(np.float32).tolist()) for s in spans]
    for lo, hi in ranges:
        scale, zero_point = calculate_qparams(lo, hi, 0, 255, False, quint8)
        assert _uint8_qparams(lo, hi) == (float(scale), int(zero_point)), (lo, hi)
    x = rng.standard_normal((5, 33)).astype(np.float32) * 3 + 1
    q, scale, zero_point = quantize_activation_uint8(x)
    expected = np.clip(np.rint(x / np.float32(scale)) + np.float32(zero_point), 0, 255)
    np.testing.assert_array_equal(q, expected.astype(np.uint8))


def test_dynamic_lstm_close_to_float_and_keeps_shapes():
    ember.manual_seed(5)
    lstm = nn.LSTM(12, 20, num_layers=2, bidirectional=True, batch_first=True)
    model = quant.quantize_dynamic(nn.Sequential(lstm))
    qlstm = model[0]
    assert isinstance(qlstm, quant.DynamicQuantizedLSTM)
    assert qlstm.weight_ih_l0.dtype == ember.int8 and qlstm.weight_hh_l1_reverse.dtype == ember.int8
    x = ember.randn(3, 7, 12)
    out, (h, c) = qlstm(x)
    ref, (rh, rc) = lstm(x)
    assert out.shape == ref.shape and h.shape == rh.shape and c.shape == rc.shape
    assert np.abs(out.numpy() - ref.detach().numpy()).max() < 0.02
    assert np.abs(c.numpy() - rc.detach().numpy()).max() < 0.04


def test_dynamic_model_save_load_round_trip_keeps_int8():
    ember.manual_seed(6)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
    qmodel = quant.quantize_dynamic(model)
    buffer = io.BytesIO()
    ember.save(qmodel.state_dict(), buffer)
    buffer.seek(0)
    state = ember.load(buffer)
    assert state["0.weight"].dtype == ember.int8
    fresh = quant.quantize_dynamic(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8)))
    fresh.load_state_dict(state)
    x = ember.randn(4, 32)
    np.testing.assert_array_equal(fresh(x).numpy(), qmodel(x).numpy())


def test_quantize_dynamic_errors():
    with pytest.raises(ember.EmberTypeError, match="qint8"):
        quant.quantize_dynamic(nn.Linear(2, 2), dtype=quant.quint8)
    with pytest.raises(ember.EmberValueError, match="nn.Linear and nn.LSTM"):
        quant.quantize_dynamic(nn.Linear(2, 2), {nn.Conv2d})
    with pytest.raises(ember.ShapeError, match="expected input with 4 features"):
        quant.quantize_dynamic(nn.Linear(4, 2))(ember.randn(3, 5))
