"""KL divergences with a Pareto distribution on either side (registered with
:func:`~ember.distributions.kl.register_kl` on import), PyTorch's pairs. ``KL(p || q)``
is infinite where ``p`` puts mass outside ``q``'s support or where an expectation
under ``p`` diverges (a Pareto's moments of order ``alpha`` and above)."""
from __future__ import annotations

import math

from ..ops.creation import full_like
from ..ops.elementwise import where, xlogy
from ..ops.special_fns import lgamma
from .continuous import Exponential, Laplace, Normal, Uniform
from .continuous_bernoulli import ContinuousBernoulli
from .gamma import Beta, Gamma
from .kl import register_kl
from .transformed import Gumbel
from .transformed_families import Pareto

__all__: list = []


def _infinite_like(t):
    return full_like(t, math.inf)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    scale_ratio = p.scale / q.scale
    alpha_ratio = q.alpha / p.alpha
    result = q.alpha * scale_ratio.log() - alpha_ratio.log() + alpha_ratio - 1
    # p reaches below q's minimum
    return where(p.support.lower_bound < q.support.lower_bound, math.inf, result)


@register_kl(Beta, Pareto)
def _kl_beta_pareto(p, q):
    return _infinite_like(p.concentration1)


@register_kl(ContinuousBernoulli, Pareto)
def _kl_continuous_bernoulli_pareto(p, q):
    return _infinite_like(p.probs)


@register_kl(Exponential, Pareto)
def _kl_exponential_pareto(p, q):
    return _infinite_like(p.rate)


@register_kl(Gamma, Pareto)
def _kl_gamma_pareto(p, q):
    return _infinite_like(p.concentration)


@register_kl(Gumbel, Pareto)
@register_kl(Laplace, Pareto)
@register_kl(Normal, Pareto)
def _kl_loc_scale_pareto(p, q):
    return _infinite_like(p.loc)


@register_kl(Pareto, Beta)
@register_kl(Pareto, ContinuousBernoulli)
@register_kl(Pareto, Uniform)
def _kl_pareto_infinity(p, q):
    return _infinite_like(p.scale)


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    scale_rate_prod = p.scale * q.rate
    t1 = (p.alpha / scale_rate_prod).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * scale_rate_prod / (p.alpha - 1)
    return where(p.alpha <= 1, math.inf, t1 - t2 + t3 - 1)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    common_term = p.scale.log() + p.alpha.reciprocal()
    t1 = p.alpha.log() - common_term
    t2 = lgamma(q.concentration) - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * common_term
    t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
    return where(p.alpha <= 1, math.inf, t1 + t2 + t3 + t4 - 1)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    var_normal = 2 * q.scale.pow(2)
    common_term = p.scale / (p.alpha - 1)
    t1 = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * common_term.pow(2) / (p.alpha - 2)
    t4 = (p.alpha * common_term - q.loc).pow(2)
    return where(p.alpha <= 2, math.inf, t1 - t2 + (t3 + t4) / var_normal - 1)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    width = p.high - p.low
    t1 = (q.alpha * q.scale.pow(q.alpha) * width).log()
    t2 = (xlogy(p.high, p.high) - xlogy(p.low, p.low) - width) / width
    result = t2 * (q.alpha + 1) - t1
    return where(p.low < q.support.lower_bound, math.inf, result)
