"""Selecting and filling by a boolean mask: masked_fill, masked_select, masked_scatter
and the in-place ``masked_fill_`` and ``masked_scatter_`` (attached to Tensor here).
Exported from :mod:`ember.ops.selection` too, whose argument checks they use.
"""
from __future__ import annotations

import numpy as np

from ..errors import EmberError, ShapeError
from ..tensor import Tensor
from ._promote import scalar_tensor
from .elementwise import where
from .inplace import inplace
from .reduce import sum as _sum
from .registry import AbstractValue, apply, register
from .shape import cat, reshape
from .selection import _check_mask, _check_same_dtype, _fill_value, _xp


# masked ops ----------------------------------------------------------------------------
def _masked_select_forward(xp, a, mask):
    shape = np.broadcast_shapes(a.shape, mask.shape)
    return xp.broadcast_to(a, shape)[xp.broadcast_to(mask, shape)]


def _masked_select_vjp(n, g):
    a, mask = n.inputs[0], n.saved_inputs()[1]
    shape = np.broadcast_shapes(tuple(a.shape), tuple(mask.shape))
    return apply(_MASKED_SCATTER, g.new_zeros(shape), mask, g), None


def _masked_scatter_forward(xp, a, mask, source):
    shape = np.broadcast_shapes(a.shape, mask.shape)
    out = xp.broadcast_to(a, shape).copy()
    where_ = xp.broadcast_to(mask, shape)
    count = int(where_.sum())
    if count > source.size:
        raise EmberError(f"masked_scatter: source has {source.size} elements, fewer than the "
                         f"{count} True values of mask (shape {tuple(mask.shape)})")
    out[where_] = source.reshape(-1)[:count]
    return out


def _masked_scatter_vjp(n, g):
    mask = n.saved_inputs()[1]
    ga = gs = None
    if n.edges[0]:
        ga = where(mask, 0.0, g)
    if n.edges[2]:
        source = n.inputs[2]
        taken = apply(_MASKED_SELECT, g, mask)
        unused = source.numel() - taken.numel()  # source elements past the last True
        if unused:
            taken = cat([taken, g.new_zeros((unused,))])
        gs = reshape(taken, tuple(source.shape))
    return ga, None, gs


_MASKED_SELECT = register("masked_select", _masked_select_forward, _masked_select_vjp,
                          broadcasting=True, dynamic_shape=True, saves_inputs=(1,))
_MASKED_SCATTER = register("masked_scatter", _masked_scatter_forward, _masked_scatter_vjp,
                           broadcasting=True, saves_inputs=(1,))


def _masked_fill_forward(xp, a, mask, value):
    out = xp.array(xp.broadcast_to(a, xp.broadcast_shapes(a.shape, mask.shape)))
    xp.copyto(out, value, where=mask)
    return out


def _masked_fill_vjp(n, g):
    mask = n.saved_inputs()[1]
    ga = gv = None
    if n.edges[0] is not None:
        ga = apply(_MASKED_FILL, g, mask, scalar_tensor(0, g.dtype, g.device))
    if n.edges[2] is not None:
        gv = _sum(where(mask, g, 0.0))
    return ga, None, gv


def _masked_fill_ops(a, mask, value):
    """masked_fill as ``where``, which the fuser (and so eager mode's compiled kernels,
    :mod:`ember.compiler.eager`) runs as one loop instead of NumPy's copy and fill."""
    return where(mask, value, a)


_MASKED_FILL = register(
    "masked_fill", _masked_fill_forward, _masked_fill_vjp, broadcasting=True,
    saves_inputs=(1,), decompose=_masked_fill_ops,
    infer=lambda a, mask, value: AbstractValue(np.broadcast_shapes(a.shape, mask.shape),
                                               a.dtype))


def masked_fill(input, mask, value):
    """``input`` with ``value`` (a number or 0-d tensor) where the bool ``mask`` is True;
    ``mask`` broadcasts with ``input``. The result has input's dtype.

    >>> ember.zeros(3).masked_fill(ember.tensor([True, False, True]), 2.0)
    tensor([2., 0., 2.])
    """
    _check_mask("masked_fill", mask)
    return apply(_MASKED_FILL, input, mask, _fill_value("masked_fill", value, input))


def masked_select(input, mask):
    """The elements of ``input`` where the bool ``mask`` is True, as a 1-d tensor
    (``input`` and ``mask`` broadcast together).

    >>> ember.masked_select(ember.tensor([1, 2, 3]), ember.tensor([True, False, True]))
    tensor([1, 3])
    """
    _check_mask("masked_select", mask)
    return apply(_MASKED_SELECT, input, mask)


def masked_scatter(input, mask, source):
    """``input`` with the positions where the bool ``mask`` is True filled, in order, by
    the first elements of ``source`` (which needs at least as many elements as there are
    True values; ``mask`` broadcasts with ``input``).

    >>> ember.zeros(4).masked_scatter(ember.tensor([True, False, True, False]),
    ...                               ember.tensor([5.0, 6.0, 7.0]))
    tensor([5., 0., 6., 0.])
    """
    _check_mask("masked_scatter", mask)
    _check_same_dtype("masked_scatter", input, source, "source")
    return apply(_MASKED_SCATTER, input, mask, source)


def masked_fill_(self, mask, value):
    """In-place version of :func:`masked_fill` (``mask`` must broadcast to self's shape)."""
    _check_mask("masked_fill_", mask)
    v = _fill_value("masked_fill_", value, self)

    def direct(arr):
        _check_broadcasts_to("masked_fill_", mask.shape, arr.shape)
        _xp(self).copyto(arr, v._data, where=mask._data)
    return inplace("masked_fill_", self, lambda x: masked_fill(x, mask, v), (v,), direct)


def masked_scatter_(self, mask, source):
    """In-place version of :func:`masked_scatter` (``mask`` must broadcast to self's shape)."""
    _check_broadcasts_to("masked_scatter_", mask.shape, self.shape)
    return inplace("masked_scatter_", self, lambda x: masked_scatter(x, mask, source),
                   (source,))


def _check_broadcasts_to(op, shape, target):
    try:
        ok = np.broadcast_shapes(tuple(shape), tuple(target)) == tuple(target)
    except ValueError:
        ok = False
    if not ok:
        raise ShapeError(f"{op}: mask of shape {tuple(shape)} does not broadcast to the "
                         f"tensor's shape {tuple(target)}")


for _fn in (masked_fill_, masked_scatter_):
    setattr(Tensor, _fn.__name__, _fn)
