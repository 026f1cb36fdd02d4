"""Adding rows into a table by index (``out[idx[i]] += rows[i]``) as one C loop.

The backward of an embedding adds each gradient row into the row of the weight it was
looked up from. NumPy's ways to do that (``np.add.at``, or a stable sort and
``np.add.reduceat``) cost 0.5-2 ms for the gpt workload's 1,024 rows of 128, where the
loop itself is 131,072 additions. Here each thread owns a range of columns and walks the
rows in order: every sum runs in row order, so the result is the same whatever the
number of threads (it may differ from the NumPy path's in the last bit).

Used for float32/float64 on the CPU where the kernel cache has a C compiler; anything
else (``False`` from :func:`add_rows`) takes the NumPy path. An index out of range is
never written: the kernel checks every index first and the NumPy path reports it.
"""
from __future__ import annotations


import numpy as np

from .c_loops import CLoop, address

_SOURCE = r"""
#include <stdint.h>
/* p = [threads, n, d, num, idx (int64), rows (n x d), out (num x d), status] */
void ember_kernel(int64_t *p)
{
    const int threads = (int)p[0];
    const int64_t n = p[1], d = p[2], num = p[3];
    const int64_t *idx = (const int64_t *)p[4];
    const REAL *rows = (const REAL *)p[5];
    REAL *out = (REAL *)p[6];
    for (int64_t i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= num) {
            p[7] = 1;
            return;
        }
    const int64_t blocks = threads < 1 ? 1 : threads;
    #pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t b = 0; b < blocks; b++) {
        const int64_t lo = d * b / blocks, hi = d * (b + 1) / blocks;
        for (int64_t i = 0; i < n; i++) {
            REAL *o = out + idx[i] * d;
            const REAL *r = rows + i * d;
            #pragma omp simd
            for (int64_t j = lo; j < hi; j++)
                o[j] += r[j];
        }
    }
}
"""

# Smaller tables are added on one thread (starting the other costs more).
MIN_PARALLEL = 1 << 18

LOOP = CLoop("add_rows", _SOURCE, ops=("embedding_dense_backward",))


def add_rows(out, idx, rows) -> bool:
    """``out[idx[i]] += rows[i]`` for a C-contiguous ``out`` ``(num, d)``, ``rows``
    ``(n, d)`` and ``idx`` ``(n,)`` integers; False where this path does not apply (or an
    index is out of range: nothing was written then)."""
    if out.__class__ is not np.ndarray or rows.__class__ is not np.ndarray or \
            idx.__class__ is not np.ndarray or out.dtype != rows.dtype or \
            out.dtype not in (np.float32, np.float64) or idx.dtype.kind not in "iu" or \
            out.ndim != 2 or rows.ndim != 2 or rows.shape[1] != out.shape[1] or \
            idx.shape != (rows.shape[0],) or not out.flags.c_contiguous:
        return False
    found = LOOP.get(out.dtype)
    if found is None:
        return False
    kernel, threads = found
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    rows = np.ascontiguousarray(rows)
    n, d = rows.shape
    if n * d < MIN_PARALLEL:
        threads = 1
    params = np.array([threads, n, d, out.shape[0], address(idx), address(rows),
                       address(out), 0], dtype=np.int64)
    kernel(params.ctypes.data)
    return params[7] == 0


__all__ = ["add_rows", "MIN_PARALLEL"]
