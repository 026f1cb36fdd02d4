"""Solving with a factorization already made: ``cholesky_solve`` and ``cholesky_inverse``
(from a Cholesky factor), ``linalg.lu_solve`` and the older ``lu_solve`` (from
``linalg.lu_factor``'s packed LU and pivots). Batch dims broadcast.

All are composites of ``linalg.solve`` on the triangular factors, so gradients (of
gradients too) and ``ember.jit`` come for free. The Cholesky factor's value is read from
its triangle only, but its gradient is taken as if every entry were used, as PyTorch's
formula gives it (``-(Y X^T + X Y^T) L`` for ``cholesky_solve``, with ``Y = A^-1 G``).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, EmberTypeError, ShapeError
from ..tensor import Tensor
from .creation import eye
from .linalg_decomp import check_matrices, solve
from .movement import tril, triu
from .registry import AbstractValue, apply, register
from .selection import argsort, gather
from .shape import expand, unsqueeze

__all__ = ["cholesky_solve", "cholesky_inverse", "lu_solve", "linalg_lu_solve"]


def _check_rhs(name: str, A, B, what: str = "b") -> None:
    if not isinstance(B, Tensor):
        raise EmberTypeError(f"{name}: expected {what} to be a Tensor, got {type(B).__name__}")
    if B.ndim < 2:
        raise ShapeError(f"{name}: {what} should have at least 2 dimensions, but has "
                         f"{B.ndim} dimensions instead")
    if B.dtype is not A.dtype:
        raise EmberTypeError(f"{name}: Expected {what} and A to have the same dtype, but "
                             f"found {what} of type {B.dtype.name} and A of type "
                             f"{A.dtype.name} instead.")


def _batch(name: str, *shapes) -> tuple:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(f"{name}: the batch dims {' and '.join(map(str, shapes))} cannot be "
                         f"broadcast together") from None


def _triangle_valued(L, upper: bool):
    """``L``'s triangle as the value, but a gradient for every entry of ``L``."""
    other = tril(L, -1) if upper else triu(L, 1)
    return L - other.detach()


# cholesky_solve / cholesky_inverse -----------------------------------------------------------
def cholesky_solve(B, L, upper: bool = False):
    """The solution ``X`` of ``A X = B`` where ``A = L L^T`` (``A = U^T U`` with
    ``upper=True``), given the Cholesky factor ``L`` (``(*, n, n)``, only its lower or
    upper triangle read) and ``B`` of shape ``(*, n, k)``.

    >>> L = ember.tensor([[2.0, 0.0], [1.0, 1.0]])
    >>> ember.cholesky_solve(ember.tensor([[6.0], [4.0]]), L)
    tensor([[1.],
            [1.]])
    """
    check_matrices("cholesky_solve", L)
    _check_rhs("cholesky_solve", L, B)
    n = L.shape[-1]
    if B.shape[-2] != n:
        raise ShapeError(f"cholesky_solve: Incompatible matrix sizes for cholesky_solve: each "
                         f"A matrix is {n} by {n} but each b matrix is {B.shape[-2]} by "
                         f"{B.shape[-1]}")
    batch = _batch("cholesky_solve", tuple(L.shape[:-2]), tuple(B.shape[:-2]))
    T = expand(_triangle_valued(L, upper), batch + (n, n))
    B = expand(B, batch + tuple(B.shape[-2:]))
    first, second = (T.mH, T) if upper else (T, T.mH)  # (mH: the transpose of real ones)
    return solve(second, solve(first, B))


def cholesky_inverse(L, upper: bool = False):
    """The inverse of ``A = L L^T`` (``U^T U`` with ``upper=True``) from its Cholesky
    factor, for (batches of) square matrices.

    >>> ember.cholesky_inverse(ember.tensor([[2.0, 0.0], [0.0, 1.0]]))
    tensor([[0.2500, 0.0000],
            [0.0000, 1.0000]])
    """
    check_matrices("cholesky_inverse", L)
    n = L.shape[-1]
    identity = eye(n, dtype=L.dtype, device=L.device)
    return cholesky_solve(expand(identity, tuple(L.shape)), L, upper)


# lu_solve ------------------------------------------------------------------------------------
def _permutation_forward(xp, pivots):
    """LAPACK's row interchanges (1-based, applied in order) as the permutation ``p`` with
    ``(P^T B)[i] = B[p[i]]``."""
    n = pivots.shape[-1]
    flat = pivots.reshape(-1, n).astype(np.int64) - 1
    if flat.size and (int(flat.min()) < 0 or int(flat.max()) >= n):
        raise EmberError(f"linalg.lu_solve: pivots must be between 1 and {n} (LAPACK's "
                         f"1-based row interchanges), got values from {int(flat.min()) + 1} "
                         f"to {int(flat.max()) + 1}")
    perm = xp.broadcast_to(xp.arange(n, dtype=np.int64), flat.shape).copy()
    rows = xp.arange(flat.shape[0])
    for i in range(n):
        j = flat[:, i]
        perm[rows, i], perm[rows, j] = perm[rows, j], perm[rows, i]
    return perm.reshape(pivots.shape)


_PERMUTATION = register("lu_pivots_permutation", _permutation_forward, None,
                        infer=lambda p: AbstractValue(p.shape, dt.int64))


def _rows(B, perm):
    """``B[..., perm, :]`` for a batch of permutations (``B`` and ``perm`` batch-aligned)."""
    index = expand(unsqueeze(perm, -1), tuple(B.shape))
    return gather(B, -2, index)


def linalg_lu_solve(LU, pivots, B, *, left: bool = True, adjoint: bool = False):
    """The solution ``X`` of ``A X = B`` given ``linalg.lu_factor(A)``'s ``LU`` and
    ``pivots``; ``left=False`` solves ``X A = B`` and ``adjoint=True`` uses ``A^T``
    (``A^H``) in place of ``A``. ``LU`` is ``(*, n, n)``, ``pivots`` ``(*, n)`` int32 and
    ``B`` ``(*, n, k)`` (``(*, k, n)`` with ``left=False``); batch dims broadcast.

    >>> A = ember.tensor([[2.0, 1.0], [4.0, 3.0]])
    >>> LU, pivots = ember.linalg.lu_factor(A)
    >>> ember.linalg.lu_solve(LU, pivots, ember.tensor([[3.0], [7.0]]))
    tensor([[1.],
            [1.]])
    """
    name = "linalg.lu_solve"
    check_matrices(name, LU)
    if not isinstance(pivots, Tensor) or pivots.dtype is not dt.int32:
        got = pivots.dtype.name if isinstance(pivots, Tensor) else type(pivots).__name__
        raise EmberTypeError(f"{name}: pivots should be a Tensor of scalar type int32, got "
                             f"{got}")
    n = LU.shape[-1]
    if pivots.ndim < 1 or pivots.shape[-1] != n:
        raise ShapeError(f"{name}: pivots must have shape (*, {n}) for LU of shape "
                         f"{tuple(LU.shape)}, got {tuple(pivots.shape)}")
    if isinstance(B, Tensor) and B.ndim < 2:
        raise ShapeError(f"{name}: The input tensor B must have at least 2 dimensions.")
    _check_rhs(name, LU, B, "B")
    if not left:  # X A = B is A^T X^T = B^T (and X A^H = B is A X^T = B^T)
        return linalg_lu_solve(LU, pivots, B.mT, adjoint=not adjoint).mT
    if B.shape[-2] != n:
        raise ShapeError(f"{name}: Incompatible shapes of A and B for the equation AX = B "
                         f"({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    batch = _batch(name, tuple(LU.shape[:-2]), tuple(pivots.shape[:-1]), tuple(B.shape[:-2]))
    LU = expand(LU, batch + (n, n))
    B = expand(B, batch + tuple(B.shape[-2:]))
    perm = expand(apply(_PERMUTATION, pivots), batch + (n,))
    lower = tril(LU, -1) + eye(n, dtype=LU.dtype, device=LU.device)
    upper = triu(LU)
    if not adjoint:  # P L U X = B: X = U^-1 L^-1 P^T B
        return solve(upper, solve(lower, _rows(B, perm)))
    # U^T L^T P^T X = B: X = P L^-T U^-T B, and (P W)[p[i]] = W[i]
    W = solve(lower.mT, solve(upper.mT, B))
    return _rows(W, argsort(perm, -1))


def lu_solve(b, LU_data, LU_pivots):
    """The solution of ``A X = b`` from ``linalg.lu_factor(A)``; the older spelling of
    ``linalg.lu_solve(LU_data, LU_pivots, b)``.

    >>> A = ember.tensor([[2.0, 1.0], [4.0, 3.0]])
    >>> LU, pivots = ember.linalg.lu_factor(A)
    >>> ember.lu_solve(ember.tensor([[3.0], [7.0]]), LU, pivots)
    tensor([[1.],
            [1.]])
    """
    return linalg_lu_solve(LU_data, LU_pivots, b)
