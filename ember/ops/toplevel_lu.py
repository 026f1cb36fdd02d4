"""PyTorch's older LU interface at the top level: ``lu`` (the packed factors, with
``infos`` instead of an error for a singular matrix) and ``lu_unpack``, written with
:mod:`ember.ops.linalg_more`'s factorisation and existing ops, so they differentiate and
trace under ``ember.jit`` (the pivots become a permutation through tensor ops, not by
reading their values); ``lu_solve`` is :mod:`ember.ops.linalg_solvers`'.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..errors import EmberTypeError, ShapeError
from ..tensor import Tensor
from . import elementwise as ew
from .creation import arange, eye, zeros
from .linalg_decomp import check_matrices
from . import linalg_solvers
from .linalg_more import _LU, _check_lu
from .movement import tril, triu
from .reduce import argmax
from .registry import apply
from .selection import gather
from .shape import cat, narrow

__all__ = ["lu", "lu_unpack", "lu_solve"]

# ``lu_solve(b, LU_data, LU_pivots)``: one implementation, beside ``linalg.lu_solve``
lu_solve = linalg_solvers.lu_solve


def _tensor(name: str, value, arg: str) -> Tensor:
    if not isinstance(value, Tensor):
        raise EmberTypeError(f"{name}: argument '{arg}' must be a Tensor, not "
                             f"{type(value).__name__}")
    return value


def _pack_lu(L: Tensor, U: Tensor) -> Tensor:
    """L (below its unit diagonal) and U in one ``m x n`` matrix, as LAPACK's getrf."""
    m, n = L.shape[-2], U.shape[-1]
    k = min(m, n)
    strict = tril(L, -1)
    if m > n:  # U (n x n) over the top of L (m x n)
        return strict + cat([U, narrow(L, -2, n, m - n) * 0.0], -2)
    return U + cat([strict, narrow(U, -1, k, n - k) * 0.0], -1)


def lu(A: Tensor, pivot: bool = True, get_infos: bool = False):
    """The LU factorisation of ``A`` packed as LAPACK's ``getrf`` gives it (PyTorch's
    older interface; prefer :func:`ember.linalg.lu_factor`).

    Unlike :func:`ember.linalg.lu_factor` a singular matrix is no error: its ``info``
    says where the zero pivot is.

    Args:
        A: ``(*, m, n)`` floating matrices.
        pivot: partial pivoting (the only kind supported on the CPU).
        get_infos: also return ``infos``.

    Returns: ``(A_LU, pivots)`` or ``(A_LU, pivots, infos)``: ``A_LU`` ``(*, m, n)``
    with ``L`` below the diagonal (its unit diagonal implied) and ``U`` on and above it,
    ``pivots`` ``(*, min(m, n))`` 1-based int32 row interchanges, ``infos`` ``(*)``
    int32: 0, or ``i`` where ``U[i-1, i-1]`` is the first zero on ``U``'s diagonal.

    >>> A_LU, pivots = ember.lu(ember.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> pivots
    tensor([2, 2], dtype=ember.int32)
    """
    _check_lu("lu", _tensor("lu", A, "A"), pivot)
    _, L, U, pivots = apply(_LU, A)
    packed = _pack_lu(L, U)
    if not get_infos:
        return packed, pivots
    zero = U.detach().diagonal(0, -2, -1) == 0
    if zero.shape[-1] == 0:
        return packed, pivots, zeros(tuple(zero.shape[:-1]), dtype=dt.int32, device=A.device)
    first = ew.cast(argmax(ew.cast(zero, dt.int32), -1), dt.int32) + 1
    return packed, pivots, ew.where(zero.any(-1), first, first * 0)


def _permutation(pivots: Tensor, m: int, dtype) -> Tensor:
    """The ``m x m`` matrices P with ``A = P L U`` from getrf's ``pivots``: the row
    swaps applied in order to ``0 .. m-1`` give the rows of ``A`` in ``P^T A``."""
    batch = tuple(pivots.shape[:-1])
    rows = arange(m, device=pivots.device)
    perm = arange(m, device=pivots.device).expand(*batch, m)
    swap = ew.cast(pivots, dt.int64) - 1
    for i in range(pivots.shape[-1]):
        p = narrow(swap, -1, i, 1)  # (*, 1)
        index = rows + ew.cast(rows == i, dt.int64) * (p - i) + \
            ew.cast(rows == p, dt.int64) * (i - p)
        perm = gather(perm, -1, index)
    # P[r, j] = 1 where perm[j] == r
    return ew.cast(perm.unsqueeze(-2) == rows.unsqueeze(-1), dtype)


def _check_lu_data(name, LU_data, LU_pivots):
    _tensor(name, LU_data, "LU_data")
    _tensor(name, LU_pivots, "LU_pivots")
    check_matrices(name, LU_data, square=False)
    k = min(LU_data.shape[-2], LU_data.shape[-1])
    if LU_pivots.dtype is not dt.int32:
        raise EmberTypeError(f"{name}: LU_pivots must be int32 (as lu and "
                             f"linalg.lu_factor give them), got {LU_pivots.dtype.name}")
    if tuple(LU_pivots.shape) != tuple(LU_data.shape[:-2]) + (k,):
        raise ShapeError(f"{name}: LU_pivots of shape {tuple(LU_pivots.shape)} do not fit "
                         f"LU_data of shape {tuple(LU_data.shape)}: expected "
                         f"{tuple(LU_data.shape[:-2]) + (k,)}")


def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True,
              unpack_pivots: bool = True):
    """``(P, L, U)`` with ``A = P @ L @ U`` from the packed factors :func:`lu` or
    :func:`ember.linalg.lu_factor` give.

    Args:
        LU_data: ``(*, m, n)`` packed factors.
        LU_pivots: ``(*, min(m, n))`` int32 1-based row interchanges.
        unpack_data: return ``L`` and ``U`` (else empty tensors in their place).
        unpack_pivots: return ``P`` (else an empty tensor in its place).

    Returns: ``P`` ``(*, m, m)``, ``L`` ``(*, m, k)`` unit lower triangular, ``U``
    ``(*, k, n)`` upper triangular, ``k = min(m, n)``; ``L`` and ``U`` differentiate
    with respect to ``LU_data``.

    >>> P, L, U = ember.lu_unpack(*ember.lu(ember.tensor([[1.0, 2.0], [3.0, 4.0]])))
    >>> P
    tensor([[0., 1.],
            [1., 0.]])
    """
    name = "lu_unpack"
    _check_lu_data(name, LU_data, LU_pivots)
    m, n = LU_data.shape[-2], LU_data.shape[-1]
    k = min(m, n)
    empty = LU_data.detach().reshape(-1)[:0]
    if unpack_data:
        L = tril(narrow(LU_data, -1, 0, k), -1) + eye(m, k, dtype=LU_data.dtype,
                                                       device=LU_data.device)
        U = triu(narrow(LU_data, -2, 0, k))
    else:
        L = U = empty
    P = _permutation(LU_pivots, m, LU_data.dtype) if unpack_pivots else empty
    return P, L, U
