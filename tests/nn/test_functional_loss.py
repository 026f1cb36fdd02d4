"""Losses (ember.nn.functional) against PyTorch and finite differences; PyTorch's weighting
rules, known values and errors."""
import math
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ..ops.optable import OpCase, S, generate, nc, needs_torch, rand, torch

TF = None if torch is None else torch.nn.functional

TOL = {"float64": (1e-7, 1e-9), "float32": (1e-5, 1e-5), "float16": (1e-2, 1e-2),
       "bfloat16": (5e-2, 5e-2)}
F32_64 = ("float32", "float64")


def _classes(rng, shape, classes, ignore=False):
    t = rng.integers(0, classes, size=shape)
    if ignore and t.size:
        t.flat[0] = -100
    return t


def cross_entropy_samples(rng, dtype):
    r = lambda shape: rand(rng, shape, dtype, -3, 3)  # noqa: E731
    w = lambda n: rand(rng, (n,), dtype, 0.5, 2.0)  # noqa: E731
    p = lambda shape: rand(rng, shape, dtype, 0.0, 1.0)  # noqa: E731
    return [
        S(r((4, 5)), _classes(rng, (4,), 5)),
        S(r((4, 5)), _classes(rng, (4,), 5, ignore=True), weight=w(5)),
        S(r((4, 5)), _classes(rng, (4,), 5, ignore=True), weight=w(5), label_smoothing=0.2),
        S(r((4, 5)), _classes(rng, (4,), 5), reduction="sum", label_smoothing=0.1),
        S(r((4, 5)), _classes(rng, (4,), 5, ignore=True), reduction="none", weight=w(5),
          label_smoothing=0.3),
        S(r((2, 3, 4, 2)), _classes(rng, (2, 4, 2), 3, ignore=True)),
        S(nc(r((2, 4, 3))), _classes(rng, (2, 3), 4), reduction="none"),
        S(r((5,)), np.array(2)), S(r((5,)), np.array(3), reduction="none", weight=w(5)),
        S(r((3, 4)), _classes(rng, (3,), 4), ignore_index=1),
        S(r((0, 4)), _classes(rng, (0,), 4), reduction="sum"),
        S(r((3, 4)), p((3, 4))), S(r((3, 4)), p((3, 4)), weight=w(4), label_smoothing=0.2),
        S(r((2, 3, 2)), p((2, 3, 2)), reduction="none"), S(r((4,)), p((4,)), reduction="sum"),
    ]


def nll_samples(rng, dtype):
    r = lambda shape: rand(rng, shape, dtype, -3, 0)  # noqa: E731
    return [S(r((4, 5)), _classes(rng, (4,), 5)),
            S(r((4, 5)), _classes(rng, (4,), 5, ignore=True),
              weight=rand(rng, (5,), dtype, 0.5, 2)),
            S(r((2, 3, 4)), _classes(rng, (2, 4), 3), reduction="none"),
            S(r((3,)), np.array(1), reduction="sum")]


def regression_samples(rng, dtype, kwargs=({},)):
    r = lambda shape: rand(rng, shape, dtype, -2, 2)  # noqa: E731
    out = []
    for kw in kwargs:
        out += [S(r((3, 4)), r((3, 4)), **kw), S(r(()), r(()), **kw),
                S(nc(r((4, 3))), r((4, 3)), reduction="none", **kw),
                S(r((2, 3)), r((2, 3)), reduction="sum", **kw)]
    return out


def weighted_samples(rng, dtype):
    r = lambda shape, lo=-2, hi=2: rand(rng, shape, dtype, lo, hi)  # noqa: E731
    return [S(r((3, 4)), r((3, 4)), weight=r((3, 4), 0, 2)),
            S(r((5,)), r((5,)), reduction="sum", weight=r((5,), 0, 2))]


def bce_samples(rng, dtype):
    x = lambda shape: rand(rng, shape, dtype, 0.05, 0.95)  # noqa: E731
    return [S(x((3, 4)), x((3, 4))), S(x((5,)), x((5,)), reduction="none"),
            S(x((2, 3)), x((2, 3)), weight=rand(rng, (3,), dtype, 0.5, 2.0)),
            S(nc(x((4, 3))), x((4, 3)), reduction="sum"), S(x(()), x(()))]


def bce_logits_samples(rng, dtype):
    r = lambda shape: rand(rng, shape, dtype, -4, 4)  # noqa: E731
    p = lambda shape: rand(rng, shape, dtype, 0, 1)  # noqa: E731
    return [S(r((3, 4)), p((3, 4))), S(r((3, 4)), p((3, 4)), pos_weight=p((4,)) + 0.5),
            S(r((2, 3)), p((2, 3)), weight=p((3,)), reduction="sum"),
            S(nc(r((4, 3))), p((4, 3)), reduction="none")]


def kl_samples(rng, dtype):
    r = lambda shape: rand(rng, shape, dtype, -3, 0)  # noqa: E731
    p = lambda shape: rand(rng, shape, dtype, 0.1, 1.0)  # noqa: E731
    return [S(r((3, 4)), p((3, 4)), reduction="batchmean"), S(r((3, 4)), p((3, 4)),
                                                            reduction="sum"),
            S(r((3, 4)), r((3, 4)), reduction="none", log_target=True),
            S(r((5,)), p((5,)), reduction="batchmean")]


def pm_one(rng, shape):
    return rng.choice(np.array([-1, 1]), size=shape)


def cosine_embedding_samples(rng, dtype):
    r = lambda shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r((4, 3)), r((4, 3)), pm_one(rng, (4,))),
            S(r((4, 3)), r((4, 3)), pm_one(rng, (4,)), margin=0.2, reduction="none"),
            S(r((3,)), r((3,)), np.array(1)), S(r((3,)), r((3,)), np.array(-1), margin=-0.5)]


def ranking_samples(rng, dtype):
    r = lambda shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r((5,)), r((5,)), pm_one(rng, (5,))),
            S(r((5,)), r((5,)), pm_one(rng, (5,)), margin=0.3, reduction="sum")]


def hinge_samples(rng, dtype):
    r = lambda shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r((3, 4)), pm_one(rng, (3, 4))),
            S(r((5,)), pm_one(rng, (5,)), margin=0.5, reduction="none")]


def triplet_samples(rng, dtype):
    r = lambda shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r((4, 3)), r((4, 3)), r((4, 3))),
            S(r((4, 3)), r((4, 3)), r((4, 3)), margin=2.0, p=1, swap=True,
              reduction="none"), S(r((3,)), r((3,)), r((3,)))]


def poisson_samples(rng, dtype):
    r = lambda shape: rand(rng, shape, dtype, 0.2, 2)  # noqa: E731
    return [S(r((3, 4)), r((3, 4)) * 2), S(r((3, 4)), r((3, 4)) * 2, log_input=False),
            S(r((3, 4)), r((3, 4)) * 3, full=True, reduction="none")]


def gaussian_samples(rng, dtype):
    r = lambda shape, lo=-2, hi=2: rand(rng, shape, dtype, lo, hi)  # noqa: E731
    return [S(r((3, 4)), r((3, 4)), r((3, 4), 0.2, 2)),
            S(r((3, 4)), r((3, 4)), r((3,), 0.2, 2), full=True),
            S(r((3, 4)), r((3, 4)), r((3, 1), 0.2, 2), reduction="sum"),
            S(r((3, 4)), r((3, 4)), r((3, 4), 0.2, 2), eps=0.1, reduction="none")]


def multilabel_samples(rng, dtype):
    r = lambda shape: rand(rng, shape, dtype)  # noqa: E731
    t = lambda shape: (rng.random(shape) < 0.5).astype(np.dtype(dtype)  # noqa: E731
                                                        if dtype in F32_64 else np.float32)
    return [S(r((3, 4)), t((3, 4))), S(r((3, 4)), t((3, 4)), reduction="none")]


def _torch(name):
    return lambda *a, **k: getattr(TF, name)(*a, **k)


def case(name, samples, dtypes=F32_64, **kw):
    return OpCase(name, getattr(F, name), _torch(name), samples, dtypes=dtypes, tol=TOL, **kw)


CASES = [
    case("cross_entropy", cross_entropy_samples,
         dtypes=("float32", "float64", "float16", "bfloat16")),
    case("nll_loss", nll_samples),
    case("mse_loss", regression_samples),
    case("l1_loss", regression_samples),
    OpCase("weighted_mse_loss", F.mse_loss, _torch("mse_loss"), weighted_samples,
           dtypes=F32_64),
    OpCase("weighted_l1_loss", F.l1_loss, _torch("l1_loss"), weighted_samples, dtypes=F32_64),
    OpCase("weighted_huber_loss", F.huber_loss, _torch("huber_loss"), weighted_samples,
           dtypes=F32_64),
    case("smooth_l1_loss", lambda rng, d: regression_samples(
        rng, d, ({}, {"beta": 0.5}, {"beta": 0.0}))),
    case("huber_loss", lambda rng, d: regression_samples(rng, d, ({}, {"delta": 0.4}))),
    case("binary_cross_entropy", bce_samples),
    case("binary_cross_entropy_with_logits", bce_logits_samples),
    case("kl_div", kl_samples),
    case("cosine_embedding_loss", cosine_embedding_samples),
    case("margin_ranking_loss", ranking_samples),
    case("hinge_embedding_loss", hinge_samples),
    case("soft_margin_loss", lambda rng, d: [S(rand(rng, (3, 4), d), pm_one(rng, (3, 4))),
                                             S(rand(rng, (5,), d), pm_one(rng, (5,)),
                                               reduction="none")]),
    case("triplet_margin_loss", triplet_samples),
    case("poisson_nll_loss", poisson_samples),
    case("gaussian_nll_loss", gaussian_samples),
    case("multilabel_soft_margin_loss", multilabel_samples),
]

warnings.filterwarnings("ignore", message=".*reduction 'mean' divides")
generate(CASES, globals())


# cross_entropy's weighting rules, known values -------------------------------------------
def test_cross_entropy_known_values():
    x = ember.tensor([[2.0, 0.0], [0.0, 0.0]])
    t = ember.tensor([0, 1])
    per_sample = [math.log(1 + math.exp(-2.0)), math.log(2.0)]
    np.testing.assert_allclose(F.cross_entropy(x, t, reduction="none").numpy(), per_sample,
                               rtol=1e-6)
    np.testing.assert_allclose(F.cross_entropy(x, t).item(), np.mean(per_sample), rtol=1e-6)
    # weighted mean divides by the total weight of the targets, not the count
    w = ember.tensor([3.0, 1.0])
    expected = (3 * per_sample[0] + 1 * per_sample[1]) / 4
    np.testing.assert_allclose(F.cross_entropy(x, t, weight=w).item(), expected, rtol=1e-6)
    # an ignored target is left out of the sum and of the denominator
    ignored = F.cross_entropy(x, ember.tensor([0, -100]), weight=w)
    np.testing.assert_allclose(ignored.item(), per_sample[0], rtol=1e-6)


@needs_torch
@pytest.mark.parametrize("spread", [0.0, 200.0])
def test_cross_entropy_rows_far_apart_match_torch(spread):
    """The log-sum-exp shifts by the batch's max logit unless some row lies far below
    it (then by each row's max); both ways match PyTorch, values and gradients."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((6, 11)) * 4).astype(np.float32)
    x += np.linspace(-spread, spread / 2, 6, dtype=np.float32)[:, None]
    t = rng.integers(0, 11, 6)
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out = F.cross_entropy(ex, ember.tensor(t), reduction="none")
    ref = torch.nn.functional.cross_entropy(tx, torch.tensor(t), reduction="none")
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5,
                               atol=1e-5)
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_cross_entropy_all_ignored_is_nan_like_torch():
    x = ember.randn(3, 4)
    t = ember.tensor([-100, -100, -100])
    assert math.isnan(F.cross_entropy(x, t).item())
    assert F.cross_entropy(x, t, reduction="sum").item() == 0.0


def test_cross_entropy_label_smoothing_value():
    x = ember.tensor([[1.0, 2.0, 3.0]])
    logp = x.numpy() - np.log(np.exp(x.numpy()).sum())
    eps = 0.3
    expected = -(1 - eps) * logp[0, 0] - eps / 3 * logp.sum()
    out = F.cross_entropy(x, ember.tensor([0]), label_smoothing=eps)
    np.testing.assert_allclose(out.item(), expected, rtol=1e-6)


def test_cross_entropy_is_one_fused_op_with_a_fused_backward():
    x = ember.randn(4, 5, requires_grad=True)
    loss = F.cross_entropy(x, ember.tensor([0, 1, 2, 3]))
    assert loss.grad_fn.name() == "CrossEntropyLossBackward0"
    loss.backward()
    p = np.exp(x.detach().numpy())
    p /= p.sum(1, keepdims=True)
    p[np.arange(4), [0, 1, 2, 3]] -= 1
    np.testing.assert_allclose(x.grad.numpy(), p / 4, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("kwargs", [{}, {"weight": [0.5, 2.0, 1.0, 1.5, 1.0],
                                         "label_smoothing": 0.2, "ignore_index": 2},
                                    {"reduction": "none", "label_smoothing": 0.1}])
def test_cross_entropy_fused_backward_equals_graph_building_backward(kwargs):
    rng = np.random.default_rng(0)
    kwargs = {k: ember.tensor(v, dtype=ember.float64) if k == "weight" else v
              for k, v in kwargs.items()}
    x0 = rng.standard_normal((6, 5))
    t = ember.tensor(rng.integers(0, 5, 6))
    results = []
    for create_graph in (False, True):
        x = ember.tensor(x0, requires_grad=True)
        out = F.cross_entropy(x, t, **kwargs)
        up = ember.ones(out.shape, dtype=ember.float64)
        results.append(ember.autograd.grad(out, [x], up, create_graph=create_graph)[0])
    np.testing.assert_allclose(results[0].numpy(), results[1].detach().numpy(), rtol=1e-12,
                               atol=1e-14)


def test_binary_cross_entropy_clamps_the_log():
    out = F.binary_cross_entropy(ember.tensor([0.0, 1.0]), ember.tensor([1.0, 0.0]),
                                 reduction="none")
    np.testing.assert_allclose(out.numpy(), [100.0, 100.0])


@needs_torch
def test_binary_cross_entropy_grad_at_the_edges_matches_torch():
    x = np.array([0.0, 1.0, 0.5])
    t = np.array([1.0, 0.0, 0.3])
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    F.binary_cross_entropy(ex, ember.tensor(t)).backward()
    TF.binary_cross_entropy(tx, torch.tensor(t)).backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def test_kl_div_zero_target_contributes_nothing():
    out = F.kl_div(ember.tensor([-1.0, -2.0]), ember.tensor([0.0, 1.0]), reduction="sum")
    np.testing.assert_allclose(out.item(), 2.0)


def test_legacy_reduction_flags():
    x, t = ember.tensor([1.0, 3.0]), ember.tensor([0.0, 0.0])
    with pytest.warns(UserWarning, match="size_average and reduce"):
        total = F.mse_loss(x, t, size_average=False)
    assert total.item() == 10.0
    with pytest.warns(UserWarning):
        assert F.l1_loss(x, t, reduce=False).shape == (2,)


# Errors --------------------------------------------------------------------------------------
def test_cross_entropy_errors():
    x = ember.randn(3, 5)
    with pytest.raises(ember.EmberIndexError,
                       match="cross_entropy: target 7 is out of bounds for 5 classes"):
        F.cross_entropy(x, ember.tensor([1, 7, 2]))
    with pytest.raises(ember.EmberIndexError, match="target -1 is out of bounds"):
        F.cross_entropy(x, ember.tensor([1, -1, 2]))
    with pytest.raises(ember.EmberValueError, match=r"batch_size \(3\) to match target "
                                                    r"batch_size \(4\)"):
        F.cross_entropy(x, ember.tensor([1, 2, 3, 4]))
    with pytest.raises(ember.EmberTypeError, match=r"cross_entropy: expected class-index "
                                                   r"targets of dtype int64.*float32.*\(3,\)"):
        F.cross_entropy(x, ember.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(ember.EmberTypeError, match="int32"):
        F.cross_entropy(x, ember.tensor([1, 2, 3], dtype=ember.int32))
    with pytest.raises(ember.ShapeError, match=r"expected target of shape \(2, 4\)"):
        F.cross_entropy(ember.randn(2, 3, 4), ember.tensor([[0, 1, 2], [0, 1, 2]]))
    with pytest.raises(ember.ShapeError, match="weight to be a 1-D tensor of size 5"):
        F.cross_entropy(x, ember.tensor([0, 1, 2]), weight=ember.ones(4))
    with pytest.raises(ember.EmberValueError, match="'avg' is not a valid value for reduction"):
        F.cross_entropy(x, ember.tensor([0, 1, 2]), reduction="avg")
    with pytest.raises(ember.EmberError, match="label_smoothing must be between"):
        F.cross_entropy(x, ember.tensor([0, 1, 2]), label_smoothing=1.5)
    with pytest.raises(ember.EmberIndexError, match="nll_loss: target 5 is out of bounds"):
        F.nll_loss(x, ember.tensor([0, 5, 1]))


def test_errors_are_catchable_as_in_torch():
    # PyTorch raises ValueError for these; ember's errors subclass it
    with pytest.raises(ValueError):
        F.cross_entropy(ember.randn(3, 5), ember.tensor([1, 2]))
    with pytest.raises(ValueError):
        F.mse_loss(ember.ones(2), ember.ones(2), reduction="mean_of_squares")
    with pytest.raises(IndexError):
        F.nll_loss(ember.randn(2, 3), ember.tensor([0, 3]))


def test_other_loss_errors():
    with pytest.raises(ember.EmberError, match="input should be between 0 and 1"):
        F.binary_cross_entropy(ember.tensor([1.5]), ember.tensor([1.0]))
    with pytest.raises(ember.EmberValueError, match=r"target size \(\(3, 1\)\)"):
        F.binary_cross_entropy(ember.rand(3), ember.rand(3, 1))
    with pytest.raises(ember.EmberValueError, match="weights and input must have the same size"):
        F.mse_loss(ember.ones(3), ember.ones(3), weight=ember.ones(1))
    with pytest.raises(ember.EmberValueError, match="var has negative"):
        F.gaussian_nll_loss(ember.ones(2), ember.ones(2), ember.tensor([1.0, -1.0]))
    with pytest.raises(ember.ShapeError, match="cosine_embedding_loss"):
        F.cosine_embedding_loss(ember.ones(2, 3), ember.ones(2, 4), ember.ones(2))
    with pytest.raises(ember.EmberError, match="kl_div: 'avg' is not a valid"):
        F.kl_div(ember.ones(2), ember.ones(2), reduction="avg")
    with pytest.warns(UserWarning, match="different to the input size"):
        F.mse_loss(ember.ones(2, 3), ember.ones(3))
