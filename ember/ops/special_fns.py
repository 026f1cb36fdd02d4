"""Special functions: lgamma, digamma, polygamma, zeta, erfinv, ndtri, i0, i1, and the
composites built on them (xlog1py, entr, ndtr, multigammaln). ``ember.special`` exports
them with PyTorch's names.

Forwards compute in float64 with series and recurrences (no SciPy) and round once:
lgamma and digamma shift the argument above 10 by recurrence and sum their asymptotic
series, reflecting arguments below 1/2; polygamma is the Hurwitz zeta function summed
as Cephes does (direct terms, then Euler-Maclaurin); erfinv and ndtri refine a rational
first guess with Newton steps on ``erf``/``erfc``.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import EmberError
from . import _xp, elementwise as ew, logical as lg
from ._promote import FLOAT, promote
from .registry import AbstractValue, apply, register

__all__ = ["lgamma", "digamma", "polygamma", "zeta", "erfinv", "ndtri", "i0", "i1",
           "xlog1py", "entr", "ndtr", "multigammaln", "mvlgamma"]
NOT_METHODS = ("zeta", "ndtri", "i1", "entr", "ndtr", "multigammaln")

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _same_infer(*avals, **params):
    return AbstractValue(np.broadcast_shapes(*(a.shape for a in avals)), avals[0].dtype)


def _in_f64(fn):
    """A forward computing ``fn(xp, x)`` on float64 and rounding to the input's dtype."""
    def forward(xp, a, **params):
        out = fn(xp, a.astype(np.float64), **params)
        return xp.asarray(out).astype(a.dtype, copy=False)
    return forward


def _shift_above(xp, z, limit, term):
    """(z shifted by whole steps to at least ``limit``, the sum of ``term(z)`` over the
    values skipped)."""
    acc = xp.zeros_like(z)
    low = z < limit
    while bool(low.any()):
        acc = acc + xp.where(low, term(xp.where(low, z, 1.0)), 0.0)
        z = xp.where(low, z + 1.0, z)
        low = z < limit
    return z, acc


def _sin_pi(xp, x):
    """|sin(pi x)| without the rounding error of pi x for large x."""
    return xp.abs(xp.sin(np.pi * (x - xp.round(x))))


def _lgamma64(xp, x):
    reflect = x < 0.5
    z = xp.where(reflect, 1.0 - x, x)
    z = xp.where(xp.isfinite(z), z, 10.0)
    z, acc = _shift_above(xp, z, 10.0, xp.log)
    r = 1.0 / (z * z)
    series = (1 / 12 + r * (-1 / 360 + r * (1 / 1260 + r * (-1 / 1680 + r * (
        1 / 1188 + r * (-691 / 360360 + r / 156)))))) / z
    value = (z - 0.5) * xp.log(z) - z + _HALF_LOG_2PI + series - acc
    reflected = xp.log(np.pi / _sin_pi(xp, x)) - value
    out = xp.where(reflect, reflected, value)
    pole = (x <= 0) & (x == xp.floor(x))
    return xp.where(pole | xp.isinf(x), np.inf, xp.where(xp.isnan(x), np.nan, out))


def _digamma64(xp, x):
    reflect = x < 0.5
    z = xp.where(reflect, 1.0 - x, x)
    z = xp.where(xp.isfinite(z), z, 10.0)
    z, acc = _shift_above(xp, z, 10.0, lambda v: 1.0 / v)
    r = 1.0 / (z * z)
    series = xp.log(z) - 0.5 / z - r * (1 / 12 - r * (1 / 120 - r * (1 / 252 - r * (
        1 / 240 - r * (1 / 132 - r * (691 / 32760 - r / 12))))))
    value = series - acc
    frac = x - xp.round(x)
    reflected = value - np.pi / xp.tan(np.pi * frac)
    out = xp.where(reflect, reflected, value)
    out = xp.where((x < 0) & (frac == 0), np.nan, out)
    out = xp.where(x == 0, xp.where(xp.signbit(x), np.inf, -np.inf), out)
    out = xp.where(xp.isposinf(x), np.inf, out)
    return xp.where(xp.isneginf(x) | xp.isnan(x), np.nan, out)


def _trigamma64(xp, x):
    """PyTorch's own trigamma (reflection, six recurrence steps, the asymptotic series
    to x^-7), reproduced so results match it, large finite values at the poles
    included."""
    reflect = x < 0.5
    result = xp.where(reflect, -(np.pi * np.pi) / xp.sin(np.pi * x) ** 2, 0.0)
    z = xp.where(reflect, 1.0 - x, x)
    for _ in range(6):
        result = result + 1.0 / (z * z)
        z = z + 1.0
    ixx = 1.0 / (z * z)
    result = result + (1.0 + 1.0 / (2.0 * z) + ixx * (1.0 / 6 - ixx * (
        1.0 / 30 - ixx * (1.0 / 42)))) / z
    return xp.where(reflect, -result, result)


# Cephes' zeta: (2k)! / B_2k for the Euler-Maclaurin terms.
_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
           7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
           -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18)


def _zeta64(xp, s, q):
    """The Hurwitz zeta function sum over k >= 0 of (q + k) ** -s, for s > 1."""
    pole = (q <= 0) & (q == xp.floor(q))
    q = xp.where(pole | ~xp.isfinite(q), 1.0, q)
    w, total = _shift_above(xp, q, 10.0, lambda v: v ** -s)
    b = w ** -s
    total = total + b + b * w / (s - 1.0) - 0.5 * b
    a, k = 1.0, 0.0
    for coef in _ZETA_A:
        a = a * (s + k)
        b = b / w
        total = total + a * b / coef
        k += 1.0
        a = a * (s + k)
        b = b / w
        k += 1.0
    return xp.where(pole, np.inf, total)


def _polygamma64(xp, x, n):
    if n == 0:
        return _digamma64(xp, x)
    if n == 1:
        return _trigamma64(xp, x)
    out = (-1.0) ** (n + 1) * math.factorial(n) * _zeta64(xp, float(n + 1), x)
    return xp.where(xp.isnan(x) | xp.isinf(x), np.nan, out)  # (PyTorch's NaN at ±inf)


def _float_unary(name, input):
    (x,), _ = promote(name, (input,), FLOAT)
    return x


# lgamma / digamma / polygamma -------------------------------------------------------------
_LGAMMA = register("lgamma", _in_f64(_lgamma64), lambda n, g: g * digamma(n.saved_inputs()[0]),
                   infer=_same_infer)
_POLYGAMMA = register(
    "polygamma", _in_f64(_polygamma64),
    lambda n, g: g * apply(_POLYGAMMA, n.saved_inputs()[0], n=n.params["n"] + 1),
    infer=_same_infer)


def lgamma(input):
    """The log of the absolute value of the gamma function (``inf`` at its poles).

    >>> ember.lgamma(ember.tensor([0.5, 3.0]))
    tensor([0.5724, 0.6931])
    """
    return apply(_LGAMMA, _float_unary("lgamma", input))


def digamma(input):
    """The derivative of :func:`lgamma` (``-inf`` at 0, NaN at negative integers).

    >>> ember.digamma(ember.tensor([1.0]))
    tensor([-0.5772])
    """
    return apply(_POLYGAMMA, _float_unary("digamma", input), n=0)


def polygamma(n: int, input):
    """The ``n``-th derivative of :func:`digamma` (``n >= 0``).

    >>> ember.polygamma(1, ember.tensor([1.0]))
    tensor([1.6449])
    """
    if not isinstance(n, int) or n < 0:
        raise EmberError(f"polygamma(n, x) does not support negative n (got {n})")
    return apply(_POLYGAMMA, _float_unary("polygamma", input), n=n)


def _zeta_forward(xp, s, q):
    s64, q64 = s.astype(np.float64), q.astype(np.float64)
    out = _zeta64(xp, s64, q64)
    # Cephes: no value for a negative non-integer q unless s is an integer
    bad = (s64 < 1) | ((q64 <= 0) & (q64 != xp.floor(q64)) & (s64 != xp.floor(s64)))
    out = xp.where(s64 == 1, np.inf, xp.where(bad | xp.isnan(s64) | xp.isnan(q64), np.nan, out))
    return out.astype(s.dtype, copy=False)


_ZETA = register("zeta", _zeta_forward, None, broadcasting=True, infer=_same_infer)


def zeta(input, other):
    """The Hurwitz zeta function: the sum over k >= 0 of ``(other + k) ** -input``.

    >>> ember.special.zeta(ember.tensor([2.0]), 1.0)
    tensor([1.6449])
    """
    (s, q), _ = promote("zeta", (input, other), FLOAT)
    return apply(_ZETA, s, q)


def multigammaln(input, p: int):
    """The log of the multivariate gamma function of dimension ``p``:
    ``p (p - 1) / 4 log(pi) + sum over j < p of lgamma(input - j / 2)``.

    >>> ember.special.multigammaln(ember.tensor([2.0]), 2)
    tensor([0.7736])
    """
    x = _float_unary("multigammaln", input)
    if p < 1:
        raise EmberError(f"multigammaln: p has to be greater than or equal to 1, got {p}")
    # (no domain check, as PyTorch 2.13: at or below (p - 1) / 2 the terms are log|gamma|)
    out = lgamma(x)
    for j in range(1, p):
        out = out + lgamma(x - j / 2)
    return out + p * (p - 1) / 4 * math.log(math.pi)


mvlgamma = multigammaln


# erfinv / ndtri ------------------------------------------------------------------------------
def _erfinv64(xp, y):
    w = -xp.log((1.0 - y) * (1.0 + y))
    c = w - 2.5
    central = 2.81022636e-08
    for k in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
              -0.00125372503, -0.00417768164, 0.246640727, 1.50140941):
        central = k + central * c
    t = xp.sqrt(xp.abs(w)) - 3.0
    tail = -0.000200214257
    for k in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682):
        tail = k + tail * t
    inside = xp.abs(y) < 1
    yi = xp.where(inside, y, 0.0)
    x = xp.where(w < 5.0, central, tail) * yi
    x = xp.where(inside, x, 0.0)
    tail = xp.abs(yi) > 0.5
    for _ in range(6):  # Newton on erf(x) = y; near ±1 on erfc, where 1 - |y| is exact
        far = (1.0 - xp.abs(yi)) - _xp.erfc(xp, xp.abs(x))
        err = xp.where(tail, xp.sign(yi) * far, _xp.erf(xp, x) - yi)
        x = x - err / (2.0 / math.sqrt(math.pi) * xp.exp(-x * x))
    x = xp.where(xp.abs(y) == 1, xp.copysign(np.inf, y), x)
    return xp.where((xp.abs(y) > 1) | xp.isnan(y), np.nan, x)


_ERFINV = register("erfinv", _in_f64(_erfinv64),
                   lambda n, g: g * (math.sqrt(math.pi) / 2) * ew.exp(ew.square(n.output(0))),
                   saves_inputs=False, saves_outputs=True, infer=_same_infer)


def erfinv(input):
    """The inverse of :func:`erf` on (-1, 1) (±inf at ±1, NaN outside).

    >>> ember.erfinv(ember.tensor([0.0, 0.5]))
    tensor([0.0000, 0.4769])
    """
    return apply(_ERFINV, _float_unary("erfinv", input))


# Acklam's rational approximation of the normal quantile, refined by one Halley step.
_ACKLAM_A = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
             1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00)
_ACKLAM_B = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
             6.680131188771972e+01, -1.328068155288572e+01)
_ACKLAM_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
             -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00)
_ACKLAM_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
             3.754408661907416e+00)


def _poly(coefs, x):
    out = 0.0
    for c in coefs:
        out = out * x + c
    return out


def _ndtri64(xp, p):
    upper = p > 0.5
    q = xp.where(upper, 1.0 - p, p)  # exact for p >= 0.5; the lower half of the range
    inside = (q > 0) & (q <= 0.5)
    q = xp.where(inside, q, 0.25)
    r = xp.sqrt(-2.0 * xp.log(q))
    tail = _poly(_ACKLAM_C, r) / (_poly(_ACKLAM_D, r) * r + 1.0)
    c = q - 0.5
    cc = c * c
    central = _poly(_ACKLAM_A, cc) * c / (_poly(_ACKLAM_B, cc) * cc + 1.0)
    x = xp.where(q < 0.02425, tail, central)
    for _ in range(2):
        e = 0.5 * _xp.erfc(xp, -x / math.sqrt(2.0)) - q
        u = e * math.sqrt(2 * math.pi) * xp.exp(0.5 * x * x)
        x = x - u / (1.0 + 0.5 * x * u)
    x = xp.where(upper, -x, x)
    x = xp.where(p == 0, -np.inf, xp.where(p == 1, np.inf, x))
    return xp.where((p < 0) | (p > 1) | xp.isnan(p), np.nan, x)


_NDTRI = register("ndtri", _in_f64(_ndtri64),
                  lambda n, g: g * math.sqrt(2 * math.pi) * ew.exp(0.5 * ew.square(n.output(0))),
                  saves_inputs=False, saves_outputs=True, infer=_same_infer)


def ndtri(input):
    """The quantile function of the standard normal distribution (the inverse of
    :func:`ndtr`).

    >>> ember.special.ndtri(ember.tensor([0.5, 0.975]))
    tensor([0.0000, 1.9600])
    """
    return apply(_NDTRI, _float_unary("ndtri", input))


def ndtr(input):
    """The standard normal distribution function: ``(1 + erf(input / sqrt(2))) / 2``.

    >>> ember.special.ndtr(ember.tensor([0.0]))
    tensor([0.5000])
    """
    return 0.5 * ew.erfc(_float_unary("ndtr", input) * -math.sqrt(0.5))


# Bessel functions I0 and I1 -----------------------------------------------------------------
def _bessel64(xp, x, order):
    """I0 or I1: the power series below 20, the asymptotic series above (each to float64
    precision there)."""
    ax = xp.abs(x)
    small = xp.minimum(ax, 20.0)
    quarter = small * small / 4
    term = xp.ones_like(x) if order == 0 else small / 2
    total = term
    for k in range(1, 80):
        term = term * quarter / (k * (k + order))
        total = total + term
    big = xp.maximum(ax, 20.0)
    mu = 4.0 * order * order
    coef, asym = xp.ones_like(x), xp.ones_like(x)
    for k in range(1, 30):
        coef = coef * -(mu - (2 * k - 1) ** 2) / (k * 8.0 * big)
        asym = asym + coef
    with np.errstate(over="ignore"):
        large = xp.exp(big) / xp.sqrt(2 * np.pi * big) * asym
    out = xp.where(ax <= 20.0, total, large)
    return out if order == 0 else xp.where(x < 0, -out, out)


def _i0_vjp(n, g):
    return g * i1(n.saved_inputs()[0])


def _i1_vjp(n, g):
    x, = n.saved_inputs()
    safe = ew.where(lg.eq(x, 0), 1.0, x)
    return g * ew.where(lg.eq(x, 0), 0.5, i0(x) - n.output(0) / safe)


_I0 = register("i0", _in_f64(lambda xp, x: _bessel64(xp, x, 0)), _i0_vjp, infer=_same_infer)
_I1 = register("i1", _in_f64(lambda xp, x: _bessel64(xp, x, 1)), _i1_vjp, saves_outputs=True,
               infer=_same_infer)


def i0(input):
    """The modified Bessel function of the first kind of order 0.

    >>> ember.i0(ember.tensor([0.0, 1.0]))
    tensor([1.0000, 1.2661])
    """
    return apply(_I0, _float_unary("i0", input))


def i1(input):
    """The modified Bessel function of the first kind of order 1.

    >>> ember.special.i1(ember.tensor([1.0]))
    tensor([0.5652])
    """
    return apply(_I1, _float_unary("i1", input))


# composites ------------------------------------------------------------------------------------
def _xlog1py_forward(xp, x, y):
    zero = (x == 0) & ~xp.isnan(y)
    return xp.where(zero, 0.0, x * xp.log1p(xp.where(zero, 0.0, y))).astype(x.dtype, copy=False)


def _xlog1py_vjp(n, g):
    x, y = n.saved_inputs()
    return ((g * ew.log1p(y)) if n.edges[0] else None,
            (g * x / (y + 1)) if n.edges[1] else None)


_XLOG1PY = register("xlog1py", _xlog1py_forward, _xlog1py_vjp, broadcasting=True,
                    infer=_same_infer)


def xlog1py(input, other):
    """``input * log1p(other)``, 0 where ``input`` is 0 (unless ``other`` is NaN).

    >>> ember.special.xlog1py(ember.tensor([0.0, 2.0]), ember.tensor([-1.0, 0.0]))
    tensor([0., 0.])
    """
    (x, y), _ = promote("xlog1py", (input, other), FLOAT)
    return apply(_XLOG1PY, x, y)


def entr(input):
    """Elementwise entropy: ``-x log(x)`` for ``x > 0``, 0 at 0, ``-inf`` below.

    >>> ember.special.entr(ember.tensor([0.5, 0.0]))
    tensor([0.3466, 0.0000])
    """
    x = _float_unary("entr", input)
    positive = lg.gt(x, 0)
    value = -x * ew.log(ew.where(positive, x, 1.0))
    return ew.where(positive, value, ew.where(lg.eq(x, 0), 0.0, ew.where(lg.isnan(x), x,
                                                                         -math.inf)))
