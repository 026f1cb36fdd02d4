"""nn.init and the layers' default initialisation, against PyTorch."""
import math

import numpy as np
import pytest

import ember
from ember import nn
from ember.nn import init

torch = pytest.importorskip("torch")
tnn = torch.nn


def test_calculate_gain_matches_torch():
    for name in ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose2d", "sigmoid", "tanh",
                 "relu", "leaky_relu", "selu"]:
        assert init.calculate_gain(name) == tnn.init.calculate_gain(name)
    assert init.calculate_gain("leaky_relu", 0.2) == tnn.init.calculate_gain("leaky_relu", 0.2)
    assert init.calculate_gain("leaky_relu", 3) == tnn.init.calculate_gain("leaky_relu", 3)
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swish")
    with pytest.raises(ValueError, match="not a valid number"):
        init.calculate_gain("leaky_relu", True)


@pytest.mark.parametrize("shape", [(3, 4), (5, 2, 3), (6, 4, 3, 2), (2, 3, 1, 2, 2), (4, 0)])
def test_fan_in_and_fan_out_match_torch(shape):
    assert init._calculate_fan_in_and_fan_out(ember.empty(shape)) == \
        tnn.init._calculate_fan_in_and_fan_out(torch.empty(shape))


def test_fan_errors():
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(ember.empty(5))
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_normal_(ember.empty(3, 3), mode="fan_avg")
    with pytest.warns(UserWarning, match="zero-element"):
        init.kaiming_uniform_(ember.empty(0, 3))


def _stats(t):
    a = t.detach().numpy().astype(np.float64).ravel()
    return a.mean(), a.std(), a.min(), a.max()


def _check_normal_like(sample, mean, std, n_sigma=5.0):
    m, s, _, _ = _stats(sample)
    n = sample.numel()
    assert abs(m - mean) < n_sigma * std / math.sqrt(n)
    assert abs(s - std) < n_sigma * std / math.sqrt(2 * n) * 1.5


def test_uniform_normal_constant():
    ember.manual_seed(0)
    x = init.uniform_(ember.empty(200, 300), -2.0, 3.0)
    m, s, lo, hi = _stats(x)
    assert -2.0 <= lo and hi < 3.0 and abs(m - 0.5) < 0.02 and abs(s - 5 / math.sqrt(12)) < 0.01
    _check_normal_like(init.normal_(ember.empty(300, 300), 1.0, 0.5), 1.0, 0.5)
    assert init.constant_(ember.empty(2, 2), 0.3).tolist() == [[0.3, 0.3]] * 2 or \
        np.allclose(init.constant_(ember.empty(2, 2), 0.3).numpy(), 0.3)
    assert init.ones_(ember.empty(3)).tolist() == [1.0] * 3
    assert init.zeros_(ember.ones(3)).tolist() == [0.0] * 3
    g = ember.Generator().manual_seed(3)
    a = init.normal_(ember.empty(5), generator=g).tolist()
    b = init.normal_(ember.empty(5), generator=ember.Generator().manual_seed(3)).tolist()
    assert a == b


def test_init_records_no_graph_on_parameters():
    p = nn.Parameter(ember.empty(3, 4))
    for fn in (init.uniform_, init.normal_, init.xavier_uniform_, init.kaiming_normal_,
               init.orthogonal_, init.trunc_normal_, init.zeros_, init.eye_):
        assert fn(p) is p and p.is_leaf and p.grad_fn is None


def test_erfinv_is_accurate():
    y = np.concatenate([np.linspace(-0.999999, 0.999999, 2001), [0.0, 1e-12, -0.5]])
    ours = init._erfinv(ember.tensor(y)).numpy()
    np.testing.assert_allclose(ours, torch.erfinv(torch.tensor(y)).numpy(), rtol=1e-12,
                               atol=1e-14)
    ends = init._erfinv(ember.tensor([-1.0, 1.0, 2.0])).tolist()
    assert ends[:2] == [-math.inf, math.inf] and math.isnan(ends[2])


@pytest.mark.parametrize("mean,std,a,b", [(0.0, 1.0, -2.0, 2.0), (0.5, 0.02, 0.46, 0.6),
                                          (0.0, 1.0, 0.0, 5.0), (2.0, 3.0, -1.0, 100.0)])
def test_trunc_normal_matches_torch_statistics(mean, std, a, b):
    ember.manual_seed(1)
    torch.manual_seed(1)
    ours = init.trunc_normal_(ember.empty(400, 250, dtype=ember.float64), mean, std, a, b)
    ref = tnn.init.trunc_normal_(torch.empty(400, 250, dtype=torch.float64), mean, std, a, b)
    m, s, lo, hi = _stats(ours)
    rm, rs = ref.mean().item(), ref.std().item()
    assert a <= lo and hi <= b
    n = ours.numel()
    assert abs(m - rm) < 6 * rs / math.sqrt(n)
    assert abs(s - rs) < 6 * rs / math.sqrt(n)
    assert init.trunc_normal_(ember.empty(10, dtype=ember.float32)).dtype is ember.float32


def test_xavier_and_kaiming_scales():
    ember.manual_seed(2)
    w = ember.empty(300, 200, 2)
    fan_in, fan_out = 400, 600
    _, _, lo, hi = _stats(init.xavier_uniform_(w, gain=2.0))
    bound = 2.0 * math.sqrt(6 / (fan_in + fan_out))
    assert -bound <= lo and hi <= bound and hi > 0.99 * bound
    _check_normal_like(init.xavier_normal_(w), 0.0, math.sqrt(2 / (fan_in + fan_out)))
    _, _, lo, hi = _stats(init.kaiming_uniform_(w, a=math.sqrt(5)))
    bound = math.sqrt(6 / ((1 + 5) * fan_in))
    assert -bound <= lo and hi <= bound and hi > 0.99 * bound
    _check_normal_like(init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu"), 0.0,
                       math.sqrt(2 / fan_out))


@pytest.mark.parametrize("shape", [(4, 7), (7, 4), (3, 2, 2), (5, 5)])
def test_orthogonal(shape):
    ember.manual_seed(3)
    w = init.orthogonal_(ember.empty(shape, dtype=ember.float64), gain=1.5).numpy()
    flat = w.reshape(shape[0], -1)
    small = min(flat.shape)
    gram = flat @ flat.T if flat.shape[0] == small else flat.T @ flat
    np.testing.assert_allclose(gram, 2.25 * np.eye(small), atol=1e-12)
    with pytest.raises(ValueError, match="2 or more dimensions"):
        init.orthogonal_(ember.empty(3))


def test_eye_dirac_sparse_match_torch():
    assert np.array_equal(init.eye_(ember.empty(3, 5)).numpy(),
                          tnn.init.eye_(torch.empty(3, 5)).numpy())
    for shape, groups in [((4, 3, 3), 1), ((6, 2, 3, 3), 2), ((2, 2, 3, 3, 3), 1)]:
        assert np.array_equal(init.dirac_(ember.empty(shape), groups).numpy(),
                              tnn.init.dirac_(torch.empty(shape), groups).numpy())
    with pytest.raises(ValueError, match="3, 4, or 5"):
        init.dirac_(ember.empty(3, 3))
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
        init.eye_(ember.empty(3))
    w = init.sparse_(ember.empty(10, 30), sparsity=0.3).numpy()
    assert np.all((w == 0).sum(0) >= 3)


# Default initialisation of every layer with parameters --------------------------------------
LAYERS = [
    ("Linear", (400, 300), {}), ("Linear", (3, 5000), {}), ("Bilinear", (30, 20, 40), {}),
    ("Conv1d", (16, 32, 5), {}), ("Conv2d", (16, 32, 3), {"groups": 4}),
    ("Conv3d", (4, 20, 3), {}), ("ConvTranspose1d", (32, 16, 5), {}),
    ("ConvTranspose2d", (32, 16, 3), {"groups": 2}), ("Embedding", (300, 100), {}),
    ("EmbeddingBag", (300, 100), {}), ("PReLU", (20,), {}), ("BatchNorm2d", (30,), {}),
    ("LayerNorm", (30,), {}), ("GroupNorm", (3, 30), {}), ("RMSNorm", (30,), {}),
    ("InstanceNorm2d", (30,), {"affine": True}),
]


@pytest.mark.parametrize("name,args,kwargs", LAYERS, ids=[c[0] + str(c[1]) for c in LAYERS])
def test_default_init_statistics_match_torch(name, args, kwargs):
    ember.manual_seed(0)
    torch.manual_seed(0)
    e = getattr(nn, name)(*args, **kwargs)
    t = getattr(tnn, name)(*args, **kwargs)
    t_params = dict(t.named_parameters())
    assert [n for n, _ in e.named_parameters()] == list(t_params)
    for pname, p in e.named_parameters():
        ours = p.detach().numpy().astype(np.float64).ravel()
        ref = t_params[pname].detach().numpy().astype(np.float64).ravel()
        assert p.dtype is ember.float32 and p.requires_grad
        n = ours.size
        spread = max(ref.std(), 1e-12)
        # Sample means and stds within ~6 standard errors; ranges alike (uniform bounds).
        assert abs(ours.mean() - ref.mean()) < 6 * spread * math.sqrt(2.0 / n) + 1e-7, pname
        assert abs(ours.std() - ref.std()) < 6 * spread * math.sqrt(2.0 / n) + 1e-7, pname
        if ref.std() == 0:
            np.testing.assert_array_equal(ours, ref)
        elif n >= 1000 and ref.min() > -1.0 and ref.max() < 1.0:  # a uniform: same bound
            bound = np.abs(ref).max()
            assert np.abs(ours).max() <= bound * 1.02 and np.abs(ours).max() > bound * 0.9
    for bname, b in e.named_buffers():
        np.testing.assert_array_equal(b.numpy(), dict(t.named_buffers())[bname].numpy())


def test_factory_kwargs():
    m = nn.Linear(3, 2, dtype=ember.float64)
    assert m.weight.dtype is ember.float64 and m.bias.dtype is ember.float64
    assert nn.Conv2d(1, 2, 3, dtype=ember.float64, device="cpu").weight.dtype is ember.float64
    assert nn.BatchNorm1d(3, dtype=ember.float64).running_var.dtype is ember.float64
