"""The built-in model builders of config files: ``mlp``, ``cnn`` and ``gpt`` (the
DESIGN.md reference workloads, with their sizes as options)."""
from __future__ import annotations

from typing import Sequence

from .. import nn
from ..nn import functional as F
from ..ops.random import randn
from ..tensor import Tensor
from .errors import ConfigError

__all__ = ["ACTIVATIONS", "mlp", "cnn", "gpt", "GPT"]

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid,
               "silu": nn.SiLU, "leaky_relu": nn.LeakyReLU, "elu": nn.ELU}


def mlp(sizes: Sequence[int], activation: str = "relu", dropout: float = 0.0,
        flatten: bool = True) -> nn.Sequential:
    """``Linear(sizes[0], sizes[1])``, activation, ..., ``Linear(sizes[-2], sizes[-1])``
    (no activation after the last), with ``Flatten`` first when ``flatten`` and
    ``Dropout(dropout)`` after each hidden activation when ``dropout > 0``.

    >>> mlp([64, 128, 10], "gelu")
    """
    layers: list[nn.Module] = [nn.Flatten()] if flatten else []
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(n_in, n_out))
        if i < len(sizes) - 2:
            layers.append(ACTIVATIONS[activation]())
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers)


def cnn(in_channels: int = 1, image_size: int = 28, num_classes: int = 10,
        channels: Sequence[int] = (32, 64), hidden: int = 128, kernel_size: int = 3,
        padding: int = 0, activation: str = "relu", dropout: float = 0.0) -> nn.Sequential:
    """The DESIGN.md cnn: per entry of ``channels`` a ``kernel_size`` convolution,
    activation and 2×2 max-pool; then ``Linear(flat, hidden)``, activation,
    ``Linear(hidden, num_classes)``. The defaults give the reference shape (28×28
    inputs, conv 1→32, conv 32→64, linear 1600→128→10); ``image_size=8, padding=1``
    fits the 8×8 Digits.
    """
    size, layers, c_in = image_size, [], in_channels
    for c_out in channels:
        layers += [nn.Conv2d(c_in, c_out, kernel_size, padding=padding),
                   ACTIVATIONS[activation](), nn.MaxPool2d(2)]
        size = (size + 2 * padding - kernel_size + 1) // 2
        if size < 1:
            raise ConfigError("model.image_size", f"{image_size}×{image_size} images shrink "
                              f"to nothing after {len(channels)} convolution+pool stages "
                              f"(kernel_size {kernel_size}, padding {padding}); use larger "
                              "images, fewer channels entries or padding")
        c_in = c_out
    layers += [nn.Flatten(), nn.Linear(c_in * size * size, hidden), ACTIVATIONS[activation]()]
    if dropout > 0:
        layers.append(nn.Dropout(dropout))
    layers.append(nn.Linear(hidden, num_classes))
    return nn.Sequential(*layers)


class _Block(nn.Module):
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
        self.blocks = nn.Sequential(*[_Block(d_model, n_heads, mlp_ratio)
                                      for _ in range(n_layers)])
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, idx: Tensor) -> Tensor:
        x = self.tok(idx) + self.pos[: idx.shape[1]]
        return self.head(self.ln(self.blocks(x)))


def gpt(vocab_size: int = 256, context: int = 64, d_model: int = 128, n_heads: int = 4,
        n_layers: int = 2, mlp_ratio: int = 4) -> GPT:
    """The DESIGN.md gpt (vocab 256, context 64, d_model 128, 4 heads, 2 blocks, MLP 4×,
    GELU), each size an option."""
    if d_model % n_heads:
        raise ConfigError("model.n_heads", f"d_model {d_model} is not divisible by n_heads "
                                           f"{n_heads}")
    return GPT(vocab_size, context, d_model, n_heads, n_layers, mlp_ratio)
