"""Fast no-grad paths for the common in-place methods (what optimizers call).

Outside autograd, ``p.mul_(0.9).add_(g, alpha=0.1)`` should cost what NumPy's
``np.multiply(p, 0.9, out=p)`` costs, not a new array and a copy back. Each maker here
returns a ``direct(array)`` writer for :func:`ember.ops.inplace.inplace`, or None when
its arguments need the general path (which then gives the same result, or the error).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError
from ..tensor import Tensor

SAME, FLOAT = 0, 1


def _operand(target, value):
    """The array or number to hand to the ufunc, or None to use the general path."""
    if isinstance(value, Tensor):
        return value._data if value._device is target._device else None
    if not isinstance(value, (int, float, bool)):
        return None
    dtype = target._dtype
    if dtype is dt.float16:
        return None  # float16 computes with a number in float32 (the general path)
    if isinstance(value, int) and not isinstance(value, bool) and dtype._category == dt._INT:
        info = np.iinfo(dtype.np)
        if not info.min <= value <= info.max:
            return None  # out of the type's range: it wraps around (the general path)
    return value


def _check_dtype(name, target, values, kind):
    """PyTorch's rule: an in-place result may not be of a higher category than the
    tensor it is written into (no float into an integer tensor)."""
    result = dt.result_type(target, *values)
    if kind == FLOAT and not result.is_floating_point:
        result = dt.get_default_dtype()
    if result._category > target._dtype._category:
        raise EmberError(f"{name}: result type {result.name} can't be cast to the desired "
                         f"output type {target._dtype.name}")


def _run(name, target, write):
    def direct(arr):
        backend = target._device.backend
        try:
            with backend.activate():  # (one of several GPUs: the target's)
                write(backend.xp, arr)
        except ValueError as exc:
            raise EmberError(f"{name}: output with shape {list(target.shape)} doesn't match "
                             f"the broadcast shape of its operands ({exc})") from None
    return direct


def _usable(target) -> bool:
    # bfloat16 (ml_dtypes) ufuncs do not all take out=; the general path handles it
    return target._dtype is not dt.bfloat16


def _binary(ufunc, kind, with_alpha=False):
    def make(name, target, other, alpha=1, **extra):
        if extra or not _usable(target):
            return None
        o = _operand(target, other)
        if o is None or (with_alpha and not isinstance(alpha, (int, float))):
            return None
        _check_dtype(name, target, (other,) if alpha == 1 else (other, alpha), kind)

        def write(xp, arr):
            operand = o if alpha == 1 else xp.multiply(o, alpha)
            getattr(xp, ufunc)(arr, operand, out=arr, casting="unsafe")
        return _run(name, target, write)
    return make


def _unary(ufunc, kind):
    def make(name, target):
        if not _usable(target) or (kind == FLOAT and not target._dtype.is_floating_point):
            return None

        def write(xp, arr):
            getattr(xp, ufunc)(arr, out=arr)
        return _run(name, target, write)
    return make


def _addc(ufunc):
    def make(name, target, tensor1, tensor2, *, value=1):
        a, b = _operand(target, tensor1), _operand(target, tensor2)
        if a is None or b is None or not _usable(target) or \
                not isinstance(value, (int, float)):
            return None
        _check_dtype(name, target, (tensor1, tensor2, value),
                     FLOAT if ufunc == "true_divide" else SAME)

        def write(xp, arr):
            term = xp.asarray(getattr(xp, ufunc)(a, b))  # 0-d ufuncs give scalars
            if value != 1:
                xp.multiply(term, value, out=term, casting="unsafe")
            xp.add(arr, term, out=arr, casting="unsafe")
        return _run(name, target, write)
    return make


def _lerp(name, target, end, weight):
    e, w = _operand(target, end), _operand(target, weight)
    if e is None or w is None or not _usable(target) or not target._dtype.is_floating_point:
        return None
    if not isinstance(w, (int, float)):
        return None  # a tensor of weights: the general path picks the nearer end per element
    _check_dtype(name, target, (end, weight), SAME)
    near_start = abs(w) < 0.5  # (computed from the nearer end, as the lerp op)

    def write(xp, arr):
        step = xp.asarray(xp.subtract(e, arr))
        if near_start:
            xp.multiply(step, w, out=step, casting="unsafe")
            xp.add(arr, step, out=arr, casting="unsafe")
        else:
            xp.multiply(step, 1 - w, out=step, casting="unsafe")
            xp.subtract(e, step, out=arr, casting="unsafe")
    return _run(name, target, write)


def _clamp(name, target, min=None, max=None):
    lo, hi = (None if v is None else _operand(target, v) for v in (min, max))
    if (min is not None and lo is None) or (max is not None and hi is None) or \
            (min is None and max is None) or not _usable(target):
        return None
    _check_dtype(name, target, tuple(v for v in (min, max) if v is not None), SAME)

    def write(xp, arr):
        if lo is not None:
            xp.maximum(arr, lo, out=arr, casting="unsafe")
        if hi is not None:
            xp.minimum(arr, hi, out=arr, casting="unsafe")
    return _run(name, target, write)


MAKERS = {
    "add_": _binary("add", SAME, True), "sub_": _binary("subtract", SAME, True),
    "mul_": _binary("multiply", SAME), "div_": _binary("true_divide", FLOAT),
    "__iadd__": _binary("add", SAME), "__isub__": _binary("subtract", SAME),
    "__imul__": _binary("multiply", SAME), "__itruediv__": _binary("true_divide", FLOAT),
    "addcmul_": _addc("multiply"), "addcdiv_": _addc("true_divide"), "lerp_": _lerp,
    "clamp_": _clamp, "sqrt_": _unary("sqrt", FLOAT), "exp_": _unary("exp", FLOAT),
    "neg_": _unary("negative", SAME),
}


def direct_writer(name, target, args, kwargs):
    """A ``direct(array)`` for ``target.<name>(*args, **kwargs)``, or None."""
    make = MAKERS.get(name)
    if make is None:
        return None
    try:
        return make(name, target, *args, **kwargs)
    except TypeError:  # an argument form the fast path does not take
        return None

