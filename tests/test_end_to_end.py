"""End to end against PyTorch: the DESIGN.md gpt workload (the model of
``bench/training.py``) built in both with the same weights, trained 20 AdamW steps on
the same batches, gives the same loss curve."""
import os
import sys

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "bench"))
from training import V, T, build  # noqa: E402


def train(lib, model, optimizer, loss_fn, batches):
    losses = []
    for x_np, y_np in batches:
        loss = loss_fn(lib.from_numpy(x_np), lib.from_numpy(y_np))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return np.array(losses)


def test_gpt_loss_curve_matches_torch():
    torch.manual_seed(0)
    reference, reference_optimizer, reference_loss = build(torch, "gpt")
    model, optimizer, loss_fn = build(ember, "gpt")
    model.load_state_dict({k: ember.tensor(v.detach().numpy())
                           for k, v in reference.state_dict().items()})
    rng = np.random.default_rng(0)
    batches = []
    for _ in range(20):
        # next token = previous + a per-row step: learnable, so the loss falls
        starts, steps = rng.integers(0, V, (16, 1)), rng.integers(1, 4, (16, 1))
        tokens = (starts + steps * np.arange(T + 1)) % V
        batches.append((tokens[:, :-1], tokens[:, 1:]))
    ours = train(ember, model, optimizer, loss_fn, batches)
    theirs = train(torch, reference, reference_optimizer, reference_loss, batches)
    assert theirs[-1] < theirs[0] - 0.5  # it learns, so the comparison means something
    np.testing.assert_allclose(ours, theirs, atol=1e-4, rtol=0)
