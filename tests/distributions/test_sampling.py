"""Sampling: shapes, dtypes and support exactly as PyTorch's; moments within
statistical bounds (fixed seeds); reparameterized gradients of expectations against the
gradients of PyTorch's closed forms; the implicit Gamma/Beta/Dirichlet gradients against
PyTorch and against finite differences; seeding and ember.jit."""
import math

import numpy as np
import pytest

import ember
import ember.distributions as ED
from ember.distributions import _gamma_ops
from tests.distributions.common import e2n
from tests.distributions.test_values import CASES

torch = pytest.importorskip("torch")
TD = torch.distributions


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_sample_shapes_dtypes_support(case):
    rng = np.random.default_rng(3)
    params = case.params(rng, (2, 3))
    d_e = case.build(ED, *[ember.tensor(p, requires_grad=p.dtype.kind == "f")
                           if isinstance(p, np.ndarray) else p for p in params])
    d_t = case.build(TD, *[torch.tensor(p) if isinstance(p, np.ndarray) else p
                           for p in params])
    ember.manual_seed(0)
    for shape in [(), (5,), (2, 1)]:
        s_e, s_t = d_e.sample(shape), d_t.sample(shape)
        assert tuple(s_e.shape) == tuple(s_t.shape), (case.id, shape)
        assert s_e.dtype.name == str(s_t.dtype).removeprefix("torch."), case.id
        assert not s_e.requires_grad
        assert bool(d_e.support.check(s_e).all()), case.id
    if d_e.has_rsample:
        r = d_e.rsample((4,))
        assert tuple(r.shape) == tuple(d_t.rsample((4,)).shape)
        assert r.requires_grad
    else:
        with pytest.raises(NotImplementedError):
            d_e.rsample()


def test_seeding_repeats_samples():
    d = ED.Gamma(ember.tensor([0.3, 2.0]), ember.tensor([1.0, 3.0]))
    ember.manual_seed(7)
    a = [d.sample((3,)), ED.Categorical(logits=ember.zeros(5)).sample((4,)),
         ED.Normal(0.0, 1.0).rsample((2,))]
    ember.manual_seed(7)
    b = [d.sample((3,)), ED.Categorical(logits=ember.zeros(5)).sample((4,)),
         ED.Normal(0.0, 1.0).rsample((2,))]
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.numpy(), y.numpy())
    assert not np.array_equal(d.sample((3,)).numpy(), a[0].numpy())


N = 40_000
T64 = {"dtype": ember.float64}


def t64(*values):
    return [ember.tensor(v, dtype=ember.float64) for v in values]


MOMENT_CASES = [
    ("Normal", lambda: ED.Normal(*t64([0.5, -2.0], [1.0, 3.0]))),
    ("Uniform", lambda: ED.Uniform(*t64([0.0, -1.0], [1.0, 4.0]))),
    ("Laplace", lambda: ED.Laplace(*t64([0.0, 1.0], [1.0, 0.5]))),
    ("Exponential", lambda: ED.Exponential(ember.tensor([0.5, 3.0], **T64))),
    ("Gamma", lambda: ED.Gamma(ember.tensor([0.05, 0.7, 1.0, 9.0], **T64),
                               ember.tensor([1.0, 2.0, 1.0, 0.5], **T64))),
    ("Beta", lambda: ED.Beta(ember.tensor([0.2, 2.0, 5.0], **T64),
                             ember.tensor([0.6, 2.0, 1.0], **T64))),
    ("Dirichlet", lambda: ED.Dirichlet(ember.tensor([[0.3, 1.0, 4.0], [2.0, 2.0, 2.0]], **T64))),
    ("StudentT", lambda: ED.StudentT(ember.tensor([5.0, 9.0], **T64))),
    ("Chi2", lambda: ED.Chi2(ember.tensor([1.0, 4.0], **T64))),
    ("LogNormal", lambda: ED.LogNormal(*t64([0.0, 0.5], [0.3, 0.5]))),
    ("HalfNormal", lambda: ED.HalfNormal(ember.tensor([1.0, 2.0], **T64))),
    ("Gumbel", lambda: ED.Gumbel(ember.tensor([0.0, 1.0], **T64), ember.tensor([1.0, 2.0], **T64))),
    ("Bernoulli", lambda: ED.Bernoulli(ember.tensor([0.1, 0.5], **T64))),
    ("Geometric", lambda: ED.Geometric(ember.tensor([0.2, 0.7], **T64))),
    ("Poisson", lambda: ED.Poisson(ember.tensor([0.5, 7.0], **T64))),
    ("Binomial", lambda: ED.Binomial(*t64([5.0, 20.0], [0.3, 0.9]))),
    ("OneHotCategorical", lambda: ED.OneHotCategorical(ember.tensor([0.1, 0.0, 0.6, 0.3], **T64))),
    ("Multinomial", lambda: ED.Multinomial(6, ember.tensor([0.1, 0.2, 0.7], **T64))),
    ("ContinuousBernoulli", lambda: ED.ContinuousBernoulli(ember.tensor([0.2, 0.5, 0.9], **T64))),
    ("MultivariateNormal", lambda: ED.MultivariateNormal(
        ember.tensor([1.0, -1.0], **T64),
        covariance_matrix=ember.tensor([[2.0, 0.6], [0.6, 1.0]], **T64))),
    ("LowRankMultivariateNormal", lambda: ED.LowRankMultivariateNormal(
        ember.tensor([1.0, -1.0], **T64), ember.tensor([[1.0], [0.5]], **T64),
        ember.tensor([0.5, 2.0], **T64))),
    ("MixtureSameFamily", lambda: ED.MixtureSameFamily(
        ED.Categorical(ember.tensor([0.3, 0.7], **T64)),
        ED.Normal(ember.tensor([-2.0, 1.0], **T64), ember.tensor([0.5, 1.0], **T64)))),
]


@pytest.mark.parametrize("name,make", MOMENT_CASES, ids=[c[0] for c in MOMENT_CASES])
def test_sample_moments(name, make):
    """Sample means within 5 standard errors of the mean, sample variances within 5
    standard errors (from the fourth moment of the sample) of the variance."""
    d = make()
    ember.manual_seed(1234)
    x = e2n(d.sample((N,)))
    mean, var = e2n(d.mean), e2n(d.variance)
    se_mean = np.sqrt(var / N)
    assert np.all(np.abs(x.mean(0) - mean) <= 5 * se_mean + 1e-12), (name, x.mean(0), mean)
    centred = (x - x.mean(0)) ** 2
    se_var = np.sqrt(centred.var(0) / N)
    assert np.all(np.abs(x.var(0) - var) <= 5 * se_var + 1e-12), (name, x.var(0), var)


def test_categorical_frequencies_and_zero_probabilities():
    probs = ember.tensor([[0.0, 0.2, 0.8, 0.0], [0.5, 0.5, 0.0, 0.0]], dtype=ember.float32)
    ember.manual_seed(5)
    s = ED.Categorical(probs).sample((20_000,)).numpy()
    freq = np.stack([(s == k).mean(0) for k in range(4)], -1)
    assert freq[0, 0] == freq[0, 3] == freq[1, 2] == freq[1, 3] == 0
    np.testing.assert_allclose(freq, probs.numpy(), atol=0.015)


# Reparameterized gradients -------------------------------------------------------------
def _f(x, event):
    """A smooth test function of a sample; for vector events a weighted sum."""
    y = x + 0.3 * x * x
    return y.sum(-1) if event else y


GRAD_CASES = [
    ("Normal", lambda D, a, b: D.Normal(a, b), [[0.5, -1.0], [1.0, 2.0]], False),
    ("Uniform", lambda D, a, b: D.Uniform(a, a + b), [[0.5, -1.0], [1.0, 2.0]], False),
    ("Laplace", lambda D, a, b: D.Laplace(a, b), [[0.5, -1.0], [1.0, 2.0]], False),
    ("Exponential", lambda D, a: D.Exponential(a), [[0.5, 2.0]], False),
    ("Gamma", lambda D, a, b: D.Gamma(a, b), [[0.4, 1.0, 3.0], [1.0, 2.0, 0.7]], False),
    ("Chi2", lambda D, a: D.Chi2(a), [[1.0, 4.0]], False),
    ("Beta", lambda D, a, b: D.Beta(a, b), [[0.5, 2.0, 4.0], [1.5, 0.8, 3.0]], False),
    ("Dirichlet", lambda D, a: D.Dirichlet(a), [[[0.5, 2.0, 3.0], [1.0, 1.0, 0.4]]], True),
    ("StudentT", lambda D, a, m, s: D.StudentT(a, m, s), [[6.0, 9.0], [0.5, -1.0], [1.0, 2.0]],
     False),
    ("LogNormal", lambda D, a, b: D.LogNormal(a, b), [[0.1, -0.5], [0.3, 0.5]], False),
    ("HalfNormal", lambda D, a: D.HalfNormal(a), [[0.5, 2.0]], False),
    ("Gumbel", lambda D, a, b: D.Gumbel(a, b), [[0.5, -1.0], [1.0, 2.0]], False),
    ("MultivariateNormal", lambda D, m, L: D.MultivariateNormal(m, scale_tril=L),
     [[1.0, -1.0], [[1.0, 0.0], [0.5, 2.0]]], True),
    ("LowRankMultivariateNormal", lambda D, m, w, d: D.LowRankMultivariateNormal(m, w, d),
     [[1.0, -1.0], [[1.0], [0.5]], [0.5, 2.0]], True),
]


@pytest.mark.parametrize("name,build,params,event", GRAD_CASES,
                         ids=[c[0] for c in GRAD_CASES])
def test_rsample_gradient_of_expectation(name, build, params, event):
    """d/dtheta E[f(x)] by averaging rsample gradients, against the gradient of
    PyTorch's closed form E[f] = sum(mean + 0.3 (variance + mean^2))."""
    e_args = [ember.tensor(p, dtype=ember.float64, requires_grad=True) for p in params]
    t_args = [torch.tensor(p, dtype=torch.float64, requires_grad=True) for p in params]
    d_t = build(TD, *t_args)
    exact = _f(d_t.mean, False) + 0.3 * d_t.variance
    grads_t = torch.autograd.grad(exact.sum(), t_args)
    ember.manual_seed(99)
    d_e = build(ED, *e_args)
    x = d_e.rsample((N // 2,))
    grads_e = ember.autograd.grad(_f(x, event).mean(0).sum(), e_args)
    for ge, gt in zip(grads_e, grads_t):
        g, t = ge.numpy(), gt.numpy()
        np.testing.assert_allclose(g, t, rtol=0.05, atol=0.03, err_msg=name)


def test_implicit_gamma_gradient_against_torch_and_differences():
    alpha = np.array([0.01, 0.2, 0.9, 1.0, 3.0, 40.0, 2000.0])
    x = np.stack([np.random.default_rng(i).gamma(a, size=5) for i, a in enumerate(alpha)])
    a = np.broadcast_to(alpha[:, None], x.shape).copy()
    ours = _gamma_ops.standard_gamma_grad(ember.tensor(a), ember.tensor(x)).numpy()
    theirs = torch._standard_gamma_grad(torch.tensor(a), torch.tensor(x)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-3)    # PyTorch's are approximations
    # ours are exact: dx/da = -(dP/da) / (dP/dx), dP/da by central differences of igamma
    h = 1e-5 * a
    cdf = lambda s: ember.igamma(ember.tensor(s), ember.tensor(x)).numpy()
    log_pdf = (a - 1) * np.log(x) - x - np.vectorize(math.lgamma)(a)
    fd = -(cdf(a + h) - cdf(a - h)) / (2 * h) / np.exp(log_pdf)
    np.testing.assert_allclose(ours, fd, rtol=2e-6)


def test_implicit_beta_gradient_against_torch_and_differences():
    special = pytest.importorskip("scipy.special")
    pairs = [(0.3, 0.5), (2.0, 3.0), (0.1, 5.0), (50.0, 2.0), (400.0, 900.0)]
    for a, b in pairs:
        x = np.random.default_rng(int(a * 10)).beta(a, b, size=6)
        args = (np.full(6, a), np.full(6, a + b))
        ours = _gamma_ops.dirichlet_grad(*(ember.tensor(v) for v in (x,) + args)).numpy()
        theirs = torch._dirichlet_grad(*(torch.tensor(v) for v in (x,) + args)).numpy()
        np.testing.assert_allclose(ours, theirs, rtol=2e-3)
        h = 1e-6 * a
        dcdf = (special.betainc(a + h, b, x) - special.betainc(a - h, b, x)) / (2 * h)
        pdf = np.exp((a - 1) * np.log(x) + (b - 1) * np.log1p(-x) - special.betaln(a, b))
        np.testing.assert_allclose(ours, -dcdf / pdf / (1 - x), rtol=1e-6)


def test_gamma_gradient_upper_tail_large_concentration():
    """Far above the mean of a large concentration the series of P cancels; the
    continued fraction of Q keeps the gradient to the Wilson-Hilferty limit."""
    a = 1e5
    x = a + np.array([-6.0, 0.0, 6.0, 8.0]) * math.sqrt(a)
    ours = _gamma_ops.standard_gamma_grad(ember.tensor(np.full(4, a)), ember.tensor(x)).numpy()
    z = ((x / a) ** (1 / 3) - 1 + 1 / (9 * a)) * 3 * math.sqrt(a)
    t = 1 - 1 / (9 * a) + z / (3 * math.sqrt(a))
    wilson_hilferty = 3 * a * t ** 2 * (1 / (9 * a * a) - z / (6 * a ** 1.5)) + t ** 3
    np.testing.assert_allclose(ours, wilson_hilferty, rtol=1e-6)


def test_rsample_gradient_once_only():
    c = ember.tensor([0.5, 2.0], dtype=ember.float64, requires_grad=True)
    x = ED.Gamma(c, 1.0).rsample()
    (g,) = ember.autograd.grad(x.sum(), [c], create_graph=True)
    with pytest.raises(ember.EmberError, match="differentiable once"):
        ember.autograd.grad(g.sum(), [c])
    assert torch.distributions.Gamma(torch.ones(1), 1.0).has_rsample


def test_gamma_rsample_float32_and_tiny_concentration():
    c = ember.tensor([1e-3, 0.5, 50.0], requires_grad=True)
    ember.manual_seed(0)
    x = ED.Gamma(c, ember.ones(3)).rsample((200,))
    assert x.dtype is ember.float32 and bool((x > 0).all())
    x.sum().backward()
    assert bool(c.grad.isfinite().all()) and bool((c.grad > 0).all())


# ember.jit ----------------------------------------------------------------------------------
def test_jit_matches_eager():
    def step(loc, scale, conc, logits, x):
        n = ED.Normal(loc, scale)
        g = ED.Gamma(conc, scale)
        c = ED.Categorical(logits=logits)
        out = n.log_prob(x).sum() + n.rsample((3,)).sum() + g.rsample((2,)).sum()
        out = out + c.log_prob(c.sample((4,))).sum() + \
            ED.kl_divergence(n, ED.Normal(x, scale)).sum()
        return out + ED.Bernoulli(logits=loc).sample().sum() + g.entropy().sum()

    def run(fn):
        args = [ember.tensor([0.1, -0.4, 0.3], requires_grad=True),
                ember.tensor([1.0, 2.0, 0.5]), ember.tensor([0.3, 1.0, 4.0], requires_grad=True),
                ember.tensor([[0.0, 1.0], [2.0, -1.0], [0.5, 0.5]]), ember.tensor([0.5, 0.2, -1.0])]
        ember.manual_seed(11)
        out = fn(*args)
        out.backward()
        return out.item(), args[0].grad.numpy(), args[2].grad.numpy()

    eager, jitted = run(step), run(ember.jit(step))
    assert abs(eager[0] - jitted[0]) < 1e-5
    np.testing.assert_allclose(eager[1], jitted[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(eager[2], jitted[2], rtol=1e-5, atol=1e-6)


def test_jit_matches_eager_multivariate_and_mixtures():
    def step(a, m, L, logits):
        out = ED.Dirichlet(a).rsample((5,)).pow(2).sum() + ED.Beta(a[0], a[1]).rsample((3,)).sum()
        mvn = ED.MultivariateNormal(m, scale_tril=L)
        out = out + mvn.log_prob(mvn.rsample((4,))).sum() + mvn.entropy().sum()
        out = out + ED.Multinomial(5, logits=logits).sample((2,)).sum()
        out = out + ED.OneHotCategorical(logits=logits).sample().sum()
        mix = ED.MixtureSameFamily(ED.Categorical(logits=logits), ED.Normal(m, a))
        out = out + mix.log_prob(m).sum() + mix.sample((3,)).sum() + ED.StudentT(a).rsample().sum()
        out = out + ED.RelaxedOneHotCategorical(ember.tensor(0.5), logits=logits).rsample().sum()
        low_rank = ED.LowRankMultivariateNormal(m, L[:, :2], a)
        return out + ED.Dirichlet(a).mode.sum() + low_rank.log_prob(m).sum()

    def run(fn):
        args = [ember.tensor([0.5, 2.0, 3.0], requires_grad=True),
                ember.tensor([0.1, 0.2, 0.3], requires_grad=True),
                ember.tensor([[1.0, 0, 0], [0.5, 1, 0], [0.1, 0.2, 2.0]], requires_grad=True),
                ember.tensor([0.0, 1.0, -1.0], requires_grad=True)]
        ember.manual_seed(3)
        out = fn(*args)
        out.backward()
        return [out.detach().numpy()] + [a.grad.numpy() for a in args]

    for e, j in zip(run(step), run(ember.jit(step))):
        np.testing.assert_allclose(e, j, rtol=1e-5, atol=1e-6)


def test_jit_rejects_host_sampled_distributions():
    fn = ember.jit(lambda rate: ED.Poisson(rate).sample())
    with pytest.raises(ember.EmberError):
        fn(ember.tensor([1.0, 2.0]))
