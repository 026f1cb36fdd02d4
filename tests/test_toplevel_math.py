"""PyTorch's remaining top-level functions in ember, part two: gradient, histogramdd,
the norms, padding, pooling and rms_norm aliases, the LU interface, Poisson/binomial
samples, range, the strided empties and frombuffer, against PyTorch (values, dtypes,
gradients) and their errors."""
import array
import warnings

import numpy as np
import pytest

import ember
from tests.ops.optable import OpCase, S, generate, nc, rand

torch = pytest.importorskip("torch")

F = ("float32", "float64")


def r(rng, dtype, *shape, low=-2.0, high=2.0):
    return rand(rng, shape, dtype, low, high)


def t2n(t):
    return t.detach().double().numpy() if t.is_floating_point() else t.detach().numpy()


def e2n(t):
    return t.detach().numpy().astype(np.float64) if t.dtype.is_floating_point else \
        t.detach().numpy()


def close(e, t, rtol=1e-6, atol=1e-7):
    assert tuple(e.shape) == tuple(t.shape), f"shape {tuple(e.shape)} vs {tuple(t.shape)}"
    assert e.dtype.name == str(t.dtype).removeprefix("torch."), (e.dtype, t.dtype)
    np.testing.assert_allclose(e2n(e), t2n(t), rtol=rtol, atol=atol)


def pair(arr, requires_grad=False):
    return (ember.tensor(arr, requires_grad=requires_grad),
            torch.tensor(arr, requires_grad=requires_grad))



# the op table: forward and gradients against PyTorch and finite differences ---------------
def _coords(rng, n):
    return np.cumsum(rng.uniform(0.3, 1.5, n))


CASES = [
    OpCase("gradient", ember.gradient, torch.gradient,
           lambda rng, d: [S(r(rng, d, 7)), S(r(rng, d, 4, 5), spacing=2.0),
                           S(nc(r(rng, d, 4, 6)), dim=1, edge_order=2),
                           S(r(rng, d, 3, 5), spacing=[0.5, 3.0], dim=(1, 0)),
                           S(r(rng, d, 6), spacing=[_coords(rng, 6).astype(d)]),
                           S(r(rng, d, 5, 4), spacing=[_coords(rng, 5).astype(d)], dim=0,
                             edge_order=2),
                           S(r(rng, d, 2, 3), dim=-1)], dtypes=F),
    OpCase("constant_pad_nd", ember.constant_pad_nd, torch.constant_pad_nd,
           lambda rng, d: [S(r(rng, d, 3, 4), (1, 2)), S(r(rng, d, 3, 4), (1, -1, -1, 2), 0.5),
                           S(nc(r(rng, d, 2, 3, 4)), (0, 0, 2, 0, 1, 1), -2.0)], dtypes=F),
    OpCase("frobenius_norm", ember.frobenius_norm, torch.frobenius_norm,
           lambda rng, d: [S(r(rng, d, 3, 4), (0, 1)), S(r(rng, d, 2, 3, 4), 1, True),
                           S(r(rng, d, 2, 3), [])], dtypes=F),
    OpCase("nuclear_norm", ember.nuclear_norm, torch.nuclear_norm,
           lambda rng, d: [S(r(rng, d, 3, 4)), S(r(rng, d, 2, 3, 4), (0, 2)),
                           S(r(rng, d, 4, 3), True)], dtypes=F, gradgrad=False),
    OpCase("rms_norm", ember.rms_norm, torch.rms_norm,
           lambda rng, d: [S(r(rng, d, 3, 4), (4,)), S(r(rng, d, 2, 3, 4), (3, 4),
                                                     r(rng, d, 3, 4), 1e-3)], dtypes=F),
    OpCase("max_pool1d_with_indices", ember.max_pool1d_with_indices,
           torch.max_pool1d_with_indices,
           lambda rng, d: [S(r(rng, d, 2, 3, 9), 3), S(r(rng, d, 1, 2, 8), 2, 3, 1, 2, True)],
           dtypes=F, gradgrad=False),
]

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # (torch's deprecation warnings)
    generate(CASES, globals())


# gradient ---------------------------------------------------------------------------------
def test_gradient_dtypes_grads_and_edge_cases():
    x, tx = pair(np.array([1, 4, 9, 16, 25]))
    for kw in [{}, {"spacing": 2}, {"spacing": 2.5}, {"edge_order": 2}]:
        (e,), (t,) = ember.gradient(x, **kw), torch.gradient(tx, **kw)
        close(e, t)
    # integer coordinates, float64 coordinates for a float32 input
    (e,) = ember.gradient(x, spacing=[ember.tensor([0, 3, 4, 6, 9])])
    (t,) = torch.gradient(tx, spacing=[torch.tensor([0, 3, 4, 6, 9])])
    close(e, t)
    f = np.array([1.0, 4.0, 9.0, 16.0], dtype=np.float32)
    c = np.array([0.0, 1.0, 3.0, 4.0])
    (e,) = ember.gradient(ember.tensor(f), spacing=[ember.tensor(c)], edge_order=2)
    (t,) = torch.gradient(torch.tensor(f), spacing=[torch.tensor(c)], edge_order=2)
    close(e, t)
    np.testing.assert_allclose(e.numpy(), np.gradient(f.astype(np.float64), c, edge_order=2))
    assert ember.gradient(ember.tensor(3.0)) == ()
    # every partial derivative's gradient, including through the coordinates
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 5))
    coords = np.cumsum(rng.uniform(0.5, 1.0, 5))
    ex, tx = pair(a, requires_grad=True)
    ec, tc = pair(coords, requires_grad=True)
    rows = np.arange(4) * 1.5
    eouts = ember.gradient(ex, spacing=[ember.tensor(rows), ec], edge_order=2)
    touts = torch.gradient(tx, spacing=[torch.tensor(rows), tc], edge_order=2)
    ups = [rng.standard_normal(a.shape) for _ in eouts]
    sum((o * ember.tensor(u)).sum() for o, u in zip(eouts, ups)).backward()
    sum((o * torch.tensor(u)).sum() for o, u in zip(touts, ups)).backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ec.grad.numpy(), tc.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_gradient_compiles_as_eager():
    def f(x):
        gx, gy = ember.gradient(x, spacing=[0.5, 2.0], edge_order=2)
        return gx * gy

    x = ember.randn(4, 5, dtype=ember.float64)
    np.testing.assert_allclose(ember.jit(f)(x).numpy(), f(x).numpy(), rtol=1e-12)


def test_gradient_errors():
    x = ember.zeros(3, 4)
    with pytest.raises(ember.EmberError, match="edge_order"):
        ember.gradient(x, edge_order=3)
    with pytest.raises(ember.ShapeError, match="at least edge_order"):
        ember.gradient(ember.zeros(2), edge_order=2)
    with pytest.raises(ember.EmberError, match="length"):
        ember.gradient(x, spacing=[1.0, 2.0, 3.0])
    with pytest.raises(ember.EmberError, match="length"):
        ember.gradient(x, spacing=[1.0], dim=[0, 1])
    with pytest.raises(ember.EmberError, match="more than once"):
        ember.gradient(x, dim=[0, 0])
    with pytest.raises(ember.EmberTypeError, match="wrap it in a list"):
        ember.gradient(x, spacing=ember.arange(4.0), dim=1)
    with pytest.raises(ember.ShapeError, match="one dimension"):
        ember.gradient(x, spacing=[ember.tensor(2.0)], dim=1)
    with pytest.raises(ember.ShapeError, match="coordinates"):
        ember.gradient(x, spacing=[ember.arange(3.0)], dim=1)
    with pytest.raises(ember.EmberTypeError, match="bool"):
        ember.gradient(ember.tensor([True, False]))
    with pytest.raises(ember.EmberIndexError):
        ember.gradient(x, dim=2)


# Poisson and binomial -----------------------------------------------------------------------
def test_poisson_distribution_and_reproducibility():
    rates = ember.tensor([0.0, 0.5, 3.0, 40.0]).repeat(20000, 1)
    ember.manual_seed(7)
    a = ember.poisson(rates)
    assert a.shape == rates.shape and a.dtype is ember.float32 and not a.requires_grad
    s = a.numpy()
    assert (s[:, 0] == 0).all() and (s == np.round(s)).all() and (s >= 0).all()
    for i, lam in enumerate((0.5, 3.0, 40.0)):
        col = s[:, i + 1]
        assert abs(col.mean() - lam) < 4 * np.sqrt(lam / col.size), (lam, col.mean())
        assert abs(col.var() / lam - 1) < 0.06, (lam, col.var())
    ember.manual_seed(7)
    assert np.array_equal(ember.poisson(rates).numpy(), s)
    g1, g2 = ember.Generator().manual_seed(3), ember.Generator().manual_seed(3)
    r64 = ember.full((2, 3), 2.0, dtype=ember.float64)
    b1, b2 = ember.poisson(r64, g1), ember.poisson(r64, generator=g2)
    assert b1.dtype is ember.float64 and np.array_equal(b1.numpy(), b2.numpy())
    assert ember.poisson(ember.zeros(0, 3)).shape == (0, 3)
    with pytest.raises(ember.EmberError, match="non-negative"):
        ember.poisson(ember.tensor([-1.0]))
    with pytest.raises(ember.EmberError, match="non-negative"):
        ember.poisson(ember.tensor([float("nan")]))
    with pytest.raises(ember.EmberTypeError, match="floating"):
        ember.poisson(ember.tensor([1, 2]))


def test_binomial_distribution_and_reproducibility():
    count = ember.tensor([[10.0], [100.0]])
    prob = ember.tensor([0.0, 0.2, 0.5, 1.0]).repeat(20000).reshape(20000, 1, 4)
    ember.manual_seed(11)
    out = ember.binomial(count, prob)
    assert out.shape == torch.binomial(torch.tensor([[10.0], [100.0]]),
                                       torch.zeros(20000, 1, 4)).shape
    assert out.dtype is ember.float32 and not out.requires_grad
    s = out.numpy()
    assert (s[..., 0] == 0).all() and (s[:, 0, 3] == 10).all() and (s[:, 1, 3] == 100).all()
    for i, n in enumerate((10, 100)):
        for j, p in ((1, 0.2), (2, 0.5)):
            col = s[:, i, j]
            mean, var = n * p, n * p * (1 - p)
            assert abs(col.mean() - mean) < 4 * np.sqrt(var / col.size), (n, p, col.mean())
            assert abs(col.var() / var - 1) < 0.06, (n, p, col.var())
    ember.manual_seed(11)
    assert np.array_equal(ember.binomial(count, prob).numpy(), s)
    with pytest.raises(ember.EmberError, match=r"\[0, 1\]"):
        ember.binomial(ember.tensor([3.0]), ember.tensor([1.5]))
    with pytest.raises(ember.EmberError, match="whole numbers"):
        ember.binomial(ember.tensor([2.5]), ember.tensor([0.5]))
    with pytest.raises(ember.EmberError, match="whole numbers"):
        ember.binomial(ember.tensor([-2.0]), ember.tensor([0.5]))
    with pytest.raises(ember.EmberTypeError, match="same floating dtype"):
        ember.binomial(ember.tensor([2.0]), ember.tensor([0.5], dtype=ember.float64))
    with pytest.raises(ember.ShapeError, match="broadcast"):
        ember.binomial(ember.ones(2), ember.ones(3) / 2)


def test_samplers_under_jit_draw_every_call():
    f = ember.jit(lambda x: x + ember.poisson(ember.full((500,), 5.0)))
    a, b = f(ember.zeros(500)), f(ember.zeros(500))
    assert not np.array_equal(a.numpy(), b.numpy())
    assert abs(a.numpy().mean() - 5.0) < 0.5
    g = ember.jit(lambda rates: ember.poisson(rates))
    with pytest.raises(ember.EmberError, match="traced tensor"):
        g(ember.ones(3))


# histogramdd ------------------------------------------------------------------------------
def _hist_pair(e, t):
    (eh, eedges), (th, tedges) = e, t
    close(eh, th, rtol=1e-5, atol=1e-6)
    assert isinstance(eedges, tuple) and len(eedges) == len(tedges)
    for a, b in zip(eedges, tedges):
        close(a, b, rtol=1e-6, atol=1e-6)
    assert e.hist is eh and e.bin_edges is eedges


def test_histogramdd_matches_torch():
    rng = np.random.default_rng(0)
    pts = rng.standard_normal((200, 3)).astype(np.float32)
    w = rng.uniform(0, 2, 200).astype(np.float32)
    e, t = pair(pts)
    ew_, tw = pair(w)
    for args, kw in [((4,), {}), (([2, 3, 5],), {}),
                     ((3,), {"range": [-1.0, 1.0, -2.0, 2.0, 0.0, 3.0]}),
                     ((3,), {"weight": (ew_, tw)}), (([2, 2, 3],), {"density": True}),
                     ((2,), {"weight": (ew_, tw), "density": True})]:
        ekw = {k: v[0] if isinstance(v, tuple) else v for k, v in kw.items()}
        tkw = {k: v[1] if isinstance(v, tuple) else v for k, v in kw.items()}
        _hist_pair(ember.histogramdd(e, *args, **ekw), torch.histogramdd(t, *args, **tkw))
    edges = [np.array([-1.0, 0.0, 0.5, 2.0]), np.array([-3.0, 0.0, 3.0]),
             np.array([0.0, 0.0, 1.0, 1.0, 4.0])]
    e64, t64 = pair(pts.astype(np.float64))
    _hist_pair(ember.histogramdd(e64, [ember.tensor(b) for b in edges]),
               torch.histogramdd(t64, [torch.tensor(b) for b in edges]))
    # a 3-D input, points on the edges, empty and constant inputs
    grid = np.array([[[0.0, 1.0], [1.0, 1.0]], [[0.5, 0.0], [1.0, 0.25]]])
    _hist_pair(ember.histogramdd(ember.tensor(grid), 2, range=[0.0, 1.0, 0.0, 1.0]),
               torch.histogramdd(torch.tensor(grid), 2, range=[0.0, 1.0, 0.0, 1.0]))
    _hist_pair(ember.histogramdd(ember.zeros(0, 2), 3), torch.histogramdd(torch.zeros(0, 2), 3))
    _hist_pair(ember.histogramdd(ember.ones(5, 2), 2), torch.histogramdd(torch.ones(5, 2), 2))
    nan = np.array([[np.nan, 0.5], [0.2, 0.5]])
    _hist_pair(ember.histogramdd(ember.tensor(nan), 2, range=[0.0, 1.0, 0.0, 1.0]),
               torch.histogramdd(torch.tensor(nan), 2, range=[0.0, 1.0, 0.0, 1.0]))


def test_histogramdd_errors():
    x = ember.ones(5, 2)
    with pytest.raises(ember.ShapeError, match="at least 2"):
        ember.histogramdd(ember.ones(5), 2)
    with pytest.raises(ember.EmberTypeError, match="floating"):
        ember.histogramdd(ember.ones(5, 2, dtype=ember.int64), 2)
    with pytest.raises(ember.ShapeError, match="innermost"):
        ember.histogramdd(x, [2])
    with pytest.raises(ember.EmberError, match="4 elements"):
        ember.histogramdd(x, 2, range=[0.0, 1.0])
    with pytest.raises(ember.EmberError, match="min should not exceed max"):
        ember.histogramdd(x, 2, range=[1.0, 0.0, 0.0, 1.0])
    with pytest.raises(ember.EmberError, match="not finite"):
        ember.histogramdd(ember.tensor([[float("nan"), 1.0]]), 2)
    with pytest.raises(ember.EmberError, match="bins must be > 0"):
        ember.histogramdd(x, 0)
    with pytest.raises(ember.EmberTypeError, match="same dtype"):
        ember.histogramdd(x, 2, weight=ember.ones(5, dtype=ember.float64))
    with pytest.raises(ember.ShapeError, match="weight"):
        ember.histogramdd(x, 2, weight=ember.ones(4))
    with pytest.raises(ember.EmberError, match="non-decreasing"):
        ember.histogramdd(x, [ember.tensor([1.0, 0.0]), ember.tensor([0.0, 1.0])])
    with pytest.raises(ember.EmberTypeError, match="same dtype"):
        ember.histogramdd(x, [ember.tensor([0.0, 1.0], dtype=ember.float64)] * 2)
    with pytest.raises(ember.EmberError, match="traced tensor"):
        ember.jit(lambda points: ember.histogramdd(points, 2).hist)(x)


# range, strided empties, frombuffer ---------------------------------------------------------
def test_range_matches_torch():
    for args, kw in [((1, 4), {}), ((0, 1, 0.3), {}), ((1.0, -1.0, -0.5), {}), ((1, 1), {}),
                     ((1, 4), {"dtype": "int64"}), ((-2, 7, 3), {"dtype": "float64"})]:
        ekw = {k: getattr(ember, v) for k, v in kw.items()}
        tkw = {k: getattr(torch, v) for k, v in kw.items()}
        with pytest.warns(UserWarning, match="deprecated"):
            e = ember.range(*args, **ekw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            close(e, torch.range(*args, **tkw), rtol=1e-12)
    with pytest.warns(UserWarning):
        assert ember.range(0, 2, requires_grad=True).requires_grad
    with pytest.warns(UserWarning), pytest.raises(ember.EmberError, match="nonzero"):
        ember.range(1, 4, 0)
    with pytest.warns(UserWarning), pytest.raises(ember.EmberError, match="inconsistent"):
        ember.range(4, 1)
    with pytest.warns(UserWarning), pytest.raises(ember.EmberTypeError, match="end"):
        ember.range(5)


def test_strided_empties_match_torch():
    for size, stride in [((2, 3), (1, 2)), ((2, 3, 4), (12, 1, 3)), ((3, 2), (0, 1)),
                         ((0, 3), (3, 1)), ((), ())]:
        e = ember.empty_strided(size, stride, dtype=ember.float64)
        t = torch.empty_strided(size, stride, dtype=torch.float64)
        assert tuple(e.shape) == tuple(t.shape) and e.stride() == t.stride()
        assert e.dtype is ember.float64
    e = ember.empty_strided((2, 3), (1, 2))
    e.copy_(ember.arange(6.0).reshape(2, 3))
    assert e.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert ember.empty_strided((2,), (1,), requires_grad=True).requires_grad
    for size, layout in [((2, 3, 5, 7), (0, 2, 3, 1)), ((2, 3, 4), (2, 1, 0)), ((4,), (0,))]:
        e = ember.empty_permuted(size, layout, dtype=ember.int32)
        t = torch.empty_permuted(size, layout, dtype=torch.int32)
        assert tuple(e.shape) == tuple(t.shape) and e.stride() == t.stride()
    with pytest.raises(ember.ShapeError, match="length"):
        ember.empty_strided((2, 3), (1,))
    with pytest.raises(ember.EmberError, match="negative strides"):
        ember.empty_strided((2,), (-1,))
    with pytest.raises(ember.EmberError, match="permutation"):
        ember.empty_permuted((2, 3), (0, 0))
    with pytest.raises(ember.EmberTypeError, match="floating"):
        ember.empty_strided((2,), (1,), dtype=ember.int64, requires_grad=True)


def test_frombuffer_matches_torch_and_shares_memory():
    raw = bytearray(b"\x01\x00\x00\x00\x02\x00\x00\x00\x03")
    for kw in [dict(count=2), dict(offset=1, count=2), dict(count=-2, dtype="int8"),
               dict(dtype="uint8", offset=4), dict(dtype="int16", count=4)]:
        name = kw.pop("dtype", "int32")
        close(ember.frombuffer(raw, dtype=getattr(ember, name), **kw),
              torch.frombuffer(raw, dtype=getattr(torch, name), **kw))
    values = array.array("f", [1.0, 2.0, 3.0])
    t = ember.frombuffer(values, dtype=ember.float32)
    t[0] = 9.0
    assert values[0] == 9.0
    values[2] = -1.0
    assert t.tolist() == [9.0, 2.0, -1.0]
    assert ember.frombuffer(bytearray(8), dtype=ember.float32, requires_grad=True).requires_grad
    with pytest.warns(UserWarning, match="not writable"):
        ro = ember.frombuffer(b"abcd", dtype=ember.uint8)
    assert ro.tolist() == [97, 98, 99, 100]
    ro.add_(1)
    for kw, match in [(dict(dtype=ember.int32), "multiple of element size"),
                      (dict(dtype=ember.int8, offset=9), "offset"),
                      (dict(dtype=ember.int32, count=3), "must not be greater"),
                      (dict(dtype=ember.int8, count=0), "must not be 0")]:
        with pytest.raises(ValueError, match=match):
            ember.frombuffer(raw, **kw)
    with pytest.raises(ember.EmberTypeError, match="buffer protocol"):
        ember.frombuffer([1, 2], dtype=ember.int8)


# LU -----------------------------------------------------------------------------------------
def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (3, 5), (2, 5, 3), (1, 1)])
def test_lu_and_lu_unpack_match_torch(shape):
    a = np.random.default_rng(len(shape) * 10 + shape[-1]).standard_normal(shape)
    e, t = pair(a, requires_grad=True)
    (elu, epiv), (tlu, tpiv) = ember.lu(e), _quiet(torch.lu, t)
    close(elu, tlu, rtol=1e-10, atol=1e-12)
    close(epiv, tpiv)
    eP, eL, eU = ember.lu_unpack(elu, epiv)
    tP, tL, tU = torch.lu_unpack(tlu, tpiv)
    for x, y in ((eP, tP), (eL, tL), (eU, tU)):
        close(x, y, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose((eP @ eL @ eU).detach().numpy(), a, atol=1e-12)
    up = np.random.default_rng(1).standard_normal(tuple(tlu.shape))
    (elu * ember.tensor(up)).sum().backward()
    (tlu * torch.tensor(up)).sum().backward()
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=1e-10)
    for flags in [(False, True), (True, False)]:
        for x, y in zip(ember.lu_unpack(elu, epiv, *flags), torch.lu_unpack(tlu, tpiv, *flags)):
            assert tuple(x.shape) == tuple(y.shape)


def test_lu_infos_and_singular_matrices():
    a = np.array([[[1.0, 2.0], [2.0, 4.0]], [[1.0, 0.0], [0.0, 1.0]]])
    elu, epiv, einfo = ember.lu(ember.tensor(a), get_infos=True)
    tlu, tpiv, tinfo = _quiet(torch.lu, torch.tensor(a), get_infos=True)
    close(elu, tlu, rtol=1e-12)
    close(einfo, tinfo)
    assert einfo.tolist() == [2, 0]
    with pytest.raises(NotImplementedError):
        ember.lu(ember.eye(2), pivot=False)
    compiled = ember.jit(lambda m: ember.lu(m, get_infos=True))
    for x, y in zip(compiled(ember.tensor(a)), (elu, epiv, einfo)):
        np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_lu_solve_matches_torch_with_gradients():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 3, 3)) + 3 * np.eye(3)
    b = rng.standard_normal((3, 2))
    eA, tA = pair(a)
    elu, epiv = ember.lu(eA)
    tlu, tpiv = _quiet(torch.lu, tA)
    elu.requires_grad_(True)
    tlu = tlu.detach().requires_grad_(True)
    eb, tb = pair(b, requires_grad=True)
    ex = ember.lu_solve(eb, elu, epiv)
    tx = _quiet(torch.lu_solve, tb, tlu, tpiv)
    close(ex, tx, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ex.detach().numpy(), np.linalg.solve(a, b), rtol=1e-10)
    up = rng.standard_normal(tuple(tx.shape))
    (ex * ember.tensor(up)).sum().backward()
    (tx * torch.tensor(up)).sum().backward()
    np.testing.assert_allclose(eb.grad.numpy(), tb.grad.numpy(), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(elu.grad.numpy(), tlu.grad.numpy(), rtol=1e-9, atol=1e-11)
    # compiled as eager (the permutation is built from tensor ops, so it traces)
    solve = ember.jit(lambda b_, lu_, piv_: ember.lu_solve(b_, lu_, piv_))
    np.testing.assert_allclose(solve(eb.detach(), elu.detach(), epiv).numpy(),
                               ex.detach().numpy(), rtol=1e-12)
    with pytest.raises(ember.ShapeError, match="square"):
        ember.lu_solve(ember.ones(3, 1), *ember.lu(ember.randn(3, 4)))
    with pytest.raises(ember.ShapeError, match="Incompatible shapes"):
        ember.lu_solve(ember.ones(4, 1, dtype=ember.float64), elu.detach(), epiv)
    with pytest.raises(ember.EmberTypeError, match="int32"):
        ember.lu_unpack(elu.detach(), epiv.long())
    with pytest.raises(ember.ShapeError, match="LU_pivots"):
        ember.lu_unpack(elu.detach(), epiv[..., :2])
