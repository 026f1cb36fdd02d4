"""The int8 kernel (AVX-512 VNNI or AVX2) against an int64 NumPy reference, and the
quantized layers giving the same integers on the kernel and on the float-BLAS route."""
import numpy as np
import pytest

import ember
from ember.quant import int8_gemm
from ember.quant.int_gemm import uint8_rows_product
from ember.quant.weights import PackedWeight

needs_kernel = pytest.mark.skipif(not int8_gemm.available(),
                                  reason="no int8 kernel (AVX2, AVX-512 VNNI) here")


def _reference(x, xz, q, wz):
    return (x.astype(np.int64) - xz) @ (q.astype(np.int64) - wz[:, None]).T


@needs_kernel
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 5, 7), (4, 4, 16), (5, 33, 31),
                                   (17, 100, 65), (64, 300, 96), (130, 1024, 200)])
@pytest.mark.parametrize("zero_points", ["none", "activation", "both"])
def test_kernel_is_exact(m, k, n, zero_points):
    rng = np.random.default_rng(m * 1000 + k + n)
    x = rng.integers(0, 256, (m, k)).astype(np.uint8)
    q = rng.integers(-128, 128, (n, k)).astype(np.int8)
    xz = 0 if zero_points == "none" else 131
    wz = rng.integers(-7, 8, n).astype(np.int32) if zero_points == "both" \
        else np.zeros(n, np.int32)
    got = int8_gemm.accumulate(x, xz, int8_gemm.PackedInt8Weight(q, wz))
    assert got.dtype == np.int32 and got.shape == (m, n)
    np.testing.assert_array_equal(got, _reference(x, xz, q, wz))


@needs_kernel
def test_extreme_values_do_not_overflow():
    k = 4096
    x = np.full((4, k), 255, np.uint8)
    q = np.full((16, k), -128, np.int8)
    got = int8_gemm.accumulate(x, 0, int8_gemm.PackedInt8Weight(q, np.zeros(16, np.int32)))
    assert (got == 255 * -128 * k).all()


@needs_kernel
def test_packed_weight_routes_agree(monkeypatch):
    rng = np.random.default_rng(0)
    q = rng.integers(-128, 128, (40, 72)).astype(np.int8)
    wz = rng.integers(-3, 4, 40).astype(np.int32)
    x = rng.integers(0, 256, (9, 72)).astype(np.uint8)
    packed = PackedWeight(q, wz, 255)
    assert packed.int8 is not None
    on_kernel = uint8_rows_product(x, 77, packed)
    packed.int8 = None  # the float-BLAS route
    on_floats = uint8_rows_product(x, 77, packed)
    np.testing.assert_array_equal(on_kernel, on_floats)
    np.testing.assert_array_equal(on_kernel, _reference(x, 77, q, wz))


def test_dynamic_linear_same_on_both_routes(monkeypatch):
    ember.manual_seed(0)
    lin = ember.nn.Linear(96, 48)
    qlin = ember.quant.DynamicQuantizedLinear.from_float(lin)
    x = ember.randn(11, 96)
    first = qlin(x).numpy()
    monkeypatch.setitem(int8_gemm._state, "kernel", None)  # as without an int8 kernel
    qlin._packed = None
    second = qlin(x).numpy()
    np.testing.assert_array_equal(first, second)
    # and within quantization error of the float layer
    np.testing.assert_allclose(first, lin(x).detach().numpy(), atol=0.05)
