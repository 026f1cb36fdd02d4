"""Sums, maxima and minima of a short float array in vector lanes, as C helpers for the
generated kernels and the hand-written C loops.

A loop under ``#pragma omp simd reduction(+:s)`` vectorises, but GCC finishes it by
adding up a stack array of one partial per lane *one after another*: as many as 64
dependent scalar adds when the loop also reads bytes (a mask), paid once per loop. On
rows of 64 values (the gpt's attention softmax) that tail was most of the kernel. These
helpers keep the partials in vector registers (two accumulators, GCC/Clang vector types
sized for the machine: 64 bytes with AVX-512, 32 with AVX, else 16) and combine the
lanes pairwise at the end, in registers (:func:`_horizontal`: the attention kernel's
softmax rows took 17 % less time than with the lanes stored and reloaded one by one). A kernel's loop stores each value to reduce into a block buffer
(it stays in the L1 cache) and calls the helper on the block.

The order of the additions is fixed by the lane count and the length, not by the
thread count. ``max``/``min`` ignore NaN in the comparison and report it through
``*nan`` (the caller makes the result NaN, as NumPy's amax does).
"""
from __future__ import annotations

_SOURCE_TEMPLATE = r"""
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
    T m = NAME##_lanes_##S(a);                                                       \
    I z = ember_or_lanes_##S(bad);                                                   \
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
    T s = ember_sum_lanes_##S(a);                                                    \
    for (; i < n; i++)                                                               \
        s += x[i];                                                                   \
    return s;                                                                        \
}                                                                                    \
EMBER_EXTREME(T, I, S, ember_max, >)                                                 \
EMBER_EXTREME(T, I, S, ember_min, <)

%(HORIZONTAL)s
EMBER_LANES(float, int32_t, float)
EMBER_LANES(double, int64_t, double)

/* the sum of x[0:n] for a float or double array x (hand-written loops over REAL) */
#define EMBER_SUM(x, n) _Generic((x), float *: ember_sum_float, double *: ember_sum_double)(x, n)
"""


def _horizontal(t: str, i: str, vbytes: int) -> str:
    """C helpers reducing the lanes of one vector of ``t`` (integer type ``i`` for its
    masks) in registers: ``ember_sum_lanes_T``, ``ember_max_lanes_T``,
    ``ember_min_lanes_T`` and ``ember_or_lanes_T`` (of a mask). Each step combines a
    vector's two halves (as 32-, then 16-byte vectors), then the last lanes in pairs:
    lane j with lane j + w for w = lanes / 2, ..., 1, the order the sums always had.
    Through memory instead, the scalar reloads of a vector just stored miss the store
    forwarding and cost about 100 cycles a row."""
    size = 8 if t == "double" else 4
    lines = [f"typedef {t} ember_v_{t} __attribute__((vector_size({vbytes})));",
             f"typedef {i} ember_m_{t} __attribute__((vector_size({vbytes})));"]
    widths = [w for w in (32, 16) if w < vbytes]
    for w in widths:
        lines += [f"typedef {t} ember_v{w}_{t} __attribute__((vector_size({w})));",
                  f"typedef {i} ember_m{w}_{t} __attribute__((vector_size({w})));"]
    combine = {
        "sum": lambda a, b, vec, m: f"{a} += {b};",
        "or": lambda a, b, vec, m: f"{a} |= {b};",
        "max": lambda a, b, vec, m: (
            f"{{ const {m} k_ = {b} > {a}; {a} = ({vec})((({m}){b} & k_) | (({m}){a} & ~k_)); }}"
            if vec else f"{a} = {b} > {a} ? {b} : {a};"),
        "min": lambda a, b, vec, m: (
            f"{{ const {m} k_ = {b} < {a}; {a} = ({vec})((({m}){b} & k_) | (({m}){a} & ~k_)); }}"
            if vec else f"{a} = {b} < {a} ? {b} : {a};"),
    }
    for op, rule in combine.items():
        mask = op == "or"
        elem, full = (i, f"ember_m_{t}") if mask else (t, f"ember_v_{t}")
        body = [f"static inline {elem} ember_{op}_lanes_{t}({full} a)", "{"]
        cur, cur_bytes = "a", vbytes
        for w in widths:
            vec = f"ember_m{w}_{t}" if mask else f"ember_v{w}_{t}"
            m = f"ember_m{w}_{t}"
            body += [f"    {vec} lo{w}, hi{w};",
                     f"    memcpy(&lo{w}, &{cur}, {w});",
                     f"    memcpy(&hi{w}, (char *)&{cur} + {w}, {w});",
                     "    " + rule(f"lo{w}", f"hi{w}", vec, m)]
            cur, cur_bytes = f"lo{w}", w
        lanes = cur_bytes // size
        body.append(f"    {elem} " + ", ".join(f"x{j} = {cur}[{j}]" for j in range(lanes)) + ";")
        w = lanes // 2
        while w:
            for j in range(w):
                body.append("    " + rule(f"x{j}", f"x{j + w}", None, None))
            w //= 2
        body += ["    return x0;", "}"]
        lines += body
    return "\n".join(lines)


def _all_horizontal() -> str:
    out = []
    for k, vbytes in enumerate((64, 32, 16)):
        out.append(("#if" if k == 0 else "#elif") + f" EMBER_VBYTES == {vbytes}")
        out += [_horizontal("float", "int32_t", vbytes), _horizontal("double", "int64_t", vbytes)]
    out.append("#endif")
    return "\n".join(out)


_SOURCE = ("#ifndef EMBER_LANES_INCLUDED\n#define EMBER_LANES_INCLUDED"
           + _SOURCE_TEMPLATE % {"HORIZONTAL": _all_horizontal()} + "#endif\n")

# The helpers take these element types (C spellings).
C_TYPES = ("float", "double")

SOURCE = _SOURCE

# The helpers' names, so a renderer includes SOURCE only where a kernel calls one.
NAMES = tuple(f"ember_{op}_{t}" for op in ("sum", "max", "min") for t in C_TYPES)

__all__ = ["SOURCE", "NAMES", "C_TYPES"]
