"""ember.nn.utils.parametrize and ember.nn.utils.parametrizations against PyTorch: the
state-dict keys, values and gradients (weights copied across), SGD trajectories, removal,
caching, errors and ember.jit."""
import copy

import numpy as np
import pytest

import ember
from ember.nn.utils import parametrizations as PZ
from ember.nn.utils import parametrize as P

torch = pytest.importorskip("torch")
TP = torch.nn.utils.parametrize
TPZ = torch.nn.utils.parametrizations


def to_ember(sd):
    return {k: ember.tensor(v.detach().numpy().copy()) for k, v in sd.items()}


def close(e, t, tol=1e-10):
    e = e.detach().numpy() if isinstance(e, ember.Tensor) else np.asarray(e)
    t = t.detach().numpy()
    assert e.shape == t.shape
    np.testing.assert_allclose(e, t, rtol=tol, atol=tol)


def pair(name, *args, dtype="float64"):
    """The same layer in torch and ember, ember holding torch's weights."""
    t = getattr(torch.nn, name)(*args).to(getattr(torch, dtype))
    e = getattr(ember.nn, name)(*args).to(getattr(ember, dtype))
    e.load_state_dict(to_ember(t.state_dict()))
    return t, e


class Skew(torch.nn.Module):
    def forward(self, X):
        return X.triu(1) - X.triu(1).mT


class SkewE(ember.nn.Module):
    def forward(self, X):
        return X.triu(1) - X.triu(1).mT


class Scale(torch.nn.Module):
    def forward(self, X):
        return 2.0 * X

    def right_inverse(self, X):
        return X / 2.0


class ScaleE(ember.nn.Module):
    def forward(self, X):
        return 2.0 * X

    def right_inverse(self, X):
        return X / 2.0


class Split(torch.nn.Module):  # two originals: weight = A + B
    def forward(self, A, B):
        return A + B

    def right_inverse(self, X):
        return X * 0.25, X * 0.75


class SplitE(ember.nn.Module):
    def forward(self, A, B):
        return A + B

    def right_inverse(self, X):
        return X * 0.25, X * 0.75


def run_both(t, e, x, steps=0, lr=0.1):
    """Forward, backward and ``steps`` SGD steps on both; compare outputs and grads."""
    xt, xe = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    opt_t = torch.optim.SGD(t.parameters(), lr=lr)
    opt_e = ember.optim.SGD(e.parameters(), lr=lr)
    for _ in range(steps + 1):
        opt_t.zero_grad()
        opt_e.zero_grad()
        yt, ye = t(xt), e(xe)
        close(ye, yt)
        (yt ** 2).sum().backward()
        (ye ** 2).sum().backward()
        for (nt, pt), (ne, pe) in zip(t.named_parameters(), e.named_parameters()):
            assert nt == ne
            close(pe.grad, pt.grad)
        close(xe.grad, xt.grad)
        xt.grad, xe.grad = None, None
        opt_t.step()
        opt_e.step()
    for (nt, pt), (_, pe) in zip(t.named_parameters(), e.named_parameters()):
        close(pe, pt)


# register_parametrization -----------------------------------------------------------------
def test_register_keys_class_and_values():
    t, e = pair("Linear", 4, 4)
    TP.register_parametrization(t, "weight", Skew())
    P.register_parametrization(e, "weight", SkewE())
    assert type(e).__name__ == "ParametrizedLinear" and isinstance(e, ember.nn.Linear)
    assert P.type_before_parametrizations(e) is ember.nn.Linear
    assert list(e.state_dict()) == list(t.state_dict()) == [
        "bias", "parametrizations.weight.original"]
    assert P.is_parametrized(e) and P.is_parametrized(e, "weight")
    assert not P.is_parametrized(e, "bias")
    assert not P.is_parametrized(ember.nn.Linear(2, 2))
    close(e.weight, t.weight)
    assert float(e.weight[1, 0]) == -float(e.weight[0, 1])
    assert type(ember.nn.Linear(2, 2)).__name__ == "Linear"  # the class itself is untouched
    run_both(t, e, np.random.RandomState(0).randn(3, 4), steps=3)


def test_right_inverse_and_assignment_keep_identity():
    t, e = pair("Linear", 3, 2)
    original = e.weight
    TP.register_parametrization(t, "weight", Scale())
    P.register_parametrization(e, "weight", ScaleE())
    assert e.parametrizations.weight.original is original  # the same parameter object
    close(e.parametrizations.weight.original, t.parametrizations.weight.original)
    close(e.weight, t.weight)  # right_inverse kept the value
    value = np.arange(6.0).reshape(2, 3)
    t.weight = torch.tensor(value)
    e.weight = ember.tensor(value)
    close(e.parametrizations.weight.original, t.parametrizations.weight.original)
    np.testing.assert_allclose(e.weight.detach().numpy(), value)
    with pytest.raises(KeyError):
        e.weight = ember.nn.Parameter(ember.zeros(2, 3))


def test_chained_parametrizations_and_multi_originals():
    t, e = pair("Linear", 3, 3)
    TP.register_parametrization(t, "weight", Split())
    P.register_parametrization(e, "weight", SplitE())
    TP.register_parametrization(t, "weight", Scale())
    P.register_parametrization(e, "weight", ScaleE())
    assert list(e.state_dict()) == list(t.state_dict()) == [
        "bias", "parametrizations.weight.original0", "parametrizations.weight.original1"]
    assert len(e.parametrizations.weight) == 2
    assert isinstance(e.parametrizations.weight, P.ParametrizationList)
    close(e.weight, t.weight)
    run_both(t, e, np.random.RandomState(1).randn(2, 3), steps=2)
    with pytest.raises(ValueError, match="leave_parametrized"):
        P.remove_parametrizations(e, "weight", leave_parametrized=False)
    w = e.weight.detach().numpy()
    P.remove_parametrizations(e, "weight")
    assert type(e) is ember.nn.Linear and "parametrizations" not in e._modules
    np.testing.assert_allclose(e.weight.detach().numpy(), w)
    assert isinstance(e.weight, ember.nn.Parameter)


@pytest.mark.parametrize("leave", [True, False])
def test_remove_parametrizations(leave):
    t, e = pair("Linear", 4, 4)
    TP.register_parametrization(t, "weight", Skew())
    P.register_parametrization(e, "weight", SkewE())
    original = e.parametrizations.weight.original
    TP.remove_parametrizations(t, "weight", leave_parametrized=leave)
    P.remove_parametrizations(e, "weight", leave_parametrized=leave)
    assert type(e) is ember.nn.Linear and not hasattr(type(e), "weight")
    assert e.weight is original  # an optimizer that held it keeps working
    assert list(e.state_dict()) == list(t.state_dict()) == ["bias", "weight"]
    close(e.weight, t.weight)
    with pytest.raises(ValueError, match="does not have a parametrization"):
        P.remove_parametrizations(e, "weight")


def test_buffer_parametrization_and_two_tensors():
    e = ember.nn.BatchNorm1d(3)
    P.register_parametrization(e, "running_var", ScaleE())
    assert "parametrizations.running_var.original" in e.state_dict()
    assert not e.parametrizations.running_var.original.requires_grad
    P.register_parametrization(e, "weight", ScaleE())
    assert P.is_parametrized(e, "weight") and P.is_parametrized(e, "running_var")
    P.remove_parametrizations(e, "weight")
    assert type(e).__name__ == "ParametrizedBatchNorm1d"  # running_var still is
    P.remove_parametrizations(e, "running_var")
    assert type(e) is ember.nn.BatchNorm1d
    np.testing.assert_allclose(e.running_var.numpy(), np.ones(3))


def test_state_dict_round_trip_and_deepcopy():
    t, e = pair("Linear", 3, 3)
    TP.register_parametrization(t, "weight", Skew())
    P.register_parametrization(e, "weight", SkewE())
    with torch.no_grad():
        t.parametrizations.weight.original.normal_()
    e.load_state_dict(to_ember(t.state_dict()))
    close(e.weight, t.weight)
    c = copy.deepcopy(e)
    assert type(c) is type(e)
    close(c.weight, t.weight)
    with ember.no_grad():
        c.parametrizations.weight.original.zero_()
    close(e.weight, t.weight)  # the copy holds its own tensors
    np.testing.assert_allclose(c.weight.detach().numpy(), 0.0)


def test_cached_computes_once():
    calls = []

    class Count(ember.nn.Module):
        def forward(self, X):
            calls.append(1)
            return X * 1.0

    e = ember.nn.Linear(2, 2)
    P.register_parametrization(e, "weight", Count())
    calls.clear()
    e.weight, e.weight
    assert len(calls) == 2
    calls.clear()
    with P.cached():
        a, b = e.weight, e.weight
        with P.cached():
            c = e.weight
    assert len(calls) == 1 and a is b is c
    e.weight
    assert len(calls) == 2  # the cache ends with the outermost block


def test_register_errors():
    e = ember.nn.Linear(3, 2)
    with pytest.raises(ValueError, match="does not have a parameter"):
        P.register_parametrization(e, "nope", ScaleE())

    class Shape(ember.nn.Module):
        def forward(self, X):
            return X[:1]

    class Dtype(ember.nn.Module):
        def forward(self, X):
            return X.to(ember.float64)

    with pytest.raises(ValueError, match="may not change the shape"):
        P.register_parametrization(e, "weight", Shape())
    with pytest.raises(ValueError, match="may not change the dtype"):
        P.register_parametrization(e, "weight", Dtype())
    assert type(e) is ember.nn.Linear and "weight" in e._parameters  # nothing changed
    P.register_parametrization(e, "weight", Shape(), unsafe=True)
    assert e.weight.shape == (1, 3)
    P.register_parametrization(e, "bias", ScaleE())
    with pytest.raises(ValueError, match="may not change the shape"):
        P.register_parametrization(e, "bias", Shape())  # chained onto a parametrization
    assert len(e.parametrizations.bias) == 1

    class NoInverse(ember.nn.Module):
        def forward(self, X):
            return X

    f = ember.nn.Linear(2, 2)
    P.register_parametrization(f, "weight", NoInverse())
    with pytest.raises(ember.EmberError, match="does not implement right_inverse"):
        f.weight = ember.zeros(2, 2)


def test_jit_matches_eager_and_cached_refuses_tracing():
    e = ember.nn.Linear(4, 4).double()
    PZ.orthogonal(e)
    x = ember.tensor(np.random.RandomState(2).randn(3, 4))

    def loss(x):
        return (e(x) ** 2).sum()

    eager = loss(x)
    eager.backward()
    g_eager = e.parametrizations.weight.original.grad.numpy().copy()
    e.zero_grad()
    compiled = ember.jit(loss)
    out = compiled(x)
    out.backward()
    np.testing.assert_allclose(out.item(), eager.item(), rtol=1e-12)
    np.testing.assert_allclose(e.parametrizations.weight.original.grad.numpy(), g_eager,
                               rtol=1e-10, atol=1e-12)
    with P.cached():
        with pytest.raises(ember.EmberError, match="caching parametrizations"):
            ember.jit(lambda x: e(x).sum())(x)


# orthogonal --------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (1, 1), (2, 6, 3)])
@pytest.mark.parametrize("orthogonal_map", [None, "matrix_exp", "cayley", "householder"])
def test_orthogonal_matches_torch(shape, orthogonal_map):
    rng = np.random.RandomState(3)
    value = rng.randn(*shape)
    t, e = torch.nn.Module(), ember.nn.Module()
    t.weight = torch.nn.Parameter(torch.tensor(value))
    e.weight = ember.nn.Parameter(ember.tensor(value))
    TPZ.orthogonal(t, orthogonal_map=orthogonal_map)
    PZ.orthogonal(e, orthogonal_map=orthogonal_map)
    assert list(e.state_dict()) == list(t.state_dict())
    n, k = shape[-2:]
    if n == k:  # a non-square base is completed with random columns
        close(e.weight, t.weight)
    W = e.weight.detach().numpy()
    gram = W.swapaxes(-1, -2) @ W if n >= k else W @ W.swapaxes(-1, -2)
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(min(n, k)), gram.shape),
                               atol=1e-12)
    # from the same state (base included), values and gradients agree
    with torch.no_grad():
        t.parametrizations.weight.original.add_(0.3 * torch.tensor(rng.randn(*shape)))
    e.load_state_dict(to_ember(t.state_dict()))
    close(e.weight, t.weight)
    gout = rng.randn(*shape)
    t.weight.backward(torch.tensor(gout))
    e.weight.backward(ember.tensor(gout))
    close(e.parametrizations.weight.original.grad, t.parametrizations.weight.original.grad)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
def test_orthogonal_householder_without_trivialization(shape):
    value = np.random.RandomState(4).randn(*shape)
    t, e = torch.nn.Module(), ember.nn.Module()
    t.weight = torch.nn.Parameter(torch.tensor(value))
    e.weight = ember.nn.Parameter(ember.tensor(value))
    TPZ.orthogonal(t, orthogonal_map="householder", use_trivialization=False)
    PZ.orthogonal(e, orthogonal_map="householder", use_trivialization=False)
    assert list(e.state_dict()) == list(t.state_dict()) == ["parametrizations.weight.original"]
    close(e.parametrizations.weight.original, t.parametrizations.weight.original)
    close(e.weight, t.weight)
    e2 = ember.nn.Module()
    e2.weight = ember.nn.Parameter(ember.tensor(value))
    PZ.orthogonal(e2, orthogonal_map="cayley", use_trivialization=False)
    with pytest.raises(NotImplementedError, match="use_trivialization=False"):
        e2.weight = ember.tensor(value)


def test_orthogonal_training_matches_torch_and_stays_orthogonal():
    t, e = pair("Linear", 4, 4)
    TPZ.orthogonal(t)
    PZ.orthogonal(e)
    run_both(t, e, np.random.RandomState(5).randn(6, 4), steps=4, lr=0.05)
    W = e.weight.detach().numpy()
    np.testing.assert_allclose(W.T @ W, np.eye(4), atol=1e-12)


def test_orthogonal_float32_and_errors():
    t, e = pair("Linear", 3, 3, dtype="float32")
    TPZ.orthogonal(t, orthogonal_map="cayley")
    PZ.orthogonal(e, orthogonal_map="cayley")
    close(e.weight, t.weight, tol=1e-5)
    assert e.weight.dtype == ember.float32
    with pytest.raises(ValueError, match="has to be one of"):
        PZ.orthogonal(ember.nn.Linear(2, 2), orthogonal_map="qr")
    with pytest.raises(ValueError, match="Expected a matrix"):
        PZ.orthogonal(ember.nn.Linear(2, 2), name="bias")
    with pytest.raises(ValueError, match="no parameter or buffer"):
        PZ.orthogonal(ember.nn.Linear(2, 2), name="nope")
    m = PZ.orthogonal(ember.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices of shape"):
        m.weight = ember.zeros(3, 3)


# weight_norm -------------------------------------------------------------------------------
@pytest.mark.parametrize("layer,args,dim", [
    ("Linear", (5, 3), 0), ("Linear", (5, 3), 1), ("Linear", (5, 3), None),
    ("Conv2d", (2, 4, 3), 0), ("Conv2d", (2, 4, 3), -2), ("Conv1d", (1, 1, 1), 0),
    ("ConvTranspose1d", (3, 2, 2), 1)])
def test_weight_norm_matches_torch(layer, args, dim):
    t, e = pair(layer, *args)
    TPZ.weight_norm(t, dim=dim)
    PZ.weight_norm(e, dim=dim)
    st, se = t.state_dict(), e.state_dict()
    assert [(k, tuple(v.shape)) for k, v in se.items()] == \
        [(k, tuple(v.shape)) for k, v in st.items()]
    for k in st:
        close(se[k], st[k])
    close(e.weight, t.weight)
    x = np.random.RandomState(6).randn(2, *{"Linear": (5,), "Conv2d": (2, 5, 5),
                                           "Conv1d": (1, 4),
                                           "ConvTranspose1d": (3, 4)}[layer])
    run_both(t, e, x, steps=2)


def test_weight_norm_loads_old_keys():
    old = ember.nn.Linear(4, 3).double()
    with pytest.warns(FutureWarning):
        ember.nn.utils.weight_norm(old)
    with ember.no_grad():
        old.weight_g.mul_(2.0)
    new = PZ.weight_norm(ember.nn.Linear(4, 3).double())
    result = new.load_state_dict(old.state_dict())
    assert not result.missing_keys and not result.unexpected_keys
    g, v = old.weight_g.detach().numpy(), old.weight_v.detach().numpy()
    np.testing.assert_allclose(new.weight.detach().numpy(),
                               g * v / np.linalg.norm(v, axis=1, keepdims=True), rtol=1e-12)
    net = ember.nn.Sequential(PZ.weight_norm(ember.nn.Linear(4, 3).double()))
    net.load_state_dict({"0." + k: v for k, v in old.state_dict().items()})
    np.testing.assert_allclose(net[0].weight.detach().numpy(), new.weight.detach().numpy())


# spectral_norm -----------------------------------------------------------------------------
@pytest.mark.parametrize("layer,args,kwargs", [
    ("Linear", (5, 3), {}), ("Linear", (3, 5), {"n_power_iterations": 3}),
    ("Conv2d", (2, 4, 3), {}), ("ConvTranspose2d", (2, 4, 3), {}),
    ("Conv1d", (3, 4, 2), {"dim": 1, "eps": 1e-3})])
def test_spectral_norm_matches_torch(layer, args, kwargs):
    t, e = pair(layer, *args)
    TPZ.spectral_norm(t, **kwargs)
    PZ.spectral_norm(e, **kwargs)
    assert list(e.state_dict()) == list(t.state_dict())
    assert "parametrizations.weight.0._u" in e.state_dict()
    u = e.parametrizations.weight[0]._u.numpy()
    np.testing.assert_allclose(np.linalg.norm(u), 1.0)
    e.load_state_dict(to_ember(t.state_dict()))  # the same u and v
    x = np.random.RandomState(7).randn(2, *{"Linear": (args[0],), "Conv2d": (2, 5, 5),
                                           "ConvTranspose2d": (2, 4, 4),
                                           "Conv1d": (3, 5)}[layer])
    run_both(t, e, x, steps=2)
    for k, v in t.state_dict().items():
        close(e.state_dict()[k], v)
    t.eval()
    e.eval()
    run_both(t, e, x)
    for k, v in t.state_dict().items():  # no power iteration in eval mode
        close(e.state_dict()[k], v)


def test_spectral_norm_sigma_and_vector_and_errors():
    rng = np.random.RandomState(8)
    e = ember.nn.Linear(6, 4).double()
    PZ.spectral_norm(e, n_power_iterations=50)
    e.weight  # training mode: more iterations
    sigma = np.linalg.svd(e.weight.detach().numpy(), compute_uv=False)[0]
    np.testing.assert_allclose(sigma, 1.0, rtol=1e-8)
    m, mt = ember.nn.Module(), torch.nn.Module()
    value = rng.randn(5)
    m.w = ember.nn.Parameter(ember.tensor(value))
    mt.w = torch.nn.Parameter(torch.tensor(value))
    PZ.spectral_norm(m, "w")
    TPZ.spectral_norm(mt, "w")
    close(m.w, mt.w)
    assert list(m.state_dict()) == list(mt.state_dict())
    with pytest.raises(IndexError, match="Dimension out of range"):
        PZ.spectral_norm(ember.nn.Linear(2, 2), dim=2)
    with pytest.raises(ValueError, match="n_power_iterations"):
        PZ.spectral_norm(ember.nn.Linear(2, 2), n_power_iterations=0)
    with pytest.raises(ValueError, match="no parameter or buffer"):
        PZ.spectral_norm(ember.nn.Linear(2, 2), name="nope")


def test_spectral_norm_training_step_jit_matches_eager():
    ember.manual_seed(0)
    eager = PZ.spectral_norm(ember.nn.Linear(4, 3).double())
    compiled_model = copy.deepcopy(eager)
    x = ember.tensor(np.random.RandomState(9).randn(3, 4))

    def make_step(model):
        opt = ember.optim.SGD(model.parameters(), lr=0.1)

        def step(x):
            opt.zero_grad()
            loss = (model(x) ** 2).sum()
            loss.backward()
            opt.step()
            return loss
        return step

    step_eager, step_jit = make_step(eager), ember.jit(make_step(compiled_model))
    for _ in range(3):
        np.testing.assert_allclose(step_jit(x).item(), step_eager(x).item(), rtol=1e-12)
    for (k, a), (_, b) in zip(eager.state_dict().items(),
                              compiled_model.state_dict().items()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-12, atol=1e-14)
