"""Sampling of the later families: shapes, dtypes and support as PyTorch's; moments
within statistical bounds (fixed seeds); reparameterized gradients of expectations
against the gradients of PyTorch's closed forms; seeding and Wishart's redrawing of
singular samples. (ember.jit: test_jit_families.py.)"""
import math
import warnings

import numpy as np
import pytest

import ember
import ember.distributions as ED
from tests.distributions.common import e2n
from tests.distributions.test_values_families import CASES

torch = pytest.importorskip("torch")
TD = torch.distributions


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_sample_shapes_dtypes_support(case):
    rng = np.random.default_rng(3)
    params = case.params(rng, (2, 3))
    d_e = case.build(ED, *[ember.tensor(p, requires_grad=True) for p in params])
    d_t = case.build(TD, *[torch.tensor(p) for p in params])
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


def t64(*values):
    return [ember.tensor(v, dtype=ember.float64) for v in values]


N = 40_000
MOMENT_CASES = [
    ("Pareto", lambda: ED.Pareto(*t64([1.0, 0.5], [6.0, 9.0]))),
    ("Weibull", lambda: ED.Weibull(*t64([1.0, 2.0], [0.7, 3.0]))),
    ("Kumaraswamy", lambda: ED.Kumaraswamy(*t64([0.5, 2.0, 5.0], [0.7, 2.0, 1.0]))),
    ("InverseGamma", lambda: ED.InverseGamma(*t64([6.0, 10.0], [1.0, 3.0]))),
    ("GeneralizedPareto", lambda: ED.GeneralizedPareto(*t64([0.0, 1.0, -2.0], [1.0, 2.0, 0.5],
                                                            [-0.3, 0.0, 0.1]))),
    ("FisherSnedecor", lambda: ED.FisherSnedecor(*t64([3.0, 8.0], [12.0, 20.0]))),
    ("NegativeBinomial", lambda: ED.NegativeBinomial(*t64([0.7, 5.0], [0.3, 0.6]))),
    ("Wishart", lambda: ED.Wishart(ember.tensor(5.5, dtype=ember.float64),
                                   covariance_matrix=ember.tensor([[2.0, 0.6], [0.6, 1.0]],
                                                                  dtype=ember.float64))),
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


def test_von_mises_circular_moments():
    """The mean direction is loc and one minus the mean resultant length is the circular
    variance; small and large concentrations (where the float32 scheme would stall)."""
    loc = np.array([0.5, -3.0, 3.0, 1.0])
    kappa = np.array([1e-6, 0.7, 4.0, 50.0])
    d = ED.VonMises(ember.tensor(loc, dtype=ember.float32), ember.tensor(kappa,
                                                                          dtype=ember.float32))
    ember.manual_seed(5)
    n = 20_000
    x = d.sample((n,)).numpy().astype(np.float64)
    assert x.dtype == np.float64 and np.all(np.abs(x) <= math.pi)
    c, s = np.cos(x).mean(0), np.sin(x).mean(0)
    resultant = np.hypot(c, s)
    np.testing.assert_allclose(1 - resultant, d.variance.numpy(), atol=5 / math.sqrt(n))
    angle_error = np.angle(np.exp(1j * (np.arctan2(s, c) - loc)))
    assert np.all(np.abs(angle_error[1:]) < 5 / (math.sqrt(n) * resultant[1:])), angle_error
    # the uniform limit: the first moment of the angle vanishes
    assert abs(x[:, 0].mean()) < 5 * math.pi / math.sqrt(3 * n)


def test_lkj_correlation_moments():
    """Off-diagonal correlations of LKJ(eta) in dimension d have mean 0 and variance
    1 / (2 eta + d - 1)."""
    eta = np.array([0.5, 1.0, 4.0])
    d = ED.LKJCholesky(4, ember.tensor(eta, dtype=ember.float64))
    ember.manual_seed(2)
    n = 8000
    L = d.sample((n,))
    corr = (L @ L.mT).numpy()
    np.testing.assert_allclose(np.diagonal(corr, axis1=-2, axis2=-1), 1.0, atol=1e-12)
    r = corr[..., 2, 0]
    var = 1 / (2 * eta + 3)
    assert np.all(np.abs(r.mean(0)) < 5 * np.sqrt(var / n))
    se_var = np.sqrt(((r - r.mean(0)) ** 2).var(0) / n)
    assert np.all(np.abs(r.var(0) - var) < 5 * se_var)


def _f(x):
    return x + 0.3 * x * x


GRAD_CASES = [
    ("Pareto", lambda D, s, a: D.Pareto(s, a), [[1.0, 0.5], [6.0, 9.0]], 0),
    ("Weibull", lambda D, s, k: D.Weibull(s, k), [[1.0, 2.0], [0.8, 3.0]], 0),
    ("Kumaraswamy", lambda D, a, b: D.Kumaraswamy(a, b), [[0.5, 2.0], [0.7, 3.0]], 0),
    ("InverseGamma", lambda D, a, b: D.InverseGamma(a, b), [[6.0, 9.0], [1.0, 2.0]], 0),
    ("GeneralizedPareto", lambda D, m, s, c: D.GeneralizedPareto(m, s, c),
     [[0.0, 0.5], [1.0, 1.0], [-0.3, 0.05]], 0),
    ("FisherSnedecor", lambda D, a, b: D.FisherSnedecor(a, b), [[4.0, 8.0], [12.0, 16.0]], 0),
    ("Wishart", lambda D, df, L: D.Wishart(df, scale_tril=L),
     [[5.0, 7.0], [[[1.0, 0.0], [0.5, 1.5]], [[0.8, 0.0], [-0.3, 1.0]]]], 2),
]


@pytest.mark.parametrize("name,build,params,event_dims", GRAD_CASES,
                         ids=[c[0] for c in GRAD_CASES])
def test_rsample_gradient_of_expectation(name, build, params, event_dims):
    """d/dtheta E[f(x)] by averaging rsample gradients, against the gradient of
    PyTorch's closed form E[f] = sum(mean + 0.3 (variance + mean^2))."""
    e_args = [ember.tensor(p, dtype=ember.float64, requires_grad=True) for p in params]
    t_args = [torch.tensor(p, dtype=torch.float64, requires_grad=True) for p in params]
    d_t = build(TD, *t_args)
    exact = _f(d_t.mean) + 0.3 * d_t.variance
    grads_t = torch.autograd.grad(exact.sum(), t_args)
    ember.manual_seed(99)
    x = build(ED, *e_args).rsample((N // 2,))
    grads_e = ember.autograd.grad(_f(x).mean(0).sum(), e_args)
    for ge, gt in zip(grads_e, grads_t):
        np.testing.assert_allclose(ge.numpy(), gt.numpy(), rtol=0.05, atol=0.03, err_msg=name)


def test_seeding_repeats_samples():
    makers = [lambda: ED.VonMises(ember.tensor([0.0, 1.0]), ember.tensor([0.5, 5.0])),
              lambda: ED.LKJCholesky(3, 2.0),
              lambda: ED.Wishart(4.0, scale_tril=ember.eye(3)),
              lambda: ED.NegativeBinomial(3.0, ember.tensor([0.2, 0.7]))]
    ember.manual_seed(7)
    first = [make().sample((3,)) for make in makers]
    ember.manual_seed(7)
    again = [make().sample((3,)) for make in makers]
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(makers[0]().sample((3,)).numpy(), first[0].numpy())


def test_wishart_warnings_and_singular_redraws(monkeypatch):
    with pytest.warns(UserWarning, match="Low df values detected"):
        ED.Wishart(2.5, covariance_matrix=ember.eye(3))
    d = ED.Wishart(ember.tensor([4.0, 5.0]), covariance_matrix=ember.eye(2))
    draws = []
    bartlett = d._bartlett_sampling

    def first_singular(sample_shape):
        x = bartlett(sample_shape)
        if not draws:
            x = x * ember.tensor([1.0, 0.0, 1.0]).reshape(3, 1, 1, 1)   # sample 1 singular
        draws.append(x)
        return x

    monkeypatch.setattr(d, "_bartlett_sampling", first_singular)
    ember.manual_seed(0)
    with pytest.warns(UserWarning, match="Singular sample detected"):
        x = d.rsample((3,))
    assert len(draws) == 2
    np.testing.assert_array_equal(x[0].numpy(), draws[0][0].numpy())
    np.testing.assert_array_equal(x[1].numpy(), draws[1][1].numpy())
    assert bool(d.support.check(x).all())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d2 = ED.Wishart(ember.tensor([4.0, 5.0]), covariance_matrix=ember.eye(2))
        assert bool(d2.support.check(d2.rsample((50,))).all())
