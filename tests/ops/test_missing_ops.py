"""Order statistics, scans, set/counting ops, extra math and ember.special against
PyTorch and finite differences (the op-table templates), plus their edge cases."""
import math

import numpy as np
import pytest

import ember
from .optable import OpCase, S, generate, nc, needs_torch, rand, torch

T = torch
F = ("float32", "float64")
NUM = F + ("int64", "int32")


def _t(fn):
    return None if T is None else fn()


def r(rng, dtype, *shape, low=-2.0, high=2.0):
    return rand(rng, shape, dtype, low, high)


def ties(rng, dtype, *shape):
    """Small integer values (many ties) in ``dtype``."""
    return rng.integers(0, 4, size=shape).astype(ember.dtypes.as_dtype(dtype).np)


CASES = [
    OpCase("median_all", ember.median, _t(lambda: T.median),
           lambda rng, d: [S(r(rng, d, 5)), S(r(rng, d, 2, 3)), S(nc(r(rng, d, 3, 4))),
                           S(r(rng, d))], dtypes=NUM),
    OpCase("median_dim", ember.median, _t(lambda: T.median),
           lambda rng, d: [S(r(rng, d, 4, 5), 1), S(r(rng, d, 3, 4), 0, keepdim=True),
                           S(nc(r(rng, d, 3, 6)), -1), S(r(rng, d, 0, 3), 1)], dtypes=NUM),
    OpCase("nanmedian_dim", ember.nanmedian, _t(lambda: T.nanmedian),
           lambda rng, d: [S(np.where(rng.random((4, 5)) < 0.3, np.nan, r(rng, d, 4, 5)
                                      ).astype(r(rng, d).dtype), 1),
                           S(r(rng, d, 3, 4), 0)], grad=False),
    OpCase("mode", ember.mode, _t(lambda: T.mode),
           lambda rng, d: [S(ties(rng, d, 3, 7)), S(ties(rng, d, 4, 5), 0, True),
                           S(nc(ties(rng, d, 3, 6)), 1)], dtypes=NUM, grad=False),
    OpCase("mode_grad", ember.mode, _t(lambda: T.mode),
           lambda rng, d: [S(np.repeat(r(rng, d, 3, 3), 2, axis=1)[:, :5])],
           dtypes=("float32",)),  # (ties: finite differences do not apply)
    OpCase("nansum", ember.nansum, _t(lambda: T.nansum),
           lambda rng, d: [S(r(rng, d, 3, 4), 1), S(r(rng, d, 2, 3), keepdim=True),
                           S(nc(r(rng, d, 3, 4)), (0, 1))], dtypes=NUM),
    OpCase("nanmean", ember.nanmean, _t(lambda: T.nanmean),
           lambda rng, d: [S(r(rng, d, 3, 4), 1), S(nc(r(rng, d, 3, 4))),
                           S(r(rng, d, 2, 3), 0, keepdim=True)]),
    OpCase("cummax", ember.cummax, _t(lambda: T.cummax),
           lambda rng, d: [S(r(rng, d, 3, 5), 1), S(nc(r(rng, d, 4, 3)), 0), S(r(rng, d), 0)],
           dtypes=NUM, gradgrad=False),
    OpCase("cummin", ember.cummin, _t(lambda: T.cummin),
           lambda rng, d: [S(r(rng, d, 3, 5), -1)], dtypes=NUM, gradgrad=False),
    OpCase("cummax_ties", ember.cummax, _t(lambda: T.cummax),
           lambda rng, d: [S(ties(rng, d, 2, 6), 1), S(ties(rng, d, 6, 2), 0)], dtypes=NUM,
           grad=False),
    OpCase("logcumsumexp", ember.logcumsumexp, _t(lambda: T.logcumsumexp),
           lambda rng, d: [S(r(rng, d, 3, 5), 1), S(nc(r(rng, d, 4, 3)), 0),
                           S(r(rng, d, 6, low=-30, high=30), 0), S(r(rng, d), 0)]),
    OpCase("diff", ember.diff, _t(lambda: T.diff),
           lambda rng, d: [S(r(rng, d, 6)), S(r(rng, d, 3, 5), 2, 0),
                           S(nc(r(rng, d, 3, 4)), 1, -1, r(rng, d, 3, 2), r(rng, d, 3, 1))],
           dtypes=NUM),
    OpCase("cross", ember.linalg.cross, _t(lambda: T.linalg.cross),
           lambda rng, d: [S(r(rng, d, 4, 3), r(rng, d, 4, 3)), S(r(rng, d, 1, 3), r(rng, d, 2, 3)),
                           S(nc(r(rng, d, 3, 3)), r(rng, d, 3, 3), dim=0)], dtypes=NUM),
    OpCase("kron", ember.kron, _t(lambda: T.kron),
           lambda rng, d: [S(r(rng, d, 2, 3), r(rng, d, 3, 2)), S(r(rng, d, 2), r(rng, d, 2, 2)),
                           S(nc(r(rng, d, 2, 2)), r(rng, d, 0, 2))], dtypes=NUM),
    OpCase("cdist", ember.cdist, _t(lambda: T.cdist),
           lambda rng, d: [S(r(rng, d, 4, 3), r(rng, d, 5, 3)),
                           S(r(rng, d, 2, 3, 2), r(rng, d, 4, 2), 1.0),
                           S(nc(r(rng, d, 3, 4)), r(rng, d, 2, 4), math.inf),
                           S(r(rng, d, 3, 2), r(rng, d, 2, 2), 3.0)], dtypes=F),
    OpCase("vander", ember.vander, _t(lambda: T.vander),
           lambda rng, d: [S(r(rng, d, 4)), S(r(rng, d, 3), N=5, increasing=True)],
           dtypes=NUM, grad=False),
    OpCase("block_diag", ember.block_diag, _t(lambda: T.block_diag),
           lambda rng, d: [S(r(rng, d, 2, 3), r(rng, d, 3), r(rng, d))], dtypes=NUM),
    OpCase("combinations", ember.combinations, _t(lambda: T.combinations),
           lambda rng, d: [S(r(rng, d, 4)), S(r(rng, d, 3), 3, True)], dtypes=NUM),
    OpCase("cartesian_prod", ember.cartesian_prod, _t(lambda: T.cartesian_prod),
           lambda rng, d: [S(r(rng, d, 3), r(rng, d, 2))], dtypes=NUM),
    OpCase("ldexp", ember.ldexp, _t(lambda: T.ldexp),
           lambda rng, d: [S(r(rng, d, 3, 4), rng.integers(0, 4, (3, 4)))]),
    OpCase("lgamma", ember.lgamma, _t(lambda: T.lgamma),
           lambda rng, d: [S(r(rng, d, 12, low=0.1, high=12)),
                           S(r(rng, d, 3, 4, low=-4.9, high=0.4) + 0.013)]),
    OpCase("digamma", ember.digamma, _t(lambda: T.digamma),
           lambda rng, d: [S(r(rng, d, 12, low=0.1, high=30)),
                           S(r(rng, d, 6, low=-4.9, high=0.4) + 0.013)]),
    OpCase("polygamma2", lambda x: ember.polygamma(2, x), _t(lambda: lambda x: T.polygamma(2, x)),
           lambda rng, d: [S(r(rng, d, 10, low=0.2, high=20))], gradgrad=False),
    OpCase("erfinv", ember.erfinv, _t(lambda: T.erfinv),
           lambda rng, d: [S(r(rng, d, 3, 4, low=-0.99, high=0.99))]),
    OpCase("ndtri", ember.special.ndtri, _t(lambda: T.special.ndtri),
           lambda rng, d: [S(r(rng, d, 10, low=0.01, high=0.99))], dtypes=F),
    OpCase("i0", ember.i0, _t(lambda: T.i0),
           lambda rng, d: [S(r(rng, d, 3, 4, low=-25, high=25))]),
    OpCase("i1", ember.special.i1, _t(lambda: T.special.i1),
           lambda rng, d: [S(r(rng, d, 10, low=-25, high=25))]),
    OpCase("xlog1py", ember.special.xlog1py, _t(lambda: T.special.xlog1py),
           lambda rng, d: [S(r(rng, d, 3, 4), r(rng, d, 4, low=-0.9, high=3))]),
    OpCase("entr", ember.special.entr, _t(lambda: T.special.entr),
           lambda rng, d: [S(r(rng, d, 3, 4, low=0.1, high=3))]),
    OpCase("ndtr", ember.special.ndtr, _t(lambda: T.special.ndtr),
           lambda rng, d: [S(r(rng, d, 3, 4, low=-4, high=4))]),
]

generate(CASES, globals())


# Edge cases -------------------------------------------------------------------------------
def _tt(*values, dtype=None):
    return torch.tensor(values, dtype=dtype or torch.float64)


def _et(*values, dtype=None):
    return ember.tensor(values, dtype=dtype or ember.float64)


def _same(e, t):
    if isinstance(t, tuple):
        for a, b in zip(e, t):
            _same(a, b)
        return
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-10, atol=1e-12, equal_nan=True)
    assert e.dtype.name == str(t.dtype).removeprefix("torch.")


NAN = math.nan


@needs_torch
@pytest.mark.parametrize("fn", ["median", "nanmedian", "cummax", "cummin", "mode"])
def test_nan_and_tie_indices_match_torch(fn):
    values = (1.0, NAN, 3.0, 3.0, 1.0, NAN, 0.5, 3.0)
    if fn != "mode":  # (PyTorch's mode orders NaN arbitrarily)
        _same(getattr(ember, fn)(_et(*values), 0), getattr(torch, fn)(_tt(*values), 0))
    ties_only = (2.0, 1.0, 2.0, 1.0, 3.0)
    _same(getattr(ember, fn)(_et(*ties_only), 0), getattr(torch, fn)(_tt(*ties_only), 0))


@needs_torch
def test_results_are_named_tuples_like_torch():
    x = _et(3.0, 1.0, 2.0)
    for fn in ("median", "nanmedian", "mode", "cummax", "cummin"):
        out = getattr(ember, fn)(x, 0)
        assert type(out).__name__ == fn and out._fields == ("values", "indices")
    assert ember.frexp(x)._fields == ("mantissa", "exponent")
    assert ember.linalg.slogdet(ember.eye(2))._fields == ("sign", "logabsdet")


@needs_torch
def test_median_without_dim_and_nan_reductions():
    _same(ember.median(_et(1.0, NAN, 2.0)), torch.median(_tt(1.0, NAN, 2.0)))
    _same(ember.nanmedian(_et(1.0, NAN, 2.0, 5.0)), torch.nanmedian(_tt(1.0, NAN, 2.0, 5.0)))
    _same(ember.median(ember.zeros(0, dtype=ember.float64)), torch.median(torch.zeros(0).double()))
    _same(ember.nansum(_et(1.0, NAN)), torch.nansum(_tt(1.0, NAN)))
    _same(ember.nanmean(_et(NAN, NAN)), torch.nanmean(_tt(NAN, NAN)))
    _same(ember.nansum(ember.tensor([1, 2])), torch.nansum(torch.tensor([1, 2])))
    _same(ember.nanmean(ember.tensor([1.0, 2.0]), dtype=ember.float64),
          torch.nanmean(torch.tensor([1.0, 2.0]), dtype=torch.float64))
    with pytest.raises(ember.EmberError, match="nanmean"):
        ember.nanmean(ember.tensor([1, 2]))
    with pytest.raises(IndexError, match="median"):
        ember.median(ember.zeros(0, 3), 0)
    # the gradient of the median of all elements is split among the tied elements
    x = ember.tensor([1.0, 2.0, 2.0, 3.0, 2.0], requires_grad=True)
    ember.median(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), [0, 1 / 3, 1 / 3, 0, 1 / 3])


@needs_torch
def test_logcumsumexp_is_stable_and_its_gradient_matches_torch():
    values = (-1000.0, 0.0, 1000.0, -math.inf, 5.0)
    e = _et(*values).requires_grad_()
    t = _tt(*values).requires_grad_()
    _same(ember.logcumsumexp(e, 0).detach(), torch.logcumsumexp(t, 0).detach())
    ember.logcumsumexp(e, 0).sum().backward()
    torch.logcumsumexp(t, 0).sum().backward()
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-300)


@needs_torch
def test_diff_bool_prepend_number_and_large_n():
    _same(ember.diff(ember.tensor([True, False, False])),
          torch.diff(torch.tensor([True, False, False])))
    _same(ember.diff(_et(1.0, 2.0, 4.0), n=5), torch.diff(_tt(1.0, 2.0, 4.0), n=5))
    _same(ember.diff(ember.tensor([1, 4, 9], dtype=ember.int32), prepend=ember.tensor([0],
          dtype=ember.int32)), torch.diff(torch.tensor([1, 4, 9], dtype=torch.int32),
                                          prepend=torch.tensor([0], dtype=torch.int32)))


@needs_torch
def test_counting_and_set_ops_match_torch():
    idx = np.array([0, 1, 1, 3, 7, 1])
    w = np.linspace(0.5, 3.0, 6)
    _same(ember.bincount(ember.tensor(idx)), torch.bincount(torch.tensor(idx)))
    _same(ember.bincount(ember.tensor(idx), ember.tensor(w), minlength=10),
          torch.bincount(torch.tensor(idx), torch.tensor(w), minlength=10))
    _same(ember.bincount(ember.tensor(idx), ember.tensor(idx)),
          torch.bincount(torch.tensor(idx), torch.tensor(idx)))
    _same(ember.bincount(ember.zeros(0, dtype=ember.int64)),
          torch.bincount(torch.zeros(0, dtype=torch.int64)))
    with pytest.raises(ember.EmberError, match="non-negative"):
        ember.bincount(ember.tensor([-1, 2]))
    x = np.array([0.0, 1.0, 2.0, 3.0, 2.5, -1.0, 0.999999])
    for kw in ({"bins": 3, "min": 0, "max": 3}, {"bins": 4}, {"bins": 5, "min": 1, "max": 2}):
        _same(ember.histc(ember.tensor(x), **kw), torch.histc(torch.tensor(x), **kw))
    _same(ember.histc(ember.tensor([1.0, 1.0]), bins=3), torch.histc(torch.tensor([1.0, 1.0]), 3))
    with pytest.raises(ember.EmberError, match="not finite"):
        ember.histc(ember.tensor([1.0, NAN]))
    a, b = np.array([[1, 2], [3, 4]]), np.array([2, 4, 5])
    _same(ember.isin(ember.tensor(a), ember.tensor(b)), torch.isin(torch.tensor(a), torch.tensor(b)))
    _same(ember.isin(ember.tensor(a), 3, invert=True), torch.isin(torch.tensor(a), 3, invert=True))
    for args in ((3, 4, 1), (4, 3, -1), (0, 3), (3, 3, 5)):
        _same(ember.tril_indices(*args), torch.tril_indices(*args))
        _same(ember.triu_indices(*args), torch.triu_indices(*args))


@needs_torch
def test_integer_ops_match_torch():
    a = np.array([1, -8, 3, 127, -1, 5], dtype=np.int64)
    s = np.array([0, 2, 63, 64, 70, -1], dtype=np.int64)
    ea, es, ta, ts = ember.tensor(a), ember.tensor(s), torch.tensor(a), torch.tensor(s)
    _same(ea << es, ta << ts)
    _same(ea >> es, ta >> ts)
    _same(ember.bitwise_left_shift(ea, 3), torch.bitwise_left_shift(ta, 3))
    _same(3 << ember.tensor([1, 2]), 3 << torch.tensor([1, 2]))
    i8 = np.array([1, 2, -128], dtype=np.int8)
    _same(ember.tensor(i8) << ember.tensor(np.int8(7)), torch.tensor(i8) << torch.tensor(np.int8(7)))
    _same(ember.tensor(i8) >> 9, torch.tensor(i8) >> 9)
    with pytest.raises(TypeError):
        ember.tensor([1.5]) << 2
    b = np.array([8, 0, 6, -4, 0, 7])
    _same(ember.gcd(ea, ember.tensor(b)), torch.gcd(ta, torch.tensor(b)))
    _same(ember.lcm(ea, ember.tensor(b)), torch.lcm(ta, torch.tensor(b)))
    x = ember.tensor([1, 2])
    x <<= 2
    assert x.tolist() == [4, 8]


@needs_torch
def test_float_representation_ops_match_torch():
    x = np.array([8.0, 0.3, 0.0, -5.5, math.inf, NAN])
    _same(ember.frexp(ember.tensor(x)), torch.frexp(torch.tensor(x)))
    _same(ember.frexp(ember.tensor(x, dtype=ember.float32)),
          torch.frexp(torch.tensor(x, dtype=torch.float32)))
    _same(ember.nextafter(ember.tensor(x), ember.tensor(1.0)),
          torch.nextafter(torch.tensor(x), torch.tensor(1.0, dtype=torch.float64)))
    _same(ember.ldexp(ember.tensor([1, 2]), ember.tensor([3, -1])),
          torch.ldexp(torch.tensor([1, 2]), torch.tensor([3, -1])))
    with pytest.raises(TypeError, match="frexp"):
        ember.frexp(ember.tensor([1]))


@needs_torch
def test_cross_default_dim_and_errors():
    a = np.random.default_rng(0).standard_normal((3, 2, 3))
    with pytest.warns(UserWarning):
        expected = torch.cross(torch.tensor(a), torch.tensor(a[::-1].copy()))
    _same(ember.cross(ember.tensor(a), ember.tensor(a[::-1].copy())), expected)
    with pytest.raises(ember.ShapeError, match="length 3"):
        ember.linalg.cross(ember.ones(4), ember.ones(4))
    with pytest.raises(TypeError, match="dtype"):
        ember.linalg.cross(ember.ones(3), ember.ones(3, dtype=ember.float64))
    with pytest.raises(ember.ShapeError, match="same number of columns"):
        ember.cdist(ember.ones(2, 3), ember.ones(2, 4))
    _same(ember.cdist(ember.ones(2, 3, 0), ember.ones(2, 4, 0)).double(),
          torch.cdist(torch.ones(2, 3, 0), torch.ones(2, 4, 0)).double())


@needs_torch
def test_special_edge_values_match_torch():
    x = (0.0, -0.0, -1.0, -2.5, -0.5, math.inf, -math.inf, NAN, 1e10, 1e-300, 171.5)
    for name in ("lgamma", "digamma"):
        _same(getattr(ember, name)(_et(*x)), getattr(torch, name)(_tt(*x)))
    for n in (1, 2, 3):
        got = ember.polygamma(n, _et(0.0, -0.5, -1.5, 0.25, 3.0, 50.0, math.inf, NAN))
        want = torch.polygamma(n, _tt(0.0, -0.5, -1.5, 0.25, 3.0, 50.0, math.inf, NAN))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-8, equal_nan=True)
    y = (-1.0, 1.0, 1.5, 0.0, 1 - 1e-12, -1e-10, NAN)
    np.testing.assert_allclose(ember.erfinv(_et(*y)).numpy(), torch.erfinv(_tt(*y)).numpy(),
                               rtol=1e-12, equal_nan=True)
    p = (0.0, 1.0, -0.1, 1e-300, 1e-10, 0.5, 1 - 1e-12, NAN)
    np.testing.assert_allclose(ember.special.ndtri(_et(*p)).numpy(),
                               torch.special.ndtri(_tt(*p)).numpy(), rtol=1e-9, equal_nan=True)
    z = (0.0, 19.99, 20.01, 100.0, 700.0, -700.0, 800.0)
    for name in ("i0", "i1"):
        np.testing.assert_allclose(getattr(ember.special, name)(_et(*z)).numpy(),
                                   getattr(torch.special, name)(_tt(*z)).numpy(), rtol=1e-13)
    _same(ember.special.zeta(_et(2.0, 3.0, 1.5, 1.0, 0.5), _et(1.0, 0.5, -2.5, 2.0, 1.0)),
          torch.special.zeta(_tt(2.0, 3.0, 1.5, 1.0, 0.5), _tt(1.0, 0.5, -2.5, 2.0, 1.0)))
    _same(ember.special.multigammaln(_et(2.5, 3.0), 3), torch.special.multigammaln(_tt(2.5, 3.0), 3))
    _same(ember.special.entr(_et(0.0, -1.0, NAN)), torch.special.entr(_tt(0.0, -1.0, NAN)))
    _same(ember.special.xlog1py(_et(0.0, 0.0), _et(-1.0, NAN)),
          torch.special.xlog1py(_tt(0.0, 0.0), _tt(-1.0, NAN)))


@needs_torch
def test_special_namespace_reexports_match_torch():
    x = np.array([[0.3, -1.2, 2.0], [0.1, 0.7, -0.4]])
    e, t = ember.tensor(x), torch.tensor(x)
    for name in ("erf", "erfc", "expit", "expm1", "exp2", "log1p", "sinc", "round", "gammaln",
                 "psi"):
        _same(getattr(ember.special, name)(e), getattr(torch.special, name)(t))
    _same(ember.special.logit(ember.tensor([0.2, 0.9])), torch.special.logit(torch.tensor([0.2, 0.9])))
    _same(ember.special.xlogy(e, 2.0), torch.special.xlogy(t, 2.0))
    _same(ember.special.softmax(e, 1), torch.special.softmax(t, 1))
    _same(ember.special.log_softmax(e, 0), torch.special.log_softmax(t, 0))
    _same(ember.special.logsumexp(e, 1), torch.special.logsumexp(t, 1))


@needs_torch
@pytest.mark.parametrize("kwargs", [{}, {"p": 2, "reduction": "sum"}, {"margin": 0.5, "reduction": "none"}])
def test_multi_margin_losses_match_torch(kwargs):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((4, 5)), np.array([0, 3, 4, 1])
    w = rng.uniform(0.5, 2.0, 5)
    labels = np.array([[3, 0, -1, 1, 2], [1, -1, 0, 0, 0], [-1, 2, 2, 2, 2], [0, 1, 2, 3, 4]])
    reduction = kwargs.get("reduction", "mean")
    for fn, target, extra in (("multi_margin_loss", y, dict(kwargs, weight=w)),
                              ("multilabel_margin_loss", labels, {"reduction": reduction})):
        ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ekw = {k: ember.tensor(v) if isinstance(v, np.ndarray) else v for k, v in extra.items()}
        tkw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in extra.items()}
        e = getattr(ember.nn.functional, fn)(ex, ember.tensor(target), **ekw)
        t = getattr(torch.nn.functional, fn)(tx, torch.tensor(target), **tkw)
        e.sum().backward()
        t.sum().backward()
        _same(e.detach(), t.detach())
        np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    module = ember.nn.MultiMarginLoss(p=2)(ember.tensor(x[0]), ember.tensor(y[0]))
    _same(module, torch.nn.MultiMarginLoss(p=2)(torch.tensor(x[0]), torch.tensor(y[0])))
    _same(ember.nn.MultiLabelMarginLoss()(ember.tensor(x), ember.tensor(labels)),
          torch.nn.MultiLabelMarginLoss()(torch.tensor(x), torch.tensor(labels)))
