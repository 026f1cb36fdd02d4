"""The C 2-D max pooling with indices and its backward (ops/pool_kernels.py) against the
NumPy paths they replace: the same values and winners (ties, NaN, padding, dilation,
ceil mode), the same gradients."""
import numpy as np
import pytest

from ember.ops import pool_kernels, pooling

pytestmark = pytest.mark.skipif(pool_kernels.LOOP.get(np.float32) is None,
                                reason="no C compiler")

# (input shape, kernel, stride, padding, dilation, ceil_mode)
GEOMETRIES = [((2, 3, 8, 8), (2, 2), (2, 2), (0, 0), (1, 1), False),
              ((2, 3, 9, 7), (3, 3), (2, 2), (1, 1), (1, 1), False),
              ((1, 2, 10, 11), (3, 2), (1, 2), (1, 0), (2, 1), False),
              ((2, 1, 7, 7), (2, 2), (2, 2), (0, 0), (1, 1), True),
              ((1, 1, 5, 6), (3, 3), (3, 2), (1, 1), (1, 2), True),
              ((64, 32, 26, 26), (2, 2), (2, 2), (0, 0), (1, 1), False),
              ((2, 2, 9, 7), (2, 2), (2, 2), (0, 0), (1, 1), False)]  # (odd: a row left)


def _out_size(shape, kernel, stride, pads, dilation, ceil_mode):
    return pooling._pool_output_size("max_pool2d", shape[2:], kernel, stride, pads,
                                     dilation, ceil_mode)


def _data(shape, data, dtype, seed):
    """Random values, small integers (ties), or -inf, NaN, 1 and 0 (specials)."""
    rng = np.random.default_rng(seed)
    if data == "random":
        x = rng.standard_normal(shape)
    elif data == "ties":
        x = rng.integers(0, 3, shape).astype(np.float64)
    else:
        x = rng.choice([-np.inf, np.nan, 1.0, -np.inf, 0.0], size=shape)
    return x.astype(dtype)


def _numpy(x, kernel, stride, dilation, pads, out):
    plans = pooling._regular_plans(x.shape[2:], kernel, stride, dilation, pads, out)
    return pooling._window_max(np, x, plans, True, nan_aware=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("data", ["random", "ties", "specials"])
def test_values_and_winners_equal_numpy(dtype, geometry, data):
    shape, kernel, stride, pads, dilation, ceil_mode = geometry
    x = _data(shape, data, dtype, sum(shape))
    out = _out_size(shape, kernel, stride, pads, dilation, ceil_mode)
    values, index = pool_kernels.max_pool2d(x, kernel, stride, dilation, pads, out)
    ref_values, ref_index = _numpy(x, kernel, stride, dilation, pads, out)
    np.testing.assert_array_equal(values, ref_values)
    np.testing.assert_array_equal(index, ref_index)


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_backward_equals_numpy(geometry, monkeypatch):
    shape, kernel, stride, pads, dilation, ceil_mode = geometry
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(np.float32)
    out = _out_size(shape, kernel, stride, pads, dilation, ceil_mode)
    _, index = pool_kernels.max_pool2d(x, kernel, stride, dilation, pads, out)
    g = rng.standard_normal(index.shape).astype(np.float32)
    overlaps = any(d * (k - 1) + 1 > s for k, s, d in zip(kernel, stride, dilation))
    got = pooling._max_unpool_forward(np, g, index, shape[2:], overlaps)
    monkeypatch.setattr(pool_kernels, "max_unpool2d", lambda *a: None)
    ref = pooling._max_unpool_forward(np, g, index, shape[2:], overlaps)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


def test_threads_do_not_change_results(monkeypatch):
    x = np.random.default_rng(2).standard_normal((8, 16, 20, 20)).astype(np.float32)
    args = (x, (3, 3), (2, 2), (1, 1), (1, 1), (10, 10))
    monkeypatch.setattr(pool_kernels, "MIN_PARALLEL", 1 << 40)
    one = pool_kernels.max_pool2d(*args)
    monkeypatch.setattr(pool_kernels, "MIN_PARALLEL", 1)
    many = pool_kernels.max_pool2d(*args)
    for a, b in zip(one, many):
        np.testing.assert_array_equal(a, b)


def test_an_index_out_of_range_is_left_to_numpy():
    g = np.ones((1, 1, 2, 2), np.float32)
    bad = np.array([[[[0, 1], [2, 99]]]], dtype=np.int64)
    assert pool_kernels.max_unpool2d(g, bad, (3, 3)) is None
    assert pool_kernels.max_unpool2d(g, bad.astype(np.int32), (3, 3)) is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 3, 34, 40), (1, 2, 33, 35)])  # (odd: a row left)
@pytest.mark.parametrize("data", ["random", "ties", "specials"])
def test_values_alone_equal_numpy_for_the_usual_window(dtype, shape, data):
    x = _data(shape, data, dtype, 3)
    out = (shape[2] // 2, shape[3] // 2)
    got = pool_kernels.max_pool2d_values(x, (2, 2), (2, 2), (1, 1), (0, 0), out)
    plans = pooling._regular_plans(x.shape[2:], (2, 2), (2, 2), (1, 1), (0, 0), out)
    np.testing.assert_array_equal(got, pooling._window_max(np, x, plans, False))
    # other windows, and short rows, are NumPy's
    assert pool_kernels.max_pool2d_values(x, (3, 3), (2, 2), (1, 1), (0, 0), out) is None
    assert pool_kernels.max_pool2d_values(x[..., :20], (2, 2), (2, 2), (1, 1), (0, 0),
                                          (out[0], 10)) is None
