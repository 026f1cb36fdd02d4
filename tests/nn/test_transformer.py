"""MultiheadAttention and the Transformer family against PyTorch: outputs, attention
weights and every gradient (through the module template) for the mask and layout
options, default initialisation, deep-copied layers, and the errors for bad input."""
import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.errors import EmberError, EmberTypeError, ShapeError

from .module_template import assert_close, load_torch_state, run_module_test

torch = pytest.importorskip("torch")

E, H, L, S, N = 8, 2, 4, 5, 3


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _pair(name, *args, **kwargs):
    torch.manual_seed(0)
    return getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)


def _padding(n, s, seed=3):
    """A (n, s) bool key-padding mask that leaves every row at least one key."""
    mask = np.random.default_rng(seed).random((n, s)) < 0.4
    mask[:, 0] = False
    return mask


def _causal(size):
    return np.triu(np.full((size, size), -np.inf), 1)


Q, K, V = _rand(L, N, E), _rand(S, N, E, seed=1), _rand(S, N, E, seed=2)
QB, KB = _rand(N, L, E), _rand(N, S, 6, seed=1)
VB = _rand(N, S, 5, seed=2)

# constructor kwargs, inputs, forward kwargs
MHA_CASES = [
    ({}, (Q, K, V), {}),
    ({"batch_first": True, "kdim": 6, "vdim": 5}, (QB, KB, VB),
     {"key_padding_mask": _padding(N, S), "average_attn_weights": False}),
    ({}, (Q, K, V), {"attn_mask": _rand(L, S, seed=4), "key_padding_mask":
                     np.where(_padding(N, S), -1e9, 0.0), "need_weights": False}),
    ({}, (Q, K, V), {"attn_mask": _padding(N * H * L, S).reshape(N * H, L, S),
                     "need_weights": False}),
    ({"add_bias_kv": True, "add_zero_attn": True}, (Q, K, V),
     {"attn_mask": _padding(L, S, seed=5), "key_padding_mask": _padding(N, S)}),
    ({"add_bias_kv": True, "kdim": 6, "vdim": 5, "batch_first": True}, (QB, KB, VB),
     {"need_weights": False, "key_padding_mask": _padding(N, S)}),
    ({}, (Q[:, 0], K[:, 0], V[:, 0]),
     {"key_padding_mask": _padding(1, S)[0], "attn_mask": _rand(H, L, S, seed=6)}),
    ({"bias": False}, (Q, K, V), {"need_weights": False}),
    ({}, (Q, Q, Q), {"attn_mask": _causal(L), "is_causal": True, "need_weights": False}),
    ({"add_zero_attn": True}, (Q[:, 0], K[:, 0], V[:, 0]), {"need_weights": False}),
]


@pytest.mark.parametrize("ctor,inputs,kwargs", MHA_CASES)
def test_multihead_attention_matches_torch(ctor, inputs, kwargs):
    ember_module, torch_module = _pair("MultiheadAttention", E, H, **ctor)
    run_module_test(ember_module, torch_module, inputs, kwargs=kwargs, dtype="float64")


@pytest.mark.parametrize("case", [0, 4])
def test_multihead_attention_float32(case):
    ctor, inputs, kwargs = MHA_CASES[case]
    ember_module, torch_module = _pair("MultiheadAttention", E, H, **ctor)
    run_module_test(ember_module, torch_module, inputs, kwargs=kwargs, dtype="float32")


def test_multihead_attention_dropout_in_eval_like_torch():
    ember_module, torch_module = _pair("MultiheadAttention", E, H, dropout=0.5)
    run_module_test(ember_module, torch_module, (Q, K, V), dtype="float64",
                    deterministic_train=False)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("batch_first", [True, False])
def test_self_attention_with_one_tensor_matches_torch(need_weights, batch_first):
    # query is key is value: the packed projection path
    ember_module, torch_module = _pair("MultiheadAttention", E, H, batch_first=batch_first)
    torch_module.double()
    ember_module.double()
    load_torch_state(ember_module, torch_module)
    xe = ember.tensor(Q, requires_grad=True)
    xt = torch.tensor(Q, requires_grad=True)
    kw = {"need_weights": need_weights, "key_padding_mask": _padding(L if batch_first else N,
                                                                      N if batch_first else L)}
    out_e, w_e = ember_module(xe, xe, xe, key_padding_mask=ember.tensor(kw["key_padding_mask"]),
                              need_weights=need_weights)
    out_t, w_t = torch_module(xt, xt, xt, key_padding_mask=torch.tensor(kw["key_padding_mask"]),
                              need_weights=need_weights)
    assert_close(out_e, out_t, "float64", "output")
    if need_weights:
        assert_close(w_e, w_t, "float64", "weights")
    else:
        assert w_e is None and w_t is None
    g = _rand(*out_t.shape, seed=9)
    out_e.backward(ember.tensor(g))
    out_t.backward(torch.tensor(g))
    assert_close(xe.grad, xt.grad, "float64", "input grad")
    t_params = dict(torch_module.named_parameters())
    for name, p in ember_module.named_parameters():
        assert_close(p.grad, t_params[name].grad, "float64", f"grad of {name}")


def test_attention_weights_known_values():
    # zero projections and biases: every key scores the same, so weights are uniform
    mha = nn.MultiheadAttention(4, 2)
    with ember.no_grad():
        for p in mha.parameters():
            p.zero_()
    x = ember.randn(3, 2, 4)
    padding = ember.tensor([[False, False, True], [False, False, False]])
    _, weights = mha(x, x, x, key_padding_mask=padding)
    expected = np.array([[0.5, 0.5, 0.0]] * 3 + [[1 / 3] * 3] * 3).reshape(2, 3, 3)
    np.testing.assert_allclose(weights.detach().numpy(), expected, rtol=1e-6)


def test_multihead_attention_default_init_matches_torch():
    ember_module, torch_module = _pair("MultiheadAttention", 64, 4, add_bias_kv=True)
    t_params = dict(torch_module.named_parameters())
    xavier = np.sqrt(6 / (64 + 3 * 64))
    for name, p in ember_module.named_parameters():
        values, ref = p.detach().numpy(), t_params[name].detach().numpy()
        n = values.size
        if name in ("in_proj_bias", "out_proj.bias"):
            assert np.all(values == 0)
            continue
        assert abs(values.std() - ref.std()) < 6 * ref.std() / np.sqrt(n)
        assert abs(values.mean()) < 6 * ref.std() / np.sqrt(n)
        if name == "in_proj_weight":
            assert np.abs(values).max() <= xavier
        if name == "out_proj.weight":
            assert np.abs(values).max() <= 1 / 8


# Transformer layers -------------------------------------------------------------------
SRC, TGT = _rand(S, N, E), _rand(L, N, E, seed=1)
SRC_B, TGT_B = _rand(N, S, E), _rand(N, L, E, seed=1)

ENCODER_LAYER_CASES = [
    ({}, (SRC,), {}),
    ({"norm_first": True, "activation": "gelu", "batch_first": True}, (SRC_B,),
     {"src_key_padding_mask": _padding(N, S)}),
    ({"bias": False}, (SRC,), {"src_mask": _causal(S), "is_causal": True}),
    ({"layer_norm_eps": 1e-3}, (SRC[:, 0],), {"src_mask": _padding(S, S, seed=7)}),
]


@pytest.mark.parametrize("ctor,inputs,kwargs", ENCODER_LAYER_CASES)
def test_encoder_layer_matches_torch(ctor, inputs, kwargs):
    ember_module, torch_module = _pair("TransformerEncoderLayer", E, H, dim_feedforward=16,
                                       dropout=0.0, **ctor)
    run_module_test(ember_module, torch_module, inputs, kwargs=kwargs, dtype="float64")


DECODER_LAYER_CASES = [
    ({}, (TGT, SRC), {}),
    ({"norm_first": True, "batch_first": True}, (TGT_B, SRC_B),
     {"tgt_mask": _causal(L), "tgt_is_causal": True, "memory_key_padding_mask": _padding(N, S),
      "tgt_key_padding_mask": _padding(N, L, seed=4)}),
    ({"activation": "gelu", "bias": False}, (TGT, SRC),
     {"memory_mask": _rand(L, S, seed=5), "tgt_mask": _padding(L, L, seed=6)}),
]


@pytest.mark.parametrize("ctor,inputs,kwargs", DECODER_LAYER_CASES)
def test_decoder_layer_matches_torch(ctor, inputs, kwargs):
    ember_module, torch_module = _pair("TransformerDecoderLayer", E, H, dim_feedforward=16,
                                       dropout=0.0, **ctor)
    run_module_test(ember_module, torch_module, inputs, kwargs=kwargs, dtype="float64")


def test_layers_with_dropout_match_torch_in_eval():
    ember_module, torch_module = _pair("TransformerEncoderLayer", E, H, dim_feedforward=16)
    run_module_test(ember_module, torch_module, (SRC,), dtype="float64",
                    deterministic_train=False)
    ember_module, torch_module = _pair("TransformerDecoderLayer", E, H, dim_feedforward=16)
    run_module_test(ember_module, torch_module, (TGT, SRC), dtype="float32",
                    deterministic_train=False)


def test_callable_activation():
    ember_module, torch_module = _pair("TransformerEncoderLayer", E, H, dim_feedforward=16,
                                       dropout=0.0)
    ember_module.activation = ember.nn.functional.gelu
    torch_module.activation = torch.nn.functional.gelu
    run_module_test(ember_module, torch_module, (SRC,), dtype="float64")


def _stack_pair(name, layer_name, num_layers, norm, **ctor):
    torch.manual_seed(0)
    e_layer = getattr(nn, layer_name)(E, H, dim_feedforward=16, dropout=0.0, **ctor)
    t_layer = getattr(torch.nn, layer_name)(E, H, dim_feedforward=16, dropout=0.0, **ctor)
    extra = {"enable_nested_tensor": False} if name == "TransformerEncoder" else {}
    return (getattr(nn, name)(e_layer, num_layers, nn.LayerNorm(E) if norm else None, **extra),
            getattr(torch.nn, name)(t_layer, num_layers, torch.nn.LayerNorm(E) if norm else None,
                                    **extra))


def test_encoder_stack_matches_torch():
    ember_module, torch_module = _stack_pair("TransformerEncoder", "TransformerEncoderLayer", 2,
                                             True, batch_first=True)
    run_module_test(ember_module, torch_module, (SRC_B,), dtype="float64",
                    kwargs={"mask": _causal(S), "src_key_padding_mask": _padding(N, S)})
    ember_module, torch_module = _stack_pair("TransformerEncoder", "TransformerEncoderLayer", 3,
                                             False, norm_first=True)
    run_module_test(ember_module, torch_module, (SRC,), dtype="float32",
                    kwargs={"mask": _causal(S)})


def test_decoder_stack_matches_torch():
    ember_module, torch_module = _stack_pair("TransformerDecoder", "TransformerDecoderLayer", 2,
                                             True)
    run_module_test(ember_module, torch_module, (TGT, SRC), dtype="float64",
                    kwargs={"tgt_mask": _causal(L), "memory_key_padding_mask": _padding(N, S)})


def test_transformer_matches_torch():
    kw = {"d_model": E, "nhead": H, "num_encoder_layers": 2, "num_decoder_layers": 1,
          "dim_feedforward": 16, "dropout": 0.0}
    ember_module, torch_module = _pair("Transformer", **kw)
    run_module_test(ember_module, torch_module, (SRC, TGT), dtype="float64",
                    kwargs={"tgt_mask": _causal(L), "src_key_padding_mask": _padding(N, S),
                            "memory_key_padding_mask": _padding(N, S)})
    ember_module, torch_module = _pair("Transformer", batch_first=True, norm_first=True,
                                       activation="gelu", **kw)
    run_module_test(ember_module, torch_module, (SRC_B, TGT_B), dtype="float32",
                    kwargs={"tgt_mask": _causal(L)})


def test_generate_square_subsequent_mask():
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    ref = torch.nn.Transformer.generate_square_subsequent_mask(4)
    assert mask.dtype == ember.float32
    np.testing.assert_array_equal(mask.numpy(), ref.numpy())
    assert nn.Transformer.generate_square_subsequent_mask(2, dtype=ember.float64).dtype == \
        ember.float64


def test_stacks_deep_copy_their_layer():
    layer = nn.TransformerEncoderLayer(E, H, dim_feedforward=16)
    encoder = nn.TransformerEncoder(layer, 2)
    first, second = encoder.layers[0], encoder.layers[1]
    assert first is not layer and second is not first
    for (name, a), b in zip(first.named_parameters(), second.parameters()):
        assert isinstance(b, nn.Parameter) and a is not b
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy(), err_msg=name)
    with ember.no_grad():
        first.linear1.weight.add_(1.0)
    assert not np.allclose(first.linear1.weight.detach().numpy(),
                           second.linear1.weight.detach().numpy())
    assert len(list(encoder.parameters())) == 2 * len(list(layer.parameters()))


def test_transformer_default_init_matches_torch():
    kw = {"d_model": 32, "nhead": 4, "num_encoder_layers": 2, "num_decoder_layers": 2,
          "dim_feedforward": 64}
    ember_module, torch_module = _pair("Transformer", **kw)
    t_params = dict(torch_module.named_parameters())
    e_params = dict(ember_module.named_parameters())
    assert list(e_params) == list(t_params)
    for name, p in e_params.items():
        values, ref = p.detach().numpy(), t_params[name].detach().numpy()
        if p.ndim == 1:  # LayerNorm weights are ones; the rest of the biases keep their init
            if name.endswith("norm1.weight") or name.endswith("norm.weight"):
                assert np.all(values == 1)
            continue
        fan_in, fan_out = values.shape[1], values.shape[0]
        bound = np.sqrt(6 / (fan_in + fan_out))
        assert np.abs(values).max() <= bound
        assert abs(values.std() - ref.std()) < 6 * ref.std() / np.sqrt(values.size)
    # after Xavier re-initialisation the copied layers differ
    a = ember_module.encoder.layers[0].linear1.weight.detach().numpy()
    b = ember_module.encoder.layers[1].linear1.weight.detach().numpy()
    assert not np.allclose(a, b)


def test_reprs_match_torch():
    for ctor in ({}, {"kdim": 3, "bias": False}):
        assert repr(nn.MultiheadAttention(4, 2, **ctor)) == \
            repr(torch.nn.MultiheadAttention(4, 2, **ctor))


# Errors -------------------------------------------------------------------------------
def test_multihead_attention_errors():
    mha = nn.MultiheadAttention(E, H)
    q, k = ember.randn(L, N, E), ember.randn(S, N, E)
    with pytest.raises(ShapeError, match=r"MultiheadAttention: was expecting query embedding "
                                         r"dimension of 8, but got 7 \(query of shape "
                                         r"\(4, 3, 7\)\)"):
        mha(ember.randn(L, N, 7), k, k)
    with pytest.raises(ShapeError, match="MultiheadAttention: query should be unbatched 2-D "
                                         "or batched 3-D but got a 4-D tensor"):
        mha(ember.randn(1, L, N, E), k, k)
    with pytest.raises(ShapeError, match="MultiheadAttention: for 3-D query, expected key and "
                                         "value to be 3-D"):
        mha(q, k[:, 0], k[:, 0])
    with pytest.raises(ShapeError, match=r"the shape of the 2-D attn_mask is \(4, 4\), but "
                                         r"should be \(4, 5\)"):
        mha(q, k, k, attn_mask=ember.zeros(L, L))
    with pytest.raises(ShapeError, match=r"the shape of the 3-D attn_mask is \(3, 4, 5\), but "
                                         r"should be \(6, 4, 5\)"):
        mha(q, k, k, attn_mask=ember.zeros(N, L, S))
    with pytest.raises(ShapeError, match=r"expecting key_padding_mask shape of \(3, 5\), but "
                                         r"got \(5, 3\)"):
        mha(q, k, k, key_padding_mask=ember.zeros(S, N, dtype=ember.bool))
    with pytest.raises(EmberTypeError, match="only bool and floating types of key_padding_mask"):
        mha(q, k, k, key_padding_mask=ember.zeros(N, S, dtype=ember.int64))
    with pytest.raises(ShapeError, match="key's sequence and batch dims"):
        mha(q, k, ember.randn(S + 1, N, E))
    with pytest.raises(ShapeError, match="query batch size 3 does not match key batch size 2"):
        mha(q, k[:, :2], k[:, :2])
    with pytest.raises(EmberError, match="is_causal=True is a hint that attn_mask is the causal "
                                         "mask"):
        mha(q, q, q, is_causal=True)
    with pytest.raises(ValueError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(10, 3)


def test_transformer_errors():
    model = nn.Transformer(d_model=E, nhead=H, num_encoder_layers=1, num_decoder_layers=1,
                           dim_feedforward=16)
    with pytest.raises(ShapeError, match="Transformer: the batch number of src and tgt must be "
                                         "equal"):
        model(ember.randn(S, N, E), ember.randn(L, N + 1, E))
    with pytest.raises(ShapeError, match=r"Transformer: the feature number of src and tgt must "
                                         r"be equal to d_model=8, got src of shape \(5, 3, 6\)"):
        model(ember.randn(S, N, 6), ember.randn(L, N, 6))
    with pytest.raises(EmberError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(E, H, activation="tanh")
    layer = nn.TransformerEncoderLayer(E, H, dim_feedforward=16)
    with pytest.raises(ShapeError, match="MultiheadAttention: was expecting query embedding "
                                         "dimension of 8, but got 6"):
        layer(ember.randn(S, N, 6))
