"""The C backward of layer and RMS norm (ops/norm_kernels.py) against the NumPy path it
replaces, and ember.jit keeping the op whole where kernels are C."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.compiler import codegen
from ember.ops import norm_kernels, registry

OP = registry.OPS["normalize_backward"]
pytestmark = pytest.mark.skipif(norm_kernels.LOOP.get(np.float32) is None,
                                reason="no C compiler")


def _inputs(dtype, shape, k, center, rng):
    axes = tuple(range(len(shape) - k, len(shape)))
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    mean = x.mean(axes, keepdims=True) if center else np.zeros_like(x.mean(axes, keepdims=True))
    d = x - mean
    rstd = 1 / np.sqrt((d * d).mean(axes, keepdims=True) + 1e-5)
    return g, x, mean.astype(dtype), rstd.astype(dtype), axes


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,k", [((16, 64, 128), 1), ((7, 33), 1), ((3, 5, 40, 6), 2),
                                     ((1, 1), 1), ((300, 200), 1)])
@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("need", [(True, True, True), (True, False, False),
                                  (False, True, True), (True, True, False)])
def test_c_backward_equals_numpy(dtype, shape, k, center, need, monkeypatch):
    rng = np.random.default_rng(sum(shape))
    g, x, mean, rstd, axes = _inputs(dtype, shape, k, center, rng)
    affine = need[1] or need[2]
    w = rng.standard_normal(shape[-k:]).astype(dtype)
    extra = (w,) if need[1] else ()
    kw = dict(axes=axes, center=center, param_shape=shape[-k:] if affine else (), need=need)
    got = OP.forward(np, g, x, mean, rstd, *extra, **kw)
    monkeypatch.setattr(norm_kernels, "normalize_backward", lambda *a: None)
    ref = OP.forward(np, g, x, mean, rstd, *extra, **kw)
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for a, b, needed in zip(got, ref, need):
        assert a.dtype == b.dtype and a.shape == b.shape
        if needed:
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol * np.abs(b).max())


def test_threads_split_rows_without_changing_gx(monkeypatch):
    rng = np.random.default_rng(1)
    g, x, mean, rstd, axes = _inputs(np.float32, (256, 160), 1, True, rng)
    w = rng.standard_normal(160).astype(np.float32)
    args = (g, x, mean, rstd, w, axes, True, (160,), (True, True, True))
    monkeypatch.setattr(norm_kernels, "MIN_PARALLEL", 1 << 40)
    one = norm_kernels.normalize_backward(*args)
    monkeypatch.setattr(norm_kernels, "MIN_PARALLEL", 1)
    many = norm_kernels.normalize_backward(*args)
    np.testing.assert_array_equal(one[0], many[0])  # each row is one thread's
    np.testing.assert_allclose(one[1], many[1], rtol=1e-6)


def test_other_layouts_take_the_numpy_path():
    rng = np.random.default_rng(2)
    g, x, mean, rstd, _ = _inputs(np.float32, (4, 6, 5), 1, True, rng)
    kw = dict(center=True, param_shape=(), need=(True, False, False))
    assert norm_kernels.normalize_backward(g, x, mean, rstd, None, (1, 2), **kw) is None
    half = [a.astype(np.float16) for a in (g, x, mean, rstd)]
    assert norm_kernels.normalize_backward(*half, None, (2,), **kw) is None
    assert norm_kernels.normalize_backward(g[:, ::2], x[:, ::2], mean[:, ::2], rstd[:, ::2],
                                           None, (2,), **kw) is None


@pytest.mark.skipif(codegen.backend_name() != "c", reason="no C compiler")
def test_jit_keeps_the_layer_norm_backward_whole_and_equal_to_eager():
    ember.manual_seed(0)
    ln = ember.nn.LayerNorm(32).double()
    x = ember.randn(4, 8, 32, dtype=ember.float64)

    def step(x):
        ln.zero_grad()
        y = F.gelu(ln(x))
        y.sum().backward()
        return y

    eager_y = step(x).detach().numpy()
    eager_grads = [p.grad.numpy().copy() for p in ln.parameters()]
    compiled = ember.jit(step)
    compiled_y = compiled(x).detach().numpy()
    spec = next(iter(compiled.cache.values()))
    assert "normalize_backward" in [ins.op.name for ins in spec.graph.instrs]
    np.testing.assert_allclose(compiled_y, eager_y, rtol=1e-10)
    for p, ref in zip(ln.parameters(), eager_grads):
        np.testing.assert_allclose(p.grad.numpy(), ref, rtol=1e-10, atol=1e-12)
