"""Layers for quantization-aware training: the float layer with its weight passed
through a :class:`~ember.quant.FakeQuantize` on every forward."""
from __future__ import annotations

from ..nn import functional as F
from ..nn.layers.conv import Conv2d
from ..nn.layers.linear import Linear
from ..tensor import Tensor
from .qconfig import QConfig

__all__ = ["QATLinear", "QATLinearReLU", "QATConv2d", "QATConvReLU2d"]


class QATLinear(Linear):
    """A Linear whose weight is fake-quantized (``weight_fake_quant``) in forward.
    Shares the float layer's parameters, so an optimizer built before
    :func:`prepare_qat` keeps training them."""

    @classmethod
    def from_float(cls, linear: Linear, qconfig: QConfig) -> "QATLinear":
        qat = cls.__new__(cls)
        Linear.__init__(qat, linear.in_features, linear.out_features, linear.bias is not None)
        qat.weight, qat.bias = linear.weight, linear.bias
        qat.qconfig = qconfig
        qat.weight_fake_quant = qconfig.weight()
        qat.train(linear.training)
        return qat

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight_fake_quant(self.weight), self.bias)


class QATLinearReLU(QATLinear):
    """:class:`QATLinear` then ReLU (from a fused :class:`~ember.quant.LinearReLU`)."""

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(super().forward(input))


class QATConv2d(Conv2d):
    """A Conv2d whose weight is fake-quantized (``weight_fake_quant``) in forward."""

    @classmethod
    def from_float(cls, conv: Conv2d, qconfig: QConfig) -> "QATConv2d":
        qat = cls.__new__(cls)
        Conv2d.__init__(qat, conv.in_channels, conv.out_channels, conv.kernel_size,
                        conv.stride, conv.padding, conv.dilation, conv.groups,
                        conv.bias is not None, conv.padding_mode)
        qat.weight, qat.bias = conv.weight, conv.bias
        qat.qconfig = qconfig
        qat.weight_fake_quant = qconfig.weight()
        qat.train(conv.training)
        return qat

    def forward(self, input: Tensor) -> Tensor:
        self._check_input(input)
        return self._conv_forward(input, self.weight_fake_quant(self.weight), self.bias)


class QATConvReLU2d(QATConv2d):
    """:class:`QATConv2d` then ReLU (from a fused :class:`~ember.quant.ConvReLU2d`)."""

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(super().forward(input))
