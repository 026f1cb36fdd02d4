"""Affine layers: Identity, Linear, Bilinear."""
from __future__ import annotations

import math

from ...errors import ShapeError
from ...ops.creation import empty
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter

__all__ = ["Identity", "Linear", "Bilinear"]


def _check_features(layer: str, name: str, input: Tensor, expected: int) -> None:
    if input.ndim == 0 or input.shape[-1] != expected:
        raise ShapeError(f"{layer}: expected {name} with {expected} features in its last "
                         f"dimension, got shape {tuple(input.shape)}")


class Identity(Module):
    """Returns its input unchanged (arguments are accepted and ignored), e.g. to remove a
    layer from a model without changing its structure.

    >>> ember.nn.Identity(54, unused="x")(ember.ones(2)).shape
    ember.Size([2])
    """

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """``y = x @ weight.T + bias``.

    Args:
        in_features: size of each input's last dimension.
        out_features: size of each output's last dimension.
        bias: learn an additive bias.

    Shape: input ``(*, in_features)``, output ``(*, out_features)``. ``weight`` is
    ``(out_features, in_features)``; both are initialised from
    U(-1/sqrt(in_features), 1/sqrt(in_features)).

    >>> ember.nn.Linear(20, 30)(ember.randn(128, 20)).shape
    ember.Size([128, 30])
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(empty((out_features, in_features), device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # kaiming_uniform_ with a=sqrt(5) is U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        _check_features("Linear", "input", input, self.in_features)
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Bilinear(Module):
    """``y = x1^T A x2 + b`` for each output feature.

    Shape: inputs ``(*, in1_features)`` and ``(*, in2_features)``, output
    ``(*, out_features)``; ``weight`` is ``(out_features, in1_features, in2_features)``.
    Weight and bias are initialised from U(-1/sqrt(in1_features), 1/sqrt(in1_features)).

    >>> m = ember.nn.Bilinear(20, 30, 40)
    >>> m(ember.randn(128, 20), ember.randn(128, 30)).shape
    ember.Size([128, 40])
    """

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(empty((out_features, in1_features, in2_features),
                                      device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        _check_features("Bilinear", "input1", input1, self.in1_features)
        _check_features("Bilinear", "input2", input2, self.in2_features)
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
