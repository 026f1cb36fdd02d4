"""Multi-head attention and the Transformer family (encoder/decoder layers and stacks),
with PyTorch's submodule names (``self_attn``, ``linear1``, ``norm1`` ...), parameter
names (``in_proj_weight``, ``out_proj``), defaults and initialisation."""
from __future__ import annotations

import copy
import math
from typing import Callable

from ... import dtypes as _dt
from ... import ops
from ...errors import EmberError, EmberTypeError, ShapeError
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..containers import ModuleList
from ..module import Module
from ..parameter import Parameter
from .dropout import Dropout
from .linear import Linear
from .normalization import LayerNorm

__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerDecoderLayer",
           "TransformerEncoder", "TransformerDecoder", "Transformer"]


def _shape(t) -> tuple:
    return tuple(t.shape)


def _additive_mask(mask, name: str, dtype):
    """A bool mask (True = may not attend) as 0 / -inf of ``dtype``; a float mask as is."""
    if mask is None:
        return None
    if not isinstance(mask, Tensor):
        raise EmberTypeError(f"MultiheadAttention: {name} must be a Tensor, got "
                             f"{type(mask).__name__}")
    if mask.dtype is _dt.bool:
        zero = ops.creation.zeros((), dtype=dtype, device=mask.device)
        return ops.elementwise.where(mask, zero - math.inf, zero)
    if not mask.dtype.is_floating_point:
        raise EmberTypeError(f"MultiheadAttention: only bool and floating types of {name} are "
                             f"supported, got {mask.dtype.name}")
    return mask


class NonDynamicallyQuantizableLinear(Linear):
    """A :class:`Linear` under the name PyTorch gives MultiheadAttention's ``out_proj``
    (so reprs match PyTorch's)."""


class MultiheadAttention(Module):
    r"""Attention from queries to keys/values, split over ``num_heads`` heads:
    :math:`\text{Concat}(head_1, \dots, head_h) W^O` with
    :math:`head_i = \text{softmax}(Q W_i^Q (K W_i^K)^T / \sqrt{d_{head}}) V W_i^V`.

    Args:
        embed_dim: features of the query (and of the output).
        num_heads: parallel heads; ``embed_dim`` must be divisible by it.
        dropout: dropout on the attention weights, in training. Default: 0.
        bias: biases of the input and output projections. Default: True.
        add_bias_kv: learn ``bias_k``/``bias_v``, appended to keys and values as one more
            position. Default: False.
        add_zero_attn: append a zero key and value position. Default: False.
        kdim, vdim: features of key and value (default ``embed_dim``); when they differ
            from it the projections are ``q_proj_weight``/``k_proj_weight``/
            ``v_proj_weight`` instead of the packed ``in_proj_weight``.
        batch_first: inputs and output are (N, L, E) instead of (L, N, E). Default: False.

    Forward args: ``query`` (L, N, E), ``key`` (S, N, kdim), ``value`` (S, N, vdim), or
    unbatched without N; ``key_padding_mask`` (N, S), bool (True = ignore that key) or
    float (added to the scores); ``attn_mask`` (L, S) or (N * num_heads, L, S), bool or
    float likewise; ``need_weights`` also returns the attention weights, averaged over
    heads (N, L, S) unless ``average_attn_weights=False`` (N, num_heads, L, S);
    ``is_causal`` is a hint that ``attn_mask`` is the causal mask.

    >>> mha = ember.nn.MultiheadAttention(16, 4, batch_first=True)
    >>> x = ember.randn(2, 5, 16)
    >>> out, weights = mha(x, x, x)
    >>> out.shape, weights.shape
    (ember.Size([2, 5, 16]), ember.Size([2, 5, 5]))
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False,
                 kdim: int | None = None, vdim: int | None = None, batch_first: bool = False,
                 device=None, dtype=None) -> None:
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim must be divisible by num_heads, got embed_dim="
                             f"{embed_dim} and num_heads={num_heads}")
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads

        def empty(*shape):
            return Parameter(ops.creation.empty(shape, dtype=dtype, device=device))

        if self._qkv_same_embed_dim:
            self.in_proj_weight = empty(3 * embed_dim, embed_dim)
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = empty(embed_dim, embed_dim)
            self.k_proj_weight = empty(embed_dim, self.kdim)
            self.v_proj_weight = empty(embed_dim, self.vdim)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = empty(3 * embed_dim)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias,
                                                        device=device, dtype=dtype)
        if add_bias_kv:
            self.bias_k = empty(1, 1, embed_dim)
            self.bias_v = empty(1, 1, embed_dim)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """Xavier-uniform projections, zero biases, Xavier-normal ``bias_k``/``bias_v``;
        ``out_proj.weight`` keeps Linear's default."""
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None = None, need_weights: bool = True,
                attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple:
        """Returns ``(attn_output, attn_weights)``; the weights are None unless
        ``need_weights``."""
        batched = self._check_inputs(query, key, value, key_padding_mask, attn_mask)
        self_attention = query is key and key is value
        if not batched:
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif not self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        # From here on everything is batch-major: query (N, L, E), key/value (N, S, ·).
        n, tgt_len, embed = query.shape
        heads, head_dim = self.num_heads, self.head_dim
        padding = _additive_mask(key_padding_mask, "key_padding_mask", query.dtype)
        if is_causal and attn_mask is None:
            raise EmberError("MultiheadAttention: is_causal=True is a hint that attn_mask is "
                             "the causal mask, so attn_mask is needed too (build it with "
                             "nn.Transformer.generate_square_subsequent_mask)")
        causal_hint = is_causal and padding is None and not need_weights
        mask = None if causal_hint else _additive_mask(attn_mask, "attn_mask", query.dtype)

        if self_attention and self._qkv_same_embed_dim and self.bias_k is None:
            # one matmul for all three, split into heads by views alone
            qkv = F.linear(query, self.in_proj_weight, self.in_proj_bias)
            q, k, v = qkv.view(n, tgt_len, 3, heads, head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        else:
            q, k, v = self._project(query, key, value)
            if self.bias_k is not None:
                k = ops.shape.cat([k, self.bias_k.expand(n, 1, embed)], 1)
                v = ops.shape.cat([v, self.bias_v.expand(n, 1, embed)], 1)
                mask = None if mask is None else F.pad(mask, (0, 1))
                padding = None if padding is None else F.pad(padding, (0, 1))
            q, k, v = (t.reshape(n, t.shape[1], heads, head_dim).transpose(1, 2)
                       for t in (q, k, v))
        if self.add_zero_attn:
            zeros = ops.creation.zeros((n, heads, 1, head_dim), dtype=k.dtype, device=k.device)
            k = ops.shape.cat([k, zeros], 2)
            v = ops.shape.cat([v, zeros], 2)
            mask = None if mask is None else F.pad(mask, (0, 1))
            padding = None if padding is None else F.pad(padding, (0, 1))
        src_len = k.shape[2]
        if mask is not None and mask.ndim == 3:
            mask = mask.reshape(n, heads, tgt_len, src_len)
        if padding is not None:
            padding = padding.reshape(n, 1, 1, src_len)
            mask = padding if mask is None else mask + padding

        dropout_p = self.dropout if self.training else 0.0
        weights = None
        if need_weights:
            scores = ops.linalg.matmul(q * math.sqrt(1.0 / head_dim), k.transpose(-2, -1))
            if mask is not None:
                scores = scores + mask
            weights = F.softmax(scores, dim=-1)
            if dropout_p > 0:
                weights = F.dropout(weights, p=dropout_p)
            out = ops.linalg.matmul(weights, v)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p,
                                                 is_causal=causal_hint)
        out = out.transpose(1, 2).reshape(n, tgt_len, embed)
        out = F.linear(out, self.out_proj.weight, self.out_proj.bias)
        if weights is not None and average_attn_weights:
            weights = weights.mean(dim=1)
        if not batched:
            out = out.squeeze(0)
            weights = None if weights is None else weights.squeeze(0)
        elif not self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def _project(self, query, key, value) -> tuple:
        """The input projections of query, key and value (batch-major)."""
        bias = self.in_proj_bias
        b_q, b_k, b_v = (None, None, None) if bias is None else bias.chunk(3)
        if self._qkv_same_embed_dim:
            w_q, w_k, w_v = self.in_proj_weight.chunk(3)
        else:
            w_q, w_k, w_v = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return F.linear(query, w_q, b_q), F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)

    def _check_inputs(self, query, key, value, key_padding_mask, attn_mask) -> bool:
        """Shape checks with messages naming the shapes; returns whether batched."""
        name = "MultiheadAttention"
        for arg, t in (("query", query), ("key", key), ("value", value)):
            if not isinstance(t, Tensor):
                raise EmberTypeError(f"{name}: {arg} must be a Tensor, got {type(t).__name__}")
        if query.ndim not in (2, 3):
            raise ShapeError(f"{name}: query should be unbatched 2-D or batched 3-D but got "
                             f"a {query.ndim}-D tensor of shape {_shape(query)}")
        batched = query.ndim == 3
        if key.ndim != query.ndim or value.ndim != query.ndim:
            raise ShapeError(f"{name}: for {query.ndim}-D query, expected key and value to be "
                             f"{query.ndim}-D but got shapes {_shape(key)} and {_shape(value)}")
        for arg, t, want in (("query", query, self.embed_dim), ("key", key, self.kdim),
                             ("value", value, self.vdim)):
            if t.shape[-1] != want:
                raise ShapeError(f"{name}: was expecting {arg} embedding dimension of {want}, "
                                 f"but got {t.shape[-1]} ({arg} of shape {_shape(t)})")
        seq = 1 if batched and self.batch_first else 0
        if key.shape[:-1] != value.shape[:-1]:
            raise ShapeError(f"{name}: key's sequence and batch dims {_shape(key)[:-1]} do not "
                             f"match value's {_shape(value)[:-1]}")
        tgt_len, src_len = query.shape[seq], key.shape[seq]
        n = query.shape[1 - seq] if batched else 1
        if batched and key.shape[1 - seq] != n:
            raise ShapeError(f"{name}: query batch size {n} does not match key batch size "
                             f"{key.shape[1 - seq]} (query {_shape(query)}, key {_shape(key)})")
        if key_padding_mask is not None and isinstance(key_padding_mask, Tensor):
            want = (n, src_len) if batched else (src_len,)
            if _shape(key_padding_mask) != want:
                raise ShapeError(f"{name}: expecting key_padding_mask shape of {want}, but got "
                                 f"{_shape(key_padding_mask)}")
        if attn_mask is not None and isinstance(attn_mask, Tensor):
            if attn_mask.ndim == 2:
                want = (tgt_len, src_len)
            elif attn_mask.ndim == 3:
                want = (n * self.num_heads, tgt_len, src_len)
            else:
                raise ShapeError(f"{name}: attn_mask must be 2-D or 3-D, got shape "
                                 f"{_shape(attn_mask)}")
            if _shape(attn_mask) != want:
                raise ShapeError(f"{name}: the shape of the {attn_mask.ndim}-D attn_mask is "
                                 f"{_shape(attn_mask)}, but should be {want}")
        return batched


# Transformer layers ---------------------------------------------------------------------
def _activation(activation) -> Callable:
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    if isinstance(activation, str) or not callable(activation):
        raise EmberError(f"activation should be relu/gelu, not {activation}")
    return activation


def _seq_len(x: Tensor, batch_first: bool) -> int:
    return x.shape[1] if x.ndim == 3 and batch_first else x.shape[0]


def _is_causal_mask(mask: Tensor | None, is_causal: bool | None, size: int) -> bool:
    """Whether ``mask`` is the causal mask of ``size`` (``is_causal=None`` checks it)."""
    if is_causal is not None or mask is None:
        return bool(is_causal)
    if _shape(mask) != (size, size):
        return False
    causal = ops.creation.ones((size, size), dtype=_dt.bool, device=mask.device).triu(1)
    if mask.dtype is not _dt.bool:
        causal = _additive_mask(causal, "mask", mask.dtype)
    return bool((mask == causal).all().item())


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block, each with dropout, a residual connection
    and LayerNorm (after the residual by default, before each block with
    ``norm_first=True``).

    Args:
        d_model: features of the input.
        nhead: attention heads.
        dim_feedforward: hidden features of the feed-forward block. Default: 2048.
        dropout: dropout probability. Default: 0.1.
        activation: ``"relu"``, ``"gelu"`` or a callable. Default: ``"relu"``.
        layer_norm_eps: LayerNorm's eps. Default: 1e-5.
        batch_first: (N, L, E) instead of (L, N, E). Default: False.
        norm_first: pre-norm instead of post-norm. Default: False.
        bias: biases in the linear and LayerNorm layers. Default: True.

    >>> layer = ember.nn.TransformerEncoderLayer(d_model=16, nhead=4, batch_first=True)
    >>> layer(ember.randn(2, 5, 16)).shape
    ember.Size([2, 5, 16])
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable = "relu",
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(self, src: Tensor, src_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        """``src`` (L, N, E) (or batch-first / unbatched); masks as MultiheadAttention's
        ``attn_mask`` and ``key_padding_mask``."""
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoderLayer(Module):
    """Self-attention, attention to the encoder's output (``memory``), then a
    feed-forward block; each with dropout, a residual connection and LayerNorm.

    Args are those of :class:`TransformerEncoderLayer`.

    >>> layer = ember.nn.TransformerDecoderLayer(d_model=16, nhead=4)
    >>> layer(ember.randn(6, 2, 16), ember.randn(5, 2, 16)).shape
    ember.Size([6, 2, 16])
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable = "relu",
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Tensor:
        """``tgt`` (T, N, E) and ``memory`` (S, N, E) (or batch-first / unbatched)."""
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask,
                                              tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask,
                                               memory_key_padding_mask, memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           is_causal=is_causal, need_weights=False)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, is_causal=is_causal,
                                need_weights=False)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


def _clones(module: Module, n: int) -> ModuleList:
    # deep copies, as PyTorch makes them: every layer starts with the same weights
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` applied in turn, then ``norm`` if given.

    ``enable_nested_tensor`` and ``mask_check`` are accepted for PyTorch scripts; ember
    has no nested-tensor fast path, so padded positions are computed like the others
    (as PyTorch does in training).

    >>> layer = ember.nn.TransformerEncoderLayer(d_model=16, nhead=4)
    >>> encoder = ember.nn.TransformerEncoder(layer, num_layers=2)
    >>> encoder(ember.randn(5, 2, 16)).shape
    ember.Size([5, 2, 16])
    """

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int,
                 norm: Module | None = None, enable_nested_tensor: bool = True,
                 mask_check: bool = True) -> None:
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check

    def forward(self, src: Tensor, mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                is_causal: bool | None = None) -> Tensor:
        """``mask`` is the layers' ``src_mask``; ``is_causal=None`` detects whether it is
        the causal mask."""
        batch_first = getattr(getattr(self.layers[0], "self_attn", None), "batch_first",
                              False) if len(self.layers) else False
        is_causal = _is_causal_mask(mask, is_causal, _seq_len(src, batch_first))
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=is_causal)
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer`` applied in turn, then ``norm`` if given.

    >>> layer = ember.nn.TransformerDecoderLayer(d_model=16, nhead=4)
    >>> decoder = ember.nn.TransformerDecoder(layer, num_layers=2)
    >>> decoder(ember.randn(6, 2, 16), ember.randn(5, 2, 16)).shape
    ember.Size([6, 2, 16])
    """

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int,
                 norm: Module | None = None) -> None:
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Tensor:
        """``tgt_is_causal=None`` detects whether ``tgt_mask`` is the causal mask."""
        batch_first = getattr(getattr(self.layers[0], "self_attn", None), "batch_first",
                              False) if len(self.layers) else False
        tgt_is_causal = _is_causal_mask(tgt_mask, tgt_is_causal, _seq_len(tgt, batch_first))
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """The encoder-decoder Transformer of "Attention Is All You Need": a
    :class:`TransformerEncoder` over ``src`` and a :class:`TransformerDecoder` over
    ``tgt`` attending to the encoder's output, each ending in a LayerNorm. Every
    parameter with more than one dim is initialised Xavier-uniform.

    Args are those of the layers plus ``num_encoder_layers``/``num_decoder_layers``
    (default 6 each) and ``custom_encoder``/``custom_decoder`` to use instead.

    >>> model = ember.nn.Transformer(d_model=16, nhead=4, num_encoder_layers=1,
    ...                              num_decoder_layers=1, dim_feedforward=32)
    >>> model(ember.randn(5, 2, 16), ember.randn(6, 2, 16)).shape
    ember.Size([6, 2, 16])
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: str | Callable = "relu",
                 custom_encoder: Module | None = None, custom_decoder: Module | None = None,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout,
                                            activation, layer_norm_eps, batch_first,
                                            norm_first, bias, **kw)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout,
                                            activation, layer_norm_eps, batch_first,
                                            norm_first, bias, **kw)
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None,
                tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None,
                src_is_causal: bool | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:
        """``src`` (S, N, E) and ``tgt`` (T, N, E) (or batch-first / unbatched); returns
        (T, N, E)."""
        if src.ndim == 3:
            batch = 0 if self.batch_first else 1
            if src.shape[batch] != tgt.shape[batch]:
                raise ShapeError(f"Transformer: the batch number of src and tgt must be equal, "
                                 f"got src of shape {_shape(src)} and tgt of shape "
                                 f"{_shape(tgt)}")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ShapeError(f"Transformer: the feature number of src and tgt must be equal to "
                             f"d_model={self.d_model}, got src of shape {_shape(src)} and tgt "
                             f"of shape {_shape(tgt)}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> Tensor:
        """The causal mask of size (sz, sz): ``-inf`` above the diagonal, 0 elsewhere.

        >>> ember.nn.Transformer.generate_square_subsequent_mask(3)
        tensor([[0., -inf, -inf],
                [0., 0., -inf],
                [0., 0., 0.]])
        """
        full = ops.creation.full((sz, sz), -math.inf, dtype=dtype, device=device)
        return full.triu(1)
