"""The C attention kernels (``ember.ops.attention_kernels``) against the NumPy path of
the same op and against PyTorch: layouts read in place (views of a fused qkv, broadcast
batch dims), masks, dtypes, rows masked entirely, the heads-inside layouts ember.jit
asks for."""
import math

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.compiler.codegen import build
from ember.ops import attention, attention_kernels as ak

pytestmark = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler")

try:
    import torch
except ImportError:  # (the NumPy path is the oracle then)
    torch = None


def _numpy_path(fn, *args, **kwargs):
    """``fn`` with the C kernels turned off."""
    forward, backward = ak.forward, ak.backward
    ak.forward = ak.backward = lambda *a, **k: None
    try:
        return fn(*args, **kwargs)
    finally:
        ak.forward, ak.backward = forward, backward


def _arrays(rng, dtype, *shapes):
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


CASES = [  # (q, k, v shapes, mask shape or None)
    ((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 6), None),
    ((2, 3, 5, 8), (3, 7, 8), (1, 3, 7, 6), (5, 7)),       # broadcast batch dims
    ((40, 33), (50, 33), (50, 17), (40, 1)),                 # no batch; mask along rows
    ((4, 1, 9, 16), (4, 2, 9, 16), (4, 2, 9, 16), (2, 1, 9)),  # mask broadcast along rows
    ((1, 2, 70, 24), (1, 2, 300, 24), (1, 2, 300, 24), (70, 300)),  # long rows: lanes
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("qs,ks,vs,ms", CASES)
def test_kernels_match_the_numpy_path(dtype, qs, ks, vs, ms):
    rng = np.random.default_rng(0)
    q, k, v = _arrays(rng, dtype, qs, ks, vs)
    extra = () if ms is None else tuple(_arrays(rng, dtype, ms))
    params = dict(scale=0.3, has_mask=ms is not None, has_dropout=False)
    batch = np.broadcast_shapes(*(a.shape[:-2] for a in (q, k, v) + extra))
    assert ak.forward(q, k, v, extra[0] if extra else None, 0.3, batch) is not None
    out, w = attention._attention_forward(np, q, k, v, *extra, **params)
    ref_out, ref_w = _numpy_path(attention._attention_forward, np, q, k, v, *extra, **params)
    tol = 2e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(out, ref_out, rtol=tol, atol=tol)
    np.testing.assert_allclose(w, ref_w, rtol=tol, atol=tol)
    # gradients of the batch-broadcast operands come back at the full batch shape, as
    # the NumPy path gives them (the VJP sums them down)
    g = rng.standard_normal(out.shape).astype(dtype)
    need = (True, True, True, False)
    bparams = dict(scale=0.3, has_dropout=False, has_gp=False, need=need)
    got = attention._attention_backward_forward(np, g, q, k, v, w, **bparams)
    ref = _numpy_path(attention._attention_backward_forward, np, g, q, k, v, ref_w, **bparams)
    for a, b in zip(got[:3], ref[:3]):
        np.testing.assert_allclose(a, b, rtol=tol * 10, atol=tol * 10)


@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("causal", [True, False])
def test_views_of_a_fused_projection_against_torch(causal):
    """q, k and v as the head views of one (b, t, 3d) projection, read in place."""
    rng = np.random.default_rng(1)
    b, t, h, e = 3, 17, 4, 8
    qkv = rng.standard_normal((b, t, 3 * h * e)).astype(np.float32)
    g = rng.standard_normal((b, h, t, e)).astype(np.float32)
    x = ember.tensor(qkv, requires_grad=True)
    xt = torch.tensor(qkv, requires_grad=True)
    outs = []
    for lib, src in ((ember, x), (torch, xt)):
        heads = [z.reshape(b, t, h, e).transpose(1, 2) for z in src.split(h * e, dim=-1)]
        fn = F.scaled_dot_product_attention if lib is ember else \
            torch.nn.functional.scaled_dot_product_attention
        y = fn(*heads, is_causal=causal)
        y.backward(lib.tensor(g))
        outs.append(y.detach().numpy())
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_rows_masked_entirely():
    """SDPA gives zeros there (PyTorch's CPU kernels do too); ``plain_softmax`` gives NaN,
    as ``softmax`` of a row of -inf does."""
    rng = np.random.default_rng(2)
    q, k, v = _arrays(rng, np.float32, (2, 3, 4), (2, 5, 4), (2, 5, 3))
    mask = np.zeros((3, 5), np.float32)
    mask[1] = -np.inf
    params = dict(scale=0.5, has_mask=True, has_dropout=False)
    out, w = attention._attention_forward(np, q, k, v, mask, **params)
    assert (w[:, 1] == 0).all() and (out[:, 1] == 0).all()
    assert np.isfinite(out).all()
    out, w = attention._attention_forward(np, q, k, v, mask, **params, plain_softmax=True)
    ref_out, ref_w = _numpy_path(attention._attention_forward, np, q, k, v, mask, **params,
                                 plain_softmax=True)
    assert np.isnan(out[:, 1]).all() and np.isnan(ref_out[:, 1]).all()
    np.testing.assert_allclose(out[:, [0, 2]], ref_out[:, [0, 2]], rtol=2e-6)
    # a NaN score makes its whole row NaN either way
    q[0, 0, 0] = np.nan
    out, _ = attention._attention_forward(np, q, k, v, mask, **params)
    assert np.isnan(out[0, 0]).all() and np.isfinite(out[1, 0]).all()


def test_heads_inside_layouts_hold_the_same_values():
    rng = np.random.default_rng(3)
    q, k, v = _arrays(rng, np.float32, (2, 4, 6, 8), (2, 4, 6, 8), (2, 4, 6, 8))
    params = dict(scale=0.25, has_mask=False, has_dropout=False)
    out, w = attention._attention_forward(np, q, k, v, **params)
    inside, w2 = attention._attention_forward(np, q, k, v, **params, heads_inside=True)
    np.testing.assert_array_equal(out, inside)
    # (b, t, h, e) in memory: merging the heads is a view
    assert inside.transpose(0, 2, 1, 3).flags.c_contiguous
    g = rng.standard_normal(out.shape).astype(np.float32)
    bparams = dict(scale=0.25, has_dropout=False, has_gp=False, need=(True, True, True, False))
    plain = attention._attention_backward_forward(np, g, q, k, v, w, **bparams)
    inside = attention._attention_backward_forward(np, g, q, k, v, w, **bparams,
                                                   heads_inside=True)
    for a, b in zip(plain[:3], inside[:3]):
        np.testing.assert_array_equal(a, b)
    # q, k and v gradients side by side in one (b, t, 3, h, e) buffer
    merged = [a.transpose(0, 2, 1, 3).reshape(2, 6, 32) for a in inside[:3]]
    assert all(m.base is not None for m in merged)
    starts = [m.__array_interface__["data"][0] for m in merged]
    assert np.diff(starts).tolist() == [32 * 4, 32 * 4]


def test_only_the_gradients_asked_for():
    rng = np.random.default_rng(4)
    q, k, v = _arrays(rng, np.float64, (3, 5, 4), (3, 6, 4), (3, 6, 2))
    params = dict(scale=1.0, has_mask=False, has_dropout=False)
    _, w = attention._attention_forward(np, q, k, v, **params)
    g = rng.standard_normal((3, 5, 2))
    full = attention._attention_backward_forward(np, g, q, k, v, w, scale=1.0,
                                                 has_dropout=False, has_gp=False,
                                                 need=(True, True, True, False))
    for need in [(True, False, False), (False, True, False), (False, False, True)]:
        got = attention._attention_backward_forward(np, g, q, k, v, w, scale=1.0,
                                                    has_dropout=False, has_gp=False,
                                                    need=need + (False,))
        for i in range(3):
            if need[i]:
                np.testing.assert_allclose(got[i], full[i], rtol=1e-14)
            else:
                assert got[i].shape == ()


def test_strided_last_dim_takes_the_numpy_path():
    rng = np.random.default_rng(5)
    q = rng.standard_normal((2, 8, 6)).astype(np.float32)[..., ::2]
    assert ak.forward(q, q, q, None, 1.0, (2,)) is None
    out, _ = attention._attention_forward(np, q, q, q, scale=1.0, has_mask=False,
                                          has_dropout=False)
    s = q @ q.swapaxes(-1, -2)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(out, p @ q, rtol=1e-5)
    assert math.isfinite(float(out.sum()))


@pytest.mark.parametrize("plain", [False, True])
@pytest.mark.parametrize("shared", [True, False])
def test_keys_masked_at_the_end_of_rows_are_skipped_exactly(plain, shared):
    """Rows whose mask closes the last keys (causal, of lengths that are not whole
    vectors) compute only the open ones: the same weights, outputs and gradients as the
    NumPy path, and zeros (or, for a row with none open and ``plain``, NaN) after."""
    rng = np.random.default_rng(6)
    L = S = 70
    q, k, v = _arrays(rng, np.float32, (2, 3, L, 8), (2, 3, S, 8), (2, 3, S, 5))
    mask = np.where(np.triu(np.ones((L, S), bool), 1), -np.inf, 0).astype(np.float32)
    mask[5] = -np.inf  # a row with no key open
    mask[6, 3] = -np.inf  # a hole inside an open row
    if not shared:  # a mask per batch item: read as given, nothing skipped
        mask = np.stack([mask, mask[::-1].copy()])[:, None]
    params = dict(scale=0.4, has_mask=True, has_dropout=False, plain_softmax=plain)
    out, w = attention._attention_forward(np, q, k, v, mask, **params)
    ref_out, ref_w = _numpy_path(attention._attention_forward, np, q, k, v, mask, **params)
    np.testing.assert_allclose(w, ref_w, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(out, ref_out, rtol=2e-5, atol=1e-6)
    empty = w[:, :, 5] if shared else w[0, :, 5]
    assert np.isnan(empty).all() if plain else (empty == 0).all()
    if shared:
        assert (w[0, 0, 10, 11:] == 0).all()
    g = rng.standard_normal(out.shape).astype(np.float32)
    bparams = dict(scale=0.4, has_dropout=False, has_gp=False, need=(True, True, True, False))
    if plain:  # (a NaN row makes the gradients NaN)
        return
    got = attention._attention_backward_forward(np, g, q, k, v, w, **bparams)
    ref = _numpy_path(attention._attention_backward_forward, np, g, q, k, v, ref_w, **bparams)
    for a, b in zip(got[:3], ref[:3]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_a_plan_serves_only_its_layout():
    """Calls are planned once per layout: the same shapes read in place at other
    strides (a view of a fused projection, then contiguous copies, then the view again)
    each give the NumPy path's values, forward and backward."""
    rng = np.random.default_rng(3)
    qkv = rng.standard_normal((2, 6, 3, 2, 8)).astype(np.float32)
    views = [qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3)]
    g = rng.standard_normal((2, 2, 6, 8)).astype(np.float32)
    params = dict(scale=0.4, has_mask=False, has_dropout=False)
    for q, k, v in (views, [np.ascontiguousarray(a) for a in views], views):
        out, w = attention._attention_forward(np, q, k, v, **params)
        ref_out, ref_w = _numpy_path(attention._attention_forward, np, q, k, v, **params)
        np.testing.assert_allclose(out, ref_out, rtol=2e-6, atol=2e-6)
        grads = ak.backward(g, q, k, v, w, 0.4, (True, True, True))
        ref = _numpy_path(attention._attention_backward_forward, np, g, q, k, v, ref_w,
                          scale=0.4, has_dropout=False, has_gp=False,
                          need=(True, True, True, False))
        for a, b in zip(grads, ref[:3]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
