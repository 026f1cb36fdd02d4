"""quantile, cov, trapezoid, products, renorm, histogram and ember.linalg's
solve_triangular/matrix_exp/lu against PyTorch and finite differences (the op-table
templates), plus the edge cases where ember and PyTorch used to disagree."""
import math

import numpy as np
import pytest

import ember
from .optable import OpCase, S, generate, nc, needs_torch, torch
from .test_missing_ops import F, NUM, T, _t, r


def q(d, *values):
    return np.array(values, dtype=d)


def square(rng, dtype, *batch, n=3):
    a = rng.uniform(-1, 1, batch + (n, n)) + 3 * np.eye(n)
    return a.astype(ember.dtypes.as_dtype(dtype).np)


def with_nan(rng, d, *shape):
    x = r(rng, d, *shape)
    x[rng.random(shape) < 0.3] = np.nan
    return x


def _lu_parts(lib, factor):
    if factor:
        return lambda a: lib.linalg.lu_factor(a)
    return lambda a: lib.linalg.lu(a)[1:]  # L and U (P is constant)


CASES = [
    OpCase("quantile", ember.quantile, _t(lambda: T.quantile),
           lambda rng, d: [S(r(rng, d, 7), 0.3), S(r(rng, d, 4, 5), q=q(d, 0.1, 0.5, 1.0), dim=1),
                           S(nc(r(rng, d, 4, 5)), 0.75, 0, True, interpolation="lower"),
                           S(r(rng, d, 3, 6), q=q(d, 0.2, 0.9), dim=-1, interpolation="higher"),
                           S(r(rng, d, 2, 3, 4), 0.4, keepdim=True, interpolation="midpoint"),
                           S(r(rng, d, 5, 4), q=q(d, 0.25), dim=0, interpolation="nearest"),
                           S(r(rng, d), 0.5, 0, True)], dtypes=F),
    OpCase("nanquantile", ember.nanquantile, _t(lambda: T.nanquantile),
           lambda rng, d: [S(with_nan(rng, d, 4, 6), q=q(d, 0.1, 0.5), dim=1),
                           S(with_nan(rng, d, 10), 0.3, interpolation="nearest"),
                           S(q(d, np.nan, np.nan, 1.0).reshape(3, 1), 0.5, 1)], dtypes=F,
           grad=False),
    OpCase("quantile_nan", ember.quantile, _t(lambda: T.quantile),
           lambda rng, d: [S(with_nan(rng, d, 4, 6), q=q(d, 0.1, 0.5), dim=1)], dtypes=F,
           grad=False),
    OpCase("cov", ember.cov, _t(lambda: T.cov),
           lambda rng, d: [S(r(rng, d, 3, 5)), S(r(rng, d, 6), correction=0),
                           S(nc(r(rng, d, 2, 4)), fweights=np.array([1, 2, 0, 3])),
                           S(r(rng, d, 2, 4), correction=2, fweights=np.array([1, 2, 1, 3]),
                             aweights=r(rng, d, 4, low=0.1, high=1.0))], dtypes=F),
    OpCase("corrcoef", ember.corrcoef, _t(lambda: T.corrcoef),
           lambda rng, d: [S(r(rng, d, 3, 5)), S(nc(r(rng, d, 2, 4))), S(r(rng, d, 6))],
           dtypes=F),
    OpCase("trapezoid", ember.trapezoid, _t(lambda: T.trapezoid),
           lambda rng, d: [S(r(rng, d, 3, 5)), S(r(rng, d, 4, 3), dim=0, dx=0.5),
                           S(nc(r(rng, d, 3, 4)), np.sort(r(rng, d, 4))),
                           S(r(rng, d, 2, 4), r(rng, d, 2, 4), dim=1), S(r(rng, d, 0))],
           dtypes=NUM),
    OpCase("trapz", ember.trapz, _t(lambda: T.trapz),
           lambda rng, d: [S(r(rng, d, 3, 5), dx=2.0), S(r(rng, d, 4, 3), r(rng, d, 3), dim=1)],
           dtypes=F),
    OpCase("cumulative_trapezoid", ember.cumulative_trapezoid,
           _t(lambda: T.cumulative_trapezoid),
           lambda rng, d: [S(r(rng, d, 3, 5)), S(r(rng, d, 4, 3), dim=0, dx=0.5),
                           S(nc(r(rng, d, 3, 4)), np.sort(r(rng, d, 4)))], dtypes=NUM),
    OpCase("dist", ember.dist, _t(lambda: T.dist),
           lambda rng, d: [S(r(rng, d, 3, 4), r(rng, d, 4)), S(r(rng, d, 5), r(rng, d, 5), 1),
                           S(nc(r(rng, d, 2, 3)), r(rng, d, 2, 3), 3.5),
                           S(r(rng, d, 4), r(rng, d, 4), math.inf)], dtypes=F),
    OpCase("inner", ember.inner, _t(lambda: T.inner),
           lambda rng, d: [S(r(rng, d, 4), r(rng, d, 4)), S(r(rng, d, 2, 3), r(rng, d, 4, 3)),
                           S(nc(r(rng, d, 3, 2)), r(rng, d, 2)), S(r(rng, d), r(rng, d, 2, 2))],
           dtypes=NUM),
    OpCase("addr", ember.addr, _t(lambda: T.addr),
           lambda rng, d: [S(r(rng, d, 3, 4), r(rng, d, 3), r(rng, d, 4)),
                           S(r(rng, d, 4), r(rng, d, 2), nc(r(rng, d, 4)), beta=2, alpha=3),
                           S(r(rng, d, 2, 2), r(rng, d, 2), r(rng, d, 2), beta=0)],
           dtypes=NUM),
    OpCase("addbmm", ember.addbmm, _t(lambda: T.addbmm),
           lambda rng, d: [S(r(rng, d, 2, 3), r(rng, d, 4, 2, 5), r(rng, d, 4, 5, 3)),
                           S(r(rng, d, 3), nc(r(rng, d, 2, 2, 2)), r(rng, d, 2, 2, 3), beta=2,
                             alpha=3)], dtypes=NUM),
    OpCase("chain_matmul", ember.chain_matmul, _t(lambda: T.chain_matmul),
           lambda rng, d: [S(r(rng, d, 2, 3), r(rng, d, 3, 4), nc(r(rng, d, 4, 2))),
                           S(r(rng, d, 2, 2))], dtypes=F),
    OpCase("renorm", ember.renorm, _t(lambda: T.renorm),
           lambda rng, d: [S(r(rng, d, 3, 4), 2, 0, 1.5), S(nc(r(rng, d, 3, 4)), 1, 1, 2.0),
                           S(r(rng, d, 2, 3, 2), 3, -1, 1.0)], dtypes=F),
    OpCase("histogram", ember.histogram, _t(lambda: T.histogram),
           lambda rng, d: [S(r(rng, d, 50), 7), S(r(rng, d, 3, 10), 4, range=(-1.0, 1.5)),
                           S(r(rng, d, 40), 5, weight=r(rng, d, 40, low=0, high=1),
                             density=True),
                           S(r(rng, d, 30), q(d, -2.0, -0.5, 0.0, 1.0, 2.0)),
                           S(r(rng, d, 30), bins=q(d, -1.0, 0.5, 1.0), density=True),
                           S(q(d, 2.0, 2.0, 2.0), 3), S(r(rng, d, 0), 2)], dtypes=F,
           grad=False),
    OpCase("solve_triangular", ember.linalg.solve_triangular,
           _t(lambda: T.linalg.solve_triangular),
           lambda rng, d: [S(square(rng, d), r(rng, d, 3, 2), upper=True),
                           S(nc(square(rng, d, 2)), r(rng, d, 3, 4), upper=False),
                           S(square(rng, d), r(rng, d, 2, 3, 3), upper=True, left=False),
                           S(square(rng, d, 2), r(rng, d, 2, 3, 1), upper=False,
                             unitriangular=True)], dtypes=F),
    OpCase("matrix_exp", ember.linalg.matrix_exp, _t(lambda: T.linalg.matrix_exp),
           lambda rng, d: [S(r(rng, d, 3, 3)), S(nc(r(rng, d, 2, 4, 4) * 3)), S(r(rng, d, 1, 1)),
                           S(r(rng, d, 0, 2, 2))], dtypes=F),
    OpCase("lu", _lu_parts(ember, False), _t(lambda: _lu_parts(T, False)),
           lambda rng, d: [S(r(rng, d, 4, 4)), S(nc(r(rng, d, 2, 3, 3))), S(r(rng, d, 3, 5)),
                           S(r(rng, d, 5, 3))], dtypes=F),
    OpCase("lu_factor", _lu_parts(ember, True), _t(lambda: _lu_parts(T, True)),
           lambda rng, d: [S(r(rng, d, 4, 4)), S(r(rng, d, 2, 3, 5)), S(r(rng, d, 5, 3))],
           dtypes=F),
]

generate(CASES, globals())


# Edge cases -------------------------------------------------------------------------------
def _same(e, t, rtol=None):
    if isinstance(t, (tuple, list)):
        assert len(e) == len(t)
        for a, b in zip(e, t):
            _same(a, b, rtol)
        return
    if rtol is None:
        rtol = 1e-6 if t.dtype == torch.float32 else 1e-10
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=1e-12,
                               equal_nan=True)
    assert e.dtype.name == str(t.dtype).removeprefix("torch.")
    assert tuple(e.shape) == tuple(t.shape)


@needs_torch
def test_lu_permutation_and_pivots_match_torch():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 4, 4))
    _same(ember.linalg.lu(ember.tensor(a)), torch.linalg.lu(torch.tensor(a)))
    _same(ember.linalg.lu_factor(ember.tensor(a)), torch.linalg.lu_factor(torch.tensor(a)))
    assert ember.linalg.lu_factor(ember.tensor(a))._fields == ("LU", "pivots")
    assert ember.linalg.lu(ember.tensor(a))._fields == ("P", "L", "U")
    # ties: the first largest pivot, as LAPACK
    b = [[1.0, 2.0, 3.0], [-1.0, 5.0, 0.0], [1.0, 1.0, 1.0]]
    _same(ember.linalg.lu_factor(ember.tensor(b)), torch.linalg.lu_factor(torch.tensor(b)))
    # a singular matrix: lu factors it, lu_factor refuses (U has a zero pivot)
    s = [[1.0, 2.0], [2.0, 4.0]]
    _same(ember.linalg.lu(ember.tensor(s)), torch.linalg.lu(torch.tensor(s)))
    with pytest.raises(RuntimeError, match="zero"):
        torch.linalg.lu_factor(torch.tensor(s))
    with pytest.raises(ember.linalg.LinAlgError, match="zero"):
        ember.linalg.lu_factor(ember.tensor(s))


@needs_torch
def test_methods_and_top_level_names_follow_torch():
    x = ember.tensor([[1.0, 2.0, 4.0], [3.0, 1.0, 0.5]])
    t = torch.tensor([[1.0, 2.0, 4.0], [3.0, 1.0, 0.5]])
    _same(x.quantile(0.5, 1), t.quantile(0.5, 1))
    _same(x.nanquantile(0.5), t.nanquantile(0.5))
    _same(x.cov(), t.cov())
    i, ti = ember.tensor([[1, 4, 2], [0, 3, 3]]), torch.tensor([[1, 4, 2], [0, 3, 3]])
    _same(ember.cov(i, fweights=ember.tensor([1, 2, 1])),
          torch.cov(ti, fweights=torch.tensor([1, 2, 1])))
    _same(ember.cov(i), torch.cov(ti))
    _same(ember.corrcoef(i), torch.corrcoef(ti))
    _same(x.corrcoef(), t.corrcoef())
    _same(x.renorm(2, 0, 1.0), t.renorm(2, 0, 1.0), rtol=1e-6)
    _same(ember.matrix_exp(x[:, :2]), torch.matrix_exp(t[:, :2]), rtol=1e-6)
    _same(x[:, :2].matrix_exp(), t[:, :2].matrix_exp(), rtol=1e-6)
    _same(x.histogram(3), t.histogram(3))
    y = x.clone()
    y.renorm_(1, 0, 2.0)
    _same(y, t.clone().renorm_(1, 0, 2.0), rtol=1e-6)
    for name in ("trapezoid", "trapz", "cumulative_trapezoid", "chain_matmul"):
        assert hasattr(ember, name) and hasattr(ember.Tensor, name) == hasattr(torch.Tensor, name)


@needs_torch
def test_quantile_and_histogram_errors():
    with pytest.raises(RuntimeError, match="float or double"):
        ember.quantile(ember.tensor([1, 2]), 0.5)
    with pytest.raises(RuntimeError, match="non-empty"):
        ember.quantile(ember.zeros(0), 0.5)
    with pytest.raises(ValueError, match="range"):
        ember.quantile(ember.ones(3), 1.5)
    with pytest.raises(ValueError, match="interpolation"):
        ember.quantile(ember.ones(3), 0.5, interpolation="cubic")
    with pytest.raises(TypeError, match="histogram"):
        ember.histogram(ember.tensor([1, 2]), 3)
    with pytest.raises(RuntimeError, match="inner"):
        ember.inner(ember.ones(2), ember.ones(3))


@needs_torch
def test_norm_nuc_routes_to_the_matrix_nuclear_norm():
    a = np.random.default_rng(1).standard_normal((2, 3, 4))
    _same(ember.norm(ember.tensor(a[0]), p="nuc"), torch.norm(torch.tensor(a[0]), p="nuc"))
    _same(ember.tensor(a).norm(p="nuc", dim=(0, 2), keepdim=True),
          torch.tensor(a).norm(p="nuc", dim=(0, 2), keepdim=True))
    with pytest.raises(RuntimeError):
        ember.norm(ember.tensor(a), p="nuc")


@needs_torch
@pytest.mark.parametrize("op,error", [
    (lambda m, x: m.chunk(x, 2), RuntimeError), (lambda m, x: m.unbind(x), IndexError),
    (lambda m, x: m.narrow(x, 0, 0, 1), RuntimeError),
    (lambda m, x: m.tensor_split(x, 2), RuntimeError),
    (lambda m, x: m.squeeze(x, (0, 1)), IndexError),
    (lambda m, x: m.movedim(x, 1, 0), IndexError)])
def test_0d_shape_ops_raise_what_torch_raises(op, error):
    with pytest.raises(error):
        op(torch, torch.tensor(2.0))
    with pytest.raises(error) as info:
        op(ember, ember.tensor(2.0))
    assert isinstance(info.value, ember.EmberError)


@needs_torch
def test_0d_squeeze_movedim_and_repeated_ellipsis_match_torch():
    for m in (torch, ember):
        x = m.tensor(2.0)
        assert m.squeeze(x, (0,)).shape == () and m.squeeze(x, -1).shape == ()
        assert m.movedim(x, 0, 0).shape == () and m.movedim(x, -1, 0).shape == ()
        assert x[..., ...].shape == () and x[..., None, ...].shape == (1,)
    e, t = ember.arange(24).reshape(2, 3, 4), torch.arange(24).reshape(2, 3, 4)
    for index in [(Ellipsis, Ellipsis), (Ellipsis, 1, Ellipsis), (0, Ellipsis, Ellipsis),
                  (Ellipsis, None, Ellipsis), (Ellipsis, [0, 2], Ellipsis)]:
        np.testing.assert_array_equal(e[index].numpy(), t[index].numpy())
    for index in [(Ellipsis, Ellipsis, 0), (0, Ellipsis, Ellipsis, 1),
                  (None, Ellipsis, Ellipsis, 0)]:
        for x in (e, t):
            with pytest.raises(IndexError):
                x[index]
    e2, t2 = e.clone(), t.clone()
    e2[..., 0, ...] = -1
    t2[..., 0, ...] = -1
    np.testing.assert_array_equal(e2.numpy(), t2.numpy())


@needs_torch
@pytest.mark.parametrize("fn", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("create_graph", [False, True])
def test_loss_with_every_target_ignored_matches_torch(fn, smoothing, create_graph):
    if fn == "nll_loss" and smoothing:
        pytest.skip("nll_loss has no label smoothing")
    x = np.random.default_rng(2).standard_normal((3, 4))
    kw = {"label_smoothing": smoothing} if smoothing else {}
    for target in ([-100, -100, -100], [1, -100, 2]):
        e, t = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        le = getattr(ember.nn.functional, fn)(e, ember.tensor(target), **kw)
        lt = getattr(torch.nn.functional, fn)(t, torch.tensor(target), **kw)
        _same(le, lt)
        ge, = ember.autograd.grad(le, e, create_graph=create_graph)
        gt, = torch.autograd.grad(lt, t)
        _same(ge, gt)


@needs_torch
def test_acosh_of_huge_and_near_one_values_matches_torch():
    for dtype in ("float64", "float32"):
        big = 1e308 if dtype == "float64" else 3e38
        v = np.array([1.0, 1.0 + 1e-7, 1.5, 1e7, 1e9, big, np.inf, 0.5, np.nan], dtype=dtype)
        _same(ember.acosh(ember.tensor(v)), torch.acosh(torch.tensor(v)),
              rtol=1e-13 if dtype == "float64" else 1e-6)
    # (at 1e300 PyTorch's 1/sqrt(x² - 1) underflows to 0; ember gives 1e-300)
    e = ember.tensor([1.5, 1e9, 1e100], dtype=ember.float64, requires_grad=True)
    t = torch.tensor([1.5, 1e9, 1e100], dtype=torch.float64, requires_grad=True)
    ember.acosh(e).sum().backward()
    torch.acosh(t).sum().backward()
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-12)
