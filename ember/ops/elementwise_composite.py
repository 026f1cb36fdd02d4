"""Elementwise ops written as compositions of the primitives (their gradients follow)."""
from __future__ import annotations

import math

from . import elementwise as ew, logical as lg
from ._promote import FLOAT, promote

__all__ = ["addcmul", "addcdiv", "clamp_min", "clamp_max", "logaddexp",
           "logaddexp2", "deg2rad", "rad2deg", "copysign", "heaviside", "sinc", "asinh",
           "acosh", "atanh", "arcsinh", "arccosh", "arctanh", "positive", "rsub"]


def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2.

    >>> ember.addcmul(ember.zeros(2), ember.tensor([1.0, 2.0]), ember.tensor([3.0, 4.0]), value=0.5)
    tensor([1.5000, 4.0000])
    """
    product = ew.mul(tensor1, tensor2)
    return ew.add(input, product if ew._is_one(value) else ew.mul(product, value))


def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2."""
    quotient = ew.div(tensor1, tensor2)
    return ew.add(input, quotient if ew._is_one(value) else ew.mul(quotient, value))


def clamp_min(input, min):
    """max(input, min) with clamp's gradient (passed through at the boundary)."""
    return ew.clamp(input, min=min)


def clamp_max(input, max):
    """min(input, max) with clamp's gradient (passed through at the boundary)."""
    return ew.clamp(input, max=max)


def logaddexp(input, other):
    """log(exp(input) + exp(other)), without overflow."""
    (a, b), _ = promote("logaddexp", (input, other), FLOAT)
    high = ew.maximum(a, b)
    return high + ew.log1p(ew.exp(-ew.abs(_gap(a, b))))


def logaddexp2(input, other):
    """log2(2**input + 2**other), without overflow."""
    (a, b), _ = promote("logaddexp2", (input, other), FLOAT)
    high = ew.maximum(a, b)
    return high + ew.log1p(ew.exp2(-ew.abs(_gap(a, b)))) / math.log(2.0)


def _gap(a, b):
    """a - b, and 0 where a == b: equal infinities give log(2) more, not NaN."""
    return ew.where(a == b, 0.0, a - b)


def deg2rad(input):
    """Degrees to radians."""
    (x,), _ = promote("deg2rad", (input,), FLOAT)
    return x * (math.pi / 180.0)


def rad2deg(input):
    """Radians to degrees."""
    (x,), _ = promote("rad2deg", (input,), FLOAT)
    return x * (180.0 / math.pi)


def copysign(input, other):
    """|input| with the sign of ``other`` (the sign bit, so -0.0 counts as negative)."""
    (a, b), _ = promote("copysign", (input, other), FLOAT)
    return ew.where(lg.signbit(b), -ew.abs(a), ew.abs(a))


def heaviside(input, values):
    """0 where input < 0, 1 where input > 0, ``values`` where input == 0."""
    (x, v), _ = promote("heaviside", (input, values))
    return ew.where(x == 0, v, ew.where(x > 0, 1, 0).to(x.dtype))


def sinc(input):
    """sin(pi x) / (pi x), and 1 at 0."""
    (x,), _ = promote("sinc", (input,), FLOAT)
    zero = x == 0
    safe = ew.where(zero, 1.0, x) * math.pi
    return ew.where(zero, 1.0, ew.sin(safe) / safe)


def asinh(input):
    """Inverse hyperbolic sine."""
    (x,), _ = promote("asinh", (input,), FLOAT)
    # odd symmetry keeps the negative side accurate; log1p keeps small x accurate, and
    # log(2|x|) takes over where |x|² would overflow
    ax = ew.where(lg.signbit(x), -x, x)  # (|x| with gradient ±1 at ±0; abs has 0)
    big = ax > 1e8
    small = ew.where(big, 0.0, ax)
    ax2 = ew.square(small)
    near = ew.log1p(small + ax2 / (1 + ew.sqrt(ax2 + 1)))
    far = ew.log(ew.where(big, ax, 1.0)) + math.log(2.0)
    # (the sign put back by a select, not a product with sign(x): that has no gradient
    # at 0, where asinh's is 1)
    value = ew.where(big, far, near)
    return ew.where(lg.signbit(x), -value, value)


def acosh(input):
    """Inverse hyperbolic cosine (NaN below 1)."""
    (x,), _ = promote("acosh", (input,), FLOAT)
    # log1p of (x - 1) + sqrt((x - 1)(x + 1)) keeps x near 1 accurate; log(2x) takes over
    # where x² would overflow (acosh(1e308) is 709.9, not inf)
    big = x > 1e8
    near_x = ew.where(big, 1.0, x)
    t = near_x - 1
    near = ew.log1p(t + ew.sqrt(t * (near_x + 1)))
    far = ew.log(ew.where(big, x, 1.0)) + math.log(2.0)
    return ew.where(big, far, near)


def atanh(input):
    """Inverse hyperbolic tangent."""
    (x,), _ = promote("atanh", (input,), FLOAT)
    return 0.5 * (ew.log1p(x) - ew.log1p(-x))


arcsinh, arccosh, arctanh = asinh, acosh, atanh


def positive(input):
    """input itself (PyTorch's unary plus)."""
    return input


def rsub(input, other, *, alpha=1):
    """other - alpha * input (subtraction with the operands swapped).

    >>> ember.rsub(ember.tensor([1.0, 2.0]), 5, alpha=2)
    tensor([3., 1.])
    """
    return ew.sub(other, input if ew._is_one(alpha) else ew.mul(input, alpha))
