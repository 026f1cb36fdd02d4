"""The pointwise activations written in elementwise ember ops, for ``ember.jit``.

Each activation of :mod:`ember.ops.activation_kernels` is one primitive with a NumPy
forward, which no generated kernel can enter: a SiLU between two products ran as its
own NumPy passes (about 2x a fused loop's time on the gpt's shapes). These rules give
``f(x)`` and ``f'(x)`` in elementwise ops, in the same steps and order as the NumPy
forwards (so float64 results agree to the last bits and float32 ones to an ulp or two:
the generated ``exp`` and ``tanh`` are within 1 ulp), for the decomposition pass
(:mod:`ember.compiler.passes.decompose`) to put into one loop with the ops around them.
"""
from __future__ import annotations

from . import elementwise as ew
from .logical import logical_and


def _mask(x, cond):
    """``cond`` (a boolean tensor) as 0/1 in ``x``'s dtype."""
    return cond.to(x.dtype)


def silu_ops(x):
    return ew.sigmoid(x) * x


def silu_df_ops(x):
    s = ew.sigmoid(x)
    return ((1 - s) * x + 1) * s


def _softplus_ops(z):
    """max(z, 0) + log1p(exp(-|z|)), as ``activation_kernels._softplus``."""
    return ew.log1p(ew.exp(-ew.abs(z))) + ew.maximum(z, 0.0)


def mish_ops(x):
    return ew.tanh(_softplus_ops(x)) * x


def mish_df_ops(x):
    t = ew.tanh(_softplus_ops(x))
    return (1 - t * t) * ew.sigmoid(x) * x + t


def softplus_ops(x, beta, threshold):
    bx = x * beta
    return ew.where(bx > threshold, x, _softplus_ops(bx) / beta)


def softplus_df_ops(x, beta, threshold):
    bx = x * beta
    return ew.where(bx > threshold, 1.0, ew.sigmoid(bx)).to(x.dtype)


def elu_ops(x, alpha, scale, input_scale):
    out = ew.expm1(ew.minimum(x, 0.0) * input_scale) * alpha + ew.maximum(x, 0.0)
    return out * scale if scale != 1 else out


def elu_df_ops(x, alpha, scale, input_scale):
    d = ew.exp(ew.minimum(x, 0.0) * input_scale) * _mask(x, x <= 0) * (alpha * input_scale)
    d = d + _mask(x, x > 0)
    return d * scale if scale != 1 else d


def leaky_relu_ops(x, negative_slope):
    return ew.minimum(x, 0.0) * negative_slope + ew.maximum(x, 0.0)


def leaky_relu_df_ops(x, negative_slope):
    return _mask(x, x <= 0) * negative_slope + _mask(x, x > 0)


def hardtanh_ops(x, min_val, max_val):
    return ew.clamp(x, min_val, max_val)


def hardtanh_df_ops(x, min_val, max_val):
    return _mask(x, logical_and(x > min_val, x < max_val))


def hardsigmoid_ops(x):
    return ew.clamp(x + 3, 0.0, 6.0) / 6


def hardsigmoid_df_ops(x):
    return _mask(x, logical_and(x > -3, x < 3)) / 6


def hardswish_ops(x):
    return hardsigmoid_ops(x) * x


def hardswish_df_ops(x):
    # PyTorch's: 0 up to -3, x / 3 + 0.5 strictly between, 1 from 3 on
    return ew.where(x <= -3, 0.0, ew.where(x < 3, x / 3 + 0.5, 1.0)).to(x.dtype)


__all__ = [name for name in dir() if name.endswith("_ops") and not name.startswith("_")]
