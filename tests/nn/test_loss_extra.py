"""F.gumbel_softmax, F.triplet_margin_with_distance_loss (and its module), the deprecated
F.upsample* aliases, and nn.AdaptiveLogSoftmaxWithLoss, against PyTorch."""
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.errors import EmberError, EmberIndexError, EmberValueError, ShapeError
from ember.ops import loss_extra
from .module_template import run_module_test

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = {"float64": (1e-10, 1e-12), "float32": (1e-5, 1e-6)}


def _close(actual, expected, dtype="float64", what=""):
    rtol, atol = TOL[dtype]
    expected = expected.detach().numpy() if isinstance(expected, torch.Tensor) else expected
    actual = actual.detach().numpy() if isinstance(actual, ember.Tensor) else actual
    assert actual.shape == expected.shape, what
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what)


def _pair(a, dtype="float64", grad=True):
    a = np.asarray(a, dtype=dtype)
    return (ember.tensor(a).requires_grad_(grad), torch.tensor(a).requires_grad_(grad))


# gumbel_softmax --------------------------------------------------------------------------
def _fixed_noise(monkeypatch, noise):
    monkeypatch.setattr(loss_extra, "_gumbel_noise", lambda logits: ember.tensor(noise))


@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize("dim, tau", [(-1, 1.0), (0, 0.5), (1, 2.0)])
def test_gumbel_softmax_math_with_fixed_noise(monkeypatch, hard, dim, tau):
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((3, 5, 4))
    noise = -np.log(rng.exponential(size=logits.shape))
    _fixed_noise(monkeypatch, noise)
    e, t = _pair(logits)
    y = F.gumbel_softmax(e, tau=tau, hard=hard, dim=dim)
    soft = torch.softmax((t + torch.tensor(noise)) / tau, dim)
    if hard:
        index = soft.argmax(dim, keepdim=True)
        expected = torch.zeros_like(soft).scatter_(dim, index, 1.0) - soft.detach() + soft
    else:
        expected = soft
    _close(y, expected)
    upstream = rng.standard_normal(logits.shape)
    y.backward(ember.tensor(upstream))
    expected.backward(torch.tensor(upstream))
    _close(e.grad, t.grad)
    assert np.abs(e.grad.numpy()).max() > 1e-3


def test_gumbel_softmax_structure_and_seeding():
    logits = ember.tensor(np.random.default_rng(1).standard_normal((6, 7))).requires_grad_()
    ember.manual_seed(3)
    soft = F.gumbel_softmax(logits, tau=0.7)
    np.testing.assert_allclose(soft.detach().numpy().sum(-1), 1.0, rtol=1e-12)
    assert (soft.detach().numpy() > 0).all()
    ember.manual_seed(3)
    hard = F.gumbel_softmax(logits, tau=0.7, hard=True)
    values = hard.detach().numpy()
    np.testing.assert_allclose(values, np.round(values), atol=1e-12)
    np.testing.assert_allclose(values.sum(-1), 1.0, atol=1e-12)
    # the same seed: the same noise, so the hard sample is the soft sample's argmax ...
    np.testing.assert_array_equal(values.argmax(-1), soft.detach().numpy().argmax(-1))
    # ... and its gradient is the soft sample's
    upstream = ember.tensor(np.random.default_rng(2).standard_normal((6, 7)))
    (g_hard,) = ember.autograd.grad((hard * upstream).sum(), logits)
    (g_soft,) = ember.autograd.grad((soft * upstream).sum(), logits)
    np.testing.assert_allclose(g_hard.numpy(), g_soft.numpy(), rtol=1e-12)
    ember.manual_seed(4)
    other = F.gumbel_softmax(logits, tau=0.7)
    assert np.abs(other.detach().numpy() - soft.detach().numpy()).max() > 1e-3


def test_gumbel_softmax_samples_the_softmax_distribution():
    """Gumbel-max: the argmax of a sample is distributed as softmax(logits)."""
    probs = np.array([0.5, 0.3, 0.15, 0.05])
    logits = ember.tensor(np.tile(np.log(probs), (20000, 1)))
    ember.manual_seed(0)
    counts = F.gumbel_softmax(logits, hard=True).numpy().sum(0) / 20000
    np.testing.assert_allclose(counts, probs, atol=0.015)


def test_gumbel_softmax_jit_and_eps_warning():
    x = ember.tensor(np.random.default_rng(5).standard_normal((4, 6)), dtype=ember.float32)
    ember.manual_seed(7)
    eager = F.gumbel_softmax(x, tau=0.5, hard=True)
    ember.manual_seed(7)
    compiled = ember.jit(lambda v: F.gumbel_softmax(v, tau=0.5, hard=True))(x)
    np.testing.assert_array_equal(compiled.numpy(), eager.numpy())
    assert eager.dtype == ember.float32
    with pytest.warns(UserWarning, match="eps"):
        F.gumbel_softmax(x, eps=1e-5)
    with pytest.raises(EmberError, match="floating"):
        F.gumbel_softmax(ember.tensor([1, 2]))


# triplet_margin_with_distance_loss --------------------------------------------------------
def _cosine_distance(lib):
    def distance(x, y):
        return 1.0 - lib.cosine_similarity(x, y)
    return distance


def _l1_distance(x, y):
    return (x - y).abs().sum(-1)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("distance", [None, "cosine", "l1"])
@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_triplet_margin_with_distance_loss(distance, swap, reduction, dtype):
    rng = np.random.default_rng(6)
    shape = (5, 4) if distance != "l1" else (4,)
    inputs = [_pair(rng.standard_normal(shape), dtype) for _ in range(3)]
    dist = {"cosine": (_cosine_distance(F), _cosine_distance(TF)),
            "l1": (_l1_distance, _l1_distance), None: (None, None)}[distance]
    kwargs = dict(margin=1.5, swap=swap, reduction=reduction)
    e = F.triplet_margin_with_distance_loss(*[p[0] for p in inputs],
                                            distance_function=dist[0], **kwargs)
    t = TF.triplet_margin_with_distance_loss(*[p[1] for p in inputs],
                                             distance_function=dist[1], **kwargs)
    _close(e, t, dtype)
    upstream = rng.standard_normal(tuple(t.shape)).astype(dtype)
    e.backward(ember.tensor(upstream))
    t.backward(torch.tensor(upstream))
    for (ei, ti), name in zip(inputs, ("anchor", "positive", "negative")):
        _close(ei.grad, ti.grad, dtype, f"grad of {name}")
    e_mod = ember.nn.TripletMarginWithDistanceLoss(distance_function=dist[0], **kwargs)
    t_mod = torch.nn.TripletMarginWithDistanceLoss(distance_function=dist[1], **kwargs)
    _close(e_mod(*[p[0] for p in inputs]), t_mod(*[p[1] for p in inputs]), dtype)


def test_triplet_margin_with_distance_loss_errors():
    a = ember.zeros(2, 3)
    with pytest.raises(EmberValueError, match="margin"):
        F.triplet_margin_with_distance_loss(a, a, a, margin=0.0)
    with pytest.raises(EmberValueError, match="reduction"):
        F.triplet_margin_with_distance_loss(a, a, a, reduction="batchmean")
    with pytest.raises(ShapeError, match="anchor 2D, positive 2D, and negative 1D"):
        F.triplet_margin_with_distance_loss(a, a, ember.zeros(3))


# upsample aliases -------------------------------------------------------------------------
UPSAMPLE = [
    ("upsample", (2, 3, 5), dict(scale_factor=2)),
    ("upsample", (2, 3, 5), dict(size=7, mode="linear")),
    ("upsample", (1, 2, 3, 4), dict(scale_factor=1.5, mode="bilinear", align_corners=True)),
    ("upsample", (1, 2, 3, 4), dict(size=(5, 6), mode="bicubic")),
    ("upsample", (1, 1, 2, 3, 2), dict(scale_factor=2, mode="trilinear")),
    ("upsample_nearest", (1, 2, 3, 4), dict(scale_factor=3)),
    ("upsample_nearest", (1, 2, 2, 3, 2), dict(size=(3, 4, 5))),
    ("upsample_bilinear", (2, 2, 3, 4), dict(scale_factor=2)),
    ("upsample_bilinear", (1, 3, 1, 4), dict(size=(3, 7))),
]


@pytest.mark.parametrize("name, shape, kwargs", UPSAMPLE)
def test_upsample_aliases(name, shape, kwargs):
    rng = np.random.default_rng(7)
    e, t = _pair(rng.standard_normal(shape))
    with pytest.warns(UserWarning, match=f"nn.functional.{name}` is deprecated"):
        out = getattr(F, name)(e, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = getattr(TF, name)(t, **kwargs)
    _close(out, expected)
    upstream = rng.standard_normal(tuple(expected.shape))
    out.backward(ember.tensor(upstream))
    expected.backward(torch.tensor(upstream))
    _close(e.grad, t.grad)


def test_upsample_bilinear_aligns_corners():
    x = ember.tensor([[[[0.0, 1.0]]]])
    with pytest.warns(UserWarning):
        out = F.upsample_bilinear(x, size=(1, 3))
    np.testing.assert_allclose(out.numpy(), [[[[0.0, 0.5, 1.0]]]])


# AdaptiveLogSoftmaxWithLoss -----------------------------------------------------------------
ASM_CASES = [  # in_features, n_classes, cutoffs, div_value, head_bias, batch
    (16, 50, [5, 20, 35], 2.0, True, 12),
    (8, 30, [10], 4.0, False, 7),
    (12, 20, [3, 4, 10], 1.5, False, 1),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", ASM_CASES)
def test_adaptive_log_softmax_module(case, dtype):
    in_features, n_classes, cutoffs, div_value, head_bias, batch = case
    rng = np.random.default_rng(in_features)
    args = (in_features, n_classes, cutoffs, div_value, head_bias)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zero-element projections warn in both
        e_mod, t_mod = ember.nn.AdaptiveLogSoftmaxWithLoss(*args), \
            torch.nn.AdaptiveLogSoftmaxWithLoss(*args)
    x = rng.standard_normal((batch, in_features))
    target = rng.integers(0, n_classes, batch)
    target[0] = n_classes - 1                               # the last cluster is used
    run_module_test(e_mod, t_mod, [x, target], dtype=dtype)
    run_module_test(e_mod, t_mod, [x[0], np.array(target[0])], dtype=dtype)   # unbatched


def _loaded_pair(*args, **kwargs):
    t_mod = torch.nn.AdaptiveLogSoftmaxWithLoss(*args, **kwargs).double()
    e_mod = ember.nn.AdaptiveLogSoftmaxWithLoss(*args, **kwargs).double()
    e_mod.load_state_dict({k: ember.tensor(v.numpy()) for k, v in t_mod.state_dict().items()})
    return e_mod, t_mod


def test_adaptive_log_softmax_log_prob_and_predict():
    rng = np.random.default_rng(8)
    e_mod, t_mod = _loaded_pair(10, 40, [4, 15, 30], div_value=2.0, head_bias=True)
    assert list(e_mod.state_dict()) == list(t_mod.state_dict()) == [
        "head.weight", "head.bias", "tail.0.0.weight", "tail.0.1.weight", "tail.1.0.weight",
        "tail.1.1.weight", "tail.2.0.weight", "tail.2.1.weight"]
    e, t = _pair(rng.standard_normal((9, 10)) * 3)
    log_prob = e_mod.log_prob(e)
    _close(log_prob, t_mod.log_prob(t))
    np.testing.assert_allclose(np.exp(log_prob.detach().numpy()).sum(1), 1.0, rtol=1e-12)
    with torch.no_grad(), ember.no_grad():
        np.testing.assert_array_equal(e_mod.predict(e).numpy(), t_mod.predict(t).numpy())
        # all rows in the shortlist, and all rows in a cluster (the head's bias decides)
        for column in (0, 5):
            e_mod.head.bias.fill_(0.0)
            e_mod.head.bias[column] = 100.0
            t_mod.head.bias.fill_(0.0)
            t_mod.head.bias[column] = 100.0
            expected = t_mod.predict(t).numpy()
            np.testing.assert_array_equal(e_mod.predict(e).numpy(), expected)
            np.testing.assert_array_equal(e_mod.log_prob(e).numpy().argmax(1), expected)
            assert (expected < 4).all() if column == 0 else (expected >= 15).all()


def test_adaptive_log_softmax_errors_and_jit():
    with pytest.raises(EmberValueError, match="larger than 0"):
        ember.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [])
    for cutoffs in ([5, 3], [0, 5], [5, 20], [5, 5], [2.5]):
        with pytest.raises(EmberValueError, match="cutoffs"):
            ember.nn.AdaptiveLogSoftmaxWithLoss(8, 20, cutoffs)
    asm = ember.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [5, 10])
    x = ember.randn(4, 8)
    with pytest.raises(EmberIndexError, match=r"\[0, 19\]"):
        asm(x, ember.tensor([0, 3, 20, 1]))
    with pytest.raises(ShapeError, match="same batch size"):
        asm(x, ember.tensor([0, 3, 2]))
    with pytest.raises(ShapeError, match="1-D input"):
        asm(x, ember.tensor(3))
    with pytest.raises(ShapeError, match="multi-target"):
        asm(x, ember.zeros(4, 1, dtype=ember.int64))
    # the forward selects rows by value: ember.jit says it cannot trace it
    with pytest.raises(EmberError, match="nonzero"):
        ember.jit(lambda v, t: asm(v, t).loss)(x, ember.tensor([0, 3, 12, 1]))
    compiled = ember.jit(asm.log_prob)(x)
    np.testing.assert_allclose(compiled.detach().numpy(), asm.log_prob(x).detach().numpy(), rtol=1e-5,
                               atol=1e-6)
