"""Convolution loops in C shared by the forward (:mod:`ember.ops.conv_forward`) and the
gradients (:mod:`ember.ops.conv_grad_kernels`), and col2im (the rest of ``conv.py`` is
NumPy).

:data:`COMMON` is their C: the parameters (``conv_t``), a GEMM call (ember's own or
OpenBLAS's), one image's columns (im2col) and their adjoint (their work space is the
calling thread's scratch array, :func:`ember.backends.addresses.scratch`).

col2im: the backward of a convolution with respect to its input adds every column entry
back into the input position it was read from. In NumPy that is one strided ``+=`` per
kernel tap over the whole batch, each a pass over memory; here each (image, channel)
plane is one OpenMP task that adds all of its taps while the plane sits in cache. The
sums run in the same order as the NumPy loop (tap by tap, in row-major tap order), so
the results are the same bits.

Used for float32/float64 NumPy arrays on the CPU where the kernel cache has a C compiler;
anything else (``False`` from :func:`col2im_2d`) takes the NumPy path.
"""
from __future__ import annotations


import numpy as np

from ..backends import cpu_blas, cpu_gemm
from .c_loops import CLoop, address

# Shared by the forward and the gradients (conv_grad_kernels.py): the BLAS entry point's
# types, the parameters, a GEMM call, and one image's columns (im2col) and their adjoint.
COMMON = cpu_gemm.CALLER + r"""
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <omp.h>
""" + cpu_gemm.TRANSPOSE8 + r"""
typedef void (*gemm_l)(int, int, int, int64_t, int64_t, int64_t, REAL, const REAL *, int64_t,
                       const REAL *, int64_t, REAL, REAL *, int64_t);
typedef void (*gemm_i)(int, int, int, int32_t, int32_t, int32_t, REAL, const REAL *, int32_t,
                       const REAL *, int32_t, REAL, REAL *, int32_t);

/* x: the convolution's input (N, C, H, W); out (N, O, OH, OW) its output */
typedef struct {
    int64_t gemm, wide, N, C, H, W, O, KH, KW, SH, SW, PH, PW, DH, DW, OH, OW;
    int64_t x, w, bias, out, work, relu, PKH, PKW, PSH, PSW, POH, POW, index, own;
    /* the forward's implicit path (conv_kernels.py): the GEMM on a packed weight, the
       taps' offsets in a padded image (0: the columns' path), its padded size, images
       per product */
    int64_t pack_all, gemm_packed, ko, panel, HP, WP, group;
} conv_t;

#define OWN_GEMM_OF_(T) own_gemm_##T
#define OWN_GEMM_OF(T) OWN_GEMM_OF_(T)
static void gemm(const conv_t *q, int ta, int tb, int64_t m, int64_t n, int64_t k,
                 const REAL *a, int64_t lda, const REAL *b, int64_t ldb, REAL beta, REAL *c,
                 int64_t ldc)
{   /* c (m x n) = op(a) @ op(b) + beta * c (beta 0 or 1), row-major; op transposes where
       ta/tb is 112. ember's own GEMM where on (q->own), else the BLAS's. */
    const int64_t ai = ta == 112 ? 1 : lda, ak = ta == 112 ? lda : 1;
    const int64_t bk = tb == 112 ? 1 : ldb, bj = tb == 112 ? ldb : 1;
    if (q->own && !((OWN_GEMM_OF(REAL))q->own)(m, n, k, a, ai, ak, b, bk, bj, c, ldc, beta != 0))
        return;
    if (q->wide)
        ((gemm_l)q->gemm)(101, ta, tb, m, n, k, (REAL)1, a, lda, b, ldb, beta, c, ldc);
    else
        ((gemm_i)q->gemm)(101, ta, tb, (int32_t)m, (int32_t)n, (int32_t)k, (REAL)1, a,
                          (int32_t)lda, b, (int32_t)ldb, beta, c, (int32_t)ldc);
}

/* Images whose columns one GEMM takes at once where the result is pooled (the result
   channels last, or the gradient built from the pooling's, is then one matrix for all
   of them): a product of 4 x 121 rows runs about 25 % faster than 4 of 121. Only while
   the group's columns stay small (GROUP_LIMIT elements), so large images keep buffers
   of one image. */
#define GROUP 4
#define GROUP_LIMIT (1 << 20)
static int64_t group_of(int64_t K, int64_t L)
{
    return K * L * GROUP <= GROUP_LIMIT ? GROUP : 1;
}

/* the output columns [*lo, *hi) whose input column ow * SW + dw lies in [0, W) */
static void span(const conv_t *q, int64_t dw, int64_t *lo, int64_t *hi)
{
    int64_t a = dw >= 0 ? 0 : (-dw + q->SW - 1) / q->SW;
    int64_t b = q->W - dw <= 0 ? 0 : (q->W - dw + q->SW - 1) / q->SW;
    if (b > q->OW) b = q->OW;
    if (a > b) a = b;
    *lo = a;
    *hi = b;
}

/* rows [r0, r1) of the columns of one image: row (c, kh, kw), column (oh, ow); rows ld
   apart (OH*OW, or more where several images' columns sit side by side) */
static void im2col(const conv_t *q, const REAL *x, REAL *cols, int64_t ld, int64_t r0,
                   int64_t r1)
{
    const int64_t KHW = q->KH * q->KW, OW = q->OW;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t c = r / KHW, kh = r % KHW / q->KW, kw = r % q->KW;
        const REAL *plane = x + c * q->H * q->W;
        REAL *row = cols + r * ld;
        const int64_t dw = kw * q->DW - q->PW;
        int64_t lo, hi;
        span(q, dw, &lo, &hi);
        for (int64_t oh = 0; oh < q->OH; oh++) {
            const int64_t ih = oh * q->SH + kh * q->DH - q->PH;
            REAL *o = row + oh * OW;
            if (ih < 0 || ih >= q->H) {
                for (int64_t ow = 0; ow < OW; ow++) o[ow] = 0;
                continue;
            }
            const REAL *in = plane + ih * q->W + dw;
            for (int64_t ow = 0; ow < lo; ow++) o[ow] = 0;
            if (q->SW == 1) {
                #pragma omp simd
                for (int64_t ow = lo; ow < hi; ow++) o[ow] = in[ow];
            } else {
                for (int64_t ow = lo; ow < hi; ow++) o[ow] = in[ow * q->SW];
            }
            for (int64_t ow = hi; ow < OW; ow++) o[ow] = 0;
        }
    }
}

/* the adjoint of im2col for one image (rows ld apart): each column entry added into the
   input position it was read from (dx zeroed by the caller), tap by tap in row-major
   order */
static void col2im(const conv_t *q, const REAL *cols, int64_t ld, REAL *dx)
{
    const int64_t KHW = q->KH * q->KW, OW = q->OW;
    for (int64_t r = 0; r < q->C * KHW; r++) {
        const int64_t c = r / KHW, kh = r % KHW / q->KW, kw = r % q->KW;
        REAL *plane = dx + c * q->H * q->W;
        const REAL *row = cols + r * ld;
        const int64_t dw = kw * q->DW - q->PW;
        int64_t lo, hi;
        span(q, dw, &lo, &hi);
        for (int64_t oh = 0; oh < q->OH; oh++) {
            const int64_t ih = oh * q->SH + kh * q->DH - q->PH;
            if (ih < 0 || ih >= q->H)
                continue;
            REAL *o = plane + ih * q->W + dw;
            const REAL *s = row + oh * OW;
            if (q->SW == 1) {
                #pragma omp simd
                for (int64_t ow = lo; ow < hi; ow++) o[ow] += s[ow];
            } else {
                for (int64_t ow = lo; ow < hi; ow++) o[ow * q->SW] += s[ow];
            }
        }
    }
}
"""


_SOURCE = r"""
#include <stdint.h>
/* p = [threads, N, C, K0, K1, G0, G1, plane, cols, buf,
        sc, sk0, sk1, sn, sg0, sg1 (cols strides, elements),
        tk0, tk1, tg0, tg1 (target strides in a plane, elements)] */
void ember_kernel(const int64_t *p)
{
    const int threads = (int)p[0];
    const int64_t N = p[1], C = p[2], K0 = p[3], K1 = p[4], G0 = p[5], G1 = p[6];
    const int64_t plane = p[7];
    const REAL *cols = (const REAL *)p[8];
    REAL *buf = (REAL *)p[9];
    const int64_t sc = p[10], sk0 = p[11], sk1 = p[12], sn = p[13], sg0 = p[14], sg1 = p[15];
    const int64_t tk0 = p[16], tk1 = p[17], tg0 = p[18], tg1 = p[19];
    #pragma omp parallel for collapse(2) schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t n = 0; n < N; n++) {
        for (int64_t c = 0; c < C; c++) {
            REAL *out = buf + (n * C + c) * plane;
            const REAL *src = cols + c * sc + n * sn;
            for (int64_t k0 = 0; k0 < K0; k0++)
                for (int64_t k1 = 0; k1 < K1; k1++) {
                    REAL *o = out + k0 * tk0 + k1 * tk1;
                    const REAL *s = src + k0 * sk0 + k1 * sk1;
                    for (int64_t g0 = 0; g0 < G0; g0++) {
                        REAL *oo = o + g0 * tg0;
                        const REAL *ss = s + g0 * sg0;
                        if (sg1 == 1 && tg1 == 1) {
                            #pragma omp simd
                            for (int64_t g1 = 0; g1 < G1; g1++)
                                oo[g1] += ss[g1];
                        } else {
                            for (int64_t g1 = 0; g1 < G1; g1++)
                                oo[g1 * tg1] += ss[g1 * sg1];
                        }
                    }
                }
        }
    }
}
"""

LOOP = CLoop("col2im", _SOURCE, ops=("conv_transpose", "col2im"))


def col2im_2d(cols, buf, geo) -> bool:
    """Add ``cols`` (a view ``(C, K0, K1, N, *grid)``) into ``buf`` ``(N, C, *padded)``
    as ``conv.col2im`` does; False where this path does not apply."""
    if len(geo.kernel) != 2 or cols.__class__ is not np.ndarray or \
            buf.__class__ is not np.ndarray or cols.dtype != buf.dtype or \
            buf.dtype not in (np.float32, np.float64) or not buf.flags.c_contiguous:
        return False
    found = LOOP.get(buf.dtype)
    if found is None:
        return False
    kernel, threads = found
    item = cols.itemsize
    if any(s % item for s in cols.strides):
        return False
    strides = [s // item for s in cols.strides]
    row = geo.padded[1]
    if geo.wide:  # (C, K0, K1, N, L): the grid is one flat run of the padded plane
        sc, sk0, sk1, sn, sg1 = strides
        g0, g1, sg0, tg0, tg1 = 1, cols.shape[4], 0, 0, 1
    else:         # (C, K0, K1, N, out0, out1)
        sc, sk0, sk1, sn, sg0, sg1 = strides
        g0, g1 = cols.shape[4], cols.shape[5]
        tg0, tg1 = geo.stride[0] * row, geo.stride[1]
    plane = geo.padded[0] * row
    if 2 * buf.size < 1 << 16:
        threads = 1
    params = np.array([threads, geo.n, geo.c, geo.kernel[0], geo.kernel[1], g0, g1, plane,
                       address(cols), address(buf), sc, sk0, sk1, sn, sg0, sg1,
                       geo.dilation[0] * row, geo.dilation[1], tg0, tg1], dtype=np.int64)
    kernel(params.ctypes.data)
    return True


GROUP, GROUP_LIMIT = 4, 1 << 20  # (as COMMON's: images per GEMM where pooled)


def group_of(k: int, length: int) -> int:
    """Images per GEMM (COMMON's ``group_of``) for columns of ``k`` x ``length``."""
    return GROUP if k * length * GROUP <= GROUP_LIMIT else 1

# A product this small runs on one thread (the threads' start and barriers cost more)
MIN_PARALLEL_FLOPS = 1 << 21
def own_gemm(dtype) -> int:
    """The address of ember's own GEMM for the loops' products, or 0 (OpenBLAS's)."""
    return cpu_gemm.address(dtype) if cpu_blas.OWN_GEMM else 0
