"""Activation modules against PyTorch, through the module test template."""
import numpy as np
import pytest

import ember
from ember import nn

from .module_template import run_module_test, torch

tnn = torch.nn

CASES = [
    ("Threshold", (0.1, 20.0), {}), ("ReLU", (), {}), ("RReLU", (0.1, 0.3), {}),
    ("Hardtanh", (-0.5, 0.7), {}), ("ReLU6", (), {}), ("Sigmoid", (), {}),
    ("Hardsigmoid", (), {}), ("Tanh", (), {}), ("SiLU", (), {}), ("Mish", (), {}),
    ("Hardswish", (), {}), ("ELU", (0.5,), {}), ("CELU", (2.0,), {}), ("SELU", (), {}),
    ("GLU", (1,), {}), ("GELU", (), {}), ("GELU", (), {"approximate": "tanh"}),
    ("Hardshrink", (0.3,), {}), ("LeakyReLU", (0.2,), {}), ("LogSigmoid", (), {}),
    ("Softplus", (2.0, 1.5), {}), ("Softshrink", (0.3,), {}), ("PReLU", (), {}),
    ("PReLU", (4, 0.1), {}), ("Softsign", (), {}), ("Tanhshrink", (), {}),
    ("Softmin", (1,), {}), ("Softmax", (-1,), {}), ("Softmax2d", (), {}),
    ("LogSoftmax", (1,), {}),
]


def _input(rng, dtype="float64"):
    # Values away from the kinks at 0, ±0.3, ±0.5, ... so float64 gradients are exact.
    x = rng.uniform(0.05, 3.0, size=(3, 4, 5, 2)) * rng.choice([-1, 1], size=(3, 4, 5, 2))
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,args,kwargs", CASES, ids=[f"{c[0]}{c[1]}{c[2]}" for c in CASES])
def test_activation_module(name, args, kwargs, dtype):
    rng = np.random.default_rng(0)
    e = getattr(nn, name)(*args, **kwargs)
    t = getattr(tnn, name)(*args, **kwargs)
    # PyTorch's hardsigmoid backward multiplies by a float32 1/6 even in float64.
    tol = {"float64": (1e-7, 1e-10)} if name == "Hardsigmoid" else None
    run_module_test(e, t, [_input(rng)], dtype=dtype,
                    deterministic_train=name != "RReLU", tol=tol)


@pytest.mark.parametrize("name,args", [("ReLU", ()), ("LeakyReLU", (0.2,)), ("ELU", (0.5,)),
                                       ("SELU", ()), ("SiLU", ()), ("Hardtanh", (-1, 2)),
                                       ("ReLU6", ()), ("Threshold", (0.1, 2.0)),
                                       ("Hardswish", ()), ("Hardsigmoid", ()), ("Mish", ())])
def test_inplace_activation_matches_torch(name, args):
    rng = np.random.default_rng(1)
    x = _input(rng)
    e = getattr(nn, name)(*args, inplace=True)
    t = getattr(tnn, name)(*args, inplace=True)
    assert repr(e) == repr(t)
    ex, tx = ember.tensor(x), torch.tensor(x)
    ea = ember.tensor(x, requires_grad=True)
    ta = torch.tensor(x, requires_grad=True)
    eo, to = e(ea * 1.0), t(ta * 1.0)  # in place on a non-leaf, gradients flow
    np.testing.assert_allclose(eo.detach().numpy(), to.detach().numpy(), rtol=1e-12)
    g = rng.standard_normal(x.shape)
    eo.backward(ember.tensor(g))
    to.backward(torch.tensor(g))
    rtol = 1e-7 if name == "Hardsigmoid" else 1e-10  # torch's float32 1/6, as above
    np.testing.assert_allclose(ea.grad.numpy(), ta.grad.numpy(), rtol=rtol, atol=1e-12)
    assert e(ex) is ex and t(tx) is tx  # the very tensor, modified
    np.testing.assert_allclose(ex.numpy(), tx.numpy(), rtol=1e-12)


def test_rrelu_modes():
    ember.manual_seed(0)
    m = nn.RReLU(0.1, 0.3)
    x = -ember.ones(1000, dtype=ember.float64)
    slopes = -m(x).numpy()
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and slopes.std() > 0.03
    m.eval()
    np.testing.assert_allclose(m(x).numpy(), -0.2)


def test_activation_errors():
    with pytest.raises(ember.ShapeError, match="Softmax2d.*shape \\(2, 3\\)"):
        nn.Softmax2d()(ember.zeros(2, 3))
    with pytest.raises(ValueError, match="max_val"):
        nn.Hardtanh(1.0, -1.0)


def test_prelu_default_init_and_repr():
    assert nn.PReLU(3).weight.tolist() == pytest.approx([0.25] * 3)
    assert repr(nn.PReLU(3, 0.1)) == "PReLU(num_parameters=3)"


def test_hardtanh_takes_pytorchs_deprecated_min_value_and_max_value():
    with pytest.warns(DeprecationWarning, match="min_value and max_value are deprecated"):
        layer = ember.nn.Hardtanh(min_value=-2.0, max_value=3.0)
    assert (layer.min_val, layer.max_val) == (-2.0, 3.0)
    assert layer(ember.tensor([-5.0, 0.5, 5.0])).tolist() == [-2.0, 0.5, 3.0]
