"""ember.optim.Adafactor against torch.optim.Adafactor: trajectories for matrices,
batched matrices, vectors and scalars, the factored state, state dicts and resuming,
float32, ember.jit, and the argument errors."""
import numpy as np
import pytest

import ember
from ember import optim
from ember.optim import OptimizerError, lr_scheduler

from .optim_oracle import (Pair, assert_params_close, check_jit_matches_eager,
                           check_trajectory_and_resume, torch)

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the oracle) not installed")

CASES = [
    dict(),
    dict(lr=0.05, beta2_decay=-0.5, eps=(1e-20, 1e-2), d=1.5, weight_decay=0.1,
         maximize=True),
    dict(lr=0.3, eps=(3.0, 1e-3)),  # eps1 large enough to clamp both denominators
    dict(lr=0.1, beta2_decay=0.0, d=3.0, weight_decay=0.01, foreach=False),
]


@needs_torch
@pytest.mark.parametrize("options", CASES, ids=str)
def test_trajectory_state_dict_and_resume_match_torch(options):
    pair = check_trajectory_and_resume(lambda p, lib: lib.Adafactor(p, **options))
    state = pair.eo.state
    assert state[pair.ep[1]]["variance"].shape == (5,)


def test_state_is_factored_over_the_last_two_dims():
    params = [ember.zeros(s, requires_grad=True) for s in [(3, 4), (2, 3, 5), (7,), ()]]
    opt = optim.Adafactor(params)
    for p in params:
        p.grad = ember.ones(p.shape)
    opt.step()
    shapes = [{k: tuple(v.shape) for k, v in opt.state[p].items()} for p in params]
    assert shapes == [{"step": (), "row_var": (3, 1), "col_var": (1, 4)},
                      {"step": (), "row_var": (2, 3, 1), "col_var": (2, 1, 5)},
                      {"step": (), "variance": (7,)},
                      {"step": (), "variance": ()}]


def test_first_step_by_hand():
    # step 1: the second moment is g*g, so the update is sign(g) (RMS 1, not clipped),
    # scaled by alpha = max(eps2, RMS(p)) * min(lr, 1)
    p = ember.tensor([3.0, -4.0, 0.0, 0.0], dtype=ember.float64, requires_grad=True)
    opt = optim.Adafactor([p], lr=0.1)
    p.grad = ember.tensor([0.5, -2.0, 1e-3, -7.0], dtype=ember.float64)
    opt.step()
    alpha = max(1e-3, np.sqrt((9 + 16) / 4)) * 0.1
    np.testing.assert_allclose(p.detach().numpy(), [3 - alpha, -4 + alpha, -alpha, alpha],
                               rtol=1e-12)
    np.testing.assert_allclose(opt.state[p]["variance"].numpy(), [0.25, 4.0, 1e-6, 49.0])


def test_factored_first_step_by_hand_with_eps1_active():
    # small gradients: the row factor's mean is below eps1, so eps1 replaces it (and a
    # large d leaves the update unclipped, which would hide that scale)
    rng = np.random.default_rng(3)
    g = 0.05 * rng.standard_normal((3, 4))
    eps1, eps2, lr = 0.01, 1e-3, 0.1
    p = ember.zeros((3, 4), dtype=ember.float64, requires_grad=True)
    opt = optim.Adafactor([p], lr=lr, eps=(eps1, eps2), d=10.0)
    p.grad = ember.tensor(g)
    opt.step()
    row, col = (g * g).mean(-1, keepdims=True), (g * g).mean(-2, keepdims=True)
    assert row.mean() < eps1
    var = row @ col / max(row.mean(), eps1)
    update = g / np.sqrt(np.maximum(var, eps1 ** 2))
    assert np.sqrt((update ** 2).mean()) < 10.0
    expected = -eps2 * lr * update  # alpha = max(eps2, RMS(0)) * min(lr, 1)
    np.testing.assert_allclose(p.detach().numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(opt.state[p]["row_var"].numpy(), row, rtol=1e-12)
    if torch is not None:
        tp = torch.zeros((3, 4), dtype=torch.float64, requires_grad=True)
        topt = torch.optim.Adafactor([tp], lr=lr, eps=(eps1, eps2), d=10.0)
        tp.grad = torch.tensor(g)
        topt.step()
        np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-12)


def test_update_clipping_by_d():
    # a matrix gradient with one large entry: the RMS of the update exceeds d = 1 and
    # the step is scaled down; a larger d leaves it
    def first_step(d):
        p = ember.zeros((2, 2), dtype=ember.float64, requires_grad=True)
        opt = optim.Adafactor([p], lr=0.5, d=d, eps=(None, 1.0))
        p.grad = ember.tensor([[10.0, 0.1], [0.1, 0.1]], dtype=ember.float64)
        opt.step()
        return -p.detach().numpy()
    clipped, free = first_step(1.0), first_step(100.0)
    assert np.abs(free).max() > np.abs(clipped).max()
    update = free / 0.5  # alpha = eps2 * min(lr, 1) = 0.5
    rms = np.sqrt((update ** 2).mean())
    assert rms > 1.0
    np.testing.assert_allclose(clipped, free / rms, rtol=1e-12)


@needs_torch
def test_float32_matches_torch():
    pair = Pair(lambda p, lib: lib.Adafactor(p, lr=0.05, weight_decay=0.1),
                dtype=np.float32)
    for _ in range(20):
        pair.step()
    assert pair.eo.state[pair.ep[0]]["row_var"].dtype == ember.float32
    assert_params_close(pair.ep, pair.tp, atol=1e-6)


@needs_torch
def test_scheduled_learning_rate_matches_torch():
    pair = Pair(lambda p, lib: lib.Adafactor(p, lr=0.5, weight_decay=0.1))
    scheds = (lr_scheduler.ExponentialLR(pair.eo, gamma=0.7),
              torch.optim.lr_scheduler.ExponentialLR(pair.to, gamma=0.7))
    for _ in range(10):
        pair.step()
        for s in scheds:
            s.step()
    assert_params_close(pair.ep, pair.tp)


@pytest.mark.parametrize("options", CASES[:2], ids=str)
def test_jit_matches_eager(options):
    check_jit_matches_eager(lambda p, lib: lib.Adafactor(p, **options))


def test_jit_reads_the_scheduled_learning_rate():
    check_jit_matches_eager(lambda p, lib: lib.Adafactor(p, lr=0.5, weight_decay=0.1),
                            scheduler=lambda opt: lr_scheduler.StepLR(opt, 2, gamma=0.3))


def _p():
    return ember.zeros(2, requires_grad=True)


@pytest.mark.parametrize("kwargs,message", [
    (dict(lr=-0.1), "Learning rate should be >= 0 but is: -0.1"),
    (dict(beta2_decay=0.5), "beta2_decay should be <= 0 but is: 0.5"),
    (dict(eps=(-1.0, 1e-3)), "epsilon1 should be >= 0 but is: -1.0"),
    (dict(eps=(None, -1e-3)), "epsilon2 should be >= 0 but is: -0.001"),
    (dict(d=0.5), "Clipping threshold d should be >= 1 but is: 0.5"),
    (dict(weight_decay=-0.1), "weight_decay should be >= 0 but is: -0.1"),
])
def test_bad_arguments_raise_pytorchs_message(kwargs, message):
    with pytest.raises(OptimizerError, match=f"^Adafactor: {message}$"):
        optim.Adafactor([_p()], **kwargs)
    if torch is not None:
        with pytest.raises(ValueError, match=f"^{message}$"):
            torch.optim.Adafactor([torch.zeros(2, requires_grad=True)], **kwargs)
    with pytest.raises(OptimizerError, match="eps must be a pair"):
        optim.Adafactor([_p()], eps=(1e-3,))
