"""Distributions built from others: Independent (batch dimensions reinterpreted as
event dimensions) and MixtureSameFamily (a categorical mixture of one family)."""
from __future__ import annotations

from ..autograd import no_grad
from ..errors import EmberValueError
from ..ops.activation import log_softmax
from ..ops.reduce import logsumexp
from ..tensor import Size
from . import constraints
from .categorical import Categorical
from .distribution import Distribution
from .utils import _sum_rightmost, as_size

__all__ = ["Independent", "MixtureSameFamily"]


class Independent(Distribution):
    """Reinterpret the rightmost ``reinterpreted_batch_ndims`` batch dimensions of
    ``base_distribution`` as event dimensions: ``log_prob`` sums over them.

    Args:
        base_distribution: the distribution to wrap.
        reinterpreted_batch_ndims: how many batch dimensions join the event.
        validate_args: see :class:`Distribution`.

    >>> normal = Normal(ember.zeros(3), ember.ones(3))
    >>> Independent(normal, 1).event_shape
    ember.Size([3])
    """
    arg_constraints: dict = {}

    def __init__(self, base_distribution: Distribution, reinterpreted_batch_ndims: int,
                 validate_args: bool | None = None) -> None:
        if reinterpreted_batch_ndims > len(base_distribution.batch_shape):
            raise EmberValueError(
                f"Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), "
                f"actual {reinterpreted_batch_ndims} vs {len(base_distribution.batch_shape)}")
        shape = base_distribution.batch_shape + base_distribution.event_shape
        event_dim = reinterpreted_batch_ndims + len(base_distribution.event_shape)
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        super().__init__(shape[:len(shape) - event_dim], shape[len(shape) - event_dim:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Independent, _instance)
        batch_shape = Size(batch_shape)
        new.base_dist = self.base_dist.expand(
            batch_shape + self.event_shape[:self.reinterpreted_batch_ndims])
        new.reinterpreted_batch_ndims = self.reinterpreted_batch_ndims
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def has_rsample(self) -> bool:
        return self.base_dist.has_rsample

    @property
    def has_enumerate_support(self) -> bool:
        if self.reinterpreted_batch_ndims > 0:
            return False
        return self.base_dist.has_enumerate_support

    @constraints.dependent_property
    def support(self):
        result = self.base_dist.support
        if self.reinterpreted_batch_ndims:
            result = constraints.independent(result, self.reinterpreted_batch_ndims)
        return result

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=Size()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=Size()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return _sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return _sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def enumerate_support(self, expand: bool = True):
        if self.reinterpreted_batch_ndims > 0:
            raise NotImplementedError("Enumeration over cartesian product is not implemented")
        return self.base_dist.enumerate_support(expand=expand)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_dist}, {self.reinterpreted_batch_ndims})"


class MixtureSameFamily(Distribution):
    """A mixture of distributions of one family: ``mixture_distribution`` (a
    :class:`Categorical` over K components) picks one of the K distributions batched in
    the rightmost batch dimension of ``component_distribution``.

    Args:
        mixture_distribution: a :class:`Categorical` with K categories.
        component_distribution: a distribution with batch shape ``(..., K)``.
        validate_args: see :class:`Distribution`.

    >>> mix = Categorical(ember.ones(5))
    >>> comp = Normal(ember.randn(5), ember.rand(5) + 0.1)
    >>> MixtureSameFamily(mix, comp).batch_shape
    ember.Size([])
    """
    arg_constraints: dict = {}
    has_rsample = False

    def __init__(self, mixture_distribution: Categorical,
                 component_distribution: Distribution,
                 validate_args: bool | None = None) -> None:
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        if not isinstance(mixture_distribution, Categorical):
            raise EmberValueError(" The Mixture distribution needs to be an  instance of "
                                  "ember.distributions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise EmberValueError("The Component distribution needs to be an instance of "
                                  "ember.distributions.Distribution")
        mdbs = mixture_distribution.batch_shape
        cdbs = component_distribution.batch_shape[:-1]
        for size1, size2 in zip(reversed(mdbs), reversed(cdbs)):
            if size1 != 1 and size2 != 1 and size1 != size2:
                raise EmberValueError(f"`mixture_distribution.batch_shape` ({mdbs}) is not "
                                      f"compatible with `component_distribution.batch_shape`"
                                      f"({cdbs})")
        km = mixture_distribution.logits.shape[-1]
        kc = component_distribution.batch_shape[-1]
        if km != kc:
            raise EmberValueError(f"`mixture_distribution component` ({km}) does not equal "
                                  f"`component_distribution.batch_shape[-1]` ({kc})")
        self._num_component = km
        event_shape = component_distribution.event_shape
        self._event_ndims = len(event_shape)
        super().__init__(batch_shape=cdbs, event_shape=event_shape,
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        batch_shape = Size(batch_shape)
        new = self._get_checked_instance(MixtureSameFamily, _instance)
        new._component_distribution = self._component_distribution.expand(
            batch_shape + (self._num_component,))
        new._mixture_distribution = self._mixture_distribution.expand(batch_shape)
        new._num_component = self._num_component
        new._event_ndims = self._event_ndims
        Distribution.__init__(new, batch_shape=batch_shape,
                              event_shape=new._component_distribution.event_shape,
                              validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property
    def support(self):
        return constraints.MixtureSameFamilyConstraint(self._component_distribution.support)

    @property
    def mixture_distribution(self) -> Categorical:
        """The categorical distribution over components."""
        return self._mixture_distribution

    @property
    def component_distribution(self) -> Distribution:
        """The distribution of the K components."""
        return self._component_distribution

    @property
    def mean(self):
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        return (probs * self.component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self):
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        mean_cond_var = (probs * self.component_distribution.variance).sum(
            -1 - self._event_ndims)
        var_cond_mean = (probs * (self.component_distribution.mean -
                                  self._pad(self.mean)).pow(2.0)).sum(-1 - self._event_ndims)
        return mean_cond_var + var_cond_mean

    def cdf(self, x):
        cdf_x = self.component_distribution.cdf(self._pad(x))
        return (cdf_x * self.mixture_distribution.probs).sum(-1)

    def log_prob(self, x):
        if self._validate_args:
            self._validate_sample(x)
        log_prob_x = self.component_distribution.log_prob(self._pad(x))
        log_mix_prob = log_softmax(self.mixture_distribution.logits, dim=-1)
        return logsumexp(log_prob_x + log_mix_prob, dim=-1)

    def sample(self, sample_shape=Size()):
        sample_shape = as_size(sample_shape)
        with no_grad():
            gather_dim = len(sample_shape) + len(self.batch_shape)
            es = tuple(self.event_shape)
            mix_sample = self.mixture_distribution.sample(sample_shape)
            mix_shape = tuple(mix_sample.shape)
            comp_samples = self.component_distribution.sample(sample_shape)
            index = mix_sample.reshape(mix_shape + (1,) * (len(es) + 1))
            index = index.expand(mix_shape + (1,) + es)
            return comp_samples.gather(gather_dim, index).squeeze(gather_dim)

    def _pad(self, x):
        return x.unsqueeze(-1 - self._event_ndims)

    def _pad_mixture_dimensions(self, x):
        dist_batch_ndims = len(self.batch_shape)
        cat_batch_ndims = len(self.mixture_distribution.batch_shape)
        pad_ndims = 0 if cat_batch_ndims == 1 else dist_batch_ndims - cat_batch_ndims
        xs = tuple(x.shape)
        return x.reshape(xs[:-1] + (1,) * pad_ndims + xs[-1:] + (1,) * self._event_ndims)

    def __repr__(self) -> str:
        return f"MixtureSameFamily(\n  {self.mixture_distribution},\n  " \
               f"{self.component_distribution})"
