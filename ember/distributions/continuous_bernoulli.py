"""The continuous Bernoulli distribution (Loaiza-Ganem and Cunningham, 2019): the
density ``C(p) p^x (1-p)^(1-x)`` on [0, 1]. Near ``p = 1/2`` its normalizer and moments
are 0/0 forms, so there (``lims``) Taylor expansions replace them."""
from __future__ import annotations

import math

from ..errors import EmberValueError
from ..ops.creation import ones_like, zeros_like
from ..ops.elementwise import where
from ..ops.loss import binary_cross_entropy_with_logits
from ..tensor import Size
from . import constraints
from .discrete import _expand_probs_or_logits
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .utils import (_uniform, broadcast_all, clamp_probs, is_number, lazy_property,
                    logits_to_probs, probs_to_logits, tracing)

__all__ = ["ContinuousBernoulli"]


class ContinuousBernoulli(ExponentialFamily):
    """The continuous Bernoulli distribution with parameter ``probs`` (or ``logits``),
    a density on [0, 1] (``probs`` is not its mean).

    Args:
        probs: the parameter, in [0, 1] (clamped to (0, 1)).
        logits: its log-odds.
        lims: the interval around 1/2 where Taylor expansions are used.
        validate_args: see :class:`Distribution`.

    >>> ContinuousBernoulli(ember.tensor([0.3])).sample().shape
    ember.Size([1])
    """
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims: tuple = (0.499, 0.501),
                 validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise EmberValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = is_number(probs)
            (self.probs,) = broadcast_all(probs)
            # checked here, before clamping would hide a bad value
            if validate_args is not None and not tracing() and \
                    not bool(self.arg_constraints["probs"].check(self.probs).all()):
                raise EmberValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(self.probs)
        else:
            is_scalar = is_number(logits)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        batch_shape = Size() if is_scalar else self._param.shape
        self._lims = lims
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ContinuousBernoulli, _instance)
        new._lims = self._lims
        batch_shape = Size(batch_shape)
        _expand_probs_or_logits(self, new, batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        return where(self._outside_unstable_region(), self.probs,
                     self._lims[0] * ones_like(self.probs))

    def _cont_bern_log_norm(self):
        """The log of the normalizing constant C(p)."""
        cut = self._cut_probs()
        below_half = where(cut <= 0.5, cut, zeros_like(cut))
        above_half = where(cut >= 0.5, cut, ones_like(cut))
        log_norm = ((-cut).log1p() - cut.log()).abs().log() - where(
            cut <= 0.5, (-2.0 * below_half).log1p(), (2.0 * above_half - 1.0).log())
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / ((-cut).log1p() - cut.log())
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return where(self._outside_unstable_region(), mus, taylor)

    @property
    def stddev(self):
        return self.variance.sqrt()

    @property
    def variance(self):
        cut = self._cut_probs()
        variances = cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2) + \
            1.0 / ((-cut).log1p() - cut.log()).pow(2)
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return where(self._outside_unstable_region(), variances, taylor)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    @property
    def param_shape(self) -> Size:
        """The shape of the parameter tensor (``probs`` or ``logits``)."""
        return self._param.shape

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        u = _uniform(shape, dtype=self.probs.dtype, device=self.probs.device)
        return self.icdf(u).detach()

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        u = _uniform(shape, dtype=self.probs.dtype, device=self.probs.device)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -binary_cross_entropy_with_logits(logits, value, reduction="none") + \
            self._cont_bern_log_norm()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = where(self._outside_unstable_region(), cdfs, value)
        return where(value <= 0.0, zeros_like(value),
                     where(value >= 1.0, ones_like(value), unbounded))

    def icdf(self, value):
        cut = self._cut_probs()
        inverse = ((-cut + value * (2.0 * cut - 1.0)).log1p() - (-cut).log1p()) / \
            (cut.log() - (-cut).log1p())
        return where(self._outside_unstable_region(), inverse, value)

    def entropy(self):
        log_probs0 = (-self.probs).log1p()
        log_probs1 = self.probs.log()
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        outside = (x <= self._lims[0] - 0.5) | (x > self._lims[1] - 0.5)
        cut = where(outside, x, (self._lims[0] - 0.5) * ones_like(x))
        log_norm = cut.expm1().abs().log() - cut.abs().log()
        taylor = 0.5 * x + x.pow(2) / 24.0 - x.pow(4) / 2880.0
        return where(outside, log_norm, taylor)
