"""PyTorch's older top-level linear algebra: ``triangular_solve`` (``b`` first),
LAPACK's compact QR (``geqrf``) and its companions ``orgqr`` and ``ormqr``, and the
randomized ``svd_lowrank`` and ``pca_lowrank``.

``geqrf`` runs LAPACK's ``geqrf`` through NumPy (``qr(mode='raw')``) and, as in PyTorch,
has no gradient; the others are compositions of ember ops (``linalg.solve_triangular``,
``linalg.householder_product``, ``linalg.qr``, ``linalg.svd``), so they have gradients.
"""
from __future__ import annotations

import collections
import numbers

import numpy as np

from . import linalg
from .errors import EmberTypeError, EmberValueError, ShapeError
from .ops import creation, random, shape as _shape
from .ops.linalg_decomp import check_matrices
from .ops.registry import AbstractValue, apply, register
from .tensor import Tensor

__all__ = ["triangular_solve", "geqrf", "orgqr", "ormqr", "svd_lowrank", "pca_lowrank"]

triangular_solve_result = collections.namedtuple("triangular_solve",
                                                 ["solution", "cloned_coefficient"])
geqrf_result = collections.namedtuple("geqrf", ["a", "tau"])


def _broadcast_batch(op: str, *shapes) -> tuple:
    try:
        return tuple(np.broadcast_shapes(*[s[:-2] for s in shapes]))
    except ValueError:
        raise ShapeError(f"{op}: the batch dimensions of shapes "
                         f"{', '.join(str(tuple(s)) for s in shapes)} do not broadcast") \
            from None


def triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False) -> tuple:
    """Solves ``A X = b`` (``A^T X = b`` with ``transpose``) for a triangular ``A``, as
    ``torch.triangular_solve``; returns ``(solution, cloned_coefficient)``.

    Note the argument order: ``b`` (the right-hand sides, (*, m, k)) comes before ``A``
    ((*, m, m), upper triangular unless ``upper=False``; only that triangle is read, and
    its diagonal is taken as ones with ``unitriangular``). Batch dims broadcast;
    ``cloned_coefficient`` is a copy of ``A`` broadcast to them. Prefer
    ``ember.linalg.solve_triangular(A, b, upper=...)`` in new code.

    >>> A = ember.tensor([[2.0, 1.0], [0.0, 4.0]])
    >>> ember.triangular_solve(ember.tensor([[4.0], [8.0]]), A).solution
    tensor([[1.],
            [2.]])
    """
    op = "triangular_solve"
    for what, t in (("b", b), ("A", A)):
        if not isinstance(t, Tensor):
            raise EmberTypeError(f"{op}: expected {what} to be a Tensor, got "
                                 f"{type(t).__name__}")
        if t.ndim < 2:
            raise ShapeError(f"{op}: Expected {what} to have at least 2 dimensions, but it "
                             f"has {t.ndim} dimensions instead (shape {tuple(t.shape)})")
    check_matrices(op, A)
    if b.dtype != A.dtype:
        raise EmberTypeError(f"{op}: Expected b and A to have the same dtype, but got b "
                             f"{b.dtype.name} and A {A.dtype.name}")
    if b.shape[-2] != A.shape[-1]:
        raise ShapeError(f"{op}: Incompatible matrix sizes: each A matrix is {A.shape[-2]} "
                         f"by {A.shape[-1]} but each b matrix is {b.shape[-2]} by "
                         f"{b.shape[-1]}")
    batch = _broadcast_batch(op, tuple(b.shape), tuple(A.shape))
    A_b = A.expand(batch + tuple(A.shape[-2:]))
    b_b = b.expand(batch + tuple(b.shape[-2:]))
    coeff = A_b.mT if transpose else A_b
    solution = linalg.solve_triangular(coeff, b_b, upper=bool(upper) != bool(transpose),
                                       unitriangular=bool(unitriangular))
    return triangular_solve_result(solution, A_b.clone())


# geqrf --------------------------------------------------------------------------------
def _geqrf_forward(xp, a):
    get = getattr(a, "get", None)
    host = np.asarray(get() if get is not None else a)
    m, n = host.shape[-2:]
    k = min(m, n)
    if host.size == 0:
        return (xp.asarray(host.copy()),
                xp.asarray(np.zeros(host.shape[:-2] + (k,), host.dtype)))
    # NumPy's raw mode returns LAPACK's arrays in Fortran order: h is (n, m)
    h, tau = np.linalg.qr(host.astype(np.float64), mode="raw")
    return (xp.asarray(np.ascontiguousarray(np.swapaxes(h, -1, -2)).astype(host.dtype)),
            xp.asarray(tau.astype(host.dtype)))


_GEQRF = register(
    "geqrf", _geqrf_forward, n_outputs=2,
    infer=lambda a: (AbstractValue(a.shape, a.dtype),
                     AbstractValue(tuple(a.shape[:-2]) + (min(a.shape[-2:]),), a.dtype)))


def geqrf(input: Tensor) -> tuple:
    """The QR decomposition of each matrix of ``input`` (*, m, n) in LAPACK's compact
    form, as ``torch.geqrf``; returns ``(a, tau)``.

    ``a`` holds ``R`` on and above its diagonal and, below it, the Householder vectors
    ``v_i`` (with an implicit 1 on the diagonal); ``tau`` (*, min(m, n)) holds their
    scales, so that ``Q = H_1 ... H_k`` with ``H_i = I - tau_i v_i v_i^T``. Recover
    ``Q`` with :func:`orgqr` (``linalg.householder_product``) or apply it with
    :func:`ormqr`. As in PyTorch there is no gradient; ``linalg.qr`` has one.

    >>> a, tau = ember.geqrf(ember.randn(5, 3, dtype=ember.float64))
    >>> Q = ember.orgqr(a, tau)
    """
    check_matrices("geqrf", input, square=False)
    a, tau = apply(_GEQRF, input)
    return geqrf_result(a, tau)


def orgqr(input: Tensor, tau: Tensor) -> Tensor:
    """The first ``n`` columns of the product of Householder matrices that :func:`geqrf`
    leaves in ``(input, tau)``; ``torch.orgqr``'s alias of
    :func:`ember.linalg.householder_product` (``input`` (*, m, n) with m >= n, ``tau``
    (*, k) with k <= n).

    >>> a, tau = ember.geqrf(ember.randn(4, 4, dtype=ember.float64))
    >>> Q = ember.orgqr(a, tau)
    """
    return linalg.householder_product(input, tau)


def ormqr(input: Tensor, tau: Tensor, other: Tensor, left: bool = True,
          transpose: bool = False) -> Tensor:
    """Multiplies ``other`` (*, m, n) by the full orthogonal ``Q`` of a :func:`geqrf`
    result ``(input, tau)``, as ``torch.ormqr``: ``Q @ other`` (``left``) or
    ``other @ Q`` (``left=False``), with ``Q^T`` in place of ``Q`` under ``transpose``.

    ``input`` is (*, mn, k) with ``mn`` = m when ``left`` and n otherwise; ``tau``
    (*, min(mn, k)) scales the Householder vectors below ``input``'s diagonal. ``Q`` is
    the (mn, mn) product ``H_1 ... H_{len(tau)}``. Differentiable in all three tensors.

    >>> A = ember.randn(5, 3, dtype=ember.float64)
    >>> a, tau = ember.geqrf(A)
    >>> R = ember.ormqr(a, tau, A, transpose=True)  # Q^T A: R with zeros below
    """
    op = "ormqr"
    for what, t in (("input", input), ("tau", tau), ("other", other)):
        if not isinstance(t, Tensor):
            raise EmberTypeError(f"{op}: expected {what} to be a Tensor, got "
                                 f"{type(t).__name__}")
    check_matrices(op, input, square=False)
    if other.ndim < 2:
        raise ShapeError(f"{op}: other must have at least 2 dimensions, got shape "
                         f"{tuple(other.shape)}")
    if tau.ndim < 1 or tau.ndim != input.ndim - 1:
        raise ShapeError(f"{op}: tau must have one dimension fewer than input, got tau of "
                         f"shape {tuple(tau.shape)} and input of shape "
                         f"{tuple(input.shape)}")
    if input.dtype != other.dtype or tau.dtype != input.dtype:
        raise EmberTypeError(f"{op}: expected input, tau and other of one dtype, got "
                             f"{input.dtype.name}, {tau.dtype.name} and {other.dtype.name}")
    mn, k = input.shape[-2:]
    side = -2 if left else -1
    if other.shape[side] != mn:
        raise ShapeError(f"{op}: other.shape[{side}] must be equal to input.shape[-2] "
                         f"(other of shape {tuple(other.shape)}, input of shape "
                         f"{tuple(input.shape)}, left={bool(left)})")
    if tau.shape[-1] > min(mn, k):
        raise ShapeError(f"{op}: tau.shape[-1] must be less than or equal to min(input."
                         f"shape[-2], input.shape[-1]) = {min(mn, k)}, got tau of shape "
                         f"{tuple(tau.shape)}")
    # Q is (mn, mn): give householder_product mn columns (the reflectors past len(tau)
    # are not read, so zero columns stand in for the missing ones)
    if k < mn:
        pad = creation.zeros(tuple(input.shape[:-1]) + (mn - k,), dtype=input.dtype,
                             device=input.device)
        reflectors = _shape.cat([input, pad], -1)
    else:
        reflectors = input[..., :mn]
    Q = linalg.householder_product(reflectors, tau)
    if transpose:
        Q = Q.mT
    return Q.matmul(other) if left else other.matmul(Q)


# Randomized low-rank SVD and PCA ------------------------------------------------------
def _approximate_basis(A: Tensor, q: int, niter: int) -> Tensor:
    """An orthonormal (*, m, q') basis for most of ``A``'s range (Halko, Martinsson and
    Tropp 2009, algorithm 4.4: a random projection and ``niter`` power iterations)."""
    R = random.randn(A.shape[-1], q, dtype=A.dtype, device=A.device)
    Q = linalg.qr(A.matmul(R)).Q
    for _ in range(niter):
        Q = linalg.qr(A.mT.matmul(Q)).Q
        Q = linalg.qr(A.matmul(Q)).Q
    return Q


def _check_lowrank(op: str, A, q, niter) -> None:
    check_matrices(op, A, square=False)
    if not isinstance(niter, numbers.Integral) or niter < 0:
        raise EmberValueError(f"{op}: niter(={niter}) must be a non-negative integer")
    if not isinstance(q, numbers.Integral) or isinstance(q, bool) or q < 0:
        raise EmberValueError(f"{op}: q(={q}) must be a non-negative integer")


def svd_lowrank(A: Tensor, q: int | None = 6, niter: int = 2,
                M: Tensor | None = None) -> tuple:
    """A randomized approximation ``U diag(S) V^T`` of the SVD of ``A - M`` of rank
    ``q``, as ``torch.svd_lowrank``; returns ``(U, S, V)`` (note ``V``, not ``V^T``).

    Args:
        A: (*, m, n).
        q: the rank to find (a little over the true rank is best). Default: 6.
        niter: power iterations; more sharpen the leading singular values. Default: 2.
        M: subtracted from ``A`` first (broadcast to it), or None.

    With k = min(q, m, n): ``U`` (*, m, k), ``S`` (*, k), ``V`` (*, n, k). The values
    depend on ember's random state (``ember.manual_seed``), so they are close to, but not
    the same numbers as, PyTorch's. Differentiable (compositions of ``linalg.qr`` and
    ``linalg.svd``). For a full SVD, use ``linalg.svd``.

    >>> A = ember.randn(50, 4, dtype=ember.float64) @ ember.randn(4, 30, dtype=ember.float64)
    >>> U, S, V = ember.svd_lowrank(A, q=4)
    """
    op = "svd_lowrank"
    q = 6 if q is None else q
    _check_lowrank(op, A, q, niter)
    if M is not None:
        if not isinstance(M, Tensor):
            raise EmberTypeError(f"{op}: expected M to be a Tensor or None, got "
                                 f"{type(M).__name__}")
        A = A - M
    m, n = A.shape[-2:]
    if m < n or n > q:
        # work on A^T so that the small SVD is of an (m, q) matrix
        Q = _approximate_basis(A.mT, q, niter)
        U, S, Vh = linalg.svd(A.matmul(Q), full_matrices=False)
        return U, S, Q.matmul(Vh.mT)
    Q = _approximate_basis(A, q, niter)
    U, S, Vh = linalg.svd(Q.mT.matmul(A), full_matrices=False)
    return Q.matmul(U), S, Vh.mT


def pca_lowrank(A: Tensor, q: int | None = None, center: bool = True,
                niter: int = 2) -> tuple:
    """A randomized principal component analysis of the rows of ``A`` (*, m, n), as
    ``torch.pca_lowrank``: :func:`svd_lowrank` of ``A`` less its column means (with
    ``center``); returns ``(U, S, V)``, the principal directions being ``V``'s columns.

    Args:
        A: (*, m, n).
        q: the rank, at most min(m, n). Default: min(6, m, n).
        center: subtract the mean over the rows first. Default: True.
        niter: power iterations. Default: 2.

    >>> U, S, V = ember.pca_lowrank(ember.randn(100, 5, dtype=ember.float64), q=2)
    >>> V.shape
    ember.Size([5, 2])
    """
    op = "pca_lowrank"
    if not isinstance(A, Tensor):
        raise EmberTypeError(f"{op}: expected A to be a Tensor, got {type(A).__name__}")
    check_matrices(op, A, square=False)
    m, n = A.shape[-2:]
    q = min(6, m, n) if q is None else q
    _check_lowrank(op, A, q, niter)
    if q > min(m, n):
        raise EmberValueError(f"{op}: q(={q}) must be non-negative integer and not greater "
                              f"than min(m, n)={min(m, n)} (A of shape {tuple(A.shape)})")
    if center:
        A = A - A.mean(-2, keepdim=True)
    return svd_lowrank(A, q, niter=niter)

