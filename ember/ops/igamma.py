"""The regularized incomplete gamma functions: ``igamma(a, x) = P(a, x)``, the lower
one, and ``igammac(a, x) = Q(a, x) = 1 - P(a, x)``, the upper one (``torch.igamma``,
``torch.special.gammainc``/``gammaincc``).

Forwards compute in float64 and round once. Below ``x = a + 1`` P is summed from its
power series, ``x^a e^-x / Gamma(a + 1) * sum_n x^n / ((a + 1) ... (a + n))``; above, Q
from its continued fraction (Legendre's, evaluated by the modified Lentz method); the
other is one minus it, so neither is found by cancelling two numbers near 1. Both
prefactors are formed as ``exp(a log x - x - lgamma(.))``, which for ``a`` in the
millions loses a few digits to rounding of the exponent (PyTorch switches to Temme's
expansion there). As in PyTorch, only ``x`` has a gradient,
``dP/dx = x^(a-1) e^-x / Gamma(a)``; the gradient for ``a`` raises.
"""
from __future__ import annotations

import numpy as np

from ..errors import EmberError
from . import elementwise as ew
from ._promote import FLOAT, promote
from .registry import AbstractValue, apply, register
from .special_fns import _lgamma64, lgamma

__all__ = ["igamma", "igammac"]

_EPS = np.finfo(np.float64).eps
_TINY = 1e-300
_MAX_TERMS = 100_000


def _series_p(xp, a, x):
    """P(a, x) from its power series (x < a + 1, x > 0)."""
    total = xp.ones_like(x)
    term = xp.ones_like(x)
    n = 0
    active = xp.arange(x.size)
    while active.size and n < _MAX_TERMS:
        n += 1
        term[active] = term[active] * x[active] / (a[active] + n)
        total[active] = total[active] + term[active]
        active = active[xp.abs(term[active]) > xp.abs(total[active]) * _EPS]
    log_front = a * xp.log(x) - x - _lgamma64(xp, a + 1.0)
    return xp.exp(log_front) * total


def _fraction_q(xp, a, x):
    """Q(a, x) from its continued fraction (x >= a + 1)."""
    b = x + 1.0 - a
    c = xp.full_like(x, 1.0 / _TINY)
    d = 1.0 / b
    h = d.copy()
    n = 0
    active = xp.arange(x.size)
    while active.size and n < _MAX_TERMS:
        n += 1
        an = -n * (n - a[active])
        b[active] = b[active] + 2.0
        dn = an * d[active] + b[active]
        dn = xp.where(xp.abs(dn) < _TINY, _TINY, dn)
        cn = b[active] + an / c[active]
        cn = xp.where(xp.abs(cn) < _TINY, _TINY, cn)
        dn = 1.0 / dn
        delta = dn * cn
        d[active], c[active] = dn, cn
        h[active] = h[active] * delta
        active = active[xp.abs(delta - 1.0) > _EPS]
    log_front = a * xp.log(x) - x - _lgamma64(xp, a)
    return xp.exp(log_front) * h


def _lower_and_upper(xp, a, x):
    """(P, Q) in float64 for broadcast float64 arrays, PyTorch's values at the edges."""
    a, x = xp.broadcast_arrays(a, x)
    a, x = a.reshape(-1), x.reshape(-1)
    p = xp.full(a.shape, np.nan)
    q = xp.full(a.shape, np.nan)
    ok = (a >= 0) & (x >= 0)  # NaNs fail too
    rules = ((ok & (a == 0) & (x > 0), 1.0),           # P(0, x) = 1
             (ok & (a > 0) & (x == 0), 0.0),
             (ok & xp.isinf(a) & xp.isfinite(x), 0.0),
             (ok & xp.isfinite(a) & (a > 0) & xp.isinf(x), 1.0))
    for where, value in rules:
        p[where], q[where] = value, 1.0 - value
    regular = ok & (a > 0) & (x > 0) & xp.isfinite(a) & xp.isfinite(x)
    series = regular & (x < a + 1.0)
    fraction = regular & ~series
    if series.any():
        p[series] = _series_p(xp, a[series], x[series])
        q[series] = 1.0 - p[series]
    if fraction.any():
        q[fraction] = _fraction_q(xp, a[fraction], x[fraction])
        p[fraction] = 1.0 - q[fraction]
    return p, q


def _igamma_forward(xp, a, x, upper):
    shape = np.broadcast_shapes(a.shape, x.shape)
    p, q = _lower_and_upper(xp, a.astype(np.float64), x.astype(np.float64))
    return (q if upper else p).reshape(shape).astype(a.dtype, copy=False)


def _igamma_vjp(n, g):
    if n.edges[0] is not None:
        name = "igammac" if n.params["upper"] else "igamma"
        raise EmberError(f"{name}: the derivative for '{name}: input' (the parameter a) is "
                         "not implemented, as in PyTorch; only x has a gradient")
    a, x = n.saved_inputs()
    density = ew.exp(ew.xlogy(a - 1.0, x) - x - lgamma(a))
    return None, -(g * density) if n.params["upper"] else g * density


_IGAMMA = register("igamma", _igamma_forward, _igamma_vjp, broadcasting=True,
                   infer=lambda a, x, upper: AbstractValue(
                       np.broadcast_shapes(a.shape, x.shape), a.dtype))


def _operands(name, input, other):
    (a, x), _ = promote(name, (input, other), FLOAT)
    return a, x


def igamma(input, other):
    """The regularized lower incomplete gamma function
    ``P(a, x) = 1 / Gamma(a) * integral_0^x t^(a-1) e^-t dt`` of ``a = input`` and
    ``x = other`` (broadcast), elementwise; NaN where ``a`` or ``x`` is negative.
    Differentiable in ``x`` only.

    >>> ember.igamma(ember.tensor([1.0, 2.0]), ember.tensor([1.0, 1.0]))
    tensor([0.6321, 0.2642])
    """
    a, x = _operands("igamma", input, other)
    return apply(_IGAMMA, a, x, upper=False)


def igammac(input, other):
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)`` of
    ``a = input`` and ``x = other`` (see :func:`igamma`).

    >>> ember.igammac(ember.tensor([1.0, 2.0]), ember.tensor([1.0, 1.0]))
    tensor([0.3679, 0.7358])
    """
    a, x = _operands("igammac", input, other)
    return apply(_IGAMMA, a, x, upper=True)
