"""Ops specialized by the executor for the graph's shapes (``Op.specialize``): the
convolution with its epilogue, chains of Linear layers and Linear itself run a plan made
once, and give the same bits as the op's own forward; inputs the plan does not fit (a
strided view) take the op's forward."""
import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.compiler import runtime
from ember.compiler.codegen import build

pytestmark = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler")


def _both(fn, *args):
    """(result with specialization, result without, the names of the specialized ops)."""
    specialized = ember.jit(fn)
    with_rules = specialized(*args).numpy()
    spec = next(iter(specialized.compiled.cache.values())) if hasattr(specialized, "compiled") \
        else next(iter(specialized.cache.values()))
    names = [instr.op.name for forward, _, _, _, _, instr, _ in spec.executor.program
             if forward is not getattr(instr.op, "forward", None) and
             forward is not runtime.LAYOUT_FREE.get(instr.op.name)]
    original = runtime.NumpyExecutor.specialize
    runtime.NumpyExecutor.specialize = lambda self, graph: None
    try:
        without = ember.jit(fn)(*args).numpy()
    finally:
        runtime.NumpyExecutor.specialize = original
    return with_rules, without, names


@pytest.mark.parametrize("batch", [1, 5])
def test_cnn_inference_specializes_and_matches(batch):
    ember.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(16 * 3 * 3, 32), nn.ReLU(),
                          nn.Linear(32, 10)).eval()
    x = ember.randn(batch, 1, 14, 14)
    with ember.no_grad():
        got, want, names = _both(model, x)
        eager = model(x).numpy()
    assert names.count("conv2d_fused") == 2 and "linear_chain" in names
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, eager, rtol=1e-5, atol=1e-6)


def test_linear_specializes_and_a_strided_input_takes_the_forward():
    ember.manual_seed(0)
    w, b = ember.randn(128, 64), ember.randn(128)  # (large enough for the driver)
    x = ember.randn(64, 256)

    def f(x):  # x.t() is a strided view: the plan (made for rows) does not fit it
        return F.linear(x.t(), w, b).relu() + F.linear(x.t().contiguous() * 2, w)
    with ember.no_grad():
        got, want, names = _both(f, x)
    assert "linear" in names
    expected = np.maximum(x.numpy().T @ w.numpy().T + b.numpy(), 0) + \
        (2 * x.numpy().T) @ w.numpy().T
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_training_step_with_specialized_forwards_matches_eager():
    ember.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(4 * 3 * 3, 5))
    x, y = ember.randn(3, 1, 8, 8), ember.tensor([0, 3, 1])
    start = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    opt = ember.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    compiled = ember.jit(step)
    losses = [compiled(x, y).item() for _ in range(3)]
    spec = next(iter(compiled.cache.values()))
    assert any(forward is not getattr(instr.op, "forward", None)
               for forward, *_, instr, _ in spec.executor.program)
    after = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    model.load_state_dict({k: ember.tensor(v) for k, v in start.items()})
    eager = [step(x, y).item() for _ in range(3)]
    np.testing.assert_allclose(losses, eager, rtol=1e-5)
    for k, v in model.state_dict().items():
        np.testing.assert_allclose(after[k], v.numpy(), rtol=1e-5, atol=1e-6)
