"""Classical orthogonal polynomials of a tensor degree, with ``torch.special``'s names:
``chebyshev_polynomial_t/u/v/w``, their ``shifted_`` forms on [0, 1],
``hermite_polynomial_h/he``, ``laguerre_polynomial_l`` and ``legendre_polynomial_p``.

``input`` and ``n`` broadcast; ``n`` is truncated to an integer as PyTorch does (a NaN,
infinite or negative degree gives 0). Values come from each family's three-term
recurrence, run in float64 and rounded once, with PyTorch's closed forms where it uses
them: for ``|x| < 1`` and large degrees the Chebyshev polynomials are trigonometric
(``T_n(cos t) = cos(n t)``, ``U_n(cos t) = sin((n + 1) t) / sin t``,
``V_n(cos t) = cos((n + 1/2) t) / cos(t / 2)``, ``W_n(cos t) = sin((n + 1/2) t) / sin(t/2)``),
and at ``x = ±1`` they, and Legendre's, are known exactly. For ``|x| > 1`` and degrees
above 2^14 the Chebyshev polynomials use the hyperbolic forms instead of the recurrence.
Hermite, Laguerre and Legendre polynomials have no such shortcut: a degree that would
take more than 10^5 recurrence steps (for an argument whose value has not overflowed
by then) raises :class:`~ember.errors.EmberValueError` rather than run for minutes.

As in PyTorch none of these has a gradient. Where ``input`` is NaN the result is NaN
(PyTorch's CPU kernels give arbitrary values there for several of these families).
"""
from __future__ import annotations

import numpy as np

from ..errors import EmberValueError
from ..ops._promote import FLOAT, promote
from ..ops.registry import AbstractValue, apply, register

__all__ = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
           "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
           "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
           "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
           "laguerre_polynomial_l", "legendre_polynomial_p"]

_MAX_STEPS = 100_000
_HYPERBOLIC_FROM = 2 ** 14


def _degrees(xp, n):
    """``n`` as PyTorch's kernels read it: truncated to int64, -1 where that cast is
    undefined (NaN, ±inf, out of range) or the degree is negative."""
    ok = xp.isfinite(n) & (xp.abs(n) < 2.0 ** 63)
    deg = xp.trunc(xp.where(ok, n, -1.0)).astype(np.int64)
    return xp.where(deg < 0, -1, deg)


def _parity(deg):
    return 1.0 - 2.0 * (deg % 2)


# Closed forms ------------------------------------------------------------------------------
def _chebyshev_at_ends(xp, kind, y, deg):
    """Values at y = ±1."""
    sign = _parity(deg)
    high = {"t": 1.0, "u": deg + 1.0, "v": 1.0, "w": 2.0 * deg + 1.0}[kind]
    low = {"t": sign, "u": sign * (deg + 1.0), "v": sign * (2.0 * deg + 1.0), "w": sign}[kind]
    return xp.where(y > 0, high, low)


def _chebyshev_trig(xp, kind, y, deg):
    theta = xp.arccos(y)
    if kind == "t":
        return xp.cos(deg * theta)
    if kind == "u":
        return xp.sin((deg + 1.0) * theta) / xp.sin(theta)
    if kind == "v":
        return xp.cos((deg + 0.5) * theta) / xp.cos(theta / 2)
    return xp.sin((deg + 0.5) * theta) / xp.sin(theta / 2)


def _chebyshev_hyperbolic(xp, kind, y, deg):
    """For |y| > 1 (finite): cosh/sinh forms, with V_n(-y) = (-1)^n W_n(y) and
    W_n(-y) = (-1)^n V_n(y)."""
    a = xp.arccosh(xp.abs(y))
    negative = y < 0
    if kind in ("v", "w"):
        as_v = (kind == "v") != negative
        value = xp.where(as_v, xp.cosh((deg + 0.5) * a) / xp.cosh(a / 2),
                         xp.sinh((deg + 0.5) * a) / xp.sinh(a / 2))
    elif kind == "t":
        value = xp.cosh(deg * a)
    else:
        value = xp.sinh((deg + 1.0) * a) / xp.sinh(a)
    return xp.where(negative, _parity(deg) * value, value)


# Recurrences -------------------------------------------------------------------------------
def _first(family, kind, y):
    if family == "chebyshev":
        return {"t": y, "u": 2.0 * y, "v": 2.0 * y - 1.0, "w": 2.0 * y + 1.0}[kind]
    if family == "hermite":
        return 2.0 * y if kind == "h" else y
    if family == "laguerre":
        return 1.0 - y
    return y


def _step(family, kind, k, y, prev, cur):
    """p_(k+1) from p_(k-1) and p_k."""
    if family == "chebyshev":
        return 2.0 * y * cur - prev
    if family == "hermite":
        return 2.0 * y * cur - 2.0 * k * prev if kind == "h" else y * cur - k * prev
    if family == "laguerre":
        return ((2.0 * k + 1.0 - y) * cur - k * prev) / (k + 1.0)
    return ((2.0 * k + 1.0) * y * cur - k * prev) / (k + 1.0)


def _recurrence(xp, name, family, kind, y, deg):
    """p_deg(y) for deg >= 2, each element stepped until its degree (or NaN)."""
    out = xp.full(y.shape, np.nan)
    index = xp.arange(y.size)
    prev, cur = xp.ones_like(y), _first(family, kind, y)
    k = 1
    while index.size:
        if k > _MAX_STEPS:
            raise EmberValueError(
                f"{name}: a degree of {int(deg.max())} needs more than {_MAX_STEPS} steps of "
                f"the recurrence; use a smaller n")
        prev, cur = cur, _step(family, kind, k, y, prev, cur)
        k += 1
        done = deg == k
        stop = done | xp.isnan(cur)
        if bool(stop.any()):
            out[index[stop]] = cur[stop]
            keep = ~stop
            index, y, deg, prev, cur = index[keep], y[keep], deg[keep], prev[keep], cur[keep]
    return out


def _polynomial64(xp, x, n, name, family, kind, shifted):
    shape = np.broadcast_shapes(x.shape, n.shape)
    x = xp.broadcast_to(x.astype(np.float64), shape).reshape(-1)
    deg = _degrees(xp, xp.broadcast_to(n.astype(np.float64), shape).reshape(-1))
    y = 2.0 * x - 1.0 if shifted else x
    out = xp.full(y.shape, np.nan)
    out[deg < 0] = 0.0
    out[deg == 0] = 1.0
    one = deg == 1
    out[one] = _first(family, kind, y[one])
    todo = deg >= 2
    if family == "chebyshev":
        ends = todo & (xp.abs(y) == 1.0)
        out[ends] = _chebyshev_at_ends(xp, kind, y[ends], deg[ends])
        trig = todo & (xp.abs(y) < 1.0) & (deg > (6 if kind == "t" else 8))
        out[trig] = _chebyshev_trig(xp, kind, y[trig], deg[trig])
        hyper = todo & (xp.abs(y) > 1.0) & xp.isfinite(y) & (deg > _HYPERBOLIC_FROM)
        out[hyper] = _chebyshev_hyperbolic(xp, kind, y[hyper], deg[hyper])
        todo = todo & ~ends & ~trig & ~hyper
    elif family == "legendre":
        ends = todo & (xp.abs(y) == 1.0)
        out[ends] = xp.where(y[ends] > 0, 1.0, _parity(deg[ends]))
        todo = todo & ~ends
    elif family == "laguerre":
        zero = todo & (y == 0)
        out[zero] = 1.0
        todo = todo & ~zero
    nan = xp.isnan(x)
    todo = todo & ~nan
    if bool(todo.any()):
        out[todo] = _recurrence(xp, name, family, kind, y[todo], deg[todo])
    out[nan] = np.nan
    return out.reshape(shape)


def _infer(x, n, **params):
    return AbstractValue(np.broadcast_shapes(x.shape, n.shape), x.dtype)


def _forward(xp, x, n, name, family, kind, shifted):
    return _polynomial64(xp, x, n, name, family, kind, shifted).astype(x.dtype, copy=False)


_POLYNOMIAL = register("special_orthogonal_polynomial", _forward, broadcasting=True,
                       infer=_infer)


def _evaluate(name, input, n, family, kind, shifted=False):
    name = "special." + name
    (x, degree), _ = promote(name, (input, n), FLOAT)
    return apply(_POLYNOMIAL, x, degree, name=name, family=family, kind=kind,
                 shifted=shifted)


def _doc(title, first_values, call):
    return f"""{title} (no gradient).

    Args:
        input: the argument (a tensor, or a number if ``n`` is a tensor).
        n: the degree (a tensor, or a number if ``input`` is a tensor); truncated to an
            integer, with 0 as the result for negative or non-finite degrees.

    >>> {call}
    {first_values}
    """


def chebyshev_polynomial_t(input, n):
    return _evaluate("chebyshev_polynomial_t", input, n, "chebyshev", "t")


def chebyshev_polynomial_u(input, n):
    return _evaluate("chebyshev_polynomial_u", input, n, "chebyshev", "u")


def chebyshev_polynomial_v(input, n):
    return _evaluate("chebyshev_polynomial_v", input, n, "chebyshev", "v")


def chebyshev_polynomial_w(input, n):
    return _evaluate("chebyshev_polynomial_w", input, n, "chebyshev", "w")


def shifted_chebyshev_polynomial_t(input, n):
    return _evaluate("shifted_chebyshev_polynomial_t", input, n, "chebyshev", "t", True)


def shifted_chebyshev_polynomial_u(input, n):
    return _evaluate("shifted_chebyshev_polynomial_u", input, n, "chebyshev", "u", True)


def shifted_chebyshev_polynomial_v(input, n):
    return _evaluate("shifted_chebyshev_polynomial_v", input, n, "chebyshev", "v", True)


def shifted_chebyshev_polynomial_w(input, n):
    return _evaluate("shifted_chebyshev_polynomial_w", input, n, "chebyshev", "w", True)


def hermite_polynomial_h(input, n):
    return _evaluate("hermite_polynomial_h", input, n, "hermite", "h")


def hermite_polynomial_he(input, n):
    return _evaluate("hermite_polynomial_he", input, n, "hermite", "he")


def laguerre_polynomial_l(input, n):
    return _evaluate("laguerre_polynomial_l", input, n, "laguerre", "l")


def legendre_polynomial_p(input, n):
    return _evaluate("legendre_polynomial_p", input, n, "legendre", "p")


_DOCS = {
    chebyshev_polynomial_t: ("The Chebyshev polynomial of the first kind ``T_n(input)``",
                             "ember.special.chebyshev_polynomial_t(ember.tensor([0.5]), 3)",
                             "tensor([-1.])"),
    chebyshev_polynomial_u: ("The Chebyshev polynomial of the second kind ``U_n(input)``",
                             "ember.special.chebyshev_polynomial_u(ember.tensor([0.5]), 3)",
                             "tensor([-1.])"),
    chebyshev_polynomial_v: ("The Chebyshev polynomial of the third kind ``V_n(input)``",
                             "ember.special.chebyshev_polynomial_v(ember.tensor([0.5]), 3)",
                             "tensor([-1.])"),
    chebyshev_polynomial_w: ("The Chebyshev polynomial of the fourth kind ``W_n(input)``",
                             "ember.special.chebyshev_polynomial_w(ember.tensor([0.5]), 3)",
                             "tensor([-1.])"),
    shifted_chebyshev_polynomial_t: (
        "The shifted Chebyshev polynomial of the first kind ``T_n(2 input - 1)``",
        "ember.special.shifted_chebyshev_polynomial_t(ember.tensor([0.75]), 3)",
        "tensor([-1.])"),
    shifted_chebyshev_polynomial_u: (
        "The shifted Chebyshev polynomial of the second kind ``U_n(2 input - 1)``",
        "ember.special.shifted_chebyshev_polynomial_u(ember.tensor([0.75]), 3)",
        "tensor([-1.])"),
    shifted_chebyshev_polynomial_v: (
        "The shifted Chebyshev polynomial of the third kind ``V_n(2 input - 1)``",
        "ember.special.shifted_chebyshev_polynomial_v(ember.tensor([0.75]), 3)",
        "tensor([-1.])"),
    shifted_chebyshev_polynomial_w: (
        "The shifted Chebyshev polynomial of the fourth kind ``W_n(2 input - 1)``",
        "ember.special.shifted_chebyshev_polynomial_w(ember.tensor([0.75]), 3)",
        "tensor([-1.])"),
    hermite_polynomial_h: ("The physicists' Hermite polynomial ``H_n(input)``",
                           "ember.special.hermite_polynomial_h(ember.tensor([0.5]), 3)",
                           "tensor([-5.])"),
    hermite_polynomial_he: ("The probabilists' Hermite polynomial ``He_n(input)``",
                            "ember.special.hermite_polynomial_he(ember.tensor([0.5]), 3)",
                            "tensor([-1.3750])"),
    laguerre_polynomial_l: ("The Laguerre polynomial ``L_n(input)``",
                            "ember.special.laguerre_polynomial_l(ember.tensor([0.5]), 3)",
                            "tensor([-0.1458])"),
    legendre_polynomial_p: ("The Legendre polynomial ``P_n(input)``",
                            "ember.special.legendre_polynomial_p(ember.tensor([0.5]), 3)",
                            "tensor([-0.4375])"),
}
for _fn, (_title, _call, _values) in _DOCS.items():
    _fn.__doc__ = _doc(_title, _values, _call)
del _fn, _title, _call, _values
