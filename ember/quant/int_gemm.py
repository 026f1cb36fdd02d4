"""Exact integer matrix products on float BLAS.

NumPy has no int8 BLAS: ``np.matmul`` on integers runs a plain loop, tens of times
slower than BLAS. But a product of small integers is exact in floating point as long as
every partial sum is: with ``|a| <= A`` and ``|b| <= B`` over ``K`` terms, ``K * A * B``
below 2**24 makes float32 GEMM exact, below 2**53 float64. So the integers are carried
in the narrowest float type that is exact for the shape and the value bounds, multiplied
by BLAS, and the result converted to int32: bit for bit the int32 accumulation an int8
kernel would compute (tests compare it with an int64 NumPy reference).
"""
from __future__ import annotations

import numpy as np

from ..errors import EmberValueError

__all__ = ["exact_float_dtype", "int_matmul", "uint8_rows_product"]

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


def int_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` as int32, exact, where ``a`` and ``b`` hold integer values (in any
    integer or float dtype) already of the float dtype :func:`exact_float_dtype` chose."""
    return np.rint(np.matmul(a, b)).astype(np.int32)


def uint8_rows_product(x: np.ndarray, x_zero_point: int, packed) -> np.ndarray:
    """``sum_k (x[m, k] - x_zp) * (w[n, k] - w_zp[n])`` as int32 ``(M, N)`` for uint8
    rows ``x`` and a :class:`~ember.quant.weights.PackedWeight`: on the CPU's int8
    dot-product instructions where it has them (:mod:`ember.quant.int8_gemm`), else
    exactly on float BLAS; the same integers either way."""
    if packed.int8 is not None:
        acc = int8_gemm.accumulate(x, x_zero_point, packed.int8)
        if acc is not None:
            return acc
    centred = x.astype(packed.dtype) - packed.dtype.type(x_zero_point)
    return int_matmul(centred, packed.matrix)


from . import int8_gemm  # noqa: E402
