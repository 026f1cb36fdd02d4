"""The later families (Pareto, Weibull, Kumaraswamy, InverseGamma, LogisticNormal,
GeneralizedPareto, FisherSnedecor, NegativeBinomial, VonMises, Wishart, LKJCholesky)
against torch.distributions on the same float64 parameters: shapes, log_prob, cdf,
icdf, entropy, mean, variance, stddev and mode, and their gradients with respect to
every parameter."""
import zlib

import numpy as np
import pytest

import ember
import ember.distributions as ED
from tests.distributions.common import close, leaves, tensors
from tests.distributions.test_values import S, Case, _pos, _results, _simplex, \
    torch_float64  # noqa: F401  (a fixture)

torch = pytest.importorskip("torch")
TD = torch.distributions


def _spd(rng, shape, n=3):
    a = rng.normal(size=tuple(shape) + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _corr_cholesky(rng, shape, n=3):
    """Random lower Cholesky factors of correlation matrices: lower-triangular rows
    with a positive diagonal, scaled to unit length."""
    L = np.tril(rng.normal(size=tuple(shape) + (n, n)))
    idx = np.arange(n)
    L[..., idx, idx] = np.abs(L[..., idx, idx]) + 0.3
    return L / np.linalg.norm(L, axis=-1, keepdims=True)


def _gpd_concentration(rng, shape):
    """Shapes in (-0.25, 0.5), with some exactly 0 (the exponential branch)."""
    c = rng.uniform(-0.25, 0.5, shape)
    return np.where(rng.uniform(size=shape) < 0.3, 0.0, c)


CASES = [
    Case("Pareto", lambda D, s, a: D.Pareto(s, a),
         lambda r, b: [_pos(r, b, 0.5, 1.0), _pos(r, b, 0.5, 4.0)],
         lambda r, b: _pos(r, S + b, 1.0, 4.0), icdf=True),
    Case("Weibull", lambda D, s, k: D.Weibull(s, k),
         lambda r, b: [_pos(r, b), _pos(r, b, 0.5, 3.0)], lambda r, b: _pos(r, S + b, 0.1, 3.0),
         icdf=True),
    Case("Kumaraswamy", lambda D, a, c: D.Kumaraswamy(a, c),
         lambda r, b: [_pos(r, b, 0.5, 3.0), _pos(r, b, 0.5, 3.0)],
         lambda r, b: r.uniform(0.01, 0.99, S + b), icdf=True),
    Case("InverseGamma", lambda D, a, rate: D.InverseGamma(a, rate),
         lambda r, b: [_pos(r, b, 0.5, 4.0), _pos(r, b)], lambda r, b: _pos(r, S + b, 0.1, 4.0),
         cdf_grad=False),
    Case("LogisticNormal", lambda D, m, s: D.LogisticNormal(m, s),
         lambda r, b: [r.normal(size=b + (3,)), _pos(r, b + (3,))],
         lambda r, b: _simplex(r, S + b)),
    Case("GeneralizedPareto", lambda D, m, s, c: D.GeneralizedPareto(m, s, c),
         lambda r, b: [r.uniform(-1.0, -0.5, b), _pos(r, b, 0.5, 2.0), _gpd_concentration(r, b)],
         lambda r, b: r.uniform(0.0, 0.7, S + b), icdf=True),
    Case("FisherSnedecor", lambda D, d1, d2: D.FisherSnedecor(d1, d2),
         lambda r, b: [_pos(r, b, 0.5, 6.0), _pos(r, b, 1.0, 8.0)],
         lambda r, b: _pos(r, S + b, 0.1, 4.0)),
    Case("NegativeBinomial-probs", lambda D, n, p: D.NegativeBinomial(n, probs=p),
         lambda r, b: [_pos(r, b, 0.5, 5.0), r.uniform(0.05, 0.9, b)],
         lambda r, b: r.integers(0, 8, S + b).astype(float)),
    Case("NegativeBinomial-logits", lambda D, x: D.NegativeBinomial(3, logits=x),
         lambda r, b: [r.normal(size=b)], lambda r, b: r.integers(0, 8, S + b).astype(float)),
    Case("VonMises", lambda D, m, k: D.VonMises(m, k),
         lambda r, b: [r.normal(size=b), np.where(r.uniform(size=b) < 0.5,
                                                   _pos(r, b, 0.1, 3.0), _pos(r, b, 4.0, 9.0))],
         lambda r, b: r.normal(size=S + b) * 3),
    Case("Wishart-tril", lambda D, df, L: D.Wishart(df, scale_tril=L),
         lambda r, b: [_pos(r, b, 3.5, 6.0), np.linalg.cholesky(_spd(r, b))],
         lambda r, b: _spd(r, S + b)),
    Case("Wishart-cov", lambda D, df, c: D.Wishart(df, covariance_matrix=c),
         lambda r, b: [_pos(r, b, 3.5, 6.0), _spd(r, ())], lambda r, b: _spd(r, S + b)),
    Case("Wishart-prec", lambda D, df, p: D.Wishart(df, precision_matrix=p),
         lambda r, b: [_pos(r, b, 4.5, 6.0), _spd(r, b)], lambda r, b: _spd(r, S + b)),
    Case("LKJCholesky", lambda D, c: D.LKJCholesky(3, c), lambda r, b: [_pos(r, b, 0.3, 3.0)],
         lambda r, b: _corr_cholesky(r, S + b)),
]


@pytest.mark.parametrize("batch", [(3,), (2, 3)], ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_values_and_gradients(case, batch, torch_float64):  # noqa: F811
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    e_args, t_args = tensors(torch, case.params(rng, batch))
    d_e, d_t = case.build(ED, *e_args), case.build(TD, *t_args)
    assert tuple(d_e.batch_shape) == tuple(d_t.batch_shape)
    assert tuple(d_e.event_shape) == tuple(d_t.event_shape)
    assert d_e.has_rsample == d_t.has_rsample
    assert d_e.has_enumerate_support == d_t.has_enumerate_support
    value, q = case.value(rng, batch), rng.uniform(0.05, 0.95, S + batch)
    results = _results(case, d_e, d_t, value, q)
    assert "log_prob" in results
    loss_e, loss_t = 0.0, 0.0
    for name, (e, t) in results.items():
        close(e, t, rtol=1e-10, atol=1e-11, what=f"{case.id}.{name}")
        differentiable = name != "mode" and (name != "cdf" or case.cdf_grad)
        if e.dtype.is_floating_point and e.requires_grad and differentiable:
            w = rng.normal(size=tuple(e.shape))
            finite = np.isfinite(w * t.detach().numpy())
            loss_e = loss_e + (e * ember.tensor(np.where(finite, w, 0.0)))[
                ember.tensor(finite)].sum()
            loss_t = loss_t + (t * torch.tensor(np.where(finite, w, 0.0)))[
                torch.tensor(finite)].sum()
    grads_t = torch.autograd.grad(loss_t, leaves(t_args), allow_unused=True,
                                  materialize_grads=True)
    grads_e = ember.autograd.grad(loss_e, leaves(e_args), allow_unused=True,
                                  materialize_grads=True)
    for ge, gt in zip(grads_e, grads_t):
        close(ge, gt, rtol=1e-9, atol=1e-10, what=f"{case.id} gradient")


@pytest.mark.parametrize("name,args,x", [
    ("Pareto", (1.0, 2.0), 1.5), ("Weibull", (1.0, 2.0), 0.5), ("Kumaraswamy", (2.0, 3.0), 0.5),
    ("InverseGamma", (2.0, 3.0), 0.5), ("FisherSnedecor", (3.0, 5.0), 0.5),
    ("GeneralizedPareto", (0.0, 1.0, 0.2), 0.5), ("VonMises", (0.5, 2.0), 0.5),
    ("NegativeBinomial", (4.0, 0.3), 2.0), ("LogisticNormal", (0.5, 2.0), None)])
def test_python_number_parameters(name, args, x):
    """Numbers give default-dtype tensors and PyTorch's batch shape."""
    d_e, d_t = getattr(ED, name)(*args), getattr(TD, name)(*args)
    assert tuple(d_e.batch_shape) == tuple(d_t.batch_shape)
    assert tuple(d_e.event_shape) == tuple(d_t.event_shape)
    value = [0.3, 0.7] if x is None else x
    close(d_e.log_prob(ember.tensor(value)), d_t.log_prob(torch.tensor(value)), rtol=2e-6,
          atol=1e-6, what=name)
    s_e, s_t = d_e.sample((2,)), d_t.sample((2,))
    assert tuple(s_e.shape) == tuple(s_t.shape) and s_e.dtype is ember.float32


@pytest.mark.parametrize("case", [c for c in CASES if c.id in (
    "Pareto", "GeneralizedPareto", "VonMises", "Wishart-tril", "LKJCholesky",
    "NegativeBinomial-probs", "LogisticNormal")], ids=lambda c: c.id)
def test_edge_batches_float32_and_expand(case):
    """Empty and size-1 batch dimensions, non-contiguous and float32 parameters, and
    expand."""
    rng = np.random.default_rng(1)
    e_args, _ = tensors(torch, case.params(rng, (0,)), requires_grad=False)
    d_e = case.build(ED, *e_args)
    assert tuple(d_e.batch_shape) == (0,)
    assert tuple(d_e.log_prob(ember.tensor(case.value(rng, (0,)))).shape) == S + (0,)
    assert tuple(d_e.sample((2,)).shape) == (2, 0) + tuple(d_e.event_shape)
    params = case.params(rng, (3, 2))
    # the same values as transposed views of transposed copies: non-contiguous inputs
    strided = [ember.tensor(np.ascontiguousarray(np.swapaxes(p, 0, 1))).transpose(0, 1)
               for p in params]
    assert all(not a.is_contiguous() for a in strided)
    value = case.value(rng, (3, 2))
    old_default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)    # (PyTorch's GeneralizedPareto needs it)
    try:
        expected = case.build(TD, *[torch.tensor(p) for p in params]).log_prob(
            torch.tensor(value))
    finally:
        torch.set_default_dtype(old_default)
    close(case.build(ED, *strided).log_prob(ember.tensor(value)), expected, rtol=1e-10,
          atol=1e-11, what=f"{case.id} strided")
    params = case.params(rng, (3, 1))
    f32 = [p.astype(np.float32) if isinstance(p, np.ndarray) else p for p in params]
    value = case.value(rng, (3, 1)).astype(np.float32)
    d_e = case.build(ED, *[ember.tensor(p) for p in f32])
    d_t = case.build(TD, *[torch.tensor(p) for p in f32])
    close(d_e.log_prob(ember.tensor(value)), d_t.log_prob(torch.tensor(value)), rtol=1e-5,
          atol=2e-5, what=f"{case.id} float32")
    big = d_e.expand((2, 3, 1))
    assert type(big) is type(d_e) and tuple(big.batch_shape) == (2, 3, 1)
    assert tuple(big.sample().shape) == (2, 3, 1) + tuple(d_e.event_shape)
    close(big.log_prob(ember.tensor(value[:1])),
          d_t.expand((2, 3, 1)).log_prob(torch.tensor(value[:1])), rtol=1e-5, atol=2e-5,
          what=f"{case.id} expanded")


def test_generalized_pareto_tails_and_methods(torch_float64):  # noqa: F811
    """log_survival_function and log_cdf; the support's upper end for a negative shape;
    a zero shape is the exponential distribution."""
    loc, scale = np.array([0.0, 0.5, -1.0]), np.array([1.0, 2.0, 0.5])
    conc = np.array([0.0, 0.3, -0.5])
    e = ED.GeneralizedPareto(*(ember.tensor(v) for v in (loc, scale, conc)))
    t = TD.GeneralizedPareto(*(torch.tensor(v) for v in (loc, scale, conc)))
    x = np.array([[0.1, 0.7, -0.5], [3.0, 9.0, -0.01]])
    for name in ("log_survival_function", "log_cdf", "cdf", "log_prob"):
        close(getattr(e, name)(ember.tensor(x)), getattr(t, name)(torch.tensor(x)), what=name)
    close(e.support.upper_bound, t.support.upper_bound)
    assert e.support.upper_bound[2].item() == 0.0
    expo = ED.Exponential(ember.tensor(1.0, dtype=ember.float64))
    np.testing.assert_allclose(e.log_prob(ember.tensor(x))[:, 0].numpy(),
                               expo.log_prob(ember.tensor(x[:, 0])).numpy(), rtol=1e-14)
    close(e.entropy(), t.entropy())


def test_negative_binomial_zero_count_and_mode():
    n, p = torch.tensor([0.0, 0.0, 2.5, 6.0]), torch.tensor([0.3, 0.3, 0.5, 0.8])
    x = torch.tensor([0.0, 1.0, 3.0, 4.0])
    e = ED.NegativeBinomial(ember.tensor(n.numpy()), ember.tensor(p.numpy()))
    t = TD.NegativeBinomial(n, p)
    close(e.log_prob(ember.tensor(x.numpy())), t.log_prob(x), rtol=1e-6)
    assert e.log_prob(ember.tensor(x.numpy()))[0].item() == 0.0
    close(e.mode, t.mode)
    ember.manual_seed(0)
    s = e.sample((200,))
    assert bool((s[:, :2] == 0).all()) and bool((s >= 0).all())


def test_von_mises_log_prob_wraps_and_bessel_branches():
    """Angles are read modulo 2 pi; both sides of the Bessel approximation's switch at
    3.75 agree with PyTorch."""
    kappa = np.array([1e-4, 0.5, 3.7499, 3.7501, 20.0, 500.0])
    e = ED.VonMises(ember.tensor(np.zeros(6)), ember.tensor(kappa))
    t = TD.VonMises(torch.tensor(np.zeros(6)), torch.tensor(kappa))
    for x in (0.3, 0.3 + 2 * np.pi, 0.3 - 6 * np.pi):
        xs = np.full(6, x)
        close(e.log_prob(ember.tensor(xs)), t.log_prob(torch.tensor(xs)), what=str(x))
    close(e.variance, t.variance)
    with pytest.raises(NotImplementedError):
        e.rsample()
    for method in (e.entropy, lambda: e.cdf(ember.zeros(6)), lambda: e.icdf(ember.zeros(6))):
        with pytest.raises(NotImplementedError):
            method()


def test_wishart_matrices_and_number_df():
    rng = np.random.default_rng(4)
    cov = _spd(rng, (2,))
    e = ED.Wishart(4.0, covariance_matrix=ember.tensor(cov))
    t = TD.Wishart(4.0, covariance_matrix=torch.tensor(cov))
    assert tuple(e.batch_shape) == (2,) and tuple(e.df.shape) == tuple(t.df.shape) == ()
    for name in ("scale_tril", "covariance_matrix", "precision_matrix"):
        close(getattr(e, name), getattr(t, name), rtol=1e-9, what=name)
    close(e.entropy(), t.entropy())
    # PyTorch cannot reshape a 0-d df to a batch of two; ember broadcasts it
    np.testing.assert_allclose(e.mean.numpy(), 4.0 * cov)
