"""kl_divergence against PyTorch's (values and gradients in float64), its dispatch
(register_kl, most specific match, ambiguity warning, missing pairs) and the Bregman
divergence of exponential families."""
import warnings

import numpy as np
import pytest

import ember
import ember.distributions as ED
from ember.distributions import kl as ember_kl
from tests.distributions.common import close, leaves, tensors

torch = pytest.importorskip("torch")
TD = torch.distributions

R = np.random.default_rng(0)


def pos(*shape, low=0.5, high=2.0):
    return R.uniform(low, high, shape)


def normal(*shape):
    return R.normal(size=shape)


def simplex(*shape):
    return R.dirichlet(np.ones(shape[-1]), size=shape[:-1])


def spd(n=3):
    a = R.normal(size=(n, n))
    return a @ a.T + n * np.eye(n)


# (id, build p, params of p, build q, params of q); params are float64 arrays
PAIRS = [
    ("Normal", lambda D, a, b: D.Normal(a, b), [normal(3), pos(3)],
     lambda D, a, b: D.Normal(a, b), [normal(3), pos(3)]),
    ("Categorical", lambda D, p: D.Categorical(p), [simplex(2, 4)],
     lambda D, x: D.Categorical(logits=x), [normal(2, 4)]),
    ("Bernoulli", lambda D, p: D.Bernoulli(p), [R.uniform(0.1, 0.9, 3)],
     lambda D, x: D.Bernoulli(logits=x), [normal(3)]),
    ("MultivariateNormal", lambda D, m, L: D.MultivariateNormal(m, scale_tril=L),
     [normal(2, 3), np.linalg.cholesky(spd())],
     lambda D, m, c: D.MultivariateNormal(m, covariance_matrix=c), [normal(3), spd()]),
    ("Beta", lambda D, a, b: D.Beta(a, b), [pos(3), pos(3)],
     lambda D, a, b: D.Beta(a, b), [pos(3), pos(3)]),
    ("Gamma", lambda D, a, b: D.Gamma(a, b), [pos(3), pos(3)],
     lambda D, a, b: D.Gamma(a, b), [pos(3), pos(3)]),
    ("Dirichlet", lambda D, a: D.Dirichlet(a), [pos(2, 4)],
     lambda D, a: D.Dirichlet(a), [pos(2, 4)]),
    ("Exponential", lambda D, a: D.Exponential(a), [pos(3)],
     lambda D, a: D.Exponential(a), [pos(3)]),
    ("Uniform", lambda D, a, w: D.Uniform(a, a + w),
     [R.uniform(0, 0.5, 3), pos(3, low=0.5, high=1)],
     lambda D, a, w: D.Uniform(a, a + w), [np.array([-1.0, 0.2, -1.0]), np.array([3.0, 3.0, 1.0])]),
    ("Laplace", lambda D, a, b: D.Laplace(a, b), [normal(3), pos(3)],
     lambda D, a, b: D.Laplace(a, b), [normal(3), pos(3)]),
    ("Poisson", lambda D, a: D.Poisson(a), [pos(3)], lambda D, a: D.Poisson(a), [pos(3)]),
    ("Independent", lambda D, a, b: D.Independent(D.Normal(a, b), 1), [normal(2, 3), pos(2, 3)],
     lambda D, a, b: D.Independent(D.Normal(a, b), 1), [normal(3), pos(3)]),
    ("OneHotCategorical", lambda D, p: D.OneHotCategorical(p), [simplex(3, 4)],
     lambda D, p: D.OneHotCategorical(p), [simplex(3, 4)]),
    ("LowRankMultivariateNormal", lambda D, m, w, d: D.LowRankMultivariateNormal(m, w, d),
     [normal(3), normal(3, 2), pos(3)],
     lambda D, m, w, d: D.LowRankMultivariateNormal(m, w, d), [normal(3), normal(3, 2), pos(3)]),
    ("MultivariateNormal-LowRank", lambda D, m, L: D.MultivariateNormal(m, scale_tril=L),
     [normal(3), np.linalg.cholesky(spd())],
     lambda D, m, w, d: D.LowRankMultivariateNormal(m, w, d), [normal(3), normal(3, 2), pos(3)]),
    ("LowRank-MultivariateNormal", lambda D, m, w, d: D.LowRankMultivariateNormal(m, w, d),
     [normal(3), normal(3, 2), pos(3)],
     lambda D, m, L: D.MultivariateNormal(m, scale_tril=L), [normal(3), np.linalg.cholesky(spd())]),
    ("Binomial", lambda D, p: D.Binomial(5, p), [R.uniform(0.1, 0.9, 3)],
     lambda D, p: D.Binomial(5, p), [R.uniform(0.1, 0.9, 3)]),
    ("Geometric", lambda D, p: D.Geometric(p), [R.uniform(0.1, 0.9, 3)],
     lambda D, p: D.Geometric(p), [R.uniform(0.1, 0.9, 3)]),
    ("Gumbel", lambda D, a, b: D.Gumbel(a, b), [normal(3), pos(3)],
     lambda D, a, b: D.Gumbel(a, b), [normal(3), pos(3)]),
    ("HalfNormal", lambda D, a: D.HalfNormal(a), [pos(3)], lambda D, a: D.HalfNormal(a), [pos(3)]),
    ("Cauchy", lambda D, a, b: D.Cauchy(a, b), [normal(3), pos(3)],
     lambda D, a, b: D.Cauchy(a, b), [normal(3), pos(3)]),
    ("ContinuousBernoulli", lambda D, p: D.ContinuousBernoulli(p), [R.uniform(0.1, 0.9, 3)],
     lambda D, p: D.ContinuousBernoulli(p), [R.uniform(0.1, 0.9, 3)]),
    ("LogNormal", lambda D, a, b: D.LogNormal(a, b), [normal(3), pos(3)],
     lambda D, a, b: D.LogNormal(a, b), [normal(3), pos(3)]),
    ("Beta-Normal", lambda D, a, b: D.Beta(a, b), [pos(3), pos(3)],
     lambda D, a, b: D.Normal(a, b), [normal(3), pos(3)]),
    ("Gamma-Exponential", lambda D, a, b: D.Gamma(a, b), [pos(3), pos(3)],
     lambda D, a: D.Exponential(a), [pos(3)]),
    ("Exponential-Gamma", lambda D, a: D.Exponential(a), [pos(3)],
     lambda D, a, b: D.Gamma(a, b), [pos(3), pos(3)]),
    ("Normal-Laplace", lambda D, a, b: D.Normal(a, b), [normal(3), pos(3)],
     lambda D, a, b: D.Laplace(a, b), [normal(3), pos(3)]),
    ("Normal-Gumbel", lambda D, a, b: D.Normal(a, b), [normal(3), pos(3)],
     lambda D, a, b: D.Gumbel(a, b), [normal(3), pos(3)]),
    ("Uniform-Normal", lambda D, a, w: D.Uniform(a, a + w), [normal(3), pos(3)],
     lambda D, a, b: D.Normal(a, b), [normal(3), pos(3)]),
    ("Uniform-Beta", lambda D, a, w: D.Uniform(a, a + w),
     [R.uniform(0.1, 0.3, 3), pos(3, low=0.1, high=0.5)],
     lambda D, a, b: D.Beta(a, b), [pos(3), pos(3)]),
    ("Uniform-Gamma", lambda D, a, w: D.Uniform(a, a + w), [np.array([0.1, 0.5, -0.1]), pos(3)],
     lambda D, a, b: D.Gamma(a, b), [pos(3), pos(3)]),
    ("Gamma-Normal", lambda D, a, b: D.Gamma(a, b), [pos(3), pos(3)],
     lambda D, a, b: D.Normal(a, b), [normal(3), pos(3)]),
    ("Normal-Uniform", lambda D, a, b: D.Normal(a, b), [normal(3), pos(3)],
     lambda D, a, w: D.Uniform(a, a + w), [normal(3), pos(3)]),
    ("Bernoulli-Poisson", lambda D, p: D.Bernoulli(p), [R.uniform(0.1, 0.9, 3)],
     lambda D, a: D.Poisson(a), [pos(3)]),
    ("Laplace-Normal", lambda D, a, b: D.Laplace(a, b), [normal(3), pos(3)],
     lambda D, a, b: D.Normal(a, b), [normal(3), pos(3)]),
    ("Beta-Uniform", lambda D, a, b: D.Beta(a, b), [pos(2), pos(2)],
     lambda D, a, w: D.Uniform(a, a + w), [np.array([-0.5, 0.1]), np.array([2.0, 2.0])]),
]


@pytest.mark.parametrize("pair", PAIRS, ids=[p[0] for p in PAIRS])
def test_kl_against_torch(pair):
    name, build_p, p_params, build_q, q_params = pair
    pe, pt = tensors(torch, p_params)
    qe, qt = tensors(torch, q_params)
    kl_e = ED.kl_divergence(build_p(ED, *pe), build_q(ED, *qe))
    kl_t = TD.kl_divergence(build_p(TD, *pt), build_q(TD, *qt))
    close(kl_e, kl_t, what=name)
    finite = torch.isfinite(kl_t)
    if not bool(finite.any()):
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


def test_kl_edges_zero_probabilities_and_infinite():
    p = ED.Categorical(ember.tensor([0.0, 0.5, 0.5]))
    q = ED.Categorical(ember.tensor([0.5, 0.5, 0.0]))
    pt = TD.Categorical(torch.tensor([0.0, 0.5, 0.5]))
    qt = TD.Categorical(torch.tensor([0.5, 0.5, 0.0]))
    close(ED.kl_divergence(p, q), TD.kl_divergence(pt, qt))
    assert ED.kl_divergence(p, q).item() == float("inf")
    assert ED.kl_divergence(q, q).item() == 0.0
    b = [ember.tensor([0.0, 1.0, 0.3]), ember.tensor([0.5, 0.5, 1.0])]
    close(ED.kl_divergence(ED.Bernoulli(b[0]), ED.Bernoulli(b[1])),
          TD.kl_divergence(TD.Bernoulli(torch.tensor([0.0, 1.0, 0.3])),
                           TD.Bernoulli(torch.tensor([0.5, 0.5, 1.0]))), rtol=1e-6)
    assert ED.kl_divergence(ED.Normal(0.0, 1.0), ED.Exponential(1.0)).item() == float("inf")


def test_kl_binomial_counts():
    p, q = ED.Binomial(ember.tensor([5.0, 6.0]), ember.tensor([0.3, 0.3])), \
        ED.Binomial(ember.tensor([5.0, 5.0]), ember.tensor([0.4, 0.4]))
    kl = ED.kl_divergence(p, q)
    assert np.isfinite(kl[0].item()) and kl[1].item() == float("inf")
    with pytest.raises(NotImplementedError, match="q.total_count > p.total_count"):
        ED.kl_divergence(q, p)


def test_kl_missing_pair_and_mismatched_events():
    with pytest.raises(NotImplementedError, match="No KL"):
        ED.kl_divergence(ED.Cauchy(0.0, 1.0), ED.Normal(0.0, 1.0))
    mvn2 = ED.MultivariateNormal(ember.zeros(2), ember.eye(2))
    mvn3 = ED.MultivariateNormal(ember.zeros(3), ember.eye(3))
    with pytest.raises(ember.EmberValueError, match="different event shapes"):
        ED.kl_divergence(mvn2, mvn3)


def test_register_kl_dispatch():
    class MyNormal(ED.Normal):
        pass

    class Other(ED.Normal):
        pass

    p, q = MyNormal(0.0, 1.0), ED.Normal(1.0, 2.0)
    # subclasses dispatch to the registered base pair
    close(ED.kl_divergence(p, q), TD.kl_divergence(TD.Normal(0.0, 1.0), TD.Normal(1.0, 2.0)),
          rtol=1e-6)
    try:
        @ED.register_kl(MyNormal, ED.Normal)
        def _kl_mine(p, q):
            return ember.tensor(42.0)
        assert ED.kl_divergence(p, q).item() == 42.0
        assert ED.kl_divergence(ED.Normal(0.0, 1.0), q).item() != 42.0

        @ED.register_kl(ED.Normal, Other)
        def _kl_other(p, q):
            return ember.tensor(7.0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ED.kl_divergence(p, Other(0.0, 1.0))
        assert any("Ambiguous kl_divergence(MyNormal, Other)" in str(w.message) for w in caught)
    finally:
        for key in [(MyNormal, ED.Normal), (ED.Normal, Other)]:
            ember_kl._KL_REGISTRY.pop(key, None)
        ember_kl._KL_MEMOIZE.clear()
    with pytest.raises(ember.EmberValueError, match="Distribution subclass"):
        ED.register_kl(int, ED.Normal)


def test_exponential_family_bregman_divergence():
    """The autograd (Bregman) KL of two members of a family equals the closed form."""
    loc = ember.tensor([0.3, -1.0], dtype=ember.float64)
    p = ED.Normal(loc, ember.tensor([1.0, 2.0], dtype=ember.float64))
    q = ED.Normal(ember.tensor([1.0, 0.0], dtype=ember.float64),
                  ember.tensor([0.5, 1.5], dtype=ember.float64))
    close(ember_kl._kl_expfamily_expfamily(p, q), TD.kl_divergence(
        TD.Normal(torch.tensor([0.3, -1.0], dtype=torch.float64),
                  torch.tensor([1.0, 2.0], dtype=torch.float64)),
        TD.Normal(torch.tensor([1.0, 0.0], dtype=torch.float64),
                  torch.tensor([0.5, 1.5], dtype=torch.float64))))
    g = ED.Gamma(ember.tensor([2.0], dtype=ember.float64), ember.tensor([3.0], dtype=ember.float64))
    h = ED.Gamma(ember.tensor([1.5], dtype=ember.float64), ember.tensor([1.0], dtype=ember.float64))
    f64 = {"dtype": torch.float64}
    gt = TD.Gamma(torch.tensor([2.0], **f64), torch.tensor([3.0], **f64))
    ht = TD.Gamma(torch.tensor([1.5], **f64), torch.tensor([1.0], **f64))
    close(ember_kl._kl_expfamily_expfamily(g, h), TD.kl_divergence(gt, ht))
    with pytest.raises(NotImplementedError, match="different exponential families"):
        ember_kl._kl_expfamily_expfamily(p, g)
