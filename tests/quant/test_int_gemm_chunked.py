"""The float route of the int8 products (no integer kernel): float32 GEMMs over chunks of
K short enough to stay exact, added in int32, against an int64 NumPy reference."""
import numpy as np
import pytest

import ember
from ember.errors import EmberValueError
from ember.quant import int8_gemm
from ember.quant.int_gemm import (chunked_int_matmul, exact_float32_terms, exact_float_dtype,
                                  uint8_rows_product)
from ember.quant.weights import PackedWeight


def _reference(x, xz, q, wz):
    return (x.astype(np.int64) - xz) @ (q.astype(np.int64) - wz[:, None]).T


def test_exact_bounds():
    assert exact_float32_terms(255, 128) == 514  # 514 * 32640 < 2**24 <= 515 * 32640
    assert exact_float32_terms(255, 255) == 258
    assert exact_float32_terms(5000, 5000) == 0
    assert exact_float_dtype(514, 255, 128) == np.float32
    assert exact_float_dtype(515, 255, 128) == np.float64
    with pytest.raises(EmberValueError, match=r"int_matmul: .* past the int32 accumulator"):
        exact_float_dtype(70000, 255, 128)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 514, 5), (4, 515, 9), (1, 1024, 33),
                                   (7, 1029, 16), (5, 3001, 3), (2, 0, 4)])
def test_chunked_product_is_exact(m, k, n):
    rng = np.random.default_rng(m * 7 + k + n)
    a = rng.integers(-255, 256, (m, k))
    b = rng.integers(-128, 128, (k, n))
    got = chunked_int_matmul(a.astype(np.float32), b.astype(np.float32), 514)
    assert got.dtype == np.int32 and got.shape == (m, n)
    np.testing.assert_array_equal(got, a @ b)


@pytest.mark.parametrize("value", [-255, 255])
def test_chunked_product_of_extremes(value):
    # partial sums far past 2**24 with odd products: one float32 GEMM would round them
    k = 4099
    a = np.full((3, k), value, np.float32)
    b = np.full((k, 5), 127, np.float32)
    got = chunked_int_matmul(a, b, exact_float32_terms(255, 127))
    assert (got == value * 127 * k).all()


@pytest.fixture
def no_kernel(monkeypatch):
    monkeypatch.setitem(int8_gemm._state, "kernel", None)  # as without an int8 kernel


@pytest.mark.parametrize("m,k,n", [(1, 1024, 64), (9, 600, 17), (64, 1030, 40)])
@pytest.mark.parametrize("zero_points", ["none", "both"])
def test_float_route_is_exact_and_float32(no_kernel, m, k, n, zero_points):
    rng = np.random.default_rng(m + k + n)
    x = rng.integers(0, 256, (m, k)).astype(np.uint8)
    q = rng.integers(-128, 128, (n, k)).astype(np.int8)
    wz = rng.integers(-20, 21, n).astype(np.int32) if zero_points == "both" \
        else np.zeros(n, np.int32)
    xz = 201 if zero_points == "both" else 0
    packed = PackedWeight(q, wz, 255)
    assert packed.int8 is None and packed.dtype == np.float64
    got = uint8_rows_product(x, xz, packed)
    np.testing.assert_array_equal(got, _reference(x, xz, q, wz))
    assert got.dtype == np.int32
    assert packed.rows32.dtype == np.float32
    assert "matrix" not in vars(packed) and "row_major" not in vars(packed)  # no float64


def test_extreme_values_on_the_float_route(no_kernel):
    k = 2050
    x = np.zeros((3, k), np.uint8)  # x - 255 = -255 everywhere
    q = np.full((6, k), -128, np.int8)
    wz = np.full(6, 127, np.int32)  # w - 127 = -255 everywhere
    got = uint8_rows_product(x, 255, PackedWeight(q, wz, 255))
    assert (got == 255 * 255 * k).all()


def test_dynamic_linear_same_on_kernel_and_chunks(monkeypatch):
    ember.manual_seed(1)
    lin = ember.nn.Linear(1100, 37)
    qlin = ember.quant.DynamicQuantizedLinear.from_float(lin)
    x = ember.randn(5, 1100)
    first = qlin(x).numpy()
    monkeypatch.setitem(int8_gemm._state, "kernel", None)
    qlin._packed = None
    assert qlin.packed().dtype == np.float64  # so the chunked float32 route runs
    np.testing.assert_array_equal(qlin(x).numpy(), first)
