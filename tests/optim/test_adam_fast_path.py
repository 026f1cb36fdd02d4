"""Adam's eager update on the arrays (optim/adam.py ``_update_arrays``) is the in-place
methods' update bit for bit."""
import numpy as np
import pytest

import ember
from ember.optim import adam


def _train(monkeypatch, fast, dtype, **options):
    if not fast:
        monkeypatch.setattr(adam, "_plain", lambda *a: False)
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(7, 5), ember.nn.Tanh(), ember.nn.Linear(5, 3))
    model.to(dtype)
    opt = ember.optim.Adam(model.parameters(), lr=0.05, **options)
    x = ember.randn(16, 7, dtype=dtype)
    versions = []
    for _ in range(4):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
        versions.append(model[0].weight._version[0])
    monkeypatch.undo()
    state = [t.numpy().copy() for s in opt.state.values() for t in s.values()]
    return [p.detach().numpy().copy() for p in model.parameters()] + state, versions


@pytest.mark.parametrize("options", [{}, {"weight_decay": 0.1},
                                     {"weight_decay": 0.1, "decoupled_weight_decay": True},
                                     {"amsgrad": True, "maximize": True}])
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_array_update_equals_method_update(monkeypatch, options, dtype):
    fast, fast_versions = _train(monkeypatch, True, dtype, **options)
    slow, slow_versions = _train(monkeypatch, False, dtype, **options)
    assert len(fast) == len(slow)
    for a, b in zip(fast, slow):
        np.testing.assert_array_equal(a, b)
    # every step changes the parameter's version, as in-place methods do
    assert all(b > a for a, b in zip(fast_versions, fast_versions[1:]))


def test_array_update_is_taken_for_float32(monkeypatch):
    calls = []
    real = adam._update_arrays
    monkeypatch.setattr(adam, "_update_arrays", lambda *a: calls.append(1) or real(*a))
    p = ember.nn.Parameter(ember.ones(3))
    opt = ember.optim.Adam([p], lr=0.1)
    p.grad = ember.tensor([1.0, -1.0, 0.5])
    opt.step()
    assert calls == [1]
    np.testing.assert_allclose(p.detach().numpy(), [0.9, 1.1, 0.9], rtol=1e-6)


def test_saved_parameter_modified_by_the_update_is_caught():
    p = ember.nn.Parameter(ember.ones(3))
    opt = ember.optim.Adam([p], lr=0.1)
    y = (p * p).sum()
    p.grad = ember.ones(3)
    opt.step()
    with pytest.raises(ember.EmberError, match="modified by an inplace operation"):
        y.backward()
