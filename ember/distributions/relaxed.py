"""Continuous relaxations of discrete distributions (Concrete / Gumbel-softmax):
LogitRelaxedBernoulli and RelaxedBernoulli, ExpRelaxedCategorical and
RelaxedOneHotCategorical. Their samples are reparameterized, so gradients reach the
probabilities; a lower ``temperature`` gives samples closer to the discrete ones."""
from __future__ import annotations

from ..ops.creation import full_like
from ..ops.special_fns import lgamma
from ..tensor import Size
from . import constraints
from .categorical import Categorical
from .discrete import _expand_probs_or_logits, _probs_or_logits
from .distribution import Distribution
from .transformed import TransformedDistribution
from .transforms import ExpTransform, SigmoidTransform
from .utils import (_uniform, broadcast_all, clamp_probs, lazy_property, logits_to_probs,
                    probs_to_logits)

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli", "ExpRelaxedCategorical",
           "RelaxedOneHotCategorical"]


class LogitRelaxedBernoulli(Distribution):
    """The logit of a :class:`RelaxedBernoulli` sample: a real number whose sigmoid is
    a relaxed Bernoulli variable (Maddison et al., 2017).

    Args:
        temperature: the relaxation temperature, a positive tensor.
        probs: the probability of 1.
        logits: the log-odds of 1.
        validate_args: see :class:`Distribution`.
    """
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real

    def __init__(self, temperature, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        self.temperature = temperature
        is_scalar = _probs_or_logits(self, probs, logits)
        batch_shape = Size() if is_scalar else self._param.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogitRelaxedBernoulli, _instance)
        batch_shape = Size(batch_shape)
        new.temperature = self.temperature
        _expand_probs_or_logits(self, new, batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

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

    def rsample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        probs = clamp_probs(self.probs.expand(shape))
        u = clamp_probs(_uniform(shape, dtype=probs.dtype, device=probs.device))
        return (u.log() - (-u).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value * self.temperature
        return self.temperature.log() + diff - 2 * diff.exp().log1p()


class RelaxedBernoulli(TransformedDistribution):
    """A relaxed Bernoulli distribution on (0, 1): the sigmoid of a
    :class:`LogitRelaxedBernoulli` sample, reparameterizable.

    Args:
        temperature: the relaxation temperature, a positive tensor.
        probs: the probability of 1.
        logits: the log-odds of 1.
        validate_args: see :class:`Distribution`.

    >>> m = RelaxedBernoulli(ember.tensor([2.2]), ember.tensor([0.1, 0.2, 0.3, 0.99]))
    >>> m.sample().shape
    ember.Size([4])
    """
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        base_dist = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base_dist, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedBernoulli, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def temperature(self):
        """The relaxation temperature."""
        return self.base_dist.temperature

    @property
    def logits(self):
        """The log-probabilities (normalized) or log-odds of the events."""
        return self.base_dist.logits

    @property
    def probs(self):
        """The event probabilities."""
        return self.base_dist.probs


class ExpRelaxedCategorical(Distribution):
    """The log of a :class:`RelaxedOneHotCategorical` sample (the ExpConcrete
    distribution), which is numerically better behaved for low temperatures.

    Args:
        temperature: the relaxation temperature, a positive tensor.
        probs: event probabilities, shape ``batch_shape + (K,)``.
        logits: event log-probabilities, shape ``batch_shape + (K,)``.
        validate_args: see :class:`Distribution`.
    """
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ExpRelaxedCategorical, _instance)
        batch_shape = Size(batch_shape)
        new.temperature = self.temperature
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def param_shape(self) -> Size:
        """The shape of the parameter tensor (``probs`` or ``logits``)."""
        return self._categorical.param_shape

    @property
    def logits(self):
        """The log-probabilities (normalized) or log-odds of the events."""
        return self._categorical.logits

    @property
    def probs(self):
        """The event probabilities."""
        return self._categorical.probs

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        u = clamp_probs(_uniform(shape, dtype=self.logits.dtype, device=self.logits.device))
        gumbels = -(-u.log()).log()
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(dim=-1, keepdim=True)

    def log_prob(self, value):
        K = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_scale = lgamma(full_like(self.temperature, float(K))) + \
            self.temperature.log() * (K - 1)
        score = logits - value * self.temperature
        score = (score - score.logsumexp(dim=-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    """A relaxed one-hot categorical distribution on the simplex (Concrete /
    Gumbel-softmax): ``exp`` of an :class:`ExpRelaxedCategorical` sample.

    Args:
        temperature: the relaxation temperature, a positive tensor.
        probs: event probabilities, shape ``batch_shape + (K,)``.
        logits: event log-probabilities, shape ``batch_shape + (K,)``.
        validate_args: see :class:`Distribution`.

    >>> m = RelaxedOneHotCategorical(ember.tensor([2.2]),
    ...                              ember.tensor([0.1, 0.2, 0.3, 0.4]))
    >>> m.sample().shape
    ember.Size([4])
    """
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None,
                 validate_args: bool | None = None) -> None:
        base_dist = ExpRelaxedCategorical(temperature, probs, logits,
                                          validate_args=validate_args)
        super().__init__(base_dist, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedOneHotCategorical, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def temperature(self):
        """The relaxation temperature."""
        return self.base_dist.temperature

    @property
    def logits(self):
        """The log-probabilities (normalized) or log-odds of the events."""
        return self.base_dist.logits

    @property
    def probs(self):
        """The event probabilities."""
        return self.base_dist.probs
