"""The scatter forms of the views: ``diagonal_scatter``, ``select_scatter`` and
``slice_scatter`` return a copy of ``input`` whose diagonal, slice or strided slice is
replaced by ``src``.

Each is the ``view_scatter`` primitive (what in-place writes into views use) with the
one view op as its chain, so the gradient of ``input`` is the output's gradient with that
region zeroed and the gradient of ``src`` is the region of it, with double backward and
``ember.jit`` for free.
"""
from __future__ import annotations

import numbers

from ..errors import EmberError, EmberIndexError, EmberTypeError, ShapeError
from ..tensor import Tensor
from .index import _INDEX_VIEW
from .inplace import _VIEW_SCATTER
from .movement import _DIAGONAL, _diag_dims
from .registry import AbstractValue, apply, infer
from .shape import wrap_dim

__all__ = ["diagonal_scatter", "select_scatter", "slice_scatter"]


def _scatter_into(op_name, input, src, view_op, params):
    if not isinstance(input, Tensor) or not isinstance(src, Tensor):
        raise EmberTypeError(f"{op_name}: expected input and src to be Tensors, got "
                             f"{type(input).__name__} and {type(src).__name__}")
    region = infer(view_op, AbstractValue(input.shape, input.dtype), **params)
    if tuple(src.shape) != tuple(region.shape):
        raise ShapeError(f"{op_name}: expected src to have a size equal to the slice of self. "
                         f"src size = {list(src.shape)}, slice size = {list(region.shape)}")
    if src.dtype is not input.dtype:
        src = src.to(input.dtype)
    return apply(_VIEW_SCATTER, input, src, chain=[(view_op, params)])


def diagonal_scatter(input, src, offset: int = 0, dim1: int = 0, dim2: int = 1):
    """A copy of ``input`` with the diagonal :func:`ember.diagonal` would return (same
    ``offset``, ``dim1``, ``dim2``) replaced by ``src``, which must have that
    diagonal's shape.

    >>> ember.diagonal_scatter(ember.zeros(2, 3), ember.ones(2), 1)
    tensor([[0., 1., 0.],
            [0., 0., 1.]])
    """
    d1, d2 = _diag_dims("diagonal_scatter", dim1, dim2, input.ndim)
    return _scatter_into("diagonal_scatter", input, src, _DIAGONAL,
                         dict(offset=int(offset), dim1=d1, dim2=d2))


def select_scatter(input, src, dim: int, index: int):
    """A copy of ``input`` with the slice at ``index`` along ``dim`` (what
    :func:`ember.select` returns) replaced by ``src``, which has that slice's shape.

    >>> ember.select_scatter(ember.zeros(2, 2), ember.ones(2), 0, 0)
    tensor([[1., 1.],
            [0., 0.]])
    """
    if input.ndim == 0:
        raise EmberIndexError("select_scatter: select() cannot be applied to a 0-dim tensor")
    d = wrap_dim(dim, input.ndim, "select_scatter")
    size = input.shape[d]
    if not isinstance(index, numbers.Integral) or not -size <= index < size:
        raise EmberIndexError(f"select_scatter: select(): index {index} out of range for "
                              f"tensor of size {list(input.shape)} at dimension {d}")
    index = int(index) % size
    return _scatter_into("select_scatter", input, src, _INDEX_VIEW,
                         dict(index=(slice(None),) * d + (index,)))


def slice_scatter(input, src, dim: int = 0, start: int | None = None,
                  end: int | None = None, step: int = 1):
    """A copy of ``input`` with ``input[..., start:end:step, ...]`` (the slice along
    ``dim``) replaced by ``src``, which has that slice's shape.

    >>> ember.slice_scatter(ember.zeros(4), ember.ones(2), start=0, step=2)
    tensor([1., 0., 1., 0.])
    """
    if input.ndim == 0:
        raise EmberIndexError("slice_scatter: slice() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, input.ndim, "slice_scatter")
    bounds = []
    for name, value in (("start", start), ("end", end), ("step", step)):
        if value is not None and (not isinstance(value, numbers.Integral) or
                                  isinstance(value, bool)):
            raise EmberTypeError(f"slice_scatter: {name} must be an int or None, got "
                                 f"{type(value).__name__}")
        bounds.append(None if value is None else int(value))
    if bounds[2] is None:
        bounds[2] = 1
    if bounds[2] <= 0:
        raise EmberError(f"slice_scatter: slice step must be positive, got {step}")
    return _scatter_into("slice_scatter", input, src, _INDEX_VIEW,
                         dict(index=(slice(None),) * d + (slice(*bounds),)))
