"""Gamma and Dirichlet samples with implicit reparameterization gradients.

Sampling is Marsaglia and Tsang's method written with ember ops (so ``ember.jit`` traces
it and compiled runs draw what eager runs draw): each element gets ``_ROUNDS`` candidate
pairs (a normal and a uniform) at once and keeps the first accepted one. A candidate is
accepted with probability above 0.95, so all of them fail with probability below
``0.05 ** 8 = 4e-11``; eager mode then draws again until every element has one, while a
traced graph (which cannot loop on values) keeps ``d = alpha - 1/3``, close to the mode.
Concentrations below 1 are boosted: ``Gamma(a) = Gamma(a + 1) * U ** (1 / a)``.

Gradients are implicit, as in PyTorch: a sample ``x`` with distribution function
``F(x; alpha)`` moves with ``alpha`` as ``dx/dalpha = -(dF/dalpha) / (dF/dx)``. Both
derivatives are summed exactly in float64 from series (no approximation):

- Gamma: ``P(a, x) = sum_n x^(a+n) e^-x / Gamma(a+n+1)``, so
  ``dx/da = -x sum_n r_n (log x - digamma(a+n+1))`` with ``r_0 = 1/a``,
  ``r_(n+1) = r_n x / (a+n+1)``.
- Beta: ``I_x(a, b) = x^a (1-x)^b / (a B(a, b)) sum_n (a+b)_n / (a+1)_n x^n`` below the
  mean, and ``1 - I_(1-x)(b, a)`` above it (so the series converges fast), differentiated
  term by term in ``a``.

The series need a number of terms growing like the square root of the concentration
(about 8000 at 1e6); their sums lose digits only far in the tails (a sample beyond about
ten standard deviations). A Dirichlet sample moves as PyTorch's does: component ``i``
by its Beta marginal's implicit derivative, the others in proportion.
"""
from __future__ import annotations

import numpy as np

from ..autograd import no_grad
from ..errors import EmberError
from ..ops.elementwise import where
from ..ops.random import rand, randn
from ..ops.registry import AbstractValue, apply, register
from ..ops.special_fns import _digamma64
from .utils import finfo, tracing

_ROUNDS = 8
_EPS = np.finfo(np.float64).eps
_MAX_TERMS = 1_000_000


# Sampling --------------------------------------------------------------------------------
def _marsaglia_tsang(d, c, shape, dtype, device):
    """(value, accepted) from ``_ROUNDS`` candidates per element."""
    z = randn((_ROUNDS,) + shape, dtype=dtype, device=device)
    u = rand((_ROUNDS,) + shape, dtype=dtype, device=device)
    v = (1 + c * z) ** 3
    accepted = (v > 0) & (u.log() < 0.5 * z * z + d - d * v + d * v.log())
    first = accepted.long().argmax(0, keepdim=True)
    return (d * v).gather(0, first).squeeze(0), accepted.any(0)


def standard_gamma_sample(alpha):
    """Samples of Gamma(alpha, 1), one per element of ``alpha``, with no gradient; at
    least the smallest normal number of the dtype (NaN where alpha is not positive)."""
    shape, dtype, device = tuple(alpha.shape), alpha.dtype, alpha.device
    with no_grad():
        alpha = alpha.detach()
        boost = alpha < 1
        a = where(boost, alpha + 1, alpha)
        d = a - 1 / 3
        c = (9 * d).rsqrt()
        value, found = _marsaglia_tsang(d, c, shape, dtype, device)
        value = where(found, value, d)
        if not tracing():
            needs = ~found & (alpha > 0) & alpha.isfinite()
            while bool(needs.any()):
                again, ok = _marsaglia_tsang(d, c, shape, dtype, device)
                value = where(needs & ok, again, value)
                needs = needs & ~ok
        u = rand(shape, dtype=dtype, device=device)
        value = where(boost, value * (u.log() / alpha).exp(), value)
        value = value.clamp(min=finfo(dtype).tiny)
        return where(alpha > 0, value, float("nan"))


# dx/dalpha of a Gamma(alpha) sample -----------------------------------------------------
def _tail(xp, coef, level, step, ratio):
    """A bound on what the terms after ``coef * level`` add up to, for coefficients
    falling at least geometrically by ``ratio`` and a level changing by about ``step``
    a term (the level may pass through zero, so its own size is not enough)."""
    span = 1.0 / (1.0 - ratio)
    return xp.abs(coef) * ratio * span * (xp.abs(level) + xp.abs(step) * span)


def _iterate(xp, state: dict, step, result):
    """Run ``step(s, n, check)`` for n = 1, 2, ... on the arrays of ``state`` (one entry
    per element; ``step`` replaces them and, when ``check``, returns which elements
    have converged) and return ``result(s)`` for every element. Convergence is tested
    every fourth step (more terms than needed add nothing), and converged elements
    leave the arrays, so the work follows the elements still running."""
    size = next(iter(state.values())).size
    out = xp.empty(size)
    index = xp.arange(size)
    n = 0
    while index.size and n < _MAX_TERMS:
        n += 1
        check = n % 4 == 0
        done = step(state, n, check)
        if check and done.any():
            out[index[done]] = result(state)[done]
            keep = ~done
            index = index[keep]
            state = {k: v[keep] for k, v in state.items()}
    if index.size:
        out[index] = result(state)
    return out


def _gamma_grad_lower(xp, a, x):
    """``dx/da`` from the series of P(a, x), for x <= a + 1 (where its terms never grow
    much, so nothing cancels)."""
    log_x = xp.log(x)
    r = 1.0 / a
    psi = _digamma64(xp, a) + r             # digamma(a + 1)

    def step(s, n, check):
        an = s["a"] + n
        ratio = s["x"] / an
        s["r"] = s["r"] * ratio
        s["psi"] = s["psi"] + 1.0 / an      # digamma(a + n + 1)
        level = s["log_x"] - s["psi"]
        s["total"] = s["total"] + s["r"] * level
        return check and (ratio < 1) & (_tail(xp, s["r"], level, 1.0 / an, ratio) <=
                              _EPS * xp.abs(s["total"]))

    state = {"a": a, "x": x, "log_x": log_x, "r": r, "psi": psi,
             "total": r * (log_x - psi)}
    return _iterate(xp, state, step, lambda s: -s["x"] * s["total"])


def _gamma_grad_upper(xp, a, x):
    """``dx/da = dQ/da / p(x)`` for x > a + 1, from Legendre's continued fraction
    ``Q(a, x) = x^a e^-x h / Gamma(a)`` evaluated (modified Lentz) together with its
    derivative ``h'`` in a: ``dx/da = x (h (log x - digamma(a)) + h')``, a sum of two
    positive terms (the series of P would cancel catastrophically here)."""
    tiny = 1e-300
    b = x + 1.0 - a
    d = 1.0 / b

    def step(s, i, check):
        ai = -i * (i - s["a"])              # d(ai)/da = i; db/da = -1
        s["b"] = s["b"] + 2.0
        den = ai * s["d"] + s["b"]
        dden = i * s["d"] + ai * s["dd"] - 1.0
        small = xp.abs(den) < tiny
        den, dden = xp.where(small, tiny, den), xp.where(small, 0.0, dden)
        cn = s["b"] + ai / s["c"]
        dcn = -1.0 + i / s["c"] - ai * s["dc"] / (s["c"] * s["c"])
        small = xp.abs(cn) < tiny
        s["c"], s["dc"] = xp.where(small, tiny, cn), xp.where(small, 0.0, dcn)
        s["d"], s["dd"] = 1.0 / den, -dden / (den * den)
        delta = s["d"] * s["c"]
        ddelta = s["dd"] * s["c"] + s["d"] * s["dc"]
        s["dh"] = s["dh"] * delta + s["h"] * ddelta
        s["h"] = s["h"] * delta
        return check and (xp.abs(delta - 1.0) <= _EPS) & \
            (xp.abs(ddelta) <= _EPS * xp.abs(s["dh"] / s["h"]))

    state = {"a": a, "x": x, "b": b, "c": xp.full_like(x, 1.0 / tiny),
             "dc": xp.zeros_like(x), "d": d, "dd": d * d, "h": d.copy(), "dh": d * d}
    return _iterate(xp, state, step, lambda s: s["x"] * (
        s["h"] * (xp.log(s["x"]) - _digamma64(xp, s["a"])) + s["dh"]))


def _gamma_grad64(xp, a, x):
    shape = np.broadcast_shapes(a.shape, x.shape)
    a, x = (xp.broadcast_to(v.astype(np.float64), shape).reshape(-1) for v in (a, x))
    out = xp.full(a.shape, np.nan)
    out[(a > 0) & (x == 0)] = 0.0
    out[(a > 0) & xp.isposinf(x)] = np.inf
    ok = (a > 0) & (x > 0) & xp.isfinite(a) & xp.isfinite(x)
    lower, upper = ok & (x <= a + 1.0), ok & (x > a + 1.0)
    if lower.any():
        out[lower] = _gamma_grad_lower(xp, a[lower], x[lower])
    if upper.any():
        out[upper] = _gamma_grad_upper(xp, a[upper], x[upper])
    return out.reshape(shape)


def _gamma_grad_forward(xp, alpha, x):
    return _gamma_grad64(xp, alpha, x).astype(x.dtype, copy=False)


def _not_twice(name):
    def vjp(n, g):
        raise EmberError(f"{name}: the derivative of an implicit reparameterization "
                         "gradient is not implemented, as in PyTorch (rsample of "
                         "Gamma/Beta/Dirichlet is differentiable once)")
    return vjp


def _broadcast_infer(*avals):
    return AbstractValue(np.broadcast_shapes(*(v.shape for v in avals)), avals[-1].dtype)


_GAMMA_GRAD = register("_standard_gamma_grad", _gamma_grad_forward,
                       _not_twice("_standard_gamma_grad"), infer=_broadcast_infer)


def standard_gamma_grad(alpha, x):
    """``dx/dalpha`` for samples ``x`` of Gamma(alpha, 1) (``torch._standard_gamma_grad``)."""
    return apply(_GAMMA_GRAD, alpha, x)


def _same_as_sample(xp, alpha, x):
    return x.copy()


def _standard_gamma_vjp(n, g):
    alpha, x = n.saved_inputs()
    return g * standard_gamma_grad(alpha, x), None


_STANDARD_GAMMA = register("standard_gamma", _same_as_sample, _standard_gamma_vjp,
                           infer=lambda alpha, x: AbstractValue(x.shape, x.dtype))


def standard_gamma(alpha):
    """Samples of Gamma(alpha, 1) (``alpha`` of the output's shape) that carry the
    implicit reparameterization gradient back to ``alpha``."""
    return apply(_STANDARD_GAMMA, alpha, standard_gamma_sample(alpha))


# dx/dalpha of a Beta(alpha, beta) sample -------------------------------------------------
def _beta_series(xp, x, a, b, ratio, step, level, limit, scale):
    """``scale * sum_n c_n l_n`` with ``c_0 = 1/a``, ``c_(n+1) = c_n ratio(s, n)``,
    ``l_(n+1) = l_n + step(s, n)`` (``s`` the element arrays); ``limit`` bounds the
    ratios from above, for the test of convergence."""
    def advance(s, n, check):
        q = ratio(s, n - 1)
        dl = step(s, n - 1)
        s["c"] = s["c"] * q
        s["l"] = s["l"] + dl
        s["total"] = s["total"] + s["c"] * s["l"]
        if not check:
            return None
        bound = xp.maximum(q, s["limit"])
        return (bound < 1) & (_tail(xp, s["c"], s["l"], dl, bound) <=
                              _EPS * xp.abs(s["total"]))

    c = 1.0 / a
    state = {"x": x, "a": a, "b": b, "c": c, "l": level, "total": c * level,
             "limit": limit, "scale": scale}
    return _iterate(xp, state, advance, lambda s: s["scale"] * s["total"])


def _beta_grad_over_1mx(xp, x, a, b):
    """``(dx/da) / (1 - x)`` for a sample ``x`` of Beta(a, b), ``b`` held fixed."""
    out = xp.zeros(x.shape)
    out[xp.isnan(x) | xp.isnan(a) | xp.isnan(b) | (a <= 0)] = np.nan
    ok = (a > 0) & (b > 0) & (x > 0) & (x < 1) & xp.isfinite(a) & xp.isfinite(b)
    lower = ok & (x <= a / (a + b))
    upper = ok & ~lower
    if lower.any():
        # below the mean: the series of I_x(a, b) itself
        x_, a_, b_ = x[lower], a[lower], b[lower]
        level = xp.log(x_) - _digamma64(xp, a_) + _digamma64(xp, a_ + b_) - 1.0 / a_
        out[lower] = _beta_series(
            xp, x_, a_, b_, lambda s, n: s["x"] * (s["a"] + s["b"] + n) / (s["a"] + 1 + n),
            lambda s, n: 1.0 / (s["a"] + s["b"] + n) - 1.0 / (s["a"] + 1 + n),
            level, x_, -x_)
    if upper.any():
        # above it: 1 - I_(1-x)(b, a), differentiated in its second parameter
        x_, a_, b_ = x[upper], a[upper], b[upper]
        level = xp.log(x_) - _digamma64(xp, a_) + _digamma64(xp, a_ + b_)
        # (_beta_series starts from 1/a: pass b as its "a" and a as its "b")
        out[upper] = _beta_series(
            xp, 1.0 - x_, b_, a_, lambda s, n: s["x"] * (s["a"] + s["b"] + n) / (s["a"] + 1 + n),
            lambda s, n: 1.0 / (s["a"] + s["b"] + n), level, 1.0 - x_, x_)
    return out


def _dirichlet_grad_forward(xp, x, alpha, total):
    shape = np.broadcast_shapes(x.shape, alpha.shape, total.shape)
    x64, a64, t64 = (xp.broadcast_to(v.astype(np.float64), shape).reshape(-1)
                     for v in (x, alpha, total))
    out = _beta_grad_over_1mx(xp, x64, a64, t64 - a64)
    return out.reshape(shape).astype(x.dtype, copy=False)


_DIRICHLET_GRAD = register("_dirichlet_grad", _dirichlet_grad_forward,
                           _not_twice("_dirichlet_grad"), infer=_broadcast_infer)


def dirichlet_grad(x, alpha, total):
    """``torch._dirichlet_grad``: for ``x`` ~ Beta(alpha, total - alpha), ``dx/dalpha``
    divided by ``1 - x``."""
    return apply(_DIRICHLET_GRAD, x, alpha, total)


def _dirichlet_vjp(n, g):
    alpha, x = n.saved_inputs()
    total = alpha.sum(-1, keepdim=True).expand(tuple(alpha.shape))
    return dirichlet_grad(x, alpha, total) * (g - (x * g).sum(-1, keepdim=True)), None


_DIRICHLET = register("dirichlet", _same_as_sample, _dirichlet_vjp,
                      infer=lambda alpha, x: AbstractValue(x.shape, x.dtype))


def sample_dirichlet(concentration):
    """Dirichlet samples (normalized Gamma samples), one per row of ``concentration``,
    with no gradient; entries clamped to ``[tiny, 1 - eps]``."""
    with no_grad():
        gammas = standard_gamma_sample(concentration.detach())
        x = gammas / gammas.sum(-1, keepdim=True)
        info = finfo(concentration.dtype)
        return x.clamp(min=info.tiny, max=1 - info.eps)


def dirichlet(concentration):
    """Dirichlet samples that carry the implicit reparameterization gradient back to
    ``concentration``."""
    if not concentration.dtype.is_floating_point:
        raise EmberError(f"dirichlet: expected a floating concentration, got "
                         f"{concentration.dtype.name}")
    return apply(_DIRICHLET, concentration, sample_dirichlet(concentration))
