"""TransformedDistribution and the distributions defined as transforms of another:
LogNormal (exp of a Normal), HalfNormal and HalfCauchy (absolute values) and Gumbel (of
a Uniform)."""
from __future__ import annotations

import math

from ..autograd import no_grad
from ..errors import EmberValueError
from ..ops.creation import full, full_like, ones_like, zeros_like
from ..ops.creation import tensor
from ..ops.elementwise import where
from ..tensor import Size, Tensor
from . import constraints
from .continuous import Cauchy, Normal, Uniform
from .distribution import Distribution
from .independent import Independent
from .transforms import AbsTransform, AffineTransform, ComposeTransform, ExpTransform, Transform
from .utils import _sum_rightmost, broadcast_all, euler_constant, finfo, is_number

__all__ = ["TransformedDistribution", "LogNormal", "HalfNormal", "HalfCauchy", "Gumbel"]


class TransformedDistribution(Distribution):
    """The distribution of ``f(X)`` for ``X ~ base_distribution`` and ``f`` the
    composition of ``transforms``: samples are transformed, ``log_prob`` subtracts the
    log-det-Jacobians of the inverse path.

    Args:
        base_distribution: the distribution of ``X``.
        transforms: a :class:`Transform` or a list of them, applied in order.
        validate_args: see :class:`Distribution`.

    >>> base = Normal(ember.zeros(2), ember.ones(2))
    >>> TransformedDistribution(base, [ExpTransform()]).sample().shape
    ember.Size([2])
    """
    arg_constraints: dict = {}

    def __init__(self, base_distribution: Distribution, transforms,
                 validate_args: bool | None = None) -> None:
        if isinstance(transforms, Transform):
            self.transforms = [transforms]
        elif isinstance(transforms, list):
            if not all(isinstance(t, Transform) for t in transforms):
                raise EmberValueError("transforms must be a Transform or a list of Transforms")
            self.transforms = transforms
        else:
            raise EmberValueError(f"transforms must be a Transform or list, but was "
                                  f"{transforms}")
        base_shape = base_distribution.batch_shape + base_distribution.event_shape
        base_event_dim = len(base_distribution.event_shape)
        transform = ComposeTransform(self.transforms)
        if len(base_shape) < transform.domain.event_dim:
            raise EmberValueError(f"base_distribution needs to have shape with size at least "
                                  f"{transform.domain.event_dim}, but got {base_shape}.")
        forward_shape = transform.forward_shape(base_shape)
        expanded_base_shape = transform.inverse_shape(forward_shape)
        if tuple(base_shape) != tuple(expanded_base_shape):
            base_batch_shape = expanded_base_shape[:len(expanded_base_shape) - base_event_dim]
            base_distribution = base_distribution.expand(base_batch_shape)
        reinterpreted_batch_ndims = transform.domain.event_dim - base_event_dim
        if reinterpreted_batch_ndims > 0:
            base_distribution = Independent(base_distribution, reinterpreted_batch_ndims)
        self.base_dist = base_distribution
        change = transform.codomain.event_dim - transform.domain.event_dim
        event_dim = max(transform.codomain.event_dim, base_event_dim + change)
        cut = len(forward_shape) - event_dim
        super().__init__(Size(forward_shape[:cut]), Size(forward_shape[cut:]),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(TransformedDistribution, _instance)
        batch_shape = Size(batch_shape)
        shape = batch_shape + self.event_shape
        for t in reversed(self.transforms):
            shape = t.inverse_shape(shape)
        new.base_dist = self.base_dist.expand(shape[:len(shape) -
                                                    len(self.base_dist.event_shape)])
        new.transforms = self.transforms
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=False)
    def support(self):
        if not self.transforms:
            return self.base_dist.support
        support = self.transforms[-1].codomain
        if len(self.event_shape) > support.event_dim:
            support = constraints.independent(support, len(self.event_shape) -
                                              support.event_dim)
        return support

    @property
    def has_rsample(self) -> bool:
        return self.base_dist.has_rsample

    def sample(self, sample_shape=Size()):
        with no_grad():
            x = self.base_dist.sample(sample_shape)
            for transform in self.transforms:
                x = transform(x)
            return x

    def rsample(self, sample_shape=Size()):
        x = self.base_dist.rsample(sample_shape)
        for transform in self.transforms:
            x = transform(x)
        return x

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        event_dim = len(self.event_shape)
        log_prob = 0.0
        y = value
        for transform in reversed(self.transforms):
            x = transform.inv(y)
            event_dim += transform.domain.event_dim - transform.codomain.event_dim
            log_prob = log_prob - _sum_rightmost(transform.log_abs_det_jacobian(x, y),
                                                 event_dim - transform.domain.event_dim)
            y = x
        return log_prob + _sum_rightmost(self.base_dist.log_prob(y),
                                         event_dim - len(self.base_dist.event_shape))

    def _monotonize_cdf(self, value):
        """Turn the base CDF into this one's: ``1 - F`` where the transforms decrease."""
        sign = 1
        for transform in self.transforms:
            sign = sign * transform.sign
        if isinstance(sign, int) and sign == 1:
            return value
        return sign * (value - 0.5) + 0.5

    def cdf(self, value):
        for transform in self.transforms[::-1]:
            value = transform.inv(value)
        if self._validate_args:
            self.base_dist._validate_sample(value)
        return self._monotonize_cdf(self.base_dist.cdf(value))

    def icdf(self, value):
        value = self.base_dist.icdf(self._monotonize_cdf(value))
        for transform in self.transforms:
            value = transform(value)
        return value


class LogNormal(TransformedDistribution):
    """The distribution of ``exp(X)`` for ``X ~ Normal(loc, scale)``.

    Args:
        loc: the mean of log of the distribution.
        scale: the standard deviation of log of the distribution, positive.
        validate_args: see :class:`Distribution`.

    >>> LogNormal(ember.tensor([0.0]), ember.tensor([1.0])).sample().shape
    ember.Size([1])
    """
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args: bool | None = None) -> None:
        base_dist = Normal(loc, scale, validate_args=validate_args)
        super().__init__(base_dist, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def loc(self):
        """The mean of the underlying normal (of ``log x``)."""
        return self.base_dist.loc

    @property
    def scale(self):
        """The standard deviation of the underlying normal (of ``log x``)."""
        return self.base_dist.scale

    @property
    def mean(self):
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self):
        return (self.loc - self.scale.square()).exp()

    @property
    def variance(self):
        scale_sq = self.scale.pow(2)
        return scale_sq.expm1() * (2 * self.loc + scale_sq).exp()

    def entropy(self):
        return self.base_dist.entropy() + self.loc


class _HalfOf(TransformedDistribution):
    """``|X|`` for a base distribution symmetric about 0."""
    support = constraints.nonnegative
    has_rsample = True

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mode(self):
        return zeros_like(self.scale)

    def log_prob(self, value):
        if not isinstance(value, Tensor):
            value = tensor(value, dtype=self.scale.dtype, device=self.scale.device)
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return where(value >= 0, log_prob, -math.inf)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class HalfNormal(_HalfOf):
    """The distribution of ``|X|`` for ``X ~ Normal(0, scale)``.

    Args:
        scale: the scale of the full normal, positive.
        validate_args: see :class:`Distribution`.

    >>> HalfNormal(ember.tensor([1.0])).sample().shape
    ember.Size([1])
    """
    arg_constraints = {"scale": constraints.positive}

    def __init__(self, scale, validate_args: bool | None = None) -> None:
        base_dist = Normal(0, scale, validate_args=False)
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(HalfNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)


class HalfCauchy(_HalfOf):
    """The distribution of ``|X|`` for ``X ~ Cauchy(0, scale)``.

    Args:
        scale: the scale of the full Cauchy distribution, positive.
        validate_args: see :class:`Distribution`.

    >>> HalfCauchy(ember.tensor([1.0])).sample().shape
    ember.Size([1])
    """
    arg_constraints = {"scale": constraints.positive}

    def __init__(self, scale, validate_args: bool | None = None) -> None:
        base_dist = Cauchy(0, scale, validate_args=False)
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(HalfCauchy, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return full(tuple(self._extended_shape()), math.inf, dtype=self.scale.dtype,
                    device=self.scale.device)

    @property
    def variance(self):
        return self.base_dist.variance


class Gumbel(TransformedDistribution):
    """The Gumbel (type-1 extreme value) distribution with location ``loc`` and scale
    ``scale``: ``loc - scale * log(-log U)`` for ``U`` uniform.

    Args:
        loc: the location.
        scale: the scale, positive.
        validate_args: see :class:`Distribution`.

    >>> Gumbel(ember.tensor([1.0]), ember.tensor([2.0])).sample().shape
    ember.Size([1])
    """
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc, scale, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        info = finfo(self.loc.dtype)
        if is_number(loc) and is_number(scale):
            base_dist = Uniform(info.tiny, 1 - info.eps, validate_args=validate_args)
        else:
            base_dist = Uniform(full_like(self.loc, info.tiny),
                                full_like(self.loc, 1 - info.eps), validate_args=validate_args)
        transforms = [ExpTransform().inv, AffineTransform(loc=0, scale=-ones_like(self.scale)),
                      ExpTransform().inv, AffineTransform(loc=loc, scale=-self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gumbel, _instance)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return y - y.exp() - self.scale.log()

    @property
    def mean(self):
        return self.loc + self.scale * euler_constant

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return math.pi / math.sqrt(6) * self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def entropy(self):
        return self.scale.log() + (1 + euler_constant)
