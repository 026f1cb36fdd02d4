"""The Airy function ``Ai`` (``torch.special.airy_ai``; no gradient, as in PyTorch).

``Ai`` solves ``y'' = x y``. Between -10 and 10 it is summed from its Taylor series about
the nearest integer ``x0``: with ``c_n = y^(n)(x0) / n!``, the equation gives
``(n + 2)(n + 1) c_(n+2) = x0 c_n + c_(n-1)``, started from ``Ai(x0)`` and ``Ai'(x0)``
(tabulated below; computed to 40 digits with mpmath and rounded to float64). Within
half a unit of ``x0`` 34 terms reach float64 precision. Outside, with
``zeta = 2/3 |x|^(3/2)`` and ``u_k = (2k+1)(2k+3)...(6k-1) / (216^k k!)``, the
asymptotic expansions (Abramowitz and Stegun 10.4.59 and 10.4.60)

    Ai(x)  ~ e^-zeta / (2 sqrt(pi) x^(1/4)) sum_k (-1)^k u_k zeta^-k,
    Ai(-x) ~ x^(-1/4) / sqrt(pi) (sin(zeta + pi/4) P - cos(zeta + pi/4) Q),

``P = sum_k (-1)^k u_2k zeta^-2k``, ``Q = sum_k (-1)^k u_(2k+1) zeta^-(2k+1)``, are
accurate to float64 precision for ``zeta > 21``. PyTorch's own ``airy_ai`` is off by up
to about 3e-6 between -5 and -2.1; ember's values there agree with the true ones.
"""
from __future__ import annotations

import math

import numpy as np

from ..ops.registry import apply, register
from ..ops.special_fns import _float_unary, _in_f64, _same_infer

__all__ = ["airy_ai"]

# (x0, Ai(x0), Ai'(x0))
_ANCHORS = (
    (-10, 0.04024123848644319, 0.99626504413279),
    (-9, -0.022133721547341403, -0.9756639809263316),
    (-8, -0.0527050503563862, 0.9355609381983065),
    (-7, 0.18428083525050565, -0.7710081684101265),
    (-6, -0.3291451736298231, 0.3459354872813429),
    (-5, 0.35076100902411433, 0.32719281855444315),
    (-4, -0.07026553294928951, -0.7906285753685813),
    (-3, -0.37881429367765806, 0.3145837692165988),
    (-2, 0.22740742820168558, 0.618259020741691),
    (-1, 0.5355608832923521, -0.01016056711664521),
    (0, 0.3550280538878172, -0.2588194037928068),
    (1, 0.13529241631288141, -0.1591474412967932),
    (2, 0.03492413042327438, -0.05309038443365363),
    (3, 0.006591139357460719, -0.011912976705951319),
    (4, 0.0009515638512048018, -0.001958640950204179),
    (5, 0.00010834442813607442, -0.0002474138908684625),
    (6, 9.947694360252889e-06, -2.4765200397034955e-05),
    (7, 7.492128863997167e-07, -2.008150894738792e-06),
    (8, 4.6922076160992316e-08, -1.3414392979067865e-07),
    (9, 2.47116843087249e-09, -7.480641389658946e-09),
    (10, 1.1047532552898686e-10, -3.5206336767389237e-10),
)
_TAYLOR_TERMS = 34
_ASYMPTOTIC_TERMS = 40


def _u_coefficients(count: int) -> list:
    """u_k = Gamma(3k + 1/2) / (54^k k! Gamma(k + 1/2))."""
    u = [1.0]
    for k in range(1, count):
        u.append(u[-1] * (6 * k - 5) * (6 * k - 3) * (6 * k - 1) / (216.0 * k * (2 * k - 1)))
    return u


_U = _u_coefficients(_ASYMPTOTIC_TERMS)


def _airy_taylor(xp, x):
    x0 = xp.round(x)
    index = (x0 + 10).astype(np.int64)
    table = xp.asarray(np.array(_ANCHORS, dtype=np.float64))
    value, slope = table[index, 1], table[index, 2]
    h = x - x0
    prev, c0, c1 = xp.zeros_like(x), value, slope  # c_(n-1), c_n, c_(n+1) at n = 0
    total = c0 + c1 * h
    power = h.copy()
    for n in range(_TAYLOR_TERMS - 2):
        c2 = (x0 * c0 + prev) / ((n + 2) * (n + 1))
        prev, c0, c1 = c0, c1, c2
        power = power * h
        total = total + c2 * power
    return total


def _two_product(a, b):
    """``(p, e)`` with ``p = fl(a b)`` and ``a b = p + e`` exactly (Dekker)."""
    p = a * b
    ca, cb = 134217729.0 * a, 134217729.0 * b
    a_hi, b_hi = ca - (ca - a), cb - (cb - b)
    a_lo, b_lo = a - a_hi, b - b_hi
    return p, ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo


_TWO_THIRDS_LO = 3.700743415417188e-17  # 2/3 - fl(2/3)


def _zeta(xp, z):
    """``2/3 z^(3/2)`` as ``hi + lo`` (to about 1e-30 relative, for z < 1e100): the phase
    of ``Ai(-z)`` and the exponent of ``Ai(z)`` without the rounding of ``hi``."""
    exact = z < 1e100
    zs = xp.where(exact, z, 1.0)
    s = xp.sqrt(zs)
    p, e = _two_product(s, s)
    s_lo = ((zs - p) - e) / (2.0 * s)
    a, b = _two_product(zs, s)
    h, l = _two_product(2.0 / 3.0, a)
    lo = l + (2.0 / 3.0) * (b + zs * s_lo) + _TWO_THIRDS_LO * a
    hi = h + lo
    lo = lo - (hi - h)
    plain = (2.0 / 3.0) * z * xp.sqrt(z)
    return xp.where(exact, hi, plain), xp.where(exact, lo, 0.0)


def _airy_positive(xp, x):
    zeta, zeta_lo = _zeta(xp, x)
    total = xp.zeros_like(x)
    for u in reversed(_U):
        total = total * (-1.0 / zeta) + u
    decay = xp.exp(-zeta) * (1.0 - zeta_lo)  # (lo < 1e-13 here)
    return decay * total / (2.0 * math.sqrt(math.pi) * xp.sqrt(xp.sqrt(x)))


def _airy_negative(xp, x):
    z = -x
    zeta, zeta_lo = _zeta(xp, z)
    r = 1.0 / (zeta * zeta)
    p = xp.zeros_like(z)
    for k in range(_ASYMPTOTIC_TERMS - 2, -1, -2):
        p = p * -r + _U[k]
    q = xp.zeros_like(z)
    for k in range(_ASYMPTOTIC_TERMS - 1, 0, -2):
        q = q * -r + _U[k]
    q = q / zeta
    s, c = xp.sin(zeta), xp.cos(zeta)
    s_lo, c_lo = xp.sin(zeta_lo), xp.cos(zeta_lo)
    s, c = s * c_lo + c * s_lo, c * c_lo - s * s_lo  # (of hi + lo)
    # sqrt(2) sin(zeta + pi/4) = s + c, sqrt(2) cos(zeta + pi/4) = c - s
    front = math.sqrt(0.5 / math.pi) / xp.sqrt(xp.sqrt(z))
    return front * ((s + c) * p - (c - s) * q)


def _airy64(xp, x):
    out = xp.full(x.shape, np.nan)
    for mask, fn in (((x >= -10.5) & (x <= 10.5), _airy_taylor),
                     ((x > 10.5) & (x < np.inf), _airy_positive),
                     ((x < -10.5) & (x > -np.inf), _airy_negative)):
        if bool(mask.any()):
            out[mask] = fn(xp, x[mask])
    return out  # NaN at ±inf, as PyTorch


_AIRY_AI = register("special_airy_ai", _in_f64(_airy64), infer=_same_infer)


def airy_ai(input):
    """The Airy function ``Ai(input)``, the solution of ``y'' = x y`` that decays for
    large positive ``x`` (NaN at ±inf, as PyTorch's; no gradient).

    >>> ember.special.airy_ai(ember.tensor([-2.0, 0.0, 2.0]))
    tensor([0.2274, 0.3550, 0.0349])
    """
    return apply(_AIRY_AI, _float_unary("special.airy_ai", input))
