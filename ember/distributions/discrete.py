"""Counting distributions parameterized by a success probability or a rate: Bernoulli,
Binomial, Geometric and Poisson.

``Bernoulli`` and ``Geometric`` sample with ember ops (``ember.jit`` traces them);
``Binomial`` and ``Poisson`` call :func:`ember.binomial` and :func:`ember.poisson`, which
draw on the host from the rates' values and so cannot be traced.
"""
from __future__ import annotations

import math

from ..autograd import no_grad
from ..errors import EmberValueError
from ..ops.creation import arange, zeros_like
from ..ops.elementwise import where
from ..ops.loss import binary_cross_entropy_with_logits
from ..ops.special_fns import lgamma
from ..ops.toplevel_creation import binomial, poisson
from ..tensor import Size
from . import constraints
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .utils import (_uniform, broadcast_all, finfo, is_number, lazy_property,
                    logits_to_probs, probs_to_logits, tracing)

__all__ = ["Bernoulli", "Binomial", "Geometric", "Poisson"]


def _probs_or_logits(dist, probs, logits):
    """Store whichever of ``probs``/``logits`` is given (exactly one must be), broadcast
    to a tensor; returns whether it was a number."""
    if (probs is None) == (logits is None):
        raise EmberValueError("Either `probs` or `logits` must be specified, but not both.")
    if probs is not None:
        (dist.probs,) = broadcast_all(probs)
        dist._param = dist.probs
        return is_number(probs)
    (dist.logits,) = broadcast_all(logits)
    dist._param = dist.logits
    return is_number(logits)


def _set_count_and_probs_or_logits(self, total_count, probs, logits) -> None:
    """``self.total_count`` and one of ``self.probs``/``self.logits`` (also ``_param``),
    broadcast together (Binomial, NegativeBinomial)."""
    if (probs is None) == (logits is None):
        raise EmberValueError("Either `probs` or `logits` must be specified, but not both.")
    if probs is not None:
        total_count, self.probs = broadcast_all(total_count, probs)
        self._param = self.probs
    else:
        total_count, self.logits = broadcast_all(total_count, logits)
        self._param = self.logits
    self.total_count = total_count.to(self._param.dtype)


def _expand_probs_or_logits(self, new, batch_shape):
    if "probs" in self.__dict__:
        new.probs = self.probs.expand(batch_shape)
        new._param = new.probs
    if "logits" in self.__dict__:
        new.logits = self.logits.expand(batch_shape)
        new._param = new.logits


def _bce(logits, target):
    return binary_cross_entropy_with_logits(logits, target, reduction="none")


class Bernoulli(ExponentialFamily):
    """The Bernoulli distribution: 1 with probability ``probs``, 0 otherwise. Give
    ``probs`` or ``logits`` (log-odds), not both.

    Args:
        probs: the probability of 1, in [0, 1].
        logits: the log-odds of 1.
        validate_args: see :class:`Distribution`.

    >>> Bernoulli(ember.tensor([0.3])).sample().shape
    ember.Size([1])
    """
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True
    _mean_carrier_measure = 0

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None) -> None:
        is_scalar = _probs_or_logits(self, probs, logits)
        batch_shape = Size() if is_scalar else self._param.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Bernoulli, _instance)
        batch_shape = Size(batch_shape)
        _expand_probs_or_logits(self, new, batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return where(self.probs == 0.5, math.nan, mode)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> Size:
        """The shape of the parameter tensor (``probs`` or ``logits``)."""
        return self._param.shape

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            probs = self.probs.expand(tuple(shape))
            u = _uniform(shape, dtype=probs.dtype, device=probs.device)
            return (u < probs).to(probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -_bce(logits, value)

    def entropy(self):
        return _bce(self.logits, self.probs)

    def enumerate_support(self, expand: bool = True):
        values = arange(2, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values

    @property
    def _natural_params(self):
        return (self.probs.logit(),)

    def _log_normalizer(self, x):
        return x.exp().log1p()


def _clamp_by_zero(x):
    # max(x, 0) with gradient 1/2 at 0 (as PyTorch)
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


class Binomial(Distribution):
    """The number of successes in ``total_count`` independent trials, each a success
    with probability ``probs`` (or log-odds ``logits``). ``total_count`` broadcasts
    with the probabilities.

    Args:
        total_count: the number of trials, a non-negative whole number (default 1).
        probs: the success probability, in [0, 1].
        logits: the log-odds of success.
        validate_args: see :class:`Distribution`.

    >>> Binomial(10, ember.tensor([0.5])).sample().shape
    ember.Size([1])
    """
    arg_constraints = {"total_count": constraints.nonnegative_integer,
                       "probs": constraints.unit_interval, "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        _set_count_and_probs_or_logits(self, total_count, probs, logits)
        super().__init__(self._param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Binomial, _instance)
        batch_shape = Size(batch_shape)
        new.total_count = self.total_count.expand(batch_shape)
        _expand_probs_or_logits(self, new, batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> Size:
        """The shape of the parameter tensor (``probs`` or ``logits``)."""
        return self._param.shape

    def sample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            # (flattened: ember.binomial of a 0-d tensor fails)
            return binomial(self.total_count.expand(shape).reshape(-1),
                            self.probs.expand(shape).reshape(-1)).reshape(shape)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_factorial_n = lgamma(self.total_count + 1)
        log_factorial_k = lgamma(value + 1)
        log_factorial_nmk = lgamma(self.total_count - value + 1)
        # n log(1 + e^logits), stably
        normalize = self.total_count * _clamp_by_zero(self.logits) + \
            self.total_count * (-self.logits.abs()).exp().log1p() - log_factorial_n
        return value * self.logits - log_factorial_k - log_factorial_nmk - normalize

    def _homogeneous_count(self, what: str) -> int:
        if tracing():
            raise NotImplementedError(f"Binomial.{what} reads total_count, which ember.jit "
                                      "cannot do; call it outside the traced function")
        total = int(self.total_count.max())
        if not self.total_count.min() == total:
            raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
        return total

    def entropy(self):
        self._homogeneous_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand: bool = True):
        total = self._homogeneous_count("enumerate_support")
        values = arange(1 + total, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values


class Geometric(Distribution):
    """The number of failures before the first success in independent trials that
    succeed with probability ``probs`` (or log-odds ``logits``): P(k) = (1-p)^k p.

    Args:
        probs: the success probability, in (0, 1].
        logits: the log-odds of success.
        validate_args: see :class:`Distribution`.

    >>> Geometric(ember.tensor([0.3])).sample().shape
    ember.Size([1])
    """
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None) -> None:
        is_scalar = _probs_or_logits(self, probs, logits)
        super().__init__(Size() if is_scalar else self._param.shape,
                         validate_args=validate_args)
        if self._validate_args and probs is not None and not tracing():
            value = self.probs
            valid = value > 0
            if not bool(valid.all()):
                raise EmberValueError(
                    f"Expected parameter probs ({type(value).__name__} of shape "
                    f"{tuple(value.shape)}) of distribution {self!r} to be positive but "
                    f"found invalid values:\n{value.detach()[~valid]}")

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Geometric, _instance)
        batch_shape = Size(batch_shape)
        _expand_probs_or_logits(self, new, batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        tiny = finfo(self.probs.dtype).tiny
        with no_grad():
            u = _uniform(shape, dtype=self.probs.dtype, device=self.probs.device)
            u = u.clamp(min=tiny)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        # 0 * log(0) is 0 when the first trial surely succeeds
        probs = where((probs == 1) & (value == 0), 0.0, probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        return _bce(self.logits, self.probs) / self.probs


class Poisson(ExponentialFamily):
    """The Poisson distribution with rate (mean) ``rate``: P(k) = rate^k e^-rate / k!.

    Args:
        rate: the rate, non-negative.
        validate_args: see :class:`Distribution`.

    >>> Poisson(ember.tensor([4.0])).sample().shape
    ember.Size([1])
    """
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate)
        batch_shape = Size() if is_number(rate) else self.rate.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Poisson, _instance)
        batch_shape = Size(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            return poisson(self.rate.expand(shape).reshape(-1)).reshape(shape)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return value.xlogy(rate) - rate - lgamma(value + 1)

    @property
    def _natural_params(self):
        return (self.rate.log(),)

    def _log_normalizer(self, x):
        return x.exp()
