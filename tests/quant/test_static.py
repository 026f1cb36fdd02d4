"""Static int8 quantization and QAT: the integer path is exact integer arithmetic, the
Digits CNN keeps its accuracy and shrinks on disk, QAT trains and converts."""

import numpy as np
import pytest

import ember
from ember import nn, quant
from ember.data.datasets import Digits


def _cnn():
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))


def trained_digits_cnn():
    """(model in eval mode, train loader, test loader): the CNN after 4 epochs of Adam on
    Digits, seeded (bench/inference.py uses it too)."""
    ember.manual_seed(0)
    train = ember.data.DataLoader(Digits(train=True), batch_size=64, shuffle=True)
    test = ember.data.DataLoader(Digits(train=False), batch_size=128)
    model = _cnn()
    opt = ember.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(4):
        for x, y in train:
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model.eval(), train, test


@pytest.fixture(scope="module")
def digits():
    return trained_digits_cnn()


def _requantize_reference(acc, bias, sx, sw, so, zo, relu, axis):
    shape = [1] * acc.ndim
    shape[axis] = -1
    bq = np.rint(bias.astype(np.float64) / (sx * sw.astype(np.float64))).astype(np.int64)
    real = (acc + bq.reshape(shape)) * (sx * sw.astype(np.float64) / so).reshape(shape)
    return np.clip(np.rint(real) + zo, zo if relu else 0, 255)


def test_quantized_linear_is_exact_integer_arithmetic():
    ember.manual_seed(1)
    model = nn.Sequential(nn.Linear(300, 50), nn.ReLU())
    prepared = quant.prepare(model)
    quant.calibrate(prepared, [ember.randn(64, 300) for _ in range(3)])
    qmodel = quant.convert(prepared)
    layer = qmodel.module[0]
    assert isinstance(layer, quant.QuantizedLinearReLU)
    assert layer.weight.dtype == ember.int8
    x = qmodel.quant(ember.randn(9, 300))
    assert x.data.dtype == np.uint8
    acc = layer.accumulate(x)
    reference = (x.data.astype(np.int64) - x.zero_point) @ \
        (layer.weight.numpy().astype(np.int64) - layer.weight_zero_point.numpy()[:, None]).T
    assert acc.dtype == np.int32
    np.testing.assert_array_equal(acc, reference)
    out = layer(x)
    assert out.data.dtype == np.uint8 and out.zero_point == layer.zero_point
    expected = _requantize_reference(reference, layer.bias.numpy(), x.scale,
                                     layer.weight_scale.numpy(), layer.scale,
                                     layer.zero_point, True, 1)
    assert np.abs(out.data.astype(np.int64) - expected).max() <= 1  # float32 multiplier
    assert (out.data.astype(np.int64) == expected).mean() > 0.99


@pytest.mark.parametrize("stride,padding,groups", [(1, 1, 1), (2, 0, 1), (1, 2, 4)])
def test_quantized_conv_is_exact_integer_arithmetic(stride, padding, groups):
    ember.manual_seed(2)
    conv = nn.Conv2d(8, 12, 3, stride=stride, padding=padding, groups=groups)
    prepared = quant.prepare(nn.Sequential(conv))
    quant.calibrate(prepared, [ember.randn(2, 8, 11, 10)])
    qmodel = quant.convert(prepared)
    layer = qmodel.module[0]
    x = qmodel.quant(ember.randn(3, 8, 11, 10))
    acc = layer.accumulate(x)
    # int64 reference: zero padding in the centred domain, direct loops over taps
    xc = np.pad(x.data.astype(np.int64) - x.zero_point,
                ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    w = layer.weight.numpy().astype(np.int64)
    cg, og = 8 // groups, 12 // groups
    ho = (11 + 2 * padding - 3) // stride + 1
    wo = (10 + 2 * padding - 3) // stride + 1
    reference = np.zeros((3, 12, ho, wo), np.int64)
    for o in range(12):
        g = o // og
        for i in range(3):
            for j in range(3):
                patch = xc[:, g * cg:(g + 1) * cg, i:i + stride * ho:stride, j:j + stride * wo:stride]
                reference[:, o] += np.einsum("nchw,c->nhw", patch, w[o, :, i, j])
    assert acc.dtype == np.int32
    np.testing.assert_array_equal(acc, reference)
    real = qmodel(ember.randn(3, 8, 11, 10))
    assert real.shape == (3, 12, ho, wo)


def test_digits_cnn_static_int8_keeps_accuracy_and_shrinks(digits, tmp_path):
    model, train, test = digits
    prepared = quant.prepare(model)
    quant.calibrate(prepared, train, num_batches=8)
    qmodel = quant.convert(prepared)
    kinds = [type(m).__name__ for m in qmodel.modules()]
    assert kinds.count("QuantizedConvReLU2d") == 2 and kinds.count("QuantizedLinearReLU") == 1
    lines = []
    result = quant.report(model, qmodel, test, print_fn=lines.append)
    assert result["float_accuracy"] > 85
    assert result["accuracy_drop"] <= 1.0
    assert "smaller" in lines[0]

    float_path, quant_path = tmp_path / "float.safetensors", tmp_path / "int8.safetensors"
    ember.save(model.state_dict(), float_path)
    ember.save(qmodel.state_dict(), quant_path)
    ratio = float_path.stat().st_size / quant_path.stat().st_size
    assert ratio >= 3.5
    assert quant.quantized_size_bytes(qmodel) == quant_path.stat().st_size

    # load into a freshly prepared and converted skeleton: same outputs, int8 on disk
    state = ember.load(quant_path)
    assert state["module.3.weight"].dtype == ember.int8  # the fused conv+ReLU
    with pytest.warns(UserWarning, match="no data was observed"):
        skeleton = quant.convert(quant.prepare(_cnn()))
    skeleton.load_state_dict(state)
    x = next(iter(test))[0]
    np.testing.assert_array_equal(skeleton(x).numpy(), qmodel(x).numpy())


def test_percentile_calibration_also_keeps_accuracy(digits):
    model, train, test = digits
    prepared = quant.prepare(model, quant.percentile_qconfig)
    quant.calibrate(prepared, train, num_batches=8)
    qmodel = quant.convert(prepared)
    drop = quant.evaluate_accuracy(model, test) - quant.evaluate_accuracy(qmodel, test)
    assert drop <= 1.5


def test_fake_quantize_straight_through_gradient():
    x = ember.tensor([-3.0, -0.04, 0.26, 0.5, 2.0], requires_grad=True)
    scale, zero_point = ember.tensor(0.1), ember.tensor(3.0)
    y = quant.fake_quantize(x, scale, zero_point, 0, 15)  # grid [-0.3, 1.2]
    np.testing.assert_allclose(y.detach().numpy(), [-0.3, 0.0, 0.3, 0.5, 1.2], atol=1e-6)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 1.0, 1.0, 1.0, 0.0])


def test_learnable_fake_quantize_scale_gets_a_gradient():
    fq = quant.FakeQuantize(learnable=True, dtype=quant.quint8)
    fq(ember.linspace(-1, 1, 50))  # initialises scale from the observer
    assert isinstance(fq.scale, nn.Parameter)
    y = fq(ember.linspace(-2, 2, 50))
    (y * y).sum().backward()
    assert fq.scale.grad is not None and abs(fq.scale.grad.item()) > 0


def test_qat_fine_tune_trains_and_converts(digits):
    model, train, test = digits
    qat = quant.prepare_qat(model)
    assert any(isinstance(m, quant.QATConvReLU2d) for m in qat.modules())
    opt = ember.optim.Adam(qat.parameters(), lr=5e-4)
    losses = []
    for i, (x, y) in enumerate(train):
        loss = nn.functional.cross_entropy(qat(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if i == 9:
            break
    grads = [p.grad for p in qat.parameters() if p.grad is not None]
    assert len(grads) == 8 and all(np.isfinite(g.numpy()).all() for g in grads)
    qmodel = quant.convert(qat)
    assert not any(isinstance(m, quant.FakeQuantize) for m in qmodel.modules())
    fake_acc = quant.evaluate_accuracy(qat.eval(), test)
    int_acc = quant.evaluate_accuracy(qmodel, test)
    assert int_acc >= quant.evaluate_accuracy(model, test) - 2.0
    assert abs(int_acc - fake_acc) <= 1.0  # the fake-quant model predicted the int8 one


def test_static_errors_name_the_problem():
    layer = quant.convert(quant.calibrate(quant.prepare(nn.Linear(4, 2)), [ember.randn(3, 4)]))
    with pytest.raises(ember.EmberTypeError, match="expected a quantized activation"):
        layer.module(ember.randn(3, 4))
    with pytest.raises(ember.ShapeError, match="expected input with 4 features"):
        layer(ember.randn(3, 5))
    with pytest.raises(ember.EmberTypeError, match="QConfig"):
        quant.prepare(nn.Linear(4, 2), qconfig="int8")
    with pytest.raises(ember.EmberValueError, match="following ReLU"):
        quant.fuse_modules(nn.Sequential(nn.Linear(2, 2), nn.Tanh()), [["0", "1"]])
