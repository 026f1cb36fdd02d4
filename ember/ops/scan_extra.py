"""More scans along a dim: cummax, cummin, logcumsumexp, and diff.

cummax/cummin return ``(values, indices)``; ties and NaN follow PyTorch: the index
moves to a later element equal to the running extreme, and once a NaN is seen the
values stay NaN while each later NaN takes the index.
"""
from __future__ import annotations

import collections

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, EmberTypeError
from . import elementwise as ew, logical as lg
from .registry import AbstractValue, apply, register
from .selection import scatter_add
from .shape import cat, expand, narrow, wrap_dim

__all__ = ["cummax", "cummin", "logcumsumexp", "diff"]

cummax_result = collections.namedtuple("cummax", ["values", "indices"])
cummin_result = collections.namedtuple("cummin", ["values", "indices"])


def _cumextreme_forward(largest):
    def forward(xp, a, dim):
        if a.ndim == 0:
            return a.copy(), xp.zeros((), np.int64)
        work = a.astype(np.float32) if a.dtype.kind == "V" else a
        acc = xp.maximum if largest else xp.minimum
        values = acc.accumulate(work, axis=dim)
        hit = work == values
        if work.dtype.kind == "f":
            hit |= xp.isnan(work)
        shape = [1] * a.ndim
        shape[dim] = a.shape[dim]
        pos = xp.arange(a.shape[dim], dtype=np.int64).reshape(shape)
        idx = xp.maximum.accumulate(xp.where(hit, pos, 0), axis=dim)
        return values.astype(a.dtype, copy=False), idx
    return forward


def _cumextreme_vjp(n, g):
    """Each output's gradient goes to the element its index names."""
    g = g[0]
    if g is None:
        return None
    x = n.inputs[0]
    if x.ndim == 0:
        return g
    from .creation import zeros
    return scatter_add(zeros(tuple(x.shape), dtype=g.dtype, device=g.device),
                       n.params["dim"], n.output(1).detach(), g)


def _cumextreme_infer(a, dim):
    return AbstractValue(a.shape, a.dtype), AbstractValue(a.shape, dt.int64)


_CUMMAX = register("cummax", _cumextreme_forward(True), _cumextreme_vjp, n_outputs=2,
                   saves_inputs=False, saves_outputs=True, infer=_cumextreme_infer)
_CUMMIN = register("cummin", _cumextreme_forward(False), _cumextreme_vjp, n_outputs=2,
                   saves_inputs=False, saves_outputs=True, infer=_cumextreme_infer)


def cummax(input, dim: int):
    """``(values, indices)``: the running maximum along ``dim`` and the index of the
    element it came from (the last of equal ones).

    >>> ember.cummax(ember.tensor([1.0, 3.0, 2.0, 5.0]), 0)
    cummax(values=tensor([1., 3., 3., 5.]), indices=tensor([0, 1, 1, 3]))
    """
    return cummax_result(*apply(_CUMMAX, input, dim=wrap_dim(dim, input.ndim, "cummax")))


def cummin(input, dim: int):
    """``(values, indices)``: the running minimum along ``dim`` and the index of the
    element it came from (the last of equal ones).

    >>> ember.cummin(ember.tensor([3.0, 1.0, 2.0, 0.0]), 0)
    cummin(values=tensor([3., 1., 1., 0.]), indices=tensor([0, 1, 1, 3]))
    """
    return cummin_result(*apply(_CUMMIN, input, dim=wrap_dim(dim, input.ndim, "cummin")))


# logcumsumexp -------------------------------------------------------------------------
def _logcumsumexp_forward(xp, a, dim, reverse):
    x = a.reshape(1) if a.ndim == 0 else a
    work = x.astype(np.float32) if x.dtype.itemsize == 2 else x
    if reverse:
        work = xp.flip(work, dim)
    accumulate = getattr(xp.logaddexp, "accumulate", None)
    if accumulate is not None:  # pairwise log-add-exp: stable for any spread of values
        out = accumulate(work, axis=dim)
    else:  # shift by each slice's largest finite element
        big = xp.max(xp.where(xp.isfinite(work), work, -np.inf), axis=dim, keepdims=True)
        big = xp.where(xp.isfinite(big), big, 0)
        out = xp.log(xp.cumsum(xp.exp(work - big), axis=dim)) + big
    if reverse:
        out = xp.flip(out, dim)
    return xp.ascontiguousarray(out.astype(a.dtype, copy=False)).reshape(a.shape)


def _logcumsumexp_vjp(n, g):
    """d out_j / d x_i = exp(x_i - out_j) for j at or after i, summed in log space
    separately for the positive and negative parts of ``g`` (as PyTorch does), so large
    inputs neither overflow nor lose the small terms."""
    x, = n.saved_inputs()
    out = n.output(0)
    d, rev = n.params["dim"], n.params["reverse"]
    lowest = float(np.finfo(x.dtype.np if x.dtype.np.kind == "f" else np.float32).min)
    log_abs = ew.log(ew.abs(g))
    pos = ew.where(lg.gt(g, 0), log_abs, lowest)
    neg = ew.where(lg.lt(g, 0), log_abs, lowest)
    back = lambda t: apply(_LOGCUMSUMEXP, t - out, dim=d, reverse=not rev)  # noqa: E731
    return ew.exp(back(pos) + x) - ew.exp(back(neg) + x)


_LOGCUMSUMEXP = register("logcumsumexp", _logcumsumexp_forward, _logcumsumexp_vjp,
                         saves_outputs=True,
                         infer=lambda a, dim, reverse: AbstractValue(a.shape, a.dtype))


def logcumsumexp(input, dim: int):
    """``log(cumsum(exp(input), dim))``, computed without overflow.

    >>> ember.logcumsumexp(ember.tensor([0.0, 0.0, 0.0]), 0)
    tensor([0.0000, 0.6931, 1.0986])
    """
    if not input.dtype.is_floating_point:
        raise EmberTypeError(f"logcumsumexp: expected a floating point tensor, got dtype "
                             f"{input.dtype.name}")
    return apply(_LOGCUMSUMEXP, input, dim=wrap_dim(dim, input.ndim, "logcumsumexp"),
                 reverse=False)


# diff ---------------------------------------------------------------------------------
def _as_slab(name, value, input, d):
    """``prepend``/``append``: a tensor with ``input``'s dims (a number becomes a slab of
    size 1 along ``d``)."""
    from .creation import as_tensor
    from ..tensor import Tensor
    if not isinstance(value, Tensor):
        value = as_tensor(value, dtype=input.dtype, device=input.device)
    if value.ndim == 0:
        shape = tuple(1 if i == d else s for i, s in enumerate(input.shape))
        return expand(value, shape)
    if value.ndim != input.ndim:
        raise EmberError(f"diff: expected {name} to have the same number of dimensions as "
                         f"input ({input.ndim}), got {value.ndim}")
    return value


def diff(input, n: int = 1, dim: int = -1, prepend=None, append=None):
    """The ``n``-th forward difference along ``dim``: ``out[i] = input[i + 1] - input[i]``,
    applied ``n`` times, after joining ``prepend`` and ``append`` along ``dim``. Bool
    inputs give ``input[i + 1] != input[i]``.

    >>> ember.diff(ember.tensor([1, 4, 9, 16]))
    tensor([3, 5, 7])
    """
    if input.ndim == 0:
        raise EmberError("diff: expected at least a 1-dimensional tensor, got a 0-d one")
    d = wrap_dim(dim, input.ndim, "diff")
    if prepend is not None or append is not None:
        parts = ([_as_slab("prepend", prepend, input, d)] if prepend is not None else []) + \
            [input] + ([_as_slab("append", append, input, d)] if append is not None else [])
        input = cat(parts, d)
    for _ in range(n):
        size = input.shape[d]
        if size == 0:
            break
        later, earlier = narrow(input, d, 1, size - 1), narrow(input, d, 0, size - 1)
        input = lg.logical_xor(later, earlier) if input.dtype is dt.bool else \
            ew.sub(later, earlier)
    return input
