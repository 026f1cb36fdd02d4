"""ember.jit on a device other than the CPU (the ``fakegpu`` stand-in of
``tests/fake_device.py``, whose backend's ``kernel_renderer`` is ``"numpy"``): a whole
training step gives what eager mode gives on the CPU, its fused kernels are lowered by
that backend's renderer (never compiled as C), 0-d CPU tensors (the optimizer's step
counters) join the graph's device as they do eagerly, and a change of device retraces.

With ``kernel_renderer = "cuda"`` and a stand-in for CuPy that compiles modules for the
CPU emulation of CUDA (``cuda_emulator.FakeCuPy``), the same training step runs through
the CUDA renderer's kernels and ember's own launch path (``codegen/cuda_launch.py``)."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import ember
from ember.compiler import codegen
from ember.compiler.codegen import build
from ember.compiler.fused import FusedKernel
from tests.compiler import cuda_emulator
from tests.fake_device import FAKE

nn, F = ember.nn, ember.nn.functional


def _step(model, opt):
    """One training step of ``model`` on the batch ``(x, y)``, returning the loss."""
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def _train(device, optimizer: str, compiled: bool, steps: int = 4):
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(),
                          nn.Linear(16, 3)).to(ember.float64)
    x = ember.randn(10, 6, dtype=ember.float64)
    y = ember.randint(0, 3, (10,))
    model, x, y = model.to(device), x.to(device), y.to(device)
    opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9) if optimizer == "sgd" \
        else ember.optim.AdamW(model.parameters(), lr=0.01)
    step = _step(model, opt)
    run = ember.jit(step) if compiled else step
    losses = [run(x, y) for _ in range(steps)]
    return model, opt, run, losses


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_training_step_on_another_device_equals_eager_on_the_cpu(monkeypatch, optimizer):
    def no_c_compiler(*args, **kwargs):
        raise AssertionError("a kernel of the fakegpu graph was compiled as C")
    monkeypatch.setattr(build, "load_kernels", no_c_compiler)
    eager_model, _, _, eager_losses = _train(ember.device("cpu"), optimizer, False)
    model, opt, run, losses = _train(FAKE, optimizer, True)
    for le, lc in zip(eager_losses, losses):
        assert lc.device == FAKE
        np.testing.assert_allclose(lc.numpy(), le.numpy(), rtol=1e-10)
    for (name, pe), (_, pc) in zip(eager_model.named_parameters(), model.named_parameters()):
        assert pc.device == FAKE, name
        np.testing.assert_allclose(pc.detach().numpy(), pe.detach().numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=name)
    spec = run.latest()
    assert spec.device == FAKE
    kernels = [ins.op for ins in spec.graph.instrs if isinstance(ins.op, FusedKernel)]
    assert kernels and all(k.backend == "numpy" for k in kernels)
    if optimizer == "adamw":  # the step counters stay CPU tensors, updated in place
        for state in opt.state.values():
            assert state["step"].device == ember.device("cpu")
            assert float(state["step"]) == 4


@pytest.mark.parametrize("dtype,tol", [(ember.float32, 1e-5), (ember.float16, 0.0)],
                         ids=["float32", "float16"])
def test_training_step_through_emulated_cuda_kernels_equals_eager(monkeypatch, tmp_path,
                                                                   dtype, tol):
    if not cuda_emulator.available(str(tmp_path)):
        pytest.skip("g++ with C++20 <barrier> and _Float16 is needed for the emulator")
    fake_cupy = cuda_emulator.FakeCuPy(str(tmp_path))
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    monkeypatch.setattr(type(FAKE.backend), "kernel_renderer", "cuda")

    def train(device, compiled):
        ember.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 40), nn.GELU(), nn.LayerNorm(40),
                              nn.Linear(40, 5)).to(dtype).to(device)
        opt = ember.optim.AdamW(model.parameters(), lr=0.01)
        x = ember.randn(9, 6, dtype=dtype).to(device)
        y = ember.randint(0, 5, (9,)).to(device)
        one_step = _step(model, opt)

        def step():
            return one_step(x, y)
        run = ember.jit(step) if compiled else step
        return [float(run()) for _ in range(3)], model, run
    eager_losses, eager_model, _ = train(ember.device("cpu"), False)
    losses, model, run = train(FAKE, True)
    kernels = [ins.op for ins in run.latest().graph.instrs if isinstance(ins.op, FusedKernel)]
    assert kernels and all(k.backend == "cuda" for k in kernels)
    assert fake_cupy.modules and fake_cupy.launches >= 2 * len(kernels)
    # (float16: the graphs fuse half-type ops, whose kernels round once per op as
    # NumPy does; float32: reductions add in another order than NumPy's)
    np.testing.assert_allclose(losses, eager_losses, rtol=tol if tol else 2e-3)
    for (name, pe), (_, pc) in zip(eager_model.named_parameters(), model.named_parameters()):
        np.testing.assert_allclose(pc.detach().numpy().astype(np.float64),
                                   pe.detach().numpy().astype(np.float64),
                                   rtol=tol if tol else 2e-2, atol=1e-4 if tol else 4e-3,
                                   err_msg=name)


def test_the_renderer_follows_the_device(monkeypatch):
    monkeypatch.setenv("EMBER_JIT_BACKEND", "numpy")
    assert codegen.renderer_for(ember.device("cpu")) == "numpy"
    assert codegen.renderer_for(FAKE) == "numpy"
    monkeypatch.delenv("EMBER_JIT_BACKEND")
    if build.find_compiler() is not None:
        assert codegen.renderer_for(ember.device("cpu")) == "c"
    monkeypatch.setattr(type(FAKE.backend), "kernel_renderer", "cuda")
    assert codegen.renderer_for(FAKE) == "cuda"
    assert codegen.holds_half_types("cuda") and not codegen.holds_half_types("c")


def test_a_change_of_device_retraces_with_a_reason():
    f = ember.jit(lambda a: (a * 2).exp().sum())
    x = ember.randn(5)
    cpu = f(x)
    fake = f(x.to(FAKE))
    assert fake.device == FAKE and cpu.device == ember.device("cpu")
    np.testing.assert_allclose(fake.numpy(), cpu.numpy(), rtol=1e-6)
    assert len(f.retraces) == 2 and "on fakegpu" in f.retraces[1]


def test_a_module_moved_to_another_device_retraces():
    model = nn.Linear(3, 2)
    f = ember.jit(lambda: model.weight.sum() + model.bias.sum())
    before = float(f())
    model.to(FAKE)
    after = f()
    assert after.device == FAKE and float(after) == pytest.approx(before)
    assert "moved from cpu to fakegpu" in f.retraces[-1]


def test_tensors_on_two_devices_are_a_clear_error():
    a, b = ember.ones(3), ember.ones(3).to(FAKE)
    with pytest.raises(ember.EmberError, match="several devices.*cpu.*fakegpu"):
        ember.jit(lambda: (a.sum(), b.sum()))()
