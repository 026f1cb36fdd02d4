"""Small models and data for the ember.train tests (a few milliseconds a step)."""
from __future__ import annotations

import numpy as np

import ember

nn, F = ember.nn, ember.nn.functional


def dataset(n: int = 48, features: int = 6, classes: int = 3, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, features)).astype(np.float32)
    w = rng.standard_normal((features, classes)).astype(np.float32)
    y = (x @ w).argmax(1)
    return ember.data.TensorDataset(ember.from_numpy(x), ember.from_numpy(y))


def loader(ds=None, batch_size: int = 8, shuffle: bool = True, generator: bool = False):
    gen = ember.Generator().manual_seed(5) if generator else None
    return ember.data.DataLoader(ds if ds is not None else dataset(), batch_size=batch_size,
                                 shuffle=shuffle, generator=gen)


def model(dropout: float = 0.2):
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(dropout), nn.Linear(16, 3))


def params(m) -> dict:
    return {k: v.numpy().copy() for k, v in m.state_dict().items()}


def assert_identical(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k], b[k]), f"{k} differs: max |diff| {np.abs(a[k] - b[k]).max()}"


class Recorder(ember.train.Callback):
    """Records every hook call as (hook, global_step, epoch)."""

    def __init__(self):
        self.calls = []

    def __getattribute__(self, name):
        if name.startswith("on_"):
            calls = object.__getattribute__(self, "calls")

            def hook(trainer, *args):
                calls.append((name, trainer.global_step, trainer.epoch))
            return hook
        return object.__getattribute__(self, name)


class DynamicScaler:
    """A dynamic loss scaler with torch.amp.GradScaler's rules (growth after
    ``growth_interval`` clean steps, backoff and a skipped step on inf/nan), standing in
    for ember.amp.GradScaler where that is absent."""

    def __init__(self, init_scale=2.0 ** 8, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=3):
        self.scale_, self.growth_factor, self.backoff_factor = init_scale, growth_factor, \
            backoff_factor
        self.growth_interval, self.tracker = growth_interval, 0
        self._unscaled, self._found_inf = False, False

    def scale(self, loss):
        return loss * self.scale_

    def unscale_(self, optimizer):
        inv = 1.0 / self.scale_
        found = False
        with ember.no_grad():
            for g in optimizer.param_groups:
                for p in g["params"]:
                    if p.grad is not None:
                        p.grad.mul_(inv)
                        found = found or not bool(p.grad.isfinite().all())
        self._unscaled, self._found_inf = True, found

    def step(self, optimizer):
        if not self._unscaled:
            self.unscale_(optimizer)
        if not self._found_inf:
            optimizer.step()

    def update(self):
        if self._found_inf:
            self.scale_ *= self.backoff_factor
            self.tracker = 0
        else:
            self.tracker += 1
            if self.tracker == self.growth_interval:
                self.scale_ *= self.growth_factor
                self.tracker = 0
        self._unscaled, self._found_inf = False, False

    def get_scale(self):
        return self.scale_

    def state_dict(self):
        return {"scale": self.scale_, "tracker": self.tracker}

    def load_state_dict(self, state):
        self.scale_, self.tracker = state["scale"], state["tracker"]


def build(max_steps, *, scaler=None, generator=False, seed=0, callbacks=(), nan_at=None,
          fail_at=None, **kwargs):
    """The resume tests' run: dropout, shuffling, AdamW, a per-step scheduler and
    validation each epoch; ``seed`` seeds the model's initialisation (a resumed run
    starts from different weights, which the checkpoint must overwrite)."""
    ember.manual_seed(seed)
    net = model(dropout=0.3)
    opt = ember.optim.AdamW(net.parameters(), lr=0.02)
    sched = ember.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.7)
    calls = [0]

    def training_step(m, batch):
        calls[0] += m.training  # (validation calls it too)
        if m.training and calls[0] == fail_at:
            raise RuntimeError(f"boom at call {fail_at}")
        x, y = batch
        noise = ember.randn(x.shape) * 0.01  # a draw from ember's default generator
        out = m(x + noise)
        loss = F.cross_entropy(out, y)
        if m.training and calls[0] == nan_at:
            loss = loss * float("nan")
        return {"loss": loss, "output": out, "target": y}
    return ember.train.Trainer(
        net, opt, training_step=training_step, train_loader=loader(generator=generator),
        val_loader=loader(shuffle=False), max_steps=max_steps, scheduler=sched,
        grad_scaler=scaler, metrics=[ember.train.metrics.Accuracy()],
        callbacks=list(callbacks), progress_bar=False, seed=None, **kwargs)
