"""Tensors on another device, through the ``fakegpu`` stand-in: creation with
``device=``, moves with ``.to``, the errors for mixing devices (naming both), gradients
across moves, modules, optimizers and checkpoints."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from tests.fake_device import FAKE

CPU = ember.device("cpu")


def _same(a: ember.Tensor, b: ember.Tensor) -> None:
    assert a.dtype is b.dtype and tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


# Creation ----------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda d: ember.zeros(2, 3, device=d), lambda d: ember.ones(4, device=d),
    lambda d: ember.full((2,), 7, device=d), lambda d: ember.empty(2, device=d) * 0,
    lambda d: ember.eye(3, device=d), lambda d: ember.arange(1, 7, 2, device=d),
    lambda d: ember.linspace(0, 1, 5, device=d), lambda d: ember.logspace(0, 2, 3, device=d),
    lambda d: ember.tensor([[1, 2], [3, 4]], device=d),
    lambda d: ember.as_tensor(np.arange(3.0), device=d),
    lambda d: ember.scalar_tensor(2.5, device=d),
    lambda d: ember.zeros_like(ember.ones(2, 2), device=d),
    lambda d: ember.full_like(ember.ones(2), 3.0, device=d),
], ids=["zeros", "ones", "full", "empty", "eye", "arange", "linspace", "logspace", "tensor",
        "as_tensor", "scalar_tensor", "zeros_like", "full_like"])
def test_creation_honours_device(make):
    on_device, on_cpu = make("fakegpu"), make("cpu")
    assert on_device.device is FAKE and on_cpu.device is CPU
    _same(on_device.cpu(), on_cpu)


def test_like_functions_keep_the_input_device():
    x = ember.ones(2, 3, device=FAKE)
    for made in (ember.zeros_like(x), ember.ones_like(x), ember.empty_like(x),
                 ember.full_like(x, 2.0), ember.rand_like(x), ember.randn_like(x),
                 ember.randint_like(x, 5), x.new_zeros(4)):
        assert made.device is FAKE


@pytest.mark.parametrize("draw", [
    lambda d: ember.randn(3, 4, device=d), lambda d: ember.rand(5, device=d),
    lambda d: ember.randint(0, 9, (6,), device=d), lambda d: ember.randperm(7, device=d),
    lambda d: ember.normal(0.0, 2.0, (3,), device=d),
    lambda d: ember.rand(4, dtype=ember.float16, device=d),
], ids=["randn", "rand", "randint", "randperm", "normal", "rand_half"])
def test_random_creation_draws_from_the_devices_generator(draw):
    # ember.manual_seed seeds every device's default generator; fakegpu's is a PCG64
    # like the CPU's, so the streams agree (CUDA's cuRAND stream differs, as in PyTorch)
    ember.manual_seed(0)
    on_device = draw("fakegpu")
    ember.manual_seed(0)
    on_cpu = draw("cpu")
    assert on_device.device is FAKE
    _same(on_device.cpu(), on_cpu)
    assert ember.default_generator(FAKE) is not ember.default_generator()


def test_generator_for_the_device_and_dropout_on_it():
    g = ember.Generator(device="fakegpu").manual_seed(3)
    assert g.device is FAKE and ember.randn(2, generator=g, device=FAKE).device is FAKE
    x = ember.ones(1000, device=FAKE)
    y = F.dropout(x, 0.5)
    assert y.device is FAKE and 300 < int((y == 0).sum()) < 700


def test_unavailable_device_names_the_function():
    with pytest.raises(ember.EmberError, match="zeros: device 'cuda' is not available"):
        ember.zeros(2, device="cuda") if not ember.cuda.is_available() else \
            pytest.skip("CUDA is available here")


# Moving ------------------------------------------------------------------------------------
def test_to_round_trip_keeps_values_and_copies():
    x = ember.randn(3, 4)
    y = x.to(FAKE)
    assert y.device is FAKE and x.to("fakegpu").device is FAKE
    y.add_(1.0)  # a copy: the CPU tensor is unchanged
    _same(y.to("cpu"), x + 1.0)
    assert y.to(FAKE) is y and y.cpu().device is CPU
    z = x.to(FAKE, ember.float64)
    assert z.device is FAKE and z.dtype is ember.float64


def test_gradients_flow_back_across_to():
    x = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x.to(FAKE) * ember.tensor([1.0, 10.0, 100.0], device=FAKE)).sum()
    y.backward()
    assert x.grad.device is CPU
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 10.0, 100.0])
    w = ember.ones(2, device=FAKE, requires_grad=True)
    (w.cpu() * 3).sum().backward()
    assert w.grad.device is FAKE and w.grad.tolist() == [3.0, 3.0]


# Mixing devices ----------------------------------------------------------------------------
def test_an_op_on_two_devices_is_an_error_naming_both():
    with pytest.raises(ember.EmberError, match=r"add: expected all tensors on the same "
                                               r"device, got fakegpu and cpu"):
        ember.ones(2, device=FAKE) + ember.ones(2)
    with pytest.raises(ember.EmberError, match=r"matmul: .*got cpu and fakegpu"):
        ember.ones(2, 2) @ ember.ones(2, 2, device=FAKE)


def test_a_0d_cpu_tensor_joins_a_device_tensor_as_in_pytorch():
    x = ember.tensor([1.0, 2.0], device=FAKE)
    s = ember.tensor(3.0, requires_grad=True)
    y = x * s
    assert y.device is FAKE and y.tolist() == [3.0, 6.0]
    y.sum().backward()
    assert s.grad.device is CPU and s.grad.item() == 3.0


def test_backward_with_a_gradient_on_another_device_is_an_error():
    loss = (ember.randn(3, device=FAKE, requires_grad=True) ** 2).sum()
    with pytest.raises(ember.EmberError, match="expected device fakegpu but got cpu"):
        loss.backward(ember.tensor(1.0))


def test_an_optimizer_whose_state_is_on_another_device_is_an_error():
    model = ember.nn.Linear(3, 2)
    opt = ember.optim.Adam(model.parameters(), lr=0.1)
    model(ember.ones(1, 3)).sum().backward()
    opt.step()  # state made on the CPU
    model.to(FAKE)
    opt.zero_grad()
    model(ember.ones(1, 3, device=FAKE)).sum().backward()
    with pytest.raises(ember.EmberError, match="got (cpu and fakegpu|fakegpu and cpu)"):
        opt.step()


def test_optimizer_state_follows_the_parameters_device():
    model = ember.nn.Linear(3, 2).to(FAKE)
    opt = ember.optim.AdamW(model.parameters(), lr=0.1)
    model(ember.ones(4, 3, device=FAKE)).sum().backward()
    opt.step()
    state = opt.state[model.weight]
    assert state["exp_avg"].device is FAKE and state["exp_avg_sq"].device is FAKE
    # a state dict from the CPU loads onto the parameters' device (steps stay on the CPU)
    cpu_model = ember.nn.Linear(3, 2)
    cpu_opt = ember.optim.AdamW(cpu_model.parameters(), lr=0.1)
    cpu_model(ember.ones(4, 3)).sum().backward()
    cpu_opt.step()
    opt.load_state_dict(cpu_opt.state_dict())
    loaded = opt.state[model.weight]
    assert loaded["exp_avg"].device is FAKE and loaded["step"].device is CPU
    _same(loaded["exp_avg"].cpu(), cpu_opt.state[cpu_model.weight]["exp_avg"])


def test_load_state_dict_copies_across_devices_as_in_pytorch():
    source = ember.nn.Linear(3, 2)
    target = ember.nn.Linear(3, 2).to(FAKE)
    target.load_state_dict(source.state_dict())
    assert target.weight.device is FAKE
    _same(target.weight.cpu(), source.weight)


# Modules and checkpoints -------------------------------------------------------------------
def test_module_to_cpu_and_cuda_methods():
    model = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.BatchNorm1d(4))
    weight = model[0].weight
    model.to("fakegpu")
    assert weight.device is FAKE and model[0].weight is weight  # same Parameter object
    assert model[1].running_mean.device is FAKE
    model.cpu()
    assert weight.device is CPU and model[1].running_mean.device is CPU
    if not ember.cuda.is_available():
        with pytest.raises(ember.EmberError, match="device 'cuda' is not available"):
            model.cuda()


def test_save_from_the_device_and_load_to_cpu_and_back(tmp_path):
    model = ember.nn.Linear(3, 2).to(FAKE)
    x = ember.randn(5, 3, device=FAKE)
    path = tmp_path / "m.safetensors"
    ember.save({"model": model.state_dict(), "x": x}, path)
    loaded = ember.load(path)
    assert loaded["x"].device is CPU and loaded["model"]["weight"].device is CPU
    _same(loaded["x"], x.cpu())
    back = ember.load(path, map_location="fakegpu")
    assert back["x"].device is FAKE
    fresh = ember.nn.Linear(3, 2)
    fresh.load_state_dict(loaded["model"])
    _same(fresh(x.cpu()), model(x).cpu())
