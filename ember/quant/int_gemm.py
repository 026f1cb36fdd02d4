"""Exact integer matrix products on float BLAS.

NumPy has no int8 BLAS: ``np.matmul`` on integers runs a plain loop, tens of times
slower than BLAS. But a product of small integers is exact in floating point as long as
every partial sum is: with ``|a| <= A`` and ``|b| <= B`` over ``K`` terms, ``K * A * B``
below 2**24 makes float32 GEMM exact, below 2**53 float64. So the integers are carried
in the narrowest float type that is exact for the shape and the value bounds, multiplied
by BLAS (on ember's threads, :mod:`ember.backends.cpu_blas`), and the result converted
to int32: bit for bit the int32 accumulation an int8 kernel would compute (tests compare
it with an int64 NumPy reference).

Where float32 is not exact for the whole reduction (uint8 times int8 past about 514
terms), :func:`chunked_int_matmul` still multiplies in float32: ``K`` is split into
chunks short enough that each chunk's float32 product is exact, and the chunks' integer
products are added in int32. That is the same integers as one float64 GEMM, at about
half its cost (float32 BLAS runs twice the lanes and reads half the bytes).
"""
from __future__ import annotations

import numpy as np

from ..backends import cpu_blas
from ..errors import EmberValueError

__all__ = ["exact_float_dtype", "exact_float32_terms", "int_matmul", "chunked_int_matmul",
           "uint8_rows_product"]

_F32_EXACT = 2 ** 24
_F64_EXACT = 2 ** 53
_INT32_MAX = 2 ** 31 - 1


def exact_float_dtype(k: int, a_absmax: int, b_absmax: int) -> np.dtype:
    """The narrowest float dtype whose GEMM over ``k`` terms of integers bounded by
    ``a_absmax`` and ``b_absmax`` is exact and fits the int32 accumulator."""
    bound = int(k) * int(a_absmax) * int(b_absmax)
    if bound > _INT32_MAX:
        raise EmberValueError(f"int_matmul: {k} terms of integers up to {a_absmax} and "
                              f"{b_absmax} can reach {bound}, past the int32 accumulator "
                              f"(2**31 - 1); split the reduction")
    return np.dtype(np.float32) if bound < _F32_EXACT else np.dtype(np.float64)


def exact_float32_terms(a_absmax: int, b_absmax: int) -> int:
    """How many terms of integers bounded by ``a_absmax`` and ``b_absmax`` a float32 GEMM
    sums exactly (every partial sum below 2**24); 0 where not even one product is."""
    return (_F32_EXACT - 1) // max(int(a_absmax) * int(b_absmax), 1)


def int_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` as int32, exact, where ``a`` and ``b`` hold integer values (in any
    integer or float dtype) already of the float dtype :func:`exact_float_dtype` chose."""
    return np.rint(cpu_blas.matmul(a, b)).astype(np.int32)


def chunked_int_matmul(a: np.ndarray, b: np.ndarray, terms: int) -> np.ndarray:
    """``a @ b`` as int32, exact, for float32 ``a`` ``(M, K)`` and ``b`` ``(K, N)`` holding
    integers whose float32 sums over ``terms`` terms are exact
    (:func:`exact_float32_terms`): one float32 GEMM per chunk of ``K`` (chunks of equal
    length, at most ``terms``), each exact, their results added in int32."""
    k = a.shape[-1]
    if k == 0:
        return np.zeros(a.shape[:-1] + b.shape[-1:], np.int32)
    size = -(-k // -(-k // terms))  # ceil(K / chunks), chunks = ceil(K / terms)
    out = None
    for start in range(0, k, size):
        part = cpu_blas.matmul(a[..., start:start + size], b[..., start:start + size, :])
        if out is None:
            out = part.astype(np.int32)
        else:
            out += part.astype(np.int32)  # (wraps as an int32 accumulator would)
    return out


def uint8_rows_product(x: np.ndarray, x_zero_point: int, packed) -> np.ndarray:
    """``sum_k (x[m, k] - x_zp) * (w[n, k] - w_zp[n])`` as int32 ``(M, N)`` for uint8
    rows ``x`` and a :class:`~ember.quant.weights.PackedWeight`: on the CPU's int8
    dot-product instructions where it has them (:mod:`ember.quant.int8_gemm`), else
    exactly on float32 BLAS (in chunks of ``K`` where one float32 GEMM is not exact); the
    same integers either way."""
    if packed.int8 is not None:
        acc = int8_gemm.accumulate(x, x_zero_point, packed.int8)
        if acc is not None:
            return acc
    # (the weight as (C, K) rows, transposed: at batch 1 the driver's GEMV reads it)
    if packed.dtype == np.float64 and packed.float32_terms > 0:
        centred = x.astype(np.float32) - np.float32(x_zero_point)
        return chunked_int_matmul(centred, packed.rows32.T, packed.float32_terms)
    centred = x.astype(packed.dtype) - packed.dtype.type(x_zero_point)
    return int_matmul(centred, packed.row_major.T)


from . import int8_gemm  # noqa: E402
