"""2-D max pooling and its backward as C loops (the rest of ``pooling.py`` is NumPy).

To keep each window's winner, NumPy takes the window's max one tap at a time over the
whole batch, each tap a comparison, a select and a pass over memory: 3.3 ms for the cnn
workload's first pooling (the values alone 1.0 ms). Here each (image, channel) plane is
one OpenMP task; for each output row and tap, a vectorised, branch-free select over the
row's outputs keeps the winner and its flat index in the plane (2.1 ms there; the
backward, 1.3 ms in NumPy, takes 0.8). The usual 2 x 2 window at stride 2 takes its
four taps in one pass over each output row: 0.9 ms with indices; the values alone
(eager inference) on planes with rows of 16 outputs or more (2.3 -> 0.9 ms for 28 a
row). The rules are PyTorch's, as in the NumPy path: padding never wins, the first of equal
values wins, NaN wins (the last NaN), and a window whose real elements are all -inf
names its first real element.

The backward adds each gradient into the plane position its window's winner came from,
plane by plane, in the order of the outputs.

Used for float32/float64 contiguous inputs where :class:`~ember.ops.c_loops.CLoop`
builds it; anything else (None from these functions) takes the NumPy path, which also
reports indices out of range.
"""
from __future__ import annotations


import numpy as np

from .c_loops import CLoop, address

_SOURCE = r"""
#include <stdint.h>
/* p = [op, threads, planes, H, W, OH, OW, KH, KW, SH, SW, DH, DW, PH, PW,
        x|g, values|out, index, status]
   op 0: forward (x -> values, index); op 1: backward (g, index -> out, zeroed); op 2:
   the values alone (index 0), for the plain 2 x 2 window only (caller checks) */
#define TAP(STEP)                                                   \
    {                                                               \
        _Pragma("omp simd")                                         \
        for (int64_t ow = lo; ow < hi; ow++) {                      \
            const REAL v = row[ow * (STEP)];                        \
            const int take = (v > best[ow]) | (v != v);             \
            best[ow] = take ? v : best[ow];                         \
            at[ow] = take ? base + ow * (STEP) : at[ow];            \
        }                                                           \
    }

void ember_kernel(int64_t *p)
{
    const int threads = (int)p[1];
    const int64_t planes = p[2], H = p[3], W = p[4], OH = p[5], OW = p[6];
    const int64_t KH = p[7], KW = p[8], SH = p[9], SW = p[10], DH = p[11], DW = p[12];
    const int64_t PH = p[13], PW = p[14];
    int64_t *index = (int64_t *)p[17];
    /* a 2 x 2 window at stride 2, no padding or dilation, every window whole */
    const int plain2x2 = KH == 2 && KW == 2 && SH == 2 && SW == 2 && DH == 1 && DW == 1 &&
                         !PH && !PW && 2 * OH <= H && 2 * OW <= W;
    if (p[0] == 2 && !plain2x2)
        return;
    if (p[0] == 0 || p[0] == 2) {
        const REAL *x = (const REAL *)p[15];
        REAL *values = (REAL *)p[16];
        #pragma omp parallel num_threads(threads) if (threads > 1)
        {
            #pragma omp for schedule(static)
            for (int64_t q = 0; q < planes; q++) {
                const REAL *in = x + q * H * W;
                if (plain2x2) {  /* the usual window: its four taps in one pass */
                    for (int64_t oh = 0; oh < OH; oh++) {
                        const REAL *r0 = in + 2 * oh * W, *r1 = r0 + W;
                        REAL *best = values + (q * OH + oh) * OW;
                        int64_t *at = index ? index + (q * OH + oh) * OW : 0;
                        const int64_t base = 2 * oh * W;
                        #pragma omp simd
                        for (int64_t ow = 0; ow < OW; ow++) {
                            REAL m = r0[2 * ow];
                            int64_t k = 0;
                            const REAL t1 = r0[2 * ow + 1], t2 = r1[2 * ow],
                                       t3 = r1[2 * ow + 1];
                            int take = (t1 > m) | (t1 != t1);
                            m = take ? t1 : m;
                            k = take ? 1 : k;
                            take = (t2 > m) | (t2 != t2);
                            m = take ? t2 : m;
                            k = take ? W : k;
                            take = (t3 > m) | (t3 != t3);
                            m = take ? t3 : m;
                            k = take ? W + 1 : k;
                            best[ow] = m;
                            if (at)  /* (op 2: the values only) */
                                at[ow] = base + 2 * ow + k;
                        }
                    }
                    continue;
                }
                for (int64_t oh = 0; oh < OH; oh++) {
                    REAL *best = values + (q * OH + oh) * OW;
                    int64_t *at = index + (q * OH + oh) * OW;
                    const int64_t h0 = oh * SH - PH;
                    const int64_t kh0 = h0 >= 0 ? 0 : (-h0 + DH - 1) / DH;
                    /* before any tap: -inf, naming the window's first real element */
                    const int64_t first = (h0 + kh0 * DH) * W - PW;
                    for (int64_t ow = 0; ow < OW; ow++) {
                        best[ow] = -(REAL)INFINITY;
                        at[ow] = first + ow * SW;
                    }
                    for (int64_t ow = 0; ow < OW && ow * SW < PW; ow++)  /* padded left */
                        at[ow] += (PW - ow * SW + DW - 1) / DW * DW;
                    for (int64_t kh = kh0; kh < KH; kh++) {
                        const int64_t h = h0 + kh * DH;
                        if (h >= H)
                            break;
                        for (int64_t kw = 0; kw < KW; kw++) {
                            /* the outputs whose tap (kh, kw) lies inside the row */
                            const int64_t t = PW - kw * DW, u = W - 1 + PW - kw * DW;
                            const int64_t lo = t <= 0 ? 0 : (t + SW - 1) / SW;
                            int64_t hi = u < 0 ? 0 : u / SW + 1;
                            hi = hi < OW ? hi : OW;
                            const int64_t base = h * W - t;  /* + ow * SW: the element */
                            const REAL *row = in + base;
                            /* vectorised select, no branch: a later tap wins only when
                               greater (ties keep the first) or NaN (the last NaN); the
                               usual strides as constants, which vectorise far better */
                            if (SW == 2)
                                TAP(2)
                            else if (SW == 1)
                                TAP(1)
                            else
                                TAP(SW)
                        }
                    }
                }
            }
        }
        return;
    }
    const REAL *g = (const REAL *)p[15];
    REAL *out = (REAL *)p[16];
    const int64_t plane = H * W, per = OH * OW;
    for (int64_t i = 0; i < planes * per; i++)
        if (index[i] < 0 || index[i] >= plane) {
            p[18] = 1;
            return;
        }
    #pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t q = 0; q < planes; q++) {
        REAL *o = out + q * plane;
        const REAL *gq = g + q * per;
        const int64_t *iq = index + q * per;
        for (int64_t i = 0; i < per; i++)
            o[iq[i]] += gq[i];
    }
}
"""

# Fewer elements than this run on one thread (starting the other costs more).
MIN_PARALLEL = 1 << 15
# Shorter output rows keep the values-only pooling with NumPy (measured: 13 outputs a
# row 0.95 ms in C against 1.08 in NumPy, 4 a row 0.18 against 0.14; 28 a row 0.86
# against 2.28)
MIN_VALUES_ROW = 16

LOOP = CLoop("max_pool2d", _SOURCE, prelude="#include <math.h>\n",
             ops=("max_pool", "max_pool_backward"))


def _usable(*arrays):
    """The kernel for contiguous NumPy ``arrays`` of a float dtype (the first's), or None."""
    if any(a.__class__ is not np.ndarray or not a.flags.c_contiguous for a in arrays):
        return None
    return LOOP.get(arrays[0].dtype)  # (None for other dtypes)


def max_pool2d(x, kernel, stride, dilation, padding, out_size):
    """(values, flat plane indices) of 2-D max pooling of ``x`` ``(N, C, H, W)`` with
    PyTorch's rules, or None where this path does not apply (without indices, see
    :func:`max_pool2d_values`)."""
    if x.ndim != 4 or len(kernel) != 2 or x.size == 0:
        return None
    return _forward(x, kernel, stride, dilation, padding, out_size, True)


def max_pool2d_values(x, kernel, stride, dilation, padding, out_size):
    """The values of 2-D max pooling of ``x`` ``(N, C, H, W)`` for the usual window (2 x 2
    at stride 2, no padding or dilation, whole windows) on rows of at least
    :data:`MIN_VALUES_ROW` outputs, or None (then NumPy's tap-by-tap maximum over the
    whole batch, faster for other windows and for short rows, which the loop does not
    vectorise). The same values as with indices."""
    if x.ndim != 4 or x.size == 0 or tuple(kernel) != (2, 2) or tuple(stride) != (2, 2) or \
            tuple(dilation) != (1, 1) or tuple(padding) != (0, 0) or \
            2 * out_size[0] > x.shape[2] or 2 * out_size[1] > x.shape[3] or \
            out_size[1] < MIN_VALUES_ROW:
        return None
    done = _forward(x, kernel, stride, dilation, padding, out_size, False)
    return None if done is None else done[0]


def _forward(x, kernel, stride, dilation, padding, out_size, indices):
    """(values, indices or None) from the loop's op 0 (with indices) or 2, or None."""
    found = _usable(x)
    if found is None:
        return None
    kernel_fn, threads = found
    n, c, h, w = x.shape
    oh, ow = out_size
    values = np.empty((n, c, oh, ow), dtype=x.dtype)
    index = np.empty((n, c, oh, ow), dtype=np.int64) if indices else None
    if x.size < MIN_PARALLEL:
        threads = 1
    params = np.array([0 if indices else 2, threads, n * c, h, w, oh, ow, *kernel, *stride,
                       *dilation, *padding, address(x), address(values),
                       address(index) if indices else 0, 0], dtype=np.int64)
    kernel_fn(params.ctypes.data)
    return values, index


def max_unpool2d(g, index, size):
    """``g`` ``(N, C, OH, OW)`` added into zeros ``(N, C, *size)`` at the flat plane
    positions ``index``, or None where this path does not apply (or an index is out of
    range: the NumPy path then reports it)."""
    if g.ndim != 4 or index.shape != g.shape or index.dtype != np.int64 or len(size) != 2:
        return None
    found = _usable(g, index) if g.size else None
    if found is None:
        return None
    kernel_fn, threads = found
    n, c, oh, ow = g.shape
    out = np.zeros((n, c) + tuple(size), dtype=g.dtype)
    if out.size < MIN_PARALLEL:
        threads = 1
    params = np.array([1, threads, n * c, size[0], size[1], oh, ow] + [0] * 8 +
                      [address(g), address(out), address(index), 0], dtype=np.int64)
    kernel_fn(params.ctypes.data)
    return out if params[18] == 0 else None


__all__ = ["max_pool2d", "max_pool2d_values", "max_unpool2d", "MIN_PARALLEL",
           "MIN_VALUES_ROW"]
