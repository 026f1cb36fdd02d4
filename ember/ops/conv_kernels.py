"""col2im for 2-D convolutions as one C loop (the rest of ``conv.py`` is NumPy).

The backward of a convolution with respect to its input adds every column entry back
into the input position it was read from. In NumPy that is one strided ``+=`` per
kernel tap over the whole batch, each a pass over memory; here each (image, channel)
plane is one OpenMP task that adds all of its taps while the plane sits in cache. The
sums run in the same order as the NumPy loop (tap by tap, in row-major tap order), so
the results are the same bits.

Used for float32/float64 on the CPU where the kernel cache has a C compiler; anything
else (``None`` from :func:`col2im_2d`) takes the NumPy path.
"""
from __future__ import annotations


import numpy as np

from .c_loops import CLoop

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

LOOP = CLoop("col2im", _SOURCE)


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
                       cols.ctypes.data, buf.ctypes.data, sc, sk0, sk1, sn, sg0, sg1,
                       geo.dilation[0] * row, geo.dilation[1], tg0, tg1], dtype=np.int64)
    kernel(params.ctypes.data)
    return True
