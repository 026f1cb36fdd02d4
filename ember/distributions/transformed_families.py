"""Distributions defined as transforms of a simpler one: Pareto (an exponential
exponentiated and scaled), Weibull (a power of an exponential), Kumaraswamy (powers of a
uniform), InverseGamma (the reciprocal of a gamma) and LogisticNormal (a normal mapped
onto the simplex by stick breaking). Sampling, ``log_prob``, ``cdf`` and ``icdf`` come
from :class:`TransformedDistribution`; the moments and entropies are closed forms."""
from __future__ import annotations

import math

from ..ops.creation import full_like, ones_like
from ..ops.elementwise import where
from ..ops.special_fns import digamma, lgamma
from . import constraints
from .continuous import Exponential, Normal, Uniform
from .gamma import Gamma
from .transformed import TransformedDistribution
from .transforms import AffineTransform, ExpTransform, PowerTransform, StickBreakingTransform
from .utils import broadcast_all, euler_constant

__all__ = ["Pareto", "Weibull", "Kumaraswamy", "InverseGamma", "LogisticNormal"]


def _at_least(x, bound):
    """``x.clamp(min=bound)`` whose gradient is 0 (not NaN) where clamped even when the
    incoming gradient is NaN (it is 0/0 where the moment is infinite), as PyTorch's."""
    return where(x >= bound, x, float(bound))


class Pareto(TransformedDistribution):
    """The Pareto (type I) distribution with minimum ``scale`` and tail index ``alpha``:
    ``scale * exp(E)`` for ``E ~ Exponential(alpha)``, density
    ``alpha scale^alpha / x^(alpha + 1)`` on ``[scale, inf)``.

    Args:
        scale: the minimum value, positive.
        alpha: the shape (tail index), positive.
        validate_args: see :class:`Distribution`.

    >>> m = Pareto(ember.tensor([1.0]), ember.tensor([1.0]))
    >>> m.sample().shape
    ember.Size([1])
    """
    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}

    def __init__(self, scale, alpha, validate_args: bool | None = None) -> None:
        self.scale, self.alpha = broadcast_all(scale, alpha)
        base_dist = Exponential(self.alpha, validate_args=validate_args)
        transforms = [ExpTransform(), AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Pareto, _instance)
        new.scale = self.scale.expand(batch_shape)
        new.alpha = self.alpha.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        # infinite for alpha <= 1
        a = _at_least(self.alpha, 1)
        return a * self.scale / (a - 1)

    @property
    def mode(self):
        return self.scale

    @property
    def variance(self):
        # infinite for alpha <= 2
        a = _at_least(self.alpha, 2)
        return self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.greater_than_eq(self.scale)

    def entropy(self):
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())


def _weibull_transforms(scale, concentration_reciprocal):
    return [PowerTransform(exponent=concentration_reciprocal),
            AffineTransform(loc=0, scale=scale)]


class Weibull(TransformedDistribution):
    """The two-parameter Weibull distribution: ``scale * E^(1 / concentration)`` for
    ``E ~ Exponential(1)``.

    Args:
        scale: the scale lambda, positive.
        concentration: the shape k, positive.
        validate_args: see :class:`Distribution`.

    >>> m = Weibull(ember.tensor([1.0]), ember.tensor([1.0]))
    >>> m.sample().shape
    ember.Size([1])
    """
    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale, concentration, validate_args: bool | None = None) -> None:
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base_dist = Exponential(ones_like(self.scale), validate_args=validate_args)
        super().__init__(base_dist, _weibull_transforms(self.scale,
                                                        self.concentration_reciprocal),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Weibull, _instance)
        new.scale = self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.concentration_reciprocal = new.concentration.reciprocal()
        base_dist = self.base_dist.expand(batch_shape)
        TransformedDistribution.__init__(
            new, base_dist, _weibull_transforms(new.scale, new.concentration_reciprocal),
            validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.scale * lgamma(1 + self.concentration_reciprocal).exp()

    @property
    def mode(self):
        # NaN for concentration < 1 (a negative base to a fractional power), as PyTorch
        return self.scale * ((self.concentration - 1) / self.concentration) ** \
            self.concentration.reciprocal()

    @property
    def variance(self):
        return self.scale.pow(2) * (lgamma(1 + 2 * self.concentration_reciprocal).exp() -
                                    (2 * lgamma(1 + self.concentration_reciprocal)).exp())

    def entropy(self):
        return euler_constant * (1 - self.concentration_reciprocal) + \
            (self.scale * self.concentration_reciprocal).log() + 1


def _kumaraswamy_moment(a, b, n: int):
    """``E[X^n] = b B(1 + n / a, b)``."""
    arg1 = 1 + n / a
    return b * (lgamma(arg1) + lgamma(b) - lgamma(arg1 + b)).exp()


class Kumaraswamy(TransformedDistribution):
    """The Kumaraswamy distribution on [0, 1], density
    ``a b x^(a-1) (1 - x^a)^(b-1)``: ``(1 - U^(1/b))^(1/a)`` for ``U`` uniform.

    Args:
        concentration1: a (alpha), positive.
        concentration0: b (beta), positive.
        validate_args: see :class:`Distribution`.

    >>> m = Kumaraswamy(ember.tensor([1.0]), ember.tensor([1.0]))
    >>> m.sample().shape
    ember.Size([1])
    """
    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0,
                 validate_args: bool | None = None) -> None:
        self.concentration1, self.concentration0 = broadcast_all(concentration1,
                                                                 concentration0)
        base_dist = Uniform(full_like(self.concentration0, 0),
                            full_like(self.concentration0, 1), validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration0.reciprocal()),
                      AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return _kumaraswamy_moment(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        a, b = self.concentration1, self.concentration0
        # in log space for stability; no interior mode when a or b is below 1
        log_mode = b.reciprocal() * (-b).log1p() - (-b * a).log1p()
        return where((b < 1) | (a < 1), math.nan, log_mode).exp()

    @property
    def variance(self):
        return _kumaraswamy_moment(self.concentration1, self.concentration0, 2) - \
            self.mean.pow(2)

    def entropy(self):
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        harmonic = digamma(self.concentration0 + 1) + euler_constant
        return t0 + t1 * harmonic - self.concentration1.log() - self.concentration0.log()


class InverseGamma(TransformedDistribution):
    """The inverse gamma distribution: ``1 / X`` for ``X ~ Gamma(concentration, rate)``.

    Args:
        concentration: the shape alpha, positive.
        rate: beta (the scale of ``1 / X``), positive.
        validate_args: see :class:`Distribution`.

    >>> m = InverseGamma(ember.tensor([2.0]), ember.tensor([3.0]))
    >>> m.sample().shape
    ember.Size([1])
    """
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args: bool | None = None) -> None:
        base_dist = Gamma(concentration, rate, validate_args=validate_args)
        neg_one = -base_dist.rate.new_ones(())
        super().__init__(base_dist, PowerTransform(neg_one), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(InverseGamma, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def concentration(self):
        """The shape parameter alpha."""
        return self.base_dist.concentration

    @property
    def rate(self):
        """The rate beta of the underlying gamma."""
        return self.base_dist.rate

    @property
    def mean(self):
        result = self.rate / (self.concentration - 1)
        return where(self.concentration > 1, result, math.inf)

    @property
    def mode(self):
        return self.rate / (self.concentration + 1)

    @property
    def variance(self):
        result = self.rate.square() / ((self.concentration - 1).square() *
                                       (self.concentration - 2))
        return where(self.concentration > 2, result, math.inf)

    def entropy(self):
        return self.concentration + self.rate.log() + lgamma(self.concentration) - \
            (1 + self.concentration) * digamma(self.concentration)


class LogisticNormal(TransformedDistribution):
    """The logistic-normal distribution on the simplex: a ``Normal(loc, scale)`` vector of
    length K - 1 mapped to K probabilities by :class:`StickBreakingTransform`.

    Args:
        loc: the mean of the base normal, shape ``batch_shape + (K - 1,)`` (a number gives
            K = 2).
        scale: its standard deviation, positive.
        validate_args: see :class:`Distribution`.

    >>> m = LogisticNormal(ember.zeros(3), ember.ones(3))
    >>> m.sample().shape
    ember.Size([4])
    """
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args: bool | None = None) -> None:
        base_dist = Normal(loc, scale, validate_args=validate_args)
        if not base_dist.batch_shape:
            base_dist = base_dist.expand([1])
        super().__init__(base_dist, StickBreakingTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogisticNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def loc(self):
        """The mean of the base normal."""
        return self.base_dist.base_dist.loc

    @property
    def scale(self):
        """The standard deviation of the base normal."""
        return self.base_dist.base_dist.scale

