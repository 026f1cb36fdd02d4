"""Turning op arguments into same-dtype tensors, by PyTorch's promotion rules.

Primitives see tensors of one dtype; the public functions promote first (with
:func:`promote`), so the promotion shows up in a traced graph as explicit casts.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes as dt
from ..errors import EmberTypeError
from ..tensor import Tensor
from . import registry

SAME = 0      # result dtype is the promoted dtype
FLOAT = 1     # integers and bools promote to the default float dtype
INTEGRAL = 2  # bitwise ops: bools and integers only


def scalar_tensor(value, dtype, device):
    """A 0-d tensor holding the Python number ``value`` as ``dtype``. (While ``ember.jit``
    traces, the trace notes it as a number: ``ember.compiler.rewrites`` may read it.)"""
    try:
        arr = np.asarray(value, dtype=dtype.np)
    except (OverflowError, ValueError):
        arr = np.asarray(value).astype(dtype.np)  # wraps around, as PyTorch does
    t = Tensor._make(device.backend.asarray(arr), device)
    if registry._trace is not None:
        registry._trace.numbers[id(t)] = t
    return t


def as_operand(name: str, value, device=None):
    """A Tensor, or a Python number left as is; anything else is a clear error."""
    if isinstance(value, (Tensor, numbers.Number, np.bool_)):
        return value
    if isinstance(value, np.ndarray):
        from .creation import as_tensor
        return as_tensor(value, device=device)
    raise EmberTypeError(f"{name}: expected a Tensor or a number, got {type(value).__name__}")


def promote(name: str, args, kind: int = SAME):
    """Cast ``args`` (tensors and numbers) to one dtype; returns (tensors, dtype)."""
    first = None
    same = True
    for a in args:
        if isinstance(a, Tensor):
            if first is None:
                first = a
            elif a._dtype is not first._dtype:
                same = False
        else:
            same = False
    if first is None:
        raise EmberTypeError(f"{name}: expected at least one Tensor argument")
    if same:
        dtype = first._dtype
    else:
        args = [as_operand(name, a, first._device) for a in args]
        dtype = dt.result_type(*args)
    if kind == FLOAT and not dtype.differentiable:
        dtype = dt.get_default_dtype()
        same = False
    elif kind == INTEGRAL and dtype.differentiable:
        raise EmberTypeError(f"{name}: expected integer or bool tensors, got dtype "
                             f"{dtype.name}")
    if same:
        return args, dtype
    from .elementwise import cast
    out = []
    for a in args:
        if isinstance(a, Tensor):
            out.append(a if a._dtype is dtype else cast(a, dtype))
        else:
            out.append(scalar_tensor(a, dtype, first._device))
    return out, dtype
