"""``linalg.ldl_factor_ex``, ``linalg.ldl_factor`` and ``linalg.ldl_solve``: the
Bunch-Kaufman factorization ``A = P L D L^T P^T`` of symmetric matrices (LAPACK's
``sytrf`` with the lower triangle) and solving with it (``sytrs``).

``L`` is unit lower triangular and ``D`` block diagonal with 1x1 and 2x2 blocks; both are
packed into ``LD`` as LAPACK packs them, and ``pivots`` holds its 1-based interchanges
(a positive ``p`` at ``k``: row ``k`` was swapped with ``p``; ``-p`` at ``k`` and ``k + 1``:
a 2x2 block whose second row was swapped with ``p``). The pivot choice is Bunch and
Kaufman's partial pivoting with ``alpha = (1 + sqrt(17)) / 8``, column by column (LAPACK
factors panels of 64 columns at a time, which rounds differently but chooses the same
pivots). As in PyTorch there is no gradient; only the lower triangle of ``A`` is read,
and ``hermitian`` changes nothing for real matrices.
"""
from __future__ import annotations

import collections
import math

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, EmberTypeError, ShapeError
from ..ops.linalg_decomp import LinAlgError, check_matrices
from ..ops.registry import AbstractValue, apply, register
from ..ops.shape import expand
from ..tensor import Tensor

__all__ = ["ldl_factor_ex", "ldl_factor", "ldl_solve"]

ldl_factor_ex_result = collections.namedtuple("ldl_factor_ex", ["LD", "pivots", "info"])
ldl_factor_result = collections.namedtuple("ldl_factor", ["LD", "pivots"])

_ALPHA = (1.0 + math.sqrt(17.0)) / 8.0


def _swap_symmetric(a, i, j):
    """Swap rows and columns i < j of the symmetric matrix held in a's lower triangle,
    for the trailing part from row/column i on."""
    a[j + 1:, [i, j]] = a[j + 1:, [j, i]]
    between = np.arange(i + 1, j)
    a[between, i], a[j, between] = a[j, between].copy(), a[between, i].copy()
    a[i, i], a[j, j] = a[j, j], a[i, i]


def _bunch_kaufman(a):
    """Factor one float64 matrix in place (lower triangle); returns (pivots, info)."""
    n = a.shape[0]
    pivots = np.zeros(n, np.int32)
    info = 0
    k = 0
    while k < n:
        step = 1
        diag = abs(a[k, k])
        if k + 1 < n:
            imax = k + 1 + int(np.argmax(np.abs(a[k + 1:, k])))
            colmax = abs(a[imax, k])
        else:
            imax, colmax = k, 0.0
        if max(diag, colmax) == 0.0 or math.isnan(diag):
            if info == 0:
                info = k + 1
            pivots[k] = k + 1
            k += 1
            continue
        if diag >= _ALPHA * colmax:
            kp = k
        else:
            rowmax = float(np.max(np.abs(a[imax, k:imax])))
            if imax + 1 < n:
                rowmax = max(rowmax, float(np.max(np.abs(a[imax + 1:, imax]))))
            if diag >= _ALPHA * colmax * (colmax / rowmax):
                kp = k
            elif abs(a[imax, imax]) >= _ALPHA * rowmax:
                kp = imax
            else:
                kp, step = imax, 2
        kk = k + step - 1
        if kp != kk:
            _swap_symmetric(a, kk, kp)
            if step == 2:
                a[k + 1, k], a[kp, k] = a[kp, k], a[k + 1, k]
        if step == 1:
            if k + 1 < n:
                column = a[k + 1:, k] / a[k, k]
                a[k + 1:, k + 1:] -= np.tril(np.outer(column, a[k + 1:, k]))
                a[k + 1:, k] = column
            pivots[k] = kp + 1
        else:
            if k + 2 < n:
                d21 = a[k + 1, k]
                d11 = a[k + 1, k + 1] / d21
                d22 = a[k, k] / d21
                scale = 1.0 / (d11 * d22 - 1.0) / d21
                first, second = a[k + 2:, k].copy(), a[k + 2:, k + 1].copy()
                wk = scale * (d11 * first - second)
                wk1 = scale * (d22 * second - first)
                a[k + 2:, k + 2:] -= np.tril(np.outer(first, wk) + np.outer(second, wk1))
                a[k + 2:, k], a[k + 2:, k + 1] = wk, wk1
            pivots[k] = pivots[k + 1] = -(kp + 1)
        k += step
    return pivots, info


def _host(a):
    """A float64 NumPy copy of an array of any backend (the pivoting runs on the host)."""
    get = getattr(a, "get", None)
    return np.array(get() if get is not None else a, dtype=np.float64)


def _ldl_factor_forward(xp, a, hermitian):
    n = a.shape[-1]
    flat = _host(a).reshape(-1, n, n)
    piv = np.zeros((flat.shape[0], n), np.int32)
    info = np.zeros(flat.shape[0], np.int32)
    for b in range(flat.shape[0]):
        work = np.tril(flat[b])
        piv[b], info[b] = _bunch_kaufman(work)
        flat[b] = np.tril(work)
    batch = a.shape[:-2]
    return (xp.asarray(flat.reshape(a.shape).astype(a.dtype)),
            xp.asarray(piv.reshape(batch + (n,))), xp.asarray(info.reshape(batch)))


_LDL_FACTOR = register(
    "linalg_ldl_factor", _ldl_factor_forward, n_outputs=3,
    infer=lambda a, hermitian: (AbstractValue(a.shape, a.dtype),
                                AbstractValue(a.shape[:-1], dt.int32),
                                AbstractValue(a.shape[:-2], dt.int32)))


def ldl_factor_ex(A, *, hermitian: bool = False, check_errors: bool = False):
    """``(LD, pivots, info)``: the Bunch-Kaufman factorization ``A = P L D L^T P^T`` of
    each symmetric matrix of ``A`` (``(*, n, n)``, lower triangle read), packed as LAPACK's
    ``sytrf`` packs it (see the module's notes). ``info`` (``(*)``, int32) is 0, or the
    1-based index of a zero diagonal block of ``D`` (the factorization is then complete
    but ``D`` singular). ``check_errors=True`` raises :class:`LinAlgError` for those.

    >>> LD, pivots, info = ember.linalg.ldl_factor_ex(ember.tensor([[4.0, 2.0], [2.0, 3.0]]))
    >>> LD
    tensor([[4.0000, 0.0000],
            [0.5000, 2.0000]])
    """
    name = "linalg.ldl_factor_ex"
    check_matrices(name, A)
    LD, pivots, info = apply(_LDL_FACTOR, A, hermitian=bool(hermitian))
    if check_errors:
        _raise_singular(name, info)
    return ldl_factor_ex_result(LD, pivots, info)


def _raise_singular(name, info):
    values = info.numpy()
    if (values > 0).any():
        where = tuple(np.argwhere(values > 0)[0]) if values.ndim else ()
        batch = f"(Batch element {int(np.ravel_multi_index(where, values.shape))}): " \
            if values.ndim else ""
        v = int(values[where])
        raise LinAlgError(f"{name}: {batch}The factorization could not be completed: D[{v},{v}]"
                          f" is zero, so the matrix is singular")


def ldl_factor(A, *, hermitian: bool = False):
    """``(LD, pivots)`` of :func:`ldl_factor_ex`, raising :class:`LinAlgError` where
    ``D`` is singular.

    >>> ember.linalg.ldl_factor(ember.tensor([[0.0, 1.0], [1.0, 0.0]])).pivots
    tensor([-2, -2], dtype=ember.int32)
    """
    name = "linalg.ldl_factor"
    check_matrices(name, A)
    LD, pivots, info = apply(_LDL_FACTOR, A, hermitian=bool(hermitian))
    _raise_singular(name, info)
    return ldl_factor_result(LD, pivots)


# ldl_solve ----------------------------------------------------------------------------------
def _swap_rows(b, i, j):
    if i != j:
        b[[i, j]] = b[[j, i]]


def _solve_one(a, piv, b):
    """Solve with one packed factorization (``b`` is n x k, overwritten)."""
    n = a.shape[0]
    k = 0
    while k < n:  # L D Y = P^T B
        if piv[k] > 0:
            _swap_rows(b, k, piv[k] - 1)
            b[k + 1:] -= np.outer(a[k + 1:, k], b[k])
            b[k] /= a[k, k]
            k += 1
        else:
            _swap_rows(b, k + 1, -piv[k] - 1)
            b[k + 2:] -= np.outer(a[k + 2:, k], b[k]) + np.outer(a[k + 2:, k + 1], b[k + 1])
            off = a[k + 1, k]
            d11, d22 = a[k, k] / off, a[k + 1, k + 1] / off
            denom = d11 * d22 - 1.0
            b1, b2 = b[k] / off, b[k + 1] / off
            b[k], b[k + 1] = (d22 * b1 - b2) / denom, (d11 * b2 - b1) / denom
            k += 2
    k = n - 1
    while k >= 0:  # L^T P^T X = Y
        if piv[k] > 0:
            b[k] -= a[k + 1:, k] @ b[k + 1:]
            _swap_rows(b, k, piv[k] - 1)
            k -= 1
        else:
            b[k] -= a[k + 1:, k] @ b[k + 1:]
            b[k - 1] -= a[k + 1:, k - 1] @ b[k + 1:]
            _swap_rows(b, k, -piv[k] - 1)
            k -= 2
    return b


def _ldl_solve_forward(xp, ld, pivots, b, hermitian):
    n = ld.shape[-1]
    ld64 = _host(ld).reshape(-1, n, n)
    piv = _host(pivots).astype(np.int64).reshape(-1, n)
    rhs = _host(b).reshape((-1,) + b.shape[-2:])
    for i in range(rhs.shape[0]):
        _solve_one(ld64[i], piv[i], rhs[i])
    return xp.asarray(rhs.reshape(b.shape).astype(b.dtype))


_LDL_SOLVE = register("linalg_ldl_solve", _ldl_solve_forward,
                      infer=lambda ld, p, b, hermitian: AbstractValue(b.shape, b.dtype))


def ldl_solve(LD, pivots, B, *, hermitian: bool = False):
    """The solution ``X`` of ``A X = B`` from :func:`ldl_factor`'s ``LD`` and ``pivots``;
    ``B`` is ``(*, n, k)`` and the batch dims broadcast. No gradient, as in PyTorch.

    >>> A = ember.tensor([[4.0, 2.0], [2.0, 3.0]])
    >>> LD, pivots = ember.linalg.ldl_factor(A)
    >>> ember.linalg.ldl_solve(LD, pivots, ember.tensor([[6.0], [5.0]]))
    tensor([[1.],
            [1.]])
    """
    name = "linalg.ldl_solve"
    check_matrices(name, LD)
    if not isinstance(pivots, Tensor) or pivots.dtype is not dt.int32:
        got = pivots.dtype.name if isinstance(pivots, Tensor) else type(pivots).__name__
        raise EmberTypeError(f"{name}: pivots should be a Tensor of scalar type int32, got "
                             f"{got}")
    if not isinstance(B, Tensor) or B.ndim < 2:
        raise ShapeError(f"{name}: B should have at least 2 dimensions")
    if B.dtype is not LD.dtype:
        raise EmberTypeError(f"{name}: Expected LD and B to have the same dtype, but got "
                             f"{LD.dtype.name} and {B.dtype.name}")
    n = LD.shape[-1]
    if tuple(pivots.shape) != tuple(LD.shape[:-1]):
        raise ShapeError(f"{name}: Expected LD.shape[:-1] and pivots.shape to be the same, "
                         f"but got pivots with shape {tuple(pivots.shape)} instead")
    if B.shape[-2] != n:
        raise ShapeError(f"{name}: Incompatible shapes of A and B for the equation AX = B "
                         f"({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    piv = pivots.numpy()
    if piv.size and (np.abs(piv).min() < 1 or np.abs(piv).max() > n):
        raise EmberError(f"{name}: pivots must be between 1 and {n} in absolute value")
    try:
        batch = tuple(np.broadcast_shapes(tuple(LD.shape[:-2]), tuple(B.shape[:-2])))
    except ValueError:
        raise ShapeError(f"{name}: the batch dims of LD {tuple(LD.shape)} and B "
                         f"{tuple(B.shape)} cannot be broadcast together") from None
    LD = expand(LD, batch + (n, n))
    pivots = expand(pivots, batch + (n,))
    B = expand(B, batch + tuple(B.shape[-2:]))
    return apply(_LDL_SOLVE, LD, pivots, B, hermitian=bool(hermitian))
