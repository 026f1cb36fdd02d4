"""``torch.linalg``'s ``*_ex`` functions, which report failure in an ``info`` tensor
instead of raising (``inv_ex``, ``solve_ex``, ``cholesky_ex``, ``lu_factor_ex``), and
``cond``, the condition number.

``info`` is LAPACK's: 0 for a matrix that was factored, else the 1-based index of the
first zero pivot of its partially pivoted LU (``inv_ex``, ``solve_ex``, ``lu_factor_ex``)
or the order of its first leading minor that is not positive-definite
(``cholesky_ex``); it has the shape of the batch dims of ``A`` and dtype int32. Results
for the failed matrices are NaN (PyTorch's hold whatever LAPACK left). Each function is
a composition: the failed matrices are swapped for the identity before the
differentiable ``inv``/``solve``/``cholesky`` runs, so gradients (of gradients too) and
``ember.jit`` come for free; ``check_errors=True`` reads ``info`` and so cannot be traced.
"""
from __future__ import annotations

import collections
import math

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, ShapeError
from ..ops import elementwise as ew, logical as lg
from ..ops.creation import eye
from ..ops.linalg_decomp import LinAlgError, check_matrices, cholesky, inv, solve, svdvals
from ..ops.linalg_extra import matrix_norm
from ..ops.linalg_more import _LU, _lu_forward
from ..ops.movement import tril
from ..ops.reduce import amax, amin
from ..ops.registry import AbstractValue, apply, register
from ..ops.shape import cat, narrow, unsqueeze

__all__ = ["inv_ex", "solve_ex", "cholesky_ex", "lu_factor_ex", "cond"]

inv_ex_result = collections.namedtuple("inv_ex", ["inverse", "info"])
solve_ex_result = collections.namedtuple("solve_ex", ["result", "info"])
cholesky_ex_result = collections.namedtuple("cholesky_ex", ["L", "info"])
lu_factor_ex_result = collections.namedtuple("lu_factor_ex", ["LU", "pivots", "info"])


def _first_true(xp, flags):
    """1 + the index of the first True along the last axis, 0 where there is none."""
    first = xp.argmax(flags, axis=-1) + 1
    return xp.where(flags.any(axis=-1), first, 0).astype(np.int32)


def _lu_info_forward(xp, a):
    if min(a.shape[-2:]) == 0:
        return xp.zeros(a.shape[:-2], np.int32)
    _, _, U, _ = _lu_forward(xp, a)
    return _first_true(xp, xp.diagonal(U, axis1=-2, axis2=-1) == 0)


def _cholesky_info_forward(xp, a):
    """The order of the first leading minor that is not positive-definite (0: none),
    by an unblocked Cholesky on the lower triangle."""
    n = a.shape[-1]
    flat = a.reshape(-1, n, n).astype(np.float64)
    L = xp.zeros_like(flat)
    info = xp.zeros(flat.shape[0], np.int32)
    for j in range(n):
        row = L[:, j, :j]
        d = flat[:, j, j] - xp.einsum("bk,bk->b", row, row)
        bad = ~(d > 0)
        info = xp.where((info == 0) & bad, j + 1, info)
        pivot = xp.sqrt(xp.where(bad, 1.0, d))
        L[:, j, j] = pivot
        below = flat[:, j + 1:, j] - xp.einsum("bik,bk->bi", L[:, j + 1:, :j], row)
        L[:, j + 1:, j] = below / pivot[:, None]
    return info.reshape(a.shape[:-2])


_info_infer = lambda a: AbstractValue(a.shape[:-2], dt.int32)  # noqa: E731
_LU_INFO = register("linalg_lu_info", _lu_info_forward, infer=_info_infer)
_CHOLESKY_INFO = register("linalg_cholesky_info", _cholesky_info_forward, infer=_info_infer)


def _failed(info):
    return lg.gt(info, 0)


def _as_matrix_mask(mask):
    return unsqueeze(unsqueeze(mask, -1), -1)


def _safe(A, failed):
    """``A`` with each failed matrix replaced by the identity."""
    identity = eye(A.shape[-1], dtype=A.dtype, device=A.device)
    return ew.where(_as_matrix_mask(failed), identity, A)


def _raise_for(name, info, message):
    """LinAlgError for the first failed matrix (``message(value)`` says why)."""
    values = info.detach().numpy()
    if not (values > 0).any():
        return
    where = np.argwhere(values > 0)[0] if values.ndim else ()
    value = int(values[tuple(where)])
    batch = f"(Batch element {int(np.ravel_multi_index(tuple(where), values.shape))}): " \
        if values.ndim else ""
    raise LinAlgError(f"{name}: {batch}{message(value)}")


def inv_ex(A, *, check_errors: bool = False):
    """``(inverse, info)``: :func:`ember.linalg.inv` of each square matrix of ``A``
    (``(*, n, n)``) without raising for singular ones, whose ``info`` (``(*)``, int32) is
    the 1-based index of the zero pivot of their LU (their inverse is NaN). With
    ``check_errors=True`` a singular matrix raises :class:`LinAlgError`.

    >>> ember.linalg.inv_ex(ember.tensor([[2.0, 0.0], [0.0, 0.0]])).info
    tensor(2, dtype=ember.int32)
    """
    check_matrices("linalg.inv_ex", A)
    info = apply(_LU_INFO, A)
    if check_errors:
        _raise_for("linalg.inv_ex", info, lambda v: (
            f"The diagonal element {v} is zero, the inversion could not be completed because "
            f"the input matrix is singular."))
    failed = _failed(info)
    inverse = ew.where(_as_matrix_mask(failed), math.nan, inv(_safe(A, failed)))
    return inv_ex_result(inverse, info)


def solve_ex(A, B, *, left: bool = True, check_errors: bool = False):
    """``(result, info)``: :func:`ember.linalg.solve` without raising for singular
    ``A``; ``info`` (``A``'s batch shape, int32) is 0 where ``A`` was factored, else the
    1-based index of the zero pivot of its LU (the result there is NaN). With
    ``check_errors=True`` a singular matrix raises :class:`LinAlgError`.

    >>> A = ember.tensor([[2.0, 0.0], [0.0, 4.0]])
    >>> ember.linalg.solve_ex(A, ember.tensor([2.0, 8.0]))
    solve_ex(result=tensor([1., 2.]), info=tensor(0, dtype=ember.int32))
    """
    check_matrices("linalg.solve_ex", A)
    info = apply(_LU_INFO, A)
    if check_errors:
        _raise_for("linalg.solve_ex", info,
                   lambda v: "The solver failed because the input matrix is singular.")
    failed = _failed(info)
    X = solve(_safe(A, failed), B, left=left)
    vector = X.ndim == A.ndim - 1 or B.ndim == 1
    mask = unsqueeze(failed, -1) if vector else _as_matrix_mask(failed)
    return solve_ex_result(ew.where(mask, math.nan, X), info)


def cholesky_ex(A, *, upper: bool = False, check_errors: bool = False):
    """``(L, info)``: :func:`ember.linalg.cholesky` without raising for matrices that are
    not positive-definite, whose ``info`` (``(*)``, int32) is the order of the first
    leading minor that is not (their ``L`` is NaN). Reads the lower triangle of ``A``.
    With ``check_errors=True`` such a matrix raises :class:`LinAlgError`.

    >>> ember.linalg.cholesky_ex(ember.tensor([[1.0, 2.0], [2.0, 1.0]])).info
    tensor(2, dtype=ember.int32)
    """
    check_matrices("linalg.cholesky_ex", A)
    info = apply(_CHOLESKY_INFO, A)
    if check_errors:
        _raise_for("linalg.cholesky_ex", info, lambda v: (
            f"The factorization could not be completed because the input is not "
            f"positive-definite (the leading minor of order {v} is not positive-definite)."))
    failed = _failed(info)
    L = cholesky(_safe(A, failed), upper=upper)
    return cholesky_ex_result(ew.where(_as_matrix_mask(failed), math.nan, L), info)


def lu_factor_ex(A, *, pivot: bool = True, check_errors: bool = False):
    """``(LU, pivots, info)``: :func:`ember.linalg.lu_factor` without raising where ``U``
    has a zero on its diagonal; ``info`` (``(*)``, int32) is the 1-based index of the first
    such zero, 0 where there is none. Differentiable in ``A`` as ``lu_factor``.

    >>> ember.linalg.lu_factor_ex(ember.tensor([[1.0, 2.0], [2.0, 4.0]])).info
    tensor(2, dtype=ember.int32)
    """
    name = "linalg.lu_factor_ex"
    check_matrices(name, A, square=False)
    if not pivot:
        raise NotImplementedError(f"{name}: LU without pivoting is not implemented on the "
                                  f"CPU (PyTorch supports it only on CUDA)")
    _, L, U, pivots = apply(_LU, A)
    info = apply(_LU_INFO, A)
    m, n = A.shape[-2], A.shape[-1]
    k = min(m, n)
    if check_errors:
        _raise_for(name, info, lambda v: (
            f"U[{v},{v}] is zero and using it on lu_solve would result in a division by "
            f"zero. If you still want to perform the factorization, consider calling "
            f"linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)"))
    strict = tril(L, -1)
    if m > n:  # U (n x n) packed over the top of L (m x n)
        packed = strict + cat([U, narrow(L, -2, n, m - n) * 0.0], -2)
    else:  # L (m x m) packed into the left of U (m x n)
        packed = U + cat([strict, narrow(U, -1, k, n - k) * 0.0], -1)
    return lu_factor_ex_result(packed, pivots, info)


# cond ----------------------------------------------------------------------------------------
_NORM_ORDERS = ("fro", "nuc", math.inf, -math.inf, 1, -1)


def cond(A, p=None):
    """The condition number of each matrix of ``A`` in the norm ``p``:
    ``sigma_max / sigma_min`` for ``p`` None or 2 (``sigma_min / sigma_max`` for -2),
    from the singular values (any ``(*, m, n)``); for ``"fro"``, ``"nuc"``, ``inf``,
    ``-inf``, 1 and -1, ``matrix_norm(A, p) * matrix_norm(inv(A), p)`` of square
    matrices, ``inf`` for singular ones (``"nuc"``, like PyTorch's, from the singular
    values: NaN for a zero matrix). Differentiable.

    >>> ember.linalg.cond(ember.tensor([[1.0, 0.0], [0.0, 4.0]]))
    tensor(4.)
    """
    name = "linalg.cond"
    check_matrices(name, A, square=False)
    if p not in (None, 2, -2) + _NORM_ORDERS or isinstance(p, bool):
        raise EmberError(f"{name} got an invalid norm type: {p}")
    if p in (None, 2, -2):
        if A.shape[-1] == 0 or A.shape[-2] == 0:
            return A.sum((-2, -1)) * 0.0
        s = svdvals(A)
        big, small = amax(s, -1), amin(s, -1)
        return small / big if p == -2 else big / small
    if A.shape[-1] != A.shape[-2]:
        raise ShapeError(f"{name}(ord={p}): A must be batches of square matrices, but they "
                         f"are {A.shape[-2]} by {A.shape[-1]} matrices")
    if A.shape[-1] == 0:
        return A.sum((-2, -1)) * 0.0
    if p == "nuc":  # (PyTorch's too: from the singular values, finite for rounded ones)
        s = svdvals(A)
        return s.sum(-1) * (1.0 / s).sum(-1)
    failed = _failed(apply(_LU_INFO, A))
    value = matrix_norm(A, p) * matrix_norm(inv(_safe(A, failed)), p)
    return ew.where(failed, math.inf, value)
