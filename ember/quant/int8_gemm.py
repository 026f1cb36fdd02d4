"""int8 × uint8 → int32 matrix products on the CPU's integer dot-product instructions.

Which kernel runs (:func:`kind`):

- ``"vnni"``, where the CPU has AVX-512 VNNI (``vpdpbusd``: 64 byte products summed
  four at a time into 16 int32 lanes, per instruction): the weight is packed once into
  16-column panels of 4-byte groups, each activation row's 4 bytes are broadcast, and
  the sums land in int32 accumulators, exactly (4 products of at most 255 · 128 each
  never overflow the lane). Zero points are folded in afterwards from row and column
  sums.
- ``"avx2"``, where the CPU has AVX2 but no VNNI (:mod:`ember.quant.int8_gemm_avx2`):
  both operands widened to int16 and multiplied with ``vpmaddwd`` (pairs of exact
  products into 8 int32 lanes), the weight packed once into 16-column panels of int8
  pairs, the activation's zero point subtracted as its rows are widened.

Either gives the exact ``sum_k (x - x_zp)(w - w_zp)``, the same integers as the float-BLAS
route of :mod:`ember.quant.int_gemm`. Where neither runs (no AVX2, no C compiler, or
``EMBER_INT8_KERNEL=0``), :func:`accumulate` returns None and callers take that float
route (float32 GEMMs, split over K where one would not be exact).

Callers: dynamic and static quantized Linear (through
:func:`ember.quant.int_gemm.uint8_rows_product`); Conv2d always takes the float route.
Measured on a 2-core AMD EPYC with AVX2 and no AVX-512 (``bench/inference.py``, dynamic
int8 ``Linear(1024, 1024)`` time / float32 time): the AVX2 kernel made it 1.30x at batch
1 and 0.89x at batch 64, against 7.08x and 4.04x on the float route before (which
carried K = 1024 in float64). There one core does about 20 G multiply-adds a second
through ``vpmaddwd`` from 6 rows up (that instruction's peak) and 13 G for a single
row, against about 14 G for float32 GEMM: int8 pays a little at batch 64, and at batch
1 not at all (quantizing the activation and the Python around the call cost more than
the quarter-size weight saves).
"""
from __future__ import annotations

import os

import numpy as np

from ..backends.addresses import address
from . import int8_gemm_avx2

__all__ = ["PackedInt8Weight", "accumulate", "available", "kind"]

_PANEL = 16   # output columns per 512-bit accumulator
_STEP = 32    # columns per micro-kernel (two panels)
_ROWS = 4     # activation rows per micro-kernel

_SOURCE = r"""
#include <stdint.h>
#include <string.h>
#ifdef __AVX512VNNI__
#include <immintrin.h>
#endif
/* p = [threads, M (multiple of 4), panels (even), K4 (K / 4), A, B, C, N, status]
   A: uint8 (M, 4 K4) rows; B: int8 (panels, K4, 16, 4); C: int32 (M, N) rows. */
void ember_kernel(int64_t *p)
{
#ifdef __AVX512VNNI__
    const int threads = (int)p[0];
    const int64_t M = p[1], panels = p[2], K4 = p[3], N = p[7];
    const uint8_t *A = (const uint8_t *)p[4];
    const int8_t *B = (const int8_t *)p[5];
    int32_t *C = (int32_t *)p[6];
    const int64_t steps = panels / 2, row_blocks = M / 4;
    p[8] = 1;
    #pragma omp parallel for collapse(2) schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t s = 0; s < steps; s++) {
        for (int64_t rb = 0; rb < row_blocks; rb++) {
            const int8_t *b0 = B + (2 * s) * K4 * 64, *b1 = b0 + K4 * 64;
            const uint8_t *a = A + rb * 4 * 4 * K4;
            __m512i c00 = _mm512_setzero_si512(), c01 = _mm512_setzero_si512();
            __m512i c10 = _mm512_setzero_si512(), c11 = _mm512_setzero_si512();
            __m512i c20 = _mm512_setzero_si512(), c21 = _mm512_setzero_si512();
            __m512i c30 = _mm512_setzero_si512(), c31 = _mm512_setzero_si512();
            for (int64_t k = 0; k < K4; k++) {
                const __m512i w0 = _mm512_loadu_si512((const void *)(b0 + k * 64));
                const __m512i w1 = _mm512_loadu_si512((const void *)(b1 + k * 64));
                int32_t v0, v1, v2, v3;
                memcpy(&v0, a + 4 * k, 4);
                memcpy(&v1, a + 4 * (K4 + k), 4);
                memcpy(&v2, a + 4 * (2 * K4 + k), 4);
                memcpy(&v3, a + 4 * (3 * K4 + k), 4);
                const __m512i x0 = _mm512_set1_epi32(v0), x1 = _mm512_set1_epi32(v1);
                const __m512i x2 = _mm512_set1_epi32(v2), x3 = _mm512_set1_epi32(v3);
                c00 = _mm512_dpbusd_epi32(c00, x0, w0); c01 = _mm512_dpbusd_epi32(c01, x0, w1);
                c10 = _mm512_dpbusd_epi32(c10, x1, w0); c11 = _mm512_dpbusd_epi32(c11, x1, w1);
                c20 = _mm512_dpbusd_epi32(c20, x2, w0); c21 = _mm512_dpbusd_epi32(c21, x2, w1);
                c30 = _mm512_dpbusd_epi32(c30, x3, w0); c31 = _mm512_dpbusd_epi32(c31, x3, w1);
            }
            const int64_t col = s * 32;
            const __mmask16 m0 = col >= N ? 0 : (N - col >= 16 ? 0xFFFF : (__mmask16)((1u << (N - col)) - 1));
            const __mmask16 m1 = col + 16 >= N ? 0 : (N - col - 16 >= 16 ? 0xFFFF : (__mmask16)((1u << (N - col - 16)) - 1));
            int32_t *r = C + rb * 4 * N + col;
            _mm512_mask_storeu_epi32(r, m0, c00); _mm512_mask_storeu_epi32(r + 16, m1, c01);
            r += N;
            _mm512_mask_storeu_epi32(r, m0, c10); _mm512_mask_storeu_epi32(r + 16, m1, c11);
            r += N;
            _mm512_mask_storeu_epi32(r, m0, c20); _mm512_mask_storeu_epi32(r + 16, m1, c21);
            r += N;
            _mm512_mask_storeu_epi32(r, m0, c30); _mm512_mask_storeu_epi32(r + 16, m1, c31);
        }
    }
#else
    p[8] = 0;
#endif
}
"""

# (kind, cache name, C source), in the order they are tried
KERNELS = (("vnni", "int8_gemm", _SOURCE), ("avx2", "int8_gemm_avx2", int8_gemm_avx2.SOURCE))
_state: dict = {}


def _kernel():
    """The compiled kernel (and the threads it may use) when this CPU has AVX-512 VNNI or
    AVX2 and a C compiler is found, else None; ``_state["kind"]`` says which."""
    if "kernel" not in _state:
        _state["kernel"] = None
        if os.environ.get("EMBER_INT8_KERNEL", "1") != "0":
            from ..compiler.codegen import build
            for kind, name, source in KERNELS:
                kernel = build.load_c_function(name, source)
                if kernel is None:  # no compiler, or it failed (then the float route)
                    continue
                probe = np.zeros(12, np.int64)  # M = 0: only reports whether it is in
                probe[0] = 1
                kernel(address(probe))
                if probe[8] == 1:
                    _state["kernel"], _state["kind"] = (kernel, build.max_threads()), kind
                    break
    return _state["kernel"]


def available() -> bool:
    """Whether int8 products run on an integer kernel here."""
    return _kernel() is not None


def kind() -> str | None:
    """The integer kernel in use here: ``"vnni"`` (AVX-512 VNNI), ``"avx2"``, or None
    (the float route of :mod:`ember.quant.int_gemm`)."""
    return _state.get("kind") if _kernel() is not None else None


class PackedInt8Weight:
    """An int8 weight ``(N, K)`` (rows are output channels) packed for the kernel, with
    its per-channel zero points and the column sums the zero-point correction needs."""

    def __init__(self, q: np.ndarray, zero_point: np.ndarray):
        q = np.asarray(q, dtype=np.int8).reshape(q.shape[0], -1)
        self.n, self.k = q.shape
        self.kind = kind()
        if self.kind == "avx2":  # (panels, K2, 16, 2): int8 pairs for vpmaddwd
            self.packed, self.panels, self.k2 = int8_gemm_avx2.pack(q)
        else:  # (panels, K4, 16, 4): 4-byte groups for vpdpbusd
            self.k4 = -(-self.k // 4)
            panels = -(-self.n // _STEP) * 2
            buf = np.zeros((panels * _PANEL, self.k4 * 4), np.int8)
            buf[:self.n, :self.k] = q
            self.panels = panels
            self.packed = np.ascontiguousarray(
                buf.reshape(panels, _PANEL, self.k4, 4).transpose(0, 2, 1, 3))
        self.zero_point = np.asarray(zero_point, np.int64).reshape(-1)
        self.zero_point32 = self.zero_point.astype(np.int32)
        self.has_zero_point = bool(self.zero_point.any())
        self.row_sums = q.sum(axis=1, dtype=np.int64)  # sum_k w[n, k]


def accumulate(x: np.ndarray, x_zero_point: int, weight: PackedInt8Weight):
    """``sum_k (x[m, k] - x_zp) * (w[n, k] - w_zp[n])`` as int32 ``(M, N)`` for uint8
    activations ``x`` ``(M, K)``; None where the integer kernel is unavailable."""
    found = _kernel()
    if found is None:
        return None
    kernel, threads = found
    m, k = x.shape
    if weight.kind != _state["kind"]:  # packed while no kernel ran (tests switch it off)
        return None
    if weight.kind == "avx2":  # the kernel subtracts x_zp; w_zp as below, on centred x
        out = int8_gemm_avx2.run(kernel, threads, x, x_zero_point, weight.packed,
                                 weight.panels, weight.k2, weight.n)
        if weight.has_zero_point:
            x_sums = x.sum(axis=1, dtype=np.int64) - k * x_zero_point
            out -= x_sums.astype(np.int32)[:, None] * weight.zero_point32[None, :]
        return out
    rows = -(-m // _ROWS) * _ROWS
    if rows != m or weight.k4 * 4 != k or x.dtype != np.uint8 or not x.flags.c_contiguous:
        a = np.zeros((rows, weight.k4 * 4), np.uint8)
        a[:m, :k] = x
    else:
        a = x
    out = np.empty((rows, weight.n), np.int32)
    if 2 * rows * weight.n * k < 1 << 20:
        threads = 1
    params = np.array([threads, rows, weight.panels, weight.k4, address(a),
                       address(weight.packed), address(out), weight.n, 0], np.int64)
    kernel(params.ctypes.data)
    out = out[:m]
    # sum (x - xz)(w - wz) = sum x w - wz sum_k x - (xz sum_k w - K xz wz): in int32,
    # exact while K * 255 * 255 fits (the callers' bound); in place on the result
    if weight.has_zero_point:
        x_sums = x.sum(axis=1, dtype=np.int64).astype(np.int32)
        out -= x_sums[:, None] * weight.zero_point32[None, :]
    per_column = x_zero_point * weight.row_sums - k * x_zero_point * weight.zero_point
    if per_column.any():
        out -= per_column.astype(np.int32)[None, :]
    return out
