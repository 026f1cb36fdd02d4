"""The built-in model builders of config files: ``mlp``, ``cnn`` and ``gpt`` (the
DESIGN.md reference workloads, with their sizes as options)."""
from __future__ import annotations

from typing import Sequence

from .. import nn
from ..models import GPT
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




def gpt(vocab_size: int = 256, context: int = 64, d_model: int = 128, n_heads: int = 4,
        n_layers: int = 2, mlp_ratio: int = 4) -> GPT:
    """The DESIGN.md gpt (vocab 256, context 64, d_model 128, 4 heads, 2 blocks, MLP 4×,
    GELU), each size an option."""
    if d_model % n_heads:
        raise ConfigError("model.n_heads", f"d_model {d_model} is not divisible by n_heads "
                                           f"{n_heads}")
    return GPT(vocab_size, context, d_model, n_heads, n_layers, mlp_ratio)
