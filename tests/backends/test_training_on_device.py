"""Training on another device gives the CPU's numbers: the reference workloads (a few
Adam steps), the Trainer (batches moved to the model's device), and mixed precision
(autocast and the GradScaler on the device). On the ``fakegpu`` stand-in, which computes
with NumPy, the numbers are the same to the last bit; the ``cuda`` case runs where
CuPy and a GPU are present, to float32 tolerances."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from tests.backends import strict_device  # noqa: F401  (registers strictgpu)
from tests.backends.devices import needs_cuda
from tests.fake_device import FAKE

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from training import batch, build, step_function  # noqa: E402

DEVICES = [pytest.param("fakegpu", id="fakegpu"), pytest.param("strictgpu", id="strictgpu"),
           pytest.param("cuda", id="cuda", marks=needs_cuda)]
SMALL_BATCH = {"mlp": 32, "cnn": 8, "gpt": 2}


def _tol(device: str, what: str = "loss") -> dict:
    if device == "fakegpu":  # the CPU's own code on the CPU's arrays: the same bits
        return {"rtol": 0, "atol": 0}
    # Summed in another order: Adam divides by the root of tiny second moments, so a
    # parameter whose gradients are near zero moves a little differently.
    return {"rtol": 2e-4, "atol": 2e-5 if what == "loss" else 1e-4}


def _workload_run(workload: str, device: str, steps: int = 3):
    """The losses of ``steps`` Adam steps of the workload on ``device``, and the model."""
    ember.manual_seed(0)
    model, _, loss_fn = build(ember, workload)
    model.to(device)
    opt = ember.optim.AdamW(model.parameters(), lr=1e-3) if workload == "gpt" else \
        ember.optim.Adam(model.parameters(), lr=1e-3)
    x, y = batch(workload)
    rows = SMALL_BATCH[workload]
    x, y = ember.from_numpy(x[:rows].copy()), ember.from_numpy(y[:rows].copy())
    step = step_function(opt, loss_fn, x.to(device), y.to(device))
    return [float(step()) for _ in range(steps)], model


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("workload", ["mlp", "cnn", "gpt"])
def test_reference_workload_steps_equal_cpu(workload, device):
    cpu_losses, cpu_model = _workload_run(workload, "cpu")
    losses, model = _workload_run(workload, device)
    np.testing.assert_allclose(losses, cpu_losses, **_tol(device))
    for (name, p), (_, q) in zip(model.named_parameters(), cpu_model.named_parameters()):
        assert p.device.type == device, name
        np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().numpy(),
                                   err_msg=name, **_tol(device, "parameters"))


def _trainer_run(device):
    ember.manual_seed(0)
    x, y = ember.randn(64, 6), ember.randint(0, 3, (64,))
    loader = ember.data.DataLoader(ember.data.TensorDataset(x, y), batch_size=16,
                                   shuffle=True, generator=ember.Generator().manual_seed(1))
    # (no dropout: on a device it draws from that device's generator, another stream)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    model.to(device)
    opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    trainer = ember.train.Trainer(model, opt, F.cross_entropy, train_loader=loader,
                                  val_loader=loader, max_epochs=2, progress_bar=False,
                                  metrics=[ember.train.metrics.Accuracy()])
    history = trainer.fit()
    return model, trainer, history


STAND_INS = ["fakegpu", "strictgpu"]


@pytest.mark.parametrize("device", STAND_INS)
def test_trainer_on_the_device_equals_cpu(device):
    cpu_model, cpu_trainer, _ = _trainer_run("cpu")
    model, trainer, _ = _trainer_run(device)
    assert model[0].weight.device.type == device
    assert trainer.logged.keys() == cpu_trainer.logged.keys()
    np.testing.assert_allclose(list(trainer.logged.values()),
                               list(cpu_trainer.logged.values()), **_tol(device))
    for p, q in zip(model.parameters(), cpu_model.parameters()):
        np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().numpy(),
                                   **_tol(device))
    predictions = trainer.predict([ember.randn(4, 6)])
    assert predictions.device.type == device and tuple(predictions.shape) == (4, 3)


def _amp_run(device: str, dtype, steps: int = 4):
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 4)).to(device)
    opt = ember.optim.AdamW(model.parameters(), lr=1e-2)
    scaler = ember.amp.GradScaler(ember.device(device).type, init_scale=2.0 ** 10)
    x = ember.randn(16, 8).to(device)
    y = ember.randint(0, 4, (16,)).to(device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        with ember.autocast(ember.device(device).type, dtype=dtype):
            out = model(x)
            assert out.dtype is dtype and out.device.type == ember.device(device).type
            loss = F.cross_entropy(out, y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(float(loss))
    return losses, model, scaler.get_scale()


@pytest.mark.parametrize("device", STAND_INS)
@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16], ids=["float16", "bfloat16"])
def test_autocast_and_grad_scaler_on_the_device_equal_cpu(dtype, device):
    cpu = _amp_run("cpu", dtype)
    dev = _amp_run(device, dtype)
    np.testing.assert_allclose(dev[0], cpu[0], **_tol(device))
    assert dev[2] == cpu[2]
    for p, q in zip(dev[1].parameters(), cpu[1].parameters()):
        assert p.device.type == device and p.dtype is ember.float32
        np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().numpy(),
                                   **_tol(device, "parameters"))


def test_grad_scaler_skips_a_step_with_inf_gradients_on_the_device():
    w = ember.ones(3, device=FAKE, requires_grad=True)
    opt = ember.optim.SGD([w], lr=1.0)
    scaler = ember.amp.GradScaler("fakegpu", init_scale=4.0)
    loss = (w * ember.tensor([1.0, float("inf"), 1.0], device=FAKE)).sum()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert w.tolist() == [1.0, 1.0, 1.0] and scaler.get_scale() == 2.0
