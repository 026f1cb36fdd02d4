"""Lazy modules against PyTorch: placeholders until the first forward, then the ordinary
layer with the same shapes, state-dict keys and initialisation, values and gradients."""
import copy

import numpy as np
import pytest

import ember
from ember.nn import UninitializedBuffer, UninitializedParameter

torch = pytest.importorskip("torch")

CASES = [  # (lazy class, args, kwargs, input shape, the class it becomes)
    ("LazyLinear", (3,), {}, (4, 5), "Linear"),
    ("LazyLinear", (2,), {"bias": False}, (2, 3, 1), "Linear"),
    ("LazyConv1d", (4, 3), {"padding": 1, "groups": 2}, (2, 6, 7), "Conv1d"),
    ("LazyConv1d", (3, 2), {}, (4, 5), "Conv1d"),  # unbatched
    ("LazyConv2d", (4, 3), {"stride": 2, "bias": False}, (2, 3, 7, 7), "Conv2d"),
    ("LazyConv3d", (2, 2), {}, (1, 3, 4, 4, 4), "Conv3d"),
    ("LazyConvTranspose1d", (4, 3), {"stride": 2, "output_padding": 1}, (2, 3, 5),
     "ConvTranspose1d"),
    ("LazyConvTranspose2d", (4, 3), {"groups": 2}, (1, 4, 3, 3), "ConvTranspose2d"),
    ("LazyConvTranspose3d", (2, 2), {}, (1, 3, 2, 2, 2), "ConvTranspose3d"),
    ("LazyBatchNorm1d", (), {}, (6, 3), "BatchNorm1d"),
    ("LazyBatchNorm1d", (), {"affine": False, "momentum": None}, (4, 3, 5), "BatchNorm1d"),
    ("LazyBatchNorm2d", (), {}, (4, 3, 2, 2), "BatchNorm2d"),
    ("LazyBatchNorm3d", (), {"track_running_stats": False}, (2, 3, 2, 2, 2), "BatchNorm3d"),
    ("LazyInstanceNorm1d", (), {}, (2, 3, 5), "InstanceNorm1d"),
    ("LazyInstanceNorm2d", (), {"affine": False}, (2, 3, 4, 4), "InstanceNorm2d"),
    ("LazyInstanceNorm3d", (), {"track_running_stats": False}, (1, 2, 3, 3, 3),
     "InstanceNorm3d"),
]
IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


def to_ember(sd):
    return {k: ember.tensor(v.detach().numpy().copy()) for k, v in sd.items()}


def close(e, t, tol=1e-10):
    e = e.detach().numpy() if isinstance(e, ember.Tensor) else np.asarray(e)
    np.testing.assert_allclose(e, t.detach().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("name,args,kwargs,shape,becomes", CASES, ids=IDS)
def test_lazy_module_matches_torch(name, args, kwargs, shape, becomes):
    t = getattr(torch.nn, name)(*args, dtype=torch.float64, **kwargs)
    e = getattr(ember.nn, name)(*args, dtype=ember.float64, **kwargs)
    assert repr(e) == repr(t)
    assert e.has_uninitialized_params() and type(e).__name__ == name
    assert list(e.state_dict()) == list(t.state_dict())
    for (nt, pt), (ne, pe) in zip(t.named_parameters(), e.named_parameters()):
        assert nt == ne and type(pe) is UninitializedParameter and pe.requires_grad
        assert pe.dtype == ember.float64
    x = np.random.RandomState(0).randn(*shape)
    xt, xe = torch.tensor(x, requires_grad=True), ember.tensor(x, requires_grad=True)
    yt = t(xt)
    ember.manual_seed(0)
    ye = e(xe)
    assert type(e) is getattr(ember.nn, becomes) and type(t).__name__ == becomes
    assert repr(e) == repr(t) and not hasattr(e, "has_uninitialized_params")
    assert "_initialize_hook" not in e.__dict__ and not e._forward_pre_hooks
    assert [(k, tuple(v.shape), str(v.dtype).split(".")[-1]) for k, v in
            e.state_dict().items()] == \
        [(k, tuple(v.shape), str(v.dtype).split(".")[-1]) for k, v in t.state_dict().items()]
    for p in e.parameters():
        assert type(p) is ember.nn.Parameter
    for b in e.buffers():
        assert type(b) is ember.Tensor
    # initialised as the ordinary layer: the same draws as that layer after the same seed
    ember.manual_seed(0)
    ref = getattr(ember.nn, becomes)(*_full_args(e, becomes), dtype=ember.float64, **kwargs)
    for (_, p), (_, q) in zip(e.named_parameters(), ref.named_parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    # with torch's weights: the same outputs and gradients
    e.load_state_dict(to_ember(t.state_dict()))
    yt, ye = t(xt), e(xe)
    close(ye, yt)
    g = np.random.RandomState(1).randn(*yt.shape)
    yt.backward(torch.tensor(g))
    ye.backward(ember.tensor(g))
    close(xe.grad, xt.grad)
    for (_, pt), (_, pe) in zip(t.named_parameters(), e.named_parameters()):
        close(pe.grad, pt.grad)


def _full_args(module, becomes):
    if becomes == "Linear":
        return (module.in_features, module.out_features)
    if becomes.startswith("Conv"):
        return (module.in_channels, module.out_channels, module.kernel_size)
    return (module.num_features,)


def test_optimizer_built_before_the_first_forward():
    t = torch.nn.LazyLinear(2, dtype=torch.float64)
    e = ember.nn.LazyLinear(2, dtype=ember.float64)
    opt_t = torch.optim.SGD(t.parameters(), lr=0.1)
    opt_e = ember.optim.SGD(e.parameters(), lr=0.1)
    x = np.random.RandomState(2).randn(4, 3)
    t(torch.tensor(x))
    e(ember.tensor(x))
    e.load_state_dict(to_ember(t.state_dict()))
    for _ in range(3):
        opt_t.zero_grad()
        opt_e.zero_grad()
        (t(torch.tensor(x)) ** 2).sum().backward()
        (e(ember.tensor(x)) ** 2).sum().backward()
        opt_t.step()
        opt_e.step()
    close(e.weight, t.weight)
    close(e.bias, t.bias)
    adam = ember.optim.Adam(ember.nn.LazyLinear(2).parameters())  # built on placeholders
    assert len(adam.param_groups[0]["params"]) == 2


def test_uninitialized_errors():
    m = ember.nn.LazyLinear(3)
    with pytest.raises(ValueError, match="uninitialized parameter"):
        m.weight + 1
    with pytest.raises(ValueError, match="uninitialized parameter"):
        m.weight.numel()
    with pytest.raises(RuntimeError, match="Can't access the shape"):
        m.weight.shape
    with pytest.raises(ValueError, match="uninitialized"):
        ember.nn.utils.parameters_to_vector(m.parameters())
    with pytest.raises(RuntimeError, match="Can't access the shape"):
        ember.nn.Linear(4, 3).load_state_dict(ember.nn.LazyLinear(3).state_dict())
    with pytest.raises(ValueError, match="uninitialized"):
        ember.nn.utils.weight_norm(m)
    assert repr(m.weight) == "<UninitializedParameter>"
    with pytest.raises(ValueError, match="uninitialized"):
        ember.save(m.state_dict(), "/nonexistent-dir/never-written.safetensors")
    with pytest.raises(ValueError, match="divisible by groups"):
        ember.nn.LazyConv2d(4, 3, groups=2)(ember.randn(1, 3, 5, 5))
    with pytest.raises(RuntimeError, match="Expected 3D .unbatched. or 4D .batched. input"):
        ember.nn.LazyConv2d(4, 3)(ember.randn(3, 5))
    with pytest.raises(TypeError):
        ember.nn.LazyLinear(3)(ember.randn(2, 4), ember.randn(1))
    lazy = ember.nn.LazyLinear(3)
    with pytest.raises(RuntimeError, match="initialised while ember.jit traces"):
        ember.jit(lambda x: lazy(x).sum())(ember.randn(2, 4))
    assert lazy.has_uninitialized_params()


def test_state_dict_loading_and_copies():
    m = ember.nn.LazyConv2d(4, 3)
    ref = ember.nn.Conv2d(2, 4, 3)
    assert not m.load_state_dict(ref.state_dict()).missing_keys
    assert not m.has_uninitialized_params() and type(m) is ember.nn.LazyConv2d
    x = ember.randn(1, 2, 5, 5)
    np.testing.assert_allclose(m(x).detach().numpy(), ref(x).detach().numpy())
    assert type(m) is ember.nn.Conv2d and m.in_channels == 2
    lazy = ember.nn.LazyBatchNorm1d()
    result = lazy.load_state_dict(ember.nn.LazyBatchNorm1d().state_dict())  # placeholders
    assert not result.missing_keys and lazy.has_uninitialized_params()
    result = lazy.load_state_dict({}, strict=False)
    assert result.missing_keys == ["weight", "bias", "running_mean", "running_var",
                                   "num_batches_tracked"]
    c = copy.deepcopy(ember.nn.LazyLinear(3))
    assert type(c.weight) is UninitializedParameter and c.has_uninitialized_params()
    c(ember.randn(2, 4))
    assert c.weight.shape == (3, 4)


def test_to_dtype_before_the_first_forward_and_placeholders():
    m = ember.nn.LazyBatchNorm1d().double()
    assert m.weight.dtype == ember.float64 and m.running_mean.dtype == ember.float64
    assert type(m.running_mean) is UninitializedBuffer and not m.running_mean.requires_grad
    assert m.num_batches_tracked.dtype == ember.int64
    m(ember.randn(4, 3, dtype=ember.float64))
    assert m.running_mean.dtype == ember.float64 and m.running_mean.shape == (3,)
    p = UninitializedParameter()
    p.materialize((2, 3), dtype=ember.float64)
    assert type(p) is ember.nn.Parameter and p.shape == (2, 3) and p.dtype == ember.float64
    b = UninitializedBuffer()
    b.materialize(4)
    assert type(b) is ember.Tensor and b.shape == (4,) and not b.requires_grad


def test_unbatched_instance_norm_reads_the_channel_dim():
    m = ember.nn.LazyInstanceNorm1d()
    y = m(ember.randn(3, 5))
    assert m.num_features == 3 and y.shape == (3, 5)
