"""``conv2d_fused``: a 2-D convolution with the ReLU and max pooling that follow it, as
one op that ``ember.jit`` puts in place of the three (``conv2d_fused_indexed``: with a
pooling that also gives its indices, in training)
(:mod:`ember.compiler.passes.epilogues`); ``conv2d_backward_fused``: the weight, bias
and input gradients of a 2-D convolution (and the max pooling's backward before them)
as one op (:mod:`ember.compiler.passes.conv_backward`). They are never recorded by user
code and have no gradient (the passes run after the backward is built).

Where the C loop of :func:`~ember.ops.conv_forward.conv2d_forward` applies, each image's
result is pooled while it is in cache and only the pooled values are written: the cnn
workload's two layers at batch 64 took 2.8-3.3 ms against 6.3 ms for the three NumPy
ops one after another. Anywhere else the three forwards run in order.
"""
from __future__ import annotations

import numpy as np

from .conv import (_bias_grad_forward, _conv_forward, _conv_transpose_forward,
                   _conv_weight_grad_forward)
from .conv_grad_kernels import conv2d_backward
from .conv_forward import conv2d_forward, specialized
from .pooling import _max_pool_forward, _max_pool_values_forward, _max_unpool_forward
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


def _specialize(indices):
    """The ``specialize`` rule of conv2d_fused (``indices``: conv2d_fused_indexed): the C
    loop's plan made once for the graph's shapes."""
    def rule(avals, *, stride, padding, dilation, out_size, relu, pool):
        forward = _indexed_forward if indices else _forward
        params = dict(stride=stride, padding=padding, dilation=dilation, out_size=out_size,
                      relu=relu, pool=pool)
        c_loop = specialized(avals[0], avals[1], avals[2] if len(avals) > 2 else None,
                             stride, tuple(lo for lo, _ in padding), dilation, out_size,
                             relu, None if pool is None else pool[:2], indices)
        if c_loop is None:
            return None

        def run(xp, x, w, *bias):
            done = c_loop(x, w, bias[0] if bias else None) if xp is np else None
            return forward(xp, x, w, *bias, **params) if done is None else done
        return run
    return rule


def _backward(xp, x, g, *rest, stride, padding, dilation, kernel_size, pooled_from,
              need_db, need_dx):
    """``(dW, db, dx)`` of a 2-D convolution (``db``/``dx`` 0-d zeros where not needed):
    ``rest`` is ``[index][, w]`` — with ``pooled_from`` (the pooled result's size), ``g``
    is the gradient of the max pooling after the convolution and ``index`` its winners;
    ``w`` comes with ``need_dx``."""
    index = rest[0] if pooled_from is not None else None
    w = rest[-1] if need_dx else None
    zero = xp.zeros((), dtype=x.dtype)
    if xp is np:
        done = conv2d_backward(x, w, g, index, pooled_from, kernel_size, stride,
                               tuple(lo for lo, _ in padding), dilation, need_db)
        if done is not None:
            return tuple(zero if a is None else a for a in done)
    if index is not None:
        g = _max_unpool_forward(xp, g, index, pooled_from, False)
    geometry = dict(stride=stride, padding=padding, dilation=dilation, groups=1)
    dw = _conv_weight_grad_forward(xp, x, g, kernel_size=kernel_size, **geometry)
    db = _bias_grad_forward(xp, g) if need_db else zero
    dx = _conv_transpose_forward(xp, g, w, out_size=x.shape[2:], **geometry) if need_dx \
        else zero
    return dw, db, dx


CONV2D_FUSED = register("conv2d_fused", _forward, specialize=_specialize(False))
CONV2D_FUSED_INDEXED = register("conv2d_fused_indexed", _indexed_forward, n_outputs=2,
                                specialize=_specialize(True))
CONV2D_BACKWARD_FUSED = register("conv2d_backward_fused", _backward, n_outputs=3)

__all__ = ["CONV2D_FUSED", "CONV2D_FUSED_INDEXED", "CONV2D_BACKWARD_FUSED"]
