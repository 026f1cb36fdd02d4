"""Pooling layers: max and average pooling over windows, and adaptive pooling to a
given output size."""
from __future__ import annotations

from ...tensor import Tensor
from .. import functional as F
from ..module import Module

__all__ = ["MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
           "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
           "AdaptiveMaxPool2d"]


class _MaxPoolNd(Module):
    _pool = ""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor):
        return getattr(F, self._pool)(input, self.kernel_size, self.stride, self.padding,
                                      self.dilation, ceil_mode=self.ceil_mode,
                                      return_indices=self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """The maximum over sliding windows of (N, C, L) or (C, L) inputs.

    Args:
        kernel_size: the window size.
        stride: the window step (defaults to ``kernel_size``).
        padding: implicit -inf padding on both sides.
        dilation: the spacing between window elements.
        return_indices: also return the flat index of each maximum (for MaxUnpool).
        ceil_mode: round the output size up instead of down.

    >>> ember.nn.MaxPool1d(3, stride=2)(ember.randn(20, 16, 50)).shape
    ember.Size([20, 16, 24])
    """
    _pool = "max_pool1d"


class MaxPool2d(_MaxPoolNd):
    """The maximum over sliding windows of (N, C, H, W) or (C, H, W) inputs; arguments
    as :class:`MaxPool1d`, as ints or pairs.

    >>> ember.nn.MaxPool2d(2)(ember.randn(1, 3, 8, 8)).shape
    ember.Size([1, 3, 4, 4])
    """
    _pool = "max_pool2d"


class MaxPool3d(_MaxPoolNd):
    """The maximum over sliding windows of (N, C, D, H, W) or (C, D, H, W) inputs."""
    _pool = "max_pool3d"


class AvgPool1d(Module):
    """The mean over sliding windows of (N, C, L) or (C, L) inputs.

    Args:
        kernel_size, stride (default ``kernel_size``), padding (zeros): as ints or
            1-tuples.
        ceil_mode: round the output size up instead of down.
        count_include_pad: count the zero padding in each mean's divisor.

    >>> ember.nn.AvgPool1d(3, stride=2)(ember.randn(1, 1, 7)).shape
    ember.Size([1, 1, 3])
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True):
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


def _single(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


class _AvgPoolNd(Module):
    _pool = ""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: int | None = None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, self._pool)(input, self.kernel_size, self.stride, self.padding,
                                      self.ceil_mode, self.count_include_pad,
                                      self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(_AvgPoolNd):
    """The mean over sliding windows of (N, C, H, W) or (C, H, W) inputs; arguments as
    :class:`AvgPool1d`, plus ``divisor_override`` (divide every window by this instead).

    >>> ember.nn.AvgPool2d(2)(ember.randn(1, 3, 8, 8)).shape
    ember.Size([1, 3, 4, 4])
    """
    _pool = "avg_pool2d"


class AvgPool3d(_AvgPoolNd):
    """The mean over sliding windows of (N, C, D, H, W) or (C, D, H, W) inputs."""
    _pool = "avg_pool3d"


class _AdaptivePool(Module):
    _pool = ""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, self._pool)(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class _AdaptiveMaxPool(_AdaptivePool):
    def __init__(self, output_size, return_indices: bool = False):
        super().__init__(output_size)
        self.return_indices = return_indices

    def forward(self, input: Tensor):
        return getattr(F, self._pool)(input, self.output_size, self.return_indices)


class AdaptiveAvgPool1d(_AdaptivePool):
    """Average pooling of (N, C, L) or (C, L) inputs into ``output_size`` bins (windows
    ``[floor(i L / out), ceil((i + 1) L / out))``).

    >>> ember.nn.AdaptiveAvgPool1d(5)(ember.randn(1, 64, 8)).shape
    ember.Size([1, 64, 5])
    """
    _pool = "adaptive_avg_pool1d"


class AdaptiveAvgPool2d(_AdaptivePool):
    """Average pooling of (N, C, H, W) or (C, H, W) inputs to ``output_size`` (an int, or
    a pair whose None entries keep the input's size).

    >>> ember.nn.AdaptiveAvgPool2d((5, None))(ember.randn(1, 64, 8, 9)).shape
    ember.Size([1, 64, 5, 9])
    """
    _pool = "adaptive_avg_pool2d"


class AdaptiveAvgPool3d(_AdaptivePool):
    """Average pooling of (N, C, D, H, W) or (C, D, H, W) inputs to ``output_size``."""
    _pool = "adaptive_avg_pool3d"


class AdaptiveMaxPool1d(_AdaptiveMaxPool):
    """Max pooling of (N, C, L) or (C, L) inputs into ``output_size`` bins; with
    ``return_indices`` also the index of each maximum."""
    _pool = "adaptive_max_pool1d"


class AdaptiveMaxPool2d(_AdaptiveMaxPool):
    """Max pooling of (N, C, H, W) or (C, H, W) inputs to ``output_size``.

    >>> ember.nn.AdaptiveMaxPool2d(1)(ember.randn(2, 8, 5, 7)).shape
    ember.Size([2, 8, 1, 1])
    """
    _pool = "adaptive_max_pool2d"

