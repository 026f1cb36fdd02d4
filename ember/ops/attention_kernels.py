"""Scaled dot-product attention, forward and backward, as one C loop over the batch.

The NumPy path (:mod:`ember.ops.attention`) multiplies every head's matrices at once and
passes the whole (batch, L, S) score tensor through the softmax's steps one after
another: each step reads and writes it again, from memory. Here each thread takes whole
heads, one at a time, and does everything for one head while its (L, S) scores stay in
its cache:

- forward: scores = q k^T (ember's own GEMM, :mod:`ember.backends.cpu_gemm`, on one
  thread), the softmax of each row (scaled, masked, in vector lanes), then out = p v;
- backward: gv = p^T g, dp = g v^T, ds = p (dp - rowsum(dp p)) * scale, gq = ds k and
  gk = ds^T q.

Operands are read in place, at any layout whose rows have unit stride: the q, k and v
views of a fused qkv projection need no copy, and broadcast batch dims cost nothing. An
additive mask broadcasts over the batch and the rows. Results are computed in the
operands' dtype (float32 or float64), as the NumPy path does.

Used on the CPU where the kernel cache has a C compiler, for float32/float64 operands
with no dropout; anything else (None from :func:`forward` / :func:`backward`) takes the
NumPy path.
"""
from __future__ import annotations

import os

import numpy as np

from ..backends import cpu_gemm
from ..backends.addresses import Plans
from ..compiler.codegen import lanes, scalar
from .c_loops import CLoop, address

_COMMON = r"""
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>
typedef int (*gemm_t)(int64_t, int64_t, int64_t, const REAL *, int64_t, int64_t,
                      const REAL *, int64_t, int64_t, REAL *, int64_t, int);
#define ATT_CAT2(a, b) a##_##b
#define ATT_CAT(a, b) ATT_CAT2(a, b)
#define ATT_MAX ATT_CAT(ember_max, REAL)
#define ATT_SUM ATT_CAT(ember_sum, REAL)

static inline REAL att_exp(REAL x)
{
    return sizeof(REAL) == 4 ? (REAL)ember_expf((float)x) : (REAL)exp((double)x);
}

#define ATT_VBYTES EMBER_VBYTES  /* (lanes.py's vector size) */

static inline double att_scale(const int64_t *bits)
{
    double s;
    memcpy(&s, bits, sizeof s);
    return s;
}
"""

_SOURCE = _COMMON + r"""
/* row[0:n] = softmax(row * scale + mask[j * ms]) (no mask where mask is 0), as the NumPy
   path computes it: the row's largest finite entry subtracted (0 where there is none),
   times the reciprocal of the sum (a row with every entry -inf gives zeros); or, where
   plain, as F.softmax does (the largest entry subtracted: such a row gives NaN) */
static void softmax_row(REAL *restrict row, int64_t n, REAL scale, const REAL *mask,
                        int64_t ms, int plain)
{
    if (mask && ms == 1) {
        #pragma omp simd
        for (int64_t j = 0; j < n; j++)
            row[j] = row[j] * scale + mask[j];
    } else if (mask) {  /* (a mask broadcast along the row: ms == 0) */
        for (int64_t j = 0; j < n; j++)
            row[j] = row[j] * scale + mask[j * ms];
    } else {
        #pragma omp simd
        for (int64_t j = 0; j < n; j++)
            row[j] *= scale;
    }
    int nan = 0;
    const REAL m = ATT_MAX(row, n, -INFINITY, &nan);
    const REAL shift = plain ? (nan ? (REAL)NAN : m) : !nan && isfinite(m) ? m : 0;
    #pragma omp simd
    for (int64_t j = 0; j < n; j++)
        row[j] = att_exp(row[j] - shift);
    const REAL total = ATT_SUM(row, n);
    const REAL inverse = total == 0 && !plain ? 1 : 1 / total;
    #pragma omp simd
    for (int64_t j = 0; j < n; j++)
        row[j] *= inverse;
}

/* p = [threads, items, L, S, E, Ev, gemm, scale (a double's bits), mask column stride,
        row strides of q, k, v, mask, out (elements), q, k, v, mask|0, out, weights,
        offsets (items x 6: q, k, v, mask, out, weights; elements), plain softmax];
   weights are (items, L, S), rows S apart; p[0] is set to 1 where a GEMM found no
   memory for its buffers */
static void forward(int64_t *p)
{
    const int threads = (int)p[0];
    const int64_t items = p[1], L = p[2], S = p[3], E = p[4], Ev = p[5];
    const gemm_t gemm = (gemm_t)(intptr_t)p[6];
    const REAL scale = (REAL)att_scale(p + 7);
    const int64_t mcs = p[8], sq = p[9], sk = p[10], sv = p[11], sm = p[12], so = p[13];
    const REAL *q = (const REAL *)(intptr_t)p[14], *k = (const REAL *)(intptr_t)p[15];
    const REAL *v = (const REAL *)(intptr_t)p[16], *mask = (const REAL *)(intptr_t)p[17];
    REAL *o = (REAL *)(intptr_t)p[18], *w = (REAL *)(intptr_t)p[19];
    const int64_t *off = (const int64_t *)(intptr_t)p[20];
    const int plain = (int)p[21];
    int failed = 0;
    /* where every item reads the same mask: the keys each row computes, up to the last
       whole vector its mask leaves open (past it every key weighs 0: half of a causal
       row; a row with none open computes them all, to give what the full row gives) */
    int64_t *open = 0;
    int shared = mask != 0;
    for (int64_t b = 1; b < items && shared; b++)
        shared = off[6 * b + 3] == off[3];
    if (shared && (open = (int64_t *)malloc((size_t)L * sizeof(int64_t)))) {
        enum { VL = ATT_VBYTES / sizeof(REAL) };
        for (int64_t i = 0; i < L; i++) {
            const REAL *mr = mask + off[3] + i * sm;
            int64_t n = S;
            while (n > 0 && mr[(n - 1) * mcs] == -INFINITY)
                n--;
            n = n == 0 ? S : (n + VL - 1) / VL * VL;
            open[i] = n < S ? n : S;
        }
    }
    #pragma omp parallel for num_threads(threads) if (threads > 1) schedule(static) \
        reduction(| : failed)
    for (int64_t b = 0; b < items; b++) {
        const int64_t *f = off + 6 * b;
        REAL *pw = w + f[5];
        failed |= gemm(L, S, E, q + f[0], sq, 1, k + f[1], 1, sk, pw, S, 0) != 0;
        for (int64_t i = 0; i < L; i++) {
            const REAL *mr = mask ? mask + f[3] + i * sm : 0;
            REAL *row = pw + i * S;
            const int64_t n = open ? open[i] : S;
            softmax_row(row, n, scale, mr, mcs, plain);
            if (n < S)
                memset(row + n, 0, (size_t)(S - n) * sizeof(REAL));
        }
        failed |= gemm(L, Ev, S, pw, S, 1, v + f[2], sv, 1, o + f[4], so, 0) != 0;
    }
    free(open);
    p[0] = failed;
}

/* p = [threads, items, L, S, E, Ev, gemm, scale (a double's bits), which gradients
        (bits: 1 q, 2 k, 4 v), row strides of g, q, k, v, gq, gk, gv (elements), g, q, k,
        v, weights, gq|0, gk|0, gv|0, offsets (items x 8: g, q, k, v, weights, gq, gk, gv;
        elements)]; weights are (items, L, S), rows S apart; p[0] is set to 1 where
        memory ran out */
static void backward(int64_t *p)
{
    const int threads = (int)p[0];
    const int64_t items = p[1], L = p[2], S = p[3], E = p[4], Ev = p[5];
    const gemm_t gemm = (gemm_t)(intptr_t)p[6];
    const REAL scale = (REAL)att_scale(p + 7);
    const int64_t need = p[8], sg = p[9], sq = p[10], sk = p[11], sv = p[12];
    const int64_t sgq = p[13], sgk = p[14], sgv = p[15];
    const REAL *g = (const REAL *)(intptr_t)p[16], *q = (const REAL *)(intptr_t)p[17];
    const REAL *k = (const REAL *)(intptr_t)p[18], *v = (const REAL *)(intptr_t)p[19];
    const REAL *w = (const REAL *)(intptr_t)p[20];
    REAL *gq = (REAL *)(intptr_t)p[21], *gk = (REAL *)(intptr_t)p[22];
    REAL *gv = (REAL *)(intptr_t)p[23];
    const int64_t *off = (const int64_t *)(intptr_t)p[24];
    int failed = 0;
    #pragma omp parallel num_threads(threads) if (threads > 1) reduction(| : failed)
    {
        /* this thread's ds (L x S) and one row of products */
        REAL *ds = (REAL *)malloc((size_t)(L * S + S) * sizeof(REAL));
        failed |= ds == 0;
        #pragma omp for schedule(static)
        for (int64_t b = 0; b < items; b++) {
            if (!ds)
                continue;
            const int64_t *f = off + 8 * b;
            const REAL *pw = w + f[4];
            REAL *prod = ds + L * S;
            if (need & 4)
                failed |= gemm(S, Ev, L, pw, 1, S, g + f[0], sg, 1, gv + f[7], sgv, 0) != 0;
            if (!(need & 3))
                continue;
            failed |= gemm(L, S, Ev, g + f[0], sg, 1, v + f[3], 1, sv, ds, S, 0) != 0;
            for (int64_t i = 0; i < L; i++) {
                REAL *row = ds + i * S;
                const REAL *pr = pw + i * S;
                #pragma omp simd
                for (int64_t j = 0; j < S; j++)
                    prod[j] = row[j] * pr[j];
                const REAL d = ATT_SUM(prod, S);
                #pragma omp simd
                for (int64_t j = 0; j < S; j++)
                    row[j] = pr[j] * (row[j] - d) * scale;
            }
            if (need & 1)
                failed |= gemm(L, E, S, ds, S, 1, k + f[2], sk, 1, gq + f[5], sgq, 0) != 0;
            if (need & 2)
                failed |= gemm(S, E, L, ds, 1, S, q + f[1], sq, 1, gk + f[6], sgk, 0) != 0;
        }
        free(ds);
    }
    p[0] = failed;
}

/* p[0]: 0 the forward, 1 the backward, whose params follow */
void ember_kernel(int64_t *p)
{
    if (p[0])
        backward(p + 1);
    else
        forward(p + 1);
}
"""

_PRELUDE = "#include <math.h>\n#include <stdint.h>\n" + scalar.PRELUDE + lanes.SOURCE
LOOP = CLoop("attention", _SOURCE, prelude=_PRELUDE,
             ops=("scaled_dot_product_attention", "scaled_dot_product_attention_backward"))

# Fewer multiply-adds than this (all heads together) run on one thread.
MIN_PARALLEL = 1 << 16

def _strides(a) -> tuple | None:
    """``a``'s strides in elements, or None where one is not a whole number of them."""
    size = a.itemsize
    if any(s % size for s in a.strides):
        return None
    return tuple(s // size for s in a.strides)


def _offsets(batch: tuple, arrays: list) -> np.ndarray:
    """(items, len(arrays)) int64: where each batch item of each array starts (in
    elements), its batch dims broadcast against ``batch``."""
    items = int(np.prod(batch, dtype=np.int64))
    table = np.zeros((items, len(arrays)), np.int64)
    for c, a in enumerate(arrays):
        lead = a.shape[:-2]
        strides = _strides(a)[:-2]
        grid = np.zeros(batch, np.int64)
        pad = len(batch) - len(lead)
        for d, (n, s) in enumerate(zip(lead, strides)):
            if n != 1:
                shape = [1] * len(batch)
                shape[pad + d] = n
                grid = grid + (np.arange(n, dtype=np.int64) * s).reshape(shape)
        table[:, c] = grid.reshape(-1)
    return table


def _usable(arrays, dtype) -> bool:
    """Every array a NumPy array of ``dtype`` whose rows have unit stride."""
    for a in arrays:
        if a.__class__ is not np.ndarray or a.dtype != dtype or a.ndim < 2:
            return False
        st = _strides(a)
        if st is None or (st[-1] != 1 and a.shape[-1] > 1):
            return False
    return True


def _loop(arrays, dtype):
    """(the loop, threads it may use, the GEMM's address) for operands ``arrays`` of
    ``dtype``, or None (the NumPy path)."""
    found = LOOP.get(dtype) if _usable(arrays, dtype) else None
    gemm = cpu_gemm.address(dtype) if found else 0
    return found + (gemm,) if gemm else None


def _row_stride(a) -> int:
    return a.strides[-2] // a.itemsize if a.shape[-2] > 1 else 0


def _scale_bits(scale: float) -> int:
    return int(np.array([scale], np.float64).view(np.int64)[0])


def _heads_inside(batch: tuple, rows: int, cols: tuple, dtype) -> list:
    """Arrays of shape ``batch + (rows, col)`` for each ``col``, stored with the last
    batch dim (the heads) inside the rows: (..., rows, heads, col) in memory, as
    ``y.transpose(1, 2).reshape(b, t, d)`` reads them. Where every ``col`` is the same,
    one buffer (..., rows, len(cols), heads, col) holds them side by side, as
    ``cat([q, k, v], -1)`` of such reshapes reads them (:mod:`ember.compiler.runtime`
    joins adjacent pieces without a copy). Only for (batch, heads, ...) operands: with
    one batch dim there are no heads to merge."""
    heads = batch[-1]
    if len(set(cols)) == 1:
        buf = np.empty(batch[:-1] + (rows, len(cols), heads, cols[0]), dtype)
        return [buf[..., i, :, :].swapaxes(-3, -2) for i in range(len(cols))]
    return [np.empty(batch[:-1] + (rows, heads, c), dtype).swapaxes(-3, -2) for c in cols]


def _key(arrays) -> tuple:
    return tuple([None if a is None else (a.shape, a.strides, a.dtype) for a in arrays])


def _fits(arrays) -> bool:
    """The arrays of a call are NumPy arrays (a plan is keyed by shapes and strides
    only), in the process that made the plans (OpenMP does not survive a fork)."""
    for a in arrays:
        if a is not None and a.__class__ is not np.ndarray:
            return False
    return os.getpid() == _PID


def _forward_results(batch, L, S, Ev, dtype, heads_inside):
    """New (out, weights) arrays: alike at every call of one plan (their strides are in
    its table)."""
    if heads_inside and len(batch) >= 2:
        out = _heads_inside(batch, L, (Ev,), dtype)[0]
    else:
        out = np.empty(batch + (L, Ev), dtype)
    return out, np.empty(batch + (L, S), dtype)


def _forward_plan(q, k, v, mask, scale, batch, plain_softmax, heads_inside):
    """(kernel, its params with the data pointers left 0, what they point into) for
    calls on arrays laid out as these, or False where the C loop does not apply."""
    dtype = q.dtype
    found = _loop([q, k, v] + ([] if mask is None else [mask]), dtype)
    if found is None:
        return False
    kernel, threads, gemm = found
    L, E = q.shape[-2:]
    S, Ev = v.shape[-2:]
    out, weights = _forward_results(batch, L, S, Ev, dtype, heads_inside)
    if out.size == 0 or weights.size == 0:
        return False
    mask_cols = 0
    if mask is not None:
        mask_cols = mask.strides[-1] // mask.itemsize if mask.shape[-1] > 1 else 0
    table = _offsets(batch, [q, k, v, mask if mask is not None else q, out, weights])
    items = table.shape[0]
    if items * L * S * (E + Ev) < MIN_PARALLEL:
        threads = 1
    params = np.array([0, threads, items, L, S, E, Ev, gemm, _scale_bits(scale), mask_cols,
                       _row_stride(q), _row_stride(k), _row_stride(v),
                       0 if mask is None else _row_stride(mask), _row_stride(out),
                       0, 0, 0, 0, 0, 0, address(table), int(plain_softmax)], dtype=np.int64)
    return kernel, params, (batch, L, S, Ev, dtype, heads_inside), table


def forward(q, k, v, mask, scale: float, batch: tuple, plain_softmax: bool = False,
            heads_inside: bool = False):
    """(out, weights) of the attention for arrays q (..., L, E), k (..., S, E), v (...,
    S, Ev) and an additive ``mask`` (or None) broadcasting to ``batch + (L, S)``, or
    None where this path does not apply. ``plain_softmax``: a row whose every score is
    -inf gives NaN, as ``F.softmax`` does, not zeros. ``heads_inside``: ``out`` laid out
    with the heads inside the rows (:func:`_heads_inside`; for ``ember.jit``'s executor,
    where a value's layout is free). Everything but the arrays' pointers is planned once
    per layout (:data:`_FORWARD_PLANS`): a call costs a few microseconds of Python."""
    if not _fits((q, k, v, mask)):
        return None
    key = _key((q, k, v, mask)) + (batch, scale, plain_softmax, heads_inside)
    plan = _FORWARD_PLANS.get(key, q, k, v, mask, scale, batch, plain_softmax, heads_inside)
    if plan is False:
        return None
    kernel, template, results, _ = plan
    out, weights = _forward_results(*results)
    params = template.copy()
    params[15:21] = (address(q), address(k), address(v),
                     0 if mask is None else address(mask), address(out), address(weights))
    kernel(address(params))
    return None if params[1] else (out, weights)


def _backward_grads(batch, shapes, need, dtype, inside):
    """New gradient arrays (None where not needed), alike at every call of one plan."""
    if inside:
        return _heads_inside(batch, shapes[0][0], tuple(c for _, c in shapes), dtype)
    return [np.empty(batch + shape, dtype) if n else None for shape, n in zip(shapes, need)]


def _backward_plan(g, q, k, v, weights, scale, need, heads_inside):
    """As :func:`_forward_plan`, for the backward."""
    dtype = q.dtype
    batch = weights.shape[:-2]
    if not weights.flags.c_contiguous or tuple(g.shape[:-2]) != batch or weights.size == 0:
        return False
    found = _loop([g, q, k, v, weights], dtype)
    if found is None:
        return False
    kernel, threads, gemm = found
    L, E = q.shape[-2:]
    S, Ev = v.shape[-2:]
    inside = heads_inside and len(batch) >= 2 and all(need) and L == S
    results = (batch, (q.shape[-2:], k.shape[-2:], v.shape[-2:]), need, dtype, inside)
    grads = _backward_grads(*results)
    stand = [gr if gr is not None else weights for gr in grads]
    table = _offsets(batch, [g, q, k, v, weights] + stand)
    items = table.shape[0]
    if items * L * S * (2 * E + 2 * Ev) < MIN_PARALLEL:
        threads = 1
    bits = sum(1 << i for i, n in enumerate(need) if n)
    params = np.array([1, threads, items, L, S, E, Ev, gemm, _scale_bits(scale), bits,
                       _row_stride(g), _row_stride(q), _row_stride(k), _row_stride(v),
                       *[0 if gr is None else _row_stride(gr) for gr in grads],
                       0, 0, 0, 0, 0, 0, 0, 0, address(table)], dtype=np.int64)
    return kernel, params, results, table


def backward(g, q, k, v, weights, scale: float, need: tuple, heads_inside: bool = False):
    """(gq, gk, gv) of the attention (None for those not in ``need``) for the output
    gradient ``g`` (batch + (L, Ev)) and the forward's ``weights`` (batch + (L, S),
    contiguous), or None where this path does not apply. ``heads_inside``: the
    gradients laid out as :func:`_heads_inside` lays them (side by side where all three
    are needed and of one size). Planned once per layout, as :func:`forward`."""
    if not _fits((g, q, k, v, weights)):
        return None
    key = _key((g, q, k, v, weights)) + (scale, need, heads_inside)
    plan = _BACKWARD_PLANS.get(key, g, q, k, v, weights, scale, need, heads_inside)
    if plan is False:
        return None
    kernel, template, results, _ = plan
    grads = _backward_grads(*results)
    params = template.copy()
    params[17:25] = (address(g), address(q), address(k), address(v), address(weights),
                     *[0 if gr is None else address(gr) for gr in grads])
    kernel(address(params))
    return None if params[1] else tuple(grads)


_FORWARD_PLANS = Plans(_forward_plan, 256)
_BACKWARD_PLANS = Plans(_backward_plan, 256)
_PID = os.getpid()


__all__ = ["forward", "backward", "MIN_PARALLEL"]
