"""Elementwise math: unary and binary arithmetic, powers, exponentials, trigonometry.

Each op is a primitive over same-dtype inputs (the public function promotes first) with
a VJP written in ember ops, so it differentiates to any order.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..backends import CPU as _CPU
from ..errors import EmberError, EmberTypeError, describe
from ._promote import FLOAT, SAME, promote
from . import _xp
from .registry import AbstractValue, apply, register


def _isfinite(x):
    from .logical import isfinite
    return isfinite(x)

__all__ = ["cast", "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide",
           "floor_divide", "remainder", "fmod", "pow", "float_power", "neg", "negative", "abs",
           "absolute", "sign", "sgn", "exp", "exp2", "log", "log2", "log10", "log1p", "expm1",
           "sqrt", "rsqrt", "square", "reciprocal", "sin", "cos", "tan", "asin", "acos",
           "atan", "arcsin", "arccos", "arctan", "atan2", "arctan2", "hypot", "sinh", "cosh", "tanh",
           "sigmoid", "logit", "erf", "erfc", "floor", "ceil", "round", "trunc", "fix", "frac",
           "maximum", "minimum", "fmax", "fmin", "lerp", "clamp", "clip", "nan_to_num",
           "relu", "xlogy", "where"]


def _same_infer(*avals, **params):
    shape = np.broadcast_shapes(*(a.shape for a in avals))
    return AbstractValue(shape, avals[0].dtype)


def _defop(name, forward, vjp, **flags):
    flags.setdefault("infer", _same_infer)
    return register(name, forward, vjp, **flags)


def _unary(name, forward, vjp, kind=SAME, doc="", saves_outputs=False, float_vjp=True):
    """Register a one-input op and return its public function."""
    op = _defop(name, forward, vjp, saves_outputs=saves_outputs,
                saves_inputs=not saves_outputs)

    def fn(input):
        (x,), _ = promote(name, (input,), kind)
        return apply(op, x)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{doc}\n\n    >>> ember.{name}(ember.tensor([0.5, 1.0]))\n"
    return fn


def _binary(name, forward, vjp, kind=SAME, doc="", saves_inputs=True, bool_ok=True,
            any_bool_ok=True):
    """Register a broadcasting two-input op and return its public function."""
    op = _defop(name, forward, vjp, broadcasting=True,
                saves_inputs=saves_inputs)

    def fn(input, other):
        (a, b), dtype = promote(name, (input, other), kind)
        bool_tensors = dtype is dt.bool and hasattr(other, "dtype")
        if (bool_tensors and not bool_ok) or (not any_bool_ok and any(
                getattr(v, "dtype", None) is dt.bool or isinstance(v, bool)
                for v in (input, other))):
            raise EmberError(f"{name}: not supported for bool operands (got "
                             f"{describe((input, other))}); use logical_xor() or ~ instead")
        if dtype.itemsize == 2 and dtype.is_floating_point and \
                (_scalar_like(input, dtype) or _scalar_like(other, dtype)):
            # a half-precision tensor and a number: computed in float32 and rounded once,
            # as PyTorch's CPU kernels do (h * 70000 is 35008 for h = 0.5, not inf)
            (a, b), _ = promote(name, [_float32(v) for v in (input, other)], kind)
            return cast(apply(op, a, b), dtype)
        return apply(op, a, b)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{doc}\n\n    >>> ember.{name}(ember.tensor([1.0, 2.0]), 3.0)\n"
    return fn, op


def _scalar_like(v, dtype) -> bool:
    """A Python number, or a 0-d tensor of another dtype (ember.jit's learning rates):
    PyTorch's kernels read either as a float32 number, not rounded to ``dtype``."""
    return not hasattr(v, "dtype") or (v.ndim == 0 and v.dtype is not dtype)


def _float32(v):
    """A half-precision tensor widened to float32; anything else as it is."""
    return cast(v, dt.float32) if hasattr(v, "dtype") and v.dtype.itemsize == 2 else v


# dtype conversion ---------------------------------------------------------------------
_CAST = register("cast", lambda xp, a, dtype: a.astype(dtype.np),
                 lambda n, g: g, saves_inputs=False,
                 infer=lambda a, dtype: AbstractValue(a.shape, dtype))


def cast(input, dtype):
    """``input`` converted to ``dtype`` (a new tensor; differentiable between floats and
    complex dtypes). A complex tensor is never cast to a real dtype here: that would
    drop the imaginary parts (``Tensor.to`` does it, warning, as PyTorch does)."""
    dtype = dt.as_dtype(dtype)
    if input.dtype.is_complex and not dtype.is_complex:
        raise EmberTypeError(f"cast: converting a {input.dtype.name} tensor to {dtype.name} "
                             "would discard the imaginary parts; an op that takes real "
                             "numbers only was given complex ones. Take .real, .abs() or "
                             ".angle() first, or Tensor.to() (which warns)")
    return apply(_CAST, input, dtype=dtype)


# arithmetic ---------------------------------------------------------------------------
_add, _ADD = _binary("add", lambda xp, a, b: xp.add(a, b), lambda n, g: (g, g),
                     doc="input + other, broadcasting.", saves_inputs=False)
_sub, _SUB = _binary("sub", lambda xp, a, b: xp.subtract(a, b), lambda n, g: (g, -g),
                     doc="input - other, broadcasting.", saves_inputs=False,
                     any_bool_ok=False)


def _mul_vjp(n, g):
    a, b = n.saved_inputs()
    return (g * b if n.edges[0] else None), (g * a if n.edges[1] else None)


mul, _MUL = _binary("mul", lambda xp, a, b: xp.multiply(a, b), _mul_vjp,
                    doc="input * other, broadcasting.")


def _is_one(v) -> bool:
    """``v == 1`` for a number (a tensor scale, as ember.jit passes, is never skipped)."""
    return isinstance(v, (int, float)) and v == 1


def _check_alpha(name, input, other, alpha):
    """PyTorch refuses a float alpha when both operands are integral."""
    if isinstance(alpha, float) and not any(
            getattr(v, "dtype", None) is not None and v.dtype.is_floating_point
            or isinstance(v, float) for v in (input, other)):
        raise EmberError(f"{name}: for integral input tensors, argument alpha must not be a "
                         f"floating point number (got alpha={alpha}, "
                         f"{describe((input, other))})")


def add(input, other, *, alpha=1):
    """input + alpha * other, broadcasting and promoting dtypes.

    >>> ember.add(ember.tensor([1.0, 2.0]), ember.tensor([10.0, 20.0]), alpha=2)
    tensor([21., 42.])
    """
    if not _is_one(alpha):
        _check_alpha("add", input, other, alpha)
        other = mul(other, alpha) if hasattr(other, "dtype") else other * alpha
    return _add(input, other)


def sub(input, other, *, alpha=1):
    """input - alpha * other, broadcasting and promoting dtypes."""
    if not _is_one(alpha):
        _check_alpha("sub", input, other, alpha)
        other = mul(other, alpha) if hasattr(other, "dtype") else other * alpha
    return _sub(input, other)


subtract, multiply = sub, mul


def _div_vjp(n, g):
    a, b = n.saved_inputs()
    ga = g / b if n.edges[0] else None
    gb = -g * a / (b * b) if n.edges[1] else None
    return ga, gb


_true_div, _DIV = _binary("div", lambda xp, a, b: xp.true_divide(a, b), _div_vjp, kind=FLOAT)


def _zero_grads(n, g):
    return tuple(None if e is None else g * 0 for e in n.edges)


def _check_int_divisor(name, b):
    """Integer division by zero is an error in PyTorch (NumPy quietly gives 0)."""
    if b.dtype.kind in "iu" and not b.all():
        raise EmberError(f"{name}: ZeroDivisionError: integer division by zero "
                         f"(divisor dtype {b.dtype})")


def _floor_divide(xp, a, b):
    _check_int_divisor("floor_divide", b)
    return xp.floor_divide(a, b)


_floor_div, _ = _binary("floor_divide", _floor_divide, _zero_grads,
                        doc="floor(input / other), rounding towards minus infinity.")
_trunc_div, _ = _binary("trunc_divide",
                        lambda xp, a, b: _trunc_divide(xp, a, b), _zero_grads)


def _trunc_divide(xp, a, b):
    _check_int_divisor("div", b)
    if a.dtype.kind in "iub":
        q = xp.floor_divide(a, b)
        fix = (xp.remainder(a, b) != 0) & ((a < 0) != (b < 0))
        return q + fix.astype(q.dtype)
    return xp.trunc(xp.true_divide(a, b))


def div(input, other, *, rounding_mode: str | None = None):
    """input / other. ``rounding_mode`` None (true division, integers become float),
    ``"trunc"`` (towards zero) or ``"floor"`` (towards minus infinity).

    >>> ember.div(ember.tensor([-7, 7]), 2, rounding_mode="trunc")
    tensor([-3,  3])
    """
    if rounding_mode is None:
        return _true_div(input, other)
    if rounding_mode == "floor":
        return _floor_div(input, other)
    if rounding_mode == "trunc":
        return _trunc_div(input, other)
    from ..errors import EmberError
    raise EmberError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")


divide = true_divide = div


def floor_divide(input, other):
    """floor(input / other), as Python's ``//``."""
    return _floor_div(input, other)


def _remainder_vjp(n, g):
    a, b = n.saved_inputs()
    return g, (-g * floor_divide(a, b) if n.edges[1] else None)


def _remainder_forward(xp, a, b):
    _check_int_divisor("remainder", b)
    return xp.remainder(a, b)


remainder, _ = _binary("remainder", _remainder_forward, _remainder_vjp,
                       doc="Python's modulus: the result has the sign of ``other``.")


def _fmod_vjp(n, g):
    a, b = n.saved_inputs()
    return g, (-g * div(a, b, rounding_mode="trunc") if n.edges[1] else None)


def _fmod_forward(xp, a, b):
    _check_int_divisor("fmod", b)
    return xp.fmod(a, b)


fmod, _ = _binary("fmod", _fmod_forward, _fmod_vjp,
                  doc="C's fmod: the result has the sign of ``input``.")


def _pow_vjp(n, g):
    a, b = n.saved_inputs()
    ga = gb = None
    if n.edges[0]:
        ga = g * b * pow(a, b - 1)
        ga = where(b == 0, 0.0, ga)
    if n.edges[1]:
        gb = g * pow(a, b) * log(where(a == 0, 1.0, a))
        gb = where((a == 0) & (b >= 0), 0.0, gb)
    return ga, gb


def _pow_forward(xp, a, b):
    if a.dtype.kind in "iu" and (b < 0).any():
        # PyTorch's integer power with a negative exponent tensor: 1 ** e is 1,
        # (-1) ** e is +-1, anything else truncates to 0
        safe = xp.power(a, xp.where(b < 0, 0, b))
        odd = xp.remainder(b, 2) == 1
        neg = xp.where(a == 1, 1, xp.where(a == -1, xp.where(odd, -1, 1), 0))
        return xp.where(b < 0, neg, safe).astype(a.dtype, copy=False)
    return xp.power(a, b).astype(a.dtype, copy=False)


_pow, _POW = _binary("pow", _pow_forward, _pow_vjp,
                     doc="input ** exponent, broadcasting.", bool_ok=False)


def pow(input, exponent):
    """input ** exponent, broadcasting.

    >>> ember.pow(ember.tensor([1.0, 2.0]), 3.0)
    tensor([1., 8.])
    """
    if (isinstance(exponent, int) and not isinstance(exponent, bool) and exponent < 0
            and hasattr(input, "dtype") and not input.dtype.is_floating_point):
        raise EmberError(f"pow: integers to negative integer powers are not allowed (got "
                         f"{describe((input,))} ** {exponent})")
    return _pow(input, exponent)


def float_power(input, exponent):
    """input ** exponent computed in float64 (complex128 where either is complex)."""
    promote("float_power", (input, exponent))  # (checks the operands)
    wide = dt.complex128 if any(_is_complex(v) or isinstance(v, complex)
                                for v in (input, exponent)) else dt.float64
    a, b = (cast(v, wide) if hasattr(v, "dtype") else v for v in (input, exponent))
    return pow(a, b)  # each operand widened on its own, not first to a common half type


def _maxmin_vjp(pick_first):
    def vjp(n, g):
        a, b = n.saved_inputs()
        tie = (a == b)
        half = where(tie, g * 0.5, g)
        wins = (a > b) if pick_first else (a < b)
        ga = where(wins | tie, half, 0.0) if n.edges[0] else None
        gb = where(~wins | tie, where(tie, half, g), 0.0) if n.edges[1] else None
        return ga, gb
    return vjp


maximum, _ = _binary("maximum", lambda xp, a, b: xp.maximum(a, b), _maxmin_vjp(True),
                     doc="The larger of input and other, elementwise (NaN propagates).")
minimum, _ = _binary("minimum", lambda xp, a, b: xp.minimum(a, b), _maxmin_vjp(False),
                     doc="The smaller of input and other, elementwise (NaN propagates).")
fmax, _ = _binary("fmax", lambda xp, a, b: xp.fmax(a, b), _maxmin_vjp(True),
                  doc="The larger of input and other, ignoring NaN.")
fmin, _ = _binary("fmin", lambda xp, a, b: xp.fmin(a, b), _maxmin_vjp(False),
                  doc="The smaller of input and other, ignoring NaN.")


def _atan2_vjp(n, g):
    a, b = n.saved_inputs()
    d = a * a + b * b
    d = where(d == 0, 1, d)  # at the origin: 0 (not 0/0), as PyTorch gives
    return g * b / d, -g * a / d


atan2, _ = _binary("atan2", lambda xp, a, b: xp.arctan2(a, b), _atan2_vjp, kind=FLOAT,
                   doc="The angle of the point (other, input), in radians.")
arctan2 = atan2


def _hypot_vjp(n, g):
    a, b = n.saved_inputs()
    h = hypot(a, b)
    return g * a / h, g * b / h


hypot, _ = _binary("hypot", lambda xp, a, b: xp.hypot(a, b), _hypot_vjp, kind=FLOAT,
                   doc="sqrt(input² + other²), without overflow or underflow in the squares.")


def _xlogy_vjp(n, g):
    a, b = n.saved_inputs()
    # PyTorch's: log(other), except 0 where input == 0 and other <= 0
    ga = g * where((a == 0) & (b <= 0), 0.0, log(b)) if n.edges[0] else None
    gb = g * a / b if n.edges[1] else None
    return ga, gb


xlogy, _ = _binary("xlogy", lambda xp, a, b: xp.where(
                       xp.isnan(b), b, xp.where(a == 0, 0, a * xp.log(b))).astype(a.dtype),
                   _xlogy_vjp, kind=FLOAT, doc="input * log(other), 0 where input is 0.")


# unary --------------------------------------------------------------------------------
def _in(n):
    return n.saved_inputs()[0]


def _out(n):
    return n.output(0)


neg = _unary("neg", lambda xp, a: xp.negative(a), lambda n, g: -g, doc="-input.")
negative = neg
_real_abs = _unary("abs", lambda xp, a: xp.abs(a), lambda n, g: g * sign(_in(n)))


def _is_complex(value) -> bool:
    dtype = getattr(value, "dtype", None)
    return dtype is not None and getattr(dtype, "is_complex", False)


def abs(input):
    """|input| (for complex numbers their modulus, a real tensor).

    >>> ember.abs(ember.tensor([-1.5, 2.0]))
    tensor([1.5000, 2.0000])
    """
    if _is_complex(input):
        from .complex_support import complex_abs
        return complex_abs(input)
    return _real_abs(input)


absolute = abs
# sign(NaN) is 0 in PyTorch (NumPy gives NaN)
sign = _unary("sign", lambda xp, a: xp.where(a != a, 0, xp.sign(a)).astype(a.dtype)
              if a.dtype != bool else a.copy(),
              lambda n, g: g * 0, doc="-1, 0 or 1 by the sign of input.")


def sgn(input):
    """:func:`sign`, and for complex numbers ``z / |z|`` (0 where z is 0).

    >>> ember.sgn(ember.tensor([3 + 4j, 0j]))
    tensor([0.6000+0.8000j, 0.0000+0.0000j])
    """
    if _is_complex(input):
        mag = abs(input)
        safe = where(mag == 0, mul(mag, 0.0) + 1, mag)
        return div(input, cast(safe, input.dtype))
    return sign(input)
exp = _unary("exp", lambda xp, a: xp.exp(a), lambda n, g: g * _out(n), FLOAT, "e ** input.",
             saves_outputs=True)
exp2 = _unary("exp2", lambda xp, a: xp.exp2(a), lambda n, g: g * _out(n) * math.log(2.0),
              FLOAT, "2 ** input.", saves_outputs=True)
log = _unary("log", lambda xp, a: xp.log(a), lambda n, g: g / _in(n), FLOAT,
             "Natural logarithm.")
log2 = _unary("log2", lambda xp, a: xp.log2(a), lambda n, g: g / (_in(n) * math.log(2.0)),
              FLOAT, "Base-2 logarithm.")
log10 = _unary("log10", lambda xp, a: xp.log10(a), lambda n, g: g / (_in(n) * math.log(10.0)),
               FLOAT, "Base-10 logarithm.")
log1p = _unary("log1p", lambda xp, a: xp.log1p(a), lambda n, g: g / (_in(n) + 1), FLOAT,
               "log(1 + input), accurate for small input.")
expm1 = _unary("expm1", lambda xp, a: xp.expm1(a), lambda n, g: g * (_out(n) + 1), FLOAT,
               "exp(input) - 1, accurate for small input.", saves_outputs=True)
sqrt = _unary("sqrt", lambda xp, a: xp.sqrt(a), lambda n, g: g / (2 * _out(n)), FLOAT,
              "Square root.", saves_outputs=True)
rsqrt = _unary("rsqrt", lambda xp, a: xp.reciprocal(xp.sqrt(a)),
               lambda n, g: g * -0.5 * pow(_out(n), 3), FLOAT, "1 / sqrt(input).",
               saves_outputs=True)
square = _unary("square", lambda xp, a: xp.square(a) if a.dtype != bool else a.astype(np.int64),
                lambda n, g: g * 2 * _in(n), doc="input * input.")
reciprocal = _unary("reciprocal", lambda xp, a: xp.reciprocal(a),
                    lambda n, g: -g * square(_out(n)), FLOAT, "1 / input.", saves_outputs=True)
sin = _unary("sin", lambda xp, a: xp.sin(a), lambda n, g: g * cos(_in(n)), FLOAT, "Sine.")
cos = _unary("cos", lambda xp, a: xp.cos(a), lambda n, g: -g * sin(_in(n)), FLOAT, "Cosine.")
tan = _unary("tan", lambda xp, a: xp.tan(a), lambda n, g: g * (1 + square(_out(n))), FLOAT,
             "Tangent.", saves_outputs=True)
asin = _unary("asin", lambda xp, a: xp.arcsin(a),
              lambda n, g: g * rsqrt(1 - square(_in(n))), FLOAT, "Inverse sine.")
acos = _unary("acos", lambda xp, a: xp.arccos(a),
              lambda n, g: -g * rsqrt(1 - square(_in(n))), FLOAT, "Inverse cosine.")
atan = _unary("atan", lambda xp, a: xp.arctan(a), lambda n, g: g / (1 + square(_in(n))),
              FLOAT, "Inverse tangent.")
arcsin, arccos, arctan = asin, acos, atan
sinh = _unary("sinh", lambda xp, a: xp.sinh(a), lambda n, g: g * cosh(_in(n)), FLOAT,
              "Hyperbolic sine.")
cosh = _unary("cosh", lambda xp, a: xp.cosh(a), lambda n, g: g * sinh(_in(n)), FLOAT,
              "Hyperbolic cosine.")
tanh = _unary("tanh", lambda xp, a: xp.tanh(a), lambda n, g: g * (1 - square(_out(n))), FLOAT,
              "Hyperbolic tangent.", saves_outputs=True)


def _sigmoid_forward(xp, a):
    # 1 / (1 + exp(-a)), in place: exp overflows to inf for very negative a, giving 0
    e = xp.asarray(xp.negative(a))  # (0-d ufuncs return scalars)
    xp.exp(e, out=e)
    e += 1
    return xp.reciprocal(e, out=e)


def _sigmoid_vjp(n, g):
    s = _out(n)
    return g * s * (1 - s)


sigmoid = _unary("sigmoid", _sigmoid_forward, _sigmoid_vjp, FLOAT, "1 / (1 + exp(-input)).",
                 saves_outputs=True)
relu = _unary("relu", lambda xp, a: xp.maximum(a, 0).astype(a.dtype, copy=False),
              lambda n, g: g * (_out(n) > 0), doc="max(input, 0).", saves_outputs=True)


# erf's rational approximation x·P(x²)/Q(x²), good to float32 precision on [-4, 4]
# (erf is ±1 beyond); coefficients highest power first.
_ERF_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
          -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
          -1.60960333262415e-02)
_ERF_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
          -7.37332916720468e-03, -1.42647390514189e-02)


def _horner(x, coefficients):
    """The polynomial with ``coefficients`` (highest power first) at x, in place."""
    out = x * np.float32(coefficients[0])
    out += np.float32(coefficients[1])
    for k in coefficients[2:]:
        out *= x
        out += np.float32(k)
    return out


def erf_kernel(xp, a):
    """erf of an array: exact in float64, else the float32 approximation (float32 out)."""
    if a.dtype == np.float64:
        return _xp.erf(xp, a)
    c = xp.clip(a.astype(np.float32, copy=False), -4.0, 4.0)
    c2 = c * c
    p = _horner(c2, _ERF_P)
    p *= c
    p /= _horner(c2, _ERF_Q)
    return p


def _erf_forward(xp, a):
    return erf_kernel(xp, a).astype(a.dtype, copy=False)


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
erf = _unary("erf", _erf_forward,
             lambda n, g: g * _TWO_OVER_SQRT_PI * exp(-square(_in(n))), FLOAT,
             "The error function.")
erfc = _unary("erfc", _xp.erfc,
              lambda n, g: -g * _TWO_OVER_SQRT_PI * exp(-square(_in(n))), FLOAT,
              "1 - erf(input), accurate where erf is close to 1.")


def _logit_forward(xp, a, eps=None):
    if eps is not None:
        a = xp.clip(a, eps, 1 - eps).astype(a.dtype, copy=False)
    return xp.log(a / (1 - a)).astype(a.dtype, copy=False)


def _logit_vjp(n, g):
    x = _in(n)
    eps = n.params["eps"]
    grad = g / (x * (1 - x))
    if eps is not None:
        grad = where((x < eps) | (x > 1 - eps), 0.0, grad)
    return grad


_LOGIT = _defop("logit", _logit_forward, _logit_vjp)


def logit(input, eps: float | None = None):
    """log(p / (1 - p)); with ``eps``, p is first clamped to [eps, 1 - eps]."""
    (x,), _ = promote("logit", (input,), FLOAT)
    return apply(_LOGIT, x, eps=eps)


def _rounding(name, fn, doc):
    return _unary(name, lambda xp, a: a.copy() if a.dtype.kind in "iub" else fn(xp, a),
                  lambda n, g: g * 0, doc=doc)


floor = _rounding("floor", lambda xp, a: xp.floor(a), "Round down.")
ceil = _rounding("ceil", lambda xp, a: xp.ceil(a), "Round up.")
trunc = _rounding("trunc", lambda xp, a: xp.trunc(a), "Round towards zero.")
fix = trunc
_ROUND = _defop("round", lambda xp, a, decimals=0: a.copy() if a.dtype.kind in "iub"
                else xp.round(a, decimals), lambda n, g: g * 0, saves_inputs=False)


def round(input, *, decimals: int = 0):
    """Round half to even, to ``decimals`` decimal places."""
    return apply(_ROUND, input, decimals=decimals)


def frac(input):
    """input - trunc(input)."""
    return input - trunc(input)


def _nan_to_num_forward(xp, a, nan=0.0, posinf=None, neginf=None):
    if a.dtype.kind in "iub":
        return a.copy()
    if a.dtype.kind == "c":  # each part on its own, as PyTorch does
        out = xp.empty_like(a)
        out.real = _nan_to_num_forward(xp, a.real, nan, posinf, neginf)
        out.imag = _nan_to_num_forward(xp, a.imag, nan, posinf, neginf)
        return out
    big = float(finfo(a.dtype).max)
    out = xp.where(xp.isnan(a), nan, a)
    out = xp.where(out == np.inf, big if posinf is None else posinf, out)
    out = xp.where(out == -np.inf, -big if neginf is None else neginf, out)
    return out.astype(a.dtype, copy=False)


def finfo(np_dtype):
    """Limits of a floating NumPy dtype, bfloat16 included."""
    return dt._ml_dtypes.finfo(np_dtype) if dt._ml_dtypes is not None else np.finfo(np_dtype)


_NAN_TO_NUM = _defop("nan_to_num", _nan_to_num_forward,
                     lambda n, g: g * _isfinite(_in(n)))


def nan_to_num(input, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None):
    """Replace NaN, +inf and -inf by ``nan``, ``posinf`` and ``neginf`` (default: the
    dtype's largest and smallest finite values)."""
    return apply(_NAN_TO_NUM, input, nan=nan, posinf=posinf, neginf=neginf)


# three inputs ---------------------------------------------------------------------------
def _where_vjp(n, g):
    c = n.saved_inputs()[0]
    return None, where(c, g, 0.0), where(c, 0.0, g)


_WHERE = _defop("where", lambda xp, c, a, b: xp.where(c, a, b), _where_vjp,
                broadcasting=True, saves_inputs=(0,),
                infer=lambda c, a, b: AbstractValue(np.broadcast_shapes(c.shape, a.shape,
                                                                        b.shape), a.dtype))


def where(condition, input=None, other=None):
    """Elements of ``input`` where ``condition`` is true, else of ``other``.
    With only ``condition``, the same as ``nonzero(condition, as_tuple=True)``.

    >>> ember.where(ember.tensor([True, False]), ember.tensor([1.0, 2.0]), 0.0)
    tensor([1., 0.])
    """
    if input is None and other is None:
        from .selection import nonzero
        return nonzero(condition, as_tuple=True)
    from .logical import _as_bool
    if not hasattr(input, "dtype") and not hasattr(other, "dtype"):
        from ._promote import scalar_tensor
        dtype = dt.result_type(input, other)
        device = getattr(condition, "device", None) or _CPU
        input, other = scalar_tensor(input, dtype, device), scalar_tensor(other, dtype, device)
    (a, b), _ = promote("where", (input, other))
    return apply(_WHERE, _as_bool(condition, a), a, b)


def _lerp_vjp(n, g):
    s, e, w = n.saved_inputs()
    return g * (1 - w), g * w, g * (e - s)


def _lerp_forward(xp, s, e, w):
    # from the nearer end, as PyTorch does: exact at weight 0 and at weight 1
    return xp.where(xp.abs(w) < 0.5, s + w * (e - s), e - (e - s) * (1 - w))


_LERP = _defop("lerp", _lerp_forward, _lerp_vjp, broadcasting=True)


def lerp(input, end, weight):
    """input + weight * (end - input), computed from the nearer end (``end - (end -
    input) * (1 - weight)`` for |weight| >= 0.5) as PyTorch does.

    >>> ember.lerp(ember.tensor([0.0, 1.0]), ember.tensor([10.0, 3.0]), 0.5)
    tensor([5., 2.])
    """
    (s, e, w), _ = promote("lerp", (input, end, weight))
    return apply(_LERP, s, e, w)


def _clamp_vjp(n, g):
    x, lo, hi = n.saved_inputs()
    # min(max(x, lo), hi): where lo > hi the result is hi, whatever x is; where lo == hi
    # and x < lo, PyTorch passes the gradient to neither bound (nor to x), and so does this.
    # (0.0, not g * 0: a NaN incoming gradient gives 0 where the input is clamped.)
    return (where((x >= lo) & (x <= hi), g, 0.0), where((x < lo) & (lo < hi), g, 0.0),
            where((x > hi) | (lo > hi), g, 0.0))


_CLAMP = _defop("clamp", lambda xp, x, lo, hi: xp.minimum(xp.maximum(x, lo), hi), _clamp_vjp,
                broadcasting=True)


def clamp(input, min=None, max=None):
    """Limit input to [min, max]; ``min``/``max`` may be numbers or tensors.

    >>> ember.clamp(ember.tensor([-2.0, 0.5, 3.0]), min=0.0, max=1.0)
    tensor([0.0000, 0.5000, 1.0000])
    """
    if min is None and max is None:
        from ..errors import EmberError
        raise EmberError("clamp: at least one of 'min' or 'max' must not be None")
    given = [input] + [v for v in (min, max) if v is not None]
    tensors, dtype = promote("clamp", given)
    if dtype.is_complex:
        raise EmberTypeError(f"clamp is not supported for complex types (got {dtype.name})")
    x, bounds = tensors[0], iter(tensors[1:])
    from ._promote import scalar_tensor
    if dtype.is_floating_point:
        low, high = -np.inf, np.inf
    else:
        low, high = np.iinfo(dtype.np).min, np.iinfo(dtype.np).max
    lo = next(bounds) if min is not None else scalar_tensor(low, dtype, x.device)
    hi = next(bounds) if max is not None else scalar_tensor(high, dtype, x.device)
    return apply(_CLAMP, x, lo, hi)


clip = clamp
