"""Folding an evaluation-mode BatchNorm into the convolution or linear layer before it
(``torch.nn.utils.fusion``): one layer that computes ``bn(layer(x))``."""
from __future__ import annotations

import copy
from typing import TypeVar

from ...ops.creation import ones_like, zeros_like
from ...tensor import Tensor
from ..layers.conv import _ConvNd
from ..layers.linear import Linear
from ..layers.normalization import _BatchNorm
from ..parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights"]

ConvT = TypeVar("ConvT", bound=_ConvNd)
LinearT = TypeVar("LinearT", bound=Linear)


def _check_eval(layer, bn) -> None:
    if layer.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")


def fuse_conv_bn_eval(conv: ConvT, bn: _BatchNorm, transpose: bool = False) -> ConvT:
    """A copy of ``conv`` whose output equals ``bn(conv(x))``, both in eval mode.

    Args:
        conv: a convolution (``Conv*d``, or ``ConvTranspose*d`` with ``transpose=True``).
        bn: the BatchNorm after it, with running statistics.
        transpose: ``conv`` is transposed (its weight's output channels are dim 1).

    >>> conv, bn = ember.nn.Conv2d(3, 8, 3).eval(), ember.nn.BatchNorm2d(8).eval()
    >>> fused = ember.nn.utils.fuse_conv_bn_eval(conv, bn)
    """
    _check_eval(conv, bn)
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias,
        transpose)
    return fused


def fuse_conv_bn_weights(conv_w: Tensor, conv_b: Tensor | None, bn_rm: Tensor, bn_rv: Tensor,
                         bn_eps: float, bn_w: Tensor | None, bn_b: Tensor | None,
                         transpose: bool = False) -> tuple[Parameter, Parameter]:
    """The weight and bias of a convolution that computes ``bn(conv(x))``: the weight
    scaled per output channel by ``bn_w / sqrt(bn_rv + bn_eps)``, the bias
    ``(conv_b - bn_rm) * that + bn_b``. Missing ``conv_b``/``bn_b`` count as zeros and a
    missing ``bn_w`` as ones. Returns two Parameters, in the convolution's dtypes.

    >>> w, b = ember.nn.utils.fuse_conv_bn_weights(conv.weight, conv.bias, bn.running_mean,
    ...                                            bn.running_var, bn.eps, bn.weight, bn.bias)
    """
    weight_dtype = conv_w.dtype
    bias_dtype = conv_b.dtype if conv_b is not None else weight_dtype
    if conv_b is None:
        conv_b = zeros_like(bn_rm)
    if bn_w is None:
        bn_w = ones_like(bn_rm)
    if bn_b is None:
        bn_b = zeros_like(bn_rm)
    bn_var_rsqrt = (bn_rv + bn_eps).rsqrt()
    shape = ([1, -1] if transpose else [-1, 1]) + [1] * (conv_w.ndim - 2)
    fused_w = (conv_w * (bn_w * bn_var_rsqrt).reshape(shape)).to(weight_dtype)
    fused_b = ((conv_b - bn_rm) * bn_var_rsqrt * bn_w + bn_b).to(bias_dtype)
    return (Parameter(fused_w.detach(), conv_w.requires_grad),
            Parameter(fused_b.detach(), conv_b.requires_grad))


def fuse_linear_bn_eval(linear: LinearT, bn: _BatchNorm) -> LinearT:
    """A copy of ``linear`` whose output equals ``bn(linear(x))``, both in eval mode
    (``bn.num_features`` is ``linear.out_features`` or 1).

    >>> lin, bn = ember.nn.Linear(4, 6).eval(), ember.nn.BatchNorm1d(6).eval()
    >>> fused = ember.nn.utils.fuse_linear_bn_eval(lin, bn)
    """
    _check_eval(linear, bn)
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError("To fuse, linear.out_features == bn.num_features or "
                             "bn.num_features == 1, got linear.out_features="
                             f"{linear.out_features} and bn.num_features={bn.num_features}")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias)
    return fused


def fuse_linear_bn_weights(linear_w: Tensor, linear_b: Tensor | None, bn_rm: Tensor,
                           bn_rv: Tensor, bn_eps: float, bn_w: Tensor,
                           bn_b: Tensor) -> tuple[Parameter, Parameter]:
    """The weight and bias of a linear layer that computes ``bn(linear(x))``: rows scaled
    by ``bn_w / sqrt(bn_rv + bn_eps)``, bias ``(linear_b - bn_rm) * that + bn_b`` (a
    missing ``linear_b`` counts as zeros). Returns two Parameters.

    >>> w, b = ember.nn.utils.fuse_linear_bn_weights(lin.weight, lin.bias, bn.running_mean,
    ...                                              bn.running_var, bn.eps, bn.weight, bn.bias)
    """
    weight_dtype = linear_w.dtype
    bias_dtype = linear_b.dtype if linear_b is not None else weight_dtype
    if linear_b is None:
        linear_b = zeros_like(bn_rm)
    bn_scale = bn_w * (bn_rv + bn_eps).rsqrt()
    fused_w = linear_w * bn_scale.unsqueeze(-1).to(weight_dtype)
    fused_b = ((linear_b - bn_rm) * bn_scale + bn_b).to(bias_dtype)
    return (Parameter(fused_w.detach(), linear_w.requires_grad),
            Parameter(fused_b.detach(), linear_b.requires_grad))
