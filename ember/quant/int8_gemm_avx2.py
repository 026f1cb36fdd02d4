"""The int8 GEMM kernel for CPUs with AVX2 but no AVX-512 VNNI (:mod:`ember.quant.int8_gemm`
picks it): ``sum_k (x[m, k] - x_zp) * w[n, k]`` as int32 for uint8 ``x`` and int8 ``w``,
the activation's zero point subtracted as its rows are widened; the weight's zero points
are folded in by the caller.

AVX2's byte product ``vpmaddubsw`` adds its pairs in saturating int16 (255 · 127 · 2
does not fit), so this kernel widens both sides to int16 and uses ``vpmaddwd``: 16
exact int16 products summed in pairs into 8 int32 lanes per instruction. The weight is
packed once into 16-column panels of 2-byte groups (``(panels, K2, 16, 2)`` int8, half
the bytes of int16 pairs; the kernel widens them with ``vpmovsxbw``), the activation
rows are widened to int16 once per call, each row's pair of values is broadcast as one
32-bit lane, and a 6-row x 16-column tile keeps 12 int32 accumulators in registers.
Every sum is exact: a pair is at most 2 · 255 · 128 and the lanes add in wrapping int32,
so the result is the exact integer wherever it fits in int32 (the callers' bound).

On a 2-core AMD EPYC (AVX2, no AVX-512) one core runs about 20 G multiply-adds a second
from 6 rows up, which is ``vpmaddwd``'s own peak there, and about 13 G for one row
(widening the weight bytes then counts); keeping the weight as int16 pairs instead made
one row about 25 % faster while the weight fits in cache and slower past it, for twice
the memory, so the weight stays int8.
"""
from __future__ import annotations

import numpy as np

from ..backends.addresses import address, scratch

__all__ = ["SOURCE", "pack", "run"]

_PANEL = 16  # output columns per tile (two 8-lane accumulators)
_ROWS = 6    # activation rows per tile

SOURCE = r"""
#include <stdint.h>
#include <string.h>
#ifdef __AVX2__
#include <immintrin.h>

/* rows x 16 columns of C += A16 (rows, 2 K2) times one packed panel (K2, 16, 2); rows is
   a constant at every call, so each case compiles to a loop over registers only */
static inline __attribute__((always_inline)) void tile(
    const int rows, const int16_t *a, const int64_t lda, const int8_t *b, const int64_t K2,
    int32_t *c, const int64_t ldc, const int64_t cols)
{
    __m256i acc[6][2];
    for (int r = 0; r < rows; r++)
        acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    for (int64_t k = 0; k < K2; k++) {
        const __m128i *w = (const __m128i *)(b + 32 * k);
        const __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(w));      /* vpmovsxbw */
        const __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(w + 1));
        for (int r = 0; r < rows; r++) {
            int32_t v;
            memcpy(&v, a + r * lda + 2 * k, 4);
            const __m256i x = _mm256_set1_epi32(v);
            acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(x, w0));
            acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(x, w1));
        }
    }
    if (cols >= 16) {
        for (int r = 0; r < rows; r++) {
            _mm256_storeu_si256((__m256i *)(c + r * ldc), acc[r][0]);
            _mm256_storeu_si256((__m256i *)(c + r * ldc + 8), acc[r][1]);
        }
    } else {
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)cols), lane);
        const __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)cols - 8), lane);
        for (int r = 0; r < rows; r++) {
            _mm256_maskstore_epi32(c + r * ldc, m0, acc[r][0]);
            _mm256_maskstore_epi32(c + r * ldc + 8, m1, acc[r][1]);
        }
    }
}
#endif

/* p = [threads, M, panels, K2, A, B, C, N, status, K, lda, A16, zero point]
   A: uint8 (M, K) rows lda bytes apart; B: int8 (panels, K2, 16, 2); C: int32 (M, N)
   rows; A16: int16 (M, 2 K2) scratch for the rows widened and centred, A - zero point
   (within +-255). */
void ember_kernel(int64_t *p)
{
#ifdef __AVX2__
    const int threads = (int)p[0];
    const int64_t M = p[1], panels = p[2], K2 = p[3], N = p[7], K = p[9], lda = p[10];
    const uint8_t *A = (const uint8_t *)p[4];
    const int8_t *B = (const int8_t *)p[5];
    int32_t *C = (int32_t *)p[6];
    int16_t *A16 = (int16_t *)p[11];
    const int16_t zp = (int16_t)p[12];
    const int64_t row_blocks = (M + 5) / 6;
    p[8] = 1;
    #pragma omp parallel num_threads(threads) if (threads > 1)
    {
        #pragma omp for schedule(static)
        for (int64_t m = 0; m < M; m++) {
            const uint8_t *src = A + m * lda;
            int16_t *dst = A16 + m * 2 * K2;
            for (int64_t k = 0; k < K; k++)
                dst[k] = (int16_t)(src[k] - zp);
            for (int64_t k = K; k < 2 * K2; k++)
                dst[k] = 0;
        }
        #pragma omp for collapse(2) schedule(static)
        for (int64_t s = 0; s < panels; s++) {
            for (int64_t rb = 0; rb < row_blocks; rb++) {
                const int8_t *b = B + s * K2 * 32;
                const int16_t *a = A16 + rb * 6 * 2 * K2;
                int32_t *c = C + rb * 6 * N + s * 16;
                const int64_t cols = N - s * 16, rows = M - rb * 6;
                switch (rows >= 6 ? 6 : rows) {
                case 6: tile(6, a, 2 * K2, b, K2, c, N, cols); break;
                case 5: tile(5, a, 2 * K2, b, K2, c, N, cols); break;
                case 4: tile(4, a, 2 * K2, b, K2, c, N, cols); break;
                case 3: tile(3, a, 2 * K2, b, K2, c, N, cols); break;
                case 2: tile(2, a, 2 * K2, b, K2, c, N, cols); break;
                default: tile(1, a, 2 * K2, b, K2, c, N, cols); break;
                }
            }
        }
    }
#else
    p[8] = 0;
#endif
}
"""


def pack(q: np.ndarray) -> tuple[np.ndarray, int, int]:
    """``(packed, panels, K2)``: the int8 weight ``q`` ``(N, K)`` as ``(panels, K2, 16,
    2)`` int8, columns and the odd last K term padded with zeros."""
    n, k = q.shape
    k2 = -(-k // 2)
    panels = -(-n // _PANEL)
    buf = np.zeros((panels * _PANEL, k2 * 2), np.int8)
    buf[:n, :k] = q
    packed = np.ascontiguousarray(buf.reshape(panels, _PANEL, k2, 2).transpose(0, 2, 1, 3))
    return packed, panels, k2


def run(kernel, threads: int, x: np.ndarray, x_zero_point: int, packed: np.ndarray,
        panels: int, k2: int, n: int) -> np.ndarray:
    """``(x - x_zero_point) @ w.T`` as int32 ``(M, N)`` on the compiled kernel, for uint8
    ``x`` ``(M, K)`` and the weight :func:`pack` gave."""
    m, k = x.shape
    if x.dtype != np.uint8 or not x.flags.c_contiguous:
        x = np.ascontiguousarray(x, np.uint8)
    out = np.empty((m, n), np.int32)
    if m == 0 or n == 0:
        return out
    widened = scratch(np.int16, m * 2 * k2)
    if 2 * m * n * k < 1 << 20:
        threads = 1
    params = np.array([threads, m, panels, k2, address(x), address(packed), address(out),
                       n, 0, k, k, address(widened), x_zero_point], np.int64)
    kernel(address(params))
    return out
