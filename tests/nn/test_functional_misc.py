"""linear, dropout, embeddings, one_hot, distances, pixel shuffles and scaled dot-product
attention (ember.nn.functional) against PyTorch and finite differences, plus dropout's
statistics, known values and errors."""
import math

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ..ops.optable import OpCase, S, generate, nc, needs_torch, rand, torch

TF = None if torch is None else torch.nn.functional

TOL = {"float64": (1e-7, 1e-9), "float32": (1e-5, 1e-5), "float16": (1e-2, 1e-2),
       "bfloat16": (6e-2, 6e-2)}
F32_64 = ("float32", "float64")


def _torch(name):
    return lambda *a, **k: getattr(TF, name)(*a, **k)


def linear_samples(rng, dtype):
    r = lambda shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r((3, 4)), r((5, 4)), r((5,))), S(r((2, 3, 4)), r((5, 4))),
            S(r((4,)), r((5, 4)), r((5,))), S(nc(r((6, 4))), nc(r((3, 4))), r((3,))),
            S(r((0, 4)), r((2, 4)), r((2,))), S(r((3, 4)), r((4,))),
            S(r((2, 3)), r((4, 3)), r((2, 4)))]


def bilinear_samples(rng, dtype):
    r = lambda shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r((3, 4)), r((3, 2)), r((5, 4, 2)), r((5,))),
            S(r((2, 3, 4)), r((2, 3, 2)), r((5, 4, 2)))]


def cosine_samples(rng, dtype):
    r = lambda shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r((3, 4)), r((3, 4))), S(r((3, 4)), r((4,)), dim=-1),
            S(nc(r((2, 3, 4))), r((2, 1, 4)), 2, 1e-4), S(r((5,)), r((5,)), dim=0)]


def pairwise_samples(rng, dtype):
    r = lambda shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r((3, 4)), r((3, 4))), S(r((3, 4)), r((4,)), p=1.0, keepdim=True),
            S(r((4,)), r((4,)), 3.0), S(nc(r((4, 3))), r((4, 3)), eps=1e-3)]


def embedding_samples(rng, dtype):
    w = lambda n, d: rand(rng, (n, d), dtype)  # noqa: E731
    idx = lambda shape, n: rng.integers(0, n, size=shape)  # noqa: E731
    return [S(idx((2, 3), 5), w(5, 3)), S(np.array(3), w(5, 2)), S(idx((0,), 5), w(5, 2)),
            S(idx((3,), 4).astype(np.int32), nc(w(4, 3)))]


def embedding_rescaled_samples(rng, dtype):
    """Gradients that are not the derivative (padding row, frequency scaling): checked
    against PyTorch only, not finite differences."""
    w = lambda n, d: rand(rng, (n, d), dtype)  # noqa: E731
    return [S(np.array([0, 1, 5, 1]), w(6, 2), padding_idx=1),
            S(np.array([0, 2, 2, 4]), w(5, 3), scale_grad_by_freq=True),
            S(np.array([[0, 2], [2, 3]]), w(4, 2), padding_idx=-2, scale_grad_by_freq=True)]


def embedding_bag_samples(rng, dtype):
    w = lambda: rand(rng, (6, 3), dtype)  # noqa: E731
    flat = np.array([1, 2, 4, 4, 3, 1, 0, 5])
    return [S(rng.integers(0, 6, (3, 4)), w()), S(rng.integers(0, 6, (3, 4)), w(), mode="sum"),
            S(flat, w(), np.array([0, 3, 3, 6]), mode="mean", padding_idx=4),
            S(flat, w(), np.array([0, 2, 5, 8]), mode="sum", include_last_offset=True),
            S(flat, w(), np.array([0, 3, 3]), mode="max"),
            S(rng.integers(0, 6, (2, 3)), w(), mode="max", padding_idx=0)]


def pixel_samples(shuffle):
    def samples(rng, dtype):
        r = lambda shape: rand(rng, shape, dtype)  # noqa: E731
        if shuffle:
            return [S(r((2, 8, 3, 2)), 2), S(r((9, 2, 1)), 3), S(nc(r((1, 4, 2, 2))), 2),
                    S(r((2, 1, 4, 1, 1)), 2)]
        return [S(r((2, 2, 4, 6)), 2), S(r((1, 3, 3)), 3), S(nc(r((1, 1, 4, 4))), 2)]
    return samples


def attention_samples(rng, dtype):
    r = lambda *shape: rand(rng, shape, dtype)  # noqa: E731
    q, k, v = r(2, 3, 4, 5), r(2, 3, 6, 5), r(2, 3, 6, 7)
    bool_mask = rng.random((4, 6)) < 0.6
    bool_mask[:, 0] = True
    empty_row = bool_mask.copy()
    empty_row[2] = False
    return [S(q, k, v), S(q, k, v, is_causal=True),
            S(q, k, v, attn_mask=bool_mask, scale=0.3),
            S(q, k, v, r(3, 4, 6)), S(r(4, 5), r(6, 5), r(6, 3), is_causal=True),
            S(nc(r(3, 4, 5)), r(1, 6, 5), r(3, 6, 2)),
            S(r(6, 4, 5), r(6, 7, 5), r(6, 7, 5), is_causal=True),
            S(r(2, 4, 3, 5), r(2, 2, 6, 5), r(2, 2, 6, 4), enable_gqa=True),
            S(q, k, v, attn_mask=empty_row)]


def attention_torch(*args, **kwargs):
    kwargs = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v
              for k, v in kwargs.items()}
    return TF.scaled_dot_product_attention(*args, **kwargs)


CASES = [
    OpCase("linear", F.linear, _torch("linear"), linear_samples, tol=TOL),
    OpCase("bilinear", F.bilinear, _torch("bilinear"), bilinear_samples, dtypes=F32_64),
    OpCase("cosine_similarity", F.cosine_similarity, _torch("cosine_similarity"),
           cosine_samples, dtypes=F32_64),
    OpCase("pairwise_distance", F.pairwise_distance, _torch("pairwise_distance"),
           pairwise_samples, dtypes=F32_64),
    OpCase("pdist", F.pdist, _torch("pdist"),
           lambda rng, d: [S(rand(rng, (4, 3), d)), S(rand(rng, (3, 2), d), 1.0),
                           S(rand(rng, (1, 2), d))], dtypes=F32_64, gradgrad=False),
    OpCase("embedding", F.embedding, _torch("embedding"), embedding_samples, tol=TOL),
    OpCase("embedding_padding_and_frequency", F.embedding, _torch("embedding"),
           embedding_rescaled_samples, dtypes=("float32",)),
    OpCase("embedding_bag", F.embedding_bag, _torch("embedding_bag"), embedding_bag_samples,
           dtypes=F32_64),
    OpCase("embedding_bag_per_sample_weights",
           lambda i, w, p: F.embedding_bag(i, w, mode="sum", per_sample_weights=p),
           lambda i, w, p: TF.embedding_bag(i, w, mode="sum", per_sample_weights=p),
           lambda rng, d: [S(rng.integers(0, 5, (2, 3)), rand(rng, (5, 2), d),
                             rand(rng, (2, 3), d))], dtypes=F32_64, gradgrad=False),
    OpCase("one_hot", F.one_hot, _torch("one_hot"),
           lambda rng, d: [S(rng.integers(0, 4, (2, 3))), S(np.array([1, 0, 5]), 7),
                           S(np.array(2)), S(np.zeros((0,), np.int64), 3)],
           dtypes=("int64",), grad=False),
    OpCase("pixel_shuffle", F.pixel_shuffle, _torch("pixel_shuffle"), pixel_samples(True)),
    OpCase("pixel_unshuffle", F.pixel_unshuffle, _torch("pixel_unshuffle"),
           pixel_samples(False)),
    OpCase("scaled_dot_product_attention", F.scaled_dot_product_attention, attention_torch,
           attention_samples, tol=TOL),
    OpCase("dropout_eval", lambda x: F.dropout(x, 0.5, training=False),
           lambda x: TF.dropout(x, 0.5, training=False),
           lambda rng, d: [S(rand(rng, (3, 4), d))]),
    OpCase("dropout_p0", lambda x: F.dropout(x, 0.0), lambda x: TF.dropout(x, 0.0),
           lambda rng, d: [S(rand(rng, (3, 4), d)), S(rand(rng, (), d))]),
]

generate(CASES, globals())


# Dropout --------------------------------------------------------------------------------------
def test_dropout_statistics_and_scaling():
    ember.manual_seed(0)
    x = ember.ones(200, 500)
    y = F.dropout(x, 0.3).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.7) < 0.01
    np.testing.assert_allclose(y[kept], 1 / 0.7, rtol=1e-6)
    assert abs(y.mean() - 1.0) < 0.02


def test_dropout_is_reproducible_under_manual_seed():
    x = ember.randn(50, 20)
    ember.manual_seed(7)
    a = F.dropout(x, 0.5)
    ember.manual_seed(7)
    b = F.dropout(x, 0.5)
    c = F.dropout(x, 0.5)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(b.numpy(), c.numpy())


def test_dropout_gradient_is_zero_where_dropped():
    ember.manual_seed(1)
    x = ember.randn(30, 40, requires_grad=True)
    y = F.dropout(x, 0.4)
    y.sum().backward()
    dropped = y.detach().numpy() == 0
    assert dropped.any() and (~dropped).any()
    np.testing.assert_array_equal(x.grad.numpy()[dropped], 0.0)
    np.testing.assert_allclose(x.grad.numpy()[~dropped], 1 / 0.6, rtol=1e-6)


def test_dropout_edge_probabilities_and_eval():
    x = ember.randn(4, 5)
    np.testing.assert_array_equal(F.dropout(x, 1.0).numpy(), 0.0)
    np.testing.assert_array_equal(F.dropout(x, 0.0).numpy(), x.numpy())
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout2d(x.reshape(1, 4, 5, 1), 0.5, training=False).shape == (1, 4, 5, 1)


def test_dropout_inplace():
    ember.manual_seed(2)
    x = ember.ones(100)
    out = F.dropout(x, 0.5, inplace=True)
    assert out is x
    assert set(np.unique(x.numpy())) <= {0.0, 2.0}


@pytest.mark.filterwarnings("ignore:dropout2d. received a 3D input")
@pytest.mark.parametrize("fn, shape, channel_shape", [
    (F.dropout1d, (8, 16, 5), (8, 16)), (F.dropout1d, (16, 5), (16,)),
    (F.dropout2d, (8, 16, 3, 3), (8, 16)), (F.dropout2d, (16, 3, 3), (16, 3)),
    (F.dropout3d, (4, 16, 2, 2, 2), (4, 16)), (F.dropout3d, (16, 2, 2, 2), (16,))])
def test_channel_dropout_zeroes_whole_channels(fn, shape, channel_shape):
    ember.manual_seed(3)
    y = fn(ember.ones(*shape), 0.5).numpy()
    per_channel = y.reshape(channel_shape + (-1,))
    assert (per_channel.min(-1) == per_channel.max(-1)).all()  # all or nothing
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert 0 < (per_channel[..., 0] == 0).mean() < 1


def test_dropout2d_warns_on_3d_input():
    with pytest.warns(UserWarning, match="taken as \\(N, C, L\\)"):
        F.dropout2d(ember.ones(2, 3, 4))


def test_alpha_dropout_keeps_selu_statistics():
    ember.manual_seed(4)
    x = ember.randn(400, 500)
    y = F.alpha_dropout(x, 0.2, training=True).numpy()
    assert abs(y.mean()) < 0.02 and abs(y.std() - 1.0) < 0.02
    assert F.alpha_dropout(x, 0.2) is x  # training=False by default
    feature = F.feature_alpha_dropout(ember.randn(8, 6, 10), 0.5, training=True).numpy()
    dropped = np.isclose(feature, feature[..., :1]).all(-1)
    assert dropped.any()


def test_attention_dropout_uses_the_default_generator():
    q = ember.randn(2, 4, 8)
    ember.manual_seed(5)
    a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    ember.manual_seed(5)
    b = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    full = F.scaled_dot_product_attention(q, q, q)
    assert not np.allclose(a.numpy(), full.numpy())
    qg = ember.randn(2, 4, 8, requires_grad=True)
    F.scaled_dot_product_attention(qg, qg, qg, dropout_p=1.0).sum().backward()
    np.testing.assert_array_equal(qg.grad.numpy(), 0.0)


# Attention semantics --------------------------------------------------------------------------
def test_attention_known_values_and_masks():
    q = ember.tensor([[1.0, 0.0], [0.0, 1.0]])
    v = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    causal = F.scaled_dot_product_attention(q, q, v, is_causal=True)
    np.testing.assert_allclose(causal.numpy()[0], [1.0, 2.0])  # the first query sees one key
    mask = ember.tensor([[True, False], [False, False]])
    masked = F.scaled_dot_product_attention(q, q, v, attn_mask=mask)
    np.testing.assert_allclose(masked.numpy(), [[1.0, 2.0], [0.0, 0.0]])  # empty row: zeros
    w = np.exp(np.array([1.0, 0.0]) / math.sqrt(2))
    w /= w.sum()
    plain = F.scaled_dot_product_attention(q, q, v)
    np.testing.assert_allclose(plain.numpy()[0], w @ v.numpy(), rtol=1e-6)


def test_attention_fused_backward_equals_graph_building_backward():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in ((2, 3, 4), (2, 5, 4), (2, 5, 3), (3, 5))]
    up = ember.tensor(rng.standard_normal((2, 3, 3)))
    results = []
    for create_graph in (False, True):
        q, k, v, m = (ember.tensor(a, requires_grad=True) for a in arrays)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
        results.append(ember.autograd.grad(out, [q, k, v, m], up, create_graph=create_graph))
    for a, b in zip(*results):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-14)


@needs_torch
def test_cosine_similarity_clamps_tiny_norms_like_torch():
    x1 = np.array([[1e-9, 0.0], [1.0, 2.0]])
    x2 = np.array([[1.5, -0.5], [0.3, 0.2]])
    e1, e2 = ember.tensor(x1, requires_grad=True), ember.tensor(x2, requires_grad=True)
    t1, t2 = torch.tensor(x1, requires_grad=True), torch.tensor(x2, requires_grad=True)
    out, ref = F.cosine_similarity(e1, e2), TF.cosine_similarity(t1, t2)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-12)
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(e1.grad.numpy(), t1.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(e2.grad.numpy(), t2.grad.numpy(), rtol=1e-10)


# Embeddings -----------------------------------------------------------------------------------
def test_embedding_padding_row_gets_no_gradient():
    w = ember.randn(4, 3, requires_grad=True)
    F.embedding(ember.tensor([0, 1, 1, 3]), w, padding_idx=1).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy()[1], 0.0)
    np.testing.assert_array_equal(w.grad.numpy()[0], 1.0)
    np.testing.assert_array_equal(w.grad.numpy()[2], 0.0)


def test_embedding_double_backward_respects_padding_and_frequency():
    idx = ember.tensor([0, 1, 2, 2])
    w = ember.randn(3, 2, requires_grad=True)
    up = ember.randn(4, 2, requires_grad=True)
    out = F.embedding(idx, w, padding_idx=1, scale_grad_by_freq=True)
    (gw,) = ember.autograd.grad(out, [w], up, create_graph=True)
    r = ember.randn(3, 2)
    (gup,) = ember.autograd.grad((gw * r).sum(), [up])
    factor = np.array([1.0, 0.0, 0.5, 0.5])[:, None]  # padding row 1; index 2 seen twice
    np.testing.assert_allclose(gup.numpy(), r.numpy()[[0, 1, 2, 2]] * factor, rtol=1e-6)


@needs_torch
def test_embedding_max_norm_renormalises_rows_in_place_like_torch():
    rng = np.random.default_rng(1)
    weight = rng.standard_normal((5, 4)) * 3
    idx = np.array([[0, 2], [2, 4]])
    ew, tw = ember.tensor(weight), torch.tensor(weight)
    out = F.embedding(ember.tensor(idx), ew, max_norm=1.5)
    ref = TF.embedding(torch.tensor(idx), tw, max_norm=1.5)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ew.numpy(), tw.numpy(), rtol=1e-12)
    np.testing.assert_array_equal(ew.numpy()[1], weight[1])  # unused rows stay


def test_one_hot_known_values():
    out = F.one_hot(ember.tensor([0, 2]))
    assert out.dtype is ember.int64
    np.testing.assert_array_equal(out.numpy(), [[1, 0, 0], [0, 0, 1]])
    assert F.one_hot(ember.tensor([1]), 4).shape == (1, 4)


def test_linear_backward_kernels_agree():
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((2, 3, 4)), rng.standard_normal((5, 4)),
              rng.standard_normal(5)]
    up = ember.tensor(rng.standard_normal((2, 3, 5)))
    results = []
    for create_graph in (False, True):
        ts = [ember.tensor(a, requires_grad=True) for a in arrays]
        results.append(ember.autograd.grad(F.linear(*ts), ts, up, create_graph=create_graph))
    for a, b in zip(*results):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-14)


# Errors ------------------------------------------------------------------------------------------
def test_errors():
    with pytest.raises(ember.ShapeError, match=r"linear: input of shape \(3, 5\) and weight of "
                                               r"shape \(4, 6\)"):
        F.linear(ember.ones(3, 5), ember.ones(4, 6))
    with pytest.raises(ember.EmberTypeError, match="linear: expected input, weight and bias "
                                                   "of the same dtype"):
        F.linear(ember.ones(3, 5), ember.ones(4, 5, dtype=ember.float64))
    with pytest.raises(ember.EmberValueError, match="dropout probability has to be between 0 "
                                                    "and 1"):
        F.dropout(ember.ones(3), 1.5)
    with pytest.raises(ember.EmberIndexError, match="embedding: index 5 is out of range for 5"):
        F.embedding(ember.tensor([1, 5]), ember.ones(5, 2))
    with pytest.raises(ember.EmberTypeError, match="embedding: expected indices of dtype int64"):
        F.embedding(ember.tensor([1.0]), ember.ones(5, 2))
    with pytest.raises(NotImplementedError, match="sparse"):
        F.embedding(ember.tensor([1]), ember.ones(5, 2), sparse=True)
    with pytest.raises(ember.EmberError, match="per_sample_weights is only supported for "
                                               "mode='sum'"):
        F.embedding_bag(ember.tensor([[1]]), ember.ones(5, 2), per_sample_weights=ember.ones(1, 1))
    with pytest.raises(ember.EmberTypeError, match="one_hot: is only applicable to index "
                                                   "tensors of dtype int64"):
        F.one_hot(ember.tensor([1], dtype=ember.int32))
    with pytest.raises(ember.EmberError, match="class values must be smaller than num_classes"):
        F.one_hot(ember.tensor([3]), 2)
    with pytest.raises(ember.EmberError, match="can not infer the total number of classes"):
        F.one_hot(ember.tensor([], dtype=ember.int64))
    with pytest.raises(ember.ShapeError, match="pixel_shuffle"):
        F.pixel_shuffle(ember.ones(1, 3, 2, 2), 2)
    with pytest.raises(ember.ShapeError, match="dropout1d: expected a 2D"):
        F.dropout1d(ember.ones(2, 3, 4, 5))


def test_attention_errors():
    q = ember.ones(2, 3, 4)
    with pytest.raises(ember.ShapeError, match=r"query and key must have the same embedding "
                                               r"size.*key \(2, 3, 5\)"):
        F.scaled_dot_product_attention(q, ember.ones(2, 3, 5), ember.ones(2, 3, 4))
    with pytest.raises(ember.ShapeError, match="key and value must have the same sequence"):
        F.scaled_dot_product_attention(q, q, ember.ones(2, 4, 4))
    with pytest.raises(ember.EmberError, match="attn_mask should not be set when is_causal"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=ember.ones(3, 3), is_causal=True)
    with pytest.raises(ember.EmberTypeError, match="same floating dtype"):
        F.scaled_dot_product_attention(q, q, q.double())
    with pytest.raises(ember.EmberTypeError, match="attn_mask of dtype bool or float32"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=ember.ones(3, 3, dtype=ember.int64))
    with pytest.raises(ember.ShapeError, match="multiple of the key/value heads"):
        F.scaled_dot_product_attention(ember.ones(1, 3, 2, 4), ember.ones(1, 2, 2, 4),
                                       ember.ones(1, 2, 2, 4), enable_gqa=True)
