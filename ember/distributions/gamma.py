"""The gamma family: Gamma, Chi2, Beta, Dirichlet and StudentT. Their ``rsample`` carries
implicit reparameterization gradients (see ``_gamma_ops``)."""
from __future__ import annotations

import math

from ..ops.creation import tensor
from ..ops.elementwise import where
from ..ops.igamma import igamma
from ..ops.shape import stack
from ..ops.special_fns import digamma, lgamma
from ..errors import EmberValueError
from ..tensor import Size, Tensor
from . import constraints
from ._gamma_ops import dirichlet, standard_gamma
from .continuous import _expand_params, _two_params
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .utils import _standard_normal, broadcast_all, finfo, is_number, one_hot

__all__ = ["Gamma", "Chi2", "Beta", "Dirichlet", "StudentT"]


class Gamma(ExponentialFamily):
    """The gamma distribution with shape ``concentration`` and inverse scale ``rate``
    (mean ``concentration / rate``).

    ``rsample`` is differentiable in both parameters: in ``rate`` directly, in
    ``concentration`` by implicit reparameterization.

    Args:
        concentration: the shape parameter alpha, positive.
        rate: the rate beta (1 / scale), positive.
        validate_args: see :class:`Distribution`.

    >>> Gamma(ember.tensor([1.0]), ember.tensor([1.0])).sample().shape
    ember.Size([1])
    """
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, concentration, rate, validate_args: bool | None = None) -> None:
        _two_params(self, concentration, rate, ("concentration", "rate"), validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Gamma, batch_shape, ("concentration", "rate"),
                              _instance)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        value = standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        # keep the value positive after the division without touching its gradient
        fixed = value.detach()
        return value + (fixed.clamp(min=finfo(value.dtype).tiny) - fixed)

    def log_prob(self, value):
        if not isinstance(value, Tensor):
            value = tensor(value, dtype=self.rate.dtype, device=self.rate.device)
        if self._validate_args:
            self._validate_sample(value)
        return self.concentration.xlogy(self.rate) + (self.concentration - 1).xlogy(value) - \
            self.rate * value - lgamma(self.concentration)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return igamma(self.concentration, self.rate * value)

    def entropy(self):
        return self.concentration - self.rate.log() + lgamma(self.concentration) + \
            (1.0 - self.concentration) * digamma(self.concentration)

    @property
    def _natural_params(self):
        return self.concentration - 1, -self.rate

    def _log_normalizer(self, x, y):
        return lgamma(x + 1) + (x + 1) * (-y.reciprocal()).log()


class Chi2(Gamma):
    """The chi-squared distribution with ``df`` degrees of freedom:
    ``Gamma(df / 2, 1 / 2)``.

    Args:
        df: the degrees of freedom, positive.
        validate_args: see :class:`Distribution`.

    >>> Chi2(ember.tensor([1.0])).sample().shape
    ember.Size([1])
    """
    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args: bool | None = None) -> None:
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)

    @property
    def df(self):
        """The degrees of freedom."""
        return self.concentration * 2


class Dirichlet(ExponentialFamily):
    """The Dirichlet distribution over the probability simplex, with
    ``concentration`` of shape ``batch_shape + (K,)``.

    Args:
        concentration: the concentration parameters, positive, at least 1-D.
        validate_args: see :class:`Distribution`.

    >>> Dirichlet(ember.tensor([0.5, 0.5])).sample().shape
    ember.Size([2])
    """
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args: bool | None = None) -> None:
        if concentration.dim() < 1:
            raise EmberValueError("`concentration` parameter must be at least "
                                  "one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = Size(batch_shape)
        new.concentration = self.concentration.expand(tuple(batch_shape + self.event_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        shape = tuple(self._extended_shape(sample_shape))
        return dirichlet(self.concentration.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (self.concentration - 1.0).xlogy(value).sum(-1) + \
            lgamma(self.concentration.sum(-1)) - lgamma(self.concentration).sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        conc_m1 = (self.concentration - 1).clamp(min=0.0)
        mode = conc_m1 / conc_m1.sum(-1, keepdim=True)
        # all concentrations below 1: the density peaks at a vertex (PyTorch picks the
        # argmax of the NaN row, the first one)
        corner = one_hot(mode.argmax(-1), conc_m1.shape[-1], mode.dtype)
        return where((self.concentration < 1).all(-1, keepdim=True), corner, mode)

    @property
    def variance(self):
        total = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (total - self.concentration) / \
            (total.pow(2) * (total + 1))

    def entropy(self):
        k = self.concentration.shape[-1]
        a0 = self.concentration.sum(-1)
        return lgamma(self.concentration).sum(-1) - lgamma(a0) - (k - a0) * digamma(a0) - \
            ((self.concentration - 1.0) * digamma(self.concentration)).sum(-1)

    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return lgamma(x).sum(-1) - lgamma(x.sum(-1))


class Beta(ExponentialFamily):
    """The beta distribution on [0, 1] with shape parameters ``concentration1``
    (alpha) and ``concentration0`` (beta); a two-component :class:`Dirichlet`.

    Args:
        concentration1: alpha, positive.
        concentration0: beta, positive.
        validate_args: see :class:`Distribution`.

    >>> Beta(ember.tensor([0.5]), ember.tensor([0.5])).sample().shape
    ember.Size([1])
    """
    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0,
                 validate_args: bool | None = None) -> None:
        if is_number(concentration1) and is_number(concentration0):
            both = tensor([float(concentration1), float(concentration0)])
        else:
            concentration1, concentration0 = broadcast_all(concentration1, concentration0)
            both = stack([concentration1, concentration0], -1)
        self._dirichlet = Dirichlet(both, validate_args=validate_args)
        super().__init__(self._dirichlet._batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Beta, _instance)
        batch_shape = Size(batch_shape)
        new._dirichlet = self._dirichlet.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()):
        return self._dirichlet.rsample(sample_shape).select(-1, 0)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        heads_tails = stack([value, 1.0 - value], -1)
        return self._dirichlet.log_prob(heads_tails)

    def entropy(self):
        return self._dirichlet.entropy()

    @property
    def concentration1(self):
        """The first shape parameter, alpha."""
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self):
        """The second shape parameter, beta."""
        return self._dirichlet.concentration[..., 1]

    @property
    def _natural_params(self):
        return self.concentration1, self.concentration0

    def _log_normalizer(self, x, y):
        return lgamma(x) + lgamma(y) - lgamma(x + y)


class StudentT(Distribution):
    """Student's t-distribution with ``df`` degrees of freedom, location ``loc`` and
    scale ``scale``.

    Args:
        df: the degrees of freedom, positive.
        loc: the location (default 0).
        scale: the scale, positive (default 1).
        validate_args: see :class:`Distribution`.

    >>> StudentT(ember.tensor([2.0])).sample().shape
    ember.Size([1])
    """
    arg_constraints = {"df": constraints.positive, "loc": constraints.real,
                       "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args: bool | None = None) -> None:
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(self.df.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(StudentT, _instance)
        batch_shape = Size(batch_shape)
        new.df = self.df.expand(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new._chi2 = self._chi2.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return where(self.df > 1, self.loc, math.nan)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        finite = self.scale.pow(2) * self.df / (self.df - 2)
        return where(self.df > 2, finite, where(self.df > 1, math.inf, math.nan))

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        x = _standard_normal(shape, dtype=self.df.dtype, device=self.df.device)
        z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * (x * (z / self.df).rsqrt())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) + \
            lgamma(0.5 * self.df) - lgamma(0.5 * (self.df + 1.0))
        return -0.5 * (self.df + 1.0) * (y ** 2.0 / self.df).log1p() - z

    def entropy(self):
        lbeta = lgamma(0.5 * self.df) + math.lgamma(0.5) - lgamma(0.5 * (self.df + 1))
        return self.scale.log() + 0.5 * (self.df + 1) * (
            digamma(0.5 * (self.df + 1)) - digamma(0.5 * self.df)) + \
            0.5 * self.df.log() + lbeta
