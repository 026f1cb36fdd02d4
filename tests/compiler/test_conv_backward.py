"""The conv-backward pass (max_pool_backward -> conv_weight_grad, conv_bias_grad,
conv_transpose -> one conv2d_backward_fused): alone on hand-built graphs, what it merges
and what it must leave, with the numbers of the separate ops."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.compiler.ir import Graph
from ember.compiler.passes.conv_backward import fuse_conv_backward
from tests.compiler.test_passes import arg, emit, ops_of, run

GEO = dict(stride=(1, 1), padding=((1, 1), (0, 0)), dilation=(1, 1), groups=1)


def _backward_graph(pooled=True, bias=True, transpose=True, overlaps=False, extra=False,
                    dtype=ember.float64):
    g = Graph()
    x, w = arg(g, (3, 2, 8, 7), dtype), arg(g, (4, 2, 3, 3), dtype)
    if pooled:
        gp, idx = arg(g, (3, 4, 4, 2), dtype), arg(g, (3, 4, 4, 2), ember.int64)
        grad = emit(g, "max_pool_backward", gp, idx, size=(8, 5), overlaps=overlaps)
    else:
        grad = arg(g, (3, 4, 8, 5), dtype)
    g.outputs.append(emit(g, "conv_weight_grad", x, grad, kernel_size=(3, 3), **GEO))
    if bias:
        g.outputs.append(emit(g, "conv_bias_grad", grad))
    if transpose:
        g.outputs.append(emit(g, "conv_transpose", grad, w, out_size=(8, 7), **GEO))
    if extra:
        g.outputs.append(emit(g, "neg", grad))
    return g


def _inputs(pooled=True, dtype=np.float64):
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal((3, 2, 8, 7)), rng.standard_normal((4, 2, 3, 3))]
    if pooled:
        arrays.append(rng.standard_normal((3, 4, 4, 2)))
        # each window's winner: a flat position in the 8 x 5 plane of its 2 x 2 window
        rows, cols = np.meshgrid(np.arange(4) * 2, np.arange(2) * 2, indexing="ij")
        pick = rng.integers(0, 2, (2, 3, 4, 4, 2))
        arrays.append(((rows + pick[0]) * 5 + cols + pick[1]).astype(np.int64))
    else:
        arrays.append(rng.standard_normal((3, 4, 8, 5)))
    return [a.astype(dtype) if a.dtype.kind == "f" else a for a in arrays]


@pytest.mark.parametrize("pooled", [True, False])
@pytest.mark.parametrize("bias,transpose", [(True, True), (False, True), (True, False),
                                            (False, False)])
def test_the_gradients_become_one_instruction_with_the_same_numbers(pooled, bias, transpose):
    want = run(_backward_graph(pooled, bias, transpose), *_inputs(pooled))
    g = fuse_conv_backward(_backward_graph(pooled, bias, transpose), "c")
    assert ops_of(g) == ["conv2d_backward_fused"]
    got = run(g, *_inputs(pooled))
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_another_reader_overlapping_windows_and_other_renderers_stay_unfused():
    assert ops_of(fuse_conv_backward(_backward_graph(extra=True), "c")) == \
        ["max_pool_backward", "conv_weight_grad", "conv_bias_grad", "conv_transpose", "neg"]
    assert ops_of(fuse_conv_backward(_backward_graph(overlaps=True), "c")) == \
        ["max_pool_backward", "conv2d_backward_fused"]
    for renderer in ("numpy", "cuda"):
        assert ops_of(fuse_conv_backward(_backward_graph(), renderer))[0] == \
            "max_pool_backward"
    assert ops_of(fuse_conv_backward(_backward_graph(dtype=ember.float16), "c"))[1] == \
        "conv_weight_grad"


def test_an_index_out_of_its_plane_gives_what_the_separate_ops_give():
    arrays = _inputs()
    arrays[3][0, 0, 0, 0] = 40  # past the 8 x 5 plane: the C loop leaves it to NumPy
    want = run(_backward_graph(), *arrays)
    got = run(fuse_conv_backward(_backward_graph(), "c"), *arrays)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
