"""Distributions built from gamma variables: FisherSnedecor (a ratio of two scaled
chi-squared variables) and NegativeBinomial (a Poisson with a gamma-distributed rate).

``FisherSnedecor.rsample`` is differentiable (implicit gradients of its gamma draws) and
traces under ``ember.jit``; ``NegativeBinomial.sample`` draws its Poisson counts with
:func:`ember.poisson`, on the host, so it cannot be traced.
"""
from __future__ import annotations

import math

from ..autograd import no_grad
from ..ops.activation import logsigmoid
from ..ops.elementwise import where
from ..ops.special_fns import lgamma
from ..ops.toplevel_creation import poisson
from ..tensor import Size
from . import constraints
from .discrete import _expand_probs_or_logits, _set_count_and_probs_or_logits
from .distribution import Distribution
from .gamma import Gamma
from .utils import broadcast_all, finfo, is_number, lazy_property, logits_to_probs, \
    probs_to_logits

__all__ = ["FisherSnedecor", "NegativeBinomial"]


class FisherSnedecor(Distribution):
    """Fisher-Snedecor's F distribution with ``df1`` and ``df2`` degrees of freedom: the
    ratio ``(X1 / df1) / (X2 / df2)`` of two independent chi-squared variables.

    Args:
        df1: the numerator's degrees of freedom, positive.
        df2: the denominator's degrees of freedom, positive.
        validate_args: see :class:`Distribution`.

    >>> m = FisherSnedecor(ember.tensor([1.0]), ember.tensor([2.0]))
    >>> m.sample().shape
    ember.Size([1])
    """
    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args: bool | None = None) -> None:
        self.df1, self.df2 = broadcast_all(df1, df2)
        # (validated with the default setting, as PyTorch: a bad df is reported by the
        # gamma distribution it parameterizes)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)
        batch_shape = Size() if is_number(df1) and is_number(df2) else self.df1.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(FisherSnedecor, _instance)
        batch_shape = Size(batch_shape)
        new.df1 = self.df1.expand(batch_shape)
        new.df2 = self.df2.expand(batch_shape)
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        df2 = where(self.df2 <= 2, math.nan, self.df2)
        return df2 / (df2 - 2)

    @property
    def mode(self):
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return where(self.df1 <= 2, math.nan, mode)

    @property
    def variance(self):
        df2 = where(self.df2 <= 4, math.nan, self.df2)
        return 2 * df2.pow(2) * (self.df1 + df2 - 2) / \
            (self.df1 * (df2 - 2).pow(2) * (df2 - 4))

    def rsample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        # X1 ~ Gamma(df1 / 2, df1) and X2 ~ Gamma(df2 / 2, df2): X1 / X2 ~ F(df1, df2)
        x1 = self._gamma1.rsample(sample_shape).reshape(shape)
        x2 = self._gamma2.rsample(sample_shape).reshape(shape)
        tiny = finfo(x2.dtype).tiny
        return (x1 / x2.clamp(min=tiny)).clamp(min=tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        ct1 = self.df1 * 0.5
        ct2 = self.df2 * 0.5
        ct3 = self.df1 / self.df2
        t1 = lgamma(ct1 + ct2) - lgamma(ct1) - lgamma(ct2)
        t2 = ct1 * ct3.log() + (ct1 - 1) * value.log()
        t3 = (ct1 + ct2) * (ct3 * value).log1p()
        return t1 + t2 - t3


class NegativeBinomial(Distribution):
    """The number of successes in independent trials (each a success with probability
    ``probs``, or log-odds ``logits``) before ``total_count`` failures. A real
    ``total_count`` is allowed: the distribution is a Poisson whose rate is
    ``Gamma(total_count, exp(-logits))``-distributed.

    Args:
        total_count: the number of failures to stop at, non-negative.
        probs: the success probability, in [0, 1).
        logits: the log-odds of success.
        validate_args: see :class:`Distribution`.

    >>> NegativeBinomial(5, ember.tensor([0.5])).sample().shape
    ember.Size([1])
    """
    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        _set_count_and_probs_or_logits(self, total_count, probs, logits)
        super().__init__(self._param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(NegativeBinomial, _instance)
        batch_shape = Size(batch_shape)
        new.total_count = self.total_count.expand(batch_shape)
        _expand_probs_or_logits(self, new, batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.total_count * self.logits.exp()

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / (-self.logits).sigmoid()

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

    @lazy_property
    def _gamma(self):
        # not validated: total_count may be 0
        return Gamma(concentration=self.total_count, rate=(-self.logits).exp(),
                     validate_args=False)

    def sample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            rate = self._gamma.sample(sample_shape)
            # a total count of 0 has rate 0 (ember's gamma sampler gives NaN there)
            rate = where(self.total_count.expand(shape) > 0, rate, 0.0)
            # (flattened: ember.poisson of a 0-d tensor fails)
            return poisson(rate.reshape(-1)).reshape(shape)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_unnormalized_prob = self.total_count * logsigmoid(-self.logits) + \
            value * logsigmoid(self.logits)
        log_normalization = -lgamma(self.total_count + value) + lgamma(1.0 + value) + \
            lgamma(self.total_count)
        # total_count = value = 0 has probability 1, but lgamma(0) is infinite
        log_normalization = where(self.total_count + value == 0.0, 0.0, log_normalization)
        return log_unnormalized_prob - log_normalization
