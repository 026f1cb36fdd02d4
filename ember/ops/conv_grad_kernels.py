"""The gradients of a 2-D convolution as one C loop over the images (the NumPy path
builds the whole batch's columns, then multiplies once).

:func:`conv2d_backward` gives any of the three gradients, for the gradient of the
convolution's output or of a max pooling after it (:func:`conv2d_weight_grad` and
:func:`conv2d_input_grad` are its one-gradient cases, for ``conv.py``):

- the output gradient of each image: given, or built from the pooling's gradient and
  indices in a thread's buffer (the full-size gradient is never written);
- ``db``: its rows summed in double;
- ``dW = sum over images of g[n] @ columns(x[n])^T``: each image's columns are built in
  a thread's own buffer (in cache) and multiplied into a partial sum by a one-thread
  GEMM. The images are split into at most :data:`PARTIALS` fixed runs, one partial
  each, added in run order at the end: the result does not depend on the number of
  threads;
- ``dx[n] = col2im(W^T @ g[n])``: the product lands in the thread's buffer and is added
  back into the image's input positions at once, tap by tap in row-major order as
  ``conv.col2im`` does.

Shared C parts (parameters, GEMM call, im2col, col2im) come from
:data:`ember.ops.conv_kernels.COMMON`; used for float32/float64 NumPy arrays where the
kernel cache has a C compiler and NumPy's OpenBLAS is found (``backends/cpu_blas``).
Anywhere else these functions say None and ``conv.py`` takes its NumPy path.
"""
from __future__ import annotations

import numpy as np

from ..backends import cpu_blas
from ..backends.addresses import scratch
from .c_loops import CLoop, address
from .conv_kernels import COMMON, MIN_PARALLEL_FLOPS, group_of, own_gemm

PARTIALS = 8  # the most partial sums of the weight gradient (runs of images)

_BACKWARD = r"""
/* The backward of a 2-D convolution (and of the max pooling after it), image by image.
   p = [threads, runs, need_dw, need_db, need_dx, pooled plane length (0: g is dense),
   g, dx (zeroed), db partials (double, runs x O), status, conv_t...]: x the input (read
   for dW only), w the weight (O x K, read for dx only), out dW, bias db, index the
   pooling's indices (N, O, pooled) or 0, work: with dW, (runs - 1) partials (O x K),
   then per thread the columns (K x group*L) and g (O x group*L). */
void ember_kernel(int64_t *p)
{
    const int threads = (int)p[0];
    const int64_t runs = p[1], need_dw = p[2], need_db = p[3], need_dx = p[4], PL = p[5];
    const REAL *gin = (const REAL *)p[6];
    REAL *dx = (REAL *)p[7];
    double *dbp = (double *)p[8];
    const conv_t *q = (const conv_t *)(p + 10);
    const int64_t K = q->C * q->KH * q->KW, L = q->OH * q->OW, O = q->O, N = q->N;
    const int64_t in_plane = q->C * q->H * q->W;
    const int direct = q->KH == 1 && q->KW == 1 && q->SH == 1 && q->SW == 1 && !q->PH &&
                       !q->PW;
    const REAL *x = (const REAL *)q->x, *w = (const REAL *)q->w;
    const int64_t *index = (const int64_t *)q->index;
    REAL *dw = (REAL *)q->out, *db = (REAL *)q->bias, *work = (REAL *)q->work;
    REAL *partials = work, *per_thread = work + (need_dw ? (runs - 1) * O * K : 0);
    /* where the gradient is built from the pooling's, several images side by side: one
       GEMM each way for all of them (as the forward groups them) */
    const int64_t group = PL && !direct ? group_of(K, L) : 1;
    /* dW's product the way round that fills the GEMM's panels (a row of vectors wide):
       O x K, or with fewer taps than channels (a first layer's 9), K x O, summed in the
       thread's buffer and written transposed at the end of the run */
    const int dw_t = need_dw && K < O;
    int bad = 0;
    #pragma omp parallel num_threads(threads) if (threads > 1) reduction(|:bad)
    {
        REAL *cols = per_thread + (int64_t)omp_get_thread_num() *
                     ((direct ? 0 : K * L * group) + (PL ? O * L * group : 0) +
                      (dw_t ? K * O : 0));
        REAL *gbuf = cols + (direct ? 0 : K * L * group);
        REAL *dw_tr = gbuf + (PL ? O * L * group : 0);
        #pragma omp for schedule(static)
        for (int64_t run = 0; run < runs; run++) {
            REAL *part = run ? partials + (run - 1) * O * K : dw;
            double *dbr = need_db ? dbp + run * O : 0;
            for (int64_t o = 0; o < (need_db ? O : 0); o++)
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
                if (need_db && PL)  /* from the pooled gradient: the same sums, read in a
                                       fraction of the memory */
                    for (int64_t i = 0; i < gn; i++)
                        for (int64_t o = 0; o < O; o++) {
                            double s = 0;
                            const REAL *row = gin + ((n + i) * O + o) * PL;
                            #pragma omp simd reduction(+:s)
                            for (int64_t l = 0; l < PL; l++)
                                s += row[l];
                            dbr[o] += s;
                        }
                else if (need_db)
                    for (int64_t o = 0; o < O; o++) {
                        double s = 0;
                        const REAL *row = g + o * ld;
                        #pragma omp simd reduction(+:s)
                        for (int64_t l = 0; l < ld; l++)
                            s += row[l];
                        dbr[o] += s;
                    }
                if (need_dw) {
                    const REAL *img = x + n * in_plane;
                    if (!direct)
                        for (int64_t i = 0; i < gn; i++)
                            im2col(q, img + i * in_plane, cols + i * L, ld, 0, K);
                    if (dw_t)
                        gemm(q, 111, 112, K, O, ld, direct ? img : cols, ld, g, ld,
                             n == first ? 0 : 1, dw_tr, O);
                    else
                        gemm(q, 111, 112, O, K, ld, g, ld, direct ? img : cols, ld,
                             n == first ? 0 : 1, part, K);
                }
                if (need_dx) {
                    REAL *c = direct ? dx + n * in_plane : cols;
                    gemm(q, 112, 111, K, ld, O, w, K, g, ld, 0, c, ld);
                    if (!direct)
                        for (int64_t i = 0; i < gn; i++)
                            col2im(q, cols + i * L, ld, dx + (n + i) * in_plane);
                }
            }
            if (dw_t && last > first)
                for (int64_t o = 0; o < O; o++)
                    for (int64_t k = 0; k < K; k++)
                        part[o * K + k] = dw_tr[k * O + o];
        }
        if (need_dw && runs > 1) {
            #pragma omp for schedule(static)
            for (int64_t i = 0; i < O * K; i++) {
                REAL s = dw[i];
                for (int64_t r = 1; r < runs; r++)
                    s += partials[(r - 1) * O * K + i];
                dw[i] = s;
            }
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
    p[9] = bad;
}
"""

BACKWARD = CLoop("conv2d_backward", _BACKWARD, COMMON,
                 ops=("conv2d_backward_fused", "conv_weight_grad", "conv_transpose"))


def conv2d_weight_grad(x, g, kernel_size, stride, padding, dilation):
    """The gradient of a 2-D convolution (one group) with respect to its weight: ``x``
    ``(N, C, H, W)``, ``g`` ``(N, O, OH, OW)``, ``padding`` the low pads; ``(O, C, KH,
    KW)``, or None where this path does not apply."""
    done = _backward(x, x.shape, None, g, None, None, tuple(kernel_size), stride, padding,
                     dilation, True, False)
    return None if done is None else done[0]


def conv2d_input_grad(g, w, size, stride, padding, dilation):
    """The gradient of a 2-D convolution (one group) with respect to its input of
    spatial ``size``: ``g`` ``(N, O, OH, OW)``, ``w`` ``(O, C, KH, KW)``, ``padding``
    the low pads; ``(N, C, *size)``, or None where this path does not apply."""
    if w.__class__ is not np.ndarray or w.ndim != 4 or g.ndim != 4:
        return None
    done = _backward(None, (g.shape[0], w.shape[1]) + tuple(size), w, g, None, None,
                     tuple(w.shape[2:]), stride, padding, dilation, False, False)
    return None if done is None else done[2]


def conv2d_backward(x, w, g, index, pooled_from, kernel_size, stride, padding, dilation,
                    need_db):
    """``(dW, db or None, dx or None)`` of a 2-D convolution (one group) of ``x`` ``(N, C,
    H, W)`` (``padding`` the low pads), for the gradient ``g`` of its output; or, with
    ``index``, for the gradient ``g`` ``(N, O, PH, PW)`` of the max pooling of its
    output (spatial size ``pooled_from``), whose winners' flat positions ``index``
    gives. ``dx`` where the weight ``w`` ``(O, C, *kernel_size)`` is given (else None).
    None where this path does not apply (or an index is out of range: the NumPy path
    reports it)."""
    if index is not None and (index.__class__ is not np.ndarray or
                              index.dtype != np.int64 or index.shape != g.shape):
        return None
    return _backward(x, x.shape, w, g, index, pooled_from, tuple(kernel_size), stride,
                     padding, dilation, True, need_db)


def _backward(x, x_shape, w, g, index, pooled_from, kernel_size, stride, padding, dilation,
              need_dw, need_db):
    """The C loop for the gradients asked for (dW with ``need_dw``, db with ``need_db``,
    dx where ``w`` is given): ``(dW, db, dx)``, each None where not asked, or None."""
    arrays = [a for a in (x, w, g) if a is not None]
    dtype = g.dtype
    if any(a.__class__ is not np.ndarray or a.dtype != dtype or a.ndim != 4
           for a in arrays) or len(x_shape) != 4 or 0 in x_shape or 0 in g.shape or \
            x_shape[0] != g.shape[0] or (w is not None and (
                w.shape != (g.shape[1], x_shape[1]) + kernel_size)):
        return None
    found = BACKWARD.get(dtype)  # (None for other dtypes)
    blas = cpu_blas.entry_points() if found is not None else None
    if blas is None:
        return None
    kernel, threads = found
    if x is not None:
        x = np.ascontiguousarray(x)
    g = np.ascontiguousarray(g)
    if w is not None:
        w = np.ascontiguousarray(w)
    if index is not None:
        index = np.ascontiguousarray(index)
    n, c = x_shape[:2]
    o = g.shape[1]
    kh, kw = kernel_size
    out_size = tuple(pooled_from) if index is not None else g.shape[2:]
    k, length = c * kh * kw, out_size[0] * out_size[1]
    if 2 * n * o * k * length < MIN_PARALLEL_FLOPS:
        threads = 1
    runs = min(n, PARTIALS)
    direct = (kh, kw) == (1, 1) and stride == (1, 1) and padding == (0, 0)
    pooled = 0 if index is None else g.shape[2] * g.shape[3]
    group = group_of(k, length) if pooled and not direct else 1
    per_thread = ((0 if direct else k * length) + (o * length if pooled else 0)) * group + \
        (k * o if need_dw and k < o else 0)  # (dW's product transposed: COMMON's dw_t)
    work = scratch(dtype, ((runs - 1) * o * k if need_dw else 0) + threads * per_thread)
    dw = np.empty((o, c, kh, kw), dtype) if need_dw else None
    db = np.empty(o, dtype) if need_db else None
    dx = np.zeros(x_shape, dtype) if w is not None else None
    partial_db = np.empty((runs, o), np.float64) if need_db else None
    sgemm, dgemm, wide = blas
    pointer = lambda a: 0 if a is None else address(a)  # noqa: E731
    params = np.array(
        [threads, runs, int(need_dw), int(need_db), int(dx is not None), pooled, address(g),
         pointer(dx), pointer(partial_db), 0,
         sgemm if dtype == np.float32 else dgemm, wide, n, c, *x_shape[2:], o, kh, kw,
         *stride, *padding, *dilation, *out_size, pointer(x), pointer(w), pointer(db),
         pointer(dw), address(work), 0, 0, 0, 0, 0, 0, 0, pointer(index),
         own_gemm(dtype)], dtype=np.int64)
    kernel(address(params))
    if params[9]:
        return None
    return dw, db, dx
