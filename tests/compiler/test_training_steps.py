"""Whole compiled training steps of the shapes users write, against eager: buffers
updated in the forward (BatchNorm), dropout, gradient clipping, gradient accumulation,
and a recurrent model with an embedding, AdamW and a scheduler stepped inside."""
from __future__ import annotations

import numpy as np
import pytest

import ember

nn, F = ember.nn, ember.nn.functional


class _Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.rnn, self.head = nn.Embedding(10, 6), nn.LSTM(6, 5, 2, batch_first=True), \
            nn.Linear(5, 3)

    def forward(self, idx):
        out, _ = self.rnn(self.emb(idx))
        return self.head(out[:, -1])


MODELS = {
    "batchnorm": lambda: nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(),
                                       nn.Linear(8, 3)),
    "dropout": lambda: nn.Sequential(nn.Linear(6, 8), nn.Dropout(0.3), nn.Linear(8, 3)),
    "plain": lambda: nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)),
    "recurrent": _Recurrent,
}


def _run(name, compiled, clip=False, accumulate=False, steps=5):
    ember.manual_seed(0)
    model = MODELS[name]()
    # (SGD where a gradient is zero in theory — the bias before BatchNorm — since Adam
    # turns the rounding noise in it into lr-sized steps)
    opt = ember.optim.SGD(model.parameters(), lr=0.05, momentum=0.9) if name == "batchnorm" \
        else ember.optim.AdamW(model.parameters(), lr=0.01)
    sched = ember.optim.lr_scheduler.StepLR(opt, 2, 0.5)
    x = ember.randint(0, 10, (4, 7)) if name == "recurrent" else ember.randn(8, 6)
    y = ember.randint(0, 3, (x.shape[0],))

    def step(x, y):
        if not accumulate:
            opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        if clip:
            nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        sched.step()
        return loss.detach()
    run = ember.jit(step) if compiled else step
    ember.manual_seed(1)
    losses = [float(run(x, y)) for _ in range(steps)]
    return losses, model


@pytest.mark.parametrize("name,clip,accumulate", [
    ("batchnorm", False, False), ("dropout", False, False), ("plain", True, False),
    ("plain", False, True), ("recurrent", True, False)])
def test_compiled_training_step_equals_eager(name, clip, accumulate):
    (le, me), (lc, mc) = (_run(name, c, clip, accumulate) for c in (False, True))
    np.testing.assert_allclose(lc, le, rtol=1e-5)
    for (n, a), (_, b) in zip(me.state_dict().items(), mc.state_dict().items()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6, err_msg=n)
