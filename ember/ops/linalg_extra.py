"""``ember.linalg`` functions built from other ops: norms, pinv, lstsq, matrix_rank,
matrix_power, multi_dot, vecdot, diagonal, cross; and PyTorch's older top-level names
(``ember.det``, ``ember.inverse``, ``ember.svd``, ...).
"""
from __future__ import annotations

import collections
import math

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, EmberTypeError, ShapeError
from ..tensor import Tensor
from . import elementwise as ew, logical as lg
from .linalg import matmul
from .linalg_decomp import (check_matrices, cholesky as _cholesky, det, inv, qr as _qr,
                            slogdet, svd as _svd, svdvals)
from .reduce import amax, amin, norm as _reduce_norm, sum
from .shape import movedim, squeeze, unsqueeze, wrap_dim

__all__ = ["vector_norm", "matrix_norm", "norm", "pinv", "lstsq", "matrix_rank",
           "matrix_power", "multi_dot", "vecdot", "diagonal", "cross"]

lstsq_result = collections.namedtuple("lstsq", ["solution", "residuals", "rank",
                                                "singular_values"])
svd_old_result = collections.namedtuple("svd", ["U", "S", "V"])
qr_old_result = collections.namedtuple("qr", ["Q", "R"])


def _float_input(name, A, dtype):
    if not isinstance(A, Tensor):
        raise EmberTypeError(f"{name}: expected a Tensor, got {type(A).__name__}")
    if dtype is not None:
        A = ew.cast(A, dt.as_dtype(dtype))
    if not A.dtype.differentiable:
        raise EmberTypeError(f"{name}: Expected a floating point or complex tensor as "
                             f"input. Got {A.dtype.name}")
    return A


# norms -------------------------------------------------------------------------------------
def vector_norm(x, ord: float = 2, dim=None, keepdim: bool = False, *, dtype=None):
    """The vector ``ord``-norm over ``dim`` (all elements when None): ``sum(|x|**ord) **
    (1/ord)``, with ``inf``/``-inf`` the largest/smallest ``|x|`` and 0 the count of
    non-zeros.

    >>> ember.linalg.vector_norm(ember.tensor([3.0, -4.0]))
    tensor(5.)
    """
    x = _float_input("linalg.vector_norm", x, dtype)
    if x.dtype.is_complex:
        x = ew.abs(x)  # (the norm of the moduli)
    if isinstance(ord, str):
        raise EmberError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    if ord < 0 and x.numel() == 0:
        raise EmberError("linalg.vector_norm cannot compute the negative norm on an empty "
                         "tensor because the operation does not have an identity")
    return _reduce_norm(x, float(ord), dim, keepdim)


def _matrix_dims(name, A, dim):
    if A.ndim < 2:
        raise ShapeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if len(dim) != 2:
        raise EmberError(f"{name}: dim must be a 2-tuple. Got {dim}")
    d0, d1 = wrap_dim(dim[0], A.ndim, name), wrap_dim(dim[1], A.ndim, name)
    if d0 == d1:
        raise EmberError(f"{name}: dims must be different. Got ({dim[0]}, {dim[1]})")
    return d0, d1


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None):
    """The matrix norm of the matrices in dims ``dim`` of ``A``: ``"fro"`` (Frobenius),
    ``"nuc"`` (sum of singular values), 2/-2 (largest/smallest singular value), 1/-1
    (largest/smallest column sum of ``|A|``), ``inf``/``-inf`` (largest/smallest row sum).

    >>> ember.linalg.matrix_norm(ember.tensor([[1.0, -2.0], [3.0, 4.0]]), ord=1)
    tensor(6.)
    """
    A = _float_input("linalg.matrix_norm", A, dtype)
    d0, d1 = _matrix_dims("linalg.matrix_norm", A, tuple(dim))
    if A.dtype.is_complex and ord in ("fro", 1, -1, math.inf, -math.inf):
        A = ew.abs(A)  # (these norms read only the moduli)
    if ord == "fro":
        return _reduce_norm(A, 2.0, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        moved = movedim(A, (d0, d1), (-2, -1))
        s = svdvals(moved)
        out = sum(s, -1) if ord == "nuc" else (amax(s, -1) if ord == 2 else amin(s, -1))
        if keepdim:
            for d in sorted((d0, d1)):
                out = unsqueeze(out, d)
        return out
    if ord in (1, -1, math.inf, -math.inf):
        summed, other = (d0, d1) if abs(ord) == 1 else (d1, d0)
        sums = sum(ew.abs(A), summed, keepdim=True)
        pick = amax if ord > 0 else amin
        out = pick(sums, other, keepdim=True)
        return out if keepdim else squeeze(squeeze(out, max(d0, d1)), min(d0, d1))
    raise EmberError(f"linalg.matrix_norm: Order {ord} not supported.")


def norm(A, ord=None, dim=None, keepdim: bool = False, *, dtype=None):
    """A vector or matrix norm: with ``dim`` an int (or ``A`` 1-D) a vector norm, with
    ``dim`` a 2-tuple (or ``A`` 2-D and ``ord`` given) a matrix norm; with neither
    ``ord`` nor ``dim``, the 2-norm of all elements.

    >>> ember.linalg.norm(ember.tensor([[3.0, 0.0], [0.0, 4.0]]))
    tensor(5.)
    """
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 2 or dim is None and ord is not None and A.ndim == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim or (-2, -1), keepdim,
                           dtype=dtype)
    if dim is None and ord is not None and A.ndim != 1:
        raise EmberError(f"linalg.norm: If dim is not specified but ord is, the input must "
                         f"be 1D or 2D. Got {A.ndim}D.")
    if isinstance(ord, str):
        raise EmberError(f"linalg.norm: ord={ord!r} needs a matrix: pass a 2-tuple dim")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


# pinv / lstsq / matrix_rank ----------------------------------------------------------------------
def _cutoff(S, atol, rtol, shape):
    """``max(atol, rtol * largest singular value)``, per matrix, with PyTorch's defaults:
    rtol is ``eps * max(m, n)`` unless a positive ``atol`` is given alone."""
    if rtol is None:
        positive_atol = atol is not None and (bool((atol > 0).all()) if isinstance(atol, Tensor)
                                              else atol > 0)
        rtol = 0.0 if positive_atol else float(np.finfo(S.dtype.np).eps) * max(shape[-2:])
    tol = amax(S, -1, keepdim=True) * rtol if S.shape[-1] else S
    if atol is not None:
        tol = ew.maximum(tol, unsqueeze(atol, -1) if isinstance(atol, Tensor) and atol.ndim
                         else atol)
    return tol


def pinv(A, *, atol=None, rtol=None, hermitian: bool = False):
    """The Moore-Penrose pseudo-inverse of each matrix of ``A`` (``(*, m, n)`` gives
    ``(*, n, m)``), from its SVD, dropping singular values at or below
    ``max(atol, rtol * largest)``.

    >>> ember.linalg.pinv(ember.tensor([[2.0, 0.0], [0.0, 0.0]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.0000]])
    """
    check_matrices("linalg.pinv", A, square=False)
    U, S, Vh = _svd(A, full_matrices=False)
    tol = _cutoff(S, atol, rtol, A.shape)
    keep = lg.gt(S, tol)
    s_inv = ew.where(keep, 1.0 / ew.where(keep, S, 1.0), 0.0)
    return matmul(Vh.mH * unsqueeze(s_inv, -2), U.mH)  # (mH: the transpose if real)


def lstsq(A, B, rcond=None, *, driver=None):
    """The least-squares solution ``X`` minimising ``||A X - B||`` for each matrix of ``A``
    (``(*, m, n)``) and ``B`` (``(*, m, k)``), through the pseudo-inverse; returns
    ``(solution, residuals, rank, singular_values)`` like PyTorch's default CPU driver
    (``gelsy``): ``residuals`` and ``singular_values`` are empty.

    >>> ember.linalg.lstsq(ember.tensor([[1.0], [1.0]]), ember.tensor([[1.0], [3.0]])).solution
    tensor([[2.]])
    """
    check_matrices("linalg.lstsq", A, square=False)
    if not isinstance(B, Tensor) or B.dtype is not A.dtype:
        raise EmberTypeError("linalg.lstsq: Expected B to be a Tensor of A's dtype")
    vector = B.ndim == A.ndim - 1
    Bm = unsqueeze(B, -1) if vector else B
    if Bm.shape[-2] != A.shape[-2]:
        raise ShapeError(f"torch.linalg.lstsq: input.size(-2) should match other.size(-2) "
                         f"(got {A.shape[-2]} and {Bm.shape[-2]})")
    rtol = None if rcond is None else float(rcond)
    X = matmul(pinv(A, rtol=rtol), Bm)
    from .creation import zeros
    empty = zeros((0,), dtype=A.dtype, device=A.device)
    rank = matrix_rank(A.detach(), rtol=rtol)
    return lstsq_result(squeeze(X, -1) if vector else X, empty, rank, empty)


def matrix_rank(A, *, atol=None, rtol=None, hermitian: bool = False, tol=None):
    """The number of singular values of each matrix of ``A`` above
    ``max(atol, rtol * largest)`` (int64).

    >>> ember.linalg.matrix_rank(ember.tensor([[1.0, 2.0], [2.0, 4.0]]))
    tensor(1)
    """
    check_matrices("linalg.matrix_rank", A, square=False)
    if tol is not None:
        atol, rtol = tol, 0.0
    S = svdvals(A.detach())
    keep = lg.gt(S, _cutoff(S, atol, rtol, A.shape))
    return sum(keep, -1)


# products ----------------------------------------------------------------------------------
def matrix_power(A, n: int):
    """``A`` multiplied by itself ``n`` times (the identity for 0, powers of the inverse
    for negative ``n``), for each square matrix of ``A``.

    >>> ember.linalg.matrix_power(ember.tensor([[1.0, 1.0], [0.0, 1.0]]), 3)
    tensor([[1., 3.],
            [0., 1.]])
    """
    if not isinstance(A, Tensor) or A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ShapeError("linalg.matrix_power: A must be batches of square matrices, got "
                         f"shape {tuple(getattr(A, 'shape', ()))}")
    if not isinstance(n, int):
        raise EmberTypeError(f"linalg.matrix_power: n must be an int, got {type(n).__name__}")
    if n == 0:
        from .creation import eye
        from .shape import expand
        return expand(eye(A.shape[-1], dtype=A.dtype, device=A.device), tuple(A.shape)) + \
            A * 0
    if n < 0:
        A, n = inv(A), -n
    result, base = None, A
    while n:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return result


def multi_dot(tensors):
    """The product of a chain of matrices (the first may be a 1-D row vector and the last
    a 1-D column vector, which drop from the result).

    >>> ember.linalg.multi_dot([ember.ones(2), ember.eye(2), ember.ones(2)])
    tensor(2.)
    """
    tensors = list(tensors)
    if len(tensors) < 2:
        raise EmberError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    for i, t in enumerate(tensors):
        expected = (1, 2) if i in (0, len(tensors) - 1) else (2,)
        if t.ndim not in expected:
            raise ShapeError(f"multi_dot(): tensor {i} must be "
                             f"{' or '.join(f'{d}D' for d in expected)} but got {t.ndim}D")
    out = tensors[0]
    for t in tensors[1:]:
        out = matmul(out, t)
    return out


def vecdot(x, y, *, dim: int = -1):
    """The dot product of ``x`` and ``y`` along ``dim``, broadcasting the other dims.

    >>> ember.linalg.vecdot(ember.tensor([1.0, 2.0]), ember.tensor([3.0, 4.0]))
    tensor(11.)
    """
    if x.dtype.is_complex:  # (the first conjugated, as in PyTorch)
        from .complex_support import conj_physical
        x = conj_physical(x)
    return sum(x * y, dim)


def diagonal(A, *, offset: int = 0, dim1: int = -2, dim2: int = -1):
    """The diagonal ``offset`` of each matrix of ``A`` (over its last two dims), as a view.

    >>> ember.linalg.diagonal(ember.eye(2))
    tensor([1., 1.])
    """
    from .movement import diagonal as _diagonal
    return _diagonal(A, offset, dim1, dim2)


def cross(input, other, *, dim: int = -1):
    """The cross product of 3-vectors along ``dim`` (default the last), broadcasting.

    >>> ember.linalg.cross(ember.tensor([1.0, 0.0, 0.0]), ember.tensor([0.0, 1.0, 0.0]))
    tensor([0., 0., 1.])
    """
    from .math_extra import _cross
    if input.dtype is not other.dtype:
        raise EmberTypeError(f"linalg.cross: expected input and other to have the same "
                             f"dtype, got {input.dtype.name} and {other.dtype.name}")
    return _cross(input, other, dim, "linalg.cross")


# PyTorch's top-level names -------------------------------------------------------------------
def inverse(input):
    """The inverse of each square matrix (:func:`ember.linalg.inv`)."""
    return inv(input)


def logdet(input):
    """``log(det(input))``: NaN where the determinant is negative, -inf where it is 0.

    >>> ember.logdet(ember.tensor([[2.0, 0.0], [0.0, 3.0]]))
    tensor(1.7918)
    """
    sign, logabs = slogdet(input)
    if sign.dtype.is_complex:  # log(det) = log|det| + log(phase), both differentiable
        return logabs + ew.log(sign)
    return logabs + ew.log(sign.detach())


def svd(input, some: bool = True, compute_uv: bool = True):
    """``(U, S, V)`` with ``input = U diag(S) V^T`` (PyTorch's older convention: ``V``,
    not ``Vh``; ``some=False`` gives square ``U`` and ``V``). Without ``compute_uv``,
    ``U`` and ``V`` are zero.

    >>> ember.svd(ember.tensor([[3.0, 0.0], [0.0, 2.0]])).S
    tensor([3., 2.])
    """
    U, S, Vh = _svd(input, full_matrices=not some)
    if not compute_uv:
        return svd_old_result(ew.mul(U.detach(), 0.0), S, ew.mul(Vh.mT.detach(), 0.0))
    return svd_old_result(U, S, Vh.mT)


def pinverse(input, rcond: float = 1e-15):
    """The pseudo-inverse, dropping singular values at or below ``rcond`` times the
    largest (:func:`ember.linalg.pinv`)."""
    return pinv(input, rtol=rcond)


def cholesky(input, upper: bool = False):
    """The Cholesky factor (PyTorch's older ``torch.cholesky``)."""
    return _cholesky(input, upper=upper)


def qr(input, some: bool = True):
    """``(Q, R)`` (PyTorch's older ``torch.qr``: ``some=False`` gives a square ``Q``)."""
    return qr_old_result(*_qr(input, mode="reduced" if some else "complete"))


TOP_LEVEL = {"det": det, "slogdet": slogdet, "inverse": inverse, "logdet": logdet,
             "svd": svd, "pinverse": pinverse, "cholesky": cholesky, "qr": qr,
             "matrix_power": matrix_power}
