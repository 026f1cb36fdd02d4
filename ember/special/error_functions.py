"""The scaled complementary error function and the log of the normal distribution
function: ``erfcx`` and ``log_ndtr`` (``torch.special``'s names), differentiable.

Forwards compute in float64 and round once. ``erfcx(x) = exp(x^2) erfc(x)`` is that
product for ``0 <= x < 26``, with ``x^2`` split exactly into two doubles so ``exp(x^2)``
carries no rounding of the square; above 26 (where ``erfc`` underflows) it is the
asymptotic series ``1 / (x sqrt(pi)) sum_k (-1)^k (2k - 1)!! / (2 x^2)^k``, and for
negative ``x`` the reflection ``2 exp(x^2) - erfcx(-x)`` (``inf`` below about -26.6).
``log_ndtr`` is ``log1p(-erfcx(x / sqrt 2) exp(-x^2 / 2) / 2)`` from -1 up and
``log(erfcx(-x / sqrt 2) / 2) - x^2 / 2`` below, so neither tail underflows.
"""
from __future__ import annotations

import math

import numpy as np

from ..ops import _xp
from ..ops.registry import apply, register
from ..ops.special_fns import _float_unary, _in_f64, _same_infer

__all__ = ["erfcx", "log_ndtr"]

_ASYMPTOTIC_FROM = 26.0
_SQRT_PI = math.sqrt(math.pi)
_SQRT_HALF = math.sqrt(0.5)


def _exp_square(xp, a, scale=1.0):
    """``exp(scale * a * a)`` (``scale`` a power of two, of either sign) for
    ``|a| < 1e150`` without the rounding error of ``a * a`` (Dekker's exact product
    ``a * a = hi + lo``, then ``exp(scale hi) (1 + scale lo)``)."""
    c = 134217729.0 * a  # 2^27 + 1 splits a into two 26-bit halves
    high = c - (c - a)
    low = a - high
    hi = a * a
    lo = ((high * high - hi) + 2.0 * high * low) + low * low
    with np.errstate(over="ignore", invalid="ignore"):
        return xp.exp(scale * hi) * (1.0 + scale * lo)


def erfcx64(xp, x):
    """``exp(x^2) erfc(x)`` of a float64 array."""
    ax = xp.abs(x)
    mid = xp.minimum(ax, _ASYMPTOTIC_FROM)
    direct = _exp_square(xp, mid) * _xp.erfc(xp, mid)
    big = xp.maximum(ax, _ASYMPTOTIC_FROM)
    r = 0.5 / (big * big)
    term = xp.ones_like(big)
    series = xp.ones_like(big)
    for k in range(1, 14):
        term = term * (-(2 * k - 1) * r)
        series = series + term
    positive = xp.where(ax < _ASYMPTOTIC_FROM, direct, series / (big * _SQRT_PI))
    with np.errstate(over="ignore"):
        negative = 2.0 * _exp_square(xp, xp.minimum(ax, 27.0)) - positive
    return xp.where(x < 0, negative, positive)


def _log_ndtr64(xp, x):
    low = x < -1.0
    t = xp.where(low, -x, 1.0) * _SQRT_HALF
    with np.errstate(divide="ignore"):
        lower = xp.log(erfcx64(xp, t) / 2.0) - 0.5 * xp.where(low, x, 0.0) ** 2
    # erfc(x / sqrt 2) as erfcx(x / sqrt 2) exp(-x^2 / 2): the rounding of x / sqrt 2
    # would otherwise cost a relative error of x^2 eps in the upper tail
    high = xp.where(low, 1.0, xp.minimum(x, 40.0))
    tail = erfcx64(xp, high * _SQRT_HALF) * _exp_square(xp, high, -0.5)
    upper = xp.log1p(-0.5 * tail)
    return xp.where(low, lower, xp.where(x > 40.0, -0.0, upper))


def _erfcx_vjp(n, g):
    x, = n.saved_inputs()
    return g * (2.0 * x * n.output(0) - 2.0 / _SQRT_PI)


def _log_ndtr_vjp(n, g):
    # d/dx log(Phi(x)) = phi(x) / Phi(x) = sqrt(2 / pi) / erfcx(-x / sqrt 2), in every tail
    x, = n.saved_inputs()
    return g * (math.sqrt(2.0 / math.pi) / erfcx(x * -_SQRT_HALF))


_ERFCX = register("special_erfcx", _in_f64(erfcx64), _erfcx_vjp, saves_outputs=True,
                  infer=_same_infer)
_LOG_NDTR = register("special_log_ndtr", _in_f64(_log_ndtr64), _log_ndtr_vjp,
                     infer=_same_infer)


def erfcx(input):
    """The scaled complementary error function ``exp(input^2) * erfc(input)``, finite
    where ``erfc`` underflows (``erfcx(x) ~ 1 / (x sqrt(pi))`` for large ``x``).
    Integers are computed in the default float dtype.

    Args:
        input: a tensor of any shape.

    >>> ember.special.erfcx(ember.tensor([0.0, 1.0, 30.0]))
    tensor([1.0000, 0.4276, 0.0188])
    """
    return apply(_ERFCX, _float_unary("special.erfcx", input))


def log_ndtr(input):
    """The log of the standard normal distribution function,
    ``log(1/2 (1 + erf(input / sqrt(2))))``, accurate in both tails.

    Args:
        input: a tensor of any shape.

    >>> ember.special.log_ndtr(ember.tensor([-40.0, 0.0, 3.0]))
    tensor([-8.0461e+02, -6.9315e-01, -1.3508e-03])
    """
    return apply(_LOG_NDTR, _float_unary("special.log_ndtr", input))

