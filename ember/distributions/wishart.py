"""The Wishart distribution over positive-definite matrices.

Samples use the Bartlett decomposition: ``L A A^T L^T`` for ``L`` the scale's Cholesky
factor and ``A`` lower triangular with ``sqrt(Chi2(df - i))`` on the diagonal and
standard normals below it, so ``rsample`` is differentiable in ``df`` (through the
chi-squared draws' implicit gradients) and in the scale, and traces under ``ember.jit``.
"""
from __future__ import annotations

import math
import warnings

from ..autograd import no_grad
from ..errors import EmberValueError
from ..ops.creation import arange, eye, tensor
from ..ops.elementwise import where
from ..ops.linalg_decomp import cholesky, slogdet
from ..ops.linalg_solvers import cholesky_solve
from ..ops.shape import broadcast_shapes
from ..ops.special_fns import digamma, mvlgamma
from ..tensor import Size
from . import constraints
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .gamma import Chi2
from .multivariate_normal import _precision_to_scale_tril
from .utils import _standard_normal, finfo, is_number, lazy_property, tracing, \
    vec_to_tril_matrix

__all__ = ["Wishart"]

_LOG_2 = math.log(2)


def _mvdigamma(x, p: int):
    """The multivariate digamma function: ``sum_i digamma(x - i / 2)``, i < p."""
    if not tracing() and not bool((x > (p - 1) / 2).all()):
        raise EmberValueError("Wrong domain for multivariate digamma function.")
    half_steps = arange(p, dtype=x.dtype, device=x.device) / 2
    return digamma(x.unsqueeze(-1) - half_steps).sum(-1)


class Wishart(ExponentialFamily):
    """The Wishart distribution with ``df`` degrees of freedom and a positive-definite
    scale matrix given by exactly one of ``covariance_matrix``, ``precision_matrix``
    (its inverse) or ``scale_tril`` (its lower Cholesky factor; the cheapest).

    Args:
        df: the degrees of freedom, above ``p - 1`` for ``p x p`` matrices (a number or
            a tensor broadcasting with the matrices' batch shape).
        covariance_matrix: positive-definite, shape ``(..., p, p)``.
        precision_matrix: positive-definite, shape ``(..., p, p)``.
        scale_tril: lower-triangular with a positive diagonal, shape ``(..., p, p)``.
        validate_args: see :class:`Distribution`.

    ``df`` below ``p`` makes singular samples likely (a warning says so). ``rsample``
    redraws samples that are not positive definite up to ``max_try_correction`` times
    (10 by default) in eager mode; under ``ember.jit`` it cannot check, and does not.

    >>> m = Wishart(ember.tensor(4.0), covariance_matrix=ember.eye(2))
    >>> m.sample().shape
    ember.Size([2, 2])
    """
    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self):
        return {"covariance_matrix": constraints.positive_definite,
                "precision_matrix": constraints.positive_definite,
                "scale_tril": constraints.lower_cholesky,
                "df": constraints.greater_than(self.event_shape[-1] - 1)}

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args: bool | None = None) -> None:
        given = [(name, m) for name, m in (("covariance_matrix", covariance_matrix),
                                          ("precision_matrix", precision_matrix),
                                          ("scale_tril", scale_tril)) if m is not None]
        if len(given) != 1:
            raise EmberValueError("Exactly one of covariance_matrix or precision_matrix or "
                                  "scale_tril may be specified.")
        name, param = given[0]
        if param.dim() < 2:
            raise EmberValueError("scale_tril must be at least two-dimensional, with "
                                  "optional leading batch dimensions")
        if is_number(df):
            batch_shape = Size(tuple(param.shape[:-2]))
            self.df = tensor(df, dtype=param.dtype, device=param.device)
        else:
            batch_shape = Size(broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape)))
            self.df = df.expand(tuple(batch_shape))
        event_shape = param.shape[-2:]
        p = event_shape[-1]
        if not tracing():
            if bool((self.df <= p - 1).any()):
                raise EmberValueError(f"Value of df={df} expected to be greater than "
                                      f"ndim - 1 = {p - 1}.")
            if bool((self.df < p).any()):
                warnings.warn("Low df values detected. Singular samples are highly likely "
                              "to occur for ndim - 1 < df < ndim.", stacklevel=2)
        setattr(self, name, param.expand(tuple(batch_shape) + (-1, -1)))
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        self._batch_dims = [-(x + 1) for x in range(len(self._batch_shape))]
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = param
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = cholesky(param)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(param)
        self._dist_chi2 = self._chi2(self.df, batch_shape)

    def _chi2(self, df, batch_shape):
        """Chi2(df - i) for i < p: the squares of the Bartlett factor's diagonal."""
        steps = arange(self._event_shape[-1], dtype=self._unbroadcasted_scale_tril.dtype,
                       device=self._unbroadcasted_scale_tril.device)
        return Chi2(df=df.unsqueeze(-1) - steps.expand(tuple(batch_shape) + (-1,)))

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = Size(batch_shape)
        cov_shape = tuple(batch_shape + self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(cov_shape)
        new.df = self.df.expand(tuple(batch_shape))
        new._batch_dims = [-(x + 1) for x in range(len(batch_shape))]
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(cov_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._dist_chi2 = new._chi2(new.df, batch_shape)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return tuple(self._batch_shape + self._event_shape)

    @lazy_property
    def scale_tril(self):
        """The lower Cholesky factor of the scale matrix, ``batch_shape + (p, p)``."""
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        """The scale matrix, ``batch_shape + (p, p)``."""
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        """The inverse of the scale matrix, ``batch_shape + (p, p)``."""
        L = self._unbroadcasted_scale_tril
        identity = eye(self._event_shape[-1], dtype=L.dtype, device=L.device)
        return cholesky_solve(identity, L).expand(self._matrix_shape())

    def _df_matrix(self, df):
        """``df`` broadcast to the batch shape, with two trailing dimensions of size 1."""
        return df.expand(tuple(self._batch_shape)).reshape(tuple(self._batch_shape) + (1, 1))

    @property
    def mean(self):
        return self._df_matrix(self.df) * self.covariance_matrix

    @property
    def mode(self):
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = where(factor <= 0, math.nan, factor)
        return self._df_matrix(factor) * self.covariance_matrix

    @property
    def variance(self):
        V = self.covariance_matrix
        diag_V = V.diagonal(dim1=-2, dim2=-1)
        return self._df_matrix(self.df) * (V.pow(2) + diag_V.unsqueeze(-1) *
                                           diag_V.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape=Size()):
        p = self._event_shape[-1]
        diagonal = self._dist_chi2.rsample(sample_shape).sqrt()
        diagonal = diagonal.clamp(min=finfo(diagonal.dtype).eps)
        below = _standard_normal(tuple(sample_shape) + tuple(self._batch_shape) +
                                 (p * (p - 1) // 2,), dtype=diagonal.dtype,
                                 device=diagonal.device)
        noise = diagonal.diag_embed(dim1=-2, dim2=-1) + vec_to_tril_matrix(below, diag=-1)
        chol = self._unbroadcasted_scale_tril @ noise
        return chol @ chol.mT

    def _is_singular(self, sample):
        """Per sample index: whether any matrix of the batch fails the support check."""
        with no_grad():
            bad = ~self.support.check(sample.detach())
            n = len(self._batch_shape)
            keep = tuple(bad.shape[:bad.dim() - n])
            return bad.reshape(keep + (math.prod(self._batch_shape),)).any(-1)

    def rsample(self, sample_shape=Size(), max_try_correction=None):
        """A reparameterized sample of shape ``sample_shape + batch_shape + (p, p)``.

        In eager mode, sample indices where some matrix is not numerically positive
        definite are redrawn (with a warning) up to ``max_try_correction`` times
        (default 10); such samples may remain, and score ``-inf`` in ``log_prob``."""
        if max_try_correction is None:
            max_try_correction = 10
        sample_shape = Size(sample_shape)
        sample = self._bartlett_sampling(sample_shape)
        if tracing():
            return sample
        singular = self._is_singular(sample)
        if bool(singular.any()):
            warnings.warn("Singular sample detected.", stacklevel=2)
            trailing = (1,) * (len(self._batch_shape) + 2)
            for _ in range(max_try_correction):
                new = self._bartlett_sampling(sample_shape)
                sample = where(singular.reshape(tuple(singular.shape) + trailing), new,
                               sample)
                singular = singular & self._is_singular(new)
                if not bool(singular.any()):
                    break
        return sample

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        half_log_det = L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        trace = cholesky_solve(value, L).diagonal(dim1=-2, dim2=-1).sum(-1)
        return -nu * (p * _LOG_2 / 2 + half_log_det) - mvlgamma(nu / 2, p=p) + \
            (nu - p - 1) / 2 * slogdet(value).logabsdet - trace / 2

    def entropy(self):
        nu = self.df
        p = self._event_shape[-1]
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return (p + 1) * (p * _LOG_2 / 2 + half_log_det) + mvlgamma(nu / 2, p=p) - \
            (nu - p - 1) / 2 * _mvdigamma(nu / 2, p=p) + nu * p / 2

    @property
    def _natural_params(self):
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (self.df - p - 1) / 2

    def _log_normalizer(self, x, y):
        p = self._event_shape[-1]
        return (y + (p + 1) / 2) * (-slogdet(-2 * x).logabsdet + _LOG_2 * p) + \
            mvlgamma(y + (p + 1) / 2, p=p)
