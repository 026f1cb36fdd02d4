"""Fold and Unfold: sliding blocks of an image to columns and back
(:func:`ember.nn.functional.unfold` and :func:`~ember.nn.functional.fold`)."""
from __future__ import annotations

from ...tensor import Tensor
from .. import functional as F
from ..module import Module

__all__ = ["Fold", "Unfold"]


class Unfold(Module):
    """(N, C, H, W) to (N, C * kh * kw, L): every sliding block as a column (im2col).

    >>> ember.nn.Unfold(kernel_size=2)(ember.randn(1, 3, 4, 4)).shape
    ember.Size([1, 12, 9])
    """

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    """(N, C * kh * kw, L) to (N, C, H, W): columns summed back into their blocks (col2im).

    >>> ember.nn.Fold(output_size=(4, 4), kernel_size=2)(ember.randn(1, 12, 9)).shape
    ember.Size([1, 3, 4, 4])
    """

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")
