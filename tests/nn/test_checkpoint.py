"""Activation checkpointing: the same values and gradients as without it, with a lower
peak memory."""
import tracemalloc

import numpy as np

import ember
from ember import nn
from ember.utils.checkpoint import checkpoint, checkpoint_sequential


def _block(width, p=0.0):
    return nn.Sequential(nn.Linear(width, width), nn.Tanh(), nn.Dropout(p),
                         nn.Linear(width, width), nn.Tanh(), nn.Linear(width, width))


def _model(width=8, depth=3, p=0.3):
    ember.manual_seed(0)
    return nn.ModuleList([_block(width, p) for _ in range(depth)]).double()


def _run(model, x, use_checkpoint):
    for block in model:
        x = checkpoint(block, x) if use_checkpoint else block(x)
    return x


def _grads(model, x, use_checkpoint, seed=5):
    model.zero_grad()
    x = x.detach().requires_grad_()
    ember.manual_seed(seed)  # the same dropout masks in both runs
    out = _run(model, x, use_checkpoint)
    out.backward(ember.ones_like(out))
    return out.detach().numpy(), x.grad.numpy(), [p.grad.numpy().copy()
                                                  for p in model.parameters()]


def test_same_values_and_gradients_with_dropout():
    model = _model()
    x = ember.randn(4, 8, dtype=ember.float64)
    plain = _grads(model, x, False)
    ckpt = _grads(model, x, True)
    np.testing.assert_array_equal(ckpt[0], plain[0])
    np.testing.assert_allclose(ckpt[1], plain[1], rtol=1e-13, atol=1e-15)
    for a, b in zip(ckpt[2], plain[2]):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
    # The dropout masks really differ between seeds, so the comparison above means something.
    assert not np.array_equal(_grads(model, x, False, seed=6)[0], plain[0])


def test_function_is_recomputed_in_backward_and_rng_is_restored():
    calls = []
    w = nn.Parameter(ember.tensor([2.0, 3.0], dtype=ember.float64))

    def fn(a, scale, *, shift):
        calls.append(1)
        return (a * w + shift) * scale, ember.rand(2, dtype=ember.float64)

    x = ember.tensor([1.0, -1.0], dtype=ember.float64, requires_grad=True)
    ember.manual_seed(0)
    y, noise = checkpoint(fn, x, 3.0, shift=1.0)
    assert len(calls) == 1 and y.requires_grad and not noise.requires_grad
    state = ember.get_rng_state()
    y.sum().backward()
    assert len(calls) == 2
    assert x.grad.tolist() == [6.0, 9.0] and w.grad.tolist() == [3.0, -3.0]
    # The recomputation replayed the first run's random numbers and put the state back.
    assert ember.get_rng_state() == state


def test_autograd_grad_reaches_parameters():
    model = _model(p=0.0)
    x = ember.randn(3, 8, dtype=ember.float64, requires_grad=True)
    params = list(model.parameters())
    ref = ember.autograd.grad(_run(model, x, False).sum(), [x] + params)
    got = ember.autograd.grad(_run(model, x, True).sum(), [x] + params)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-13, atol=1e-15)


def test_callable_module_alias_sequential_and_no_grad():
    assert ember.utils.checkpoint.checkpoint is checkpoint
    model = _model(p=0.0)
    x = ember.randn(2, 8, dtype=ember.float64)
    np.testing.assert_array_equal(ember.utils.checkpoint(model[0], x).detach().numpy(),
                                  model[0](x).detach().numpy())
    seq = nn.Sequential(*[m for block in model for m in block])
    xg = x.clone().requires_grad_()
    checkpoint_sequential(seq, 3, xg).sum().backward()
    g1 = xg.grad.numpy().copy()
    xg.grad = None
    seq(xg).sum().backward()
    np.testing.assert_allclose(g1, xg.grad.numpy(), rtol=1e-13)
    with ember.no_grad():
        out = checkpoint(model[0], x)
    assert out.grad_fn is None


def _peak_bytes(model, x, use_checkpoint):
    tracemalloc.start()
    tracemalloc.reset_peak()
    out = _run(model, x, use_checkpoint)
    out.sum().backward()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def test_peak_memory_is_lower():
    ember.manual_seed(0)
    model = nn.ModuleList([_block(128) for _ in range(8)]).double()
    x = ember.randn(512, 128, dtype=ember.float64, requires_grad=True)
    _peak_bytes(model, x, True)  # warm up caches
    plain = _peak_bytes(model, x, False)
    model.zero_grad()
    ckpt = _peak_bytes(model, x, True)
    activation = 512 * 128 * 8
    # Without checkpointing every block keeps ~5 activations until backward; with it,
    # only each block's input plus one block's worth at a time.
    assert plain > 30 * activation
    assert ckpt < 0.6 * plain, (ckpt / activation, plain / activation)
