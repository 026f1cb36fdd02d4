"""ember.optim.ASGD against torch.optim.ASGD: trajectories (before and after averaging
starts), state dicts and resuming, the average itself, float32, ember.jit, and the
argument errors."""
import copy

import numpy as np
import pytest

import ember
from ember import optim
from ember.optim import OptimizerError, lr_scheduler

from .optim_oracle import (Pair, assert_params_close, assert_same_params,
                           check_jit_matches_eager, check_trajectory_and_resume, params_of,
                           torch)

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the oracle) not installed")

CASES = [
    dict(),
    dict(lr=0.05, t0=5),
    dict(lr=0.05, lambd=0.01, alpha=0.5, t0=3, weight_decay=0.1, maximize=True),
    dict(lr=0.2, lambd=0.0, t0=0, weight_decay=0.01, foreach=False),
]


@needs_torch
@pytest.mark.parametrize("options", CASES, ids=str)
def test_trajectory_state_dict_and_resume_match_torch(options):
    pair = check_trajectory_and_resume(lambda p, lib: lib.ASGD(p, **options))
    state = pair.eo.state[pair.ep[0]]
    assert list(state) == ["step", "eta", "mu", "ax"]
    for key in ("step", "eta", "mu"):
        assert state[key].dtype == ember.float32 and state[key].shape == ()
    ax, tax = state["ax"].numpy(), pair.to.state[pair.tp[0]]["ax"].numpy()
    np.testing.assert_allclose(ax, tax, rtol=0, atol=1e-10)


def test_ax_is_the_average_of_the_iterates_after_t0():
    rng = np.random.default_rng(4)
    p = ember.tensor(rng.standard_normal(4), requires_grad=True)
    opt = optim.ASGD([p], lr=0.1, lambd=0.0, t0=3)
    seen = []
    for _ in range(9):
        p.grad = ember.tensor(rng.standard_normal(4))
        opt.step()
        seen.append(p.detach().numpy().copy())
    # step t uses mu = 1 / max(1, t - 1 - t0): steps 1-5 copy, then the running mean
    np.testing.assert_allclose(opt.state[p]["ax"].numpy(), np.mean(seen[4:], axis=0),
                               rtol=1e-6)
    assert opt.state[p]["mu"].item() == pytest.approx(1 / 6)
    expected_eta = np.float32(0.1 / (1 + 0.0 * 0.1 * 9) ** 0.75)
    assert opt.state[p]["eta"].item() == expected_eta


def test_resume_keeps_eta_and_mu_in_the_step_dtype():
    rng = np.random.default_rng(5)
    p = ember.tensor(rng.standard_normal(3), requires_grad=True)
    opt = optim.ASGD([p], lr=0.03, lambd=0.01, t0=2)
    grads = [rng.standard_normal(3) for _ in range(10)]
    for g in grads[:5]:
        p.grad = ember.tensor(g)
        opt.step()
    q = ember.tensor(p.detach().numpy(), requires_grad=True)
    resumed = optim.ASGD([q], lr=0.03, lambd=0.01, t0=2)
    resumed.load_state_dict(copy.deepcopy(opt.state_dict()))
    assert resumed.state[q]["eta"].dtype == ember.float32
    assert resumed.state[q]["ax"].dtype == ember.float64
    for g in grads[5:]:
        for param, o in ((p, opt), (q, resumed)):
            param.grad = ember.tensor(g)
            o.step()
    assert_same_params([q], [p])


@needs_torch
def test_float32_matches_torch():
    pair = Pair(lambda p, lib: lib.ASGD(p, lr=0.05, lambd=0.01, t0=4), dtype=np.float32)
    for _ in range(20):
        pair.step()
    assert pair.eo.state[pair.ep[0]]["ax"].dtype == ember.float32
    assert_params_close(pair.ep, pair.tp, atol=1e-6)


@needs_torch
def test_scheduled_learning_rate_matches_torch():
    pair = Pair(lambda p, lib: lib.ASGD(p, lr=0.1, t0=2))
    scheds = (lr_scheduler.StepLR(pair.eo, 3, gamma=0.5),
              torch.optim.lr_scheduler.StepLR(pair.to, 3, gamma=0.5))
    for _ in range(10):
        pair.step()
        for s in scheds:
            s.step()
    assert_params_close(pair.ep, pair.tp)


@pytest.mark.parametrize("options", [dict(), dict(lr=0.05, lambd=0.01, alpha=0.5, t0=3,
                                                  weight_decay=0.1, maximize=True)], ids=str)
def test_jit_matches_eager(options):
    check_jit_matches_eager(lambda p, lib: lib.ASGD(p, **options))


def test_jit_reads_the_scheduled_learning_rate():
    check_jit_matches_eager(lambda p, lib: lib.ASGD(p, lr=0.1, t0=2),
                            scheduler=lambda opt: lr_scheduler.StepLR(opt, 2, gamma=0.5))


def test_parameters_without_grad_are_skipped():
    a, b = ember.ones(2, requires_grad=True), ember.ones(2, requires_grad=True)
    opt = optim.ASGD([a, b], lr=0.1)
    a.grad = ember.ones(2)
    opt.step()
    assert set(opt.state) == {a} and b.tolist() == [1.0, 1.0]
    assert params_of(opt) == [a, b]


def _p():
    return ember.zeros(2, requires_grad=True)


@pytest.mark.parametrize("kwargs,message", [
    (dict(lr=-0.1), "Invalid learning rate: -0.1"),
    (dict(weight_decay=-0.5), "Invalid weight_decay value: -0.5"),
])
def test_bad_arguments_raise_pytorchs_message(kwargs, message):
    with pytest.raises(OptimizerError, match=f"^ASGD: {message}$"):
        optim.ASGD([_p()], **kwargs)
    if torch is not None:
        with pytest.raises(ValueError, match=f"^{message}$"):
            torch.optim.ASGD([torch.zeros(2, requires_grad=True)], **kwargs)


def test_unsupported_flags():
    with pytest.raises(NotImplementedError, match="ASGD: capturable=True"):
        optim.ASGD([_p()], capturable=True)
    with pytest.raises(NotImplementedError, match="differentiable=True"):
        optim.ASGD([_p()], differentiable=True)
