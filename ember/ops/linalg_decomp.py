"""Matrix decompositions and solvers: det, slogdet, inv, solve, cholesky, qr, svd and
eigh, batched over leading dims (``ember.linalg`` exports them).

Each is a primitive whose forward calls the array module's LAPACK routines and whose
VJP is written with ember ops (the formulas PyTorch uses), so gradients of gradients
work. Singular inputs to ``inv``/``solve`` and non-positive-definite inputs to
``cholesky`` raise :class:`LinAlgError`, as PyTorch does.
"""
from __future__ import annotations

import collections

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, EmberTypeError, ShapeError
from ..tensor import Tensor
from . import elementwise as ew, logical as lg, registry
from .complex_support import conj_physical, imag, real
from .linalg import matmul
from .registry import AbstractValue, apply, register
from .reduce import prod
from .shape import cat, expand, narrow, squeeze, stack, unsqueeze

__all__ = ["LinAlgError", "det", "slogdet", "inv", "solve", "cholesky", "qr", "svd",
           "svdvals", "eigh", "eigvalsh"]

slogdet_result = collections.namedtuple("slogdet", ["sign", "logabsdet"])
qr_result = collections.namedtuple("qr", ["Q", "R"])
svd_result = collections.namedtuple("svd", ["U", "S", "Vh"])
eigh_result = collections.namedtuple("eigh", ["eigenvalues", "eigenvectors"])


class LinAlgError(EmberError):
    """A matrix the routine cannot handle: singular for ``inv``/``solve``, not
    positive-definite for ``cholesky`` (PyTorch's ``torch.linalg.LinAlgError``)."""


def check_matrices(name: str, A, square: bool = True) -> None:
    """``A`` must be a float32/float64 (or complex64/complex128: the ops that do not take
    complex tensors say so by name) tensor of (batches of) matrices."""
    if not isinstance(A, Tensor):
        raise EmberTypeError(f"{name}: expected a Tensor, got {type(A).__name__}")
    if A.ndim < 2:
        raise ShapeError(f"{name}: The input tensor A must have at least 2 dimensions "
                         f"(got shape {tuple(A.shape)}).")
    if A.dtype not in (dt.float32, dt.float64, dt.complex64, dt.complex128):
        raise EmberTypeError(f"{name}: Expected a floating point or complex tensor as input. "
                             f"Got {A.dtype.name}")
    if square and A.shape[-1] != A.shape[-2]:
        raise ShapeError(f"{name}: A must be batches of square matrices, but they are "
                         f"{A.shape[-2]} by {A.shape[-1]} matrices")


def _lapack(name, fn, *arrays, why=""):
    """Run ``fn``; LAPACK's failure becomes a :class:`LinAlgError` naming ``name``."""
    try:
        return fn(*arrays)
    except Exception as exc:  # numpy.linalg.LinAlgError or the array module's own
        if type(exc).__name__ != "LinAlgError":
            raise
        raise LinAlgError(f"{name}: {why or exc}") from None


def _eye_mask(n, like):
    from .creation import eye
    return eye(n, dtype=dt.bool, device=like.device)


def _diag_embed(v):
    from .movement import diag_embed
    return diag_embed(v)


# inv -------------------------------------------------------------------------------------
_SINGULAR = ("The diagonal element is zero, the inversion could not be completed because "
             "the input matrix is singular.")


def _inv_forward(xp, a):
    return _lapack("linalg.inv", xp.linalg.inv, a, why=_SINGULAR).astype(a.dtype, copy=False)


def _inv_vjp(n, g):
    out = n.output(0)
    return -matmul(matmul(out.mT, g), out.mT)


_INV = register("linalg_inv", _inv_forward, _inv_vjp, saves_inputs=False, saves_outputs=True,
                infer=lambda a: AbstractValue(a.shape, a.dtype))


def inv(A):
    """The inverse of each square matrix of ``A`` (``(*, n, n)``); singular matrices
    raise :class:`LinAlgError`.

    >>> ember.linalg.inv(ember.tensor([[2.0, 0.0], [0.0, 4.0]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.2500]])
    """
    check_matrices("linalg.inv", A)
    return apply(_INV, A)


# det / slogdet -----------------------------------------------------------------------------
def _det_forward(xp, a):
    return xp.asarray(xp.linalg.det(a), dtype=a.dtype)


def _det_vjp(n, g):
    """g * det(A) * inv(A)^T; for singular matrices the cofactor matrix from the SVD,
    ``det(U) det(Vh) U diag(prod of the other singular values) Vh``."""
    A, = n.saved_inputs()
    d = n.output(0)
    if A.shape[-1] == 0:
        return A * 0
    scale = unsqueeze(unsqueeze(g * d, -1), -1)
    if registry._trace is None and not bool(lg.eq(d.detach(), 0).any()):
        return scale * inv(A).mT  # (traced: the cofactor form below, right for any A)
    U, S, Vh = svd(A)
    k = S.shape[-1]
    pi = stack([prod(cat([narrow(S, -1, j, 1) for j in range(k) if j != i], -1), -1)
                for i in range(k)], -1) if k > 1 else ew.where(lg.eq(S, S), 1.0, 0.0)
    sign = det(U.detach()) * det(Vh.detach())
    cof = matmul(U * unsqueeze(pi, -2), Vh) * unsqueeze(unsqueeze(sign, -1), -1)
    return unsqueeze(unsqueeze(g, -1), -1) * cof


_DET = register("linalg_det", _det_forward, _det_vjp, saves_outputs=True,
                infer=lambda a: AbstractValue(a.shape[:-2], a.dtype))


def det(A):
    """The determinant of each square matrix of ``A`` (``(*, n, n)`` gives ``(*)``).

    >>> ember.linalg.det(ember.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor(-2.)
    """
    check_matrices("linalg.det", A)
    return apply(_DET, A)


def _slogdet_forward(xp, a):
    sign, logabs = xp.linalg.slogdet(a)
    parts = dt.as_dtype(a.dtype).to_real().np  # (the sign of a complex matrix is a phase)
    return xp.asarray(sign, dtype=a.dtype), xp.asarray(logabs, dtype=parts)


def _slogdet_vjp(n, g):
    """g_logabs * A^-H, and for a complex matrix, whose sign is a phase, plus
    ``i Im(g_sign conj(sign)) A^-H`` (for real ones the sign's gradient is 0)."""
    g_sign, g = g
    A, = n.saved_inputs()
    if A.dtype.is_complex:
        sign = n.output(0)
        scale = 0.0 if g is None else _like(g, A)
        if g_sign is not None:
            scale = scale + ew.mul(_like(imag(g_sign * conj_physical(sign)), A), 1j)
        if g is None and g_sign is None:
            return None
        return unsqueeze(unsqueeze(scale, -1), -1) * inv(A).mH
    if g is None:
        return None
    return unsqueeze(unsqueeze(g, -1), -1) * inv(A).mT


_SLOGDET = register("linalg_slogdet", _slogdet_forward, _slogdet_vjp, n_outputs=2,
                    saves_outputs=True,
                    infer=lambda a: (AbstractValue(a.shape[:-2], a.dtype),
                                     AbstractValue(a.shape[:-2], a.dtype.to_real())))


def slogdet(A):
    """``(sign, logabsdet)``: the sign and the log of the absolute value of each
    determinant, without overflow (``sign`` is 0 and ``logabsdet`` -inf for singular
    matrices).

    >>> ember.linalg.slogdet(ember.tensor([[1.0, 2.0], [3.0, 4.0]]))
    slogdet(sign=tensor(-1.), logabsdet=tensor(0.6931))
    """
    check_matrices("linalg.slogdet", A)
    return slogdet_result(*apply(_SLOGDET, A))


# solve -------------------------------------------------------------------------------------
def _solve_forward(xp, a, b):
    out = _lapack("linalg.solve", xp.linalg.solve, a, b,
                  why="The solver failed because the input matrix is singular.")
    return out.astype(a.dtype, copy=False)


def _solve_vjp(n, g):
    A, B = n.saved_inputs()
    X = n.output(0)
    gB = apply(_SOLVE, A.mT, g)
    gA = -matmul(gB, X.mT) if n.edges[0] else None
    return gA, gB


_SOLVE = register("linalg_solve", _solve_forward, _solve_vjp, saves_outputs=True,
                  infer=lambda a, b: AbstractValue(b.shape, a.dtype))


def solve(A, B, *, left: bool = True):
    """The solution ``X`` of ``A X = B`` (``X A = B`` with ``left=False``) for square
    ``A`` (``(*, n, n)``) and ``B`` of shape ``(*, n, k)`` or, as a vector, ``(*, n)``;
    batch dims broadcast. Singular ``A`` raises :class:`LinAlgError`.

    >>> ember.linalg.solve(ember.tensor([[2.0, 0.0], [0.0, 4.0]]), ember.tensor([2.0, 8.0]))
    tensor([1., 2.])
    """
    check_matrices("linalg.solve", A)
    if not isinstance(B, Tensor):
        raise EmberTypeError(f"linalg.solve: expected B to be a Tensor, got {type(B).__name__}")
    if B.dtype is not A.dtype:
        raise EmberTypeError(f"linalg.solve: Expected A and B to have the same dtype, but "
                             f"found A of type {A.dtype.name} and B of type {B.dtype.name}")
    if not left:  # X A = B is A^T X^T = B^T
        return solve(A.mT, B) if B.ndim == 1 else solve(A.mT, B.mT).mT
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    Bm = unsqueeze(B, -1) if vector else B
    if Bm.ndim < 2 or Bm.shape[-2] != A.shape[-1]:
        raise ShapeError(f"linalg.solve: Incompatible shapes of A and B for the equation AX = "
                         f"B ({A.shape[-2]}x{A.shape[-1]} and {tuple(B.shape)})")
    try:
        batch = tuple(np.broadcast_shapes(tuple(A.shape[:-2]), tuple(Bm.shape[:-2])))
    except ValueError:
        raise ShapeError(f"linalg.solve: the batch dims of A {tuple(A.shape)} and B "
                         f"{tuple(B.shape)} cannot be broadcast together") from None
    A = expand(A, batch + tuple(A.shape[-2:]))
    Bm = expand(Bm, batch + tuple(Bm.shape[-2:]))
    X = apply(_SOLVE, A, Bm)
    return squeeze(X, -1) if vector else X


# cholesky ----------------------------------------------------------------------------------
def _cholesky_forward(xp, a):
    L = _lapack("linalg.cholesky", xp.linalg.cholesky, a,
                why="The factorization could not be completed because the input is not "
                    "positive-definite.")
    return L.astype(a.dtype, copy=False)


def _cholesky_vjp(n, g):
    """gA = sym(L^-T Φ(L^T gL) L^-1), Φ keeping the lower triangle with half the
    diagonal (PyTorch's formula, which reads only the lower triangle)."""
    from .movement import tril
    L = n.output(0)
    phi = tril(matmul(L.mH, g))  # (mH: the transpose, conjugated where complex)
    phi = phi - 0.5 * ew.where(_eye_mask(L.shape[-1], L), phi, 0.0)
    L_inv = inv(L)
    gA = matmul(matmul(L_inv.mH, phi), L_inv)
    return 0.5 * (gA + gA.mH)


_CHOLESKY = register("linalg_cholesky", _cholesky_forward, _cholesky_vjp, saves_inputs=False,
                     saves_outputs=True, infer=lambda a: AbstractValue(a.shape, a.dtype))


def cholesky(A, *, upper: bool = False):
    """The Cholesky factor ``L`` (lower triangular, ``A = L L^T``) of each symmetric
    positive-definite matrix of ``A``; ``upper=True`` gives ``L^T``. Only the lower
    triangle of ``A`` is read. Matrices that are not positive-definite raise
    :class:`LinAlgError`.

    >>> ember.linalg.cholesky(ember.tensor([[4.0, 2.0], [2.0, 2.0]]))
    tensor([[2., 0.],
            [1., 1.]])
    """
    check_matrices("linalg.cholesky", A)
    L = apply(_CHOLESKY, A)
    return L.mH if upper else L


# qr ----------------------------------------------------------------------------------------
def _qr_forward(xp, a, mode):
    q, r = xp.linalg.qr(a, mode="complete" if mode == "complete" else "reduced")
    if mode == "r":
        q = xp.zeros((0,), a.dtype)
    return q.astype(a.dtype, copy=False), r.astype(a.dtype, copy=False)


def _qr_infer(a, mode):
    m, n = a.shape[-2:]
    k = m if mode == "complete" else min(m, n)
    q = AbstractValue((0,) if mode == "r" else a.shape[:-2] + (m, k), a.dtype)
    return q, AbstractValue(a.shape[:-2] + (k, n), a.dtype)


def _tall_qr_grad(gQ, gR, Q, R):
    """For m >= n: gA = (gQ + Q copyltu(M)) R^-H, M = R gR^H - gQ^H Q, where copyltu
    mirrors the lower triangle onto the upper one (conjugated) and keeps the real part
    of the diagonal (^H is the transpose for real matrices)."""
    from .movement import tril
    M = 0
    if gR is not None:
        M = matmul(R, gR.mH)
    if gQ is not None:
        M = M - matmul(gQ.mH, Q)
    low = tril(M, -1)
    diagonal = M if not M.dtype.is_complex else _like(real(M), M)
    sym = low + low.mH + ew.where(_eye_mask(M.shape[-1], M), diagonal, 0.0)
    b = matmul(Q, sym)
    if gQ is not None:
        b = b + gQ
    # b R^-H = (R^-1 b^H)^H
    return apply(_SOLVE, R, b.mH).mH


def _qr_vjp(n, g):
    gQ, gR = g
    A, = n.saved_inputs()
    mode = n.params["mode"]
    if mode == "r":
        raise EmberError("linalg.qr: The derivative of linalg.qr depends on Q, which is not "
                         "computed when mode='r'. Please use linalg.qr(A, mode='reduced') if "
                         "you are going to differentiate through linalg.qr.")
    m, k = A.shape[-2], A.shape[-1]
    if mode == "complete" and m > k:
        raise EmberError("linalg.qr: The QR decomposition is not differentiable when "
                         "mode='complete' and nrows > ncols.")
    Q, R = n.output(0), n.output(1)
    if m >= k:
        return _tall_qr_grad(gQ, gR, Q, R)
    # wide: A = [X | Y], X = Q U (square), Y = Q V
    U = narrow(R, -1, 0, m)
    Y = narrow(A, -1, m, k - m)
    gU = narrow(gR, -1, 0, m) if gR is not None else None
    gV = narrow(gR, -1, m, k - m) if gR is not None else None
    gQx = gQ
    if gV is not None:
        extra = matmul(Y, gV.mH)
        gQx = extra if gQx is None else gQx + extra
    gX = _tall_qr_grad(gQx, gU, Q, U)
    gY = matmul(Q, gV) if gV is not None else Y * 0
    return cat([gX, gY], -1)


_QR = register("linalg_qr", _qr_forward, _qr_vjp, n_outputs=2, saves_outputs=True,
               infer=_qr_infer)


def qr(A, mode: str = "reduced"):
    """``(Q, R)`` with ``A = Q R``, ``Q`` orthonormal and ``R`` upper triangular, for each
    matrix of ``A`` (``(*, m, n)``). ``mode`` is ``"reduced"`` (``Q`` is ``(*, m, k)``,
    ``k = min(m, n)``), ``"complete"`` (``Q`` square) or ``"r"`` (``Q`` empty).

    >>> Q, R = ember.linalg.qr(ember.tensor([[3.0, 1.0], [4.0, 2.0]]))
    >>> R
    tensor([[-5.0000, -2.2000],
            [ 0.0000,  0.4000]])
    """
    check_matrices("linalg.qr", A, square=False)
    if mode not in ("reduced", "complete", "r"):
        raise EmberError(f"qr received unrecognized mode '{mode}' but expected one of "
                         "'reduced' (default), 'r', or 'complete'")
    return qr_result(*apply(_QR, A, mode=mode))


# svd ---------------------------------------------------------------------------------------
def _svd_forward(xp, a, full_matrices):
    u, s, vh = xp.linalg.svd(a, full_matrices=full_matrices)
    parts = dt.as_dtype(a.dtype).to_real().np  # (singular values are real)
    return (u.astype(a.dtype, copy=False), s.astype(parts, copy=False),
            vh.astype(a.dtype, copy=False))


def _svd_infer(a, full_matrices):
    m, n = a.shape[-2:]
    k = min(m, n)
    b = a.shape[:-2]
    return (AbstractValue(b + (m, m if full_matrices else k), a.dtype),
            AbstractValue(b + (k,), a.dtype.to_real()),
            AbstractValue(b + (n if full_matrices else k, n), a.dtype))


def _svd_vjp(n, g):
    """PyTorch's ``svd_backward``; with ``full_matrices`` the extra columns of U and rows
    of Vh (and their gradients) are dropped first, as PyTorch does."""
    gU, gS, gVh = g
    U, S, Vh = n.output(0), n.output(1), n.output(2)
    k = S.shape[-1]
    if n.params["full_matrices"]:
        U, Vh = narrow(U, -1, 0, k), narrow(Vh, -2, 0, k)
        gU = narrow(gU, -1, 0, k) if gU is not None else None
        gVh = narrow(gVh, -2, 0, k) if gVh is not None else None
    return svd_grad(gU, gS, gVh, U, S, Vh)


def svd_grad(gU, gS, gVh, U, S, Vh):
    """The gradient of ``A`` for a reduced SVD ``A = U diag(S) Vh`` (``^H``: the transpose,
    conjugated where complex; for complex matrices the phases of U's columns add
    ``i Im(diag(U^H gU)) / S`` on the diagonal, as in PyTorch)."""
    m, n = U.shape[-2], Vh.shape[-1]
    if gU is None and gVh is None:
        if gS is None:
            return None
        gS = _like(gS, U)
        return matmul(U, unsqueeze(gS, -1) * Vh) if m >= n else \
            matmul(U * unsqueeze(gS, -2), Vh)
    S2 = S * S
    eye = _eye_mask(S.shape[-1], S)
    E = ew.where(eye, 1.0, unsqueeze(S2, -2) - unsqueeze(S2, -1))
    if gU is not None:
        raw = matmul(U.mH, gU)
        UhgU = raw - raw.mH
    if gVh is not None:
        VhgV = matmul(Vh, gVh.mH)
        VhgV = VhgV - VhgV.mH
    if gU is not None and gVh is not None:
        gA = (UhgU * unsqueeze(S, -2) + unsqueeze(S, -1) * VhgV) / E
    elif gU is not None:
        gA = UhgU * (unsqueeze(S, -2) / E)
    else:
        gA = unsqueeze(S, -1) * (VhgV / E)
    gA = ew.where(eye, 0.0, gA)  # (a complex skew matrix has an imaginary diagonal)
    if U.dtype.is_complex and gU is not None:
        gA = gA + _diag_embed(ew.mul(_like(imag(raw.diagonal(0, -2, -1)) / S, U), 1j))
    if gS is not None:
        gA = gA + _like(_diag_embed(gS), gA)
    if m > n and gU is not None:
        gA = matmul(U, gA)
        gUSinv = gU / unsqueeze(S, -2)
        gA = gA + gUSinv - matmul(U, matmul(U.mH, gUSinv))
        return matmul(gA, Vh)
    if m < n and gVh is not None:
        gA = matmul(gA, Vh)
        SinvgVh = gVh / unsqueeze(S, -1)
        gA = gA + SinvgVh - matmul(matmul(SinvgVh, Vh.mH), Vh)
        return matmul(U, gA)
    return matmul(U, matmul(gA, Vh)) if m >= n else matmul(matmul(U, gA), Vh)


_SVD = register("linalg_svd", _svd_forward, _svd_vjp, n_outputs=3, saves_inputs=False,
                saves_outputs=True, infer=_svd_infer)


def svd(A, full_matrices: bool = True, *, driver=None):
    """``(U, S, Vh)`` with ``A = U diag(S) Vh`` for each matrix of ``A`` (``(*, m, n)``);
    ``S`` descends. With ``full_matrices=False`` ``U`` is ``(*, m, k)`` and ``Vh`` is
    ``(*, k, n)``, ``k = min(m, n)``. Singular vectors are unique only up to sign, so
    gradients are defined for functions that do not depend on that sign.

    >>> ember.linalg.svd(ember.tensor([[3.0, 0.0], [0.0, -2.0]])).S
    tensor([3., 2.])
    """
    check_matrices("linalg.svd", A, square=False)
    return svd_result(*apply(_SVD, A, full_matrices=bool(full_matrices)))


def svdvals(A, *, driver=None):
    """The singular values of each matrix of ``A``, in descending order.

    >>> ember.linalg.svdvals(ember.tensor([[3.0, 0.0], [0.0, -2.0]]))
    tensor([3., 2.])
    """
    check_matrices("linalg.svdvals", A, square=False)
    return apply(_SVD, A, full_matrices=False)[1]


# eigh --------------------------------------------------------------------------------------
def _eigh_forward(xp, a, UPLO):
    w, v = _lapack("linalg.eigh", lambda x: xp.linalg.eigh(x, UPLO=UPLO), a)
    parts = dt.as_dtype(a.dtype).to_real().np  # (the eigenvalues of a Hermitian matrix)
    return w.astype(parts, copy=False), v.astype(a.dtype, copy=False)


def _eigh_vjp(n, g):
    """gA = V (skew(V^T gV) / E with diag(gL) on the diagonal) V^T, E_ij = L_j - L_i
    (PyTorch's formula; defined for distinct eigenvalues)."""
    gL, gV = g
    L, V = n.output(0), n.output(1)
    if gV is None:
        if gL is None:
            return None
        return matmul(V * unsqueeze(_like(gL, V), -2), V.mH)
    eye = _eye_mask(L.shape[-1], L)
    VhgV = matmul(V.mH, gV)  # (mH: the transpose, conjugated where complex)
    VhgV = 0.5 * (VhgV - VhgV.mH)
    E = ew.where(eye, 1.0, unsqueeze(L, -2) - unsqueeze(L, -1))
    inner = VhgV / _like(E, V)
    inner = ew.where(eye, _like(_diag_embed(gL), V) if gL is not None else 0.0, inner)
    return matmul(V, matmul(inner, V.mH))


def _like(real, complex_like):
    """A real tensor in ``complex_like``'s dtype where that is complex (else itself)."""
    return ew.cast(real, complex_like.dtype) if complex_like.dtype.is_complex else real


_EIGH = register("linalg_eigh", _eigh_forward, _eigh_vjp, n_outputs=2, saves_inputs=False,
                 saves_outputs=True,
                 infer=lambda a, UPLO: (AbstractValue(a.shape[:-1], a.dtype.to_real()),
                                        AbstractValue(a.shape, a.dtype)))


def _uplo(name, UPLO):
    if UPLO not in ("L", "U"):
        raise EmberError(f"{name}: Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return UPLO


def eigh(A, UPLO: str = "L"):
    """``(eigenvalues, eigenvectors)`` of each symmetric matrix of ``A``, reading only its
    lower (``UPLO="L"``) or upper triangle; eigenvalues ascend and the eigenvectors are
    the columns of the second result (unique up to sign).

    >>> ember.linalg.eigh(ember.tensor([[2.0, 0.0], [0.0, 1.0]])).eigenvalues
    tensor([1., 2.])
    """
    check_matrices("linalg.eigh", A)
    return eigh_result(*apply(_EIGH, A, UPLO=_uplo("linalg.eigh", UPLO)))


def eigvalsh(A, UPLO: str = "L"):
    """The eigenvalues of each symmetric matrix of ``A``, ascending.

    >>> ember.linalg.eigvalsh(ember.tensor([[2.0, 1.0], [1.0, 2.0]]))
    tensor([1., 3.])
    """
    check_matrices("linalg.eigvalsh", A)
    return apply(_EIGH, A, UPLO=_uplo("linalg.eigvalsh", UPLO))[0]
