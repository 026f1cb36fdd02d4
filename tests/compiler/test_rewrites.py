"""Rewrites made while tracing (``ember.compiler.rewrites``): attention written out as
``softmax(masked_fill(q @ k^T / c, mask, -inf)) @ v`` is recorded as the fused
attention op (and its fused backward), and gives what eager mode gives."""
import math

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.compiler import runtime


def _ops(compiled) -> list:
    return [ins.op.name for ins in compiled.graph().instrs]


def _attention(q, k, v, scale="div", fill=-math.inf, causal=True, weights=False):
    s = q @ k.transpose(-2, -1)
    if scale == "div":
        s = s / math.sqrt(q.shape[-1])
    elif scale == "mul":
        s = 0.5 * s
    if causal:
        t = q.shape[-2]
        mask = ember.triu(ember.ones(t, t, dtype=ember.bool), 1)
        s = s.masked_fill(mask, fill)
    p = s.softmax(-1)
    y = p @ v
    return (y, p) if weights else y


def _inputs(dtype=ember.float64, shape=(2, 3, 6, 4), grad=True):
    ember.manual_seed(0)
    return [ember.randn(*shape, dtype=dtype, requires_grad=grad) for _ in range(3)]


def _eager_and_compiled(fn, dtype=ember.float64):
    """(eager outputs and grads, compiled outputs and grads, the compiled function)."""
    results = []
    compiled = ember.jit(fn)
    for f in (fn, compiled):
        q, k, v = _inputs(dtype)
        out = f(q, k, v)
        outs = out if isinstance(out, tuple) else (out,)
        sum(o.sum() * (i + 1) for i, o in enumerate(outs)).backward()
        results.append([o.detach().numpy() for o in outs] +
                       [t.grad.numpy() for t in (q, k, v)])
    return results[0], results[1], compiled


@pytest.mark.parametrize("scale", ["div", "mul", None])
@pytest.mark.parametrize("causal", [True, False])
def test_explicit_attention_becomes_the_fused_op(scale, causal):
    eager, compiled, fn = _eager_and_compiled(
        lambda q, k, v: _attention(q, k, v, scale=scale, causal=causal))
    ops = _ops(fn)
    assert "scaled_dot_product_attention" in ops and "softmax" not in ops
    for a, b in zip(eager, compiled):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)


def test_explain_says_what_was_rewritten():
    fn = ember.jit(lambda q, k, v: _attention(q, k, v) + _attention(v, k, q))
    fn(*_inputs(grad=False))
    assert "rewritten while tracing: fuse_attention x2" in fn.explain()


def test_a_training_step_records_the_fused_backward():
    q, k, v = _inputs()

    def step(q, k, v):
        loss = _attention(q, k, v).pow(2).sum()
        loss.backward()
        return loss
    compiled = ember.jit(step)
    compiled(q, k, v)
    ops = _ops(compiled)
    assert "scaled_dot_product_attention_backward" in ops
    assert "softmax_backward" not in ops and "matmul" not in ops


def test_weights_also_returned_are_computed_and_differentiated():
    eager, compiled, fn = _eager_and_compiled(
        lambda q, k, v: _attention(q, k, v, weights=True))
    assert "scaled_dot_product_attention" in _ops(fn)
    for a, b in zip(eager, compiled):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)


def test_an_operand_changed_in_place_afterwards_is_not_read_again():
    def fn(q, k, v):
        q = q * 1.0
        s = q @ k.transpose(-2, -1)
        q.mul_(2.0)  # (the product read q before this)
        return s.softmax(-1) @ v + q.sum()
    q, k, v = _inputs(grad=False)
    compiled = ember.jit(fn)
    np.testing.assert_allclose(compiled(q, k, v).numpy(), fn(q, k, v).numpy(), rtol=1e-12)
    assert "scaled_dot_product_attention" not in _ops(compiled)


def test_a_learnable_temperature_is_read_at_every_call():
    """A scale held in a tensor of the caller's (a parameter) is not a number the trace
    may bake in: the product is left as written, and the parameter gets its gradient."""
    temperature = ember.nn.Parameter(ember.tensor(0.5, dtype=ember.float64))

    def fn(q, k, v):
        return ((q @ k.transpose(-2, -1)) * temperature).softmax(-1) @ v
    eager, compiled, f = _eager_and_compiled(fn)
    assert "scaled_dot_product_attention" not in _ops(f)
    for a, b in zip(eager, compiled):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)
    q, k, v = _inputs(grad=False)
    with ember.no_grad():
        temperature.fill_(2.0)
    np.testing.assert_allclose(f(q, k, v).detach().numpy(), fn(q, k, v).detach().numpy(),
                               rtol=1e-12)


def test_a_finite_fill_value_is_not_rewritten():
    eager, compiled, fn = _eager_and_compiled(
        lambda q, k, v: _attention(q, k, v, fill=-1e4))
    assert "scaled_dot_product_attention" not in _ops(fn)
    for a, b in zip(eager, compiled):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)


def test_a_row_masked_entirely_gives_nan_as_eagerly():
    def fn(q, k, v):
        s = (q @ k.transpose(-2, -1)).masked_fill(ember.tensor([True, False]), -math.inf)
        return s.softmax(-1) @ v
    ember.manual_seed(0)
    q, k, v = (ember.randn(2, 3), ember.randn(2, 3), ember.randn(2, 3))
    # the mask broadcasts along the rows: every row has its first key masked only
    compiled = ember.jit(fn)
    np.testing.assert_allclose(compiled(q, k, v).numpy(), fn(q, k, v).numpy(), rtol=1e-6)

    def all_masked(q, k, v):
        s = (q @ k.transpose(-2, -1)).masked_fill(ember.ones(2, 2, dtype=ember.bool),
                                                  -math.inf)
        return s.softmax(-1) @ v
    compiled = ember.jit(all_masked)
    assert np.isnan(all_masked(q, k, v).numpy()).all()
    assert np.isnan(compiled(q, k, v).numpy()).all()
    assert "scaled_dot_product_attention" in _ops(compiled)


def test_inference_without_grad_and_float32():
    fn = ember.jit(lambda q, k, v: _attention(q, k, v))
    q, k, v = _inputs(ember.float32, (2, 4, 16, 8), grad=False)
    with ember.no_grad():
        got = fn(q, k, v)
    assert "scaled_dot_product_attention" in _ops(fn)
    np.testing.assert_allclose(got.numpy(), _attention(q, k, v).numpy(), rtol=1e-5,
                               atol=1e-6)
    # a result that leaves the graph keeps PyTorch's layout: a user's .view works
    assert got.view(8, 16, 8).shape == (8, 16, 8)


def test_optimize_false_records_ops_as_written():
    fn = ember.jit(lambda q, k, v: _attention(q, k, v), optimize=False)
    fn(*_inputs(grad=False))
    assert "scaled_dot_product_attention" not in _ops(fn)
    assert "softmax" in _ops(fn)


def test_merged_heads_and_joined_gradients_need_no_copies():
    """A gpt block's attention: the heads merge by a view of the fused op's output, and
    the q, k and v gradients join by a view of one buffer (the executor's ``cat``)."""
    b, t, h, e = 2, 8, 4, 8
    d = h * e
    ember.manual_seed(0)
    qkv = ember.nn.Linear(d, 3 * d)
    x = ember.randn(b, t, d)

    def step(x):
        q, k, v = [z.view(b, t, h, e).transpose(1, 2) for z in qkv(x).split(d, dim=2)]
        y = _attention(q, k, v).transpose(1, 2).reshape(b, t, d)
        loss = y.pow(2).sum()
        loss.backward()
        return loss
    compiled = ember.jit(step)
    losses, grads = [], []
    for f in (step, compiled):
        qkv.zero_grad()
        losses.append(f(x).item())
        grads.append(qkv.weight.grad.numpy().copy())
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-4, atol=1e-5)
    spec = next(iter(compiled.cache.values()))
    names = {instr.op.name: forward for forward, _, _, _, _, instr, _ in
             spec.executor.program}
    assert getattr(names["scaled_dot_product_attention"], "changes_layout", False)
    assert names["cat"] is runtime.LAYOUT_FREE["cat"]


def test_join_is_a_view_only_for_pieces_side_by_side():
    buf = np.arange(24.0).reshape(2, 3, 4)
    pieces = [buf[..., :1], buf[..., 1:3], buf[..., 3:]]
    joined = runtime._join_forward(np, *pieces, dim=2)
    assert np.shares_memory(joined, buf)
    np.testing.assert_array_equal(joined, buf)
    swapped = runtime._join_forward(np, pieces[1], pieces[0], pieces[2], dim=2)
    assert not np.shares_memory(swapped, buf)
    np.testing.assert_array_equal(swapped, np.concatenate([pieces[1], pieces[0], pieces[2]], 2))
    other = runtime._join_forward(np, pieces[0], buf.copy()[..., 1:], dim=2)
    np.testing.assert_array_equal(other, buf)
    assert not np.shares_memory(other, buf)


def test_attention_in_a_recompute_region():
    """Inside ``ember.utils.checkpoint``, the forward and its recomputation are both
    rewritten, and the step gives eager mode's loss and gradients."""
    from ember.utils.checkpoint import checkpoint
    b, t, h, e = 2, 5, 2, 8
    ember.manual_seed(0)
    qkv = ember.nn.Linear(h * e, 3 * h * e).double()
    x = ember.randn(b, t, h * e, dtype=ember.float64)

    def step(x):
        q, k, v = [z.view(b, t, h, e).transpose(1, 2) for z in qkv(x).split(h * e, dim=2)]
        y = checkpoint(_attention, q, k, v)
        loss = (y * y).sum()
        loss.backward()
        return loss
    compiled = ember.jit(step)
    results = []
    for f in (step, compiled):
        qkv.zero_grad()
        results.append((f(x).item(), qkv.weight.grad.numpy().copy()))
    assert "fuse_attention x2" in compiled.explain()
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-12)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-10, atol=1e-12)
