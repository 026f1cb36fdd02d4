"""Transforms onto sets of matrices: :class:`CorrCholeskyTransform` (vectors to Cholesky
factors of correlation matrices) and :class:`PositiveDefiniteTransform`. ``transforms.py``
exports them."""
from __future__ import annotations

import math

from ..errors import EmberValueError
from ..ops.activation import softplus
from ..ops.creation import eye
from ..ops.linalg_decomp import cholesky
from ..ops.movement import pad
from ..tensor import Size
from . import constraints
from ._transform_base import Transform
from .transforms import LowerCholeskyTransform
from .utils import finfo, tril_matrix_to_vec, vec_to_tril_matrix

__all__ = ["CorrCholeskyTransform", "PositiveDefiniteTransform"]


class CorrCholeskyTransform(Transform):
    """A bijection from unconstrained vectors of length ``D (D - 1) / 2`` to lower
    Cholesky factors of ``D x D`` correlation matrices (lower triangular, positive
    diagonal, rows of unit length).

    The vector fills the strictly lower triangle in row order; each row then goes
    through ``tanh`` (into (-1, 1)) and a signed stick breaking on the squares, which
    leaves it of unit length with the diagonal entry positive.

    >>> CorrCholeskyTransform()(ember.zeros(3)).shape
    ember.Size([3, 3])
    """
    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def _call(self, x):
        x = x.tanh()
        eps = finfo(x.dtype).eps
        x = x.clamp(min=-1 + eps, max=1 - eps)
        r = vec_to_tril_matrix(x, diag=-1)
        # stick breaking on the squares: y = sign(r) sqrt(z prod(1 - z before))
        #                                  = r sqrt(prod(1 - z before))
        z1m_cumprod_sqrt = (1 - r ** 2).sqrt().cumprod(-1)
        r = r + eye(r.shape[-1], dtype=r.dtype, device=r.device)
        return r * pad(z1m_cumprod_sqrt[..., :-1], [1, 0], value=1.0)

    def _inverse(self, y):
        y_cumsum = 1 - (y * y).cumsum(-1)
        y_cumsum_shifted = pad(y_cumsum[..., :-1], [1, 0], value=1.0)
        y_vec = tril_matrix_to_vec(y, diag=-1)
        y_cumsum_vec = tril_matrix_to_vec(y_cumsum_shifted, diag=-1)
        t = y_vec / y_cumsum_vec.sqrt()
        return (t.log1p() - (-t).log1p()) / 2        # atanh

    def log_abs_det_jacobian(self, x, y):
        # The domain and codomain differ in dimension: this is the log-determinant of
        # x to the strictly lower triangle of y.
        y1m_cumsum = 1 - (y * y).cumsum(-1)
        # (diagonal -2 picks each row's stick remainder before its entry, unshifted)
        y1m_cumsum_tril = tril_matrix_to_vec(y1m_cumsum, diag=-2)
        stick_breaking_logdet = 0.5 * y1m_cumsum_tril.log().sum(-1)
        tanh_logdet = -2 * (x + softplus(-2 * x) - math.log(2.0)).sum(-1)
        return stick_breaking_logdet + tanh_logdet

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise EmberValueError("Too few dimensions on input")
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise EmberValueError("Input is not a flattened lower-diagonal number")
        return Size(tuple(shape[:-1]) + (d, d))

    def inverse_shape(self, shape):
        if len(shape) < 2:
            raise EmberValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise EmberValueError("Input is not square")
        d = shape[-1]
        return Size(tuple(shape[:-2]) + (d * (d - 1) // 2,))


class PositiveDefiniteTransform(Transform):
    """Unconstrained square matrices to positive-definite ones: ``L L^T`` for ``L`` the
    :class:`LowerCholeskyTransform` of the input (the inverse goes through the
    Cholesky factor).

    >>> PositiveDefiniteTransform()(ember.zeros(2, 2))
    tensor([[1., 0.],
            [0., 1.]])
    """
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def __eq__(self, other) -> bool:
        return isinstance(other, PositiveDefiniteTransform)

    def _call(self, x):
        x = LowerCholeskyTransform()(x)
        return x @ x.mT

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(cholesky(y))
