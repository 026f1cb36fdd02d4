"""ember.optim.Rprop against torch.optim.Rprop: trajectories, state dicts and resuming,
float32, ember.jit, and the argument errors."""
import numpy as np
import pytest

import ember
from ember import optim
from ember.optim import OptimizerError

from .optim_oracle import (Pair, assert_params_close, check_jit_matches_eager,
                           check_trajectory_and_resume, torch)

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the oracle) not installed")

CASES = [
    dict(),
    dict(lr=0.05, etas=(0.3, 1.7)),
    dict(lr=0.1, step_sizes=(1e-3, 0.2), maximize=True),
    dict(lr=0.02, etas=(0.7, 1.05), step_sizes=(0.015, 0.03), foreach=False),
]


@needs_torch
@pytest.mark.parametrize("options", CASES, ids=str)
def test_trajectory_state_dict_and_resume_match_torch(options):
    pair = check_trajectory_and_resume(lambda p, lib: lib.Rprop(p, **options))
    state = pair.eo.state[pair.ep[0]]
    assert list(state) == ["step", "prev", "step_size"]
    assert state["step"].dtype == ember.float32 and state["step"].item() == 30
    lo, hi = options.get("step_sizes", (1e-6, 50))
    assert lo <= state["step_size"].numpy().min() and state["step_size"].numpy().max() <= hi


def test_sign_rules_by_hand():
    p = ember.tensor([0.0, 0.0, 0.0], requires_grad=True)
    opt = optim.Rprop([p], lr=0.1, etas=(0.5, 2.0), step_sizes=(0.01, 0.3))
    p.grad = ember.tensor([1.0, 1.0, -1.0])
    opt.step()  # first step: prev is 0, factor 1
    assert p.tolist() == pytest.approx([-0.1, -0.1, 0.1])
    p.grad = ember.tensor([2.0, -3.0, 0.0])
    opt.step()  # same sign: x2; flipped: x0.5 and no move; zero: factor 1, no move
    assert opt.state[p]["step_size"].tolist() == pytest.approx([0.2, 0.05, 0.1])
    assert p.tolist() == pytest.approx([-0.3, -0.1, 0.1])
    assert opt.state[p]["prev"].tolist() == [2.0, 0.0, 0.0]
    p.grad = ember.tensor([5.0, 1.0, 1.0])
    opt.step()  # clamped at 0.3; after a rest the sign test starts again
    assert opt.state[p]["step_size"].tolist() == pytest.approx([0.3, 0.05, 0.1])
    assert p.tolist() == pytest.approx([-0.6, -0.15, 0.0])


@needs_torch
def test_float32_matches_torch():
    pair = Pair(lambda p, lib: lib.Rprop(p, lr=0.03, etas=(0.3, 1.3)), dtype=np.float32)
    for _ in range(20):
        pair.step()
    assert pair.ep[0].dtype == ember.float32
    assert pair.eo.state[pair.ep[0]]["step_size"].dtype == ember.float32
    assert_params_close(pair.ep, pair.tp, atol=1e-6)


@needs_torch
def test_learning_rate_is_read_only_at_the_first_step():
    pair = Pair(lambda p, lib: lib.Rprop(p, lr=0.05))
    pair.step()
    pair.eo.param_groups[0]["lr"] = pair.to.param_groups[0]["lr"] = 10.0
    for _ in range(5):
        pair.step()
    assert_params_close(pair.ep, pair.tp)
    assert pair.eo.state[pair.ep[0]]["step_size"].numpy().max() < 1.0


@pytest.mark.parametrize("options", [dict(), dict(lr=0.05, etas=(0.3, 1.7), maximize=True)],
                         ids=str)
def test_jit_matches_eager(options):
    check_jit_matches_eager(lambda p, lib: lib.Rprop(p, **options))


def _p():
    return ember.zeros(2, requires_grad=True)


@pytest.mark.parametrize("kwargs,message", [
    (dict(lr=-0.1), "Invalid learning rate: -0.1"),
    (dict(etas=(1.5, 1.2)), "Invalid eta values: 1.5, 1.2"),
    (dict(etas=(0.5, 0.9)), "Invalid eta values: 0.5, 0.9"),
    (dict(etas=(0.0, 1.2)), "Invalid eta values: 0.0, 1.2"),
])
def test_bad_arguments_raise_pytorchs_message(kwargs, message):
    with pytest.raises(OptimizerError, match=f"^Rprop: {message}"):
        optim.Rprop([_p()], **kwargs)
    if torch is not None:
        with pytest.raises(ValueError, match=f"^{message}$"):
            torch.optim.Rprop([torch.zeros(2, requires_grad=True)], **kwargs)


def test_malformed_pairs():
    with pytest.raises(OptimizerError, match="Rprop: etas must be a pair"):
        optim.Rprop([_p()], etas=(0.5,))
    with pytest.raises(OptimizerError, match="Rprop: step_sizes must be a pair"):
        optim.Rprop([_p()], step_sizes=(1e-6, 1.0, 2.0))


def test_unsupported_flags():
    with pytest.raises(NotImplementedError, match="Rprop: capturable=True"):
        optim.Rprop([_p()], capturable=True)
    with pytest.raises(NotImplementedError, match="differentiable=True"):
        optim.Rprop([_p()], differentiable=True)
