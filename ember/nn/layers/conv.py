"""Convolutions: Conv1d/2d/3d and ConvTranspose1d/2d/3d, with PyTorch's arguments,
weight layouts and initialisation."""
from __future__ import annotations

import math

from ...errors import ShapeError
from ...ops.creation import empty
from ...ops.movement import pad
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
           "ConvTranspose3d"]

_PADDING_MODES = {"zeros", "reflect", "replicate", "circular"}


def _ntuple(value, n: int) -> tuple:
    if isinstance(value, (tuple, list)):
        if len(value) != n:
            raise ValueError(f"expected {n} values, got {tuple(value)}")
        return tuple(value)
    return (value,) * n


class _ConvNd(Module):
    """What the convolutions share: arguments, parameters, initialisation, repr."""
    _dims = 0
    _transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride, padding,
                 dilation, output_padding, groups: int, bias: bool, padding_mode: str,
                 device, dtype):
        super().__init__()
        n = self._dims
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        stride = _ntuple(stride, n)
        dilation = _ntuple(dilation, n)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        else:
            padding = _ntuple(padding, n)
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {_PADDING_MODES}, but got "
                             f"padding_mode='{padding_mode}'")
        if self._transposed and padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for '
                             f"{type(self).__name__}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = self._transposed
        self.output_padding = _ntuple(output_padding, n)
        self.groups = groups
        self.padding_mode = padding_mode
        if isinstance(padding, str):
            # F.pad's (last dim first) amounts for "same", the extra one on the right.
            amounts = []
            for d, k in zip(reversed(dilation), reversed(self.kernel_size)):
                total = d * (k - 1) if padding == "same" else 0
                amounts += [total // 2, total - total // 2]
            self._reversed_padding_repeated_twice = amounts
        else:
            self._reversed_padding_repeated_twice = [p for p in reversed(padding) for _ in "lr"]
        shape = ((in_channels, out_channels // groups) if self._transposed
                 else (out_channels, in_channels // groups)) + self.kernel_size
        self.weight = Parameter(empty(shape, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # kaiming_uniform_ with a=sqrt(5) is U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _check_input(self, input: Tensor) -> None:
        n = self._dims
        name = type(self).__name__
        if input.ndim not in (n + 1, n + 2):
            raise ShapeError(f"{name}: expected a {n + 1}-D (unbatched) or {n + 2}-D (batched) "
                             f"input, got a {input.ndim}-D input of shape {tuple(input.shape)}")
        if input.shape[-n - 1] != self.in_channels:
            raise ShapeError(f"{name}: expected input with {self.in_channels} channels (dim "
                             f"{-n - 1}), got shape {tuple(input.shape)} with "
                             f"{input.shape[-n - 1]} channels")

    def extra_repr(self) -> str:
        n = len(self.kernel_size)
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    _conv = None  # the functional form, set per subclass

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, 0,
                         groups, bias, padding_mode, device, dtype)

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        conv = getattr(F, self._conv)
        if self.padding_mode != "zeros":
            input = pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv(input, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input: Tensor) -> Tensor:
        self._check_input(input)
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """1-D convolution over (N, C_in, L) or (C_in, L) inputs.

    Args:
        in_channels, out_channels: channels of the input and output.
        kernel_size, stride, dilation: an int or a 1-tuple.
        padding: an int, a 1-tuple, ``"valid"`` (none) or ``"same"`` (output as long as
            the input; stride 1 only).
        groups: split the channels into groups convolved separately.
        bias: learn an additive bias.
        padding_mode: ``"zeros"``, ``"reflect"``, ``"replicate"`` or ``"circular"``.

    ``weight`` is (out_channels, in_channels / groups, kernel_size); weight and bias are
    initialised from U(-1/sqrt(fan_in), 1/sqrt(fan_in)).

    >>> ember.nn.Conv1d(16, 33, 3, stride=2)(ember.randn(20, 16, 50)).shape
    ember.Size([20, 33, 24])
    """
    _dims = 1
    _conv = "conv1d"


class Conv2d(_Conv):
    """2-D convolution over (N, C_in, H, W) or (C_in, H, W) inputs; the arguments are
    those of :class:`Conv1d`, as ints or pairs.

    >>> conv = ember.nn.Conv2d(16, 33, (3, 5), stride=(2, 1), padding=(4, 2))
    >>> conv(ember.randn(20, 16, 50, 100)).shape
    ember.Size([20, 33, 28, 100])
    """
    _dims = 2
    _conv = "conv2d"


class Conv3d(_Conv):
    """3-D convolution over (N, C_in, D, H, W) or (C_in, D, H, W) inputs; the arguments
    are those of :class:`Conv1d`, as ints or triples.

    >>> ember.nn.Conv3d(4, 8, 3)(ember.randn(2, 4, 5, 6, 7)).shape
    ember.Size([2, 8, 3, 4, 5])
    """
    _dims = 3
    _conv = "conv3d"


class _ConvTranspose(_ConvNd):
    _transposed = True
    _conv = None

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         output_padding, groups, bias, padding_mode, device, dtype)

    def _output_padding(self, input: Tensor, output_size) -> tuple:
        """The output padding that gives ``output_size`` (PyTorch's rule)."""
        if output_size is None:
            return self.output_padding
        n = self._dims
        batch = 2 if input.ndim == n + 2 else 1
        output_size = tuple(output_size)
        if len(output_size) == batch + n:
            output_size = output_size[batch:]
        if len(output_size) != n:
            raise ValueError(f"ConvTranspose{n}D: for {input.ndim}D input, output_size must "
                             f"have {n} or {batch + n} elements (got {len(output_size)})")
        smallest = [(input.shape[batch + d] - 1) * self.stride[d] - 2 * self.padding[d]
                    + self.dilation[d] * (self.kernel_size[d] - 1) + 1 for d in range(n)]
        largest = [s + self.stride[d] - 1 for d, s in enumerate(smallest)]
        for d, size in enumerate(output_size):
            if not smallest[d] <= size <= largest[d]:
                raise ValueError(f"requested an output size of {list(output_size)}, but valid "
                                 f"sizes range from {smallest} to {largest} (for an input of "
                                 f"{input.shape[batch:]})")
        return tuple(size - s for size, s in zip(output_size, smallest))

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        self._check_input(input)
        output_padding = self._output_padding(input, output_size)
        return getattr(F, self._conv)(input, self.weight, self.bias, self.stride, self.padding,
                                      output_padding, self.groups, self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """1-D transposed convolution (the gradient of Conv1d with respect to its input) over
    (N, C_in, L) or (C_in, L) inputs.

    Args:
        output_padding: extra size added to one side of the output (to pick among the
            output sizes that a strided convolution maps to the same input size).
        others: as :class:`Conv1d` (padding as ints; ``padding_mode`` only ``"zeros"``).

    ``weight`` is (in_channels, out_channels / groups, kernel_size). ``forward`` takes
    an optional ``output_size`` that sets the output padding.

    >>> ember.nn.ConvTranspose1d(16, 33, 3, stride=2)(ember.randn(20, 16, 50)).shape
    ember.Size([20, 33, 101])
    """
    _dims = 1
    _conv = "conv_transpose1d"


class ConvTranspose2d(_ConvTranspose):
    """2-D transposed convolution over (N, C_in, H, W) or (C_in, H, W) inputs; the
    arguments are those of :class:`ConvTranspose1d`, as ints or pairs.

    >>> up = ember.nn.ConvTranspose2d(16, 16, 3, stride=2, padding=1)
    >>> up(ember.randn(1, 16, 6, 6), output_size=(12, 12)).shape
    ember.Size([1, 16, 12, 12])
    """
    _dims = 2
    _conv = "conv_transpose2d"


class ConvTranspose3d(_ConvTranspose):
    """3-D transposed convolution over (N, C_in, D, H, W) or (C_in, D, H, W) inputs."""
    _dims = 3
    _conv = "conv_transpose3d"
