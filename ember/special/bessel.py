"""Bessel functions with ``torch.special``'s names: the exponentially scaled ``i0e`` and
``i1e`` (differentiable, as in PyTorch), and ``modified_bessel_i0/i1/k0/k1``,
``scaled_modified_bessel_k0/k1``, ``bessel_j0/j1/y0/y1`` and ``spherical_bessel_j0``
(not differentiable in PyTorch, so their results never require a gradient here either).

Forwards compute in float64 and round once, from the series and integrals themselves
(no tables of fitted coefficients):

- ``I0``, ``I1``: the power series up to 20, the asymptotic series
  ``e^x / sqrt(2 pi x) sum_k (-1)^k a_k(nu) / x^k`` above (scaled: without ``e^x``).
- ``K0``, ``K1``: the logarithmic power series up to 1; from 1 to 25 the integral
  ``e^x K_nu(x) = int_0^inf exp(-x (cosh t - 1)) cosh(nu t) dt`` by the trapezoidal rule,
  which converges geometrically for this analytic, fast-decaying integrand (step 0.1
  leaves an error far below 1e-16); above 25 the asymptotic series
  ``sqrt(pi / (2x)) e^-x sum_k a_k(nu) / x^k``.
- ``J0``, ``J1``, ``Y0``, ``Y1``: the power series up to 1; from 1 to 25 Miller's backward
  recurrence for ``J_n(x)``, normalised by ``J_0 + 2 sum_k J_2k = 1``, with ``Y0`` and
  ``Y1`` from the Neumann series ``Y0 = 2/pi (log(x/2) + gamma) J0 - 4/pi
  sum_k (-1)^k J_2k / k`` and its derivative; above 25 Hankel's asymptotic expansion.
  These are accurate to a few units of 1e-16 times the function's amplitude; PyTorch's
  own ``bessel_j0/j1/y0/y1`` are off by up to about 1e-6 between 2 and 25, so ember's
  values there differ from PyTorch's by that much (and agree with the true values).
"""
from __future__ import annotations

import math

import numpy as np

from ..ops import elementwise as ew, logical as lg
from ..ops.registry import apply, register
from ..ops.special_fns import _bessel64, _float_unary, _in_f64, _same_infer

__all__ = ["i0e", "i1e", "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
           "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
           "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "spherical_bessel_j0"]

_EULER_GAMMA = 0.57721566490153286061
_TWO_OVER_PI = 2.0 / math.pi
_LN2 = math.log(2.0)  # (log(x) - log 2, not log(x / 2), which is -inf at 5e-324)


def _piecewise(xp, x, pieces):
    """A float64 array like ``x``: NaN, then ``fn(x[mask])`` where each mask holds."""
    out = xp.full(x.shape, np.nan)
    for mask, fn in pieces:
        if bool(mask.any()):
            out[mask] = fn(x[mask])
    return out


def _asymptotic_coefficients(order: int, count: int) -> list:
    """``a_k(nu) = prod_{j<=k} (4 nu^2 - (2j - 1)^2) / (k! 8^k)`` for k < count."""
    mu = 4.0 * order * order
    coefs = [1.0]
    for k in range(1, count):
        coefs.append(coefs[-1] * (mu - (2 * k - 1) ** 2) / (8.0 * k))
    return coefs


# I0 / I1, scaled -------------------------------------------------------------------------
_I_ASYMPTOTIC = {order: _asymptotic_coefficients(order, 30) for order in (0, 1)}


def _bessel_i_scaled64(xp, x, order):
    """``exp(-|x|) I_order(x)``."""
    ax = xp.abs(x)
    small = xp.minimum(ax, 20.0)
    quarter = small * small / 4
    term = xp.ones_like(x) if order == 0 else small / 2
    total = term
    for k in range(1, 80):
        term = term * quarter / (k * (k + order))
        total = total + term
    big = xp.maximum(ax, 20.0)
    asym = xp.zeros_like(x)
    for coef in reversed(_I_ASYMPTOTIC[order]):  # I's series alternates: a_k (-1/x)^k
        asym = asym * (-1.0 / big) + coef
    out = xp.where(ax <= 20.0, total * xp.exp(-small), asym / xp.sqrt(2 * np.pi * big))
    out = xp.where(xp.isinf(x), 0.0, out)
    return out if order == 0 else xp.where(x < 0, -out, out)


def _i0e_vjp(n, g):
    x, = n.saved_inputs()
    return g * (i1e(x) - ew.sign(x) * n.output(0))


def _i1e_vjp(n, g):
    x, = n.saved_inputs()
    out = n.output(0)
    zero = lg.eq(x, 0)
    slope = i0e(x) - out * (ew.sign(x) + 1.0 / ew.where(zero, 1.0, x))
    return g * ew.where(zero, 0.5, slope)


_I0E = register("special_i0e", _in_f64(lambda xp, x: _bessel_i_scaled64(xp, x, 0)), _i0e_vjp,
                saves_outputs=True, infer=_same_infer)
_I1E = register("special_i1e", _in_f64(lambda xp, x: _bessel_i_scaled64(xp, x, 1)), _i1e_vjp,
                saves_outputs=True, infer=_same_infer)
_MOD_I0 = register("special_modified_bessel_i0", _in_f64(lambda xp, x: _bessel64(xp, x, 0)),
                   infer=_same_infer)
_MOD_I1 = register("special_modified_bessel_i1", _in_f64(lambda xp, x: _bessel64(xp, x, 1)),
                   infer=_same_infer)


def i0e(input):
    """The exponentially scaled modified Bessel function of the first kind of order 0,
    ``exp(-|input|) * i0(input)``; differentiable.

    >>> ember.special.i0e(ember.tensor([0.0, 1.0, 100.0]))
    tensor([1.0000, 0.4658, 0.0399])
    """
    return apply(_I0E, _float_unary("special.i0e", input))


def i1e(input):
    """The exponentially scaled modified Bessel function of the first kind of order 1,
    ``exp(-|input|) * i1(input)``; differentiable.

    >>> ember.special.i1e(ember.tensor([0.0, 1.0, 100.0]))
    tensor([0.0000, 0.2079, 0.0397])
    """
    return apply(_I1E, _float_unary("special.i1e", input))


def modified_bessel_i0(input):
    """The modified Bessel function of the first kind of order 0 (the values of
    :func:`ember.special.i0`, without a gradient, as PyTorch's).

    >>> ember.special.modified_bessel_i0(ember.tensor([1.0]))
    tensor([1.2661])
    """
    return apply(_MOD_I0, _float_unary("special.modified_bessel_i0", input))


def modified_bessel_i1(input):
    """The modified Bessel function of the first kind of order 1 (no gradient).

    >>> ember.special.modified_bessel_i1(ember.tensor([1.0]))
    tensor([0.5652])
    """
    return apply(_MOD_I1, _float_unary("special.modified_bessel_i1", input))


# K0 / K1 -------------------------------------------------------------------------------------
_K_ASYMPTOTIC = {order: _asymptotic_coefficients(order, 25) for order in (0, 1)}
_K_STEP = 0.1
_K_NODES = np.arange(60) * _K_STEP


def _bessel_k_series(xp, x, order):
    """K_order(x) for 0 < x <= 1 from its logarithmic power series."""
    q = x * x / 4
    log_half = (xp.log(x) - _LN2)
    i_term = xp.ones_like(x) if order == 0 else x / 2
    i_sum = i_term
    psi_k, psi_next = -_EULER_GAMMA, 1.0 - _EULER_GAMMA  # psi(k + 1), psi(k + 2)
    tail = psi_k * i_term if order == 0 else (psi_k + psi_next) * i_term
    for k in range(1, 20):
        i_term = i_term * q / (k * (k + order))
        i_sum = i_sum + i_term
        psi_k, psi_next = psi_k + 1.0 / k, psi_next + 1.0 / (k + 1)
        tail = tail + (psi_k if order == 0 else psi_k + psi_next) * i_term
    if order == 0:  # -log(x/2) I0 + sum psi(k + 1) q^k / k!^2
        return tail - log_half * i_sum
    # 1/x + log(x/2) I1 - 1/2 sum (psi(k + 1) + psi(k + 2)) (x/2) q^k / (k! (k + 1)!)
    return 1.0 / x + log_half * i_sum - 0.5 * tail


def _bessel_k_scaled_integral(xp, x, order):
    """exp(x) K_order(x) for 1 <= x <= 25 by the trapezoidal rule."""
    t = xp.asarray(_K_NODES)
    half_sinh = xp.sinh(t / 2)
    weight = xp.cosh(order * t) * _K_STEP
    weight[0] *= 0.5
    f = xp.exp(-2.0 * x[:, None] * (half_sinh * half_sinh)[None, :])  # cosh t - 1
    return f @ weight


def _bessel_k_scaled_asymptotic(xp, x, order):
    total = xp.zeros_like(x)
    for coef in reversed(_K_ASYMPTOTIC[order]):
        total = total / x + coef
    return total * xp.sqrt(np.pi / (2.0 * x))


def _bessel_k64(xp, x, order, scaled):
    def series(v):
        out = _bessel_k_series(xp, v, order)
        return out * xp.exp(v) if scaled else out

    def integral(v):
        out = _bessel_k_scaled_integral(xp, v, order)
        return out if scaled else out * xp.exp(-v)

    def asymptotic(v):
        out = _bessel_k_scaled_asymptotic(xp, v, order)
        return out if scaled else out * xp.exp(-v)

    return _piecewise(xp, x, [
        (x == 0, lambda v: xp.full(v.shape, np.inf)),
        ((x > 0) & (x <= 1.0), series),
        ((x > 1.0) & (x <= 25.0), integral),
        ((x > 25.0) & (x < np.inf), asymptotic),
        (x == np.inf, lambda v: xp.zeros(v.shape))])


def _k_op(name, order, scaled):
    return register(name, _in_f64(lambda xp, x: _bessel_k64(xp, x, order, scaled)),
                    infer=_same_infer)


_MOD_K0 = _k_op("special_modified_bessel_k0", 0, False)
_MOD_K1 = _k_op("special_modified_bessel_k1", 1, False)
_SCALED_K0 = _k_op("special_scaled_modified_bessel_k0", 0, True)
_SCALED_K1 = _k_op("special_scaled_modified_bessel_k1", 1, True)


def modified_bessel_k0(input):
    """The modified Bessel function of the second kind of order 0 (``inf`` at 0, NaN
    for negative inputs; no gradient).

    >>> ember.special.modified_bessel_k0(ember.tensor([0.5, 2.0]))
    tensor([0.9244, 0.1139])
    """
    return apply(_MOD_K0, _float_unary("special.modified_bessel_k0", input))


def modified_bessel_k1(input):
    """The modified Bessel function of the second kind of order 1 (``inf`` at 0, NaN
    for negative inputs; no gradient).

    >>> ember.special.modified_bessel_k1(ember.tensor([0.5, 2.0]))
    tensor([1.6564, 0.1399])
    """
    return apply(_MOD_K1, _float_unary("special.modified_bessel_k1", input))


def scaled_modified_bessel_k0(input):
    """``exp(input) * modified_bessel_k0(input)``, finite for large inputs (no gradient).

    >>> ember.special.scaled_modified_bessel_k0(ember.tensor([2.0, 1000.0]))
    tensor([0.8416, 0.0396])
    """
    return apply(_SCALED_K0, _float_unary("special.scaled_modified_bessel_k0", input))


def scaled_modified_bessel_k1(input):
    """``exp(input) * modified_bessel_k1(input)``, finite for large inputs (no gradient).

    >>> ember.special.scaled_modified_bessel_k1(ember.tensor([2.0, 1000.0]))
    tensor([1.0335, 0.0396])
    """
    return apply(_SCALED_K1, _float_unary("special.scaled_modified_bessel_k1", input))


# J0 / J1 / Y0 / Y1 ------------------------------------------------------------------------------
_HANKEL = {order: _asymptotic_coefficients(order, 28) for order in (0, 1)}


def _bessel_jy_series(xp, x, order, kind):
    """J or Y of order 0 or 1 for 0 < x <= 1 from the power series."""
    q = -x * x / 4
    term = xp.ones_like(x) if order == 0 else x / 2
    j_sum = term
    psi_k, psi_next = -_EULER_GAMMA, 1.0 - _EULER_GAMMA
    tail = (2 * psi_k if order == 0 else psi_k + psi_next) * term
    for k in range(1, 20):
        term = term * q / (k * (k + order))
        j_sum = j_sum + term
        psi_k, psi_next = psi_k + 1.0 / k, psi_next + 1.0 / (k + 1)
        tail = tail + (2 * psi_k if order == 0 else psi_k + psi_next) * term
    if kind == "j":
        return j_sum
    # Y_n = -(n>0) (2 / (pi x)) + 2/pi log(x/2) J_n - 1/pi sum (psi(k+1) + psi(n+k+1)) ...
    y = _TWO_OVER_PI * (xp.log(x) - _LN2) * j_sum - tail / np.pi
    return y - _TWO_OVER_PI / x if order == 1 else y


def _miller_coefficients(top: int):
    """Per index m <= top: (weight in J0 + 2 sum J_2k, in sum (-1)^k J_2k / k, in
    sum (-1)^k (J_2k-1 - J_2k+1) / k)."""
    out = []
    for m in range(top + 1):
        norm = 1.0 if m == 0 else (2.0 if m % 2 == 0 else 0.0)
        even = (-1.0) ** (m // 2) / (m // 2) if m and m % 2 == 0 else 0.0
        odd = 0.0
        if m % 2:
            k = (m + 1) // 2
            odd += (-1.0) ** k / k
            if m >= 3:
                k = (m - 1) // 2
                odd -= (-1.0) ** k / k
        out.append((norm, even, odd))
    return out


_MILLER_TOP = 70
_MILLER = _miller_coefficients(_MILLER_TOP)


def _bessel_jy_miller(xp, x, order, kind):
    """J or Y of order 0 or 1 for 1 < x <= 25 by Miller's backward recurrence."""
    top = min(_MILLER_TOP, 2 * int((float(x.max()) + 45) // 2))
    above = xp.zeros_like(x)       # J_{m+1}, unnormalised
    current = xp.full(x.shape, 1e-30)  # J_m
    j0 = j1 = None
    norm = xp.zeros_like(x)
    even = xp.zeros_like(x)
    odd = xp.zeros_like(x)
    inv_x = 1.0 / x
    for m in range(top, -1, -1):
        w_norm, w_even, w_odd = _MILLER[m]
        if w_norm:
            norm = norm + w_norm * current
        if w_even:
            even = even + w_even * current
        if w_odd:
            odd = odd + w_odd * current
        if m == 1:
            j1 = current
        if m == 0:
            j0 = current
            break
        above, current = current, (2.0 * m) * inv_x * current - above
    j0, j1, even, odd = j0 / norm, j1 / norm, even / norm, odd / norm
    if kind == "j":
        return j0 if order == 0 else j1
    log_term = (xp.log(x) - _LN2) + _EULER_GAMMA
    if order == 0:
        return _TWO_OVER_PI * (log_term * j0 - 2.0 * even)
    return _TWO_OVER_PI * (log_term * j1 + odd - j0 * inv_x)


def _bessel_jy_hankel(xp, x, order, kind):
    """Hankel's expansion for x > 25: sqrt(2 / (pi x)) (P cos chi - Q sin chi) for J,
    (P sin chi + Q cos chi) for Y, chi = x - (2 order + 1) pi / 4."""
    coefs = _HANKEL[order]
    r = 1.0 / (x * x)
    p = xp.zeros_like(x)
    for k in range(len(coefs) - 2, -1, -2):  # the even ones: P = sum (-1)^k a_2k x^-2k
        p = p * -r + coefs[k]
    q = xp.zeros_like(x)
    for k in range(len(coefs) - 1, 0, -2):
        q = q * -r + coefs[k]
    q = q / x
    s, c = xp.sin(x), xp.cos(x)  # cos(x - pi/4) and friends, without rounding pi/4
    if order == 0:
        cos_chi, sin_chi = (c + s) * math.sqrt(0.5), (s - c) * math.sqrt(0.5)
    else:
        cos_chi, sin_chi = (s - c) * math.sqrt(0.5), -(s + c) * math.sqrt(0.5)
    front = xp.sqrt(_TWO_OVER_PI / x)
    if kind == "j":
        return front * (p * cos_chi - q * sin_chi)
    return front * (p * sin_chi + q * cos_chi)


def _bessel_jy64(xp, x, order, kind):
    ax = xp.abs(x)
    if kind == "j":
        pieces = [(ax == 0, lambda v: xp.full(v.shape, 1.0 if order == 0 else 0.0)),
                  (ax == np.inf, lambda v: xp.zeros(v.shape))]
    else:
        pieces = [(x == 0, lambda v: xp.full(v.shape, -np.inf)),
                  (x == np.inf, lambda v: xp.zeros(v.shape))]
    out = _piecewise(xp, ax if kind == "j" else x, pieces + [
        ((x > 0) & (x <= 1.0) if kind == "y" else (ax > 0) & (ax <= 1.0),
         lambda v: _bessel_jy_series(xp, v, order, kind)),
        ((ax > 1.0) & (ax <= 25.0) & (x > 0 if kind == "y" else True),
         lambda v: _bessel_jy_miller(xp, v, order, kind)),
        ((ax > 25.0) & (ax < np.inf) & (x > 0 if kind == "y" else True),
         lambda v: _bessel_jy_hankel(xp, v, order, kind))])
    return xp.where(x < 0, -out, out) if kind == "j" and order == 1 else out


def _jy_op(name, order, kind):
    return register(name, _in_f64(lambda xp, x: _bessel_jy64(xp, x, order, kind)),
                    infer=_same_infer)


_J0 = _jy_op("special_bessel_j0", 0, "j")
_J1 = _jy_op("special_bessel_j1", 1, "j")
_Y0 = _jy_op("special_bessel_y0", 0, "y")
_Y1 = _jy_op("special_bessel_y1", 1, "y")


def bessel_j0(input):
    """The Bessel function of the first kind of order 0 (no gradient).

    >>> ember.special.bessel_j0(ember.tensor([0.0, 2.0]))
    tensor([1.0000, 0.2239])
    """
    return apply(_J0, _float_unary("special.bessel_j0", input))


def bessel_j1(input):
    """The Bessel function of the first kind of order 1 (no gradient).

    >>> ember.special.bessel_j1(ember.tensor([0.0, 2.0]))
    tensor([0.0000, 0.5767])
    """
    return apply(_J1, _float_unary("special.bessel_j1", input))


def bessel_y0(input):
    """The Bessel function of the second kind of order 0 (``-inf`` at 0, NaN for
    negative inputs; no gradient).

    >>> ember.special.bessel_y0(ember.tensor([2.0]))
    tensor([0.5104])
    """
    return apply(_Y0, _float_unary("special.bessel_y0", input))


def bessel_y1(input):
    """The Bessel function of the second kind of order 1 (``-inf`` at 0, NaN for
    negative inputs; no gradient).

    >>> ember.special.bessel_y1(ember.tensor([2.0]))
    tensor([-0.1070])
    """
    return apply(_Y1, _float_unary("special.bessel_y1", input))


# spherical j0 -------------------------------------------------------------------------------
def _spherical_j0_64(xp, x):
    safe = xp.where((x == 0) | xp.isinf(x), 1.0, x)
    out = xp.sin(safe) / safe
    return xp.where(x == 0, 1.0, xp.where(xp.isinf(x), 0.0, out))


_SPHERICAL_J0 = register("special_spherical_bessel_j0", _in_f64(_spherical_j0_64),
                         infer=_same_infer)


def spherical_bessel_j0(input):
    """The spherical Bessel function of the first kind of order 0, ``sin(x) / x``
    (1 at 0, 0 at ±inf; no gradient).

    >>> ember.special.spherical_bessel_j0(ember.tensor([0.0, 3.0]))
    tensor([1.0000, 0.0470])
    """
    return apply(_SPHERICAL_J0, _float_unary("special.spherical_bessel_j0", input))
