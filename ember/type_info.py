"""``ember.finfo`` and ``ember.iinfo``: the numerical limits of a floating or integer dtype,
with the attributes and values of ``torch.finfo`` and ``torch.iinfo``.

>>> ember.finfo(ember.float16).max
65504.0
>>> ember.iinfo(ember.uint8).max
255
"""
from __future__ import annotations

import math

import numpy as np

from . import dtypes as dt
from .errors import EmberTypeError

__all__ = ["finfo", "iinfo"]


def _as_dtype_arg(op: str, obj) -> dt.DType:
    if not isinstance(obj, dt.DType):
        raise EmberTypeError(f"{op}(): argument 'type' (position 1) must be ember.dtype, "
                             f"not {type(obj).__name__}")
    return obj


class finfo:
    """The limits of a floating dtype (``ember.float16``, ``bfloat16``, ``float32``,
    ``float64``), as ``torch.finfo``.

    Args:
        type: a floating ``ember.dtype``; the default dtype
            (:func:`ember.get_default_dtype`) when omitted.

    Attributes:
        bits (int): the bits an element takes.
        eps (float): the gap between 1.0 and the next larger representable number.
        max (float), min (float): the largest and smallest (most negative) finite values.
        tiny (float): the smallest positive normal number (same as ``smallest_normal``).
        smallest_normal (float): the smallest positive normal number.
        resolution (float): ``10 ** -precision``, the decimal resolution.
        dtype (str): the dtype's name, e.g. ``'float32'``.

    >>> ember.finfo(ember.float32).eps
    1.1920928955078125e-07
    >>> ember.finfo(ember.ones(2).dtype).dtype
    'float32'
    """
    __slots__ = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype")

    def __init__(self, type=None):  # noqa: A002 - PyTorch's argument name
        if type is None:
            type = dt.get_default_dtype()
        type = _as_dtype_arg("finfo", type)
        if not type.is_floating_point:
            raise EmberTypeError(f"ember.finfo() requires a floating point input type, got "
                                 f"ember.{type.name}. Use ember.iinfo to handle integer types")
        info = _np_finfo(type)
        set_ = object.__setattr__
        set_(self, "bits", int(type.itemsize * 8))
        set_(self, "eps", float(info.eps))
        set_(self, "max", float(info.max))
        set_(self, "min", float(info.min))
        set_(self, "tiny", float(info.smallest_normal))
        set_(self, "smallest_normal", float(info.smallest_normal))
        # 10 ** -precision computed in Python, so 1e-06 is the double 1e-06 (as PyTorch),
        # not float32(1e-06) widened
        set_(self, "resolution", 10.0 ** -int(math.floor(-math.log10(float(info.eps)))))
        set_(self, "dtype", type.name)

    def __setattr__(self, name, value):
        raise AttributeError(f"attribute '{name}' of 'ember.finfo' objects is not writable")

    def __eq__(self, other) -> bool:
        if not isinstance(other, finfo):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # as torch.finfo: compared by value, unhashable

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """The limits of an integer dtype (``ember.uint8``, ``int8``, ``int16``, ``int32``,
    ``int64``), as ``torch.iinfo``.

    Args:
        type: an integer ``ember.dtype`` (``ember.bool`` is not one, as in PyTorch).

    Attributes:
        bits (int): the bits an element takes.
        max (int), min (int): the largest and smallest values.
        dtype (str): the dtype's name, e.g. ``'int64'``.

    >>> ember.iinfo(ember.int8).min
    -128
    """
    __slots__ = ("bits", "max", "min", "dtype")

    def __init__(self, type):  # noqa: A002 - PyTorch's argument name
        type = _as_dtype_arg("iinfo", type)
        if type.is_floating_point or type is dt.bool:
            raise EmberTypeError(f"ember.iinfo() requires an integer input type, got "
                                 f"ember.{type.name}. Use ember.finfo to handle floating "
                                 f"types")
        info = np.iinfo(type.np)
        set_ = object.__setattr__
        set_(self, "bits", int(info.bits))
        set_(self, "max", int(info.max))
        set_(self, "min", int(info.min))
        set_(self, "dtype", type.name)

    def __setattr__(self, name, value):
        raise AttributeError(f"attribute '{name}' of 'ember.iinfo' objects is not writable")

    def __eq__(self, other) -> bool:
        if not isinstance(other, iinfo):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


def _np_finfo(type: dt.DType):
    if type is dt.bfloat16:
        if type.np is None:
            raise EmberTypeError("ember.finfo: bfloat16 needs the ml_dtypes package")
        import ml_dtypes
        return ml_dtypes.finfo(ml_dtypes.bfloat16)
    return np.finfo(type.np)
