"""The linear-chain pass (linear -> linear -> ... -> linear_chain) alone on hand-built
graphs (what it joins and what it must leave), the op against the layers one by one, and
through ember.jit, where an MLP in inference becomes one instruction with eager's
numbers and training is untouched."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import nn
from ember.backends import cpu_blas
from ember.compiler.ir import Graph
from ember.compiler.passes.epilogues import fuse_epilogues
from ember.compiler.passes.linear_chains import fuse_linear_chains
from ember.ops.linear_chain import _forward as chain_forward
from ember.ops.linear import _linear_forward
from tests.compiler.test_passes import arg, emit, jit_training_ops, ops_of, run

SIZES = (5, 7, 6, 3)  # in, hidden, hidden, out


def _mlp(dtype=ember.float32, rows=(4,), biases=(True, False, True), relus=(True, True, False)):
    """linear [-> relu] layers, the ReLUs folded into the layers (as ember.jit does
    before this pass)."""
    g = Graph()
    y = arg(g, rows + (SIZES[0],), dtype)
    for i, (bias, relu) in enumerate(zip(biases, relus)):
        w = arg(g, (SIZES[i + 1], SIZES[i]), dtype)
        extra = [arg(g, (SIZES[i + 1],), dtype)] if bias else []
        y = emit(g, "linear", y, w, *extra)
        if relu:
            y = emit(g, "relu", y)
    g.outputs.append(y)
    return fuse_epilogues(g, "c")


def _inputs(g, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(v.value.shape).astype(v.value.dtype.np) for v in g.inputs]


@pytest.mark.parametrize("rows", [(1,), (4,), (2, 3)])
@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_a_chain_of_layers_becomes_one_instruction_with_the_same_numbers(rows, dtype):
    inputs = _inputs(_mlp(dtype, rows))
    before = run(_mlp(dtype, rows), *inputs)
    g = fuse_linear_chains(_mlp(dtype, rows), "c")
    assert ops_of(g) == ["linear_chain"]
    assert g.instrs[0].params["layers"] == ((True, True), (False, True), (True, False))
    after = run(g, *inputs)
    assert after[0].shape == rows + (SIZES[-1],)
    tol = 1e-6 if dtype == ember.float32 else 1e-14  # (the same products, to rounding)
    np.testing.assert_allclose(after[0], before[0], rtol=tol, atol=tol)


def test_a_layer_read_elsewhere_or_returned_ends_the_chain():
    g = _mlp()
    g.outputs.append(g.instrs[0].outputs[0])  # the first layer's result is returned too
    assert ops_of(fuse_linear_chains(g, "c")) == ["linear", "linear_chain"]
    g = _mlp()
    emit(g, "neg", g.instrs[1].outputs[0])     # the second layer's result read twice
    g.outputs.append(g.instrs[-1].outputs[0])
    assert ops_of(fuse_linear_chains(g, "c")) == ["linear_chain", "linear", "neg"]


def test_one_layer_other_renderers_and_half_precision_stay_as_they_are():
    g = Graph()
    x, w = arg(g, (2, 4)), arg(g, (3, 4))
    g.outputs.append(emit(g, "linear", x, w))
    assert ops_of(fuse_linear_chains(g, "c")) == ["linear"]
    for renderer in ("numpy", "cuda"):
        assert ops_of(fuse_linear_chains(_mlp(), renderer)) == ["linear"] * 3
    assert ops_of(fuse_linear_chains(_mlp(ember.float16, relus=(False,) * 3), "c")) == \
        ["linear"] * 3


@pytest.mark.parametrize("rows", [1, 3, 64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_driver_runs_the_chain_as_the_layers_one_by_one(rows, dtype):
    rng = np.random.default_rng(1)
    sizes = (784, 512, 300, 10)
    x = rng.standard_normal((rows, sizes[0])).astype(dtype)
    arrays, layers = [], []
    for i in range(3):
        arrays.append(rng.standard_normal((sizes[i + 1], sizes[i])).astype(dtype))
        if i != 1:
            arrays.append(rng.standard_normal(sizes[i + 1]).astype(dtype))
        layers.append((i != 1, i < 2))
    arrays, layers = tuple(arrays), tuple(layers)
    got = chain_forward(np, x, *arrays, layers=layers)
    y, k = x, 0
    for has_bias, relu in layers:
        y = _linear_forward(np, y, *arrays[k:k + 1 + has_bias], relu=relu)
        k += 1 + has_bias
    want = np.maximum(np.maximum(x.astype(np.float64) @ arrays[0].T + arrays[1], 0)
                      @ arrays[2].T, 0) @ arrays[3].T + arrays[4]
    tol = 1e-5 if dtype == np.float32 else 1e-12
    assert np.abs(got - want).max() <= tol * np.abs(want).max()
    assert np.abs(y - want).max() <= tol * np.abs(want).max()
    if cpu_blas.linear_chain(x, arrays, layers) is None:
        pytest.skip("no BLAS driver: the layers ran one by one")


def test_jit_inference_is_one_chain_and_training_is_untouched():
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                          nn.Linear(16, 4)).eval()
    compiled = ember.jit(model)
    x = ember.randn(3, 20)
    with ember.no_grad():
        np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=1e-5,
                                   atol=1e-6)
    chained = ember.compiler.codegen.backend_name() == "c"
    assert ops_of(compiled.graph()) == (["linear_chain"] if chained else
                                        ["linear", "relu", "linear", "relu", "linear"])
    model.train()
    ops = jit_training_ops(model, x, rtol=1e-5, atol=1e-6)
    assert "linear_chain" not in ops  # the backward reads each layer's input
