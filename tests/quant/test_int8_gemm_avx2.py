"""The AVX2 int8 kernel (``vpmaddwd`` on int16-widened operands) against an int64 NumPy
reference: odd shapes, extreme values with zero points, several threads against one;
and the same integers through ``int8_gemm.accumulate`` wherever it runs that kernel."""
import numpy as np
import pytest

from ember.compiler.codegen import build
from ember.quant import int8_gemm, int8_gemm_avx2


def _avx2_kernel():
    """The AVX2 kernel compiled here (also on a CPU with VNNI, which has AVX2), or None."""
    kernel = build.load_c_function("int8_gemm_avx2", int8_gemm_avx2.SOURCE)
    if kernel is None:
        return None
    probe = np.zeros(13, np.int64)
    probe[0] = 1
    kernel(probe.ctypes.data)
    return kernel if probe[8] == 1 else None


KERNEL = _avx2_kernel()
needs_avx2 = pytest.mark.skipif(KERNEL is None, reason="no AVX2 or no C compiler here")


def _reference(x, xz, q, wz):
    return (x.astype(np.int64) - xz) @ (q.astype(np.int64) - wz[:, None]).T


def _product(x, xz, q, threads=2):
    packed, panels, k2 = int8_gemm_avx2.pack(q)
    return int8_gemm_avx2.run(KERNEL, threads, x, xz, packed, panels, k2, q.shape[0])


@needs_avx2
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (1, 3, 17), (2, 2, 16), (5, 15, 7),
                                   (6, 16, 32), (7, 17, 33), (13, 33, 100), (1, 1023, 64),
                                   (64, 100, 31), (12, 257, 48)])
@pytest.mark.parametrize("xz", [0, 131, 255])
def test_kernel_is_exact(m, k, n, xz):
    rng = np.random.default_rng(m * 10007 + k * 101 + n + xz)
    x = rng.integers(0, 256, (m, k)).astype(np.uint8)
    q = rng.integers(-128, 128, (n, k)).astype(np.int8)
    got = _product(x, xz, q)
    assert got.dtype == np.int32 and got.shape == (m, n)
    np.testing.assert_array_equal(got, _reference(x, xz, q, np.zeros(n, np.int64)))


@needs_avx2
@pytest.mark.parametrize("xz", [0, 255])
@pytest.mark.parametrize("w", [-128, 127])
def test_extreme_values_are_exact(xz, w):
    # every pair at the largest magnitude: 2 * 255 * 128 (past vpmaddubsw's int16)
    k, n = 4099, 19
    x = np.full((7, k), 0 if xz else 255, np.uint8)
    q = np.full((n, k), w, np.int8)
    got = _product(x, xz, q)
    expected = (-255 if xz else 255) * w * k
    assert (got == expected).all()


@needs_avx2
def test_threads_give_identical_results():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (37, 300)).astype(np.uint8)
    q = rng.integers(-128, 128, (70, 300)).astype(np.int8)
    one = _product(x, 9, q, threads=1)
    for threads in (2, 3, 8):
        np.testing.assert_array_equal(_product(x, 9, q, threads=threads), one)
    np.testing.assert_array_equal(one, _reference(x, 9, q, np.zeros(70, np.int64)))


@needs_avx2
def test_strided_rows_and_empty_shapes():
    rng = np.random.default_rng(4)
    wide = rng.integers(0, 256, (9, 80)).astype(np.uint8)
    x = wide[::2, 5:55]  # neither row nor column contiguous with the buffer
    q = rng.integers(-128, 128, (21, 50)).astype(np.int8)
    np.testing.assert_array_equal(_product(x, 40, q),
                                  _reference(x, 40, q, np.zeros(21, np.int64)))
    assert _product(np.zeros((0, 50), np.uint8), 0, q).shape == (0, 21)
    assert _product(x, 0, np.zeros((0, 50), np.int8)).shape == (5, 0)
    # K = 0: the empty sum
    np.testing.assert_array_equal(_product(np.zeros((3, 0), np.uint8), 7,
                                           np.zeros((4, 0), np.int8)), np.zeros((3, 4)))


@pytest.mark.skipif(int8_gemm.kind() != "avx2", reason="the AVX2 kernel does not run here")
@pytest.mark.parametrize("m,k,n", [(1, 1024, 64), (6, 31, 5), (23, 200, 45)])
def test_accumulate_folds_both_zero_points(m, k, n):
    rng = np.random.default_rng(m + k + n)
    x = rng.integers(0, 256, (m, k)).astype(np.uint8)
    q = rng.integers(-128, 128, (n, k)).astype(np.int8)
    wz = rng.integers(-128, 128, n).astype(np.int32)
    weight = int8_gemm.PackedInt8Weight(q, wz)
    assert weight.kind == "avx2"
    got = int8_gemm.accumulate(x, 200, weight)
    np.testing.assert_array_equal(got, _reference(x, 200, q, wz))
