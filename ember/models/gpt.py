"""The reference GPT of DESIGN.md (the gpt workload), as one module the config files,
the examples and the distributed strategies share: token and learned position
embeddings, pre-norm transformer blocks (causal self-attention, a GELU MLP), a final
LayerNorm and a linear head. Its parameter names and shapes are those of
``bench/training.py``'s PyTorch twin (``tok``, ``pos``, ``blocks.0.qkv.weight``, ...,
``head.bias``), so a state dict moves between them.

>>> model = ember.models.GPT(vocab_size=256)          # DESIGN.md's sizes by default
>>> model(ember.randint(0, 256, (2, 16))).shape
ember.Size([2, 16, 256])
"""
from __future__ import annotations

from .. import nn
from ..errors import ShapeError
from ..nn import functional as F
from ..ops.creation import ones, zeros
from ..ops.movement import tril
from ..ops.random import randn
from ..ops.shape import cat
from ..tensor import Tensor

__all__ = ["Block", "GPT", "KVCache", "split_heads", "merge_heads"]

#: Per block, the cached ``(keys, values)``, each ``(B, heads, T_past, d_model // heads)``.
KVCache = list[tuple[Tensor, Tensor]]


def split_heads(z: Tensor, heads: int) -> Tensor:
    """``(b, t, heads * d)`` to ``(b, heads, t, d)``."""
    b, t, width = z.shape
    return z.view(b, t, heads, width // heads).transpose(1, 2)


def merge_heads(y: Tensor) -> Tensor:
    """``(b, heads, t, d)`` to ``(b, t, heads * d)``."""
    b, h, t, d = y.shape
    return y.transpose(1, 2).reshape(b, t, h * d)


class Block(nn.Module):
    """A pre-norm transformer block: causal self-attention, then a GELU MLP
    (``mlp_ratio`` times wider)."""

    def __init__(self, d_model: int, n_heads: int, mlp_ratio: int = 4, dtype=None) -> None:
        super().__init__()
        self.d_model, self.n_heads = d_model, n_heads
        self.ln1 = nn.LayerNorm(d_model, dtype=dtype)
        self.qkv = nn.Linear(d_model, 3 * d_model, dtype=dtype)
        self.proj = nn.Linear(d_model, d_model, dtype=dtype)
        self.ln2 = nn.LayerNorm(d_model, dtype=dtype)
        self.fc1 = nn.Linear(d_model, mlp_ratio * d_model, dtype=dtype)
        self.fc2 = nn.Linear(mlp_ratio * d_model, d_model, dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        q, k, v = self.qkv(self.ln1(x)).split(self.d_model, dim=2)
        y = F.scaled_dot_product_attention(*(split_heads(z, self.n_heads) for z in (q, k, v)),
                                           is_causal=True)
        x = x + self.proj(merge_heads(y))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    def forward_cached(self, x: Tensor, past: tuple[Tensor, Tensor] | None = None
                       ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """:meth:`forward` for the new positions ``x`` (``(B, T_new, d_model)``) only,
        attending to the cached keys and values of the earlier ones (``past``; None for
        none). Returns the output and the keys and values of all positions so far."""
        q, k, v = (split_heads(z, self.n_heads)
                   for z in self.qkv(self.ln1(x)).split(self.d_model, dim=2))
        if past is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            k, v = cat([past[0], k], dim=2), cat([past[1], v], dim=2)
            new, total = q.shape[2], k.shape[2]
            # new query i sits at position total - new + i: it sees keys up to there
            mask = None if new == 1 else tril(
                ones(new, total, dtype="bool", device=x.device), diagonal=total - new)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(merge_heads(y))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)))), (k, v)


class GPT(nn.Module):
    """A decoder-only transformer.

    Args:
        vocab_size, context, d_model, n_heads, n_layers, mlp_ratio: the shape (defaults:
            DESIGN.md's gpt workload: 256, 64, 128, 4, 2, 4).
        dtype: the parameters' dtype (default: the default dtype).

    Shape: ``(B, T)`` int64 tokens with ``T <= context`` -> ``(B, T, vocab_size)``
    logits.
    """

    def __init__(self, vocab_size: int = 256, context: int = 64, d_model: int = 128,
                 n_heads: int = 4, n_layers: int = 2, mlp_ratio: int = 4, dtype=None) -> None:
        super().__init__()
        self.vocab_size, self.context, self.d_model = vocab_size, context, d_model
        self.n_heads, self.n_layers = n_heads, n_layers
        self.tok = nn.Embedding(vocab_size, d_model, dtype=dtype)
        self.pos = nn.Parameter(zeros(context, d_model, dtype=dtype)
                                + 0.02 * randn(context, d_model, dtype=dtype))
        self.blocks = nn.Sequential(*[Block(d_model, n_heads, mlp_ratio, dtype=dtype)
                                      for _ in range(n_layers)])
        self.ln = nn.LayerNorm(d_model, dtype=dtype)
        self.head = nn.Linear(d_model, vocab_size, dtype=dtype)

    def forward(self, idx: Tensor) -> Tensor:
        x = self.tok(idx) + self.pos[: idx.shape[1]]
        return self.head(self.ln(self.blocks(x)))

    def forward_cached(self, idx: Tensor, past: KVCache | None = None
                       ) -> tuple[Tensor, KVCache]:
        """Incremental decoding: the logits of the new tokens ``idx`` (``(B, T_new)``),
        which follow the tokens whose keys and values ``past`` caches (None: no tokens
        yet), and the cache extended by them. Only the new positions are computed; the
        logits equal those of :meth:`forward` on the whole sequence.

        >>> logits, cache = model.forward_cached(prompt)            # (B, T) prompt
        >>> nxt = logits[:, -1].argmax(-1, keepdim=True)
        >>> logits, cache = model.forward_cached(nxt, cache)        # one new position
        """
        start = 0 if past is None else past[0][0].shape[2]
        if past is not None and len(past) != self.n_layers:
            raise ShapeError(f"GPT.forward_cached: the cache holds {len(past)} layers; this "
                             f"model has {self.n_layers}")
        end = start + idx.shape[1]
        if end > self.context:
            raise ShapeError(f"GPT.forward_cached: positions {start}..{end - 1} exceed the "
                             f"context of {self.context} tokens")
        x = self.tok(idx) + self.pos[start:end]
        present: KVCache = []
        for i, block in enumerate(self.blocks):
            x, kv = block.forward_cached(x, None if past is None else past[i])
            present.append(kv)
        return self.head(self.ln(x)), present
