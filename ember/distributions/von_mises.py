"""The von Mises distribution on the circle.

Samples follow Best and Fisher's rejection scheme ("Efficient simulation of the von
Mises distribution", Applied Statistics 28, 1979), as PyTorch's do, in float64
whatever the parameters' dtype (in float32 the scheme stalls for concentrations near
1e-4). It accepts a candidate with probability at least 0.65, so each element gets
``_ROUNDS`` candidates at once and keeps the first accepted one: all fail with
probability below ``0.35 ** 24 = 1e-11``. Eager mode then draws again until every
element has one; a traced graph (``ember.jit`` cannot loop on values) keeps the first
candidate there. Compiled and eager runs therefore draw the same numbers.
"""
from __future__ import annotations

import math

from .. import dtypes as dt
from ..autograd import no_grad
from ..ops.elementwise import where
from ..ops.random import rand
from ..tensor import Size
from . import constraints
from .distribution import Distribution
from .utils import broadcast_all, tracing

__all__ = ["VonMises"]

_ROUNDS = 24

# Abramowitz and Stegun 9.8.1-9.8.4: I0 and I1 below 3.75 as polynomials in (x/3.75)^2,
# and sqrt(x) e^-x I0/I1 above it as polynomials in 3.75/x (PyTorch's approximation,
# used so that log_prob agrees with it)
_I0_SMALL = (1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.360768e-1, 0.45813e-2)
_I0_LARGE = (0.39894228, 0.1328592e-1, 0.225319e-2, -0.157565e-2, 0.916281e-2,
             -0.2057706e-1, 0.2635537e-1, -0.1647633e-1, 0.392377e-2)
_I1_SMALL = (0.5, 0.87890594, 0.51498869, 0.15084934, 0.2658733e-1, 0.301532e-2,
             0.32411e-3)
_I1_LARGE = (0.39894228, -0.3988024e-1, -0.362018e-2, 0.163801e-2, -0.1031555e-1,
             0.2282967e-1, -0.2895312e-1, 0.1787654e-1, -0.420059e-2)


def _horner(y, coefficients):
    result = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        result = c + y * result
    return result


def _log_modified_bessel(x, order: int = 0):
    """``log I_order(x)`` for ``x > 0`` and order 0 or 1."""
    small_coef, large_coef = (_I0_SMALL, _I0_LARGE) if order == 0 else (_I1_SMALL, _I1_LARGE)
    y = (x / 3.75) ** 2
    small = _horner(y, small_coef)
    if order == 1:
        small = x.abs() * small
    small = small.log()
    large = x - 0.5 * x.log() + _horner(3.75 / x, large_coef).log()
    return where(x < 3.75, small, large)


def _best_fisher(kappa, proposal_r, shape):
    """``(angle, accepted)``: of ``_ROUNDS`` candidates per element, the first accepted
    one (the first candidate where none is)."""
    # rounds behind the three uniforms, so that each of u1, u2, u3 is contiguous
    u = rand((3, _ROUNDS) + shape, dtype=dt.float64, device=kappa.device)
    u1, u2, u3 = u[0], u[1], u[2]
    z = (math.pi * u1).cos()
    f = (1 + proposal_r * z) / (proposal_r + z)
    c = kappa * (proposal_r - f)
    accepted = ((c * (2 - c) - u2) > 0) | ((c / u2).log() + 1 - c >= 0)
    first = accepted.long().argmax(0, keepdim=True)
    f, u3 = f.gather(0, first).squeeze(0), u3.gather(0, first).squeeze(0)
    return (u3 - 0.5).sign() * f.clamp(min=-1.0, max=1.0).acos(), accepted.any(0)


class VonMises(Distribution):
    """The circular von Mises distribution, density
    ``exp(concentration cos(x - loc)) / (2 pi I0(concentration))``. ``loc`` and values
    may be any real numbers, read as angles modulo 2 pi; samples lie in [-pi, pi).

    :attr:`mean` and :attr:`variance` are the circular ones. There is no ``rsample``,
    ``cdf`` or ``entropy``, as in PyTorch.

    Args:
        loc: the mean angle, in radians.
        concentration: the concentration kappa, positive.
        validate_args: see :class:`Distribution`.

    >>> m = VonMises(ember.tensor([1.0]), ember.tensor([1.0]))
    >>> m.sample().shape
    ember.Size([1])
    """
    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args: bool | None = None) -> None:
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, Size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(VonMises, _instance)
        batch_shape = Size(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.concentration * (value - self.loc).cos() - math.log(2 * math.pi) - \
            _log_modified_bessel(self.concentration, order=0)

    def _proposal_r(self, kappa):
        tau = 1 + (1 + 4 * kappa ** 2).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        proposal_r = (1 + rho ** 2) / (2 * rho)
        # a second order Taylor expansion about 0 where the above cancels
        return where(kappa < 1e-5, 1 / kappa + kappa, proposal_r)

    def sample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            kappa = self.concentration.detach().to(dt.float64)
            proposal_r = self._proposal_r(kappa)
            angle, found = _best_fisher(kappa, proposal_r, shape)
            if not tracing():
                needs = ~found
                while bool(needs.any()):
                    again, ok = _best_fisher(kappa, proposal_r, shape)
                    angle = where(needs & ok, again, angle)
                    needs = needs & ~ok
            loc = self.loc.detach().to(dt.float64)
            wrapped = (angle + math.pi + loc) % (2 * math.pi) - math.pi
            return wrapped.to(self.loc.dtype)

    @property
    def mean(self):
        """The circular mean, ``loc``."""
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        """The circular variance, ``1 - I1(kappa) / I0(kappa)``."""
        return 1 - (_log_modified_bessel(self.concentration, order=1) -
                    _log_modified_bessel(self.concentration, order=0)).exp()
