"""Elementwise and reduction fusion (``ember.compiler.passes.fuse``): what is fused, what
stays, and that a fused graph computes what the unfused one does.

Graphs are built by hand from registry ops, so each test says exactly which
instructions exist; the reference training steps check the pass on real graphs."""
from __future__ import annotations

import math
import os
import sys

import numpy as np
import pytest

import ember
from ember import dtypes as dt
from ember.compiler.fused import INNER, ROW, UNIFORM, FusedKernel
from ember.ops import registry
from ember.compiler.ir import Constant, Graph, Input, Instr, Value
from ember.compiler.passes import decompose as decompose_pass
from ember.compiler.passes.decompose import decompose_composites
from ember.compiler.passes.fuse import fuse_elementwise
from ember.compiler.runtime import NumpyExecutor
from ember.ops.registry import OPS, AbstractValue, infer

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _numpy_kernels(monkeypatch):
    # structure tests: fused kernels evaluated with NumPy (test_codegen covers C)
    monkeypatch.setenv("EMBER_JIT_BACKEND", "numpy")


class Builder:
    """A graph written instruction by instruction."""

    def __init__(self):
        self.g = Graph()

    def input(self, shape, dtype=dt.float32) -> Value:
        v = Value(shape, dtype)
        self.g.inputs.append(Input("arg", len(self.g.inputs), v, f"x{len(self.g.inputs)}"))
        return v

    def const(self, value, dtype=dt.float32) -> Value:
        array = np.asarray(value, dtype=dtype.np)
        v = Value(array.shape, dtype)
        self.g.constants.append(Constant(array, v))
        return v

    def op(self, name, *inputs, effect=False, **params):
        """The op's output value (a tuple of them for an op with several)."""
        op = OPS[name]
        out = infer(op, *[AbstractValue(v.shape, v.dtype) for v in inputs], **params)
        outs = out if op.n_outputs > 1 else (out,)
        ins = Instr(op, inputs, params, [(o.shape, o.dtype) for o in outs], effect=effect)
        self.g.instrs.append(ins)
        return tuple(ins.outputs) if op.n_outputs > 1 else ins.outputs[0]

    def finish(self, *outputs) -> Graph:
        self.g.outputs = list(outputs)
        return self.g


def run(graph, arrays):
    return NumpyExecutor(graph).run(list(arrays))[0]


def fused_instrs(graph):
    return [ins for ins in graph.instrs if isinstance(ins.op, FusedKernel)]


def check_order(graph):
    """Every instruction reads values made before it."""
    known = {inp.value.id for inp in graph.inputs} | {c.value.id for c in graph.constants}
    for ins in graph.instrs:
        for v in ins.inputs:
            assert v.id in known, f"{ins!r} reads {v!r} before it is made"
        known.update(v.id for v in ins.outputs)
    for v in graph.outputs:
        assert v.id in known


def same_as_unfused(make, arrays, rtol=1e-6):
    """Build the graph twice, fuse one, run both: the results agree."""
    expected = run(make(), arrays)
    graph = fuse_elementwise(make())
    check_order(graph)
    actual = run(graph, arrays)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype
        np.testing.assert_allclose(a, e, rtol=rtol, atol=1e-7)
    return graph


def test_chain_becomes_one_kernel_with_constants_folded_in():
    def make():
        b = Builder()
        x, y = b.input((4, 5)), b.input((4, 5))
        return b.finish(b.op("exp", b.op("mul", b.op("add", x, y), b.const(0.5))))
    graph = same_as_unfused(make, [RNG.standard_normal((4, 5), np.float32) for _ in range(2)])
    (ins,) = graph.instrs
    kernel = ins.op
    assert kernel.name == "fused_add_mul_exp"
    assert [v.id for v in ins.inputs] == [inp.value.id for inp in graph.inputs]
    assert len(kernel.literals) == 1 and float(kernel.literals[0]) == 0.5
    assert ins.outputs == graph.outputs and kernel.n_outputs == 1


def test_value_read_outside_the_group_becomes_an_extra_output():
    def make():
        b = Builder()
        x, y, w = b.input((4, 5)), b.input((4, 5)), b.input((5, 3))
        t = b.op("add", x, y)
        u = b.op("exp", t)
        m = b.op("matmul", t, w)   # reads t: t must leave the kernel
        return b.finish(u, m)
    arrays = [RNG.standard_normal(s, np.float32) for s in ((4, 5), (4, 5), (5, 3))]
    graph = same_as_unfused(make, arrays)
    (fused,) = fused_instrs(graph)
    assert fused.op.n_outputs == 2
    names = [ins.op.name for ins in graph.instrs]
    assert names == ["fused_add_exp", "matmul"]
    assert graph.instrs[1].inputs[0] is fused.outputs[0]


def test_effects_are_never_fused():
    def make():
        b = Builder()
        x = b.input((6,))
        a = b.op("exp", x)
        e = b.op("add", a, a, effect=True)
        return b.finish(b.op("neg", b.op("mul", e, a)))
    graph = same_as_unfused(make, [RNG.standard_normal(6, np.float32)])
    effect = [ins for ins in graph.instrs if ins.effect]
    assert len(effect) == 1 and effect[0].op.name == "add"
    (fused,) = fused_instrs(graph)
    assert [s.op.name for s in fused.op.steps] == ["mul", "neg"]


def test_a_group_read_from_outside_takes_no_new_members():
    def make():
        b = Builder()
        x, w = b.input((4, 4)), b.input((4, 4))
        a = b.op("exp", x)
        c = b.op("neg", a)
        m = b.op("matmul", c, w)   # reads the group {exp, neg}
        d = b.op("add", c, m)      # reads it too, after matmul: cannot join it
        return b.finish(b.op("relu", d))
    arrays = [RNG.standard_normal((4, 4), np.float32) for _ in range(2)]
    graph = same_as_unfused(make, arrays)
    assert [ins.op.name for ins in graph.instrs] == ["fused_exp_neg", "matmul",
                                                     "fused_add_relu"]


def test_different_shapes_stay_in_different_loops():
    def make():
        b = Builder()
        x, bias = b.input((8, 5)), b.input((5,))
        small = b.op("exp", b.op("mul", bias, b.const(2.0)))      # over [5]
        return b.finish(b.op("relu", b.op("add", x, small)))     # over [8, 5]
    arrays = [RNG.standard_normal((8, 5), np.float32), RNG.standard_normal(5, np.float32)]
    graph = same_as_unfused(make, arrays)
    kernels = [ins.op for ins in fused_instrs(graph)]
    assert [k.domain for k in kernels] == [(5,), (8, 5)]


def test_lone_elementwise_ops_stay_registry_ops():
    def make():
        b = Builder()
        x, w = b.input((3, 3)), b.input((3, 3))
        return b.finish(b.op("matmul", b.op("exp", x), w))
    graph = fuse_elementwise(make())
    assert [ins.op.name for ins in graph.instrs] == ["exp", "matmul"]
    assert not fused_instrs(graph)


def test_adam_shaped_update_is_one_kernel_with_scalars_computed_once():
    beta1, beta2, lr, eps = 0.9, 0.999, 1e-3, 1e-8

    def make():
        b = Builder()
        p, g, m, v, step = (b.input((6, 7)), b.input((6, 7)), b.input((6, 7)),
                            b.input((6, 7)), b.input(()))
        t = b.op("add", step, b.const(1.0))
        m2 = b.op("lerp", m, g, b.const(1 - beta1))
        v2 = b.op("add", b.op("mul", v, b.const(beta2)),
                  b.op("mul", b.op("mul", g, g), b.const(1 - beta2)))
        bc1 = b.op("sub", b.const(1.0), b.op("pow", b.const(beta1), t))
        bc2 = b.op("sqrt", b.op("sub", b.const(1.0), b.op("pow", b.const(beta2), t)))
        lr64 = b.op("div", b.const(lr, dt.float64), b.op("cast", bc1, dtype=dt.float64))
        step_size = b.op("cast", b.op("neg", lr64), dtype=dt.float32)
        denom = b.op("add", b.op("div", b.op("sqrt", v2), bc2), b.const(eps))
        p2 = b.op("add", p, b.op("mul", b.op("div", m2, denom), step_size))
        return b.finish(p2, m2, v2, t)
    arrays = [RNG.standard_normal((6, 7), np.float32) for _ in range(3)]
    arrays += [np.abs(RNG.standard_normal((6, 7), np.float32)), np.float32(4.0)]
    graph = same_as_unfused(make, arrays)
    (ins,) = graph.instrs
    kernel = ins.op
    assert kernel.n_outputs == 4 and len(kernel.inputs) == 5
    level, _ = kernel.schedule
    by_name = {}
    for j, s in enumerate(kernel.steps):
        by_name.setdefault(s.op.name, set()).add(level[kernel.first_step + j])
    assert by_name["pow"] == {UNIFORM} and by_name["cast"] == {UNIFORM}
    assert by_name["lerp"] == {INNER}


def test_trailing_reduction_joins_the_loop_leading_one_does_not():
    def make(dims):
        def build():
            b = Builder()
            x = b.input((6, 10))
            e = b.op("neg", b.op("exp", x))
            return b.finish(b.op("sum", e, dims=dims, keepdim=False, dtype=None))
        return build
    x = RNG.standard_normal((6, 10), np.float32)
    trailing = same_as_unfused(make((1,)), [x], rtol=1e-5)
    (ins,) = trailing.instrs
    assert ins.op.reduced == (1,) and ins.outputs[0].shape == (6,)
    leading = same_as_unfused(make((0,)), [x], rtol=1e-5)
    assert [ins.op.name for ins in leading.instrs] == ["fused_exp_neg", "sum"]


def test_softmax_shaped_chain_is_one_kernel():
    def make():
        b = Builder()
        x = b.input((5, 9))
        m = b.op("amax", x, dims=(1,), keepdim=True)
        e = b.op("exp", b.op("sub", x, m))
        s = b.op("sum", e, dims=(1,), keepdim=True, dtype=None)
        return b.finish(b.op("div", e, s))
    x = RNG.standard_normal((5, 9), np.float32) * 3
    graph = same_as_unfused(make, [x])
    (ins,) = graph.instrs
    assert ins.op.name == "fused_amax_sub_exp_sum_div"
    out = run(graph, [x])[0]
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-6)
    level, phase = ins.op.schedule
    assert max(phase) == 2  # max, then exp and sum, then divide: three passes


def test_layer_norm_shaped_chain_is_one_kernel():
    n, eps = 16, 1e-5

    def make():
        b = Builder()
        x, w, bias = b.input((2, 3, n)), b.input((n,)), b.input((n,))
        count = b.const(float(n))
        mean = b.op("div", b.op("sum", x, dims=(2,), keepdim=True, dtype=None), count)
        d = b.op("sub", x, mean)
        var = b.op("div", b.op("sum", b.op("mul", d, d), dims=(2,), keepdim=True,
                               dtype=None), count)
        r = b.op("rsqrt", b.op("add", var, b.const(eps)))
        return b.finish(b.op("add", b.op("mul", b.op("mul", d, r), w), bias))
    x = RNG.standard_normal((2, 3, n), np.float32)
    w, bias = RNG.standard_normal(n, np.float32), RNG.standard_normal(n, np.float32)
    graph = same_as_unfused(make, [x, w, bias], rtol=1e-5)
    (ins,) = graph.instrs
    level, _ = ins.op.schedule
    rsqrt = next(j for j, s in enumerate(ins.op.steps) if s.op.name == "rsqrt")
    assert level[ins.op.first_step + rsqrt] == ROW  # once per row, not per element
    mu = x.mean(2, keepdims=True)
    expected = (x - mu) / np.sqrt(((x - mu) ** 2).mean(2, keepdims=True) + eps) * w + bias
    np.testing.assert_allclose(run(graph, [x, w, bias])[0], expected, rtol=1e-4, atol=1e-5)


def test_recompute_regions_are_fused_only_with_themselves():
    def make():
        b = Builder()
        x = b.input((4,))
        a = b.op("exp", x)
        c = b.op("neg", a)
        b.g.instrs[-1].region = object()
        return b.finish(b.op("relu", c))
    graph = fuse_elementwise(make())
    assert not fused_instrs(graph)


# Fused primitives, decomposed ----------------------------------------------------------
def lowered(graph, monkeypatch):
    """``graph`` decomposed as for the C backend (its kernels still run with NumPy),
    then fused."""
    with monkeypatch.context() as m:
        m.setattr(decompose_pass, "backend_name", lambda: "c")
        graph = decompose_composites(graph)
    return fuse_elementwise(graph)


def _row_stats(x, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    return mean, 1 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + eps)


def _primitive_case(name, dtype):
    """(graph builder, input arrays, FusedKernel instructions expected) for ``name``."""
    f = dt.as_dtype(dtype)
    x = RNG.standard_normal((3, 4, 24)).astype(dtype) * 2
    g = RNG.standard_normal((3, 4, 24)).astype(dtype)
    w, bias = (RNG.standard_normal(24).astype(dtype) for _ in range(2))
    norm = dict(axes=(2,), eps=1e-5, center=True, has_weight=True, has_bias=True)
    if name == "layer_norm_after_residual_add":
        def make(b):
            a, r, wv, bv = b.input(x.shape, f), b.input(x.shape, f), b.input((24,), f), \
                b.input((24,), f)
            return b.op("native_layer_norm", b.op("add", a, r), wv, bv, **norm)
        return make, [x, g, w, bias], 1
    if name == "rms_norm":
        return (lambda b: b.op("rms_norm", b.input(x.shape, f), b.input((24,), f),
                               **dict(norm, center=False, has_bias=False))), [x, w], 1
    if name == "normalize_backward":
        mean, rstd = _row_stats(x)
        def make(b):
            args = [b.input(a.shape, f) for a in (g, x, mean, rstd, w)]
            return b.op("normalize_backward", *args, axes=(2,), center=True,
                        param_shape=(24,), need=(True, True, True))
        # gx in one kernel; the weight's and bias's sums over rows apart
        return make, [g, x, mean, rstd, w], 2
    if name in ("softmax", "log_softmax"):
        return (lambda b: b.op(name, b.input(x.shape, f), dim=2)), [x], 1
    if name in ("softmax_backward", "log_softmax_backward"):
        e = np.exp(x - x.max(-1, keepdims=True))
        y = e / e.sum(-1, keepdims=True) if name == "softmax_backward" else np.log(e) - \
            np.log(e.sum(-1, keepdims=True))
        return (lambda b: b.op(name, b.input(g.shape, f), b.input(y.shape, f), dim=2)), \
            [g, y.astype(dtype)], 1
    if name.startswith("gelu"):
        approximate = "tanh" if name.endswith("tanh") else "none"
        if "backward" not in name:
            return (lambda b: b.op("gelu", b.input(x.shape, f), approximate=approximate)), \
                [x], 1
        aux = OPS["gelu"].forward(np, x, approximate=approximate)[1]
        return (lambda b: b.op("gelu_backward", *[b.input(x.shape, f) for _ in range(3)],
                               approximate=approximate)), [g, x, aux], 1
    assert name == "cross_entropy_loss_backward"
    logits = x.reshape(12, 24)
    t = RNG.integers(0, 24, 12)
    t[3] = -100  # ignored
    lse = np.log(np.exp(logits).sum(1, keepdims=True))
    def make(b):
        return b.op(name, b.input((), f), b.input(logits.shape, f), b.input((12,), dt.int64),
                    b.input((12, 1), f), cdim=1, ignore_index=-100, reduction="mean",
                    label_smoothing=0.1)
    # the per-row weights, then the (rows, classes) gradient
    return make, [np.asarray(0.7, dtype), logits, t, lse.astype(dtype)], 2


PRIMITIVES = ["layer_norm_after_residual_add", "rms_norm", "normalize_backward", "softmax",
              "log_softmax", "softmax_backward", "log_softmax_backward", "gelu",
              "gelu_tanh", "gelu_backward", "gelu_backward_tanh",
              "cross_entropy_loss_backward"]


@pytest.mark.parametrize("name", PRIMITIVES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_primitives_decompose_into_kernels(name, dtype, monkeypatch):
    # (on the CPU the layer-norm backward stays whole, for its hand-written C kernel; its
    # decomposition is what other renderers and other layouts use)
    monkeypatch.setattr(registry.OPS["normalize_backward"], "whole_in_c", None)
    make, arrays, n_kernels = _primitive_case(name, dtype)

    def build():
        b = Builder()
        out = make(b)
        return b.finish(*(out if isinstance(out, tuple) else (out,)))
    primitive = build()
    (op_name,) = {ins.op.name for ins in primitive.instrs} - {"add"}
    expected = run(primitive, arrays)
    graph = lowered(build(), monkeypatch)
    check_order(graph)
    assert op_name not in {ins.op.name for ins in graph.instrs}
    assert len(fused_instrs(graph)) == n_kernels
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    for a, e in zip(run(graph, arrays), expected):
        assert a.shape == e.shape and a.dtype == e.dtype
        np.testing.assert_allclose(a, e, **tol)


def test_gelu_between_matmuls_is_one_kernel_with_both_outputs(monkeypatch):
    def make():
        b = Builder()
        x, w = b.input((8, 16)), b.input((16, 16))
        y, aux = b.op("gelu", b.op("matmul", x, w), approximate="none")
        return b.finish(b.op("matmul", y, w), aux)
    graph = lowered(make(), monkeypatch)
    assert [ins.op.name for ins in graph.instrs] == ["matmul", "fused_mul_add_sigmoid",
                                                     "matmul"]
    assert graph.instrs[1].op.n_outputs == 2  # gelu(x) and Phi(x), which its backward reads


def test_decompositions_decline_what_would_not_fuse(monkeypatch):
    def make():
        b = Builder()
        x = b.input((4, 3, 5, 5))
        w = b.input((1, 3, 1, 1))
        outs = [b.op("softmax", x, dim=1),                        # not the last dim
                b.op("native_batch_norm", x, w, axes=(0, 2, 3), eps=1e-5, center=True,
                     has_weight=True, has_bias=False)[0],         # not the trailing dims
                b.op("gelu", b.input((4, 5), dt.float16), approximate="none")[0]]
        return b.finish(*outs)
    graph = lowered(make(), monkeypatch)
    assert [ins.op.name for ins in graph.instrs] == ["softmax", "native_batch_norm", "gelu"]


def test_numpy_backend_keeps_fused_primitives():
    b = Builder()
    graph = b.finish(b.op("softmax", b.input((4, 5)), dim=1))
    assert [ins.op.name for ins in decompose_composites(graph).instrs] == ["softmax"]


# The reference training steps ---------------------------------------------------------
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))


# (normalize_backward stays whole on the CPU: a hand-written C kernel, ops/norm_kernels.py;
# the residual add its gradient feeds then stays an add of its own)
PRIMITIVE_OPS = ["native_layer_norm", "gelu", "gelu_backward", "softmax",
                 "softmax_backward", "cross_entropy_loss_backward"]


@pytest.mark.parametrize("workload,backend", [("mlp", "c"), ("cnn", "c"), ("gpt", "c"),
                                              ("mlp", "numpy")])
def test_training_steps_compiled_equal_eager(workload, backend, monkeypatch, tmp_path):
    if backend == "c":
        from ember.compiler.codegen.build import find_compiler
        if find_compiler() is None:
            pytest.skip("no C compiler")
        monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("EMBER_JIT_BACKEND", backend)
    from training import batch, build, step_function

    def make():
        ember.manual_seed(0)
        model, opt, loss_fn = build(ember, workload)
        x, y = (ember.from_numpy(a) for a in batch(workload))
        return model, step_function(opt, loss_fn, x, y)
    eager_model, eager = make()
    jit_model, compiled = make()
    compiled = ember.jit(compiled)
    for i in range(5):
        a, b = float(eager()), float(compiled())
        assert math.isclose(a, b, rel_tol=1e-4), f"step {i}: eager {a}, compiled {b}"
    kernels = [ins.op for ins in compiled.graph().instrs if isinstance(ins.op, FusedKernel)]
    assert kernels and all(k.backend == backend for k in kernels)
    if workload == "gpt" and backend == "c":  # layer norms, GELU, softmax
        left = {ins.op.name for ins in compiled.graph().instrs} & set(PRIMITIVE_OPS)
        assert not left, f"not fused: {left}"
    p1, p2 = dict(eager_model.named_parameters()), dict(jit_model.named_parameters())
    for name in p1:
        np.testing.assert_allclose(p2[name].detach().numpy(), p1[name].detach().numpy(),
                                   rtol=1e-3, atol=1e-4, err_msg=name)


def test_a_select_alone_becomes_a_kernel_and_an_add_alone_does_not(monkeypatch):
    b = Builder()
    x, mask = b.input((4, 8, 8)), b.input((8, 8), dt.bool)
    filled = b.op("masked_fill", x, mask, b.const(-2.5))
    alone = b.op("add", b.input((3,)), b.input((3,)))
    graph = lowered(b.finish(filled, alone), monkeypatch)
    assert [k.steps[0].op.name for k in (i.op for i in fused_instrs(graph))] == ["where"]
    assert "add" in {ins.op.name for ins in graph.instrs}
    rng = np.random.default_rng(0)
    xs, ms = rng.standard_normal((4, 8, 8)).astype(np.float32), rng.random((8, 8)) < 0.5
    ys = rng.standard_normal(3).astype(np.float32)
    out, total = run(graph, [xs, ms, ys, ys])
    np.testing.assert_array_equal(out, np.where(ms, np.float32(-2.5), xs))
    np.testing.assert_array_equal(total, ys + ys)
