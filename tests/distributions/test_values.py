"""ember.distributions against torch.distributions on the same float64 parameters:
shapes, log_prob, cdf, icdf, entropy, mean, variance, stddev and mode, and the gradients
of all of them (summed with random weights) with respect to every parameter."""
import zlib

import numpy as np
import pytest

import ember
import ember.distributions as ED
from tests.distributions.common import close, leaves, tensors

torch = pytest.importorskip("torch")
TD = torch.distributions


def _pos(rng, shape, low=0.5, high=2.0):
    return rng.uniform(low, high, shape)


def _simplex(rng, shape, k=4):
    return rng.dirichlet(np.ones(k), size=shape) if shape else rng.dirichlet(np.ones(k))


def _onehot(rng, shape, k=4):
    return np.eye(k)[rng.integers(0, k, shape)]


def _counts(rng, shape, n=7, k=4):
    flat = rng.multinomial(n, np.ones(k) / k, size=int(np.prod(shape)))
    return flat.reshape(tuple(shape) + (k,)).astype(np.float64)


def _spd(rng, shape, n=3):
    a = rng.normal(size=tuple(shape) + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _tril(rng, shape, n=3):
    return np.linalg.cholesky(_spd(rng, shape, n))


S = (4,)  # the sample dimension in front of the values scored


class Case:
    """A distribution built by ``build(module, *tensors)`` from ``params(rng, batch)``
    (NumPy float arrays become tensors with gradients), scored at ``value(rng,
    batch)``; ``icdf`` says whether quantiles are checked."""

    def __init__(self, id, build, params, value, icdf=False, cdf_grad=True):
        self.id, self.build, self.params, self.value, self.icdf = id, build, params, value, icdf
        self.cdf_grad = cdf_grad  # PyTorch has no gradient of igamma in its first input


def _loc_scale(name):
    return Case(name, lambda D, a, b: getattr(D, name)(a, b),
                lambda r, b: [r.normal(size=b), _pos(r, b)],
                lambda r, b: r.normal(size=S + b) * (0.5 if name == "Gumbel" else 2),
                icdf=name != "Gumbel")


CASES = [
    _loc_scale("Normal"), _loc_scale("Laplace"), _loc_scale("Cauchy"), _loc_scale("Gumbel"),
    Case("Uniform", lambda D, lo, w: D.Uniform(lo, lo + w),
         lambda r, b: [r.uniform(-1.0, 0.0, b), _pos(r, b, 1.5, 2.5)],
         lambda r, b: r.uniform(0.01, 0.49, S + b), icdf=True),
    Case("Exponential", lambda D, rate: D.Exponential(rate), lambda r, b: [_pos(r, b)],
         lambda r, b: _pos(r, S + b, 0.0, 3.0), icdf=True),
    Case("Gamma", lambda D, a, rate: D.Gamma(a, rate),
         lambda r, b: [_pos(r, b, 0.3, 4.0), _pos(r, b)], lambda r, b: _pos(r, S + b, 0.1, 4),
         cdf_grad=False),
    Case("Chi2", lambda D, df: D.Chi2(df), lambda r, b: [_pos(r, b, 0.5, 6.0)],
         lambda r, b: _pos(r, S + b, 0.1, 4), cdf_grad=False),
    Case("Beta", lambda D, a, c: D.Beta(a, c),
         lambda r, b: [_pos(r, b, 0.3, 3), _pos(r, b, 0.3, 3)],
         lambda r, b: r.uniform(0.01, 0.99, S + b)),
    Case("Dirichlet", lambda D, c: D.Dirichlet(c), lambda r, b: [_pos(r, b + (4,), 0.3, 3)],
         lambda r, b: _simplex(r, S + b)),
    Case("StudentT", lambda D, df, loc, scale: D.StudentT(df, loc, scale),
         lambda r, b: [_pos(r, b, 0.5, 5), r.normal(size=b), _pos(r, b)],
         lambda r, b: r.normal(size=S + b) * 2),
    Case("LogNormal", lambda D, a, b: D.LogNormal(a, b),
         lambda r, b: [r.normal(size=b), _pos(r, b)], lambda r, b: _pos(r, S + b, 0.1, 4),
         icdf=True),
    Case("HalfNormal", lambda D, s: D.HalfNormal(s), lambda r, b: [_pos(r, b)],
         lambda r, b: _pos(r, S + b, 0.0, 3), icdf=True),
    Case("HalfCauchy", lambda D, s: D.HalfCauchy(s), lambda r, b: [_pos(r, b)],
         lambda r, b: _pos(r, S + b, 0.0, 3), icdf=True),
    Case("Bernoulli-probs", lambda D, p: D.Bernoulli(probs=p),
         lambda r, b: [r.uniform(0.05, 0.95, b)],
         lambda r, b: r.integers(0, 2, S + b).astype(float)),
    Case("Bernoulli-logits", lambda D, x: D.Bernoulli(logits=x),
         lambda r, b: [r.normal(size=b) * 2], lambda r, b: r.integers(0, 2, S + b).astype(float)),
    Case("Geometric-probs", lambda D, p: D.Geometric(probs=p),
         lambda r, b: [r.uniform(0.05, 0.95, b)],
         lambda r, b: r.integers(0, 6, S + b).astype(float)),
    Case("Geometric-logits", lambda D, x: D.Geometric(logits=x),
         lambda r, b: [r.normal(size=b)], lambda r, b: r.integers(0, 6, S + b).astype(float)),
    Case("Poisson", lambda D, rate: D.Poisson(rate), lambda r, b: [_pos(r, b, 0.5, 6)],
         lambda r, b: r.integers(0, 8, S + b).astype(float)),
    Case("Binomial-probs", lambda D, n, p: D.Binomial(n, probs=p),
         lambda r, b: [np.full(b, 6.0), r.uniform(0.05, 0.95, b)],
         lambda r, b: r.integers(0, 7, S + b).astype(float)),
    Case("Binomial-logits", lambda D, x: D.Binomial(5, logits=x),
         lambda r, b: [r.normal(size=b)], lambda r, b: r.integers(0, 6, S + b).astype(float)),
    Case("Categorical-probs", lambda D, p: D.Categorical(probs=p),
         lambda r, b: [_simplex(r, b) * 3], lambda r, b: r.integers(0, 4, S + b)),
    Case("Categorical-logits", lambda D, x: D.Categorical(logits=x),
         lambda r, b: [r.normal(size=b + (4,))], lambda r, b: r.integers(0, 4, S + b)),
    Case("OneHotCategorical", lambda D, p: D.OneHotCategorical(probs=p),
         lambda r, b: [_simplex(r, b)], lambda r, b: _onehot(r, S + b)),
    Case("Multinomial", lambda D, x: D.Multinomial(7, logits=x),
         lambda r, b: [r.normal(size=b + (4,))], lambda r, b: _counts(r, S + b)),
    Case("ContinuousBernoulli", lambda D, p: D.ContinuousBernoulli(probs=p),
         lambda r, b: [np.where(r.uniform(size=b) < 0.3, 0.4995, r.uniform(0.05, 0.95, b))],
         lambda r, b: r.uniform(0.01, 0.99, S + b), icdf=True),
    Case("RelaxedBernoulli", lambda D, t, x: D.RelaxedBernoulli(t, logits=x),
         lambda r, b: [np.array(0.7), r.normal(size=b)], lambda r, b: r.uniform(0.01, 0.99, S + b)),
    Case("RelaxedOneHotCategorical", lambda D, t, p: D.RelaxedOneHotCategorical(t, probs=p),
         lambda r, b: [np.array(0.7), _simplex(r, b)], lambda r, b: _simplex(r, S + b)),
    Case("MultivariateNormal-tril", lambda D, m, L: D.MultivariateNormal(m, scale_tril=L),
         lambda r, b: [r.normal(size=b + (3,)), _tril(r, b)],
         lambda r, b: r.normal(size=S + b + (3,))),
    Case("MultivariateNormal-cov", lambda D, m, c: D.MultivariateNormal(m, covariance_matrix=c),
         lambda r, b: [r.normal(size=b + (3,)), _spd(r, ())],
         lambda r, b: r.normal(size=S + b + (3,))),
    Case("MultivariateNormal-prec", lambda D, m, p: D.MultivariateNormal(m, precision_matrix=p),
         lambda r, b: [r.normal(size=(3,)), _spd(r, b)],
         lambda r, b: r.normal(size=S + b + (3,))),
    Case("LowRankMultivariateNormal",
         lambda D, m, w, d: D.LowRankMultivariateNormal(m, w, d),
         lambda r, b: [r.normal(size=b + (3,)), r.normal(size=b + (3, 2)), _pos(r, b + (3,))],
         lambda r, b: r.normal(size=S + b + (3,))),
    Case("Independent", lambda D, m, s: D.Independent(D.Normal(m, s), 1),
         lambda r, b: [r.normal(size=b + (3,)), _pos(r, b + (3,))],
         lambda r, b: r.normal(size=S + b + (3,))),
    Case("MixtureSameFamily",
         lambda D, x, m, s: D.MixtureSameFamily(D.Categorical(logits=x), D.Normal(m, s)),
         lambda r, b: [r.normal(size=b + (3,)), r.normal(size=b + (3,)), _pos(r, b + (3,))],
         lambda r, b: r.normal(size=S + b)),
    Case("TransformedDistribution",
         lambda D, m, s: D.TransformedDistribution(
             D.Normal(m, s), [D.transforms.AffineTransform(1.0, 2.0),
                              D.transforms.SigmoidTransform()]),
         lambda r, b: [r.normal(size=b), _pos(r, b)], lambda r, b: r.uniform(0.05, 0.95, S + b),
         icdf=True),
]

PROPERTIES = ("mean", "variance", "stddev", "mode")


def _both(fn_e, fn_t):
    """(ember result, torch result), or None when torch does not implement it (then
    ember must not either)."""
    try:
        t = fn_t()
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            fn_e()
        return None
    return fn_e(), t


def _results(case, d_e, d_t, value, q):
    out = {}
    for name in PROPERTIES:
        out[name] = _both(lambda: getattr(d_e, name), lambda: getattr(d_t, name))
    out["entropy"] = _both(d_e.entropy, d_t.entropy)
    pair = (ember.tensor(value), torch.tensor(value))
    out["log_prob"] = _both(lambda: d_e.log_prob(pair[0]), lambda: d_t.log_prob(pair[1]))
    out["cdf"] = _both(lambda: d_e.cdf(pair[0]), lambda: d_t.cdf(pair[1]))
    if case.icdf:
        out["icdf"] = (d_e.icdf(ember.tensor(q)), d_t.icdf(torch.tensor(q)))
    return {k: v for k, v in out.items() if v is not None}


BATCHES = [(3,), (2, 3)]


@pytest.fixture
def torch_float64():
    """PyTorch's default dtype float64 (its Multinomial entropy turns an int count into
    a default-dtype tensor; in float32 that costs 4e-7)."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


@pytest.mark.parametrize("batch", BATCHES, ids=str)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_values_and_gradients(case, batch, torch_float64):
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))  # (hash() varies per run)
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
        close(e, t, what=f"{case.id}.{name}")
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
        close(ge, gt, rtol=1e-9, atol=1e-11, what=f"{case.id} gradient")


@pytest.mark.parametrize("name,args", [
    ("Normal", (0.5, 2.0)), ("Laplace", (-1.0, 0.5)), ("Cauchy", (0.0, 1.5)),
    ("Gumbel", (1.0, 2.0)), ("Uniform", (-1.0, 3.0)), ("Exponential", (2.0,)),
    ("Gamma", (2.0, 3.0)), ("Beta", (2.0, 0.5)), ("StudentT", (3.0,)), ("Poisson", (2.0,)),
    ("LogNormal", (0.0, 1.0)), ("HalfNormal", (2.0,)), ("Chi2", (3.0,)),
    ("Geometric", (0.3,)), ("Bernoulli", (0.3,))])
def test_python_number_parameters(name, args):
    """Numbers give a batch shape of () and default-dtype tensors, as in PyTorch."""
    d_e, d_t = getattr(ED, name)(*args), getattr(TD, name)(*args)
    assert tuple(d_e.batch_shape) == tuple(d_t.batch_shape) == ()
    close(d_e.mean, d_t.mean, what=name)
    x = 1.0 if name in ("Poisson", "Geometric", "Bernoulli") else 0.5
    close(d_e.log_prob(ember.tensor(x)), d_t.log_prob(torch.tensor(x)), rtol=1e-6,
          atol=1e-7, what=name)
    assert d_e.sample().shape == tuple(d_t.sample().shape)


@pytest.mark.parametrize("case", [c for c in CASES if c.id in (
    "Normal", "Gamma", "Dirichlet", "Categorical-logits", "MultivariateNormal-tril",
    "Bernoulli-probs", "Beta")], ids=lambda c: c.id)
def test_edge_batches(case):
    """Empty and size-1 batch dimensions, non-contiguous parameters, float32."""
    rng = np.random.default_rng(1)
    e_args, _ = tensors(torch, case.params(rng, (0,)), requires_grad=False)
    d_e = case.build(ED, *e_args)
    assert tuple(d_e.batch_shape) == (0,)
    assert tuple(d_e.log_prob(ember.tensor(case.value(rng, (0,)))).shape) == S + (0,)
    assert tuple(d_e.sample((2,)).shape) == (2, 0) + tuple(d_e.event_shape)
    for batch in [(1,), (3, 1)]:
        e_args, t_args = tensors(torch, case.params(rng, batch), requires_grad=False)
        d_e, d_t = case.build(ED, *e_args), case.build(TD, *t_args)
        value = case.value(rng, batch)
        close(d_e.log_prob(ember.tensor(value)), d_t.log_prob(torch.tensor(value)),
              what=f"{case.id}{batch}")
        assert tuple(d_e.sample((2,)).shape) == tuple(d_t.sample((2,)).shape)
    params = case.params(rng, (3, 2))
    # the same values as transposed views of transposed copies: non-contiguous inputs
    e_args = [ember.tensor(np.ascontiguousarray(np.swapaxes(p, 0, 1))).transpose(0, 1)
              if isinstance(p, np.ndarray) and p.ndim >= 2 else ember.tensor(p)
              for p in params]
    t_args = [torch.tensor(p) for p in params]
    assert any(not a.is_contiguous() for a in e_args)
    value = case.value(rng, (3, 2))
    close(case.build(ED, *e_args).log_prob(ember.tensor(value)),
          case.build(TD, *t_args).log_prob(torch.tensor(value)), what=f"{case.id} strided")
    f32 = [p.astype(np.float32) if isinstance(p, np.ndarray) and p.dtype == np.float64 else p
           for p in params]
    value32 = value.astype(np.float32) if value.dtype == np.float64 else value
    close(case.build(ED, *[ember.tensor(p) for p in f32]).log_prob(ember.tensor(value32)),
          case.build(TD, *[torch.tensor(p) for p in f32]).log_prob(torch.tensor(value32)),
          rtol=2e-5, atol=2e-5, what=f"{case.id} float32")


def test_multivariate_matrix_properties():
    """scale_tril, covariance_matrix and precision_matrix from whichever was given, and
    the low-rank ones, with gradients."""
    rng = np.random.default_rng(2)
    cov = _spd(rng, (2,))
    loc = rng.normal(size=(2, 3))
    w, d = rng.normal(size=(2, 3, 2)), _pos(rng, (2, 3))
    for kind in ("covariance_matrix", "precision_matrix", "scale_tril"):
        m = np.linalg.cholesky(cov) if kind == "scale_tril" else cov
        e_args, t_args = tensors(torch, [loc, m])
        d_e = ED.MultivariateNormal(e_args[0], **{kind: e_args[1]})
        d_t = TD.MultivariateNormal(t_args[0], **{kind: t_args[1]})
        loss_e, loss_t = 0.0, 0.0
        for name in ("scale_tril", "covariance_matrix", "precision_matrix"):
            close(getattr(d_e, name), getattr(d_t, name), rtol=1e-9, what=f"{kind}.{name}")
            loss_e = loss_e + getattr(d_e, name).sum()
            loss_t = loss_t + getattr(d_t, name).sum()
        for ge, gt in zip(ember.autograd.grad(loss_e, [e_args[1]]),
                          torch.autograd.grad(loss_t, [t_args[1]])):
            close(ge, gt, rtol=1e-8, atol=1e-10, what=f"{kind} gradient")
    e_args, t_args = tensors(torch, [loc, w, d])
    d_e, d_t = ED.LowRankMultivariateNormal(*e_args), TD.LowRankMultivariateNormal(*t_args)
    for name in ("scale_tril", "covariance_matrix", "precision_matrix", "variance"):
        close(getattr(d_e, name), getattr(d_t, name), rtol=1e-9, what=f"low rank {name}")


@pytest.mark.parametrize("name,make", [
    ("Bernoulli", lambda D, T: D.Bernoulli(T([[0.2, 0.7]]))),
    ("Binomial", lambda D, T: D.Binomial(4, T([0.2, 0.7]))),
    ("Categorical", lambda D, T: D.Categorical(T([[0.2, 0.8], [0.5, 0.5]]))),
    ("OneHotCategorical", lambda D, T: D.OneHotCategorical(T([[0.2, 0.8], [0.5, 0.5]]))),
    ("Independent", lambda D, T: D.Independent(D.Bernoulli(T([0.2, 0.7])), 0))])
def test_enumerate_support(name, make):
    d_e, d_t = make(ED, ember.tensor), make(TD, torch.tensor)
    for expand in (True, False):
        e, t = d_e.enumerate_support(expand), d_t.enumerate_support(expand)
        assert tuple(e.shape) == tuple(t.shape) and e.dtype.name == str(t.dtype)[6:]
        np.testing.assert_array_equal(e.numpy(), t.numpy())
