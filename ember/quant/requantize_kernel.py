"""Requantizing an int32 accumulator to uint8 as one C pass (``QuantizedLinear`` and
``QuantizedConv2d``): ``clip(rint((acc + bias[c]) * multiplier[c]) + zero_point, low,
255)``, per output channel ``c``.

The NumPy expression makes seven passes over the accumulator (the bias, the cast, the
product, the rounding, the zero point, the clip, the cast back); the Digits CNN's first
layer at batch 64 (131,072 values) spent more there than in its convolution. The C
loop does the same float32 operations in the same order (the product not fused with
anything, ``rintf`` rounding half to even as ``np.rint``), so the bytes are the same.

Used where the kernel cache has a C compiler; anything else (False from
:func:`requantize_into`) takes the NumPy expression.
"""
from __future__ import annotations

import numpy as np

from ..ops.c_loops import CLoop, address

_SOURCE = r"""
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static inline uint8_t requantize(int32_t acc, int32_t bias, float m, float zp, float low)
{
    /* (the sum wraps in 32 bits as NumPy's int32 addition does) */
    const int32_t s = (int32_t)((uint32_t)acc + (uint32_t)bias);
    float v = rintf((float)s * m) + zp;
    v = v < low ? low : v > 255.0f ? 255.0f : v;
    return (uint8_t)v;
}

/* p = [outer, channels, inner, acc (int32), bias (int32) or 0, multiplier (float, per
        channel), zero point, low, out (uint8)]: acc laid out (outer, channels, inner) */
void ember_kernel(const int64_t *p)
{
    const int64_t outer = p[0], C = p[1], inner = p[2], span = C * inner;
    const int32_t *acc = (const int32_t *)p[3], *bias = (const int32_t *)p[4];
    const float *mult = (const float *)p[5];
    const float zp = (float)p[6], low = (float)p[7];
    uint8_t *out = (uint8_t *)p[8];
    /* short runs of a channel (a Linear's: one value; a small image's): the channels'
       bias and multiplier spread over a whole (channels x inner) block, so the loop
       runs over blocks, long enough to vectorise */
    int32_t *bs = inner < 64 ? (int32_t *)malloc((size_t)span * sizeof(int32_t)) : 0;
    float *ms = bs ? (float *)malloc((size_t)span * sizeof(float)) : 0;
    if (bs && ms) {
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < inner; i++) {
                bs[c * inner + i] = bias ? bias[c] : 0;
                ms[c * inner + i] = mult[c];
            }
        for (int64_t a = 0; a < outer; a++) {
            const int32_t *in = acc + a * span;
            uint8_t *o = out + a * span;
            #pragma omp simd
            for (int64_t j = 0; j < span; j++)
                o[j] = requantize(in[j], bs[j], ms[j], zp, low);
        }
    } else {
        for (int64_t a = 0; a < outer; a++)
            for (int64_t c = 0; c < C; c++) {
                const int64_t base = (a * C + c) * inner;
                const int32_t b = bias ? bias[c] : 0;
                const float m = mult[c];
                #pragma omp simd
                for (int64_t i = 0; i < inner; i++)
                    out[base + i] = requantize(acc[base + i], b, m, zp, low);
            }
    }
    free(bs);
    free(ms);
}
"""

LOOP = CLoop("requantize", _SOURCE)


def requantize_into(acc, bias, multiplier, zero_point: int, low: int, axis: int):
    """The uint8 result of requantizing int32 ``acc`` along channel ``axis`` (``bias``
    int32 per channel or None, ``multiplier`` float32 per channel), or False where the C
    loop does not apply."""
    if acc.__class__ is not np.ndarray or acc.dtype != np.int32 or \
            not acc.flags.c_contiguous or multiplier.dtype != np.float32:
        return False
    found = LOOP.get(np.float32)
    if found is None:
        return False
    kernel, _ = found
    channels = acc.shape[axis]
    outer = int(np.prod(acc.shape[:axis], dtype=np.int64))
    inner = int(np.prod(acc.shape[axis + 1:], dtype=np.int64))
    multiplier = np.ascontiguousarray(multiplier)
    if bias is not None:
        bias = np.ascontiguousarray(bias, dtype=np.int32)
    out = np.empty(acc.shape, np.uint8)
    params = np.array([outer, channels, inner, address(acc),
                       0 if bias is None else address(bias), address(multiplier),
                       int(zero_point), int(low), address(out)], dtype=np.int64)
    kernel(address(params))
    return out


__all__ = ["requantize_into"]
