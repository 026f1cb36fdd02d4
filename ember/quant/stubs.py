"""Where a model's quantized region starts and ends: :class:`QuantStub` (float to
quantized) and :class:`DeQuantStub` (back), and :class:`QuantWrapper`, which puts them
around a whole model."""
from __future__ import annotations

from ..nn.module import Module
from ..tensor import Tensor

__all__ = ["QuantStub", "DeQuantStub", "QuantWrapper"]


class QuantStub(Module):
    """Identity in float; observes its output after :func:`prepare` and becomes a
    :class:`~ember.quant.Quantize` after :func:`convert`."""

    def forward(self, x: Tensor) -> Tensor:
        return x


class DeQuantStub(Module):
    """Identity in float; becomes a :class:`~ember.quant.DeQuantize` after
    :func:`convert`."""

    def forward(self, x):
        return x


class QuantWrapper(Module):
    """``dequant(module(quant(x)))``: quantizes a whole model's input and dequantizes its
    output. :func:`prepare` wraps a model that has no :class:`QuantStub` in one.

    >>> m = ember.quant.QuantWrapper(ember.nn.Linear(4, 2))
    >>> m(ember.randn(3, 4)).shape
    ember.Size([3, 2])
    """

    def __init__(self, module: Module):
        super().__init__()
        self.quant = QuantStub()
        self.module = module
        self.dequant = DeQuantStub()

    def forward(self, x):
        return self.dequant(self.module(self.quant(x)))
