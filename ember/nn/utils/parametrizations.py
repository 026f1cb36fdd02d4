"""Ready-made parametrizations, as ``torch.nn.utils.parametrizations``: ``orthogonal``,
``weight_norm`` and ``spectral_norm``, each registered with
:func:`~ember.nn.utils.parametrize.register_parametrization` (so the state-dict keys are
PyTorch's: ``parametrizations.weight.original``, ``...original0``/``original1``,
``parametrizations.weight.0._u``)."""
from __future__ import annotations

from enum import Enum, auto

import numpy as np

from ...autograd import grad_mode
from ...errors import EmberIndexError
from ...linalg.householder import householder_product
from ...ops.creation import eye, zeros_like
from ...ops.linalg import matmul
from ...ops.linalg_decomp import qr, solve
from ...ops.linalg_extra import vector_norm
from ...ops.linalg_more import matrix_exp
from ...ops.shape import cat
from ...tensor import Tensor
from .. import functional as F
from ..layers.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from ..module import Module
from . import parametrize

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


# Orthogonal ----------------------------------------------------------------------------------
def _geqrf(A: Tensor) -> tuple[Tensor, Tensor]:
    """LAPACK's ``geqrf`` of ``(*, n, k)`` ``A``: R on and above the diagonal, the
    Householder vectors below it, and their scales ``tau`` (not differentiable)."""
    xp = A.device.backend.xp
    h, tau = xp.linalg.qr(A.detach()._data, mode="raw")
    return (Tensor._make(xp.ascontiguousarray(xp.swapaxes(h, -1, -2)), A.device),
            Tensor._make(tau, A.device))


def _make_orthogonal(A: Tensor) -> Tensor:
    """The Q of A's QR decomposition whose R has a positive diagonal."""
    Q, R = qr(A)
    return Q * R.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


def _is_orthogonal(Q: Tensor) -> bool:
    n, k = Q.shape[-2], Q.shape[-1]
    eye_k = eye(k, dtype=Q.dtype, device=Q.device)
    atol = 10.0 * n * float(np.finfo(Q.dtype.np).eps)
    return bool((matmul(Q.mT, Q) - eye_k).abs().le(atol + 1e-5 * eye_k.abs()).all())


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


class _Orthogonal(Module):
    def __init__(self, weight: Tensor, orthogonal_map: _OrthMaps, *,
                 use_trivialization: bool = True):
        super().__init__()
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X: Tensor) -> Tensor:
        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()
            if n != k:  # embed the tall matrix into a square one
                X = cat([X, X.new_zeros((n, n - k)).expand(*X.shape[:-2], n, n - k)], dim=-1)
            A = X - X.mT  # skew-symmetric
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = matrix_exp(A)
            else:  # the Cayley retraction (I + A/2)(I - A/2)^{-1}
                eye_n = eye(n, dtype=A.dtype, device=A.device)
                Q = solve(eye_n - 0.5 * A, eye_n + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = householder_product(A, tau)
            # The diagonal of X holds the signs (+-1); it is not differentiated through.
            Q = Q * X.diagonal(dim1=-2, dim2=-1).detach().int().unsqueeze(-2)
        if "base" in self._buffers:
            Q = matmul(self.base, Q)
        return Q.mT if transposed else Q

    def right_inverse(self, Q: Tensor) -> Tensor:
        if Q.shape != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                             f"Got a tensor of shape {Q.shape}.")
        with grad_mode.no_grad():
            Q_init = Q
            n, k = Q.shape[-2], Q.shape[-1]
            transpose = n < k
            if transpose:
                Q = Q.mT
                n, k = k, n
            if "base" not in self._buffers:
                if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                    raise NotImplementedError("It is not possible to assign to the matrix "
                                              "exponential or the Cayley parametrizations "
                                              "when use_trivialization=False.")
                A, tau = _geqrf(Q)
                # Keep the signs of R's diagonal on the diagonal (the reflectors' implicit
                # 1s); a reflector LAPACK skipped (tau == 0) flips it.
                diag = A.diagonal(dim1=-2, dim2=-1)
                signs = diag.sgn() * (1.0 - 2.0 * (tau == 0.0).to(A.dtype))
                A = A.tril(diagonal=-1) + A.triu(diagonal=1) + _diag_embed_like(A, signs)
                return A.mT if transpose else A
            if n == k:
                Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:  # complete Q into an n x n orthogonal matrix
                N = Q.new_empty((*Q.shape[:-2], n, n - k)).normal_()
                Q = _make_orthogonal(cat([Q, N], dim=-1))
            self.base = Q
            # -Id: the Householder map sends zeros with a -1 diagonal to the identity.
            return zeros_like(Q_init) - eye(Q_init.shape[-2], Q_init.shape[-1],
                                            dtype=Q_init.dtype, device=Q_init.device)


def _diag_embed_like(A: Tensor, d: Tensor) -> Tensor:
    """A tensor shaped as ``A`` with ``d`` on its main diagonal, zeros elsewhere."""
    n, k = A.shape[-2], A.shape[-1]
    return eye(n, k, dtype=A.dtype, device=A.device) * d.unsqueeze(-2)


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Constrain the matrix (or batch of matrices) ``module.<name>`` to be orthogonal:
    ``Q^T Q = I`` for a tall ``Q``, ``Q Q^T = I`` for a wide one.

    The map from the unconstrained ``original`` is ``"matrix_exp"`` (the exponential of
    a skew-symmetric matrix), ``"cayley"`` (``(I + A/2)(I - A/2)^{-1}``) or
    ``"householder"`` (a product of reflectors). The default is ``"matrix_exp"`` for
    square matrices and ``"householder"`` otherwise, as PyTorch's. With
    ``use_trivialization`` (default) the map is composed with an orthogonal ``base``
    buffer that starts at the weight's orthogonalisation (QR), so the module starts from
    that matrix and ``original`` from ``-I``; assigning ``module.<name> = Q`` resets it.
    A non-square weight's base is completed with random columns.

    Args:
        module: the module.
        name: the tensor's name (at least 2-D).
        orthogonal_map: ``"matrix_exp"``, ``"cayley"``, ``"householder"`` or None.
        use_trivialization: keep the ``base`` buffer (without it, only the Householder
            map can be assigned to).

    Returns:
        ``module``.

    >>> m = ember.nn.utils.parametrizations.orthogonal(ember.nn.Linear(20, 40))
    >>> bool(ember.allclose(m.weight.T @ m.weight, ember.eye(20), atol=1e-5))
    True
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of "
                         f"{weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = ("matrix_exp" if weight.shape[-2] == weight.shape[-1]
                          else "householder")
    orth_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", '
                         f'"householder". Got: {orthogonal_map}')
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


# Weight norm ---------------------------------------------------------------------------------
def _norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """The 2-norm of ``v`` over every dim but ``dim`` (kept, size 1); over all of ``v``
    (a 0-d tensor) when ``dim == -1``, as PyTorch's ``norm_except_dim``."""
    if dim == -1:
        return vector_norm(v)
    dim = dim % v.ndim
    others = tuple(d for d in range(v.ndim) if d != dim)
    return vector_norm(v, 2, dim=others, keepdim=True) if others else v.abs()


class _WeightNorm(Module):
    def __init__(self, dim: int | None = 0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_v * (weight_g / _norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight: Tensor):
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int = 0) -> Module:
    """Reparametrize ``module.<name>`` as ``g * v / ||v||``: a magnitude
    ``original0`` (``g``, the norm over every dim but ``dim``) and a direction
    ``original1`` (``v``, starting as the weight). ``dim=None`` takes one norm of the
    whole tensor. A state dict of the older :func:`ember.nn.utils.weight_norm`
    (``weight_g``/``weight_v``) loads into it.

    Args:
        module: the module.
        name: the weight's name.
        dim: the dim that keeps its own norms.

    Returns:
        ``module``.

    >>> m = ember.nn.utils.parametrizations.weight_norm(ember.nn.Linear(20, 40))
    >>> m.parametrizations.weight.original0.shape
    ember.Size([40, 1])
    """
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def load_old_keys(state: dict, prefix: str) -> None:
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state and v_key in state:
            state[f"{prefix}parametrizations.{name}.original0"] = state.pop(g_key)
            state[f"{prefix}parametrizations.{name}.original1"] = state.pop(v_key)

    module.__dict__.setdefault("_parametrize_load_hooks", []).append(load_old_keys)
    return module


# Spectral norm -------------------------------------------------------------------------------
class _SpectralNorm(Module):
    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise EmberIndexError(f"Dimension out of range (expected to be in range of "
                                  f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:  # a vector is normalised exactly, without power iteration
            self.n_power_iterations = n_power_iterations
            with grad_mode.no_grad():
                weight_mat = self._reshape_weight_to_matrix(weight.detach())
                h, w = weight_mat.shape
                u = weight_mat.new_empty((h,)).normal_(0, 1)
                v = weight_mat.new_empty((w,)).normal_(0, 1)
                self.register_buffer("_u", F.normalize(u, dim=0, eps=self.eps))
                self.register_buffer("_v", F.normalize(v, dim=0, eps=self.eps))
            self._power_method(weight_mat, 15)  # start from reasonable singular vectors

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim)
                                                if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        # u and v are updated in place, so that every holder of the buffers sees them.
        with grad_mode.no_grad():
            weight_mat = weight_mat.detach()
            for _ in range(n_power_iterations):
                self._u.copy_(F.normalize(matmul(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(matmul(weight_mat.mT, self._u), dim=0,
                                          eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        # Clones: a later forward's in-place update must not change this graph's u and v.
        u, v = self._u.clone(), self._v.clone()
        sigma = (u * matmul(weight_mat, v)).sum()
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    """Divide ``module.<name>`` by its spectral norm (largest singular value), estimated
    by power iteration: each forward in training mode runs ``n_power_iterations`` steps
    that update the buffers ``_u`` and ``_v`` (in ``module.parametrizations.<name>[0]``;
    15 steps run at registration). In evaluation mode the stored vectors are used as
    they are. A 1-D tensor is simply normalised.

    Args:
        module: the module.
        name: the weight's name.
        n_power_iterations: power-iteration steps per training forward.
        eps: added for numerical stability when normalising.
        dim: the output dim (0, or 1 for ``ConvTranspose``, by default); the weight is
            flattened to a matrix with this dim as rows.

    Returns:
        ``module``.

    >>> m = ember.nn.utils.parametrizations.spectral_norm(ember.nn.Linear(20, 40))
    >>> m.parametrizations.weight[0]._u.shape
    ember.Size([40])
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d,
                                       ConvTranspose3d)) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module

