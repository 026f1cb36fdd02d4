"""The conv-epilogue pass (convolution [-> relu] [-> max_pool_values] -> conv2d_fused):
alone on hand-built graphs (what it merges and what it must leave), and through
ember.jit on conv nets, where inference gives eager's numbers and training is untouched."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import nn
from ember.compiler.ir import Graph
from ember.compiler.passes.epilogues import fuse_epilogues, pool_relu_masks
from tests.compiler.test_passes import arg, const, emit, jit_training_ops, ops_of, run

CONV = dict(stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), groups=1,
            out_size=(6, 6))
POOL = dict(kernel=(2, 2), stride=(2, 2), dilation=(1, 1), padding=(0, 0), out_size=(3, 3),
            overlaps=False)


def _chain(relu=True, pool=True, pool_params=POOL, dtype=ember.float32):
    g = Graph()
    x, w, b = arg(g, (2, 3, 8, 8), dtype), arg(g, (4, 3, 3, 3), dtype), arg(g, (4,), dtype)
    y = emit(g, "convolution", x, w, b, **CONV)
    if relu:
        y = emit(g, "relu", y)
    if pool:
        y = emit(g, "max_pool_values", y, **pool_params)
    g.outputs.append(y)
    return g


def _inputs(dtype=np.float32):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(dtype) for s in ((2, 3, 8, 8), (4, 3, 3, 3), (4,))]


@pytest.mark.parametrize("relu,pool", [(True, True), (True, False), (False, True)])
def test_a_conv_chain_becomes_one_instruction_with_the_same_numbers(relu, pool):
    before = run(_chain(relu, pool), *_inputs())
    g = fuse_epilogues(_chain(relu, pool), "c")
    assert ops_of(g) == ["conv2d_fused"]
    assert g.instrs[0].params["relu"] is relu
    np.testing.assert_allclose(run(g, *_inputs())[0], before[0], rtol=1e-6, atol=1e-6)


def test_a_value_read_elsewhere_or_returned_stays_unfused():
    g = _chain()
    g.outputs.append(g.instrs[1].outputs[0])  # the relu's result is also returned
    g = fuse_epilogues(g, "c")
    assert ops_of(g) == ["conv2d_fused", "max_pool_values"]  # conv + relu only
    g = _chain()
    emit(g, "neg", g.instrs[0].outputs[0])    # the convolution's result read twice
    g.outputs.append(g.instrs[-1].outputs[0])
    assert ops_of(fuse_epilogues(g, "c"))[:3] == ["convolution", "relu",
                                                       "max_pool_values"]


def test_padded_dilated_ceil_mode_pools_and_other_renderers_stay_unfused():
    for params in (dict(POOL, padding=(1, 1), out_size=(4, 4)),
                   dict(POOL, dilation=(2, 2), out_size=(2, 2)),
                   dict(POOL, kernel=(3, 3), out_size=(3, 3))):  # ceil mode: 3 windows
        assert ops_of(fuse_epilogues(_chain(pool_params=params), "c")) == \
            ["conv2d_fused", "max_pool_values"]
    for renderer in ("numpy", "cuda"):
        assert ops_of(fuse_epilogues(_chain(), renderer)) == \
            ["convolution", "relu", "max_pool_values"]
    assert ops_of(fuse_epilogues(_chain(dtype=ember.float16), "c"))[0] == "convolution"


def _net():
    return nn.Sequential(nn.Conv2d(2, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 8, 3, stride=2), nn.ReLU(), nn.MaxPool2d(2, 1),
                         nn.Flatten(), nn.Linear(8, 3))


@pytest.mark.parametrize("dtype,tol", [(ember.float32, 1e-5), (ember.float64, 1e-12)])
def test_jit_inference_fuses_and_matches_eager(dtype, tol):
    ember.manual_seed(0)
    model = _net().to(dtype).eval()
    x = ember.randn(5, 2, 12, 12, dtype=dtype)
    compiled = ember.jit(model)
    with ember.no_grad():
        want, got = model(x), compiled(x)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=tol, atol=tol)
    if ember.compiler.codegen.backend_name() == "c":
        assert ops_of(compiled.graph()).count("conv2d_fused") == 2


def test_jit_training_fuses_the_indexed_pooling_and_gives_eager_gradients():
    ember.manual_seed(0)
    model = _net().to(ember.float64)
    x = ember.randn(4, 2, 12, 12, dtype=ember.float64)
    ops = jit_training_ops(model, x, rtol=1e-10, atol=1e-12)
    if ember.compiler.codegen.backend_name() == "c":  # the relu masks moved below the
        assert ops.count("conv2d_fused_indexed") == 2  # poolings: nothing else reads the
        assert "max_pool" not in ops and "relu" not in ops  # relus' results


def _masked_pool_backward(mask_side=1, zero=0.0):
    g = Graph()
    r, gp = arg(g, (2, 3, 4, 4)), arg(g, (2, 3, 2, 2))
    vals, idx = emit(g, "max_pool", r, **dict(POOL, out_size=(2, 2)))
    back = emit(g, "max_pool_backward", gp, idx, size=(4, 4), overlaps=False)
    z = const(g, np.float32(zero))
    mask = emit(g, "cast", emit(g, "gt", r, z), dtype=ember.float32)
    out = emit(g, "mul", *((back, mask) if mask_side else (mask, back)))
    g.outputs += [vals, out]
    return g


@pytest.mark.parametrize("mask_side", [0, 1])
def test_pool_relu_masks_moves_the_mask_below_the_scatter(mask_side):
    rng = np.random.default_rng(2)
    r = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    r[0, 0] = -1.0                  # a window of ties, all masked
    r[1, 2, 0, 0] = np.nan          # NaN wins its window, and masks it
    gp = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
    before = run(_masked_pool_backward(mask_side), r, gp)
    g = pool_relu_masks(_masked_pool_backward(mask_side))
    assert ops_of(g) == ["max_pool", "gt", "cast", "mul", "max_pool_backward"]
    assert g.instrs[1].inputs[0] is g.instrs[0].outputs[0]  # the mask of the pooled values
    after = run(g, r, gp)
    np.testing.assert_array_equal(after[1], before[1])
    # a mask against another threshold is not a ReLU's: left alone
    assert ops_of(pool_relu_masks(_masked_pool_backward(zero=0.5)))[-1] == "mul"


def _linear_chain(bias=True, dtype=ember.float32):
    g = Graph()
    x, w = arg(g, (5, 7), dtype), arg(g, (6, 7), dtype)
    y = emit(g, "linear", x, w, *([arg(g, (6,), dtype)] if bias else []))
    g.outputs.append(emit(g, "relu", y))
    return g


@pytest.mark.parametrize("bias", [True, False])
def test_a_linear_takes_the_relu_after_it(bias):
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in ((5, 7), (6, 7), (6,))]
    inputs = inputs if bias else inputs[:2]
    before = run(_linear_chain(bias), *inputs)
    g = fuse_epilogues(_linear_chain(bias), "c")
    assert ops_of(g) == ["linear"] and g.instrs[0].params["relu"] is True
    np.testing.assert_array_equal(run(g, *inputs)[0], before[0])
    assert (before[0] == 0).any() and (before[0] > 0).any()
    assert ops_of(fuse_epilogues(_linear_chain(dtype=ember.float16), "c")) == ["linear", "relu"]
