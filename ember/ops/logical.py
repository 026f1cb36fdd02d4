"""Comparisons, logical and bitwise ops, and NaN/inf tests. None is differentiable."""
from __future__ import annotations

from .. import dtypes as dt
from ._promote import INTEGRAL, SAME, promote
from .registry import AbstractValue, apply, register

__all__ = ["eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less",
           "less_equal", "not_equal", "equal", "allclose", "isclose", "logical_and",
           "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or",
           "bitwise_xor", "bitwise_not", "isnan", "isinf", "isfinite", "isposinf",
           "isneginf", "isreal", "signbit"]


def _bool_infer(*avals, **params):
    import numpy as np
    return AbstractValue(np.broadcast_shapes(*(a.shape for a in avals)), dt.bool)


def _predicate(name, forward, n_inputs, kind=SAME, doc=""):
    op = register(name, forward, None, infer=_bool_infer, broadcasting=True)

    def fn(*args):
        if len(args) != n_inputs:
            raise TypeError(f"{name}() takes {n_inputs} arguments ({len(args)} given)")
        tensors, _ = promote(name, args, kind)
        return apply(op, *tensors)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


eq = _predicate("eq", lambda xp, a, b: xp.equal(a, b), 2, doc="input == other, elementwise.")
ne = _predicate("ne", lambda xp, a, b: xp.not_equal(a, b), 2, doc="input != other, elementwise.")
lt = _predicate("lt", lambda xp, a, b: xp.less(a, b), 2, doc="input < other, elementwise.")
le = _predicate("le", lambda xp, a, b: xp.less_equal(a, b), 2, doc="input <= other, elementwise.")
gt = _predicate("gt", lambda xp, a, b: xp.greater(a, b), 2, doc="input > other, elementwise.")
ge = _predicate("ge", lambda xp, a, b: xp.greater_equal(a, b), 2,
                doc="input >= other, elementwise.")
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne

logical_and = _predicate("logical_and", lambda xp, a, b: xp.logical_and(a, b), 2,
                         doc="Elementwise AND of the truth values.")
logical_or = _predicate("logical_or", lambda xp, a, b: xp.logical_or(a, b), 2,
                        doc="Elementwise OR of the truth values.")
logical_xor = _predicate("logical_xor", lambda xp, a, b: xp.logical_xor(a, b), 2,
                         doc="Elementwise XOR of the truth values.")
logical_not = _predicate("logical_not", lambda xp, a: xp.logical_not(a), 1,
                         doc="Elementwise NOT of the truth values.")
isnan = _predicate("isnan", lambda xp, a: xp.isnan(a), 1, doc="True where input is NaN.")
isinf = _predicate("isinf", lambda xp, a: xp.isinf(a), 1, doc="True where input is ±inf.")
isfinite = _predicate("isfinite", lambda xp, a: xp.isfinite(a), 1,
                      doc="True where input is neither NaN nor ±inf.")
isposinf = _predicate("isposinf", lambda xp, a: xp.isposinf(a), 1, doc="True where input is +inf.")
isneginf = _predicate("isneginf", lambda xp, a: xp.isneginf(a), 1, doc="True where input is -inf.")
signbit = _predicate("signbit", lambda xp, a: xp.signbit(a), 1,
                     doc="True where the sign bit is set (including -0.0).")


def isreal(input):
    """Where each element is real: its imaginary part is 0 (everywhere for a real tensor).

    >>> ember.isreal(ember.tensor([1 + 0j, 2j]))
    tensor([ True, False])
    """
    if input.dtype.is_complex:
        from .complex_support import imag
        return imag(input) == 0
    from .creation import ones_like
    return ones_like(input, dtype=dt.bool)


def _bitwise(name, forward, n_inputs, doc):
    op = register(name, forward, None, broadcasting=True,
                  infer=lambda *avals: AbstractValue(
                      __import__("numpy").broadcast_shapes(*(a.shape for a in avals)),
                      avals[0].dtype))

    def fn(*args):
        tensors, _ = promote(name, args, INTEGRAL)
        return apply(op, *tensors)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


bitwise_and = _bitwise("bitwise_and", lambda xp, a, b: xp.bitwise_and(a, b), 2,
                       "Bitwise AND of integer or bool tensors.")
bitwise_or = _bitwise("bitwise_or", lambda xp, a, b: xp.bitwise_or(a, b), 2,
                      "Bitwise OR of integer or bool tensors.")
bitwise_xor = _bitwise("bitwise_xor", lambda xp, a, b: xp.bitwise_xor(a, b), 2,
                       "Bitwise XOR of integer or bool tensors.")
bitwise_not = _bitwise("bitwise_not", lambda xp, a: xp.invert(a), 1,
                       "Bitwise NOT (logical NOT for bool tensors).")


def isclose(input, other, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False):
    """|input - other| <= atol + rtol * |other|, elementwise."""
    from .elementwise import abs as _abs
    close = le(_abs(input - other), atol + rtol * _abs(other))
    close = logical_or(close, eq(input, other))
    if equal_nan:
        close = logical_or(close, logical_and(isnan(input), isnan(other)))
    return close


def allclose(input, other, rtol: float = 1e-5, atol: float = 1e-8,
             equal_nan: bool = False) -> bool:
    """True when every element is :func:`isclose`."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


def equal(input, other) -> bool:
    """True when both tensors have the same shape and elements."""
    return tuple(input.shape) == tuple(other.shape) and bool(eq(input, other).all())


def _as_bool(condition, like):
    """``condition`` as a bool tensor on ``like``'s device."""
    from ..tensor import Tensor
    from .elementwise import cast
    if not isinstance(condition, Tensor):
        from .creation import as_tensor
        condition = as_tensor(condition, device=like.device)
    return condition if condition.dtype is dt.bool else cast(condition, dt.bool)
