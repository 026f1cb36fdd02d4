"""The math and small Tensor methods of ``ember/ops/methods_more.py`` against PyTorch:
igamma/igammac, cholesky_solve/cholesky_inverse/lu_solve, the in-place forms (addmm_,
float_power_, ...), the queries and constructors (new, new_empty_strided, mH, layout,
...), apply_/map_, the random fills and post-accumulate-grad hooks. Views, in-place shape
ops and index writes are in ``test_tensor_methods_more.py``."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

rng = np.random.default_rng(1)


def close(e, t, rtol=1e-10, atol=1e-12):
    t = t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    e = e.detach().numpy() if isinstance(e, ember.Tensor) else np.asarray(e)
    assert e.shape == t.shape, (e.shape, t.shape)
    np.testing.assert_allclose(e, t, rtol=rtol, atol=atol, equal_nan=True)


def both(a, grad=False):
    a = np.asarray(a)
    return (ember.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad))


# igamma / igammac --------------------------------------------------------------------------
A = np.concatenate([rng.uniform(0.05, 5, 300), rng.uniform(5, 19, 200),
                    [0.5, 1.0, 3.0, 10.0, 2.0, 1e-3, 0.0, 0.0, -1.0, 2.0, np.inf, 1.0, np.nan]])
X = np.concatenate([rng.uniform(0, 12, 300), rng.uniform(0, 40, 200),
                    [1.0, 0.0, 2.0, 30.0, 1e-3, 0.5, 1.0, 0.0, 1.0, -1.0, 1.0, np.inf, 1.0]])


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_igamma_values_as_torch(name):
    (ae, at), (xe, xt) = both(A), both(X)
    # (a below 20, where PyTorch sums the same series and fraction)
    close(getattr(ember, name)(ae, xe), getattr(torch, name)(at, xt), rtol=1e-12)
    close(getattr(ae, name)(xe), getattr(at, name)(xt), rtol=1e-12)
    a32, x32 = ember.tensor(A[:50], dtype=ember.float32), ember.tensor(X[:50], dtype=ember.float32)
    out = getattr(ember, name)(a32, x32)
    assert out.dtype is ember.float32
    close(out, getattr(torch, name)(torch.tensor(A[:50]).float(), torch.tensor(X[:50]).float()),
          rtol=1e-5, atol=1e-6)
    # broadcasting, and an integer input promoted
    close(getattr(ember, name)(ember.tensor([[1.0], [2.0]]), ember.tensor([1, 2, 3])),
          getattr(torch, name)(torch.tensor([[1.0], [2.0]]), torch.tensor([1.0, 2.0, 3.0])),
          rtol=1e-6)


def test_igamma_large_a_against_high_precision():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 30
    for a, x in [(56.16, 39.87), (150.3, 160.2), (180.0, 120.0), (1e4, 1e4 + 50)]:
        ref = float(mpmath.gammainc(a, 0, x, regularized=True))
        got = ember.igamma(ember.tensor([a], dtype=ember.float64),
                           ember.tensor([x], dtype=ember.float64)).item()
        assert abs(got - ref) <= 1e-10 * ref


def test_igamma_gradients_as_torch():
    a, x = rng.uniform(0.5, 6, 20), rng.uniform(0.01, 10, 20)
    xe, xt = both(x, grad=True)
    for name in ("igamma", "igammac"):
        oe = getattr(ember, name)(ember.tensor(a), xe)
        ot = getattr(torch, name)(torch.tensor(a), xt)
        (ge,) = ember.autograd.grad(oe.sum(), xe, create_graph=True)
        (gt,) = torch.autograd.grad(ot.sum(), xt, create_graph=True)
        close(ge, gt)
        close(ember.autograd.grad(ge.sum(), xe)[0], torch.autograd.grad(gt.sum(), xt)[0])
    ae = ember.tensor(a, requires_grad=True)
    with pytest.raises(ember.EmberError, match="not implemented"):
        ember.igamma(ae, ember.tensor(x)).sum().backward()
    assert ember.special.gammainc is ember.igamma and ember.special.gammaincc is ember.igammac


def test_igamma_inplace_forms():
    ae, at = both(A[:20].astype(np.float32))
    xe, xt = both(X[:20])
    ae.igamma_(xe)  # float64 other into a float32 tensor, as PyTorch allows
    at.igamma_(xt)
    close(ae, at, rtol=1e-5, atol=1e-7)
    xe, xt = both([1.0, 4.0], grad=True)
    (ember.tensor([2.0, 3.0], dtype=ember.float64).igammac_(xe * 1)).sum().backward()
    (torch.tensor([2.0, 3.0], dtype=torch.float64).igammac_(xt * 1)).sum().backward()
    close(xe.grad, xt.grad)


# cholesky_solve / cholesky_inverse / lu_solve -------------------------------------------------
def spd(batch, n):
    m = rng.standard_normal(batch + (n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def grads_match(fe, ft, arrays, rtol=1e-9):
    es = [ember.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    oe, ot = fe(*es), ft(*ts)
    close(oe, ot, rtol=rtol, atol=1e-11)
    w = rng.standard_normal(tuple(ot.shape))
    for a, b in zip(ember.autograd.grad((oe * ember.tensor(w)).sum(), es),
                    torch.autograd.grad((ot * torch.tensor(w)).sum(), ts)):
        close(a, b, rtol=rtol, atol=1e-10)


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("lbatch,bbatch", [((), ()), ((2,), ()), ((), (3,)), ((2, 1), (3,))])
def test_cholesky_solve_and_inverse_as_torch(upper, lbatch, bbatch):
    L = np.linalg.cholesky(spd(lbatch, 3))
    if upper:
        L = np.swapaxes(L, -1, -2)
    B = rng.standard_normal(bbatch + (3, 2))
    grads_match(lambda b, l: b.cholesky_solve(l, upper), lambda b, l: b.cholesky_solve(l, upper),
                [B, L])
    grads_match(lambda l: ember.cholesky_inverse(l, upper),
                lambda l: torch.cholesky_inverse(l, upper), [L])


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_linalg_lu_solve_as_torch(left, adjoint):
    A = rng.standard_normal((2, 3, 3))
    LU, piv = torch.linalg.lu_factor(torch.tensor(A))
    pe = ember.tensor(piv.numpy())
    B = rng.standard_normal((2, 3, 4) if left else (2, 4, 3))
    grads_match(lambda lu, b: ember.linalg.lu_solve(lu, pe, b, left=left, adjoint=adjoint),
                lambda lu, b: torch.linalg.lu_solve(lu, piv, b, left=left, adjoint=adjoint),
                [LU.numpy(), B])
    if left and not adjoint:
        grads_match(lambda b, lu: b.lu_solve(lu, pe), lambda b, lu: b.lu_solve(lu, piv),
                    [B, LU.numpy()])


def test_factor_solver_errors():
    L = ember.tensor(np.linalg.cholesky(spd((), 3)))
    with pytest.raises(ember.ShapeError, match="at least 2 dimensions"):
        ember.cholesky_solve(ember.zeros(3, dtype=ember.float64), L)
    with pytest.raises(ember.ShapeError, match="each A matrix is 3 by 3 but each b matrix is 2"):
        ember.cholesky_solve(ember.zeros(2, 2, dtype=ember.float64), L)
    with pytest.raises(ember.EmberTypeError, match="same dtype"):
        ember.cholesky_solve(ember.zeros(3, 2), L)
    with pytest.raises(ember.ShapeError, match="square"):
        ember.cholesky_solve(ember.zeros(3, 2, dtype=ember.float64), L[:, :2])
    with pytest.raises(ember.EmberTypeError):
        ember.cholesky_inverse(ember.ones(3, 3, dtype=ember.int64))
    with pytest.raises(ember.ShapeError, match="at least 2 dimensions"):
        ember.cholesky_inverse(ember.ones(3))
    LU, piv = ember.linalg.lu_factor(ember.randn(3, 3, dtype=ember.float64))
    with pytest.raises(ember.EmberTypeError, match="int32"):
        ember.linalg.lu_solve(LU, piv.long(), ember.zeros(3, 1, dtype=ember.float64))
    with pytest.raises(ember.ShapeError, match="Incompatible shapes"):
        ember.linalg.lu_solve(LU, piv, ember.zeros(2, 2, dtype=ember.float64))
    with pytest.raises(ember.ShapeError, match="at least 2 dimensions"):
        ember.linalg.lu_solve(LU, piv, ember.zeros(3, dtype=ember.float64))
    with pytest.raises(ember.EmberError, match="between 1 and 3"):
        ember.linalg.lu_solve(LU, piv * 0, ember.zeros(3, 1, dtype=ember.float64))


def test_factor_solvers_under_jit():
    L = ember.tensor(np.linalg.cholesky(spd((), 3)), requires_grad=True)
    B = ember.randn(3, 2, dtype=ember.float64, requires_grad=True)
    LU, piv = ember.linalg.lu_factor(ember.randn(3, 3, dtype=ember.float64))

    def f(b, l, lu):
        out = ember.cholesky_solve(b, l) + ember.linalg.lu_solve(lu, piv, b, adjoint=True)
        return (out,) + ember.autograd.grad((out ** 2).sum(), [b, l, lu])
    lu = LU.detach().requires_grad_()
    for a, b in zip(ember.jit(f)(B, L, lu), f(B, L, lu)):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10)


# In-place math ops -----------------------------------------------------------------------
INPLACE = [
    ("addmm_", (2, 2), [(2, 3), (3, 2)], dict(beta=2, alpha=0.5)),
    ("addmv_", (2,), [(2, 3), (3,)], dict(alpha=2)),
    ("baddbmm_", (2, 2, 2), [(2, 2, 3), (2, 3, 2)], dict(beta=0.5)),
    ("nextafter_", (3,), [(3,)], {}), ("float_power_", (3,), [(3,)], {}),
    ("mvlgamma_", (3,), [], dict(p=2)),
]


@pytest.mark.parametrize("name,shape,others,kwargs", INPLACE)
def test_inplace_math_as_torch(name, shape, others, kwargs):
    base = rng.uniform(1.5, 3.0, shape)
    arrays = [rng.uniform(0.5, 2.0, s) for s in others]
    xe, xt = both(base, grad=True)
    oe, ot = zip(*(both(a, grad=name != "nextafter_") for a in arrays)) if arrays else ((), ())
    ye, yt = xe * 1, xt * 1
    ve = ye._version[0]
    assert getattr(ye, name)(*oe, **kwargs) is ye
    getattr(yt, name)(*ot, **kwargs)
    close(ye, yt)
    assert ye._version[0] == ve + 1
    if name != "nextafter_":
        le, lt = [xe] + list(oe), [xt] + list(ot)
        for a, b in zip(ember.autograd.grad(ye.sum(), le), torch.autograd.grad(yt.sum(), lt)):
            close(a, b)
    with pytest.raises(ember.EmberError, match="leaf Variable"):
        getattr(xe, name)(*oe, **kwargs)


def test_inplace_math_errors():
    with pytest.raises(ember.EmberError, match="requires dtype float64"):
        ember.tensor([2.0, 3.0]).float_power_(2)
    with pytest.raises(ember.EmberError, match="doesn't match the broadcast shape"):
        ember.ones(2).addmm_(ember.ones(2, 3), ember.ones(3, 2))
    np.testing.assert_array_equal(ember.tensor([2.0], dtype=ember.float64).float_power_(
        ember.tensor([3])).numpy(), [8.0])


# Queries, constructors and small methods -----------------------------------------------------
def test_queries_as_torch():
    for v in ([0.0], 2, [[True]], float("nan"), [-0.0]):
        assert ember.tensor(v).is_nonzero() == torch.tensor(v).is_nonzero()
    for bad, what in (([], "no values"), ([1, 2], "more than one value")):
        with pytest.raises(ember.EmberError, match=what):
            ember.tensor(bad).is_nonzero()
    x = ember.zeros(2, 3)
    assert x.is_same_size(ember.ones(2, 3)) and not x.is_same_size(ember.ones(3, 2))
    assert x.is_inference() is False and x.get_device() == -1
    assert x.layout is ember.strided and repr(ember.strided) == "ember.strided"
    assert isinstance(ember.strided, ember.layout)
    w = ember.randn(4, requires_grad=True)
    values, indices = w.max(0)
    assert values.output_nr == 0 and w.output_nr == 0
    assert ember.arange(6)[2:].storage_offset() == 2


def test_mH_H_diagflat_sum_to_size_split_with_sizes_as_torch():
    a = rng.standard_normal((2, 3, 4))
    e, t = both(a)
    close(e.mH, t.mH)
    close(e[0].H, t[0].H)
    assert e.mH._base is e
    close(ember.tensor(5.0).H, torch.tensor(5.0).H)
    with pytest.raises(ember.EmberError, match="only supported on matrices or batches"):
        ember.zeros(2).mH
    with pytest.raises(ember.EmberError, match="consider using tensor.mH"):
        e.H
    for offset in (0, 2, -1):
        close(e[0].diagflat(offset), t[0].diagflat(offset))
        close(ember.diagflat(e[0, 0], offset), torch.diagflat(t[0, 0], offset))
    close(ember.tensor(5).diagflat(-1), torch.tensor(5).diagflat(-1))
    for size in ((1, 4), (3, 1), (4,), (2, 3, 4), (1, 1, 1)):
        close(e.sum_to_size(*size), t.sum_to_size(*size))
        close(e.sum_to_size(size), t.sum_to_size(size))
    with pytest.raises(ember.ShapeError, match="not expandable"):
        e.sum_to_size(2, 2)
    pieces = e.split_with_sizes([1, 0, 2], dim=-2)
    for p, q in zip(pieces, t.split_with_sizes([1, 0, 2], dim=-2)):
        close(p, q)
    assert pieces[0]._base is e
    with pytest.raises(ember.EmberTypeError, match="split_sizes"):
        e.split_with_sizes(2)
    with pytest.raises(ember.ShapeError, match="sum exactly"):
        e.split_with_sizes([1, 1], 1)


def test_new_and_new_empty_strided_as_torch():
    e, t = ember.zeros(2, dtype=ember.float64), torch.zeros(2, dtype=torch.float64)
    for args in [(), (2, 3), ((2, 3),), ([1, 2],), (ember.Size([2, 3]),)]:
        targs = tuple(torch.Size(a) if isinstance(a, ember.Size) else a for a in args)
        got, want = e.new(*args), t.new(*targs)
        assert got.shape == tuple(want.shape) and got.dtype is ember.float64
        if args and not isinstance(args[0], (int, ember.Size)):
            close(got, want)
    other = ember.tensor([1.0, 2.0], dtype=ember.float64)
    assert e.new(other).data_ptr() == other.data_ptr()
    np.testing.assert_array_equal(ember.tensor([1]).new([1.5, -2.7]).numpy(), [1, -2])
    with pytest.raises(ember.EmberTypeError, match="sequence"):
        e.new(2.5)
    with pytest.raises(ember.EmberTypeError, match="dtype float64"):
        e.new(ember.tensor([1]))
    with pytest.raises(TypeError):
        e.new(2, dtype=ember.int64)
    s = e.new_empty_strided((2, 3), (1, 2))
    w = t.new_empty_strided((2, 3), (1, 2))
    assert s.shape == (2, 3) and s.stride() == w.stride() and s.dtype is ember.float64
    s = e.new_empty_strided((2, 3), (3, 1), dtype=ember.int32, requires_grad=False)
    assert s.dtype is ember.int32 and s.is_contiguous()
    assert e.new_empty_strided((0, 3), (3, 1)).shape == (0, 3)
    g = e.new_empty_strided((2,), (1,), requires_grad=True)
    assert g.requires_grad and g.is_leaf
    with pytest.raises(ember.ShapeError, match="mismatch in length"):
        e.new_empty_strided((2, 3), (1,))
    with pytest.raises(ember.EmberError, match="Negative strides"):
        e.new_empty_strided((2, 3), (-1, 1))


def test_hardshrink_prelu_mvlgamma_methods_as_torch():
    e, t = both(rng.standard_normal((2, 3)), grad=True)
    close(e.hardshrink(), t.hardshrink())
    close(e.hardshrink(lambd=0.2), t.hardshrink(lambd=0.2))
    w = rng.uniform(0.1, 0.5, 3)
    close(e.prelu(ember.tensor(w)), t.prelu(torch.tensor(w)))
    close(ember.tensor([2.5, 3.0]).mvlgamma(2), torch.tensor([2.5, 3.0]).mvlgamma(2), rtol=1e-6)
    close(ember.tensor([2.5, 3.0]).mvlgamma_(p=3), torch.tensor([2.5, 3.0]).mvlgamma_(p=3),
          rtol=1e-6)


# apply_ / map_ -------------------------------------------------------------------------------
def test_apply_and_map_as_torch():
    def square_plus_one(v):
        return v * v + 1
    for make in (lambda lib: lib.arange(4.0), lambda lib: lib.arange(6).view(2, 3).t(),
                 lambda lib: lib.tensor([True, False]), lambda lib: lib.zeros(0, 2)):
        e, t = make(ember), make(torch)
        fn = (lambda v: not v) if t.dtype == torch.bool else square_plus_one
        v = e._version[0]
        assert e.apply_(fn) is e
        close(e, t.apply_(fn))
        assert e._version[0] == v + 1
    base_e, base_t = ember.arange(6.0).view(2, 3), torch.arange(6.0).view(2, 3)
    base_e.t().apply_(lambda v: v * 10)
    base_t.t().apply_(lambda v: v * 10)
    close(base_e, base_t)  # written through the view
    close(ember.arange(4).apply_(lambda v: v / 2), torch.arange(4).apply_(lambda v: v / 2))
    ee, tt = ember.zeros(2, 2), torch.zeros(2, 2)
    close(ee.map_(ember.tensor([1.0, 2.0]), lambda a, b: a + 10 * b),
          tt.map_(torch.tensor([1.0, 2.0]), lambda a, b: a + 10 * b))


def test_apply_and_map_errors():
    with pytest.raises(ember.EmberError, match="requires grad"):
        ember.zeros(2, requires_grad=True).apply_(lambda v: v)
    with pytest.raises(ember.EmberError, match="requires grad"):
        ember.zeros(2).map_(ember.ones(2, requires_grad=True), lambda a, b: a)
    with pytest.raises(ember.EmberTypeError, match="real number, not NoneType"):
        ember.zeros(2).apply_(lambda v: None)
    with pytest.raises(ember.EmberTypeError, match="for 'other'"):
        ember.zeros(2).map_(ember.tensor([1, 2]), lambda a, b: a)
    with pytest.raises(ember.ShapeError):
        ember.zeros(2, 2).map_(ember.zeros(3), lambda a, b: a)
    with pytest.raises(ember.EmberError, match="ember.jit"):
        ember.jit(lambda t: (t * 1).apply_(lambda v: v))(ember.zeros(2))


# Random fills ----------------------------------------------------------------------------------
def test_random_fills_follow_their_distributions():
    ember.manual_seed(0)
    logs = np.log(ember.empty(100_000, dtype=ember.float64).log_normal_(0.5, 0.3).numpy())
    assert abs(logs.mean() - 0.5) < 0.01 and abs(logs.std() - 0.3) < 0.01
    c = ember.empty(100_001, dtype=ember.float64).cauchy_(median=1.0, sigma=2.0).numpy()
    quartiles = np.percentile(c, [25, 50, 75])
    np.testing.assert_allclose(quartiles, [-1.0, 1.0, 3.0], atol=0.06)
    g = ember.empty(100_000).geometric_(0.25)
    assert g.dtype is ember.float32 and g.numpy().min() == 1.0
    assert abs(g.numpy().mean() - 4.0) < 0.05
    gi = ember.empty(1000, dtype=ember.int64).geometric_(0.5).numpy()
    assert gi.min() >= 1 and set(np.unique(gi)) > {1, 2}
    ember.manual_seed(3)
    a = ember.empty(5).cauchy_()
    gen = ember.Generator().manual_seed(3)
    b = ember.empty(5).log_normal_(generator=gen)
    ember.manual_seed(3)
    np.testing.assert_array_equal(a.numpy(), ember.empty(5).cauchy_().numpy())
    np.testing.assert_array_equal(
        b.numpy(), ember.empty(5).log_normal_(generator=ember.Generator().manual_seed(3)).numpy())


def test_random_fill_errors():
    with pytest.raises(ember.EmberError, match="std > 0.0"):
        ember.empty(3).log_normal_(std=0)
    with pytest.raises(ember.EmberError, match="sigma > 0.0"):
        ember.empty(3).cauchy_(sigma=-1)
    for p in (0, 1, 1.5):
        with pytest.raises(ember.EmberError, match="p to be in \\(0, 1\\)"):
            ember.empty(3).geometric_(p)
    with pytest.raises(ember.EmberTypeError, match="floating point"):
        ember.empty(3, dtype=ember.int64).log_normal_()
    with pytest.raises(ember.EmberError, match="leaf Variable"):
        ember.empty(3, requires_grad=True).geometric_(0.5)


# register_post_accumulate_grad_hook -------------------------------------------------------------
def test_post_accumulate_grad_hook_as_torch():
    seen = {}
    for lib in (ember, torch):
        w = lib.ones(3, requires_grad=True)
        calls = seen[lib] = []
        handle = w.register_post_accumulate_grad_hook(
            lambda t, w=w, calls=calls: calls.append((t is w, t.grad.clone().tolist())))
        (w * 2).sum().backward()
        (w * 3).sum().backward()
        lib.autograd.grad((w * 2).sum(), w)  # no .grad accumulated: no call
        (w * 1).sum().backward(inputs=[w])
        handle.remove()
        (w * 2).sum().backward()
    assert seen[ember] == seen[torch] and len(seen[ember]) == 3


def test_post_accumulate_grad_hook_sees_the_hooked_gradient_and_errors():
    w = ember.ones(2, requires_grad=True)
    w.register_hook(lambda g: g * 10)

    def double(t):
        t.grad.mul_(2)
    w.register_post_accumulate_grad_hook(double)
    (w * 1).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [20.0, 20.0])
    with pytest.raises(ember.EmberError, match="non-leaf"):
        (w * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(ember.EmberError, match="doesn't require gradient"):
        ember.ones(2).register_post_accumulate_grad_hook(lambda t: None)
    v = ember.ones(2, requires_grad=True)
    v.register_post_accumulate_grad_hook(lambda t: 5)
    with pytest.raises(ember.EmberError, match="should return None"):
        (v * 1).sum().backward()
