"""LP pooling, 3-D adaptive max pooling, max unpooling and fractional max pooling (the
functions and their layers) against PyTorch, finite differences (first and second
order) and known values; compiled against eager."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.ops import registry
from ..ops.optable import OpCase, S, _ShapeRuleObserver, generate, nc, needs_torch, torch

TF = None if torch is None else torch.nn.functional


def _t(name):
    return None if TF is None else getattr(TF, name)


def _distinct(rng, shape, dtype, low=-3.0):
    """Values with no ties (a max's gradient is ambiguous at a tie)."""
    values = rng.permutation(int(np.prod(shape))).reshape(shape) / 4.0 + low
    return values.astype(ember.dtypes.as_dtype(dtype).np)


def _signed(rng, shape, dtype):
    """Values with no ties in magnitude, of either sign (for the largest |x|)."""
    signs = rng.choice([-1.0, 1.0], size=shape).astype(ember.dtypes.as_dtype(dtype).np)
    return _distinct(rng, shape, dtype, low=0.25) * signs


def _positive(rng, shape, dtype):
    # fractional powers of negative numbers are NaN: LP pooling is meant for magnitudes
    return rng.uniform(0.2, 2.0, size=shape).astype(ember.dtypes.as_dtype(dtype).np)


def lp_samples(d):
    def samples(rng, dtype):
        p = lambda *shape: _positive(rng, shape, dtype)  # noqa: E731
        spatial = (7, 6, 5)[:d]
        out = [S(p(2, 3, *spatial), 2, 2), S(p(2, 3, *spatial), 3, 3, 2, True),
               S(nc(p(2, 2, *spatial)), 1.5, 2, 1),
               S(p(3, *spatial), 1, (2, 3, 1)[:d] if d > 1 else 2, ceil_mode=True),
               S(_signed(rng, (2, 2, *spatial), dtype), float("inf"), 2, 1),
               S(_signed(rng, (2, 2, *spatial), dtype), -float("inf"), 3, 2, True)]
        if d == 2:  # signed inputs with an even power; a negative power
            out += [S(_signed(rng, (2, 2, 6, 5), dtype), 2, (2, 3), (2, 1), True),
                    S(p(1, 2, 6, 5), -1.5, 2)]
        return out
    return samples


def adaptive_max3d_samples(rng, dtype):
    r = lambda *shape: _distinct(rng, shape, dtype)  # noqa: E731
    return [S(r(2, 2, 5, 6, 7), (2, 4, 3), return_indices=True),  # overlapping windows
            S(nc(r(1, 2, 4, 4, 6)), 2), S(r(2, 5, 4, 3), (None, 3, 1)),
            S(r(1, 1, 2, 3, 2), (3, 4, 5), return_indices=True)]


def _distinct_indices(rng, lead, pooled, plane_size):
    """Distinct flat positions per plane (a scatter with repeats keeps only one value)."""
    count = int(np.prod(pooled))
    return np.stack([rng.choice(plane_size, count, replace=False)
                     for _ in range(int(np.prod(lead)))]).reshape(lead + pooled)


def unpool_samples(d):
    def samples(rng, dtype):
        r = lambda *shape: _distinct(rng, shape, dtype)  # noqa: E731
        pooled = (3, 2, 2)[:d]
        plane = int(np.prod([2 * p for p in pooled]))
        out = [S(r(2, 3, *pooled), _distinct_indices(rng, (2, 3), pooled, plane), 2),
               S(nc(r(2, 2, *pooled)), _distinct_indices(rng, (2, 2), pooled, plane + 1), 2,
                 output_size=tuple(2 * p + (a == 0) for a, p in enumerate(pooled))),
               S(r(3, *pooled), _distinct_indices(rng, (1, 3), pooled, plane)[0], 2)]
        # kernel 3, stride 2, padding 1: the default size is 2 * in - 1
        size = int(np.prod([2 * p - 1 for p in pooled]))
        out.append(S(r(1, 2, *pooled), _distinct_indices(rng, (1, 2), pooled, size), 3, 2, 1))
        empty = (0, 2) + pooled  # an empty batch
        return out + [S(r(*empty), np.zeros(empty, dtype=np.int64), 2)]
    return samples


def fractional_samples(d):
    def samples(rng, dtype):
        np_dtype = ember.dtypes.as_dtype(dtype).np
        r = lambda *shape: _distinct(rng, shape, dtype)  # noqa: E731
        u = lambda n, c: rng.random((n, c, d)).astype(np_dtype)  # noqa: E731
        if d == 2:
            return [S(r(2, 3, 9, 11), 2, output_size=(5, 7), _random_samples=u(2, 3)),
                    S(r(2, 2, 9, 8), (3, 2), output_size=4, return_indices=True,
                      _random_samples=u(3, 2)),  # more sample rows than the batch
                    S(nc(r(2, 2, 10, 9)), 3, output_ratio=(0.5, 0.6),
                      _random_samples=u(2, 2)),
                    S(r(3, 7, 6), 2, output_size=(6, 1), return_indices=True,
                      _random_samples=u(1, 3)),
                    S(r(0, 2, 5, 5), 2, output_size=3, _random_samples=u(0, 2)),
                    S(r(1, 2, 5, 5), 2, output_size=(0, 3), return_indices=True,
                      _random_samples=u(1, 2))]
        return [S(r(2, 2, 6, 7, 8), 2, output_size=(3, 4, 5), return_indices=True,
                  _random_samples=u(2, 2)),
                S(r(2, 5, 6, 7), (2, 1, 3), output_ratio=0.5, _random_samples=u(1, 2))]
    return samples


CASES = [
    OpCase("lp_pool1d", F.lp_pool1d, _t("lp_pool1d"), lp_samples(1),
           dtypes=("float32", "float64", "float16", "bfloat16")),
    OpCase("lp_pool2d", F.lp_pool2d, _t("lp_pool2d"), lp_samples(2),
           dtypes=("float32", "float64", "float16", "bfloat16")),
    OpCase("lp_pool3d", F.lp_pool3d, _t("lp_pool3d"), lp_samples(3),
           dtypes=("float32", "float64")),  # torch has no half-precision avg_pool3d
    OpCase("adaptive_max_pool3d", F.adaptive_max_pool3d, _t("adaptive_max_pool3d"),
           adaptive_max3d_samples),
    OpCase("max_unpool1d", F.max_unpool1d, _t("max_unpool1d"), unpool_samples(1)),
    OpCase("max_unpool2d", F.max_unpool2d, _t("max_unpool2d"), unpool_samples(2)),
    OpCase("max_unpool3d", F.max_unpool3d, _t("max_unpool3d"), unpool_samples(3),
           dtypes=("float32", "float64")),
    OpCase("fractional_max_pool2d", F.fractional_max_pool2d, _t("fractional_max_pool2d"),
           fractional_samples(2), tol={}),  # equal samples: equal windows and values
    OpCase("fractional_max_pool3d", F.fractional_max_pool3d, _t("fractional_max_pool3d"),
           fractional_samples(3), tol={}),
]

generate(CASES, globals())


# LP pooling -------------------------------------------------------------------------------------
def test_lp_pool_known_values():
    x = ember.tensor([[[3.0, 4.0, 1.0, 0.0, 2.0]]])
    assert F.lp_pool1d(x, 2, 2).tolist() == [[[5.0, 1.0]]]
    assert F.lp_pool1d(x, 1, 2, stride=3).tolist() == [[[7.0, 2.0]]]
    assert F.lp_pool1d(x, float("inf"), 2).tolist() == [[[4.0, 1.0]]]
    # ceil_mode: the last window holds one element, and is scaled to a full window's sum
    assert F.lp_pool1d(x, 1, 2, ceil_mode=True).tolist() == [[[7.0, 1.0, 4.0]]]


@needs_torch
@pytest.mark.parametrize("p", [1, 2, 3, 1.5, 0.5, -1, float("inf"), -float("inf")])
def test_lp_pool_gradient_at_zero_and_nan_windows_matches_torch(p):
    # windows whose power sum is zero get a zero gradient (not 0 * inf); windows of
    # negative values raised to a fractional power are NaN in values and gradients
    x = np.array([[[0.0, 0.0, 1.0, -2.0, -1.0, -3.0, 2.0, 0.0]]])
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ey, ty = F.lp_pool1d(ex, p, 2, ceil_mode=True), TF.lp_pool1d(tx, p, 2, ceil_mode=True)
    ey.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), equal_nan=True)
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), equal_nan=True, rtol=1e-12)
    if p in (2, 3):
        assert ex.grad[0, 0, :2].tolist() == [0.0, 0.0]


@needs_torch
def test_lp_pool_of_int64_is_float_as_in_torch():
    x = np.arange(24).reshape(1, 2, 3, 4)
    got = F.lp_pool2d(ember.tensor(x), 2, 2, ceil_mode=True)
    want = TF.lp_pool2d(torch.tensor(x), 2, 2, ceil_mode=True)
    assert got.dtype is ember.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


# Max unpooling ----------------------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("d,kw", [
    (1, dict(kernel_size=3, stride=2, padding=1)), (1, dict(kernel_size=2)),
    (2, dict(kernel_size=2)), (2, dict(kernel_size=3, stride=1, padding=1)),  # overlapping
    (2, dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0))),
    (3, dict(kernel_size=2, stride=(1, 2, 2))), (3, dict(kernel_size=3, stride=2, padding=1))])
def test_unpool_inverts_max_pool_like_torch(d, kw):
    rng = np.random.default_rng(d)
    x = rng.standard_normal((2, 3) + (7, 6, 5)[:d])
    ex, tx = ember.tensor(x), torch.tensor(x)
    pool, unpool = f"max_pool{d}d", f"max_unpool{d}d"
    ev, ei = getattr(F, pool)(ex, **kw, return_indices=True)
    tv, ti = getattr(TF, pool)(tx, **kw, return_indices=True)
    np.testing.assert_array_equal(ei.numpy(), ti.numpy())
    ev.requires_grad_()
    tv = tv.detach().requires_grad_()
    size = x.shape if d > 1 else x.shape[2:]  # (N, C, *spatial) or just the spatial dims
    ey = getattr(F, unpool)(ev, ei, **kw, output_size=size)
    ty = getattr(TF, unpool)(tv, ti, **kw, output_size=size)
    np.testing.assert_array_equal(ey.detach().numpy(), ty.detach().numpy())
    # every maximum is back at its place, everything else is zero
    kept = ey.detach().numpy() != 0
    np.testing.assert_array_equal(ey.detach().numpy()[kept], x[kept])
    g = rng.standard_normal(x.shape)
    ey.backward(ember.tensor(g))
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(ev.grad.numpy(), tv.grad.numpy(), rtol=1e-12)


def test_unpool_gradient_gathers_and_double_backward_scatters():
    v = ember.tensor([[[1.0, 2.0]]], requires_grad=True)
    index = ember.tensor([[[3, 0]]])
    y = F.max_unpool1d(v, index, 2)
    assert y.tolist() == [[[2.0, 0.0, 0.0, 1.0]]]
    g = ember.tensor([[[10.0, 20.0, 30.0, 40.0]]], requires_grad=True)
    (gv,) = ember.autograd.grad(y, [v], g, create_graph=True)
    assert gv.tolist() == [[[40.0, 10.0]]]
    (gg,) = ember.autograd.grad((gv * ember.tensor([[[1.0, 5.0]]])).sum(), [g])
    assert gg.tolist() == [[[5.0, 0.0, 0.0, 1.0]]]


# Fractional max pooling -------------------------------------------------------------------------
@needs_torch
def test_fractional_windows_are_computed_in_the_samples_dtype():
    # for this float32 sample, starts computed in float64 would differ from PyTorch's
    u = np.array([[[0.6521738171577454, 0.6521738171577454]]], dtype=np.float32)
    x = np.arange(625, dtype=np.float32).reshape(1, 1, 25, 25)
    got = F.fractional_max_pool2d(ember.tensor(x), 2, output_size=10, return_indices=True,
                                  _random_samples=ember.tensor(u))
    want = TF.fractional_max_pool2d(torch.tensor(x), 2, output_size=10, return_indices=True,
                                    _random_samples=torch.tensor(u))
    with_double = F.fractional_max_pool2d(ember.tensor(x, dtype=ember.float64), 2,
                                          output_size=10,
                                          _random_samples=ember.tensor(u, dtype=ember.float64))
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    assert not np.array_equal(with_double.numpy(), want[0].numpy())


@needs_torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_fractional_half_precision_windows_match_torch(dtype):
    rng = np.random.default_rng(5)
    x = torch.tensor(rng.standard_normal((2, 3, 40, 37))).to(getattr(torch, dtype))
    u = torch.tensor(rng.random((2, 3, 2))).to(getattr(torch, dtype))
    want = TF.fractional_max_pool2d(x, 3, output_size=(23, 19), return_indices=True,
                                    _random_samples=u)
    ex, eu = (ember.tensor(t.float().numpy()).to(getattr(ember, dtype)) for t in (x, u))
    got = F.fractional_max_pool2d(ex, 3, output_size=(23, 19), return_indices=True,
                                  _random_samples=eu)
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    np.testing.assert_array_equal(got[0].float().numpy(), want[0].float().numpy())


@needs_torch
def test_fractional_nan_and_minus_inf_windows_match_torch():
    x = np.full((1, 2, 5, 5), -np.inf)
    x[0, 1, 1, 1], x[0, 1, 1, 2], x[0, 1, 2, 2] = np.nan, 3.0, np.nan
    u = np.random.default_rng(0).random((1, 2, 2))
    got = F.fractional_max_pool2d(ember.tensor(x), 3, output_size=3, return_indices=True,
                                  _random_samples=ember.tensor(u))
    want = TF.fractional_max_pool2d(torch.tensor(x), 3, output_size=3, return_indices=True,
                                    _random_samples=torch.tensor(u))
    np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    assert got[1][0, 1, 0, 0].item() == 12  # the last NaN of the window wins


def test_fractional_without_samples_draws_from_embers_generator():
    x = ember.randn(2, 3, 9, 10)
    ember.manual_seed(7)
    drawn = F.fractional_max_pool2d(x, 2, output_size=(4, 6), return_indices=True)
    ember.manual_seed(7)
    samples = ember.rand(2, 3, 2)
    given = F.fractional_max_pool2d(x, 2, output_size=(4, 6), return_indices=True,
                                    _random_samples=samples)
    np.testing.assert_array_equal(drawn[1].numpy(), given[1].numpy())
    np.testing.assert_array_equal(drawn[0].numpy(), given[0].numpy())
    ember.manual_seed(8)
    other = F.fractional_max_pool2d(x, 2, output_size=(4, 6), return_indices=True)
    assert not np.array_equal(other[1].numpy(), drawn[1].numpy())


def test_fractional_gradient_scatters_into_overlapping_windows():
    x = ember.tensor(np.arange(25.0).reshape(1, 1, 5, 5), requires_grad=True)
    # alpha = (5 - 3) / (3 - 1) = 1: windows start at 0, 1, 2 and overlap
    y = F.fractional_max_pool2d(x, 3, output_size=3,
                                _random_samples=ember.zeros(1, 1, 2, dtype=ember.float64))
    assert y.tolist() == [[[[12.0, 13.0, 14.0], [17.0, 18.0, 19.0], [22.0, 23.0, 24.0]]]]
    y.sum().backward()
    assert x.grad.reshape(-1).tolist() == [0.0] * 12 + [1.0] * 3 + [0.0, 0.0] + [1.0] * 3 + \
        [0.0, 0.0] + [1.0] * 3


def test_every_primitive_shape_rule_holds_in_backward_and_double_backward():
    x = ember.randn(2, 3, 7, 6, dtype=ember.float64, requires_grad=True)
    x3 = ember.randn(1, 2, 4, 5, 6, dtype=ember.float64, requires_grad=True)
    registry._observer = _ShapeRuleObserver()
    try:
        v, i = F.max_pool2d(x, 2, return_indices=True)
        outs = [F.lp_pool2d(x.abs() + 0.1, 2.5, 3, 2, True), F.max_unpool2d(v, i, 2),
                F.fractional_max_pool2d(x, 2, output_size=(4, 3)),
                F.adaptive_max_pool3d(x3, (3, 2, 4)), F.fractional_max_pool3d(x3, 2, (2, 3, 3))]
        y = sum((o * o).sum() for o in outs)
        (g, g3) = ember.autograd.grad(y, [x, x3], create_graph=True)
        ember.autograd.grad((g * g).sum() + (g3 * g3).sum(), [x, x3])
    finally:
        registry._observer = None


# Compiled against eager -------------------------------------------------------------------------
def test_jit_matches_eager_values_and_gradients():
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((2, 3, 8, 9)), requires_grad=True)
    x3 = ember.tensor(rng.standard_normal((1, 2, 5, 6, 7)), requires_grad=True)
    samples = ember.tensor(rng.random((2, 3, 2)))

    def step(x, x3, samples):
        x.grad = x3.grad = None
        v, i = F.max_pool2d(x, 2, return_indices=True)
        y = F.lp_pool2d(x, 2, 3, 2, True).sum() + \
            (F.max_unpool2d(v, i, 2, output_size=x.shape) ** 2).sum()
        y = y + F.fractional_max_pool2d(x, 3, output_size=(5, 4), _random_samples=samples).sum()
        y = y + F.fractional_max_pool2d(x, 2, output_ratio=0.5).sum()  # draws from ember's RNG
        y = y + (F.adaptive_max_pool3d(x3, (2, 3, 4)) ** 2).sum() + F.lp_pool3d(x3, 3, 2).sum()
        y.backward()
        return y

    ember.manual_seed(1)
    eager = [t.detach().numpy().copy() for t in (step(x, x3, samples), x.grad, x3.grad)]
    compiled = ember.jit(step)
    for _ in range(2):  # the trace, then the cached graph
        ember.manual_seed(1)
        got = [t.detach().numpy() for t in (compiled(x, x3, samples), x.grad, x3.grad)]
        for g, e in zip(got, eager):
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


def test_jit_draws_fractional_samples_at_every_call():
    x = ember.randn(1, 4, 11, 11)
    compiled = ember.jit(lambda x: F.fractional_max_pool2d(x, 2, 5, return_indices=True)[1])
    ember.manual_seed(3)
    eager = F.fractional_max_pool2d(x, 2, 5, return_indices=True)[1].numpy()
    ember.manual_seed(3)
    first = compiled(x).numpy()
    second = compiled(x).numpy()
    np.testing.assert_array_equal(first, eager)
    assert not np.array_equal(first, second)  # (steps of 9 / 4: the samples matter)


# Layers -----------------------------------------------------------------------------------------
LAYER_RNG = np.random.default_rng(0)
_X2 = LAYER_RNG.permutation(2 * 3 * 8 * 9).reshape(2, 3, 8, 9) / 7.0
_X3 = LAYER_RNG.permutation(2 * 2 * 6 * 7 * 5).reshape(2, 2, 6, 7, 5) / 7.0
_POOLED, _INDICES = (t.numpy() for t in F.max_pool2d(ember.tensor(_X2), 2, return_indices=True))
_POOLED1, _INDICES1 = (t.numpy() for t in F.max_pool1d(ember.tensor(_X2[0]), 3, 2,
                                                       return_indices=True))
_POOLED3, _INDICES3 = (t.numpy() for t in F.max_pool3d(ember.tensor(_X3[0]), (1, 2, 2),
                                                       return_indices=True))
_U2, _U3 = LAYER_RNG.random((2, 3, 2)), LAYER_RNG.random((2, 2, 3))

# (class, constructor args, constructor kwargs, inputs, forward kwargs)
LAYERS = [
    ("LPPool1d", (2, 3), {"stride": 2}, [np.abs(_X2[0])], {}),
    ("LPPool2d", (1.5, (3, 2)), {"stride": (2, 1), "ceil_mode": True}, [_X2 + 0.1], {}),
    ("LPPool3d", (float("inf"), 2), {}, [_X3], {}),
    ("AdaptiveMaxPool3d", ((2, None, 3),), {"return_indices": True}, [_X3], {}),
    ("AdaptiveMaxPool3d", (2,), {}, [_X3[0]], {}),
    ("MaxUnpool1d", (3, 2), {}, [_POOLED1, _INDICES1], {"output_size": (9,)}),
    ("MaxUnpool2d", (2,), {}, [_POOLED, _INDICES], {"output_size": (8, 9)}),
    ("MaxUnpool3d", ((1, 2, 2),), {}, [_POOLED3, _INDICES3], {"output_size": (6, 7, 5)}),
    ("FractionalMaxPool2d", (3,), {"output_size": (5, 4), "return_indices": True,
                                   "_random_samples": _U2}, [_X2], {}),
    ("FractionalMaxPool3d", (2,), {"output_ratio": 0.5, "_random_samples": _U3}, [_X3], {}),
]


@needs_torch
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", range(len(LAYERS)),
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(LAYERS)])
def test_layer_module(case, dtype):
    from .module_template import run_module_test
    name, args, kwargs, inputs, fwd = LAYERS[case]
    e_kw, t_kw = dict(kwargs), dict(kwargs)
    if "_random_samples" in kwargs:
        e_kw["_random_samples"] = ember.tensor(kwargs["_random_samples"].astype(dtype))
        t_kw["_random_samples"] = torch.tensor(kwargs["_random_samples"].astype(dtype))
    e, t = getattr(ember.nn, name)(*args, **e_kw), getattr(torch.nn, name)(*args, **t_kw)
    run_module_test(e, t, inputs, kwargs=fwd, dtype=dtype)


def test_fractional_layer_draws_new_windows_each_call_without_samples():
    layer = ember.nn.FractionalMaxPool2d(2, output_ratio=(0.5, 0.5), return_indices=True)
    assert list(layer.state_dict()) == [] and repr(layer) == "FractionalMaxPool2d()"
    x = ember.randn(1, 8, 21, 21)  # steps of 19 / 9: the windows depend on the samples
    ember.manual_seed(0)
    first = layer(x)[1].numpy()
    second = layer(x)[1].numpy()
    assert first.shape == (1, 8, 10, 10) and not np.array_equal(first, second)


@pytest.mark.parametrize("make,message", [
    (lambda: ember.nn.FractionalMaxPool2d(2), "requires specifying either an output size"),
    (lambda: ember.nn.FractionalMaxPool2d(2, 3, 0.5), "only one of output_size and output"),
    (lambda: ember.nn.FractionalMaxPool3d(2, output_ratio=(0.5, 1.0, 0.5)),
     r"output_ratio must be between 0 and 1 \(got \(0.5, 1.0, 0.5\)\)"),
    (lambda: ember.nn.FractionalMaxPool3d(0, output_size=2),
     "kernel_size must be greater than 0, but got 0"),
])
def test_fractional_layer_argument_errors(make, message):
    with pytest.raises(ember.EmberValueError, match=message):
        make()


# Errors -----------------------------------------------------------------------------------------
def _x(*shape, dtype=None):
    return ember.zeros(*shape, dtype=dtype)


def _i(*shape):
    return ember.zeros(*shape, dtype=ember.int64)


@pytest.mark.parametrize("call,error,message", [
    (lambda: F.lp_pool2d(_x(4, 4), 2, 2), ember.ShapeError,
     r"lp_pool2d: expected input with 4 dims \(N, C, H, W\) or 3 \(C, H, W\), got shape "
     r"\(4, 4\)"),
    (lambda: F.lp_pool1d(_x(1, 1, 3), 2, 4), ember.ShapeError,
     r"lp_pool1d: input of spatial size \(3,\) is too small for kernel_size \(4,\)"),
    (lambda: F.lp_pool2d(_x(1, 1, 4, 4), 0, 2), ember.EmberValueError,
     r"lp_pool2d: norm_type must be non-zero"),
    (lambda: F.lp_pool2d(_x(1, 1, 4, 4), "2", 2), ember.EmberTypeError,
     r"lp_pool2d: expected norm_type to be a number, got str"),
    (lambda: F.lp_pool3d(_x(1, 1, 4, 4, 4, dtype=ember.int32), 2, 2), ember.EmberTypeError,
     r"lp_pool3d: expected a floating-point or int64 input, got int32"),
    (lambda: F.lp_pool2d(_x(1, 1, 4, 4), 2, 2, stride=0), ember.EmberError,
     r"lp_pool2d: stride must be positive, got \(0, 0\)"),
    (lambda: F.adaptive_max_pool3d(_x(1, 4, 4, 4, 4, 4), 2), ember.ShapeError,
     r"adaptive_max_pool3d: expected input with 5 dims \(N, C, D, H, W\) or 4"),
    (lambda: F.adaptive_max_pool3d(_x(1, 1, 4, 4, 4), (2, 0, 1)), ember.EmberError,
     r"adaptive_max_pool3d: output_size must be positive, got \(2, 0, 1\)"),
    (lambda: F.max_unpool2d(_x(1, 1, 2, 2), _i(1, 1, 2, 2) + 16, 2), ember.EmberIndexError,
     r"max_unpool2d: found an invalid max index 16 \(the output planes are of size 4x4\)"),
    (lambda: F.max_unpool1d(_x(1, 1, 2), _i(1, 1, 2) - 1, 2), ember.EmberIndexError,
     r"max_unpool1d: found an invalid max index -1 \(the output planes are of size 4\)"),
    (lambda: F.max_unpool2d(_x(1, 1, 2, 2), _i(1, 1, 2, 2).int(), 2), ember.EmberTypeError,
     r"max_unpool2d: expected int64 indices, got int32"),
    (lambda: F.max_unpool2d(_x(1, 1, 2, 2), _i(1, 2, 2), 2), ember.ShapeError,
     r"max_unpool2d: expected indices of the input's shape \(1, 1, 2, 2\), got \(1, 2, 2\)"),
    (lambda: F.max_unpool2d(_x(2, 2), _i(2, 2), 2), ember.ShapeError,
     r"max_unpool2d: expected input with 4 dims \(N, C, H, W\) or 3 \(C, H, W\)"),
    (lambda: F.max_unpool2d(_x(1, 1, 2, 2, dtype=ember.int64), _i(1, 1, 2, 2), 2),
     ember.EmberTypeError, r"max_unpool2d: expected a floating-point input, got int64"),
    (lambda: F.max_unpool2d(_x(1, 0, 2, 2), _i(1, 0, 2, 2), 2), ember.ShapeError,
     r"max_unpool2d: expected non-empty channel and spatial dims, got shape \(1, 0, 2, 2\)"),
    (lambda: F.max_unpool2d(_x(1, 1, 2, 2), _i(1, 1, 2, 2), 2, output_size=(6, 4)),
     ember.EmberValueError, r"max_unpool2d: invalid output_size \(6, 4\) \(dim 0 must be "
                            r"between 2 and 6"),
    (lambda: F.max_unpool3d(_x(1, 1, 2, 2, 2), _i(1, 1, 2, 2, 2), 2, output_size=(4, 4)),
     ember.EmberValueError, r"max_unpool3d: output_size should be a sequence of 3 or 5 ints"),
    (lambda: F.max_unpool3d(_x(1, 1, 2, 2, 2), _i(1, 1, 2, 2, 2), 2, stride=0),
     ember.EmberError, r"max_unpool3d: stride must be positive, got \(0, 0, 0\)"),
    (lambda: F.fractional_max_pool2d(_x(1, 1, 7, 8), 3, output_size=(6, 6)), ember.ShapeError,
     r"fractional_max_pool2d: kernel_size \(3, 3\) is too large for output size \(6, 6\) and "
     r"input size \(7, 8\) \(needs output \+ kernel - 1 <= input\)"),
    (lambda: F.fractional_max_pool3d(_x(1, 1, 7, 8, 9), 1, output_size=(7, 8, 9)),
     ember.ShapeError, r"fractional_max_pool3d: kernel_size \(1, 1, 1\) is too large .*"
                       r"\(needs output \+ kernel - 1 < input\)"),
    (lambda: F.fractional_max_pool2d(_x(1, 1, 7, 8), 2), ember.EmberValueError,
     r"fractional_max_pool2d: requires specifying either an output_size or an output_ratio"),
    (lambda: F.fractional_max_pool2d(_x(2, 3, 7, 8), 2, 3, _random_samples=_x(1, 3, 2)),
     ember.ShapeError, r"fractional_max_pool2d: expected _random_samples of shape \(N, C, 2\) "
                       r"with at least N = 2 rows and C = 3, got \(1, 3, 2\)"),
    (lambda: F.fractional_max_pool2d(_x(2, 3, 7, 8), 2, 3,
                                     _random_samples=_x(2, 3, 2, dtype=ember.float64)),
     ember.EmberTypeError, r"fractional_max_pool2d: expected _random_samples of the input's "
                           r"dtype float32, got float64"),
    # a huge half-precision sample: (1 + u) * alpha rounds past the input's end
    (lambda: F.fractional_max_pool2d(_x(1, 1, 5, 5, dtype=ember.float16), 2, 3,
                                     _random_samples=_x(1, 1, 2, dtype=ember.float16) + 2430),
     ember.EmberIndexError, r"fractional_max_pool2d: _random_samples put a window of size 2 "
                            r"at 0..4 on an axis of size 5; the samples should lie in"),
    (lambda: F.fractional_max_pool2d(_x(1, 1, 7, 8, dtype=ember.int64), 2, 3),
     ember.EmberTypeError, r"fractional_max_pool2d: expected a floating-point input, got int64"),
    (lambda: F.fractional_max_pool2d(_x(7, 8), 2, 3), ember.ShapeError,
     r"fractional_max_pool2d: expected input with 4 dims \(N, C, H, W\) or 3"),
])
def test_errors_name_the_op_and_the_shapes(call, error, message):
    with pytest.raises(error, match=message):
        call()
