"""``linalg.householder_product``: the product of Householder reflectors (LAPACK's
``orgqr``), as a composition of ember ops (differentiable in both arguments, to any
order, and traceable by ``ember.jit``)."""
from __future__ import annotations

from ..errors import EmberTypeError, ShapeError
from ..ops.creation import eye, ones
from ..ops.elementwise import where
from ..ops.linalg import matmul
from ..ops.linalg_decomp import check_matrices
from ..tensor import Tensor

__all__ = ["householder_product"]


def householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """The first ``n`` columns of ``H_1 H_2 ... H_k``, ``H_i = I - tau_i v_i v_i^T``,
    where ``v_i`` is column ``i`` of ``A`` below the diagonal with a 1 on it (the
    Householder vectors ``geqrf`` leaves in its input).

    Args:
        A: ``(*, m, n)`` with ``m >= n``: the Householder vectors in its columns.
        tau: ``(*, k)`` with ``k <= n`` and the same batch dims as ``A``: the scales.

    Returns:
        ``(*, m, n)``, with orthonormal columns when ``tau`` holds ``geqrf``'s scales.

    >>> A = ember.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    >>> ember.linalg.householder_product(A, ember.tensor([1.0, 0.0]))
    tensor([[ 0., -1.],
            [-1.,  0.],
            [ 0.,  0.]])
    """
    name = "torch.linalg.householder_product"
    check_matrices(name, A, square=False)
    if not isinstance(tau, Tensor):
        raise EmberTypeError(f"{name}: expected tau to be a Tensor, got {type(tau).__name__}")
    if tau.dtype is not A.dtype:
        raise EmberTypeError(f"{name}: tau dtype {tau.dtype.name} does not match input dtype "
                             f"{A.dtype.name}")
    m, n = A.shape[-2], A.shape[-1]
    if m < n:
        raise ShapeError(f"{name}: input.shape[-2] must be greater than or equal to "
                         f"input.shape[-1] (got shape {tuple(A.shape)})")
    if tau.ndim != A.ndim - 1:
        raise ShapeError(f"{name}: input must have one more dimension than tau, got "
                         f"shapes {tuple(A.shape)} and {tuple(tau.shape)}")
    k = tau.shape[-1]
    if k > n:
        raise ShapeError(f"{name}: input.shape[-1] must be greater than or equal to "
                         f"tau.shape[-1] (got {n} and {k})")
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise ShapeError(f"{name}: Expected batch dimensions of tau to be equal to "
                         f"input.shape[:-2], but got {list(tau.shape[:-1])}")
    below = ones((m, n), dtype=A.dtype, device=A.device).tril(diagonal=-1)
    ones_on_diagonal = eye(m, n, dtype=A.dtype, device=A.device)
    V = A * below + ones_on_diagonal  # column i is v_i
    Q = ones_on_diagonal.expand(*A.shape[:-2], m, n)
    if k == 0:  # the identity, still connected to A (a zero gradient), as PyTorch's
        return where(ones_on_diagonal.bool() | True, Q, A)
    for i in range(k - 1, -1, -1):  # H_1 (H_2 (... (H_k I)))
        v = V[..., :, i:i + 1]
        Q = Q - (tau[..., i:i + 1].unsqueeze(-1) * v) * matmul(v.mH, Q)  # (mH: v^T if real)
    return Q
