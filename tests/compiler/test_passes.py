"""The graph passes, each alone on small graphs built by hand, and together on the gpt
training step: what is removed, merged and kept, that outputs and updates follow, that
effects and in-place updates survive, and that the graph computes the same numbers."""
from __future__ import annotations

import importlib
import os
import sys

import numpy as np
import pytest

import ember
from ember import dtypes as dt
from ember.compiler import passes
from ember.compiler.explain import snapshot
from ember.compiler.ir import Constant, Graph, Input, Instr, Update, Value
from ember.compiler.passes.cse import eliminate_common_subexpressions
from ember.compiler.passes.dce import eliminate_dead_code
from ember.compiler.passes.fold_constants import fold_constants
from ember.compiler.passes.join_slices import join_slice_gradients
from ember.compiler.passes.simplify import simplify
from ember.compiler.runtime import NumpyExecutor, fetch_inputs
from ember.compiler.trace import RANDOM
from ember.ops import registry
from ember.ops.registry import OPS, AbstractValue, Op

F32 = dt.float32
fold_module = importlib.import_module("ember.compiler.passes.fold_constants")


# Building graphs by hand ---------------------------------------------------------------
def arg(g: Graph, shape, dtype=F32) -> Value:
    v = Value(shape, dtype)
    g.inputs.append(Input("arg", len(g.inputs), v, f"arg{len(g.inputs)}"))
    return v


def const(g: Graph, array) -> Value:
    array = np.asarray(array)
    v = Value(array.shape, dt.as_dtype(array.dtype))
    g.constants.append(Constant(array, v))
    return v


def emit(g: Graph, name: str, *inputs, op=None, **params):
    op = op or OPS[name]
    out = registry.infer(op, *[AbstractValue(v.shape, v.dtype) for v in inputs], **params)
    outs = out if op.n_outputs != 1 else (out,)
    ins = Instr(op, inputs, params, [(a.shape, a.dtype) for a in outs])
    g.instrs.append(ins)
    return ins.outputs if op.n_outputs != 1 else ins.outputs[0]


def draw(g: Graph, shape) -> Value:
    """A random draw (an effect), the same numbers at every run."""
    def make(gen):
        return gen.standard_normal(shape).astype(np.float32)
    ins = Instr(RANDOM, [], {"make": make, "rng": lambda: np.random.default_rng(7)},
                [(shape, F32)], effect=True)
    g.instrs.append(ins)
    return ins.outputs[0]


def run(g: Graph, *arrays):
    outs, updates = NumpyExecutor(g).run([np.asarray(a) for a in arrays])[:2]
    return outs + [u for u in updates if u is not None]


def ops_of(g: Graph) -> list[str]:
    return [ins.op.name for ins in g.instrs]


def jit_training_ops(model, x, rtol, atol) -> list[str]:
    """Run ``model(x).sum()``'s backward eagerly, then as one ember.jit step, check that
    the parameters' gradients agree, and return the compiled graph's ops."""
    model(x).sum().backward()
    want = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()

    def step(inp):
        loss = model(inp).sum()
        loss.backward()
        return loss
    step = ember.jit(step)
    step(x)
    for p, g in zip(model.parameters(), want):
        np.testing.assert_allclose(p.grad.numpy(), g, rtol=rtol, atol=atol)
    return ops_of(step.graph())


def same(before, after):
    assert len(before) == len(after)
    for b, a in zip(before, after):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


X = np.array([[0.5, -1.5, 2.0], [3.0, -0.25, 1.0]], dtype=np.float32)


# fold_constants ------------------------------------------------------------------------
def test_fold_turns_the_causal_mask_into_a_constant():
    g = Graph()
    x = arg(g, (4, 4))
    mask = emit(g, "triu", const(g, np.ones((4, 4), bool)), diagonal=1)
    g.outputs = [emit(g, "masked_fill", x, mask, const(g, np.float32(-np.inf)))]
    xs = np.arange(16, dtype=np.float32).reshape(4, 4)
    before = run(g, xs)
    fold_constants(g)
    assert ops_of(g) == ["masked_fill"]
    folded = [c.array for c in g.constants if c.value is g.instrs[0].inputs[1]]
    np.testing.assert_array_equal(folded[0], np.triu(np.ones((4, 4), bool), 1))
    same(before, run(g, xs))


def test_fold_evaluates_a_chain_of_scalar_arithmetic_in_one_pass():
    g = Graph()
    x = arg(g, (2, 3))
    a = emit(g, "add", const(g, np.float32(1.5)), const(g, np.float32(0.5)))
    b = emit(g, "sqrt", emit(g, "mul", a, const(g, np.float32(8.0))))
    g.outputs = [emit(g, "mul", x, b)]
    before = run(g, X)
    fold_constants(g)
    assert ops_of(g) == ["mul"]
    scale = [c.array for c in g.constants if c.value is g.instrs[0].inputs[1]][0]
    assert scale.dtype == np.float32 and scale == 4.0
    same(before, run(g, X))


def test_fold_keeps_effects_inputs_and_what_reads_them():
    g = Graph()
    x = arg(g, (2, 3))
    r = draw(g, (2, 3))
    noisy = emit(g, "mul", r, const(g, np.float32(2.0)))
    g.outputs = [emit(g, "add", emit(g, "add", noisy, x), const(g, np.float32(1.0)))]
    before = run(g, X)
    fold_constants(g)
    assert ops_of(g) == ["random", "mul", "add", "add"]
    assert g.instrs[0].effect
    same(before, run(g, X))


def test_fold_never_makes_an_output_or_update_a_constant():
    g = Graph()
    two = const(g, np.float32(2.0))
    out = emit(g, "mul", two, two)
    new_state = emit(g, "add", two, two)
    g.outputs = [out]
    g.updates = [Update("data", object(), new_state, "state")]
    fold_constants(g)
    assert ops_of(g) == ["mul", "add"]  # the caller gets a fresh array every call
    outs, updates = NumpyExecutor(g).run([])[:2]
    assert outs[0] == 4.0 and updates[0] == 4.0
    assert all(a is not c.array for a in outs + updates for c in g.constants)


def test_fold_leaves_results_over_the_limit_but_counts_broadcasts_by_their_memory(
        monkeypatch):
    monkeypatch.setattr(fold_module, "FOLD_LIMIT_BYTES", 64)
    g = Graph()
    x = arg(g, (4, 8))
    big = emit(g, "add", const(g, np.ones((4, 8), np.float32)), const(g, np.float32(1.0)))
    spread = emit(g, "expand", const(g, np.float32(3.0)), shape=(4, 8))  # 128 B, spans 4
    g.outputs = [emit(g, "mul", emit(g, "add", x, big), spread)]
    xs = np.arange(32, dtype=np.float32).reshape(4, 8)
    before = run(g, xs)
    fold_constants(g)
    assert ops_of(g) == ["add", "add", "mul"]  # big stays, the broadcast is folded
    same(before, run(g, xs))


def test_fold_leaves_a_failing_instruction_to_fail_when_run():
    g = Graph()
    bad = emit(g, "floor_divide", const(g, np.int64(2)), const(g, np.int64(0)))
    g.outputs = [emit(g, "neg", bad)]
    fold_constants(g)
    assert ops_of(g) == ["floor_divide", "neg"]
    with pytest.raises(ember.EmberError, match="division by zero"):
        NumpyExecutor(g).run([])


def test_fold_merges_equal_constants_so_cse_merges_what_reads_them():
    g = Graph()
    x = arg(g, (2, 3))
    a = emit(g, "mul", x, const(g, np.float32(0.5)))
    b = emit(g, "mul", x, const(g, np.float32(0.5)))
    c = emit(g, "mul", x, const(g, np.float32(-0.0)))
    d = emit(g, "mul", x, const(g, np.float32(0.0)))
    g.outputs = [emit(g, "add", a, b), c, d]
    before = run(g, X)
    fold_constants(g)
    assert g.instrs[0].inputs[1] is g.instrs[1].inputs[1]          # the two 0.5s
    assert g.instrs[2].inputs[1] is not g.instrs[3].inputs[1]      # -0.0 is not 0.0
    eliminate_common_subexpressions(g)
    assert ops_of(g) == ["mul", "mul", "mul", "add"]
    same(before, run(g, X))


def test_fold_does_not_merge_constants_of_other_dtypes():
    g = Graph()
    c32, c64 = const(g, np.float32(0.5)), const(g, np.float64(0.5))
    x, y = arg(g, (3,)), arg(g, (3,), dt.float64)
    g.outputs = [emit(g, "mul", x, c32), emit(g, "mul", y, c64)]
    fold_constants(g)
    assert g.instrs[0].inputs[1] is c32 and g.instrs[1].inputs[1] is c64


# simplify ------------------------------------------------------------------------------
IDENTITIES = [("add", 0.0, "right"), ("add", 0.0, "left"), ("sub", 0.0, "right"),
              ("mul", 1.0, "right"), ("mul", 1.0, "left"), ("div", 1.0, "right"),
              ("pow", 1.0, "right"), ("add", [0.0, 0.0, 0.0], "right"),
              ("mul", np.broadcast_to(np.float32(1.0), (2, 3)), "left")]


@pytest.mark.parametrize("name,unit,side", IDENTITIES)
def test_simplify_removes_identities(name, unit, side):
    g = Graph()
    e = emit(g, "exp", arg(g, (2, 3)))
    c = const(g, np.asarray(unit, np.float32))
    g.outputs = [emit(g, "sin", emit(g, name, *((e, c) if side == "right" else (c, e))))]
    before = run(g, X)
    simplify(g)
    assert ops_of(g) == ["exp", "sin"]
    assert g.instrs[1].inputs[0] is e
    same(before, run(g, X))


@pytest.mark.parametrize("name,value,side,shape", [
    ("add", np.zeros((2, 3), np.float32), "right", (3,)),   # the constant broadcasts x up
    ("sub", 0.0, "left", (2, 3)),                           # 0 - x is not x
    ("mul", 2.0, "right", (2, 3)),
    ("mul", [1.0, 2.0, 1.0], "right", (2, 3)),
    ("div", 1.0, "left", (2, 3)),
    ("mul", np.nan, "right", (2, 3))])
def test_simplify_keeps_what_is_not_an_identity(name, value, side, shape):
    g = Graph()
    e = emit(g, "exp", arg(g, shape))
    c = const(g, np.asarray(value, np.float32))
    g.outputs = [emit(g, "sin", emit(g, name, *((e, c) if side == "right" else (c, e))))]
    xs = X if shape == (2, 3) else X[0]
    before = run(g, xs)
    simplify(g)
    assert ops_of(g) == ["exp", name, "sin"]
    same(before, run(g, xs))


def test_simplify_unary_identities():
    g = Graph()
    e = emit(g, "exp", arg(g, (2, 3)))
    nn = emit(g, "neg", emit(g, "neg", e))
    same_dtype = emit(g, "cast", nn, dtype=F32)
    widened = emit(g, "cast", same_dtype, dtype=dt.float64)
    g.outputs = [emit(g, "sin", emit(g, "clone", widened))]
    before = run(g, X)
    simplify(g)
    assert ops_of(g) == ["exp", "neg", "cast", "sin"]   # the inner neg is left for DCE
    assert g.instrs[2].inputs[0] is e and g.instrs[2].params["dtype"] is dt.float64
    eliminate_dead_code(g)
    assert ops_of(g) == ["exp", "cast", "sin"]
    same(before, run(g, X))


def test_simplify_cancels_and_composes_permutes():
    g = Graph()
    e = emit(g, "exp", arg(g, (2, 3, 4)))
    back = emit(g, "permute", emit(g, "permute", e, dims=(1, 0, 2)), dims=(1, 0, 2))
    p = emit(g, "permute", emit(g, "permute", back, dims=(2, 0, 1)), dims=(0, 2, 1))
    g.outputs = [emit(g, "sin", p)]
    xs = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 10
    before = run(g, xs)
    simplify(g)
    eliminate_dead_code(g)
    assert ops_of(g) == ["exp", "permute", "sin"]
    assert g.instrs[1].inputs[0] is e and g.instrs[1].params["dims"] == (2, 1, 0)
    same(before, run(g, xs))


def test_simplify_collapses_views_and_expands():
    g = Graph()
    e = emit(g, "exp", arg(g, (2, 3)))
    flat = emit(g, "view", emit(g, "view", e, shape=(6,)), shape=(3, 2))
    again = emit(g, "view", emit(g, "view", flat, shape=(6,)), shape=(2, 3))
    wide = emit(g, "expand", emit(g, "expand", again, shape=(1, 2, 3)), shape=(4, 2, 3))
    g.outputs = [emit(g, "sin", flat), emit(g, "cos", wide),
                 emit(g, "tan", emit(g, "expand", e, shape=(2, 3)))]
    before = run(g, X)
    simplify(g)
    eliminate_dead_code(g)
    assert ops_of(g) == ["exp", "view", "expand", "sin", "cos", "tan"]
    view, expand = g.instrs[1:3]
    assert view.inputs[0] is e and view.params["shape"] == (3, 2)
    assert expand.inputs[0] is e and expand.params["shape"] == (4, 2, 3)
    assert g.instrs[5].inputs[0] is e
    same(before, run(g, X))


def test_simplify_reads_a_broadcast_operand_unbroadcast():
    g = Graph()
    e = emit(g, "exp", arg(g, (2, 3)))
    two = const(g, np.float32(2.0))
    spread = emit(g, "expand", two, shape=(2, 3))
    threes = const(g, np.full((2, 3), 3.0, np.float32))
    g.outputs = [emit(g, "sin", emit(g, "add", emit(g, "mul", e, spread), threes))]
    before = run(g, X)
    simplify(g)
    mul, add = g.instrs[2], g.instrs[3]
    assert mul.inputs[1] is two                   # the expand is left for DCE
    assert add.inputs[1].shape == ()              # a 0-d constant holding 3
    eliminate_dead_code(g)
    assert ops_of(g) == ["exp", "mul", "add", "sin"]
    same(before, run(g, X))


def test_simplify_remaps_outputs_and_updates_but_never_to_shared_memory():
    g = Graph()
    x = arg(g, (2, 3))
    e, s = emit(g, "exp", x), emit(g, "sin", x)
    one, zero = const(g, np.float32(1.0)), const(g, np.float32(0.0))
    fresh_out = emit(g, "mul", e, one)        # -> e: made by exp, seen by no one else
    input_out = emit(g, "mul", x, one)        # x is the caller's: stays
    update = emit(g, "add", s, zero)          # -> s
    twin = emit(g, "mul", update, one)        # would make two results one array: stays
    g.outputs = [fresh_out, input_out, twin]
    g.updates = [Update("data", object(), update, "state")]
    before = run(g, X)
    simplify(g)
    assert g.outputs[0] is e and g.updates[0].value is s
    assert g.outputs[1] is input_out and g.outputs[2] is twin
    assert ops_of(g) == ["exp", "sin", "mul", "mul"]
    same(before, run(g, X))


def test_simplify_keeps_effects_and_leaves_unregistered_ops_alone():
    g = Graph()
    r = draw(g, (2, 3))
    lookalike = Op("mul", lambda xp, a, b: a * b + 1)   # a kernel named like a registry op
    odd = emit(g, "mul", r, const(g, np.float32(1.0)), op=lookalike)
    g.outputs = [emit(g, "sin", emit(g, "neg", emit(g, "neg", r))), emit(g, "cos", odd)]
    before = run(g)
    simplify(g)
    eliminate_dead_code(g)
    assert ops_of(g) == ["random", "mul", "sin", "cos"]
    assert g.instrs[0].effect and g.instrs[2].inputs[0] is r
    same(before, run(g))


# join_slice_gradients ------------------------------------------------------------------
def _slice_gradient_sum(pieces):
    """The gradient of a (2, 6) tensor split in three along dim 1, summed as autograd
    records it; ``pieces`` says which of the three slices are summed, in which order."""
    g = Graph()
    grads = [arg(g, (2, 2)) for _ in pieces]
    parts = [emit(g, "index_backward", v, shape=(2, 6), accumulate=False,
                  index=(slice(None), slice(2 * k, 2 * k + 2))) for v, k in zip(grads, pieces)]
    total = parts[0]
    for p in parts[1:]:
        total = emit(g, "add", total, p)
    g.outputs = [emit(g, "mul", total, const(g, np.float32(2.0)))]
    return g


def test_join_slice_gradients_makes_one_cat_of_tiling_slices():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((2, 2)).astype(np.float32) for _ in range(3)]
    g = _slice_gradient_sum([2, 0, 1])
    before = run(g, *arrays)
    g = eliminate_dead_code(join_slice_gradients(g))
    assert ops_of(g) == ["cat", "mul"]
    cat = g.instrs[0]
    assert cat.params == {"dim": 1}
    assert [v.id for v in cat.inputs] == [g.inputs[1].value.id, g.inputs[2].value.id,
                                          g.inputs[0].value.id]
    same(before, run(g, *arrays))


def test_join_slice_gradients_leaves_slices_that_do_not_tile():
    g = _slice_gradient_sum([0, 2])  # the middle slice is zeros: no cat can say that
    assert join_slice_gradients(g).instrs[-1].op.name == "mul"
    assert "cat" not in ops_of(g)
    g = _slice_gradient_sum([0, 1, 1, 2])  # overlapping
    assert "cat" not in ops_of(join_slice_gradients(g))


def test_pipeline_never_drops_an_unread_effect_or_an_in_place_update():
    g = Graph()
    x = arg(g, (2, 3))
    draw(g, (2, 3))                                     # read by nothing
    step = emit(g, "add", x, const(g, np.float32(0.0)))  # x.data <- x + 0
    g.updates = [Update("data", ("arg", 0), step, "x")]
    g.outputs = [emit(g, "sum", x, dims=(0, 1), keepdim=False, dtype=None)]
    passes.optimize(g, passes.SIMPLIFY)
    assert ops_of(g) == ["random", "add", "sum"]
    assert g.updates[0].value is step
    outs = run(g, X)
    np.testing.assert_array_equal(outs[1], X)


# All together, on the gpt training step --------------------------------------------------
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "bench"))


def test_gpt_step_graph_shrinks_and_gives_eager_losses():
    from training import make_step
    compiled = ember.jit(make_step(ember, "gpt"))
    losses = [compiled().item() for _ in range(2)]
    eager = make_step(ember, "gpt")
    np.testing.assert_allclose(losses, [eager().item() for _ in range(2)], rtol=1e-5)

    spec = next(iter(compiled.cache.values()))
    captured = spec.original
    base = snapshot(captured)
    for run_pass in (eliminate_common_subexpressions, eliminate_dead_code):
        base = run_pass(base)
    ours = passes.optimize(snapshot(captured), passes.SIMPLIFY)
    assert "triu" in ops_of(base) and "triu" not in ops_of(ours)
    assert len(ours.instrs) < len(base.instrs) - 50
    assert len(ours.constants) < len(captured.constants) // 4
    assert not [ins for ins in ours.instrs if ins.op.name == "view"
                and ins.params["shape"] == ins.inputs[0].shape]

    state = fetch_inputs(ours, [])  # this step's inputs (the model after two steps)
    (loss,) = NumpyExecutor(ours).run(state)[0]
    np.testing.assert_allclose(loss, eager().item(), rtol=1e-5)
