"""More of ``torch.linalg``: solve_triangular, matrix_exp, lu_factor and lu, batched over
leading dims and differentiable as PyTorch's are.

``solve_triangular`` is a composite (``solve`` on the triangle it reads, so its gradient
is masked to that triangle). ``matrix_exp`` and ``lu`` are primitives: the exponential by
scaling and squaring of a degree-13 Padé approximant (Higham 2005), its VJP the upper
right block of the exponential of ``[[A^T, G], [0, A^T]]``; LU by Gaussian elimination
with partial pivoting (LAPACK's ``getrf`` choice of pivot), its VJP PyTorch's formulas.

``eig``/``eigvals`` (complex results) are in :mod:`ember.ops.linalg_eig`.
"""
from __future__ import annotations

import collections

import numpy as np

from .. import dtypes as dt
from ..errors import EmberTypeError, ShapeError
from ..tensor import Tensor
from . import elementwise as ew
from .linalg import matmul
from .linalg_decomp import LinAlgError, check_matrices, solve
from .registry import AbstractValue, apply, register
from .shape import cat, narrow

__all__ = ["solve_triangular", "matrix_exp", "lu_factor", "lu"]

lu_factor_result = collections.namedtuple("lu_factor", ["LU", "pivots"])
lu_result = collections.namedtuple("lu", ["P", "L", "U"])


def _tril(x, k=0):
    from .movement import tril
    return tril(x, k)


def _triu(x, k=0):
    from .movement import triu
    return triu(x, k)


def _eye(n, like):
    from .creation import eye
    return eye(n, dtype=like.dtype, device=like.device)


# solve_triangular -------------------------------------------------------------------------
def solve_triangular(A, B, *, upper: bool, left: bool = True, unitriangular: bool = False):
    """The solution ``X`` of ``A X = B`` (``X A = B`` with ``left=False``) reading only
    the upper (``upper=True``) or lower triangle of ``A``, its diagonal taken as ones
    with ``unitriangular``. Batch dims broadcast.

    >>> A = ember.tensor([[2.0, 1.0], [0.0, 4.0]])
    >>> ember.linalg.solve_triangular(A, ember.tensor([[3.0], [8.0]]), upper=True)
    tensor([[0.5000],
            [2.0000]])
    """
    check_matrices("linalg.solve_triangular", A)
    if not isinstance(B, Tensor):
        raise EmberTypeError(f"linalg.solve_triangular: expected B to be a Tensor, got "
                             f"{type(B).__name__}")
    if B.ndim < 2:
        raise ShapeError(f"linalg.solve_triangular: The input tensor B must have at least 2 "
                         f"dimensions (got shape {tuple(B.shape)}).")
    if B.dtype is not A.dtype:
        raise EmberTypeError(f"linalg.solve_triangular: Expected A and B to have the same "
                             f"dtype, but found A of type {A.dtype.name} and B of type "
                             f"{B.dtype.name}")
    n = A.shape[-1]
    if unitriangular:
        T = (_triu(A, 1) if upper else _tril(A, -1)) + _eye(n, A)
    else:
        T = _triu(A) if upper else _tril(A)
    if (B.shape[-2] if left else B.shape[-1]) != n:
        raise ShapeError(f"linalg.solve_triangular: Incompatible shapes of A and B for the "
                         f"equation {'AX = B' if left else 'XA = B'} ({n}x{n} and "
                         f"{B.shape[-2]}x{B.shape[-1]})")
    # B is a matrix (or a batch of them) even when its shape is A's less one dim, which
    # linalg.solve would read as a batch of vectors: give both the broadcast batch dims
    batch = tuple(np.broadcast_shapes(tuple(T.shape[:-2]), tuple(B.shape[:-2])))
    return solve(T.expand(batch + tuple(T.shape[-2:])), B.expand(batch + tuple(B.shape[-2:])),
                 left=left)


# matrix_exp -------------------------------------------------------------------------------
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0,
           1187353796428800.0, 129060195264000.0, 10559470521600.0, 670442572800.0,
           33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def _matrix_exp_forward(xp, a):
    x = a.astype(np.float64)
    n = x.shape[-1]
    if x.size == 0:
        return xp.zeros(a.shape, a.dtype)
    norm1 = xp.abs(x).sum(axis=-2).max(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = xp.ceil(xp.log2(norm1 / _THETA13))
    s = xp.where(xp.isfinite(s) & (s > 0), s, 0).astype(np.int64)
    x = x / (2.0 ** s)[..., None, None]
    b = _PADE13
    eye = xp.eye(n)
    x2 = x @ x
    x4 = x2 @ x2
    x6 = x4 @ x2
    u = x @ (x6 @ (b[13] * x6 + b[11] * x4 + b[9] * x2) + b[7] * x6 + b[5] * x4 +
             b[3] * x2 + b[1] * eye)
    v = x6 @ (b[12] * x6 + b[10] * x4 + b[8] * x2) + b[6] * x6 + b[4] * x4 + b[2] * x2 + \
        b[0] * eye
    r = xp.linalg.solve(v - u, v + u)
    for i in range(int(s.max()) if s.size else 0):  # undo the scaling by squaring
        r = xp.where((i < s)[..., None, None], r @ r, r)
    return r.astype(a.dtype)


def _matrix_exp_vjp(n, g):
    """exp([[A^T, G], [0, A^T]]) has the VJP in its upper right block."""
    At = n.inputs[0].mT
    k = At.shape[-1]
    top = cat([At, g], -1)
    from .creation import zeros_like
    bottom = cat([zeros_like(At), At], -1)
    big = matrix_exp(cat([top, bottom], -2))
    return narrow(narrow(big, -2, 0, k), -1, k, k)


_MATRIX_EXP = register("matrix_exp", _matrix_exp_forward, _matrix_exp_vjp,
                       infer=lambda a: AbstractValue(a.shape, a.dtype))


def matrix_exp(A):
    """The matrix exponential ``sum_k A^k / k!`` of (batches of) square matrices.

    >>> ember.linalg.matrix_exp(ember.zeros(2, 2))
    tensor([[1., 0.],
            [0., 1.]])
    """
    check_matrices("linalg.matrix_exp", A)
    return apply(_MATRIX_EXP, A)


# lu ---------------------------------------------------------------------------------------
def _lu_forward(xp, a):
    """Gaussian elimination with partial pivoting (the first largest |pivot|, as
    ``getrf``); returns P, L, U with A = P L U and ``getrf``'s 1-based int32 pivots."""
    *batch, m, n = a.shape
    k = min(m, n)
    w = a.reshape(-1, m, n).copy()
    nb = w.shape[0]
    rows = xp.arange(nb)
    perm = xp.tile(xp.arange(m), (nb, 1))
    piv = xp.zeros((nb, k), np.int32)
    for j in range(k):
        p = j + xp.argmax(xp.abs(w[:, j:, j]), axis=1) if nb else xp.zeros(0, np.int64)
        piv[:, j] = p + 1
        wj, pj = w[rows, j].copy(), perm[rows, j].copy()
        w[rows, j], perm[rows, j] = w[rows, p], perm[rows, p]
        w[rows, p], perm[rows, p] = wj, pj
        pivot = w[:, j, j][:, None]
        safe = xp.where(pivot == 0, 1, pivot)
        w[:, j + 1:, j] = xp.where(pivot == 0, w[:, j + 1:, j], w[:, j + 1:, j] / safe)
        w[:, j + 1:, j + 1:] -= w[:, j + 1:, j, None] * w[:, j, None, j + 1:]
    L = xp.tril(w[:, :, :k], -1) + xp.eye(m, k, dtype=a.dtype)
    U = xp.triu(w[:, :k, :])
    P = xp.zeros((nb, m, m), a.dtype)
    P[rows[:, None], perm, xp.arange(m)[None, :]] = 1
    batch = tuple(batch)
    return (P.reshape(batch + (m, m)), L.reshape(batch + (m, k)).astype(a.dtype),
            U.reshape(batch + (k, n)).astype(a.dtype), piv.reshape(batch + (k,)))


def _lu_vjp(node, g):
    """PyTorch's ``linalg_lu_backward`` (wide and square: m <= n; tall: m > n)."""
    _, gL, gU, _ = g
    if gL is None and gU is None:
        return None
    # L and U stay attached, so the gradient of this gradient reaches A through them
    P, L, U = node.output(0).detach(), node.output(1), node.output(2)
    m, n = L.shape[-2], U.shape[-1]
    k = min(m, n)
    if m <= n:
        U1 = narrow(U, -1, 0, k)
        grad = matmul(L.mT, gL) if gL is not None else None
        if gU is not None:
            term = matmul(_triu(gU), U.mT)
            grad = -term if grad is None else grad - term
        grad = solve_triangular(U1.mT, _tril(grad, -1), upper=False, left=False)
        if gU is not None:
            grad = cat([grad + _triu(narrow(gU, -1, 0, k)), narrow(gU, -1, k, n - k)], -1)
        grad = solve_triangular(L.mT, grad, upper=True, unitriangular=True)
        if gU is None:
            grad = cat([grad, ew.cast(narrow(U, -1, k, n - k), U.dtype) * 0.0], -1)
    else:
        L1 = narrow(L, -2, 0, k)
        grad = matmul(gU, U.mT) if gU is not None else None
        if gL is not None:
            term = matmul(L.mT, _tril(gL, -1))
            grad = -term if grad is None else grad - term
        grad = solve_triangular(L1.mT, _triu(grad), upper=True, unitriangular=True)
        if gL is not None:
            grad = cat([grad + _tril(narrow(gL, -2, 0, k), -1), narrow(gL, -2, k, m - k)], -2)
        grad = solve_triangular(U.mT, grad, upper=False, left=False)
        if gL is None:
            grad = cat([grad, narrow(L, -2, k, m - k) * 0.0], -2)
    return matmul(P, grad)


def _lu_infer(a):
    *batch, m, n = a.shape
    k, batch = min(m, n), tuple(batch)
    return (AbstractValue(batch + (m, m), a.dtype), AbstractValue(batch + (m, k), a.dtype),
            AbstractValue(batch + (k, n), a.dtype), AbstractValue(batch + (k,), dt.int32))


_LU = register("lu", _lu_forward, _lu_vjp, n_outputs=4, saves_outputs=True,
               saves_inputs=False, infer=_lu_infer)


def _check_lu(name, A, pivot):
    check_matrices(name, A, square=False)
    if not pivot:
        raise NotImplementedError(f"{name}: LU without pivoting is not implemented on the "
                                  f"CPU (PyTorch supports it only on CUDA)")


def lu(A, *, pivot: bool = True):
    """``(P, L, U)`` with ``A = P @ L @ U``: ``P`` a permutation, ``L`` unit lower
    triangular (``m x k``), ``U`` upper triangular (``k x n``), ``k = min(m, n)``.

    >>> P, L, U = ember.linalg.lu(ember.tensor([[1.0, 2.0], [3.0, 4.0]]))
    >>> U
    tensor([[3.0000, 4.0000],
            [0.0000, 0.6667]])
    """
    _check_lu("linalg.lu", A, pivot)
    P, L, U, _ = apply(_LU, A)
    return lu_result(P, L, U)


def lu_factor(A, *, pivot: bool = True):
    """``(LU, pivots)``: ``L`` (below the diagonal, its unit diagonal implied) and ``U``
    packed in one matrix, and LAPACK's 1-based int32 row interchanges.

    >>> ember.linalg.lu_factor(ember.tensor([[1.0, 2.0], [3.0, 4.0]])).pivots
    tensor([2, 2], dtype=ember.int32)
    """
    _check_lu("linalg.lu_factor", A, pivot)
    _, L, U, pivots = apply(_LU, A)
    zero = np.argwhere(U.detach().diagonal(0, -2, -1).numpy() == 0)
    if zero.size:  # as PyTorch: the factors would divide by zero in lu_solve
        where = "".join(f"[{i}]" for i in zero[0][:-1])
        raise LinAlgError(f"linalg.lu_factor: U{where}[{zero[0][-1] + 1},{zero[0][-1] + 1}] is "
                          f"zero and using it on lu_solve would result in a division by zero. "
                          f"To factor it anyway, call linalg.lu(A)")
    m, n = A.shape[-2], A.shape[-1]
    k = min(m, n)
    strict = _tril(L, -1)
    if m > n:  # pack U (n x n) over the top of L (m x n)
        packed = strict + cat([U, narrow(L, -2, n, m - n) * 0.0], -2)
    else:  # pack L (m x m) into the left of U (m x n)
        packed = U + cat([strict, narrow(U, -1, k, n - k) * 0.0], -1)
    return lu_factor_result(packed, pivots)
