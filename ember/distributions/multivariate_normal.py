"""Multivariate normal distributions: MultivariateNormal (given a covariance, precision
or lower Cholesky factor) and LowRankMultivariateNormal (covariance ``W W^T + D``)."""
from __future__ import annotations

import math

from ..errors import EmberValueError, ShapeError
from ..ops.creation import eye
from ..ops.linalg_decomp import cholesky
from ..ops.linalg_solvers import cholesky_inverse
from ..ops.shape import broadcast_shapes, broadcast_tensors
from ..tensor import Size
from . import constraints
from .distribution import Distribution
from .utils import _standard_normal, lazy_property, solve_lower

__all__ = ["MultivariateNormal", "LowRankMultivariateNormal"]


def _batch_mv(bmat, bvec):
    """Matrix-vector products over broadcast batch dimensions."""
    return (bmat @ bvec.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(bL, bx):
    """The squared Mahalanobis distance ``x^T (L L^T)^-1 x`` for a lower-triangular
    ``L`` of shape ``(..., n, n)`` and ``x`` of shape ``(..., n)`` whose batch shape
    ends with (a broadcast of) L's: one triangular solve, L never copied per sample.

    ``x``'s batch dimensions are split into the outer ones and those that pair with L's
    (each L dim ``sL`` with ``sx // sL`` copies of it), the copies moved last, so that a
    single solve with the ``k`` matrices of L handles every right-hand side."""
    n = bx.shape[-1]
    bx_batch = tuple(bx.shape[:-1])
    l_dims = bL.dim() - 2
    outer = len(bx_batch) - l_dims
    split = bx_batch[:outer]
    for sL, sx in zip(bL.shape[:-2], bx_batch[outer:]):
        split += (sx // sL if sL else 1, sL)
    bx = bx.reshape(split + (n,))
    new_dims = outer + 2 * l_dims
    order = (list(range(outer)) + list(range(outer, new_dims, 2)) +
             list(range(outer + 1, new_dims, 2)) + [new_dims])
    bx = bx.permute(order)
    k = math.prod(bL.shape[:-2])
    flat_L = bL.reshape(k, n, n)
    flat_x = bx.reshape(bx.numel() // (k * n) if k * n else 0, k, n)   # (m, k, n)
    rhs = flat_x.permute(1, 2, 0)                       # (k, n, m)
    m_swap = solve_lower(flat_L, rhs).pow(2).sum(-2)  # (k, m)
    permuted = m_swap.t().reshape(tuple(bx.shape[:-1]))
    inverse = list(range(outer))
    for i in range(l_dims):
        inverse += [outer + i, outer + l_dims + i]
    return permuted.permute(inverse).reshape(bx_batch)


def _precision_to_scale_tril(P):
    # the Cholesky factor of the covariance P^-1 without inverting P: flip, factor,
    # flip back and invert the triangular result
    Lf = cholesky(P.flip((-2, -1)))
    L_inv = Lf.flip((-2, -1)).transpose(-2, -1)
    Id = eye(P.shape[-1], dtype=P.dtype, device=P.device)
    return solve_lower(L_inv, Id)


class MultivariateNormal(Distribution):
    """The multivariate normal distribution with mean ``loc`` and a positive-definite
    covariance given by exactly one of ``covariance_matrix``, ``precision_matrix`` or
    ``scale_tril`` (its lower Cholesky factor; the cheapest to use).

    Args:
        loc: the mean, shape ``batch_shape + (n,)``.
        covariance_matrix: positive-definite, shape ``(..., n, n)``.
        precision_matrix: positive-definite, shape ``(..., n, n)``.
        scale_tril: lower-triangular with a positive diagonal, shape ``(..., n, n)``.
        validate_args: see :class:`Distribution`.

    >>> m = MultivariateNormal(ember.zeros(2), ember.eye(2))
    >>> m.sample().shape
    ember.Size([2])
    """
    arg_constraints = {"loc": constraints.real_vector,
                       "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args: bool | None = None) -> None:
        if loc.dim() < 1:
            raise EmberValueError("loc must be at least one-dimensional.")
        given = [(name, m) for name, m in (("scale_tril", scale_tril),
                                          ("covariance_matrix", covariance_matrix),
                                          ("precision_matrix", precision_matrix))
                 if m is not None]
        if len(given) != 1:
            raise EmberValueError("Exactly one of covariance_matrix or precision_matrix or "
                                  "scale_tril may be specified.")
        name, matrix = given[0]
        if matrix.dim() < 2:
            what = "scale_tril matrix" if name == "scale_tril" else name
            raise EmberValueError(f"{what} must be at least two-dimensional, with optional "
                                  "leading batch dimensions")
        try:
            batch_shape = broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1]))
        except Exception:
            raise ShapeError(f"MultivariateNormal: loc of shape {tuple(loc.shape)} and "
                             f"{name} of shape {tuple(matrix.shape)} have batch shapes that "
                             "do not broadcast") from None
        setattr(self, name, matrix.expand(tuple(batch_shape) + (-1, -1)))
        self.loc = loc.expand(tuple(batch_shape) + (-1,))
        super().__init__(batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = matrix
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = cholesky(matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = Size(batch_shape)
        loc_shape = tuple(batch_shape + self.event_shape)
        cov_shape = tuple(batch_shape + self.event_shape + self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(cov_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return tuple(self._batch_shape + self._event_shape + self._event_shape)

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        return cholesky_inverse(self._unbroadcasted_scale_tril).expand(self._matrix_shape())

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(
            tuple(self._batch_shape + self._event_shape))

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + M) - \
            self._half_log_det()

    def entropy(self):
        H = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        if len(self._batch_shape) == 0:
            return H
        return H.expand(tuple(self._batch_shape))


def _batch_capacitance_tril(W, D):
    """The Cholesky factor of ``I + W^T D^-1 W`` (the capacitance matrix)."""
    m = W.shape[-1]
    K = (W.mT / D.unsqueeze(-2)) @ W
    return cholesky(K + eye(m, dtype=W.dtype, device=W.device))


def _batch_lowrank_logdet(W, D, capacitance_tril):
    """``log det(W W^T + D)`` by the matrix determinant lemma."""
    return 2 * capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + D.log().sum(-1)


def _batch_lowrank_mahalanobis(W, D, x, capacitance_tril):
    """``x^T (W W^T + D)^-1 x`` by the Woodbury identity."""
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    Wt_Dinv_x = _batch_mv(Wt_Dinv, x)
    term1 = (x.pow(2) / D).sum(-1)
    term2 = _batch_mahalanobis(capacitance_tril, Wt_Dinv_x)
    return term1 - term2


class LowRankMultivariateNormal(Distribution):
    """A multivariate normal whose covariance has low-rank-plus-diagonal form
    ``cov_factor @ cov_factor.T + diag(cov_diag)``; log_prob and entropy cost
    O(n m^2) instead of O(n^3) for ``cov_factor`` of shape ``(n, m)``.

    Args:
        loc: the mean, shape ``batch_shape + (n,)``.
        cov_factor: the factor W, shape ``batch_shape + (n, m)``.
        cov_diag: the diagonal D, positive, shape ``batch_shape + (n,)``.
        validate_args: see :class:`Distribution`.

    >>> m = LowRankMultivariateNormal(ember.zeros(2), ember.tensor([[1.0], [0.0]]),
    ...                               ember.ones(2))
    >>> m.sample().shape
    ember.Size([2])
    """
    arg_constraints = {"loc": constraints.real_vector,
                       "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args: bool | None = None) -> None:
        if loc.dim() < 1:
            raise EmberValueError("loc must be at least one-dimensional.")
        event_shape = loc.shape[-1:]
        if cov_factor.dim() < 2:
            raise EmberValueError("cov_factor must be at least two-dimensional, with optional "
                                  "leading batch dimensions")
        if tuple(cov_factor.shape[-2:-1]) != tuple(event_shape):
            raise EmberValueError(f"cov_factor must be a batch of matrices with shape "
                                  f"{event_shape[0]} x m")
        if tuple(cov_diag.shape[-1:]) != tuple(event_shape):
            raise EmberValueError(f"cov_diag must be a batch of vectors with shape "
                                  f"{event_shape}")
        try:
            loc_, self.cov_factor, cov_diag_ = broadcast_tensors(
                loc.unsqueeze(-1), cov_factor, cov_diag.unsqueeze(-1))
        except Exception:
            raise EmberValueError(f"Incompatible batch shapes: loc {loc.shape}, cov_factor "
                                  f"{cov_factor.shape}, cov_diag {cov_diag.shape}") from None
        self.loc = loc_[..., 0]
        self.cov_diag = cov_diag_[..., 0]
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = _batch_capacitance_tril(cov_factor, cov_diag)
        super().__init__(self.loc.shape[:-1], event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        batch_shape = Size(batch_shape)
        loc_shape = tuple(batch_shape + self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new.cov_diag = self.cov_diag.expand(loc_shape)
        new.cov_factor = self.cov_factor.expand(loc_shape + tuple(self.cov_factor.shape[-1:]))
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return tuple(self._batch_shape + self._event_shape + self._event_shape)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        W, D = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        return (W.pow(2).sum(-1) + D).expand(tuple(self._batch_shape + self._event_shape))

    @lazy_property
    def scale_tril(self):
        # cholesky(W W^T + D) = D^1/2 cholesky(I + D^-1/2 W W^T D^-1/2), better conditioned
        n = self._event_shape[0]
        sqrt_d = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        scaled_W = self._unbroadcasted_cov_factor / sqrt_d
        K = scaled_W @ scaled_W.mT + eye(n, dtype=sqrt_d.dtype, device=sqrt_d.device)
        return (sqrt_d * cholesky(K)).expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        W = self._unbroadcasted_cov_factor
        return (W @ W.mT + self._unbroadcasted_cov_diag.diag_embed()).expand(
            self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        # (W W^T + D)^-1 = D^-1 - D^-1 W C^-1 W^T D^-1 (Woodbury)
        W, D = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        A = solve_lower(self._capacitance_tril, W.mT / D.unsqueeze(-2))
        return (D.reciprocal().diag_embed() - A.mT @ A).expand(self._matrix_shape())

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        w_shape = tuple(shape[:-1]) + tuple(self.cov_factor.shape[-1:])
        eps_W = _standard_normal(w_shape, dtype=self.loc.dtype, device=self.loc.device)
        eps_D = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_cov_factor, eps_W) + \
            self._unbroadcasted_cov_diag.sqrt() * eps_D

    def _log_det(self):
        return _batch_lowrank_logdet(self._unbroadcasted_cov_factor,
                                     self._unbroadcasted_cov_diag, self._capacitance_tril)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        M = _batch_lowrank_mahalanobis(self._unbroadcasted_cov_factor,
                                       self._unbroadcasted_cov_diag, value - self.loc,
                                       self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + self._log_det() + M)

    def entropy(self):
        H = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._log_det())
        if len(self._batch_shape) == 0:
            return H
        return H.expand(tuple(self._batch_shape))
