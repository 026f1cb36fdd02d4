"""The reference GPT of DESIGN.md (the gpt workload), as one module the config files,
the examples and the distributed helpers share: token and learned position embeddings,
pre-norm transformer blocks (causal self-attention, a GELU MLP), a final LayerNorm and
a linear head. Its parameter names are those of ``bench/training.py``'s twin.

>>> model = ember.models.GPT(vocab_size=256)          # DESIGN.md's sizes by default
>>> model(ember.randint(0, 256, (2, 16))).shape
ember.Size([2, 16, 256])
"""
from __future__ import annotations

from .. import nn
from ..nn import functional as F
from ..ops.random import randn
from ..tensor import Tensor

__all__ = ["Block", "GPT"]


class Block(nn.Module):
    """A pre-norm transformer block: causal self-attention, then an MLP."""

    def __init__(self, d_model: int, n_heads: int, mlp_ratio: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, mlp_ratio * d_model)
        self.fc2 = nn.Linear(mlp_ratio * d_model, d_model)

    def forward(self, x: Tensor) -> Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.n_heads, width // self.n_heads).transpose(1, 2)
                   for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(batch, length, width))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    """A decoder-only transformer: token and learned position embeddings, ``n_layers``
    pre-norm blocks, a final LayerNorm and a linear head.

    Shape: ``(B, T)`` int64 tokens with ``T <= context`` -> ``(B, T, vocab_size)``
    logits (train it with the config loss ``token_cross_entropy``).
    """

    def __init__(self, vocab_size: int = 256, context: int = 64, d_model: int = 128,
                 n_heads: int = 4, n_layers: int = 2, mlp_ratio: int = 4) -> None:
        super().__init__()
        self.context = context
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Parameter(randn(context, d_model) * 0.02)
        self.blocks = nn.Sequential(*[Block(d_model, n_heads, mlp_ratio)
                                      for _ in range(n_layers)])
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, idx: Tensor) -> Tensor:
        x = self.tok(idx) + self.pos[: idx.shape[1]]
        return self.head(self.ln(self.blocks(x)))
