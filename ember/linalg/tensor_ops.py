"""``linalg.tensorinv``, ``linalg.tensorsolve`` and ``linalg.vander``: reshapes around
``inv``/``solve`` and a cumulative product, so differentiable (to any order) and
traceable by ``ember.jit``."""
from __future__ import annotations

import math

from .. import dtypes as dt
from ..errors import EmberError, EmberTypeError, ShapeError
from ..ops import elementwise as ew
from ..ops.creation import ones
from ..ops.linalg_decomp import inv, solve
from ..ops.shape import movedim, reshape, stack, wrap_dim
from ..tensor import Tensor

__all__ = ["tensorinv", "tensorsolve", "vander"]


def _tensor(name, t, what="A"):
    if not isinstance(t, Tensor):
        raise EmberTypeError(f"{name}: expected {what} to be a Tensor, got {type(t).__name__}")
    return t


def tensorinv(A, ind: int = 2):
    """The inverse of ``A`` for :func:`ember.tensordot` over ``ind`` dims: with ``A`` seen
    as a matrix of ``prod(A.shape[:ind])`` rows and ``prod(A.shape[ind:])`` columns (which
    must be equal), its inverse reshaped to ``A.shape[ind:] + A.shape[:ind]``.

    >>> A = ember.eye(6).reshape(6, 2, 3)
    >>> ember.linalg.tensorinv(A, ind=1).shape
    ember.Size([2, 3, 6])
    """
    A = _tensor("linalg.tensorinv", A)
    if not isinstance(ind, int) or ind <= 0:
        raise EmberError(f"linalg.tensorinv: Expected a strictly positive integer for 'ind', "
                         f"but got {ind}")
    rows, cols = math.prod(A.shape[:ind]), math.prod(A.shape[ind:])
    if rows != cols:
        raise ShapeError(f"linalg.tensorinv: Expected self to satisfy the requirement "
                         f"prod(self.shape[ind:]) == prod(self.shape[:ind]), but got {cols} "
                         f"!= {rows}")
    out = inv(reshape(A, (rows, cols)))
    return reshape(out, tuple(A.shape[ind:]) + tuple(A.shape[:ind]))


def tensorsolve(A, B, dims=None):
    """The ``X`` with ``tensordot(A, X, X.ndim) == B``: ``A`` seen as a square matrix of
    ``B.numel()`` rows (its first ``B.ndim`` dims) and ``prod(A.shape[B.ndim:])`` columns.
    ``dims`` moves those dims of ``A`` to the end first. ``X`` has shape
    ``A.shape[B.ndim:]``.

    >>> A = ember.eye(6).reshape(2, 3, 6)
    >>> ember.linalg.tensorsolve(A, ember.ones(2, 3)).shape
    ember.Size([6])
    """
    name = "linalg.tensorsolve"
    A = _tensor(name, A)
    B = _tensor(name, B, "B")
    if dims is not None:
        dims = [wrap_dim(d, A.ndim, name) for d in dims]
        A = movedim(A, dims, list(range(A.ndim - len(dims), A.ndim)))
    result_shape = tuple(A.shape[B.ndim:])
    rows, cols = math.prod(A.shape[:B.ndim]), math.prod(result_shape)
    if rows != cols:
        raise ShapeError(f"{name}: Expected self to satisfy the requirement "
                         f"prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), "
                         f"but got {cols} != {rows}")
    if B.numel() != rows:
        raise ShapeError(f"{name}: B has {B.numel()} elements but A (shape "
                         f"{tuple(A.shape)}) needs {rows}")
    if B.dtype is not A.dtype:
        B = ew.cast(B, dt.promote_types(A.dtype, B.dtype))
        A = ew.cast(A, B.dtype)
    X = solve(reshape(A, (rows, cols)), reshape(B, (rows,)))
    return reshape(X, result_shape)


def vander(x, *, N: int | None = None):
    """The Vandermonde matrix of the last dim of ``x``: ``(*, n)`` gives ``(*, n, N)``
    with ``out[..., i, j] = x[..., i] ** j`` (increasing powers; ``N`` defaults to
    ``n`` and must be greater than 1).

    >>> ember.linalg.vander(ember.tensor([1, 2, 3]))
    tensor([[1, 1, 1],
            [1, 2, 4],
            [1, 3, 9]])
    """
    x = _tensor("linalg.vander", x, "x")
    if x.ndim == 0:
        raise ShapeError("linalg.vander: x must have at least one dimension, got a 0-d tensor")
    n = x.shape[-1] if N is None else N
    if n <= 1:
        raise EmberError(f"linalg.vander: N must be greater than 1 (got {n})")
    if x.dtype is dt.bool:
        x = ew.cast(x, dt.int64)
    # x ** j by repeated products (cumprod's values, without its data-dependent VJP)
    power = ones(tuple(x.shape), dtype=x.dtype, device=x.device)
    columns = [power]
    for _ in range(n - 1):
        power = power * x
        columns.append(power)
    return stack(columns, -1)
