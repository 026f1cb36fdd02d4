"""Linear, shape, pooling, dropout, embedding and resampling layers against PyTorch,
through the module test template."""
import numpy as np
import pytest

import ember
from ember import nn

from .module_template import run_module_test, torch

tnn = torch.nn

rng0 = np.random.default_rng(0)
IDX = rng0.integers(0, 7, (3, 4))

# (class, constructor args, constructor kwargs, inputs, forward kwargs, input grads)
CASES = [
    ("Linear", (5, 3), {}, [rng0.standard_normal((4, 5))], {}, True),
    ("Linear", (5, 3), {"bias": False}, [rng0.standard_normal((2, 3, 5))], {}, True),
    ("Linear", (4, 2), {}, [rng0.standard_normal(4)], {}, True),
    ("Bilinear", (3, 4, 2), {}, [rng0.standard_normal((5, 3)), rng0.standard_normal((5, 4))],
     {}, True),
    ("Bilinear", (3, 2, 4), {"bias": False},
     [rng0.standard_normal((2, 5, 3)), rng0.standard_normal((2, 5, 2))], {}, True),
    ("Identity", (3,), {"unused": 1}, [rng0.standard_normal((2, 3))], {}, True),
    ("Flatten", (), {}, [rng0.standard_normal((2, 3, 4))], {}, True),
    ("Flatten", (0, -2), {}, [rng0.standard_normal((2, 3, 4))], {}, True),
    ("Unflatten", (1, (2, 3)), {}, [rng0.standard_normal((4, 6, 2))], {}, True),
    ("MaxPool1d", (3,), {"stride": 2, "padding": 1}, [rng0.standard_normal((2, 3, 9))], {}, True),
    ("MaxPool1d", (2,), {"dilation": 2, "return_indices": True},
     [rng0.standard_normal((3, 8))], {}, True),
    ("MaxPool2d", (2,), {}, [rng0.standard_normal((2, 3, 6, 5))], {}, True),
    ("MaxPool2d", ((3, 2),), {"stride": (2, 1), "padding": 1, "ceil_mode": True},
     [rng0.standard_normal((2, 2, 7, 6))], {}, True),
    ("AvgPool1d", (3,), {"stride": 2, "padding": 1, "count_include_pad": False},
     [rng0.standard_normal((2, 3, 8))], {}, True),
    ("AvgPool2d", (2,), {}, [rng0.standard_normal((2, 3, 6, 5))], {}, True),
    ("AvgPool2d", ((3, 2),), {"stride": 1, "padding": (1, 0), "ceil_mode": True,
                              "divisor_override": 4},
     [rng0.standard_normal((1, 2, 5, 6))], {}, True),
    ("AdaptiveAvgPool1d", (4,), {}, [rng0.standard_normal((2, 3, 10))], {}, True),
    ("AdaptiveAvgPool2d", ((3, None),), {}, [rng0.standard_normal((2, 3, 7, 5))], {}, True),
    ("AdaptiveAvgPool2d", (1,), {}, [rng0.standard_normal((3, 7, 5))], {}, True),
    ("AdaptiveMaxPool1d", (3,), {}, [rng0.standard_normal((2, 3, 8))], {}, True),
    ("AdaptiveMaxPool2d", ((2, 3),), {"return_indices": True},
     [rng0.standard_normal((2, 3, 7, 5))], {}, True),
    ("Embedding", (7, 3), {}, [IDX], {}, True),
    ("Embedding", (7, 3), {"padding_idx": 2, "scale_grad_by_freq": True}, [IDX], {}, True),
    ("Embedding", (7, 3), {"padding_idx": -1}, [IDX[0]], {}, True),
    ("EmbeddingBag", (7, 3), {}, [IDX], {}, True),
    ("EmbeddingBag", (7, 3), {"mode": "sum", "padding_idx": 1},
     [IDX.ravel(), np.array([0, 3, 3, 7])], {}, True),
    ("EmbeddingBag", (7, 3), {"mode": "max"}, [IDX], {}, True),
    ("EmbeddingBag", (7, 3), {"mode": "sum", "include_last_offset": True},
     [IDX.ravel(), np.array([0, 5, 12])], {"per_sample_weights": rng0.random(12)}, True),
    ("PixelShuffle", (2,), {}, [rng0.standard_normal((2, 8, 3, 2))], {}, True),
    ("PixelUnshuffle", (2,), {}, [rng0.standard_normal((2, 2, 4, 6))], {}, True),
    ("ChannelShuffle", (3,), {}, [rng0.standard_normal((2, 6, 2, 3))], {}, True),
    ("Unfold", ((2, 3),), {"padding": 1, "stride": (2, 1)}, [rng0.standard_normal((2, 3, 5, 4))],
     {}, True),
    ("Fold", ((4, 5), 2), {}, [rng0.standard_normal((2, 12, 12))], {}, True),
    ("ConstantPad1d", ((2, 1), 0.5), {}, [rng0.standard_normal((2, 3, 4))], {}, True),
    ("ZeroPad2d", (1,), {}, [rng0.standard_normal((2, 3, 4, 3))], {}, True),
    ("ReflectionPad2d", ((2, 1, 1, 2),), {}, [rng0.standard_normal((2, 3, 4, 3))], {}, True),
    ("ReplicationPad3d", ((1, 0, 2, 1, 0, 1),), {}, [rng0.standard_normal((1, 2, 3, 3, 2))], {},
     True),
    ("CircularPad1d", (2,), {}, [rng0.standard_normal((2, 3, 4))], {}, True),
    ("Upsample", (), {"scale_factor": 2}, [rng0.standard_normal((2, 3, 4, 3))], {}, True),
    ("Upsample", (), {"size": (5, 7), "mode": "bilinear"},
     [rng0.standard_normal((2, 3, 4, 3))], {}, True),
    ("Upsample", (), {"scale_factor": (1.5, 2), "mode": "bilinear", "align_corners": True},
     [rng0.standard_normal((1, 2, 4, 3))], {}, True),
    ("UpsamplingNearest2d", (), {"size": 5}, [rng0.standard_normal((1, 2, 3, 3))], {}, True),
    ("UpsamplingBilinear2d", (), {"scale_factor": 2}, [rng0.standard_normal((1, 2, 3, 3))],
     {}, True),
    ("PairwiseDistance", (1.5, 1e-4, True), {},
     [rng0.standard_normal((4, 5)), rng0.standard_normal((4, 5))], {}, True),
    ("CosineSimilarity", (0,), {}, [rng0.standard_normal((4, 5)), rng0.standard_normal(5)],
     {}, True),
    ("Dropout", (0.3,), {}, [rng0.standard_normal((4, 5))], {}, True),
    ("Dropout2d", (0.3,), {}, [rng0.standard_normal((2, 3, 4, 4))], {}, True),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", range(len(CASES)),
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_layer_module(case, dtype):
    name, args, kwargs, inputs, fwd, grads = CASES[case]
    ember.manual_seed(case)
    torch.manual_seed(case)
    e = getattr(nn, name)(*args, **kwargs)
    t = getattr(tnn, name)(*args, **kwargs)
    run_module_test(e, t, inputs, kwargs=fwd, dtype=dtype, input_grads=grads,
                    deterministic_train="Dropout" not in name)


def test_linear_and_bilinear_errors_name_the_shapes():
    with pytest.raises(ember.ShapeError, match=r"Linear: expected input with 5 features.*"
                                               r"\(4, 6\)"):
        nn.Linear(5, 3)(ember.zeros(4, 6))
    with pytest.raises(ember.ShapeError, match="Linear: .*shape \\(\\)"):
        nn.Linear(5, 3)(ember.tensor(1.0))
    with pytest.raises(ember.ShapeError, match="Bilinear: expected input2 with 4 features"):
        nn.Bilinear(3, 4, 2)(ember.zeros(2, 3), ember.zeros(2, 5))


def test_unflatten_errors():
    with pytest.raises(ember.EmberTypeError, match="tuple of ints"):
        nn.Unflatten(1, 6)
    with pytest.raises(ember.EmberTypeError, match="at pos 1"):
        nn.Unflatten(1, (2, 3.0))


def test_dropout_masks_and_scaling():
    ember.manual_seed(0)
    x = ember.ones(200, 50, dtype=ember.float64, requires_grad=True)
    y = nn.Dropout(0.3)(x)
    values = set(np.unique(y.detach().numpy()).round(12))
    assert values == {0.0, round(1 / 0.7, 12)}
    assert abs((y.detach().numpy() == 0).mean() - 0.3) < 0.02
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())  # the same mask
    m = nn.Dropout2d(0.5)
    out = m(ember.ones(8, 16, 3, 3)).numpy()
    per_channel = out.reshape(8, 16, 9)
    assert np.all(per_channel.min(-1) == per_channel.max(-1))  # whole channels dropped
    m.eval()
    assert m(ember.ones(1, 2, 1, 2)).tolist() == [[[[1.0, 1.0]]] * 2]
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)
    assert repr(nn.Dropout2d(0.2, True)) == repr(tnn.Dropout2d(0.2, True))


def test_embedding_padding_from_pretrained_and_errors():
    e = nn.Embedding(5, 3, padding_idx=1)
    assert e.weight[1].tolist() == [0.0, 0.0, 0.0]
    out = e(ember.tensor([1, 2, 1]))
    out.sum().backward()
    assert e.weight.grad[1].tolist() == [0.0, 0.0, 0.0]
    assert e.weight.grad[2].tolist() == [1.0, 1.0, 1.0]
    table = ember.arange(6.0).reshape(3, 2)
    pre = nn.Embedding.from_pretrained(table)
    assert not pre.weight.requires_grad and pre(ember.tensor([2])).tolist() == [[4.0, 5.0]]
    assert nn.Embedding.from_pretrained(table, freeze=False).weight.requires_grad
    bag = nn.EmbeddingBag.from_pretrained(table, mode="sum")
    assert bag(ember.tensor([[0, 2]])).tolist() == [[4.0, 6.0]]
    with pytest.raises(ValueError, match="Padding_idx must be within num_embeddings"):
        nn.Embedding(5, 3, padding_idx=5)
    with pytest.raises(ember.EmberError, match="2-dimensional"):
        nn.Embedding.from_pretrained(ember.zeros(3))
    with pytest.raises(NotImplementedError, match="sparse"):
        nn.Embedding(5, 3, sparse=True)
    with pytest.raises(ValueError, match="mode"):
        nn.EmbeddingBag(5, 3, mode="median")
    for args, kwargs in [((5, 3), {"padding_idx": -1, "max_norm": 2.0, "norm_type": 1.0}),
                         ((5, 3), {"scale_grad_by_freq": True})]:
        assert repr(nn.Embedding(*args, **kwargs)) == repr(tnn.Embedding(*args, **kwargs))


def test_padding_and_shuffle_layers_name_bad_arguments():
    with pytest.raises(ember.EmberError, match=r"ZeroPad2d: padding must be an int or 4 ints"):
        nn.ZeroPad2d((1, 2, 3))
    with pytest.raises(ember.ShapeError, match=r"channel_shuffle: .*groups=2.*\(1, 5, 2\)"):
        nn.ChannelShuffle(2)(ember.ones(1, 5, 2))
