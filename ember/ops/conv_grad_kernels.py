"""The two gradients of a 2-D convolution as C loops, image by image (the NumPy path
builds the whole batch's columns, then multiplies once).

- :func:`conv2d_weight_grad`: ``dW = sum over images of g[n] @ columns(x[n])^T``. Each
  image's columns are built in a thread's own buffer (in cache) and multiplied into a
  partial sum by a one-thread GEMM. The images are split into at most
  :data:`PARTIALS` fixed runs, one partial each, added in run order at the end: the
  result does not depend on the number of threads.
- :func:`conv2d_input_grad`: ``dx[n] = col2im(W^T @ g[n])``: the product for one image
  lands in a thread's buffer and is added back into that image's input positions at
  once, tap by tap in row-major order as ``conv.col2im`` does.

Shared C parts (parameters, GEMM call, im2col, col2im) come from
:data:`ember.ops.conv_kernels.COMMON`; used for float32/float64 NumPy arrays where the
kernel cache has a C compiler and NumPy's OpenBLAS is found (``backends/cpu_blas``).
Anywhere else these functions say None and ``conv.py`` takes its NumPy path.
"""
from __future__ import annotations

import numpy as np

from ..backends import cpu_blas
from .c_loops import CLoop, address
from .conv_kernels import COMMON, MIN_PARALLEL_FLOPS, buffer, group_of

PARTIALS = 8  # the most partial sums of the weight gradient (runs of images)

_WEIGHT_GRAD = r"""
/* p = [threads, runs, conv_t...]: x the input, w the output gradient g (N, O, OH, OW),
   out dW (O, C*KH*KW), work: runs - 1 partials (O x K), then threads column buffers */
void ember_kernel(const int64_t *p)
{
    const int threads = (int)p[0];
    const int64_t runs = p[1];
    const conv_t *q = (const conv_t *)(p + 2);
    const int64_t K = q->C * q->KH * q->KW, L = q->OH * q->OW, O = q->O, N = q->N;
    const int direct = q->KH == 1 && q->KW == 1 && q->SH == 1 && q->SW == 1 && !q->PH &&
                       !q->PW;
    const REAL *x = (const REAL *)q->x, *g = (const REAL *)q->w;
    REAL *out = (REAL *)q->out, *work = (REAL *)q->work;
    REAL *partials = work, *all_cols = work + (runs - 1) * O * K;
    #pragma omp parallel num_threads(threads) if (threads > 1)
    {
        REAL *cols = all_cols + (int64_t)omp_get_thread_num() * (direct ? 0 : K * L);
        #pragma omp for schedule(static)
        for (int64_t run = 0; run < runs; run++) {
            REAL *part = run ? partials + (run - 1) * O * K : out;
            for (int64_t n = N * run / runs; n < N * (run + 1) / runs; n++) {
                const REAL *img = x + n * q->C * q->H * q->W;
                if (!direct)
                    im2col(q, img, cols, L, 0, K);
                gemm(q, 111, 112, O, K, L, g + n * O * L, L, direct ? img : cols, L,
                     n == N * run / runs ? 0 : 1, part, K);
            }
        }
        if (runs > 1) {
            #pragma omp for schedule(static)
            for (int64_t i = 0; i < O * K; i++) {
                REAL s = out[i];
                for (int64_t r = 1; r < runs; r++)
                    s += partials[(r - 1) * O * K + i];
                out[i] = s;
            }
        }
    }
}
"""

_INPUT_GRAD = r"""
/* p = [threads, conv_t...]: w the weight (O, C*KH*KW), x the output gradient g
   (N, O, OH, OW), out dx (N, C, H, W) zeroed, work: threads column buffers (K x L) */
void ember_kernel(const int64_t *p)
{
    const int threads = (int)p[0];
    const conv_t *q = (const conv_t *)(p + 1);
    const int64_t K = q->C * q->KH * q->KW, L = q->OH * q->OW, O = q->O;
    const REAL *g = (const REAL *)q->x, *w = (const REAL *)q->w;
    REAL *dx = (REAL *)q->out, *work = (REAL *)q->work;
    #pragma omp parallel num_threads(threads) if (threads > 1)
    {
        REAL *cols = work + (int64_t)omp_get_thread_num() * K * L;
        #pragma omp for schedule(static)
        for (int64_t n = 0; n < q->N; n++) {
            gemm(q, 112, 111, K, L, O, w, K, g + n * O * L, L, 0, cols, L);
            col2im(q, cols, L, dx + n * q->C * q->H * q->W);
        }
    }
}
"""

_BACKWARD = r"""
/* The whole backward of a 2-D convolution (and of the max pooling after it), image by
   image. p = [threads, runs, need_db, need_dx, pooled plane length (0: g is dense),
   g, dx, db partials (double, runs x O), status, conv_t...]: x the input, w the weight
   (O x K), out dW, bias db, index the pooling's indices (N, O, pooled) or 0, work:
   (runs - 1) partials (O x K), then per thread the columns (K x group*L) and g
   (O x group*L). */
void ember_kernel(int64_t *p)
{
    const int threads = (int)p[0];
    const int64_t runs = p[1], need_db = p[2], need_dx = p[3], PL = p[4];
    const REAL *gin = (const REAL *)p[5];
    REAL *dx = (REAL *)p[6];
    double *dbp = (double *)p[7];
    const conv_t *q = (const conv_t *)(p + 9);
    const int64_t K = q->C * q->KH * q->KW, L = q->OH * q->OW, O = q->O, N = q->N;
    const int64_t in_plane = q->C * q->H * q->W;
    const int direct = q->KH == 1 && q->KW == 1 && q->SH == 1 && q->SW == 1 && !q->PH &&
                       !q->PW;
    const REAL *x = (const REAL *)q->x, *w = (const REAL *)q->w;
    const int64_t *index = (const int64_t *)q->index;
    REAL *dw = (REAL *)q->out, *db = (REAL *)q->bias, *work = (REAL *)q->work;
    REAL *partials = work, *per_thread = work + (runs - 1) * O * K;
    /* where the gradient is built from the pooling's, several images side by side: one
       GEMM each way for all of them (as the forward groups them) */
    const int64_t group = PL && !direct ? group_of(K, L) : 1;
    int bad = 0;
    #pragma omp parallel num_threads(threads) if (threads > 1) reduction(|:bad)
    {
        REAL *cols = per_thread + (int64_t)omp_get_thread_num() *
                     ((direct ? 0 : K * L * group) + (PL ? O * L * group : 0));
        REAL *gbuf = cols + (direct ? 0 : K * L * group);
        #pragma omp for schedule(static)
        for (int64_t run = 0; run < runs; run++) {
            REAL *part = run ? partials + (run - 1) * O * K : dw;
            double *dbr = dbp + run * O;
            for (int64_t o = 0; o < O; o++)
                dbr[o] = 0;
            const int64_t first = N * run / runs, last = N * (run + 1) / runs;
            for (int64_t n = first; n < last; n += group) {
                const int64_t ld = (last - n < group ? last - n : group) * L, gn = ld / L;
                const REAL *g = gin + n * O * L;
                if (PL) {  /* the pooling's backward: each gradient at its window's winner */
                    memset(gbuf, 0, (size_t)(O * ld) * sizeof(REAL));
                    for (int64_t i = 0; i < gn; i++) {
                        const REAL *gp = gin + (n + i) * O * PL;
                        const int64_t *at = index + (n + i) * O * PL;
                        for (int64_t o = 0; o < O; o++)
                            for (int64_t s = 0; s < PL; s++) {
                                const int64_t j = at[o * PL + s];
                                if (j < 0 || j >= L) { bad = 1; continue; }
                                gbuf[o * ld + i * L + j] += gp[o * PL + s];
                            }
                    }
                    g = gbuf;
                }
                if (need_db)
                    for (int64_t o = 0; o < O; o++) {
                        double s = 0;
                        const REAL *row = g + o * ld;
                        #pragma omp simd reduction(+:s)
                        for (int64_t l = 0; l < ld; l++)
                            s += row[l];
                        dbr[o] += s;
                    }
                const REAL *img = x + n * in_plane;
                if (!direct)
                    for (int64_t i = 0; i < gn; i++)
                        im2col(q, img + i * in_plane, cols + i * L, ld, 0, K);
                gemm(q, 111, 112, O, K, ld, g, ld, direct ? img : cols, ld,
                     n == first ? 0 : 1, part, K);
                if (need_dx) {
                    REAL *c = direct ? dx + n * in_plane : cols;
                    gemm(q, 112, 111, K, ld, O, w, K, g, ld, 0, c, ld);
                    if (!direct)
                        for (int64_t i = 0; i < gn; i++)
                            col2im(q, cols + i * L, ld, dx + (n + i) * in_plane);
                }
            }
        }
        #pragma omp for schedule(static)
        for (int64_t i = 0; i < O * K; i++) {
            REAL s = dw[i];
            for (int64_t r = 1; r < runs; r++)
                s += partials[(r - 1) * O * K + i];
            dw[i] = s;
        }
        if (need_db) {
            #pragma omp for schedule(static)
            for (int64_t o = 0; o < O; o++) {
                double s = 0;
                for (int64_t r = 0; r < runs; r++)
                    s += dbp[r * O + o];
                db[o] = (REAL)s;
            }
        }
    }
    p[8] = bad;
}
"""

WEIGHT_GRAD = CLoop("conv2d_weight_grad", _WEIGHT_GRAD, COMMON)
BACKWARD = CLoop("conv2d_backward", _BACKWARD, COMMON)
INPUT_GRAD = CLoop("conv2d_input_grad", _INPUT_GRAD, COMMON)


def _setup(loop, arrays, dtype):
    """(kernel, threads, (sgemm, dgemm, 64-bit ints)) or None where the loop does not
    apply to these arrays (threads: 1 for a small product, see :func:`_threads`)."""
    if any(a.__class__ is not np.ndarray or a.dtype != dtype or a.ndim != 4
           for a in arrays) or dtype not in (np.float32, np.float64) or \
            any(0 in a.shape for a in arrays):
        return None
    found = loop.get(dtype)
    blas = cpu_blas.entry_points() if found is not None else None
    return None if blas is None else found + (blas,)


def _threads(threads: int, macs: int) -> int:
    return threads if 2 * macs >= MIN_PARALLEL_FLOPS else 1


def _params(head, blas, dtype, x, w, out, work, n, c, hw, o, kernel, stride, padding,
            dilation, out_size):
    sgemm, dgemm, wide = blas
    return np.array(head + [sgemm if dtype == np.float32 else dgemm, wide, n, c, *hw, o,
                            *kernel, *stride, *padding, *dilation, *out_size,
                            address(x), address(w), 0, address(out),
                            address(work), 0, 0, 0, 0, 0, 0, 0, 0], dtype=np.int64)


def conv2d_weight_grad(x, g, kernel_size, stride, padding, dilation):
    """The gradient of a 2-D convolution (one group) with respect to its weight: ``x``
    ``(N, C, H, W)``, ``g`` ``(N, O, OH, OW)``, ``padding`` the low pads; ``(O, C, KH,
    KW)``, or None where this path does not apply."""
    found = _setup(WEIGHT_GRAD, (x, g), x.dtype)
    if found is None or x.shape[0] != g.shape[0]:
        return None
    kernel, threads, blas = found
    x, g = np.ascontiguousarray(x), np.ascontiguousarray(g)
    n, c = x.shape[:2]
    o = g.shape[1]
    k = c * kernel_size[0] * kernel_size[1]
    length = g.shape[2] * g.shape[3]
    threads = _threads(threads, n * o * k * length)
    runs = min(n, PARTIALS)
    direct = kernel_size == (1, 1) and stride == (1, 1) and padding == (0, 0)
    work = buffer(x.dtype, (runs - 1) * o * k + (0 if direct else threads * k * length))
    out = np.empty((o, c) + tuple(kernel_size), x.dtype)
    kernel(_params([threads, runs], blas, x.dtype, x, g, out, work, n, c, x.shape[2:], o,
                   kernel_size, stride, padding, dilation, g.shape[2:]).ctypes.data)
    return out


def conv2d_input_grad(g, w, size, stride, padding, dilation):
    """The gradient of a 2-D convolution (one group) with respect to its input of
    spatial ``size``: ``g`` ``(N, O, OH, OW)``, ``w`` ``(O, C, KH, KW)``, ``padding``
    the low pads; ``(N, C, *size)``, or None where this path does not apply."""
    found = _setup(INPUT_GRAD, (g, w), g.dtype)
    if found is None or g.shape[1] != w.shape[0]:
        return None
    kernel, threads, blas = found
    g, w = np.ascontiguousarray(g), np.ascontiguousarray(w)
    n, o = g.shape[:2]
    c = w.shape[1]
    length = g.shape[2] * g.shape[3]
    k = c * w.shape[2] * w.shape[3]
    threads = _threads(threads, n * o * k * length)
    work = buffer(g.dtype, threads * k * length)
    out = np.zeros((n, c) + tuple(size), g.dtype)
    kernel(_params([threads], blas, g.dtype, g, w, out, work, n, c, size, o, w.shape[2:],
                   stride, padding, dilation, g.shape[2:]).ctypes.data)
    return out


def conv2d_backward(x, w, g, index, pooled_from, kernel_size, stride, padding, dilation,
                    need_db):
    """``(dW, db or None, dx or None)`` of a 2-D convolution (one group) of ``x`` ``(N, C,
    H, W)`` (``padding`` the low pads), for the gradient ``g`` of its output; or, with
    ``index``, for the gradient ``g`` ``(N, O, PH, PW)`` of the max pooling of its
    output (spatial size ``pooled_from``), whose winners' flat positions ``index``
    gives. ``dx`` where the weight ``w`` ``(O, C, *kernel_size)`` is given (else None).
    None where this path does not apply (or an index is out of range: the NumPy path
    reports it)."""
    found = _setup(BACKWARD, (x, g) if w is None else (x, g, w), x.dtype)
    if found is None or x.shape[0] != g.shape[0] or (w is not None and (
            w.shape != (g.shape[1], x.shape[1]) + tuple(kernel_size))) or \
            (index is not None and (index.__class__ is not np.ndarray or
                                    index.dtype != np.int64 or index.shape != g.shape)):
        return None
    kernel, threads, blas = found
    x, g = np.ascontiguousarray(x), np.ascontiguousarray(g)
    w = x if w is None else np.ascontiguousarray(w)  # (w: read only for dx)
    n, c = x.shape[:2]
    o = g.shape[1]
    kh, kw = kernel_size
    out_size = tuple(pooled_from) if index is not None else g.shape[2:]
    k, length = c * kh * kw, out_size[0] * out_size[1]
    threads = _threads(threads, n * o * k * length)
    runs = min(n, PARTIALS)
    direct = (kh, kw) == (1, 1) and stride == (1, 1) and padding == (0, 0)
    pooled = 0 if index is None else g.shape[2] * g.shape[3]
    if index is not None:
        index = np.ascontiguousarray(index)
    group = group_of(k, length) if pooled and not direct else 1
    per_thread = ((0 if direct else k * length) + (o * length if pooled else 0)) * group
    work = buffer(x.dtype, (runs - 1) * o * k + threads * per_thread)
    dw = np.empty((o, c, kh, kw), x.dtype)
    db = np.empty(o, x.dtype) if need_db else None
    dx = np.zeros(x.shape, x.dtype) if w is not x else None
    partial_db = np.empty((runs, o), np.float64)
    sgemm, dgemm, wide = blas
    params = np.array(
        [threads, runs, int(need_db), int(dx is not None), pooled, address(g),
         0 if dx is None else address(dx), address(partial_db), 0,
         sgemm if x.dtype == np.float32 else dgemm, wide, n, c, *x.shape[2:], o, kh, kw,
         *stride, *padding, *dilation, *out_size, address(x), address(w),
         0 if db is None else address(db), address(dw), address(work), 0, 0, 0, 0, 0, 0,
         0, 0 if index is None else address(index)], dtype=np.int64)
    kernel(params.ctypes.data)
    if params[8]:
        return None
    return dw, db, dx
