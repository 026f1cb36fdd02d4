"""Linear maps, as in ``torch.nn.functional``: ``linear`` (a fused primitive, with its
backward op and its ``specialize`` rule for ember.jit's executor) and ``bilinear``.

The products run on the CPU backend's BLAS driver (:mod:`ember.backends.cpu_blas`), which
also adds the bias (and, under ``ember.jit``, a following ReLU) block by block.
"""
from __future__ import annotations

import math
import os

import numpy as np

from ..autograd import grad_mode
from ..backends import cpu_blas
from ..errors import EmberError, EmberTypeError, ShapeError
from ..tensor import Tensor
from .activation import _upcast  # half precision computes in float32
from .linalg import einsum, matmul
from .norm import _reduce_to
from ._xp import gemm, native_half_matmul
from .registry import AbstractValue, apply, autocast_inputs, register
from .shape import broadcast_shapes, reshape

__all__ = ["linear", "bilinear"]


def _require_tensor(name, arg, value):
    if not isinstance(value, Tensor):
        raise EmberTypeError(f"{name}: argument '{arg}' must be a Tensor, not "
                             f"{type(value).__name__}")


def _operand(xp, a):
    """``a`` as a product's operand: half precision widened to float32, unless the array
    module multiplies it natively (cuBLAS on tensor cores)."""
    if a.dtype.itemsize != 2:
        return a
    return a if native_half_matmul(xp) else _upcast(a)


def _rows(a):
    """``a`` as a matrix of its last dim's rows (also where that dim is 0, which
    ``reshape(-1, 0)`` cannot infer)."""
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


def _linear_forward(xp, x, w, *bias, relu=False):
    """``x @ w.T + bias``; ``relu`` (set by ``ember.jit`` where a ReLU alone reads the
    result: :mod:`ember.compiler.passes.epilogues`) then applies ReLU."""
    a = _operand(xp, x)
    flat = _rows(a) if a.ndim > 2 else a
    wt = _operand(xp, w).T
    b = _operand(xp, bias[0]) if bias else None
    inner = b is not None and b.ndim == 1 and b.dtype == wt.dtype == flat.dtype
    out = gemm(xp, flat, wt, b if inner else None, relu and (inner or not bias))
    if a.ndim > 2:
        out = out.reshape(a.shape[:-1] + (w.shape[0],))
    if b is not None and not inner:
        out = out + b
        if relu:
            out = xp.maximum(out, 0)
    return out.astype(x.dtype, copy=False)


def _linear_backward_forward(xp, g, x, w, need, bias_shape):
    g2 = _rows(_operand(xp, g))
    x2 = _rows(_operand(xp, x))
    zero = xp.zeros((), dtype=x.dtype)
    gx = zero
    if need[0]:
        gx = gemm(xp, g2, _operand(xp, w)).reshape(x.shape).astype(x.dtype, copy=False)
    gw = gemm(xp, g2.T, x2).astype(x.dtype, copy=False) if need[1] else zero
    gb = _reduce_to(xp, _upcast(g), bias_shape).astype(x.dtype) if need[2] else zero
    return gx, gw, gb


def _linear_vjp(n, g):
    inputs = n.saved_inputs()
    x, w = inputs[0], inputs[1]
    has_bias = len(inputs) > 2
    need = (n.edges[0] is not None, n.edges[1] is not None,
            has_bias and n.edges[2] is not None)
    if not grad_mode.is_grad_enabled():
        bias_shape = tuple(inputs[2].shape) if has_bias else ()
        gx, gw, gb = apply(_LINEAR_BACKWARD, g, x, w, need=need, bias_shape=bias_shape)
    else:
        gx = matmul(g, w) if need[0] else None
        gw = None
        if need[1]:
            gw = matmul(reshape(g, (-1, g.shape[-1])).mT, reshape(x, (-1, x.shape[-1])))
        gb = g if need[2] else None  # the engine sums it to the bias's shape
    out = (gx if need[0] else None, gw if need[1] else None)
    return out + ((gb if need[2] else None,) if has_bias else ())


def _linear_infer(x, w, *bias):
    shape = tuple(x.shape[:-1]) + (w.shape[0],)
    if bias:
        shape = tuple(np.broadcast_shapes(shape, bias[0].shape))
    return AbstractValue(shape, x.dtype)


def _linear_specialize(avals, relu=False):
    """The BLAS driver's plan for ``x @ w.T + bias``, made once for the graph's shapes
    (float32/float64, x at least 2-D, a bias of the output's width or none); the run
    then hands the driver x, w and bias as they are."""
    (xs, xd), (ws, wd) = avals[:2]
    bias = avals[2] if len(avals) > 2 else None
    if len(xs) < 2 or len(ws) != 2 or xd != wd or xd not in (np.float32, np.float64) or \
            (bias is not None and (bias[0] != ws[:1] or bias[1] != xd)):
        return None
    rows = math.prod(xs[:-1])
    product = cpu_blas.specialized_matmul(
        np.empty((rows, xs[-1]), xd), np.empty(ws, wd).T,
        None if bias is None else np.empty(ws[:1], xd), relu)
    if product is None:
        return None
    out_shape, pid, ndarray, empty = tuple(xs[:-1]) + (ws[0],), os.getpid(), np.ndarray, \
        np.empty

    def run(xp, x, w, *b):
        if x.__class__ is ndarray and w.__class__ is ndarray and x.flags.c_contiguous and \
                w.flags.c_contiguous and os.getpid() == pid and \
                (not b or (b[0].__class__ is ndarray and b[0].flags.c_contiguous)):
            return product(x, w, b[0] if b else None, empty(out_shape, xd))
        return _linear_forward(xp, x, w, *b, relu=relu)
    return run


_LINEAR = register("linear", _linear_forward, _linear_vjp, broadcasting=True,
                   infer=_linear_infer, specialize=_linear_specialize)
def _linear_backward_infer(g, x, w, need, bias_shape):
    return tuple(AbstractValue(shape if wanted else (), x.dtype) for shape, wanted in
                 zip((x.shape, w.shape, bias_shape), need))


_LINEAR_BACKWARD = register("linear_backward", _linear_backward_forward, n_outputs=3,
                            infer=_linear_backward_infer)


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """input @ weight.T + bias, for input (*, in_features), weight (out_features,
    in_features) and bias (out_features,).

    >>> F.linear(ember.ones(2, 3), ember.ones(4, 3)).shape
    ember.Size([2, 4])
    """
    for arg, t in (("input", input), ("weight", weight)):
        _require_tensor("linear", arg, t)
    tensors = (input, weight) if bias is None else (input, weight, bias)
    tensors = autocast_inputs("linear", *tensors)
    input, weight, bias = (tensors + (None,))[:3]
    if any(t.dtype is not input.dtype for t in tensors):
        raise EmberTypeError(f"linear: expected input, weight and bias of the same dtype, "
                             f"got {', '.join(t.dtype.name for t in tensors)}")
    if not input.dtype.is_floating_point:
        raise EmberTypeError(f"linear: expected floating-point tensors, got "
                             f"{input.dtype.name}")
    if weight.ndim == 1 or input.ndim == 0:
        out = matmul(input, weight.mT if weight.ndim == 2 else weight)
        return out if bias is None else out + bias
    if weight.ndim != 2 or input.shape[-1] != weight.shape[1]:
        raise ShapeError(f"linear: input of shape {tuple(input.shape)} and weight of shape "
                         f"{tuple(weight.shape)} do not fit: expected weight (out_features, "
                         f"{input.shape[-1]})")
    if bias is not None and (bias.ndim != 1 or bias.shape[0] not in (1, weight.shape[0])):
        try:
            broadcast_shapes(tuple(input.shape[:-1]) + (weight.shape[0],), tuple(bias.shape))
        except EmberError:
            raise ShapeError(f"linear: bias of shape {tuple(bias.shape)} does not fit an "
                             f"output of {weight.shape[0]} features") from None
    return apply(_LINEAR, *tensors)


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor,
             bias: Tensor | None = None) -> Tensor:
    """y_k = x1^T A_k x2 + b_k for input1 (*, in1), input2 (*, in2), weight (out, in1,
    in2) and bias (out,).

    >>> F.bilinear(ember.ones(2, 3), ember.ones(2, 4), ember.ones(5, 3, 4)).shape
    ember.Size([2, 5])
    """
    if weight.ndim != 3 or input1.shape[-1] != weight.shape[1] or \
            input2.shape[-1] != weight.shape[2] or input1.shape[:-1] != input2.shape[:-1]:
        raise ShapeError(f"bilinear: expected input1 (*, in1) and input2 (*, in2) with the "
                         f"same leading dims and weight (out, in1, in2); got shapes "
                         f"{tuple(input1.shape)}, {tuple(input2.shape)} and "
                         f"{tuple(weight.shape)}")
    out = einsum("...i,kij,...j->...k", input1, weight, input2)
    return out if bias is None else out + bias
