"""Selecting by flat or per-dim indices and finding non-zero entries: take,
take_along_dim, nonzero, argwhere. Exported from :mod:`ember.ops.selection` too,
whose argument checks they use.
"""
from __future__ import annotations

import numpy as np

from ..errors import EmberIndexError, ShapeError
from .elementwise import where
from .registry import apply, register
from .shape import contiguous, expand, reshape, wrap_dim
from .selection import (_INT64, _SCATTER_ADD, _check_index, _check_range, _lift, gather)


# take / take_along_dim ---------------------------------------------------------------------
def _take_forward(xp, a, index):
    if index.size:
        lo, hi = int(index.min()), int(index.max())
        if lo < -a.size or hi >= a.size:
            raise EmberIndexError(f"take: index {lo if lo < -a.size else hi} is out of range "
                                  f"for a tensor of {a.size} elements (shape {a.shape})")
    return xp.take(a.reshape(-1), index)


def _take_vjp(n, g):
    numel = n.inputs[0].numel()
    flat = reshape(n.saved_inputs()[1], (-1,))
    flat = where(flat < 0, flat + numel, flat)
    grad = apply(_SCATTER_ADD, g.new_zeros((numel,)), flat, reshape(g, (-1,)), dim=0)
    return reshape(grad, tuple(n.inputs[0].shape)), None


_TAKE = register("take", _take_forward, _take_vjp, saves_inputs=(1,))


def take(input, index):
    """The elements of ``input`` seen as 1-d at positions ``index`` (int64; negative
    positions count from the end); the result has index's shape.

    >>> ember.take(ember.tensor([[1, 2], [3, 4]]), ember.tensor([0, -1]))
    tensor([1, 4])
    """
    _check_index("take", index, _INT64)
    return apply(_TAKE, input, index)


def take_along_dim(input, indices, dim: int | None = None):
    """Values of ``input`` at ``indices`` along ``dim`` (int64; negative positions count
    from the end), broadcasting the other dims; with ``dim=None`` both are flattened first.
    ``input.take_along_dim(input.argsort(dim), dim)`` sorts along ``dim``.

    >>> ember.take_along_dim(ember.tensor([[3, 1], [5, 4]]), ember.tensor([[1], [0]]), 1)
    tensor([[1],
            [5]])
    """
    _check_index("take_along_dim", indices, _INT64, "indices")
    if dim is None:
        input, indices, d = reshape(input, (-1,)), reshape(indices, (-1,)), 0
    else:
        if input.ndim == 0:
            raise EmberIndexError(f"take_along_dim: dimension specified as {dim} but tensor "
                                  "has no dimensions")
        d = wrap_dim(dim, input.ndim, "take_along_dim")
        if indices.ndim != input.ndim:
            raise ShapeError(f"take_along_dim: input and indices should have the same number "
                             f"of dimensions, got shapes {tuple(input.shape)} and "
                             f"{tuple(indices.shape)}")
        try:
            shape = list(np.broadcast_shapes(
                tuple(1 if k == d else s for k, s in enumerate(input.shape)),
                tuple(1 if k == d else s for k, s in enumerate(indices.shape))))
        except ValueError:
            raise ShapeError(f"take_along_dim: shapes {tuple(input.shape)} and "
                             f"{tuple(indices.shape)} cannot be broadcast apart from "
                             f"dimension {d}") from None
        input = expand(input, tuple(shape[:d] + [input.shape[d]] + shape[d + 1:]))
        indices = expand(indices, tuple(shape[:d] + [indices.shape[d]] + shape[d + 1:]))
    size = input.shape[d]
    _check_range("take_along_dim", indices._data, size, d, negative=True)
    return gather(input, d, where(indices < 0, indices + size, indices))


# nonzero / argwhere -----------------------------------------------------------------------
_NONZERO = register("nonzero", lambda xp, a: xp.argwhere(a).astype(np.int64, copy=False),
                    dynamic_shape=True, saves_inputs=False)


def nonzero(input, *, as_tuple: bool = False):
    """The positions of the non-zero elements: an int64 tensor of shape
    ``(count, input.ndim)``, or with ``as_tuple=True`` one 1-d tensor per dim (a 0-d
    input counts as 1-d), usable as ``input[nonzero(input, as_tuple=True)]``.

    >>> ember.nonzero(ember.tensor([[1, 0], [0, 2]]))
    tensor([[0, 0],
            [1, 1]])
    """
    if not as_tuple:
        return apply(_NONZERO, input)
    rows = apply(_NONZERO, _lift(input))
    return tuple(contiguous(rows[:, k]) for k in range(rows.shape[1]))


def argwhere(input):
    """The positions of the non-zero elements, shape ``(count, input.ndim)``: the same as
    ``nonzero(input)``.

    >>> ember.argwhere(ember.tensor([0.0, 3.0, 5.0]))
    tensor([[1],
            [2]])
    """
    return apply(_NONZERO, input)


def unravel_index(indices, shape) -> tuple:
    """The per-dim indices of flat ``indices`` into a tensor of ``shape`` (row-major), one
    int64 tensor per dim. Like PyTorch, out-of-range indices wrap (floor division).

    >>> ember.unravel_index(ember.tensor([4, 1, 8]), (3, 3))
    (tensor([1, 0, 2]), tensor([1, 1, 2]))
    """
    from .elementwise import floor_divide, remainder
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(shape)
    if indices.dtype.is_floating_point or indices.dtype.name == "bool":
        raise EmberIndexError(f"unravel_index: expected an integer indices tensor, got "
                              f"{indices.dtype.name}")
    if any(not isinstance(s, (int, np.integer)) or s < 0 for s in shape):
        raise ShapeError(f"unravel_index: shape must be non-negative ints, got {shape}")
    rest, out = indices.to(_INT64[0]), []
    for size in reversed(shape):
        out.append(remainder(rest, size) if size else rest * 0)
        rest = floor_divide(rest, size) if size else rest
    return tuple(reversed(out))
