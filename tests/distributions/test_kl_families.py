"""kl_divergence for the later families against PyTorch's (values and gradients in
float64): the Pareto pairs of torch.distributions.kl, the transformed families through
their bases, Wishart's Bregman divergence, and the pairs neither implements."""
import numpy as np
import pytest

import ember
import ember.distributions as ED
from tests.distributions.common import close, leaves, tensors

torch = pytest.importorskip("torch")
TD = torch.distributions

R = np.random.default_rng(0)


def pos(*shape, low=0.5, high=2.0):
    return R.uniform(low, high, shape)


def normal(*shape):
    return R.normal(size=shape)


def spd(n=3):
    a = R.normal(size=(n, n))
    return a @ a.T + n * np.eye(n)


PARETO = lambda D, s, a: D.Pareto(s, a)  # noqa: E731
# scales either side of each other; alphas either side of 1 and 2 (infinite moments)
P_PARAMS = [np.array([1.0, 0.5, 2.0, 1.5]), np.array([0.8, 1.5, 3.0, 5.0])]
LOC_SCALE = [normal(4), pos(4)]

PAIRS = [
    ("Pareto-Pareto", PARETO, P_PARAMS, PARETO, [np.array([0.7, 1.0, 1.0, 1.5]), pos(4)]),
    ("Pareto-Exponential", PARETO, P_PARAMS, lambda D, r: D.Exponential(r), [pos(4)]),
    ("Pareto-Gamma", PARETO, P_PARAMS, lambda D, a, b: D.Gamma(a, b), [pos(4), pos(4)]),
    ("Pareto-Normal", PARETO, P_PARAMS, lambda D, m, s: D.Normal(m, s), LOC_SCALE),
    ("Pareto-Beta", PARETO, P_PARAMS, lambda D, a, b: D.Beta(a, b), [pos(4), pos(4)]),
    ("Pareto-ContinuousBernoulli", PARETO, P_PARAMS,
     lambda D, p: D.ContinuousBernoulli(p), [R.uniform(0.1, 0.9, 4)]),
    ("Pareto-Uniform", PARETO, P_PARAMS, lambda D, a, b: D.Uniform(a, a + b), LOC_SCALE),
    ("Uniform-Pareto", lambda D, a, w: D.Uniform(a, a + w),
     [np.array([0.5, 1.2, 2.0, 3.0]), pos(4)], PARETO, [np.array([1.0, 1.0, 1.5, 2.0]), pos(4)]),
    ("Normal-Pareto", lambda D, m, s: D.Normal(m, s), LOC_SCALE, PARETO, P_PARAMS),
    ("Laplace-Pareto", lambda D, m, s: D.Laplace(m, s), LOC_SCALE, PARETO, P_PARAMS),
    ("Gumbel-Pareto", lambda D, m, s: D.Gumbel(m, s), LOC_SCALE, PARETO, P_PARAMS),
    ("Exponential-Pareto", lambda D, r: D.Exponential(r), [pos(4)], PARETO, P_PARAMS),
    ("Gamma-Pareto", lambda D, a, b: D.Gamma(a, b), [pos(4), pos(4)], PARETO, P_PARAMS),
    ("Beta-Pareto", lambda D, a, b: D.Beta(a, b), [pos(4), pos(4)], PARETO, P_PARAMS),
    ("ContinuousBernoulli-Pareto", lambda D, p: D.ContinuousBernoulli(p),
     [R.uniform(0.1, 0.9, 4)], PARETO, P_PARAMS),
    ("InverseGamma", lambda D, a, b: D.InverseGamma(a, b), [pos(4), pos(4)],
     lambda D, a, b: D.InverseGamma(a, b), [pos(4), pos(4)]),
    ("LogisticNormal", lambda D, m, s: D.LogisticNormal(m, s), [normal(2, 3), pos(2, 3)],
     lambda D, m, s: D.LogisticNormal(m, s), [normal(3), pos(3)]),
    ("Wishart", lambda D, df, c: D.Wishart(df, covariance_matrix=c), [np.array(4.5), spd()],
     lambda D, df, L: D.Wishart(df, scale_tril=L), [np.array(6.0), np.linalg.cholesky(spd())]),
]


@pytest.mark.parametrize("pair", PAIRS, ids=[p[0] for p in PAIRS])
def test_kl_against_torch(pair):
    name, build_p, p_params, build_q, q_params = pair
    pe, pt = tensors(torch, p_params)
    qe, qt = tensors(torch, q_params)
    kl_e = ED.kl_divergence(build_p(ED, *pe), build_q(ED, *qe))
    kl_t = TD.kl_divergence(build_p(TD, *pt), build_q(TD, *qt))
    close(kl_e, kl_t, rtol=1e-10, atol=1e-12, what=name)
    finite = torch.isfinite(kl_t)
    if not bool(finite.any()):
        assert bool((kl_e == float("inf")).all())
        return
    w = R.normal(size=tuple(kl_t.shape))
    loss_t = (kl_t * torch.tensor(w))[finite].sum()
    loss_e = (kl_e * ember.tensor(w))[ember.tensor(finite.numpy())].sum()
    grads_t = torch.autograd.grad(loss_t, leaves(pt + qt), allow_unused=True,
                                  materialize_grads=True)
    grads_e = ember.autograd.grad(loss_e, leaves(pe + qe), allow_unused=True,
                                  materialize_grads=True)
    for ge, gt in zip(grads_e, grads_t):
        close(ge, gt, rtol=1e-9, atol=1e-11, what=f"{name} gradient")


def test_pareto_kl_infinities_and_zero():
    p = ED.Pareto(ember.tensor([1.0, 1.0]), ember.tensor([3.0, 3.0]))
    q = ED.Pareto(ember.tensor([0.5, 2.0]), ember.tensor([2.0, 2.0]))
    kl = ED.kl_divergence(p, q)
    assert np.isfinite(kl[0].item()) and kl[1].item() == float("inf")
    assert abs(ED.kl_divergence(p, p).sum().item()) < 1e-6
    e = ED.Exponential(ember.tensor([1.0, 1.0]))
    heavy = ED.Pareto(ember.tensor([1.0, 1.0]), ember.tensor([0.9, 1.1]))
    kl = ED.kl_divergence(heavy, e)
    assert kl[0].item() == float("inf") and np.isfinite(kl[1].item())


@pytest.mark.parametrize("make_p,make_q", [
    (lambda D, T: D.Weibull(T([1.0]), T([2.0])), lambda D, T: D.Weibull(T([1.5]), T([2.0]))),
    (lambda D, T: D.Kumaraswamy(T([1.0]), T([2.0])),
     lambda D, T: D.Kumaraswamy(T([1.5]), T([2.0]))),
    (lambda D, T: D.VonMises(T([1.0]), T([2.0])), lambda D, T: D.VonMises(T([1.5]), T([2.0]))),
    (lambda D, T: D.FisherSnedecor(T([3.0]), T([2.0])),
     lambda D, T: D.FisherSnedecor(T([1.5]), T([2.0]))),
    (lambda D, T: D.NegativeBinomial(3.0, T([0.2])),
     lambda D, T: D.NegativeBinomial(3.0, T([0.4]))),
    (lambda D, T: D.GeneralizedPareto(T([0.0]), T([1.0]), T([0.1])),
     lambda D, T: D.GeneralizedPareto(T([0.0]), T([2.0]), T([0.1]))),
    (lambda D, T: D.LKJCholesky(3, T([1.0])), lambda D, T: D.LKJCholesky(3, T([2.0]))),
], ids=["Weibull", "Kumaraswamy", "VonMises", "FisherSnedecor", "NegativeBinomial",
        "GeneralizedPareto", "LKJCholesky"])
def test_pairs_without_a_divergence(make_p, make_q):
    """Where PyTorch has no divergence (or needs equal transforms), neither has ember."""
    with pytest.raises(NotImplementedError):
        TD.kl_divergence(make_p(TD, torch.tensor), make_q(TD, torch.tensor))
    with pytest.raises(NotImplementedError):
        ED.kl_divergence(make_p(ED, ember.tensor), make_q(ED, ember.tensor))


def test_weibull_same_transforms_reduce_to_base():
    """Equal transforms: the divergence of the bases (here 0)."""
    p = ED.Weibull(ember.tensor([1.0, 2.0]), ember.tensor([2.0, 0.5]))
    q = ED.Weibull(ember.tensor([1.0, 2.0]), ember.tensor([2.0, 0.5]))
    np.testing.assert_array_equal(ED.kl_divergence(p, q).numpy(), [0.0, 0.0])
