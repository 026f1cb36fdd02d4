"""Distributions over K categories: Categorical, OneHotCategorical (and its
straight-through variant) and Multinomial.

Categories are drawn by inverting the distribution function: a uniform number per draw,
located in the cumulative probabilities (in float64) by :func:`ember.searchsorted`.
That is written with ember ops, so ``ember.jit`` traces sampling too, and needs memory
for the draws only (not draws times categories).
"""
from __future__ import annotations

import math

from .. import dtypes as dt
from ..autograd import no_grad
from ..errors import EmberValueError
from ..ops.creation import arange, eye, full, tensor
from ..ops.elementwise import where
from ..ops.shape import broadcast_tensors
from ..ops.sorting import searchsorted
from ..ops.special_fns import lgamma
from ..tensor import Size
from . import constraints
from .discrete import Binomial
from .distribution import Distribution
from .utils import (_uniform, as_size, broadcast_all, finfo, lazy_property,
                    logits_to_probs, one_hot, probs_to_logits)

__all__ = ["Categorical", "OneHotCategorical", "OneHotCategoricalStraightThrough",
           "Multinomial"]


class Categorical(Distribution):
    """A distribution over the categories ``0 .. K-1`` with probabilities ``probs`` (or
    unnormalized log-probabilities ``logits``) along the last dimension; give one.

    ``probs`` need only be non-negative (rows are normalized to sum to 1); ``logits``
    are normalized by their logsumexp.

    Args:
        probs: event probabilities, shape ``batch_shape + (K,)``.
        logits: event log-probabilities, shape ``batch_shape + (K,)``.
        validate_args: see :class:`Distribution`.

    >>> m = Categorical(ember.tensor([0.25, 0.25, 0.25, 0.25]))
    >>> m.sample().dtype
    ember.int64
    """
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise EmberValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.dim() < 1:
                raise EmberValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
            self._param = self.probs
        else:
            if logits.dim() < 1:
                raise EmberValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
            self._param = self.logits
        self._num_events = self._param.shape[-1]
        batch_shape = self._param.shape[:-1] if self._param.dim() > 1 else Size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = Size(batch_shape)
        param_shape = tuple(batch_shape) + (self._num_events,)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(param_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(param_shape)
            new._param = new.logits
        new._num_events = self._num_events
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self) -> Size:
        """The shape of the parameter tensor (``probs`` or ``logits``)."""
        return self._param.shape

    @property
    def mean(self):
        return full(tuple(self._extended_shape()), math.nan, dtype=self._param.dtype,
                    device=self._param.device)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return full(tuple(self._extended_shape()), math.nan, dtype=self._param.dtype,
                    device=self._param.device)

    def sample(self, sample_shape=Size()):
        sample_shape = as_size(sample_shape)
        batch = tuple(self._batch_shape)
        with no_grad():
            cdf = self.probs.detach().to(dt.float64).cumsum(-1)
            # normalized so the last entry is exactly 1 > every uniform draw; a category
            # of probability 0 spans an empty interval and is never drawn
            cdf = cdf / cdf[..., -1:]
            u = _uniform(batch + (sample_shape.numel(),), dtype=dt.float64, device=cdf.device)
            index = searchsorted(cdf, u, right=True)
            return index.movedim(-1, 0).reshape(tuple(sample_shape) + batch)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = broadcast_tensors(value, self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self):
        logits = self.logits.clamp(min=finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True):
        values = arange(self._num_events, dtype=dt.int64, device=self._param.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values


class OneHotCategorical(Distribution):
    """A :class:`Categorical` whose samples are one-hot vectors of length K.

    Args:
        probs: event probabilities, shape ``batch_shape + (K,)``.
        logits: event log-probabilities, shape ``batch_shape + (K,)``.
        validate_args: see :class:`Distribution`.

    >>> OneHotCategorical(ember.tensor([0.25, 0.25, 0.25, 0.25])).sample().shape
    ember.Size([4])
    """
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args: bool | None = None) -> None:
        self._categorical = Categorical(probs, logits)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(OneHotCategorical, _instance)
        batch_shape = Size(batch_shape)
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def _param(self):
        return self._categorical._param

    @property
    def probs(self):
        """The event probabilities."""
        return self._categorical.probs

    @property
    def logits(self):
        """The log-probabilities (normalized) or log-odds of the events."""
        return self._categorical.logits

    @property
    def mean(self):
        return self._categorical.probs

    @property
    def mode(self):
        probs = self._categorical.probs
        return one_hot(probs.argmax(-1), probs.shape[-1], probs.dtype)

    @property
    def variance(self):
        return self._categorical.probs * (1 - self._categorical.probs)

    @property
    def param_shape(self) -> Size:
        """The shape of the parameter tensor (``probs`` or ``logits``)."""
        return self._categorical.param_shape

    def sample(self, sample_shape=Size()):
        probs = self._categorical.probs
        indices = self._categorical.sample(sample_shape)
        return one_hot(indices, self._categorical._num_events, probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand: bool = True):
        n = self.event_shape[0]
        values = eye(n, dtype=self._param.dtype, device=self._param.device)
        values = values.reshape((n,) + (1,) * len(self.batch_shape) + (n,))
        if expand:
            values = values.expand((n,) + tuple(self.batch_shape) + (n,))
        return values


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """A :class:`OneHotCategorical` whose ``rsample`` passes gradients straight through
    to the probabilities: the one-hot sample plus ``probs - probs.detach()``."""
    has_rsample = True

    def rsample(self, sample_shape=Size()):
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())


class Multinomial(Distribution):
    """The counts of ``total_count`` draws from a :class:`Categorical` with ``probs``
    (or ``logits``). ``log_prob`` also scores counts that sum to less.

    Args:
        total_count: the number of draws (an int).
        probs: event probabilities, shape ``batch_shape + (K,)``.
        logits: event log-probabilities, shape ``batch_shape + (K,)``.
        validate_args: see :class:`Distribution`.

    >>> Multinomial(100, ember.tensor([1.0, 1.0, 1.0, 1.0])).sample().sum()
    tensor(100.)
    """
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count: int = 1, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = Size(batch_shape)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = Binomial(total_count=self.total_count, probs=new._categorical.probs,
                                 validate_args=False)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    @property
    def logits(self):
        """The log-probabilities (normalized) or log-odds of the events."""
        return self._categorical.logits

    @property
    def probs(self):
        """The event probabilities."""
        return self._categorical.probs

    @property
    def param_shape(self) -> Size:
        """The shape of the parameter tensor (``probs`` or ``logits``)."""
        return self._categorical.param_shape

    def sample(self, sample_shape=Size()):
        sample_shape = as_size(sample_shape)
        with no_grad():
            draws = self._categorical.sample(Size((self.total_count,)) + sample_shape)
            counts = one_hot(draws, self._categorical._num_events, self.probs.dtype).sum(0)
            return counts.reshape(tuple(self._extended_shape(sample_shape)))

    def entropy(self):
        n = tensor(float(self.total_count), dtype=self.probs.dtype)
        cat_entropy = self._categorical.entropy()
        term1 = n * cat_entropy - lgamma(n + 1)
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = self._binomial.log_prob(support).exp()
        weights = lgamma(support + 1)
        term2 = (binomial_probs * weights).sum((0, -1))
        return term1 + term2

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_factorial_n = lgamma(value.sum(-1) + 1)
        log_factorial_xs = lgamma(value + 1).sum(-1)
        # a category of probability 0 drawn 0 times adds nothing (not 0 * -inf)
        logits = where((value == 0) & (logits == -math.inf), 0.0, logits)
        return log_factorial_n - log_factorial_xs + (logits * value).sum(-1)
