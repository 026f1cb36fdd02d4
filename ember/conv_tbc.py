"""``torch.conv_tbc``: a 1-D convolution over time-major input (time, batch, channels),
composed from ``nn.functional.conv1d`` so that gradients and ``ember.jit`` come free."""
from __future__ import annotations

import numbers

from .errors import EmberTypeError, ShapeError
from .nn import functional as F
from .tensor import Tensor

__all__ = ["conv_tbc"]


def conv_tbc(input: Tensor, weight: Tensor, bias: Tensor, pad: int = 0) -> Tensor:
    """A 1-D cross-correlation over the time dim of ``input``, as ``torch.conv_tbc``:
    ``out[t] = bias + sum_k x[t + k] @ weight[k]``, ``x`` being ``input`` with ``pad``
    zero steps added at both ends (a negative ``pad`` trims steps instead).

    Args:
        input: (T, B, C_in): time, batch, channels.
        weight: (K, C_in, C_out): the kernel width first.
        bias: (C_out).
        pad: zero steps before and after the sequence. Default: 0.

    Returns (T + 2 * pad - K + 1, B, C_out) (no steps when that is not positive).

    >>> ember.conv_tbc(ember.randn(7, 2, 3), ember.randn(3, 3, 4), ember.zeros(4), 1).shape
    ember.Size([7, 2, 4])
    """
    op = "conv_tbc"
    for what, t in (("input", input), ("weight", weight), ("bias", bias)):
        if not isinstance(t, Tensor):
            raise EmberTypeError(f"{op}: expected {what} to be a Tensor, got "
                                 f"{type(t).__name__}")
    if not isinstance(pad, numbers.Integral) or isinstance(pad, bool):
        raise EmberTypeError(f"{op}: pad must be an int, got {type(pad).__name__}")
    if input.ndim != 3:
        raise ShapeError(f"{op}: Input must have 3 dims: time, batch, in_channel (got shape "
                         f"{tuple(input.shape)})")
    if weight.ndim != 3:
        raise ShapeError(f"{op}: Weight tensor must have 3 dims: kernel_width, in_channels, "
                         f"out_channels (got shape {tuple(weight.shape)})")
    if bias.ndim != 1:
        raise ShapeError(f"{op}: Bias must have 1 dim: out_channels (got shape "
                         f"{tuple(bias.shape)})")
    if input.shape[2] != weight.shape[1]:
        raise ShapeError(f"{op}: Input dim 2 (input channels) is not == dim 1 in the weight "
                         f"tensor (input of shape {tuple(input.shape)}, weight of shape "
                         f"{tuple(weight.shape)})")
    if bias.shape[0] != weight.shape[2]:
        raise ShapeError(f"{op}: Bias size must equal dim 2 in the weight tensor (output "
                         f"channels): bias of shape {tuple(bias.shape)}, weight of shape "
                         f"{tuple(weight.shape)}")
    pad = int(pad)
    if pad < 0:  # trimming steps: conv1d takes no negative padding
        input = input[-pad:input.shape[0] + pad] if input.shape[0] > -2 * pad else input[:0]
        pad = 0
    kernel = weight.shape[0]
    if input.shape[0] + 2 * pad - kernel + 1 <= 0:
        # no output steps: an empty result that still belongs to the graph
        return F.linear(input[:0], weight.sum(0).t(), bias)
    out = F.conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return out.permute(2, 0, 1)
