"""ember's own GEMM for the small and medium products of a model, as C source for the
BLAS driver (:mod:`ember.backends.cpu_blas`) and the convolution loops.

A model's products are small (a Linear layer at batch 64 to 1024 rows, a convolution's
image), and at those sizes OpenBLAS spends much of its time packing both operands. This
GEMM packs only the right operand, one panel of columns at a time (k in blocks of 256)
into a buffer of the calling thread, so the panel stays in cache, and reads the left
operand's rows in place. Each step of the inner loop broadcasts one value of each of up
to 12 rows and multiplies it by the panel's row of two vectors, into 24 vector
accumulators (fused multiply-adds); the k loop is unrolled four times (2-8 % faster on
the workloads' shapes, for 0.15 s more compiling). A transposed right operand (a Linear's
weight) is packed by 8 x 8 transposes in registers; a left operand stored as columns (the
output gradient in a weight gradient) is packed too, since reading a few values per k at
a power-of-two stride keeps missing the L1 cache.

Vectors are GCC/Clang vector types sized for the machine the kernels are built for
(``-march=native``): 64 bytes with AVX-512, 32 with AVX, 16 otherwise; the rows per step
follow the registers there are. Each element of a result is summed in the order of k by
one thread, whatever the split, so results do not depend on the thread count.

Measured through the driver on this 2-core AVX-512 machine, alternating with OpenBLAS in
one process (``python bench/gemm.py``, three runs): x @ W.T at (64, 784) x (784, 512)
1.4-1.7 times OpenBLAS's speed, (128, 784) x (784, 512) 1.2-1.25; the gpt's forward and
input-gradient shapes 1.0-1.2; its weight gradients (1024 rows summed) 1.0-1.2. Products
over 2^28 flops stay with OpenBLAS, whose blocking for large matrices is better.
``EMBER_GEMM=openblas`` turns it off.

The convolution loops also call it with the right operand packed once per call (the
weight, :func:`packed`'s ``pack_all``) and the left one read at a table of column
offsets (``gemm_packed``): a stride-1 convolution's taps read straight from the image,
with no columns built (``ember/ops/conv_forward.py``).

The source is written for a type ``REAL`` and built for float and double, each a library
of its own through the kernel cache (about 0.5 s of compiling each); callers get its
address from :func:`address`.
"""
import numpy as np

# 8 x 8 transposes in registers where the compiler has vector shuffles (GEMM_SHUFFLES):
# the GEMM's packing of a transposed operand, and the convolution loops' results written
# channels first
TRANSPOSE8 = r"""
#if defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector)
#define GEMM_SHUFFLES 1
#endif
#endif
#ifndef GEMM_SHUFFLES
#define GEMM_SHUFFLES 0
#endif
#if GEMM_SHUFFLES
typedef REAL v8REAL __attribute__((vector_size(8 * sizeof(REAL))));
/* o = r transposed, for 8 x 8 values */
static inline void transpose8_REAL(const v8REAL *r, v8REAL *o)
{
    v8REAL t[8], u[8];
    for (int q = 0; q < 8; q += 2) {
        t[q] = __builtin_shufflevector(r[q], r[q + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[q + 1] = __builtin_shufflevector(r[q], r[q + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int q = 0; q < 8; q += 4)
        for (int h = 0; h < 2; h++) {
            u[q + h] = __builtin_shufflevector(t[q + h], t[q + h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
            u[q + h + 2] = __builtin_shufflevector(t[q + h], t[q + h + 2], 2, 3, 10, 11, 6, 7,
                                                   14, 15);
        }
    for (int q = 0; q < 4; q++) {
        const int h = (q & 1) * 2 + (q >> 1);  /* u's order: rows 0, 2, 1, 3 of each half */
        o[q] = __builtin_shufflevector(u[h], u[h + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        o[q + 4] = __builtin_shufflevector(u[h], u[h + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
}
#endif
"""

_TEMPLATE = r"""
typedef REAL vREAL __attribute__((vector_size(GEMM_VBYTES)));
enum { NR_REAL = 2 * GEMM_VBYTES / sizeof(REAL) };  /* a panel's width: two vectors */

/* k in blocks of this many */
static inline int64_t k_block(int64_t K)
{
    return K <= GEMM_KC + GEMM_KC / 2 ? K : GEMM_KC;
}

/* Columns [0, n) of B, K rows, (k, j) at B[k * bk + j * bj], into the panel P: row k at
   P + k * NR, zeros past column n. */
static void pack_REAL(const REAL *B, int64_t bk, int64_t bj, int64_t K, int64_t n, REAL *P)
{
    enum { NR = NR_REAL };
    if (bj == 1 && n == NR) {  /* (a constant size: the copies are inlined) */
        for (int64_t k = 0; k < K; k++)
            memcpy(P + k * NR, B + k * bk, NR * sizeof(REAL));
        return;
    }
    if (bj == 1) {
        for (int64_t k = 0; k < K; k++) {
            memcpy(P + k * NR, B + k * bk, n * sizeof(REAL));
            for (int64_t j = n; j < NR; j++)
                P[k * NR + j] = 0;
        }
        return;
    }
    /* columns apart (a transposed operand: a Linear's weight) */
    int64_t k0 = 0;
#if GEMM_SHUFFLES
    if (bk == 1 && NR % 8 == 0)   /* 8 x 8 blocks transposed in registers */
        for (; k0 + 8 <= K; k0 += 8)
            for (int64_t j0 = 0; j0 < NR; j0 += 8) {
                v8REAL r[8], o[8];
                for (int q = 0; q < 8; q++)
                    if (j0 + q < n)
                        memcpy(&r[q], B + (j0 + q) * bj + k0, sizeof r[q]);
                    else
                        r[q] = (v8REAL){0};
                transpose8_REAL(r, o);
                for (int q = 0; q < 8; q++)
                    memcpy(P + (k0 + q) * NR + j0, &o[q], sizeof o[q]);
            }
#endif
    for (; k0 < K; k0++)
        for (int64_t j = 0; j < NR; j++)
            P[k0 * NR + j] = j < n ? B[j * bj + k0 * bk] : 0;
}

/* C[0:ROWS, 0:n] = A[0:ROWS, :] . P (+ C where acc) for a panel P (K x NR); A(i, k) at
   A[i * ai + k * ak], with ak == 1 (rows) or ai == 1 (columns), or where ko is given, at
   A[i + ko[k]] (columns at offsets: a convolution's taps read from the image in place).
   ROWS is a constant where this is inlined. */
__attribute__((optimize("fp-contract=fast"), always_inline))
static inline void tile_REAL(const int ROWS, int64_t n, int64_t K, const REAL *A, int64_t ai,
                             int64_t ak, const int64_t *ko, const REAL *P, REAL *C,
                             int64_t ldc, int acc)
{
    enum { NR = NR_REAL, L = NR_REAL / 2 };
    vREAL c0[GEMM_MR], c1[GEMM_MR];
    for (int i = 0; i < ROWS; i++)
        c0[i] = c1[i] = (vREAL){0};
    if (ak == 1) {
        const REAL *a[GEMM_MR];
        for (int i = 0; i < ROWS; i++)
            a[i] = A + i * ai;
        _Pragma("GCC unroll 4")
        for (int64_t k = 0; k < K; k++) {
            vREAL b0, b1;
            memcpy(&b0, P + k * NR, sizeof b0);
            memcpy(&b1, P + k * NR + L, sizeof b1);
            for (int i = 0; i < ROWS; i++) {
                const REAL x = a[i][k];
                c0[i] += x * b0;
                c1[i] += x * b1;
            }
        }
    } else if (ko) {
        _Pragma("GCC unroll 4")
        for (int64_t k = 0; k < K; k++) {
            vREAL b0, b1;
            memcpy(&b0, P + k * NR, sizeof b0);
            memcpy(&b1, P + k * NR + L, sizeof b1);
            const REAL *x = A + ko[k];
            for (int i = 0; i < ROWS; i++) {
                c0[i] += x[i] * b0;
                c1[i] += x[i] * b1;
            }
        }
    } else {
        _Pragma("GCC unroll 4")
        for (int64_t k = 0; k < K; k++) {
            vREAL b0, b1;
            memcpy(&b0, P + k * NR, sizeof b0);
            memcpy(&b1, P + k * NR + L, sizeof b1);
            const REAL *x = A + k * ak;
            for (int i = 0; i < ROWS; i++) {
                c0[i] += x[i] * b0;
                c1[i] += x[i] * b1;
            }
        }
    }
    for (int i = 0; i < ROWS; i++) {
        REAL *row = C + i * ldc;
        if (n == NR) {
            if (acc) {
                vREAL t0, t1;
                memcpy(&t0, row, sizeof t0);
                memcpy(&t1, row + L, sizeof t1);
                c0[i] += t0;
                c1[i] += t1;
            }
            memcpy(row, &c0[i], sizeof c0[i]);
            memcpy(row + L, &c1[i], sizeof c1[i]);
        } else {
            REAL t[NR];
            memcpy(t, &c0[i], sizeof c0[i]);
            memcpy(t + L, &c1[i], sizeof c1[i]);
            for (int64_t j = 0; j < n; j++)
                row[j] = acc ? row[j] + t[j] : t[j];
        }
    }
}

/* The tiles of m rows: MR at a time, then 4, then 1. A is in place (at offsets ko where
   given), or packed (ap): each tile's rows then lie k-major at A + (its first row) * K. */
__attribute__((optimize("fp-contract=fast")))  /* (the tiles are inlined here) */
static void rows_REAL(int64_t m, int64_t n, int64_t K, const REAL *A, int64_t ai, int64_t ak,
                      const int64_t *ko, int ap, const REAL *P, REAL *C, int64_t ldc, int acc)
{
    const int64_t step = ap ? K : ai;  /* from one row's block to the next */
    int64_t i = 0;
    for (; i + GEMM_MR <= m; i += GEMM_MR)
        tile_REAL(GEMM_MR, n, K, A + i * step, ap ? 1 : ai, ap ? GEMM_MR : ak, ko, P,
                  C + i * ldc, ldc, acc);
    for (; i + 4 <= m; i += 4)
        tile_REAL(4, n, K, A + i * step, ap ? 1 : ai, ap ? 4 : ak, ko, P, C + i * ldc, ldc,
                  acc);
    for (; i < m; i++)
        tile_REAL(1, n, K, A + i * step, ap ? 1 : ai, ap ? 1 : ak, ko, P, C + i * ldc, ldc,
                  acc);
}

/* m rows of A stored as columns (ai == 1) into the packed layout of rows_REAL: a column
   operand is read a few values per k, each k a stride apart, and strides of a power of
   two keep missing the L1 cache (they fall into the same sets). */
static void pack_a_REAL(int64_t m, int64_t K, const REAL *A, int64_t ak, REAL *Q)
{
    int64_t i = 0;
    while (i < m) {
        const int64_t r = m - i >= GEMM_MR ? GEMM_MR : m - i >= 4 ? 4 : 1;
        if (r == GEMM_MR)  /* (a constant size: the copies are inlined) */
            for (int64_t k = 0; k < K; k++)
                memcpy(Q + i * K + k * GEMM_MR, A + i + k * ak, GEMM_MR * sizeof(REAL));
        else
            for (int64_t k = 0; k < K; k++)
                memcpy(Q + i * K + k * r, A + i + k * ak, r * sizeof(REAL));
        i += r;
    }
}

/* C (m x n, rows ldc apart) = A (m x K) . B (K x n) (+ C where acc), strides as above, in
   the calling thread; -1 where there is no memory for the buffers (then the caller's BLAS
   does it). Rows go in chunks whose part of A stays in cache while each panel of B is
   packed and multiplied by it; a chunk of A stored as columns is packed first. */
static int gemm_REAL(int64_t m, int64_t n, int64_t K, const REAL *A, int64_t ai, int64_t ak,
                     const REAL *B, int64_t bk, int64_t bj, REAL *C, int64_t ldc, int acc)
{
    enum { NR = NR_REAL };
    const int64_t kc = k_block(K);
    int64_t chunk = GEMM_CHUNK_BYTES / (kc * (int64_t)sizeof(REAL));
    chunk = chunk < 96 ? 96 : chunk - chunk % GEMM_MR;
    /* packed where a block's columns span more than the L1 cache holds and their stride
       is a multiple of 256 bytes (then they fall into 16 of its 64 sets or fewer) */
    const int64_t stride = ak * (int64_t)sizeof(REAL);
    const int ap = ai == 1 && ak != 1 && m > 1 && kc * stride > 32768 && stride % 256 == 0;
    const int64_t panel = (kc * NR + 15) & ~(int64_t)15;
    REAL *P = (REAL *)gemm_panel((panel + (ap ? chunk * kc : 0)) * sizeof(REAL));
    if (!P)
        return -1;
    REAL *Q = P + panel;
    for (int64_t i0 = 0; i0 < m; i0 += chunk) {
        const int64_t rows = m - i0 < chunk ? m - i0 : chunk;
        for (int64_t k0 = 0; k0 < K; k0 += kc) {
            const int64_t ks = K - k0 < kc ? K - k0 : kc;
            const REAL *a = A + i0 * ai + k0 * ak;
            if (ap)
                pack_a_REAL(rows, ks, a, ak, Q);
            for (int64_t j0 = 0; j0 < n; j0 += NR) {
                const int64_t cols = n - j0 < NR ? n - j0 : NR;
                pack_REAL(B + j0 * bj + k0 * bk, bk, bj, ks, cols, P);
                rows_REAL(rows, cols, ks, ap ? Q : a, ai, ak, 0, ap, P, C + i0 * ldc + j0, ldc,
                          acc || k0 > 0);
            }
        }
    }
    return 0;
}

/* Columns [j0, j1) of B (K x n, strides as gemm_REAL's; j0 a multiple of the panel
   width) packed for gemm_packed_REAL into their place in P (ceil(n / NR) * NR * K
   elements for all of B): block by block of k, panel by panel. */
static void pack_all_REAL(const REAL *B, int64_t bk, int64_t bj, int64_t K, int64_t n,
                          int64_t j0, int64_t j1, REAL *P)
{
    enum { NR = NR_REAL };
    const int64_t kc = k_block(K), width = (n + NR - 1) / NR * NR;
    for (int64_t k0 = 0; k0 < K; k0 += kc) {
        const int64_t ks = K - k0 < kc ? K - k0 : kc;
        for (int64_t j = j0; j < j1; j += NR)
            pack_REAL(B + j * bj + k0 * bk, bk, bj, ks, j1 - j < NR ? j1 - j : NR,
                      P + k0 * width + j * ks);
    }
}

/* Columns [j0, j1) of C (m x n) = A . B (+ C where acc) for B packed by pack_all_REAL;
   A(i, k) at A[i + ko[k]] (a convolution's image, each tap k at its offset). One thread;
   no buffers. */
static void gemm_packed_REAL(int64_t m, int64_t n, int64_t K, const REAL *A,
                             const int64_t *ko, const REAL *P, REAL *C, int64_t ldc,
                             int64_t j0, int64_t j1, int acc)
{
    enum { NR = NR_REAL };
    const int64_t kc = k_block(K), width = (n + NR - 1) / NR * NR;
    for (int64_t k0 = 0; k0 < K; k0 += kc) {
        const int64_t ks = K - k0 < kc ? K - k0 : kc;
        for (int64_t j = j0; j < j1; j += NR)
            rows_REAL(m, j1 - j < NR ? j1 - j : NR, ks, A, 1, 0, ko + k0, 0,
                      P + k0 * width + j * ks, C + j, ldc, acc || k0 > 0);
    }
}
"""

# The vector size and the rows per step, by target; each thread's panel buffer.
_PRELUDE = r"""
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX512F__)
#define GEMM_VBYTES 64
#define GEMM_MR 12
#elif defined(__AVX__)
#define GEMM_VBYTES 32
#define GEMM_MR 6
#else
#define GEMM_VBYTES 16
#define GEMM_MR 4
#endif
#define GEMM_CHUNK_BYTES (512 * 1024)
#define GEMM_KC 256

/* This thread's buffer, at least `bytes` long (64-byte aligned), or NULL. It is freed
   when the thread exits (a thread-specific key's destructor), so programs that start
   many short-lived threads do not pile up buffers. */
typedef struct { void *data; size_t size; } gemm_buffer;
static pthread_key_t gemm_key;
static pthread_once_t gemm_once = PTHREAD_ONCE_INIT;
static int gemm_key_ok;

static void gemm_release(void *p)
{
    gemm_buffer *b = (gemm_buffer *)p;
    free(b->data);
    free(b);
}

static void gemm_make_key(void)
{
    gemm_key_ok = pthread_key_create(&gemm_key, gemm_release) == 0;
}

static void *gemm_panel(size_t bytes)
{
    pthread_once(&gemm_once, gemm_make_key);
    if (!gemm_key_ok)
        return NULL;
    gemm_buffer *b = (gemm_buffer *)pthread_getspecific(gemm_key);
    if (!b) {
        b = (gemm_buffer *)calloc(1, sizeof *b);
        if (!b || pthread_setspecific(gemm_key, b)) {
            free(b);
            return NULL;
        }
    }
    if (bytes > b->size) {
        free(b->data);
        b->size = (bytes + 4095) & ~(size_t)4095;
        b->data = aligned_alloc(64, b->size);
        if (!b->data)
            b->size = 0;
    }
    return b->data;
}
"""

# The library's entry point gives the GEMM's address (ember_kernel is what the kernel
# cache loads).
_ENTRY = r"""
void ember_kernel(int64_t *p)
{
    p[0] = (int64_t)(intptr_t)&gemm_REAL;
    p[1] = (int64_t)(intptr_t)&pack_all_REAL;
    p[2] = (int64_t)(intptr_t)&gemm_packed_REAL;
    p[3] = NR_REAL;
}
"""

# What a C caller declares to call the GEMM through the address it is given.
CALLER = r"""
#include <stdint.h>
typedef int (*own_gemm_float)(int64_t, int64_t, int64_t, const float *, int64_t, int64_t,
                              const float *, int64_t, int64_t, float *, int64_t, int);
typedef int (*own_gemm_double)(int64_t, int64_t, int64_t, const double *, int64_t, int64_t,
                               const double *, int64_t, int64_t, double *, int64_t, int);
typedef void (*pack_all_float)(const float *, int64_t, int64_t, int64_t, int64_t, int64_t,
                               int64_t, float *);
typedef void (*pack_all_double)(const double *, int64_t, int64_t, int64_t, int64_t, int64_t,
                                int64_t, double *);
typedef void (*gemm_packed_float)(int64_t, int64_t, int64_t, const float *, const int64_t *,
                                  const float *, float *, int64_t, int64_t, int64_t, int);
typedef void (*gemm_packed_double)(int64_t, int64_t, int64_t, const double *,
                                   const int64_t *, const double *, double *, int64_t,
                                   int64_t, int64_t, int);
"""

_FLOATS = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_entries: dict = {}


def _entry_points(dtype):
    """(gemm, pack_all, gemm_packed, panel width) for ``dtype``, built at the first use,
    or None (another dtype, no C compiler)."""
    real = _FLOATS.get(np.dtype(dtype))
    if real is None:
        return None
    if real not in _entries:
        from ..compiler.codegen import build
        _entries[real] = None
        entry = build.load_c_function(*named_source(dtype))
        if entry is not None:
            out = np.zeros(4, np.int64)
            entry(out.ctypes.data)
            _entries[real] = tuple(int(v) for v in out)
    return _entries[real]


def named_source(dtype) -> tuple:
    """(cache name, C source) of the GEMM library for ``dtype`` (float32 or float64)."""
    real = _FLOATS[np.dtype(dtype)]
    source = _PRELUDE + TRANSPOSE8 + _TEMPLATE + _ENTRY
    return f"gemm_{real}", source.replace("REAL", real)


def built(dtype) -> bool:
    """Whether this process has asked for the GEMM of ``dtype`` already."""
    return _FLOATS.get(np.dtype(dtype)) in _entries


def address(dtype) -> int:
    """The address of the GEMM for ``dtype`` (float32 or float64), built through the
    kernel cache at its first use (one library per dtype, so a float32 model never waits
    for the float64 one), or 0 where it does not apply (another dtype, no C compiler):
    then callers keep OpenBLAS. Its signature is ``CALLER``'s; it does not start threads,
    so an address stays good in a forked child."""
    found = _entry_points(dtype)
    return found[0] if found else 0


def packed(dtype):
    """``(pack_all, gemm_packed, panel width)`` for ``dtype``: the GEMM with its right
    operand packed once by the caller (``CALLER``'s ``pack_all_*``, into ``width``-wide
    panels: ``ceil(n / width) * width * K`` elements) and its left operand read at column
    offsets (``gemm_packed_*``: a convolution's taps read from the image in place), or
    None where the GEMM does not apply."""
    found = _entry_points(dtype)
    return found[1:] if found else None
