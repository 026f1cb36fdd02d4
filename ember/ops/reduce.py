"""Reductions over ``dim`` (an int, a tuple, or None for all) with ``keepdim``."""
from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError
from .registry import AbstractValue, apply, register
from .shape import expand, reshape, wrap_dims

__all__ = ["sum", "mean", "sum_to"]


def reduce_dims(input, dim, op: str) -> tuple:
    """``dim`` as a sorted tuple of non-negative dims (all dims when None)."""
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(input.ndim))
    return tuple(sorted(wrap_dims(dim, input.ndim, op)))


def reduced_shape(shape, dims, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def _reduce_infer(a, dims, keepdim, **params):
    dtype = params.get("dtype") or a.dtype
    return AbstractValue(reduced_shape(a.shape, dims, keepdim), dtype)


def grad_to_input_shape(g, input_shape, dims, keepdim):
    """Broadcast a reduction's output gradient back to the input's shape."""
    if not keepdim:
        g = reshape(g, reduced_shape(input_shape, dims, True))
    return expand(g, tuple(input_shape))


def _accumulate_dtype(a):
    # Half types accumulate in float32, as PyTorch's CPU kernels do.
    return np.float32 if a.dtype.itemsize == 2 and a.dtype.kind in "fV" else None


def _sum_forward(xp, a, dims, keepdim, dtype):
    acc = _accumulate_dtype(a)
    out = xp.sum(a, axis=dims, keepdims=keepdim, dtype=acc)
    target = dtype.np if dtype is not None else (a.dtype if acc is not None else None)
    return out.astype(target) if target is not None and out.dtype != target else out


_SUM = register("sum", _sum_forward,
                lambda n, g: grad_to_input_shape(g, n.inputs[0].shape, n.params["dims"],
                                                 n.params["keepdim"]),
                saves_inputs=False, infer=_reduce_infer)


def sum(input, dim=None, keepdim: bool = False, *, dtype=None):
    """Sum over ``dim`` (all dims when None). Integer and bool inputs sum to int64.

    >>> ember.tensor([[1.0, 2.0], [3.0, 4.0]]).sum(dim=0)
    tensor([4., 6.])
    """
    dims = reduce_dims(input, dim, "sum")
    if dtype is None and not input.dtype.is_floating_point:
        dtype = dt.int64
    return apply(_SUM, input, dims=dims, keepdim=keepdim,
                 dtype=None if dtype is None else dt.as_dtype(dtype))


def mean(input, dim=None, keepdim: bool = False, *, dtype=None):
    """Arithmetic mean over ``dim`` (floating inputs only, as in PyTorch)."""
    if dtype is not None:
        input = input.to(dtype)
    if not input.dtype.is_floating_point:
        raise EmberError(f"mean(): could not infer output dtype. Input dtype must be either a "
                         f"floating point or complex dtype. Got: {input.dtype.name}")
    dims = reduce_dims(input, dim, "mean")
    count = 1
    for d in dims:
        count *= input.shape[d]
    total = sum(input, dims, keepdim)
    return total / count if count else total * float("nan")


def sum_to(input, shape):
    """Sum ``input`` down to ``shape`` (the reverse of broadcasting ``shape`` up to it)."""
    shape = tuple(shape)
    have = tuple(input.shape)
    if have == shape:
        return input
    lead = len(have) - len(shape)
    dims = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape)
                                      if s == 1 and have[i + lead] != 1)
    out = sum(input, dims, keepdim=True) if dims else input
    return reshape(out, shape)
