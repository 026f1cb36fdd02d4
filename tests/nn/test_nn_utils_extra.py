"""The hook-based weight_norm and spectral_norm, BatchNorm fusion, skip_init,
clip_grads_with_norm_ and functional_call, against PyTorch."""
import warnings

import numpy as np
import pytest

import ember
from ember.nn import utils as U

torch = pytest.importorskip("torch")


def to_ember(sd):
    return {k: ember.tensor(v.detach().numpy().copy()) for k, v in sd.items()}


def close(e, t, tol=1e-10):
    e = e.detach().numpy() if isinstance(e, ember.Tensor) else np.asarray(e)
    t = t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    assert e.shape == t.shape
    np.testing.assert_allclose(e, t, rtol=tol, atol=tol)


def pair(name, *args, dtype="float64"):
    t = getattr(torch.nn, name)(*args).to(getattr(torch, dtype))
    e = getattr(ember.nn, name)(*args).to(getattr(ember, dtype))
    e.load_state_dict(to_ember(t.state_dict()))
    return t, e


def train_both(t, e, x, steps=2, lr=0.1):
    """``steps`` SGD steps on both, comparing outputs and every parameter's gradient."""
    opt_t, opt_e = torch.optim.SGD(t.parameters(), lr=lr), ember.optim.SGD(e.parameters(), lr=lr)
    for _ in range(steps):
        opt_t.zero_grad()
        opt_e.zero_grad()
        yt, ye = t(torch.tensor(x)), e(ember.tensor(x))
        close(ye, yt)
        (yt ** 2).sum().backward()
        (ye ** 2).sum().backward()
        for (nt, pt), (ne, pe) in zip(t.named_parameters(), e.named_parameters()):
            assert nt == ne
            close(pe.grad, pt.grad)
        opt_t.step()
        opt_e.step()


# The hook-based weight_norm ------------------------------------------------------------------
@pytest.mark.parametrize("layer,args,dim,x_shape", [
    ("Linear", (4, 3), 0, (2, 4)), ("Linear", (4, 3), None, (2, 4)),
    ("Conv2d", (2, 3, 3), 1, (1, 2, 5, 5)), ("Linear", (1, 1), 0, (3, 1))])
def test_old_weight_norm_matches_torch(layer, args, dim, x_shape):
    t, e = pair(layer, *args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        torch.nn.utils.weight_norm(t, dim=dim)
    with pytest.warns(FutureWarning, match="deprecated"):
        U.weight_norm(e, dim=dim)
    assert [(k, tuple(v.shape)) for k, v in e.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in t.state_dict().items()]
    for k, v in t.state_dict().items():
        close(e.state_dict()[k], v)
    train_both(t, e, np.random.RandomState(0).randn(*x_shape), steps=3)
    torch.nn.utils.remove_weight_norm(t)
    U.remove_weight_norm(e)
    assert list(e.state_dict()) == list(t.state_dict())
    close(e.weight, t.weight)
    assert isinstance(e.weight, ember.nn.Parameter)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found"):
        U.remove_weight_norm(e)


def test_old_weight_norm_twice_is_an_error():
    e = ember.nn.Linear(2, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        U.weight_norm(e)
        with pytest.raises(RuntimeError, match="Cannot register two weight_norm"):
            U.weight_norm(e)


# The hook-based spectral_norm ----------------------------------------------------------------
@pytest.mark.parametrize("layer,args,kwargs,x_shape", [
    ("Linear", (4, 3), {}, (2, 4)), ("Linear", (3, 5), {"n_power_iterations": 2}, (2, 3)),
    ("Conv2d", (2, 3, 3), {"eps": 1e-4}, (1, 2, 5, 5)),
    ("ConvTranspose1d", (2, 3, 2), {}, (1, 2, 4))])
def test_old_spectral_norm_matches_torch(layer, args, kwargs, x_shape):
    t, e = pair(layer, *args)
    torch.nn.utils.spectral_norm(t, **kwargs)
    U.spectral_norm(e, **kwargs)
    assert list(e.state_dict()) == list(t.state_dict())
    assert {"weight_orig", "weight_u", "weight_v"} <= set(e.state_dict())
    np.testing.assert_allclose(np.linalg.norm(e.weight_u.numpy()), 1.0)
    e.load_state_dict(to_ember(t.state_dict()))  # the same u and v
    x = np.random.RandomState(1).randn(*x_shape)
    train_both(t, e, x, steps=3)
    for k, v in t.state_dict().items():
        close(e.state_dict()[k], v)
    t.eval()
    e.eval()
    close(e(ember.tensor(x)), t(torch.tensor(x)))
    torch.nn.utils.remove_spectral_norm(t)
    U.remove_spectral_norm(e)
    assert list(e.state_dict()) == list(t.state_dict())
    close(e.weight, t.weight)
    with pytest.raises(ValueError, match="spectral_norm of 'weight' not found"):
        U.remove_spectral_norm(e)


def test_old_spectral_norm_errors():
    e = ember.nn.Linear(2, 2, bias=False)
    with pytest.raises(ValueError, match="n_power_iterations"):
        U.spectral_norm(e, n_power_iterations=0)
    with pytest.raises(ValueError, match="parameter `bias` is None"):
        U.spectral_norm(e, name="bias")
    U.spectral_norm(e)
    with pytest.raises(RuntimeError, match="Cannot register two spectral_norm"):
        U.spectral_norm(e)
    with pytest.raises(ValueError, match="uninitialized"):
        U.spectral_norm(ember.nn.LazyLinear(3))


# Fusion --------------------------------------------------------------------------------------
def _trained_bn(bn_t, num_features, shape):
    with torch.no_grad():
        bn_t.weight.uniform_(0.5, 1.5)
        bn_t.bias.uniform_(-1, 1)
        bn_t.running_mean.uniform_(-1, 1)
        bn_t.running_var.uniform_(0.5, 2)


@pytest.mark.parametrize("conv,bn,args,x_shape,transpose", [
    ("Conv2d", "BatchNorm2d", (3, 4, 3), (2, 3, 6, 6), False),
    ("Conv1d", "BatchNorm1d", (2, 5, 1), (2, 2, 7), False),
    ("ConvTranspose2d", "BatchNorm2d", (3, 4, 2), (1, 3, 3, 3), True),
    ("Conv3d", "BatchNorm3d", (1, 2, 2), (1, 1, 3, 3, 3), False)])
@pytest.mark.parametrize("bias", [True, False])
def test_fuse_conv_bn_eval(conv, bn, args, x_shape, transpose, bias):
    ct = getattr(torch.nn, conv)(*args, bias=bias).double().eval()
    bt = getattr(torch.nn, bn)(args[1]).double().eval()
    _trained_bn(bt, args[1], x_shape)
    ce = getattr(ember.nn, conv)(*args, bias=bias).double().eval()
    be = getattr(ember.nn, bn)(args[1]).double().eval()
    ce.load_state_dict(to_ember(ct.state_dict()))
    be.load_state_dict(to_ember(bt.state_dict()))
    ft = torch.nn.utils.fuse_conv_bn_eval(ct, bt, transpose=transpose)
    fe = U.fuse_conv_bn_eval(ce, be, transpose=transpose)
    assert fe is not ce and type(fe) is type(ce)
    close(fe.weight, ft.weight)
    close(fe.bias, ft.bias)
    assert isinstance(fe.weight, ember.nn.Parameter) and fe.weight.requires_grad
    x = np.random.RandomState(2).randn(*x_shape)
    close(fe(ember.tensor(x)), bt(ct(torch.tensor(x))))
    if bias:
        close(ce.bias, ct.bias)  # the original is untouched


def test_fuse_conv_bn_weights_without_affine_and_float32():
    rng = np.random.RandomState(3)
    w, rm, rv = rng.randn(4, 2, 3, 3), rng.randn(4), rng.rand(4) + 0.5
    args = [w, None, rm, rv]
    wt, bt = torch.nn.utils.fuse_conv_bn_weights(*[None if a is None else torch.tensor(
        a, dtype=torch.float32) for a in args], 1e-3, None, None)
    we, be = U.fuse_conv_bn_weights(*[None if a is None else ember.tensor(
        a, dtype=ember.float32) for a in args], 1e-3, None, None)
    assert we.dtype == be.dtype == ember.float32
    close(we, wt, 1e-6)
    close(be, bt, 1e-6)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("num_features", [5, 1])
def test_fuse_linear_bn_eval(bias, num_features):
    lt = torch.nn.Linear(3, 5, bias=bias).double().eval()
    bt = torch.nn.BatchNorm1d(num_features).double().eval()
    _trained_bn(bt, num_features, None)
    le = ember.nn.Linear(3, 5, bias=bias).double().eval()
    bn_e = ember.nn.BatchNorm1d(num_features).double().eval()
    le.load_state_dict(to_ember(lt.state_dict()))
    bn_e.load_state_dict(to_ember(bt.state_dict()))
    ft = torch.nn.utils.fuse_linear_bn_eval(lt, bt)
    fe = U.fuse_linear_bn_eval(le, bn_e)
    close(fe.weight, ft.weight)
    close(fe.bias, ft.bias)
    x = np.random.RandomState(4).randn(4, 3)
    close(fe(ember.tensor(x)), ft(torch.tensor(x)))


def test_fusion_errors():
    with pytest.raises(AssertionError, match="Fusion only for eval"):
        U.fuse_conv_bn_eval(ember.nn.Conv2d(1, 2, 1), ember.nn.BatchNorm2d(2).eval())
    with pytest.raises(AssertionError, match="running_mean"):
        U.fuse_linear_bn_eval(ember.nn.Linear(1, 2).eval(),
                              ember.nn.BatchNorm1d(2, track_running_stats=False).eval())
    with pytest.raises(AssertionError, match="out_features == bn.num_features"):
        U.fuse_linear_bn_eval(ember.nn.Linear(1, 2).eval(), ember.nn.BatchNorm1d(3).eval())


# skip_init and clip_grads_with_norm_ ---------------------------------------------------------
def test_skip_init():
    ember.manual_seed(0)
    expected = ember.rand(3).numpy()
    ember.manual_seed(0)
    m = U.skip_init(ember.nn.Linear, 5, 2, bias=True)
    assert type(m) is ember.nn.Linear and m.weight.shape == (2, 5) and m.bias.shape == (2,)
    assert "reset_parameters" not in m.__dict__
    np.testing.assert_array_equal(ember.rand(3).numpy(), expected)  # no random draws
    y = m(ember.ones(1, 5))
    assert y.shape == (1, 2)
    m.reset_parameters()  # the class's own method is back
    assert np.abs(m.weight.detach().numpy()).max() <= 1 / np.sqrt(5)
    c = U.skip_init(ember.nn.Conv2d, 2, 3, kernel_size=3)
    assert c.weight.shape == (3, 2, 3, 3)

    class NoDevice(ember.nn.Module):
        def __init__(self, n):
            super().__init__()

    with pytest.raises(RuntimeError, match="support a 'device' arg"):
        U.skip_init(NoDevice, 3)
    with pytest.raises(RuntimeError, match="Expected a Module"):
        U.skip_init(int)


@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grads_with_norm_(max_norm):
    rng = np.random.RandomState(5)
    grads = [rng.randn(3, 2), rng.randn(4)]
    pt = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
    pe = [ember.zeros(*g.shape, dtype=ember.float64, requires_grad=True) for g in grads]
    for p_t, p_e, g in zip(pt, pe, grads):
        p_t.grad, p_e.grad = torch.tensor(g), ember.tensor(g)
    extra = rng.randn(5)  # the norm may cover more than these gradients
    total_t = torch.nn.utils.get_total_norm([p.grad for p in pt] + [torch.tensor(extra)])
    total_e = U.get_total_norm([p.grad for p in pe] + [ember.tensor(extra)])
    close(total_e, total_t)
    torch.nn.utils.clip_grads_with_norm_(pt, max_norm, total_t)
    assert U.clip_grads_with_norm_(pe, max_norm, total_e) is None
    for p_t, p_e in zip(pt, pe):
        close(p_e.grad, p_t.grad)
    U.clip_grads_with_norm_(pe[0], max_norm, float(total_e))  # one tensor, a number
    U.clip_grads_with_norm_([ember.zeros(2, requires_grad=True)], 1.0, total_e)  # no grads


# functional_call -----------------------------------------------------------------------------
class Tied(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = ember.nn.Linear(2, 2, bias=False)
        self.b = ember.nn.Linear(2, 2, bias=False)
        self.b.weight = self.a.weight
        self.register_buffer("shift", ember.ones(2))

    def forward(self, x):
        return self.b(self.a(x)) + self.shift


def test_functional_call_values_grads_and_restore():
    t, e = pair("Linear", 3, 2)
    rng = np.random.RandomState(6)
    w, x = rng.randn(2, 3), rng.randn(4, 3)
    wt = torch.tensor(w, requires_grad=True)
    we = ember.tensor(w, requires_grad=True)
    yt = torch.func.functional_call(t, {"weight": wt}, (torch.tensor(x),))
    ye = ember.func.functional_call(e, {"weight": we}, (ember.tensor(x),))
    close(ye, yt)
    yt.sum().backward()
    ye.sum().backward()
    close(we.grad, wt.grad)
    assert e.weight.grad is None and isinstance(e.weight, ember.nn.Parameter)
    close(e.weight, t.weight)  # restored
    # a non-tuple argument, kwargs, a tuple of dicts
    b = rng.randn(2)
    ye = ember.func.functional_call(e, ({"weight": we}, {"bias": ember.tensor(b)}),
                                    ember.tensor(x))
    close(ye, torch.tensor(x @ w.T + b))
    ye = ember.func.functional_call(e, {}, kwargs={"input": ember.tensor(x)})
    close(ye, t(torch.tensor(x)))
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        ember.func.functional_call(e, ({"bias": we}, {"bias": we}), ember.tensor(x))


def test_functional_call_with_grad_transform():
    e = ember.nn.Linear(3, 1).double()
    x = ember.tensor(np.random.RandomState(7).randn(5, 3))
    params = {k: v.detach() for k, v in e.named_parameters()}
    grads = ember.func.grad(lambda p: ember.func.functional_call(e, p, (x,)).sum())(params)
    np.testing.assert_allclose(grads["weight"].numpy(), x.numpy().sum(0, keepdims=True))
    np.testing.assert_allclose(grads["bias"].numpy(), [5.0])


def test_functional_call_tied_weights_and_strict():
    e = Tied()
    x = ember.ones(1, 2)
    zero = ember.zeros(2, 2)
    out = ember.func.functional_call(e, {"a.weight": zero}, (x,))
    np.testing.assert_allclose(out.detach().numpy(), [[1.0, 1.0]])  # b.weight is tied too
    out = ember.func.functional_call(e, {"a.weight": ember.eye(2)}, (x,), tie_weights=False)
    expected = x.numpy() @ e.b.weight.detach().numpy().T + 1.0
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-6)
    with pytest.raises(ValueError, match="which are tied"):
        ember.func.functional_call(e, {"a.weight": zero, "b.weight": ember.eye(2)}, (x,))
    both = ember.func.functional_call(e, {"a.weight": zero, "b.weight": zero}, (x,))
    np.testing.assert_allclose(both.detach().numpy(), [[1.0, 1.0]])
    full = {"a.weight": zero, "b.weight": zero, "shift": ember.zeros(2)}
    np.testing.assert_allclose(ember.func.functional_call(e, full, (x,), strict=True).detach().numpy(),
                               0.0)
    with pytest.raises(RuntimeError, match=r"Unexpected key\(s\): 'nope'.*\n.*Missing key"):
        ember.func.functional_call(e, {"nope": zero, "shift": zero}, (x,), strict=True)
    assert e.b.weight is e.a.weight and isinstance(e.a.weight, ember.nn.Parameter)


def test_functional_call_restores_after_exception_and_buffers():
    e = Tied()
    before = e.a.weight

    class Boom(Exception):
        pass

    def fail(module, args):
        raise Boom

    handle = e.register_forward_pre_hook(fail)
    with pytest.raises(Boom):
        ember.func.functional_call(e, {"a.weight": ember.zeros(2, 2),
                                       "extra": ember.zeros(1)}, (ember.ones(1, 2),))
    handle.remove()
    assert e.a.weight is before and e.b.weight is before
    assert not hasattr(e, "extra")  # a name the module did not have is removed again
    bn = ember.nn.BatchNorm1d(2)
    mean = ember.zeros(2)
    x = ember.tensor([[1.0, 3.0], [3.0, 5.0]])
    ember.func.functional_call(bn, {"running_mean": mean}, (x,))
    np.testing.assert_allclose(mean.numpy(), [0.2, 0.4], rtol=1e-6)  # updated in place
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.0)


def test_functional_call_parametrized_module():
    t, e = pair("Linear", 2, 2)
    torch.nn.utils.parametrizations.orthogonal(t)
    ember.nn.utils.parametrizations.orthogonal(e)
    e.load_state_dict(to_ember(t.state_dict()))
    x = np.random.RandomState(8).randn(3, 2)
    w = np.random.RandomState(9).randn(2, 2)
    key = "parametrizations.weight.original"
    yt = torch.func.functional_call(t, {key: torch.tensor(w)}, (torch.tensor(x),))
    ye = ember.func.functional_call(e, {key: ember.tensor(w)}, (ember.tensor(x),))
    close(ye, yt)
    # the parametrized name replaces the parametrized value outright
    ye = ember.func.functional_call(e, {"weight": ember.tensor(w)}, (ember.tensor(x),))
    close(ye, torch.tensor(x @ w.T) + t.bias)
    close(e.weight, t.weight)
    assert not e.__dict__.get("_parametrize_overrides")


def test_stateless_functional_call_is_deprecated():
    e = ember.nn.Linear(2, 1)
    with pytest.warns(FutureWarning, match="torch.func.functional_call"):
        out = U.stateless.functional_call(e, {"bias": ember.ones(1) * 5,
                                              "weight": ember.zeros(1, 2)}, ember.ones(1, 2))
    np.testing.assert_allclose(out.detach().numpy(), [[5.0]])


def test_old_hooks_under_jit_raise_a_clear_error():
    # The hook stores the computed weight on the module: a traced value would escape.
    e = ember.nn.Linear(3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        U.weight_norm(e)
    with pytest.raises(ember.EmberError, match="escaped"):
        ember.jit(lambda x: e(x).sum())(ember.ones(1, 3))


def test_functional_call_under_jit():
    m = ember.nn.Linear(3, 2).double()
    rng = np.random.RandomState(10)
    x = ember.tensor(rng.randn(4, 3))
    w = ember.tensor(rng.randn(2, 3), requires_grad=True)

    def loss(w, x):
        return (ember.func.functional_call(m, {"weight": w}, (x,)) ** 2).sum()

    eager = loss(w, x)
    eager.backward()
    g_eager, w.grad = w.grad.numpy().copy(), None
    compiled = ember.jit(loss)
    for _ in range(3):
        out = compiled(w, x)
        out.backward()
        np.testing.assert_allclose(out.item(), eager.item(), rtol=1e-12)
        np.testing.assert_allclose(w.grad.numpy(), g_eager, rtol=1e-12)
        w.grad = None
    assert "traced 1 time" in compiled.explain()  # the swaps back cost no retrace
    # a compiled function of the module sees the swapped tensors, then its own again
    forward = ember.jit(lambda x: m(x))
    own = forward(x).detach().numpy()

    class CallsCompiled(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, x):
            return forward(x)

    inside = ember.func.functional_call(CallsCompiled(), {"m.weight": w.detach()}, (x,))
    np.testing.assert_allclose(inside.detach().numpy(),
                               x.numpy() @ w.detach().numpy().T + m.bias.detach().numpy(),
                               rtol=1e-12)
    np.testing.assert_allclose(forward(x).detach().numpy(), own, rtol=1e-12)
