"""``conv2d_fused``: a 2-D convolution with the ReLU and max pooling that follow it, as
one op that ``ember.jit`` puts in place of the three (``conv2d_fused_indexed``: with a
pooling that also gives its indices, in training)
(:mod:`ember.compiler.passes.epilogues`); it is never recorded by user code and has
no gradient (the pass runs after the backward is built).

Where the C loop of :func:`~ember.ops.conv_kernels.conv2d_forward` applies, each image's
result is pooled while it is in cache and only the pooled values are written: the cnn
workload's two layers at batch 64 took 2.8-3.3 ms against 6.3 ms for the three NumPy
ops one after another. Anywhere else the three forwards run in order.
"""
from __future__ import annotations

import numpy as np

from .conv import _conv_forward
from .conv_kernels import conv2d_forward
from .pooling import _max_pool_forward, _max_pool_values_forward
from .registry import register


def _run(xp, x, w, bias, stride, padding, dilation, out_size, relu, pool, indices):
    """``pool``: None, or the max pooling's params (kernel, stride, out_size); with
    ``indices``, ``(values, indices)`` as ``max_pool`` gives them."""
    if xp is np:
        done = conv2d_forward(x, w, bias[0] if bias else None, stride,
                              tuple(lo for lo, _ in padding), dilation, out_size, relu,
                              None if pool is None else pool[:2], indices)
        if done is not None:
            return done
    y = _conv_forward(xp, x, w, *bias, stride=stride, padding=padding, dilation=dilation,
                      groups=1, out_size=out_size)
    if relu:
        y = xp.maximum(y, 0).astype(y.dtype, copy=False)
    if pool is None:
        return y
    pooling = _max_pool_forward if indices else _max_pool_values_forward
    return pooling(xp, y, pool[0], pool[1], (1, 1), (0, 0), pool[2], False)


def _forward(xp, x, w, *bias, stride, padding, dilation, out_size, relu, pool):
    return _run(xp, x, w, bias, stride, padding, dilation, out_size, relu, pool, False)


def _indexed_forward(xp, x, w, *bias, stride, padding, dilation, out_size, relu, pool):
    """(values, indices): in training, the pooling's backward reads the indices."""
    return _run(xp, x, w, bias, stride, padding, dilation, out_size, relu, pool, True)


CONV2D_FUSED = register("conv2d_fused", _forward)
CONV2D_FUSED_INDEXED = register("conv2d_fused_indexed", _indexed_forward, n_outputs=2)

__all__ = ["CONV2D_FUSED", "CONV2D_FUSED_INDEXED"]
