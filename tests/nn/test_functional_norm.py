"""Normalisation (ember.nn.functional) against PyTorch and finite differences; running
statistics, known values and errors."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ..ops.optable import OpCase, S, generate, nc, needs_torch, rand, torch

TF = None if torch is None else torch.nn.functional

TOL = {"float64": (1e-7, 1e-9), "float32": (1e-5, 1e-5), "float16": (5e-3, 5e-3),
       "bfloat16": (5e-2, 5e-2)}


def layer_norm_samples(rng, dtype):
    r = lambda shape, lo=-2, hi=2: rand(rng, shape, dtype, lo, hi)  # noqa: E731
    return [S(r((3, 4)), (4,), r((4,)), r((4,))),
            S(r((2, 3, 4)), (3, 4), r((3, 4)), r((3, 4)), eps=1e-3),
            S(r((2, 5)), [5]), S(r((2, 5)), [5], r((5,))),
            S(nc(r((4, 3))), (3,), None, r((3,))), S(r((0, 3)), (3,), r((3,)), r((3,))),
            S(r((1, 4)), (1, 4))]


def batch_norm_samples(rng, dtype):
    r = lambda shape, lo=-2, hi=2: rand(rng, shape, dtype, lo, hi)  # noqa: E731
    # running statistics as keyword arguments: buffers, not differentiated
    return [S(r((4, 3)), None, None, r((3,)), r((3,)), training=True),
            S(r((2, 3, 5)), weight=r((3,)), bias=r((3,)), training=True, momentum=0.3,
              eps=1e-3, running_mean=r((3,)), running_var=r((3,), 0.5, 2)),
            S(nc(r((3, 4, 2, 2))), None, None, training=True),
            S(r((2, 3, 2, 2)), weight=r((3,)), running_mean=r((3,)),
              running_var=r((3,), 0.5, 2)),
            S(r((2, 3)), running_mean=r((3,)), running_var=r((3,), 0.5, 2)),
            S(r((2, 2, 2, 2, 2)), None, None, None, r((2,)), training=True)]


def group_norm_samples(rng, dtype):
    r = lambda shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r((2, 6, 3)), 3, r((6,)), r((6,))), S(r((2, 4)), 2),
            S(nc(r((3, 4, 2, 2))), 1, r((4,)), None, 1e-3), S(r((2, 4, 3)), 4, r((4,))),
            S(r((1, 6, 2, 2)), 6, r((6,)), r((6,)))]


def instance_norm_samples(rng, dtype):
    r = lambda shape, lo=-2, hi=2: rand(rng, shape, dtype, lo, hi)  # noqa: E731
    return [S(r((2, 3, 4))), S(r((2, 3, 4, 2)), weight=r((3,)), bias=r((3,))),
            S(nc(r((2, 2, 5))), running_mean=r((2,)), running_var=r((2,), 0.5, 2),
              momentum=0.2),
            S(r((2, 3, 3)), weight=r((3,)), bias=r((3,)), use_input_stats=False,
              running_mean=r((3,)), running_var=r((3,), 0.5, 2))]


def rms_norm_samples(rng, dtype):
    r = lambda shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r((3, 4)), (4,), r((4,))), S(r((2, 3, 4)), [3, 4]),
            S(nc(r((4, 3))), (3,), r((3,)), 1e-3), S(r((0, 2)), (2,), r((2,)))]


def normalize_samples(rng, dtype):
    r = lambda shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r((3, 4))), S(r((2, 3, 4)), p=1.0, dim=-1), S(nc(r((4, 3))), 3.0, 0),
            S(r((5,)), dim=0), S(r((2, 3)), float("inf"), 1)]


def lrn_samples(rng, dtype):
    r = lambda shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r((2, 5, 3)), 3), S(r((1, 4, 2, 2)), 2, 1e-2, 0.5, 2.0),
            S(nc(r((2, 3, 4))), 5)]


CASES = [
    OpCase("layer_norm", F.layer_norm, lambda *a, **k: TF.layer_norm(*a, **k),
           layer_norm_samples, tol=TOL),
    OpCase("batch_norm", F.batch_norm, lambda *a, **k: TF.batch_norm(*a, **k),
           batch_norm_samples, tol=TOL),
    OpCase("group_norm", F.group_norm, lambda *a, **k: TF.group_norm(*a, **k),
           group_norm_samples, tol=TOL),
    OpCase("instance_norm", F.instance_norm, lambda *a, **k: TF.instance_norm(*a, **k),
           instance_norm_samples, tol=TOL),
    OpCase("rms_norm", F.rms_norm, lambda *a, **k: TF.rms_norm(*a, **k), rms_norm_samples,
           tol=TOL),
    OpCase("normalize", F.normalize, lambda *a, **k: TF.normalize(*a, **k), normalize_samples,
           tol=TOL),
    OpCase("local_response_norm", F.local_response_norm,
           lambda *a, **k: TF.local_response_norm(*a, **k), lrn_samples, tol=TOL,
           dtypes=("float32", "float64")),
]

generate(CASES, globals())


# Running statistics ------------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batch_norm_running_stats_match_torch(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 3, 5)).astype(dtype)
    stats = [rng.standard_normal(3).astype(dtype), rng.uniform(0.5, 2, 3).astype(dtype)]
    em, ev = (ember.tensor(s) for s in stats)
    tm, tv = (torch.tensor(s) for s in stats)
    for step in range(3):
        F.batch_norm(ember.tensor(x + step), em, ev, training=True, momentum=0.3)
        TF.batch_norm(torch.tensor(x + step), tm, tv, training=True, momentum=0.3)
    tol = 1e-12 if dtype == "float64" else 1e-6
    np.testing.assert_allclose(em.numpy(), tm.numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(ev.numpy(), tv.numpy(), rtol=tol, atol=tol)
    # the running variance uses the unbiased estimate
    flat = (x + 2).transpose(1, 0, 2).reshape(3, -1)
    assert ev.dtype.name == dtype and flat.var(1, ddof=1).shape == (3,)


def test_batch_norm_running_stats_known_values():
    x = ember.tensor([[1.0], [3.0]])
    mean, var = ember.zeros(1), ember.ones(1)
    y = F.batch_norm(x, mean, var, training=True, momentum=0.5, eps=0.0)
    np.testing.assert_allclose(y.numpy(), [[-1.0], [1.0]])
    np.testing.assert_allclose(mean.numpy(), [1.0])   # 0.5 * 0 + 0.5 * 2
    np.testing.assert_allclose(var.numpy(), [1.5])    # 0.5 * 1 + 0.5 * 2 (unbiased)
    assert mean._version[0] > 0
    out = F.batch_norm(ember.tensor([[2.0]]), mean, var, training=False, eps=0.0)
    np.testing.assert_allclose(out.numpy(), [[1.0 / np.sqrt(1.5)]], rtol=1e-6)


@needs_torch
def test_instance_norm_running_stats_match_torch():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3, 6))
    em, ev = ember.zeros(3, dtype=ember.float64), ember.ones(3, dtype=ember.float64)
    tm, tv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    F.instance_norm(ember.tensor(x), em, ev, momentum=0.4)
    TF.instance_norm(torch.tensor(x), tm, tv, momentum=0.4)
    np.testing.assert_allclose(em.numpy(), tm.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ev.numpy(), tv.numpy(), rtol=1e-12)


def test_running_stats_are_not_part_of_the_graph():
    x = ember.randn(4, 3, requires_grad=True)
    mean, var = ember.zeros(3), ember.ones(3)
    F.batch_norm(x, mean, var, training=True).sum().backward()
    assert not mean.requires_grad and mean.grad_fn is None and x.grad is not None


# Fused kernels -----------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [
    lambda x, w, b: F.layer_norm(x, (3,), w, b),
    lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
    lambda x, w, b: F.group_norm(x, 3, w, b),
    lambda x, w, b: F.rms_norm(x, (3,), w) + b,
])
def test_fused_backward_equals_graph_building_backward(fn):
    """The one-kernel backward (no graph) and the ember-op backward (create_graph) agree."""
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((4, 3)), rng.standard_normal(3), rng.standard_normal(3)]
    up = ember.tensor(rng.standard_normal((4, 3)))
    grads = []
    for create_graph in (False, True):
        ts = [ember.tensor(a, requires_grad=True) for a in arrays]
        grads.append(ember.autograd.grad(fn(*ts), ts, up, create_graph=create_graph))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12,
                                   atol=1e-12)


def test_layer_norm_grad_fn_names():
    x = ember.randn(2, 3, requires_grad=True)
    assert F.layer_norm(x, (3,)).grad_fn.name() == "NativeLayerNormBackward0"
    assert F.batch_norm(x, None, None, training=True).grad_fn.name() == \
        "NativeBatchNormBackward0"


def test_known_values():
    x = ember.tensor([[1.0, 2.0, 3.0, 6.0]])
    mean, std = 3.0, np.sqrt(3.5)
    np.testing.assert_allclose(F.layer_norm(x, (4,), eps=0.0).numpy(),
                               (x.numpy() - mean) / std, rtol=1e-6)
    np.testing.assert_allclose(F.rms_norm(ember.tensor([[3.0, 4.0]]), (2,), eps=0.0).numpy(),
                               [[3 / np.sqrt(12.5), 4 / np.sqrt(12.5)]], rtol=1e-6)
    np.testing.assert_allclose(F.normalize(ember.tensor([[3.0, 4.0]])).numpy(), [[0.6, 0.8]])
    np.testing.assert_allclose(F.normalize(ember.zeros(1, 2)).numpy(), [[0.0, 0.0]])
    g = F.group_norm(ember.tensor([[1.0, 3.0, 10.0, 20.0]]), 2, eps=0.0)
    np.testing.assert_allclose(g.numpy(), [[-1.0, 1.0, -1.0, 1.0]], rtol=1e-6)


def test_rms_norm_default_eps_is_the_dtype_epsilon():
    x = ember.tensor([[1e-5, 0.0]], dtype=ember.float32)
    eps = float(np.finfo(np.float32).eps)
    expected = 1e-5 / np.sqrt(1e-10 / 2 + eps)
    np.testing.assert_allclose(F.rms_norm(x, (2,)).numpy()[0, 0], expected, rtol=1e-5)


# Errors -------------------------------------------------------------------------------------
def test_errors():
    with pytest.raises(ember.ShapeError, match=r"layer_norm: given normalized_shape=\[5\]"):
        F.layer_norm(ember.ones(2, 3), (5,))
    with pytest.raises(ember.ShapeError, match=r"layer_norm: expected weight of shape \(3,\)"):
        F.layer_norm(ember.ones(2, 3), (3,), ember.ones(4))
    with pytest.raises(ember.EmberValueError, match="more than 1 value per channel"):
        F.batch_norm(ember.ones(1, 3), None, None, training=True)
    with pytest.raises(ember.EmberError, match="running_mean and running_var must be defined"):
        F.batch_norm(ember.ones(2, 3), None, None)
    with pytest.raises(ember.ShapeError, match=r"batch_norm: expected running_mean of shape"):
        F.batch_norm(ember.ones(2, 3), ember.zeros(4), ember.ones(4), training=True)
    with pytest.raises(ember.ShapeError, match="divisible by num_groups"):
        F.group_norm(ember.ones(2, 6, 3), 4)
    with pytest.raises(ember.EmberValueError, match="more than 1 spatial element"):
        F.instance_norm(ember.ones(2, 3, 1))
    with pytest.raises(ember.EmberError, match="floating-point"):
        F.layer_norm(ember.ones(2, 3, dtype=ember.int64), (3,))
    with pytest.raises(ember.ShapeError, match="at least 2 dims"):
        F.batch_norm(ember.ones(3), None, None, training=True)
