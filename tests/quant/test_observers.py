"""Observers' scale and zero point against torch.ao.quantization's, and the
percentile observer's clipping."""
import numpy as np
import pytest

import ember
from ember import quant

torch = pytest.importorskip("torch")
tq = pytest.importorskip("torch.ao.quantization")

_DTYPES = {quant.qint8: torch.qint8, quant.quint8: torch.quint8}
_SCHEMES = {quant.per_tensor_affine: torch.per_tensor_affine,
            quant.per_tensor_symmetric: torch.per_tensor_symmetric,
            quant.per_channel_affine: torch.per_channel_affine,
            quant.per_channel_symmetric: torch.per_channel_symmetric}


def _batches(seed, shape, shift):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(shape) * rng.uniform(0.1, 5) + shift).astype(np.float32)
            for _ in range(3)]


@pytest.mark.parametrize("dtype", [quant.quint8, quant.qint8])
@pytest.mark.parametrize("qscheme", [quant.per_tensor_affine, quant.per_tensor_symmetric])
@pytest.mark.parametrize("reduce_range", [False, True])
@pytest.mark.parametrize("shift", [0.0, 2.5, -4.0])
def test_minmax_matches_torch(dtype, qscheme, reduce_range, shift):
    if dtype is quant.quint8 and qscheme == quant.per_tensor_symmetric and reduce_range:
        with pytest.raises(NotImplementedError, match="reduce_range"):
            quant.MinMaxObserver(dtype=dtype, qscheme=qscheme, reduce_range=True)
        return
    ours = quant.MinMaxObserver(dtype=dtype, qscheme=qscheme, reduce_range=reduce_range)
    theirs = tq.MinMaxObserver(dtype=_DTYPES[dtype], qscheme=_SCHEMES[qscheme],
                               reduce_range=reduce_range)
    for batch in _batches(int(abs(shift) * 10) + 7, (16, 33), shift):
        ours(ember.from_numpy(batch))
        theirs(torch.from_numpy(batch))
    scale, zero_point = ours.calculate_qparams()
    t_scale, t_zero_point = theirs.calculate_qparams()
    assert scale.numpy().tobytes() == t_scale.numpy().astype(np.float32).reshape(()).tobytes()
    assert zero_point.item() == int(t_zero_point.item())


@pytest.mark.parametrize("quant_min,quant_max", [(-127, 127), (-100, 50)])
def test_minmax_custom_range_matches_torch(quant_min, quant_max):
    for qscheme in (quant.per_tensor_affine, quant.per_tensor_symmetric):
        ours = quant.MinMaxObserver(dtype=quant.qint8, qscheme=qscheme,
                                    quant_min=quant_min, quant_max=quant_max)
        theirs = tq.MinMaxObserver(dtype=torch.qint8, qscheme=_SCHEMES[qscheme],
                                   quant_min=quant_min, quant_max=quant_max)
        x = _batches(3, (50,), 0.7)[0]
        ours(ember.from_numpy(x))
        theirs(torch.from_numpy(x))
        assert ours.calculate_qparams()[0].item() == pytest.approx(
            theirs.calculate_qparams()[0].item(), rel=1e-7)
        assert ours.calculate_qparams()[1].item() == theirs.calculate_qparams()[1].item()


@pytest.mark.parametrize("dtype", [quant.quint8, quant.qint8])
@pytest.mark.parametrize("qscheme", [quant.per_channel_affine, quant.per_channel_symmetric])
@pytest.mark.parametrize("ch_axis", [0, 1])
def test_per_channel_matches_torch(dtype, qscheme, ch_axis):
    ours = quant.PerChannelMinMaxObserver(ch_axis=ch_axis, dtype=dtype, qscheme=qscheme)
    theirs = tq.PerChannelMinMaxObserver(ch_axis=ch_axis, dtype=_DTYPES[dtype],
                                         qscheme=_SCHEMES[qscheme])
    for batch in _batches(11, (6, 5, 4), 0.3):
        ours(ember.from_numpy(batch))
        theirs(torch.from_numpy(batch))
    scale, zero_point = ours.calculate_qparams()
    t_scale, t_zero_point = theirs.calculate_qparams()
    np.testing.assert_array_equal(scale.numpy(), t_scale.numpy().astype(np.float32))
    np.testing.assert_array_equal(zero_point.numpy(), t_zero_point.numpy())


def test_minmax_known_values():
    obs = quant.MinMaxObserver()
    obs(ember.tensor([-1.0, 3.0]))
    scale, zero_point = obs.calculate_qparams()
    assert scale.item() == pytest.approx(4.0 / 255)
    assert zero_point.item() == 64  # 0 - round(-1 / (4/255)) = round(63.75)


def test_observer_without_data_warns_and_uses_unit_scale():
    with pytest.warns(UserWarning, match="no data was observed"):
        scale, zero_point = quant.MinMaxObserver().calculate_qparams()
    assert (scale.item(), zero_point.item()) == (1.0, 0)


def test_percentile_ignores_outliers_minmax_does_not():
    x = np.concatenate([np.linspace(-1, 1, 20000, dtype=np.float32),
                        np.array([50.0], np.float32)])
    minmax, pct = quant.MinMaxObserver(), quant.PercentileObserver(percentile=99.9)
    for half in (x[::2], x[1::2]):  # two batches: the histogram is re-binned once
        minmax(ember.from_numpy(half))
        pct(ember.from_numpy(half))
    assert minmax.calculate_qparams()[0].item() == pytest.approx(51 / 255)
    low, high = pct._observed_range()
    # the 0.1 % tails of U(-1, 1) end near -0.998 / 0.998; one bin is 51/2048 wide
    assert -1.03 < low < -0.97 and 0.97 < high < 1.03
    assert pct.calculate_qparams()[0].item() < 0.0081


def test_observer_errors_name_the_problem():
    with pytest.raises(ember.EmberTypeError, match="qint8 or ember.quant.quint8"):
        quant.MinMaxObserver(dtype=ember.int8)
    with pytest.raises(ember.EmberValueError, match="qscheme must be one of"):
        quant.MinMaxObserver(qscheme=quant.per_channel_affine)
    with pytest.raises(ember.EmberValueError, match="percentile must be in"):
        quant.PercentileObserver(percentile=40)
    with pytest.raises(ember.EmberTypeError, match="floating-point"):
        quant.MinMaxObserver()(ember.tensor([1, 2]))
