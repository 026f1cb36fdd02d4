"""The 2-D convolution forward as one C loop: one GEMM per image, with bias, ReLU and
max pooling as an epilogue (its C shares :data:`~ember.ops.conv_kernels.COMMON` with
the gradients).

The forward, :func:`conv2d_forward`: NumPy's path builds the columns of the whole batch
with strided copies, multiplies once, and transposes the result into ``(N, O, H, W)``:
three passes over large arrays. Here each OpenMP thread takes whole images.

At stride 1 (the implicit path, where ember's own GEMM is on) there are no columns: the
image, copied into a padded one where the convolution pads, is the GEMM's left operand
as it lies. Output ``(oh, ow)`` is row ``oh * WP + ow`` of a grid as wide as the padded
image, and its tap ``(c, kh, kw)`` reads the image at that row plus the tap's offset
(``c * HP * WP + kh * DH * WP + kw * DW``); the grid's last ``WP - OW`` positions of each
line are computed and dropped. The weight is packed once per call. With one channel,
consecutive images are consecutive planes, so a few of them make one grid. The result
is channels last; pooled, that is what the epilogue wants, else it is transposed to
channels first by 8 x 8 blocks (only from :data:`IMPLICIT_TAPS` taps up: with fewer, the
columns cost less than the transpose). On the cnn workload this took the compiled
inference at batch 64 and the training step about 25 % down, against the columns.

Otherwise (other strides, ``EMBER_GEMM=openblas``) each thread copies one image's
columns into its own buffer (in cache), multiplies them by the weight with a one-thread
GEMM straight into that image's output (already in ``(O, H, W)`` order), and adds the
bias there. With fewer images than threads, the threads share each image: rows
of the columns, then blocks of output channels. ``ember.jit`` also folds a following
ReLU and max pooling into the same call (:mod:`ember.compiler.passes.epilogues`): the
image's result is pooled while it sits in cache, and only the pooled values are written.
The result is then computed channels last (``(H*W, O)``, several images per GEMM), so
that each pooling window's max is one vector across the channels; max pooling commutes
with adding a per-channel bias and with ReLU (both are monotone), so without indices the
epilogue pools first and adds and clips the pooled values only. With indices (training)
each value gets its bias and ReLU before the comparisons, so ties resolve as in the
unfused pooling. Calls are planned once per shape (the parameters, the buffer sizes), so
a call costs a few microseconds of Python.

Used for float32/float64 NumPy arrays on the CPU where the kernel cache has a C compiler
and the OpenBLAS NumPy uses is found (``backends/cpu_blas``); anything else (None from
:func:`conv2d_forward`) takes the NumPy path.
"""
from __future__ import annotations

import os

import numpy as np

from ..backends import cpu_blas, cpu_gemm
from ..backends.addresses import C_ARRAY_DATA, Plans, scratch, takes_arrays
from .c_loops import CLoop, address
from .conv_epilogue import EPILOGUES
from .conv_kernels import COMMON, GROUP, MIN_PARALLEL_FLOPS, group_of, own_gemm

_FORWARD_SOURCE = EPILOGUES + r"""
/* The implicit forward (stride 1; q->ko given): no columns. The image (copied into a
   padded one where the convolution pads) is the GEMM's left operand as it lies: output
   (oh, ow) is row oh * WP + ow of a grid as wide as the padded image, and its tap k is
   the image's value at that row + ko[k]. The last WP - OW positions of each grid line
   are computed and never read (2 of every 13 on the cnn's second layer), and the weight is
   packed once per call, not once per product. With one channel, consecutive images are
   consecutive planes: `group` of them make one grid. */

#define PACK_ALL_OF_(T) pack_all_##T
#define PACK_ALL_OF(T) PACK_ALL_OF_(T)
#define GEMM_PACKED_OF_(T) gemm_packed_##T
#define GEMM_PACKED_OF(T) GEMM_PACKED_OF_(T)

/* rows [r0, r1) of every plane of g images (from x) into their padded copies */
static void pad_rows(const conv_t *q, const REAL *x, REAL *pad, int64_t g, int64_t r0,
                     int64_t r1)
{
    const int64_t H = q->H, W = q->W, WP = q->WP, plane = q->HP * WP;
    for (int64_t c = 0; c < g * q->C; c++)
        for (int64_t r = r0; r < r1; r++) {
            REAL *row = pad + c * plane + r * WP;
            const int64_t ih = r - q->PH;
            if (ih < 0 || ih >= H) {
                for (int64_t j = 0; j < WP; j++) row[j] = 0;
                continue;
            }
            const REAL *in = x + c * H * W + ih * W;
            for (int64_t j = 0; j < WP; j++) {
                const int64_t iw = j - q->PW;
                row[j] = iw >= 0 && iw < W ? in[iw] : 0;
            }
        }
}

/* output rows [p0, p1) (pooled rows where pooled) and channels [o0, o1) (a multiple of
   the panel width, or O) of images [n, n + g) (g > 1: whole images of one channel); yt
   the thread's result, pad its padded images */
static void implicit_strip(const conv_t *q, const REAL *P, REAL *pad, REAL *yt, int64_t n,
                           int64_t g, int64_t p0, int64_t p1, int64_t o0, int64_t o1)
{
    const int64_t C = q->C, O = q->O, WP = q->WP, plane = q->HP * WP;
    const int64_t K = C * q->KH * q->KW, pooled = q->PKH != 0;
    const int64_t out_plane = O * (pooled ? q->POH * q->POW : q->OH * q->OW);
    const int64_t r0 = pooled ? p0 * q->PSH : p0;
    const int64_t r1 = pooled ? (p1 - 1) * q->PSH + q->PKH : p1;
    const REAL *src = (const REAL *)q->x + n * C * q->H * q->W;
    if (pad) {
        pad_rows(q, src, pad, g, r0, r1 + (q->KH - 1) * q->DH);
        src = pad;
    }
    const int64_t M = (g - 1) * plane + (r1 - r0 - 1) * WP + q->OW;
    ((GEMM_PACKED_OF(REAL))q->gemm_packed)(M, O, K, src + r0 * WP, (const int64_t *)q->ko,
                                          P, yt, O, o0, o1, 0);
    REAL *out = (REAL *)q->out + n * out_plane;
    for (int64_t i = 0; i < g; i++) {
        const REAL *y = yt + i * plane * O;
        if (pooled) {
            REAL *m = yt + ((g - 1) * plane + (r1 - r0) * WP) * O;
            pool(q, y, WP, p0, p1, out + i * out_plane,
                 q->index ? (int64_t *)q->index + (n + i) * out_plane : 0, m,
                 m + (p1 - p0) * q->POW * O, o0, o1);
        } else {
            unpack(q, y, r0, r1, o0, o1, out + i * out_plane);
        }
    }
}

/* implicit_strip over strips of output rows whose result (yt) stays within STRIP_BYTES:
   written and pooled while in the L1/L2 cache. One image's whole result (93 KB on the
   cnn's first layer) went out to memory and back when other layers had filled the
   cache since the last call, which doubled the layer's time at batch 1. Whole images
   where they are grouped (g > 1). */
#define STRIP_BYTES (24 * 1024)
static void implicit_block(const conv_t *q, const REAL *P, REAL *pad, REAL *yt, int64_t n,
                           int64_t g, int64_t p0, int64_t p1, int64_t o0, int64_t o1)
{
    const int64_t grid_rows = q->PKH ? q->PSH : 1;  /* grid rows per output row */
    int64_t step = g > 1 ? p1 - p0 :
                   STRIP_BYTES / (grid_rows * q->WP * (o1 - o0) * (int64_t)sizeof(REAL));
    if (step < 1)
        step = 1;
    for (int64_t s = p0; s < p1; s += step)
        implicit_strip(q, P, pad, yt, n, g, s, s + step < p1 ? s + step : p1, o0, o1);
}

static void implicit_forward(const conv_t *q, int threads)
{
    const int64_t K = q->C * q->KH * q->KW, O = q->O, N = q->N, g = q->group;
    const int64_t plane = q->HP * q->WP;
    const int padded = q->PH || q->PW || q->HP != q->H || q->WP != q->W;
    const int64_t width = (O + q->panel - 1) / q->panel * q->panel;
    const int64_t rows = q->PKH ? q->POH : q->OH;
    /* work: the packed weight (64-byte aligned), then per thread its padded images, its
       result (grid rows x O) and, where pooled, the windows' maxima and offsets */
    REAL *P = (REAL *)(((uintptr_t)q->work + 63) & ~(uintptr_t)63);
    const int64_t pad_len = padded ? g * q->C * plane : 0;
    const int64_t y_len = ((g - 1) * plane + q->HP * q->WP) * O +
                          (q->PKH ? 2 * q->POH * q->POW * O : 0);
    const int64_t panels = width / q->panel;
    const PACK_ALL_OF(REAL) pack = (PACK_ALL_OF(REAL))q->pack_all;
    const REAL *w = (const REAL *)q->w;
    const int packed = N >= threads || panels < threads;  /* (else each thread its own) */
    if (packed)
        pack(w, 1, K, K, O, 0, O, P);
    #pragma omp parallel num_threads(threads) if (threads > 1)
    {
        const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
        REAL *pad = P + width * K + t * (pad_len + y_len), *yt = pad + pad_len;
        if (!packed) {  /* fewer images than threads: they share the panels */
            const int64_t o0 = panels * t / nt * q->panel;
            const int64_t o1 = panels * (t + 1) / nt * q->panel < O ?
                               panels * (t + 1) / nt * q->panel : O;
            pack(w, 1, K, K, O, o0, o1, P);
            for (int64_t n = 0; n < N; n++)
                implicit_block(q, P, padded ? pad : 0, yt, n, 1, 0, rows, o0, o1);
        } else if (N < nt) {           /* or the rows, where the panels are too few */
            for (int64_t n = 0; n < N; n++)
                if (rows * (t + 1) / nt > rows * t / nt)
                    implicit_block(q, P, padded ? pad : 0, yt, n, 1, rows * t / nt,
                                   rows * (t + 1) / nt, 0, O);
        } else {
            const int64_t last = N * (t + 1) / nt;
            for (int64_t n = N * t / nt; n < last; n += g)
                implicit_block(q, P, padded ? pad : 0, yt, n, last - n < g ? last - n : g, 0,
                               rows, 0, O);
        }
    }
}

static void forward(const int64_t *p)
{
    const int threads = (int)p[0];
    const conv_t *q = (const conv_t *)(p + 1);
    if (q->ko) {
        implicit_forward(q, threads);
        return;
    }
    const int64_t K = q->C * q->KH * q->KW, L = q->OH * q->OW, O = q->O;
    const int64_t in_plane = q->C * q->H * q->W;
    const int64_t out_plane = O * (q->PKH ? q->POH * q->POW : L);
    /* a 1x1 stride-1 unpadded convolution reads the image itself as its columns */
    const int direct = q->KH == 1 && q->KW == 1 && q->SH == 1 && q->SW == 1 && !q->PH &&
                       !q->PW;
    const int64_t PL = q->POH * q->POW;
    const int64_t group = q->PKH && !direct && q->N >= threads ? group_of(K, L) : 1;
    /* per thread: the columns (K x group*L), and where it is pooled, the result channels
       last (group*L x O), the windows' maxima and their offsets (each POH*POW x O) */
    const int64_t cols_len = direct ? 0 : K * L * group;
    const int64_t y_len = q->PKH ? group * L * O + 2 * PL * O : 0;
    const REAL *x = (const REAL *)q->x, *w = (const REAL *)q->w;
    REAL *out = (REAL *)q->out, *work = (REAL *)q->work;
    #pragma omp parallel num_threads(threads) if (threads > 1)
    {
        const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
        const int shared = q->N < nt;  /* fewer images than threads: share each image */
        const int64_t o0 = shared ? O * t / nt : 0, o1 = shared ? O * (t + 1) / nt : O;
        REAL *cols = work + (shared ? 0 : t * (cols_len + y_len)), *yt = cols + cols_len;
        const int64_t first = shared ? 0 : q->N * t / nt;
        const int64_t last = shared ? q->N : q->N * (t + 1) / nt;
        for (int64_t n = first; n < last; n += group) {
            const int64_t g = last - n < group ? last - n : group;  /* images now */
            const REAL *img = x + n * in_plane, *c = direct ? img : cols;
            REAL *o = out + n * out_plane;
            if (!direct) {
                for (int64_t i = 0; i < g; i++)
                    im2col(q, img + i * in_plane, cols + i * L, g * L,
                           shared ? K * t / nt : 0, shared ? K * (t + 1) / nt : K);
                if (shared) {
                    #pragma omp barrier
                }
            }
            if (o1 > o0 && q->PKH) {   /* yt[:, o0:o1] = cols^T @ w[o0:o1]^T, pooled */
                gemm(q, 112, 112, g * L, o1 - o0, K, c, g * L, w + o0 * K, K, 0, yt + o0, O);
                for (int64_t i = 0; i < g; i++)
                    pool(q, yt + i * L * O, q->OW, 0, q->POH, o + i * out_plane,
                         q->index ? (int64_t *)q->index + (n + i) * out_plane : 0,
                         yt + g * L * O, yt + g * L * O + PL * O, o0, o1);
            } else if (o1 > o0) {     /* o[o0:o1] = w[o0:o1] @ cols */
                gemm(q, 111, 111, o1 - o0, L, K, w + o0 * K, K, c, L, 0, o + o0 * L, L);
                finish(q, o, o0, o1);
            }
            if (shared) {
                #pragma omp barrier
            }
        }
    }
}

/* The call: the plan's params t (read only: t[39] is where an array object keeps its
   data pointer, or -1 where the arrays are the data pointers themselves) and the
   arrays; bias and index only where t[20] and t[30] say there are. */
void ember_kernel(const int64_t *t, const char *x, const char *w, const char *bias,
                  const char *out, const char *work, const char *index)
{
    int64_t p[39];
    memcpy(p, t, sizeof p);
    const int64_t at = t[39];
    p[18] = ember_array_data(x, at);
    p[19] = ember_array_data(w, at);
    p[21] = ember_array_data(out, at);
    p[22] = ember_array_data(work, at);
    if (t[20])
        p[20] = ember_array_data(bias, at);
    if (t[30])
        p[30] = ember_array_data(index, at);
    forward(p);
}
"""

FORWARD = CLoop("conv2d_forward", _FORWARD_SOURCE, COMMON + C_ARRAY_DATA,
                ops=("convolution", "conv2d_fused", "conv2d_fused_indexed"))
IMPLICIT_TAPS = 64  # the fewest taps (C * KH * KW) an unpooled result takes implicitly


def conv2d_forward(x, w, bias, stride, padding, dilation, out_size, relu=False,
                   pool=None, indices=False):
    """The 2-D convolution of ``x`` ``(N, C, H, W)`` with ``w`` ``(O, C, KH, KW)`` (one
    group), plus ``bias`` ``(O,)`` or None; ``padding`` the low pads ``(PH, PW)`` (the
    high ones follow from ``out_size``). ``relu``: then ReLU; ``pool``: then max pooling
    ``(kernel, stride)`` pairs without padding or dilation, and with ``indices``, the
    winners' flat positions in each plane too (``(values, indices)``, as ``max_pool``).
    None where this path does not apply."""
    if x.__class__ is not np.ndarray or w.__class__ is not np.ndarray or \
            (bias is not None and bias.__class__ is not np.ndarray):
        return None
    key = (x.shape, w.shape, x.dtype, w.dtype, None if bias is None else (bias.shape, bias.dtype),
           stride, padding, dilation, out_size, relu, pool, indices)
    plan = _PLANS.get(key, x, w, bias, stride, padding, dilation, out_size, relu, pool,
                      indices)
    if plan is False or os.getpid() != FORWARD.pid:  # (a forked child: NumPy's path)
        return None
    if not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    if not w.flags.c_contiguous:
        w = np.ascontiguousarray(w)
    return _call(plan, x, w, bias, indices)


def _call(plan, x, w, bias, indices):
    """The C loop of ``plan`` on contiguous arrays: ``out`` or ``(out, index)``."""
    kernel, params, out_shape, work_size, zeros, objects, _ = plan
    work = scratch(x.dtype, work_size)
    out = np.empty(out_shape, x.dtype)
    index = np.empty(out_shape, np.int64) if indices else None
    if zeros is not None:
        bias = zeros
    if objects:  # (the C side copies the params: they stay read only)
        kernel(params, x, w, bias, out, work, index)
    else:
        kernel(params, *[None if a is None else address(a) for a in (x, w, bias, out, work,
                                                                      index)])
    return out if index is None else (out, index)


class _Like:
    """An array's shape and dtype (what a plan is made from), without its values."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype, self.ndim = tuple(shape), np.dtype(dtype), len(shape)


def specialized(x_aval, w_aval, bias_aval, stride, padding, dilation, out_size, relu=False,
                pool=None, indices=False):
    """``run(x, w, bias)``: :func:`conv2d_forward` for inputs of exactly these
    ``(shape, dtype)`` (``bias_aval`` None: no bias), its plan made here, once; ``run``
    returns None where the arrays do not fit it (not contiguous NumPy arrays, another
    process). None where the C loop does not apply to these shapes."""
    x, w = _Like(*x_aval), _Like(*w_aval)
    bias = None if bias_aval is None else _Like(*bias_aval)
    plan = _forward_plan(x, w, bias, stride, padding, dilation, out_size, relu, pool,
                         indices)
    if plan is False or not plan[5]:  # (only where the arrays go in as objects)
        return None
    pid, ndarray = FORWARD.pid, np.ndarray

    def run(x, w, bias):
        if x.__class__ is not ndarray or w.__class__ is not ndarray or \
                not x.flags.c_contiguous or not w.flags.c_contiguous or \
                (bias is not None and bias.__class__ is not ndarray) or os.getpid() != pid:
            return None
        return _call(plan, x, w, bias, indices)
    return run


def _forward_plan(x, w, bias, stride, padding, dilation, out_size, relu, pool, indices):
    """Everything about a forward call but its arrays, or False where the C loop does not
    apply: (kernel, the address of its params (after the threads, conv_t's fields, with
    the pointers left 0: 1 at bias and index where there are ones), the output shape,
    the work size, zeros standing for a missing bias or None, whether the arrays go in
    as objects, what the params point into (kept alive here))."""
    if x.dtype != w.dtype or x.ndim != 4 or w.ndim != 4 or x.shape[1] != w.shape[1] or \
            (bias is not None and (bias.dtype != x.dtype or bias.shape != (w.shape[0],))):
        return False
    found = FORWARD.get(x.dtype)
    blas = cpu_blas.entry_points() if found is not None else None
    if blas is None or 0 in x.shape or 0 in w.shape or 0 in out_size:
        return False
    kernel, threads = found
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = out_size
    if pool is None:
        pk, ps, pout = (0, 0), (0, 0), (0, 0)
    else:
        pk, ps = pool
        pout = tuple((s - k) // st + 1 for s, k, st in zip(out_size, pk, ps))
        if min(pout) < 1:
            return False
    if 2 * n * o * c * kh * kw * oh * ow < MIN_PARALLEL_FLOPS:
        threads = 1
    direct = kh == kw == 1 and stride == (1, 1) and padding == (0, 0)
    group = group_of(c * kh * kw, oh * ow) if pool and not direct and n >= threads else 1
    per_thread = 0 if direct else c * kh * kw * oh * ow * group
    if pool:  # the result channels last, the windows' maxima and offsets
        per_thread += group * oh * ow * o + 2 * pout[0] * pout[1] * o
    zeros = None
    if pool and indices:
        if oh * ow >= 1 << 24:  # (the loop keeps offsets in the plane as REAL values)
            return False
        if bias is None:  # (the loop adds a bias to every value before comparing)
            zeros = np.zeros(o, x.dtype)
    sgemm, dgemm, wide = blas
    implicit, work, offsets = _implicit_plan(x.dtype, x.shape, w.shape, stride, padding,
                                             dilation, out_size, pout if pool else None,
                                             threads)
    if implicit is None:
        implicit, work = [0] * 7, per_thread * (threads if n >= threads else 1)
    at = takes_arrays(kernel, 6)
    params = np.array([threads, sgemm if x.dtype == np.float32 else dgemm, wide, n, c, h, wd,
                       o, kh, kw, *stride, *padding, *dilation, oh, ow, 0, 0,
                       int(bias is not None or zeros is not None), 0, 0, int(relu), *pk,
                       *ps, *pout, int(indices), own_gemm(x.dtype), *implicit,
                       -1 if at is None else at], dtype=np.int64)
    return (kernel, address(params), (n, o) + (pout if pool else out_size), work, zeros,
            at is not None, (params, offsets))


def _implicit_plan(dtype, x_shape, w_shape, stride, padding, dilation, out_size, pout,
                   threads):
    """conv_t's implicit fields (pack_all, gemm_packed, ko, panel, HP, WP, group), the
    work size and the taps' offsets (``ko`` points into them: the plan keeps them) for
    the C loop's implicit path (stride 1), or (None, 0, None) where it does not apply
    (another stride, no own GEMM)."""
    found = cpu_gemm.packed(dtype) if cpu_blas.OWN_GEMM else None
    n, c, h, wd = x_shape
    o, _, kh, kw = w_shape
    # Unpooled, the result is transposed to channels first; with few taps the columns
    # cost less than that (measured: 3x3 taps of 1-3 channels ran slower implicit, of 8
    # channels or more faster)
    if found is None or stride != (1, 1) or (pout is None and c * kh * kw < IMPLICIT_TAPS):
        return None, 0, None
    pack_all, gemm_packed, panel = found
    oh, ow = out_size
    hp, wp = oh + dilation[0] * (kh - 1), ow + dilation[1] * (kw - 1)
    plane = hp * wp
    group = GROUP if c == 1 and n >= threads and GROUP * plane * o <= 1 << 18 else 1
    offsets = np.array([ci * plane + i * dilation[0] * wp + j * dilation[1]
                        for ci in range(c) for i in range(kh) for j in range(kw)], np.int64)
    padded = padding != (0, 0) or (hp, wp) != (h, wd)
    per_thread = (group * c * plane if padded else 0) + ((group - 1) * plane + plane) * o
    if pout is not None:
        per_thread += 2 * pout[0] * pout[1] * o
    width = -(-o // panel) * panel
    return ([pack_all, gemm_packed, address(offsets), panel, hp, wp, group],
            width * c * kh * kw + 64 + threads * per_thread, offsets)


_PLANS = Plans(_forward_plan, 256)

__all__ = ["conv2d_forward", "specialized", "IMPLICIT_TAPS"]
