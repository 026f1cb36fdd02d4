"""Scans: cumsum and cumprod along a dim (half types accumulate in float32)."""
from __future__ import annotations

from .. import dtypes as dt
from . import elementwise as ew, logical as lg
from . import registry
from .reduce import _sum_dtype, _work_dtype, sum
from .registry import AbstractValue, apply, register
from .shape import wrap_dim

__all__ = ["cumsum", "cumprod"]


def _scan_forward(fn):
    """A cumulative op along ``dim``; ``reverse`` scans from the end (used by VJPs)."""
    def forward(xp, a, dim, reverse, dtype):
        x = a.reshape(1) if a.ndim == 0 else a
        if reverse:
            x = xp.flip(x, dim)
        out = fn(xp)(x, axis=dim, dtype=_work_dtype(a, dtype))
        if reverse:
            out = xp.ascontiguousarray(xp.flip(out, dim))
        target = dtype.np if dtype is not None else a.dtype
        return (out.astype(target) if out.dtype != target else out).reshape(a.shape)
    return forward


def _scan_infer(a, dim, reverse, dtype):
    return AbstractValue(a.shape, dtype or a.dtype)


def _scan(op, input, dim, reverse, dtype):
    return apply(op, input, dim=wrap_dim(dim, input.ndim, op.name), reverse=reverse,
                 dtype=dtype)


def _cumsum_vjp(n, g):
    return _scan(_CUMSUM, g, n.params["dim"], not n.params["reverse"], None)


def _cumprod_vjp(n, g):
    """sum over j >= i (in scan order) of g_j * prod(x_k, k <= j, k != i).

    Without zeros that is reverse_cumsum(g * out) / x. With zeros, elements before the
    first zero z of their slice still use it; z itself gets reverse_cumsum(g *
    cumprod(y)), y being x with 1 at z; later elements get x_z times their share of
    that, which is 0 in value but the right derivative in x_z (second order is exact
    up to two zeros a slice)."""
    x, = n.saved_inputs()
    if x.ndim == 0:
        return g
    d, rev = n.params["dim"], n.params["reverse"]

    def back(t):
        return _scan(_CUMSUM, t, d, not rev, None)

    out = n.output(0)
    zero = lg.eq(x, 0)
    if registry._trace is None and not zero.any():  # (traced: the general form, no branch)
        return back(g * out) / x
    seen = _scan(_CUMSUM, zero, d, rev, dt.int64)
    before = lg.eq(seen, 0)
    first, second = zero & lg.eq(seen, 1), zero & lg.eq(seen, 2)
    y = ew.where(first, 1.0, x)
    at_first = back(g * _scan(_CUMPROD, y, d, rev, None))
    at_second = back(g * _scan(_CUMPROD, ew.where(second, 1.0, y), d, rev, None))
    x_first = sum(ew.where(first, x, 0.0), d, keepdim=True)
    after = x_first * ew.where(second, at_second, at_first / ew.where(lg.eq(y, 0), 1.0, y))
    return ew.where(before, back(g * out) / ew.where(before, x, 1.0),
                    ew.where(first, at_first, after))


_CUMSUM = register("cumsum", _scan_forward(lambda xp: xp.cumsum), _cumsum_vjp,
                   saves_inputs=False, infer=_scan_infer)
_CUMPROD = register("cumprod", _scan_forward(lambda xp: xp.cumprod), _cumprod_vjp,
                    saves_outputs=True, infer=_scan_infer)


def cumsum(input, dim: int, *, dtype=None):
    """Cumulative sum along ``dim``. Integer and bool inputs give int64.

    >>> ember.tensor([1.0, 2.0, 3.0]).cumsum(0)
    tensor([1., 3., 6.])
    """
    return _scan(_CUMSUM, input, dim, False, _sum_dtype(input, dtype))


def cumprod(input, dim: int, *, dtype=None):
    """Cumulative product along ``dim``. Integer and bool inputs give int64; the
    gradient is exact when the input holds zeros.

    >>> ember.tensor([1.0, 2.0, 3.0]).cumprod(0)
    tensor([1., 2., 6.])
    """
    return _scan(_CUMPROD, input, dim, False, _sum_dtype(input, dtype))
