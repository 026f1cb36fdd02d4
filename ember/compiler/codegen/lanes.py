"""Sums, maxima and minima of a short float array in vector lanes, as C helpers for the
generated kernels and the hand-written C loops.

A loop under ``#pragma omp simd reduction(+:s)`` vectorises, but GCC finishes it by
adding up a stack array of one partial per lane *one after another*: as many as 64
dependent scalar adds when the loop also reads bytes (a mask), paid once per loop. On
rows of 64 values (the gpt's attention softmax) that tail was most of the kernel. These
helpers keep the partials in vector registers (two accumulators, GCC/Clang vector types
sized for the machine: 64 bytes with AVX-512, 32 with AVX, else 16) and add the lanes
pairwise at the end. A kernel's loop stores each value to reduce into a block buffer
(it stays in the L1 cache) and calls the helper on the block.

The order of the additions is fixed by the lane count and the length, not by the
thread count. ``max``/``min`` ignore NaN in the comparison and report it through
``*nan`` (the caller makes the result NaN, as NumPy's amax does).
"""
from __future__ import annotations

_SOURCE = r"""
#include <stdint.h>
#include <string.h>
#if defined(__AVX512F__)
#define EMBER_VBYTES 64
#elif defined(__AVX__)
#define EMBER_VBYTES 32
#else
#define EMBER_VBYTES 16
#endif

/* the largest (MORE is >) or smallest (<) of x[0:n] that is not NaN, from start;
   *nan |= 1 where x holds a NaN */
#define EMBER_EXTREME(T, I, S, NAME, MORE)                                           \
static inline T NAME##_##S(const T *restrict x, int64_t n, T start, int *nan)        \
{                                                                                    \
    enum { L = EMBER_VBYTES / sizeof(T) };                                           \
    ember_v_##S a = {0};                                                             \
    ember_m_##S bad = {0};                                                           \
    a += start;                                                                      \
    int64_t i = 0;                                                                   \
    for (; i + L <= n; i += L) {                                                     \
        ember_v_##S u;                                                               \
        memcpy(&u, x + i, sizeof u);                                                 \
        const ember_m_##S take = u MORE a;                                           \
        a = (ember_v_##S)(((ember_m_##S)u & take) | ((ember_m_##S)a & ~take));       \
        bad |= u != u;                                                               \
    }                                                                                \
    T t[L];                                                                          \
    I q[L];                                                                          \
    memcpy(t, &a, sizeof t);                                                         \
    memcpy(q, &bad, sizeof q);                                                       \
    T m = t[0];                                                                      \
    I z = q[0];                                                                      \
    for (int j = 1; j < L; j++) {                                                    \
        m = t[j] MORE m ? t[j] : m;                                                  \
        z |= q[j];                                                                   \
    }                                                                                \
    for (; i < n; i++) {                                                             \
        m = x[i] MORE m ? x[i] : m;                                                  \
        z |= x[i] != x[i];                                                           \
    }                                                                                \
    *nan |= z != 0;                                                                  \
    return m;                                                                        \
}

/* ember_sum_S, ember_max_S and ember_min_S for element type T (I: the integer type of
   its size) */
#define EMBER_LANES(T, I, S)                                                         \
typedef T ember_v_##S __attribute__((vector_size(EMBER_VBYTES)));                    \
typedef I ember_m_##S __attribute__((vector_size(EMBER_VBYTES)));                    \
static inline T ember_sum_##S(const T *restrict x, int64_t n)                        \
{                                                                                    \
    enum { L = EMBER_VBYTES / sizeof(T) };                                           \
    ember_v_##S a = {0}, b = {0};                                                    \
    int64_t i = 0;                                                                   \
    for (; i + 2 * L <= n; i += 2 * L) {                                             \
        ember_v_##S u, v;                                                            \
        memcpy(&u, x + i, sizeof u);                                                 \
        memcpy(&v, x + i + L, sizeof v);                                             \
        a += u;                                                                      \
        b += v;                                                                      \
    }                                                                                \
    if (i + L <= n) {                                                                \
        ember_v_##S u;                                                               \
        memcpy(&u, x + i, sizeof u);                                                 \
        a += u;                                                                      \
        i += L;                                                                      \
    }                                                                                \
    a += b;                                                                          \
    T t[L];                                                                          \
    memcpy(t, &a, sizeof t);                                                         \
    for (int w = L / 2; w; w >>= 1)                                                  \
        for (int j = 0; j < w; j++)                                                  \
            t[j] += t[j + w];                                                        \
    T s = t[0];                                                                      \
    for (; i < n; i++)                                                               \
        s += x[i];                                                                   \
    return s;                                                                        \
}                                                                                    \
EMBER_EXTREME(T, I, S, ember_max, >)                                                 \
EMBER_EXTREME(T, I, S, ember_min, <)

EMBER_LANES(float, int32_t, float)
EMBER_LANES(double, int64_t, double)

/* the sum of x[0:n] for a float or double array x (hand-written loops over REAL) */
#define EMBER_SUM(x, n) _Generic((x), float *: ember_sum_float, double *: ember_sum_double)(x, n)
"""

# The helpers take these element types (C spellings).
C_TYPES = ("float", "double")

SOURCE = _SOURCE

# The helpers' names, so a renderer includes SOURCE only where a kernel calls one.
NAMES = tuple(f"ember_{op}_{t}" for op in ("sum", "max", "min") for t in C_TYPES)

__all__ = ["SOURCE", "NAMES", "C_TYPES"]
