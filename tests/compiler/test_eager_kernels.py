"""Eager fused primitives run as compiled kernels (ember/compiler/eager.py): the same
values as the ops' NumPy forwards, and the kernels really run."""
import os

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.compiler import codegen, eager
from ember.compiler.runtime import NumpyExecutor
from ember.ops import registry

needs_c = pytest.mark.skipif(codegen.backend_name() != "c", reason="no C compiler")

# (op names that must have run compiled, f(x, *extra) -> tensor, input shape)
CASES = {
    "gelu": (("gelu", "gelu_backward"), lambda x: F.gelu(x), (8, 32, 64)),
    "gelu_tanh": (("gelu", "gelu_backward"), lambda x: F.gelu(x, approximate="tanh"),
                  (8, 32, 64)),
    "softmax": (("softmax", "softmax_backward"), lambda x: x.softmax(-1), (4, 4, 32, 32)),
    "log_softmax": (("log_softmax", "log_softmax_backward"), lambda x: x.log_softmax(-1),
                    (64, 128)),
    # (its backward is a hand-written C kernel: tests/ops/test_norm_kernels.py)
    "layer_norm": (("native_layer_norm",),
                   lambda x, w, b: F.layer_norm(x, (64,), w, b), (8, 32, 64)),
    "rms_norm": (("rms_norm",), lambda x, w: F.rms_norm(x, (64,), w), (8, 32, 64)),
    "masked_fill": (("masked_fill",),
                    lambda x: x.masked_fill(ember.arange(32) % 3 == 0, 2.5), (8, 32, 32)),
    "cross_entropy": (("cross_entropy_loss_backward",),
                      lambda x: F.cross_entropy(x, ember.arange(64) % 100), (64, 100)),
}


def _extra(name):
    if name == "layer_norm":
        return [ember.randn(64, requires_grad=True), ember.randn(64, requires_grad=True)]
    if name == "rms_norm":
        return [ember.randn(64, requires_grad=True)]
    return []


def _run(fn, x, extra, g):
    x = x.detach().requires_grad_()
    extra = [e.detach().requires_grad_() for e in extra]
    y = fn(x, *extra)
    (y * g).sum().backward()
    return [y.detach().numpy()] + [t.grad.numpy() for t in [x] + extra]


@needs_c
@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_eager_op_matches_numpy_forward(name, monkeypatch):
    ops, fn, shape = CASES[name]
    ember.manual_seed(0)
    x, extra = ember.randn(*shape), _extra(name)
    y = fn(x, *extra)
    g = ember.randn(*y.shape)
    for op_name in ops:  # fresh state: count calls from here
        registry.OPS[op_name].fast = eager.EagerKernel(registry.OPS[op_name])
    results = [_run(fn, x, extra, g) for _ in range(2)]
    for op_name in ops:
        entries = list(registry.OPS[op_name].fast.entries.values())
        assert any(isinstance(e, NumpyExecutor) for e in entries), op_name
    fast = results[-1]
    for a, b in zip(results[0], results[1]):  # the first call already runs the kernels
        np.testing.assert_array_equal(a, b)
    for op_name in ops:
        monkeypatch.setattr(registry.OPS[op_name], "fast", None)
    slow = _run(fn, x, extra, g)
    for a, b in zip(fast, slow):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


@needs_c
def test_small_and_half_precision_inputs_stay_on_numpy():
    op = registry.OPS["softmax"]
    kernel = eager.EagerKernel(op)
    small = np.random.rand(4, 8).astype(np.float32)
    half = np.random.rand(64, 128).astype(np.float16)
    for _ in range(3):
        np.testing.assert_array_equal(kernel(np, small, dim=-1), op.forward(np, small, dim=-1))
        np.testing.assert_array_equal(kernel(np, half, dim=-1), op.forward(np, half, dim=-1))
    assert not kernel.entries


@needs_c
def test_a_reduction_the_rule_declines_runs_numpy():
    # softmax over a leading dim has no fused rule: NumPy's forward, the same values
    op = registry.OPS["softmax"]
    kernel = eager.EagerKernel(op)
    x = np.random.rand(64, 128).astype(np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(kernel(np, x, dim=0), op.forward(np, x, dim=0))
    assert list(kernel.entries.values()) == [eager._DECLINED]


def test_without_a_compiler_eager_ops_use_numpy(monkeypatch):
    monkeypatch.setenv("EMBER_JIT_BACKEND", "numpy")
    op = registry.OPS["gelu"]
    kernel = eager.EagerKernel(op)
    x = np.random.randn(64, 128).astype(np.float32)
    for _ in range(3):
        out = kernel(np, x, approximate="none")
    np.testing.assert_array_equal(out[0], op.forward(np, x, approximate="none")[0])
    assert list(kernel.entries.values()) == [eager._DECLINED]


def test_eager_kernels_can_be_switched_off():
    import subprocess
    import sys
    code = ("import ember; from ember.ops import registry; "
            "print(registry.OPS['gelu'].fast is None)")
    env = dict(os.environ, EMBER_EAGER_KERNELS="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "True"
