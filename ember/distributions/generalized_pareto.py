"""The generalized Pareto distribution (the limit law of threshold exceedances)."""
from __future__ import annotations

import math
import numbers

from ..ops.creation import ones_like, zeros_like
from ..ops.elementwise import where
from ..ops.logical import isclose
from ..tensor import Size
from . import constraints
from .distribution import Distribution
from .utils import _uniform, broadcast_all

__all__ = ["GeneralizedPareto"]


class GeneralizedPareto(Distribution):
    """The generalized Pareto distribution with location ``loc``, scale ``scale`` and
    shape ``concentration`` (xi): survival function ``(1 + xi z)^(-1/xi)`` for
    ``z = (x - loc) / scale`` (``exp(-z)`` at xi = 0). Its special cases are the
    exponential (xi = 0, loc = 0), Pareto (xi > 0, loc = scale / xi) and uniform
    (xi = -1) distributions. The support is ``[loc, inf)`` for xi >= 0 and
    ``[loc, loc - scale / xi]`` for xi < 0.

    Args:
        loc: the location.
        scale: the scale, positive.
        concentration: the shape xi (any real; 0 is recognised to within
            :func:`ember.isclose`'s default tolerances).
        validate_args: see :class:`Distribution`.

    >>> m = GeneralizedPareto(ember.tensor([0.1]), ember.tensor([2.0]), ember.tensor([0.4]))
    >>> m.sample().shape
    ember.Size([1])
    """
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive,
                       "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args: bool | None = None) -> None:
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        if all(isinstance(v, numbers.Number) for v in (loc, scale, concentration)):
            batch_shape = Size()
        else:
            batch_shape = self.loc.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(GeneralizedPareto, _instance)
        batch_shape = Size(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        u = _uniform(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.icdf(u)

    def _zero_and_safe(self):
        """Where the shape is 0, and the shape with those entries replaced by 1 (so the
        branch for a non-zero shape stays finite there)."""
        eq_zero = isclose(self.concentration, zeros_like(self.concentration))
        return eq_zero, where(eq_zero, ones_like(self.concentration), self.concentration)

    def _z(self, x):
        return (x - self.loc) / self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._zero_and_safe()
        y = 1 / safe_conc + ones_like(z)
        where_nonzero = where(y == 0, y, y * (safe_conc * z).log1p())
        return -self.scale.log() - where(eq_zero, z, where_nonzero)

    def log_survival_function(self, value):
        """``log(1 - cdf(value))``, computed without cancellation."""
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe_conc = self._zero_and_safe()
        where_nonzero = -(safe_conc * z).log1p() / safe_conc
        return where(eq_zero, -z, where_nonzero)

    def log_cdf(self, value):
        """``log(cdf(value))``."""
        return (-self.log_survival_function(value).exp()).log1p()

    def cdf(self, value):
        return self.log_cdf(value).exp()

    def icdf(self, value):
        eq_zero, safe_conc = self._zero_and_safe()
        logu = (-value).log1p()
        where_nonzero = self.loc + self.scale / safe_conc * (-safe_conc * logu).expm1()
        where_zero = self.loc - self.scale * logu
        return where(eq_zero, where_zero, where_nonzero)

    @property
    def mean(self):
        valid = self.concentration < 1
        safe_conc = where(valid, self.concentration, 0.5)
        return where(valid, self.loc + self.scale / (1 - safe_conc), math.nan)

    @property
    def variance(self):
        valid = self.concentration < 0.5
        safe_conc = where(valid, self.concentration, 0.25)
        result = self.scale ** 2 / ((1 - safe_conc) ** 2 * (1 - 2 * safe_conc))
        return where(valid, result, math.nan)

    def entropy(self):
        return (self.scale.log() + self.concentration + 1).broadcast_to(
            tuple(self._batch_shape))

    @property
    def mode(self):
        return self.loc

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        lower = self.loc
        upper = where(self.concentration < 0, lower - self.scale / self.concentration,
                      math.inf)
        return constraints.interval(lower, upper)
