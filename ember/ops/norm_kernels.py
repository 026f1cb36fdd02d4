"""The backward of a normalisation over trailing dims (layer norm, RMS norm) as one C
pass over the rows.

For each row, with d = x - mean, gy = g * rstd and gyr = gy * weight, the gradient of x
is ``gyr - d * rstd^2 * mean(gyr * d) - mean(gyr)`` (no last term without centring); the
weight's gradient sums ``gy * d`` over the rows and the bias's sums ``g``. The NumPy
path (and the kernels ember.jit fuses from the same formula) read and write the
(rows, n) arrays several times and sum the columns in further passes; here each thread
takes a block of rows, reads each row once for its two sums and once to write its
gradient (the row sums in vector lanes, :mod:`ember.compiler.codegen.lanes`, per block
of 256 values, the blocks' sums in double), then sums the columns of its rows, now in
cache, 16 columns at a time in registers, into partials of its own (in double), which
are added at the end.

Used for float32/float64 contiguous inputs on the CPU where the kernel cache has a C
compiler; anything else (None from :func:`normalize_backward`) takes the NumPy path.
"""
from __future__ import annotations

import math

import numpy as np

from ..compiler.codegen import lanes
from .c_loops import CLoop, address

_SOURCE = r"""
#include <stdint.h>
#include <omp.h>
#define COLS 16
#define BLOCK 256  /* a row's values summed in blocks this long, in vector lanes */
/* p = [threads, rows, n, center, g, x, mean, rstd, weight|0, gx|0, gw partials|0,
        gb partials|0]; partials: threads x n doubles, zeroed */
void ember_kernel(const int64_t *p)
{
    const int threads = (int)p[0];
    const int64_t rows = p[1], n = p[2];
    const int center = (int)p[3];
    const REAL *g = (const REAL *)p[4], *x = (const REAL *)p[5];
    const REAL *mean = (const REAL *)p[6], *rstd = (const REAL *)p[7];
    const REAL *w = (const REAL *)p[8];
    REAL *gx = (REAL *)p[9];
    double *gw = (double *)p[10], *gb = (double *)p[11];
    #pragma omp parallel num_threads(threads) if (threads > 1)
    {
        const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
        const int64_t lo = rows * t / nt, hi = rows * (t + 1) / nt;
        double *pw = gw ? gw + t * n : 0, *pb = gb ? gb + t * n : 0;
        /* the rows first: read in order, they leave the thread's block in cache for the
           column sums */
        REAL b1[BLOCK] __attribute__((aligned(64))), b2[BLOCK] __attribute__((aligned(64)));
        for (int64_t r = lo; r < hi && gx; r++) {
            const REAL *gr = g + r * n, *xr = x + r * n;
            const REAL m = mean[r], s = rstd[r];
            double s1 = 0.0, s2 = 0.0;
            for (int64_t c0 = 0; c0 < n; c0 += BLOCK) {
                const int64_t c1 = n - c0 < BLOCK ? n : c0 + BLOCK;
                if (w) {
                    #pragma omp simd
                    for (int64_t c = c0; c < c1; c++) {
                        const REAL gyr = gr[c] * s * w[c];
                        b1[c - c0] = gyr;
                        b2[c - c0] = gyr * (xr[c] - m);
                    }
                } else {
                    #pragma omp simd
                    for (int64_t c = c0; c < c1; c++) {
                        const REAL gyr = gr[c] * s;
                        b1[c - c0] = gyr;
                        b2[c - c0] = gyr * (xr[c] - m);
                    }
                }
                s1 += EMBER_SUM(b1, c1 - c0);
                s2 += EMBER_SUM(b2, c1 - c0);
            }
            const REAL k = (REAL)(s2 / (double)n) * s * s;
            const REAL b = center ? (REAL)(s1 / (double)n) : (REAL)0;
            REAL *out = gx + r * n;
            if (w) {
                #pragma omp simd
                for (int64_t c = 0; c < n; c++)
                    out[c] = gr[c] * s * w[c] - ((xr[c] - m) * k + b);
            } else {
                #pragma omp simd
                for (int64_t c = 0; c < n; c++)
                    out[c] = gr[c] * s - ((xr[c] - m) * k + b);
            }
        }
        /* the column sums, 16 columns at a time over all of the thread's rows, in
           registers (per row, the partials' loads and stores were most of the time) */
        for (int64_t c0 = 0; c0 < n && (pw || pb); c0 += COLS) {
            const int64_t cols = n - c0 < COLS ? n - c0 : COLS;
            double aw[COLS] = {0}, ab[COLS] = {0};
            if (cols == COLS) {
                for (int64_t r = lo; r < hi; r++) {
                    const REAL *gr = g + r * n + c0, *xr = x + r * n + c0;
                    const REAL m = mean[r], s = rstd[r];
                    #pragma omp simd
                    for (int j = 0; j < COLS; j++) {
                        aw[j] += (double)(gr[j] * s) * (double)(xr[j] - m);
                        ab[j] += (double)gr[j];
                    }
                }
            } else {
                for (int64_t r = lo; r < hi; r++)
                    for (int64_t j = 0; j < cols; j++) {
                        const REAL gv = g[r * n + c0 + j];
                        aw[j] += (double)(gv * rstd[r]) * (double)(x[r * n + c0 + j] - mean[r]);
                        ab[j] += (double)gv;
                    }
            }
            for (int64_t j = 0; j < cols; j++) {
                if (pw)
                    pw[c0 + j] += aw[j];
                if (pb)
                    pb[c0 + j] += ab[j];
            }
        }
    }
}
"""

# Fewer elements than this run on one thread (starting the other costs more).
MIN_PARALLEL = 1 << 15

LOOP = CLoop("norm_backward", _SOURCE, prelude=lanes.SOURCE, ops=("normalize_backward",))


def applies(g, x, mean, rstd, *weight, axes, center, param_shape, need) -> bool:
    """Whether :func:`normalize_backward` takes inputs of these shapes and dtypes (arrays
    or graph values): ``axes`` the trailing dims, the parameters (if any) of their
    shape, every input of one dtype, float32 or float64, whose kernel was built."""
    if not _fits(g, x, mean, rstd, *weight, axes=axes, param_shape=param_shape):
        return False
    return LOOP.available(np.dtype(getattr(x.dtype, "np", x.dtype)))  # (ember dtypes)


def _fits(g, x, mean, rstd, *weight, axes, param_shape) -> bool:
    """The shape and dtype conditions of :func:`applies`."""
    k = len(axes)
    shape, dtype = tuple(x.shape), x.dtype
    lead, trail = shape[:len(shape) - k], shape[len(shape) - k:]
    if axes != tuple(range(len(shape) - k, len(shape))) or not math.prod(shape) or \
            tuple(g.shape) != shape or (param_shape and tuple(param_shape) != trail):
        return False
    stat = lead + (1,) * k
    if tuple(mean.shape) != stat or tuple(rstd.shape) != stat or \
            (weight and tuple(weight[0].shape) != trail):
        return False
    return all(a.dtype == dtype for a in (g, mean, rstd) + weight)


def normalize_backward(g, x, mean, rstd, weight, axes, center, param_shape, need):
    """(gx, gw, gb) as ``norm._normalize_backward_forward`` returns them (those not
    needed 0-d), or None where this path does not apply (see :func:`applies`; the
    arrays must also be contiguous NumPy arrays, in the process that built the kernel)."""
    extra = () if weight is None else (weight,)
    arrays = (g, x, mean, rstd) + extra
    if any(a.__class__ is not np.ndarray or not a.flags.c_contiguous for a in arrays) or \
            not _fits(*arrays, axes=axes, param_shape=param_shape):
        return None
    dtype = x.dtype
    k = len(axes)
    found = LOOP.get(dtype)  # (None for other dtypes)
    if found is None:
        return None
    kernel, threads = found
    n = x.size // mean.size
    rows = mean.size
    if x.size < MIN_PARALLEL:
        threads = 1
    gx = np.empty_like(x) if need[0] else None
    gw = np.zeros((threads, n)) if need[1] else None
    gb = np.zeros((threads, n)) if need[2] else None
    addr = [0 if a is None else address(a) for a in (weight, gx, gw, gb)]
    params = np.array([threads, rows, n, int(center), address(g), address(x),
                       address(mean), address(rstd)] + addr, dtype=np.int64)
    kernel(params.ctypes.data)
    zero = np.zeros((), dtype=dtype)
    out_shape = tuple(param_shape) if param_shape else x.shape[x.ndim - k:]
    return (gx if gx is not None else zero,
            gw.sum(0).astype(dtype).reshape(out_shape) if gw is not None else zero,
            gb.sum(0).astype(dtype).reshape(out_shape) if gb is not None else zero)


__all__ = ["applies", "normalize_backward", "MIN_PARALLEL"]
