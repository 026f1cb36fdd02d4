"""Cross-entropy's row statistics as one C pass over the logits.

For each row of (N, C) logits: its log-sum-exp (with the row's max as the shift; blocks
of 256 terms summed in the logits' type, the blocks' sums in double), the logit at the
row's (already checked) target and, for label smoothing, the row's sum. NumPy needs a
max, a subtraction, an exp, a sum, a log and a gather, each a pass over the (N, C)
array (0.3 ms for the gpt workload's 1,024 x 256 logits); here each row is read twice
while it sits in the cache (0.13 ms; summing each term into a double took 0.6, as that
loop did not vectorise). The rest of the loss (weights, smoothing, the reduction) stays
with NumPy on the (N,) results.

Used for float32/float64 C-contiguous logits where :class:`~ember.ops.c_loops.CLoop`
builds it; anything else (None from :func:`row_statistics`) takes the NumPy path.
"""
from __future__ import annotations

import numpy as np

from ..compiler.codegen.scalar import PRELUDE
from .c_loops import CLoop, address

_SOURCE = r"""
#define EXP(v) _Generic((v), float: ember_expf, default: exp)(v)
#define BLOCK 256  /* values summed in REAL, then the blocks' sums in double (a sum into a
                      double does not vectorise with float values) */
/* p = [threads, N, C, x, safe targets (int64), lse (N), picked (N), row sums (N) | 0] */
void ember_kernel(const int64_t *p)
{
    const int threads = (int)p[0];
    const int64_t N = p[1], C = p[2];
    const REAL *x = (const REAL *)p[3];
    const int64_t *target = (const int64_t *)p[4];
    REAL *lse = (REAL *)p[5], *picked = (REAL *)p[6], *sums = (REAL *)p[7];
    #pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t i = 0; i < N; i++) {
        const REAL *row = x + i * C;
        REAL m = -(REAL)INFINITY;
        int nan = 0;
        #pragma omp simd reduction(max:m) reduction(|:nan)
        for (int64_t c = 0; c < C; c++) {
            const REAL v = row[c];
            m = v > m ? v : m;
            nan |= v != v;
        }
        if (nan)
            m = (REAL)NAN;
        double s = 0.0;
        for (int64_t c0 = 0; c0 < C; c0 += BLOCK) {
            const int64_t c1 = C - c0 < BLOCK ? C : c0 + BLOCK;
            REAL part = 0;
            #pragma omp simd reduction(+:part)
            for (int64_t c = c0; c < c1; c++)
                part += EXP(row[c] - m);
            s += (double)part;
        }
        lse[i] = (REAL)(log(s) + (double)m);
        picked[i] = row[target[i]];
        if (sums) {
            double t = 0.0;
            for (int64_t c0 = 0; c0 < C; c0 += BLOCK) {
                const int64_t c1 = C - c0 < BLOCK ? C : c0 + BLOCK;
                REAL part = 0;
                #pragma omp simd reduction(+:part)
                for (int64_t c = c0; c < c1; c++)
                    part += row[c];
                t += (double)part;
            }
            sums[i] = (REAL)t;
        }
    }
}
"""

# Fewer elements than this run on one thread (starting the other costs more).
MIN_PARALLEL = 1 << 15

LOOP = CLoop("ce_rows", _SOURCE, prelude="#include <math.h>\n#include <stdint.h>\n" + PRELUDE,
             ops=("cross_entropy_loss",))


def row_statistics(x, safe, with_sums: bool):
    """(lse ``(N, 1)``, logit at each target ``(N,)``, row sums ``(N,)`` or None) of
    logits ``x`` ``(N, C)`` and in-range targets ``safe`` ``(N,)``, or None where this
    path does not apply."""
    if x.__class__ is not np.ndarray or x.ndim != 2 or not x.size or \
            not x.flags.c_contiguous or safe.shape != (x.shape[0],):
        return None
    found = LOOP.get(x.dtype)
    if found is None:
        return None
    kernel, threads = found
    n = x.shape[0]
    safe = np.ascontiguousarray(safe, dtype=np.int64)
    lse, picked = np.empty((n, 1), x.dtype), np.empty(n, x.dtype)
    sums = np.empty(n, x.dtype) if with_sums else None
    if x.size < MIN_PARALLEL:
        threads = 1
    params = np.array([threads, n, x.shape[1], address(x), address(safe),
                       address(lse), address(picked),
                       0 if sums is None else address(sums)], dtype=np.int64)
    kernel(params.ctypes.data)
    return lse, picked, sums


__all__ = ["row_statistics", "MIN_PARALLEL"]
