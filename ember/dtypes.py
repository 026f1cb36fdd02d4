"""dtypes and PyTorch's type-promotion rules.

A :class:`DType` wraps the backend's dtype (a NumPy dtype; ``bfloat16`` comes from
``ml_dtypes``). Promotion follows PyTorch: categories bool < integer < floating <
complex, and Python scalars and 0-d tensors only raise the category, never the width, of
dimensioned tensors (``int8_tensor + 5`` stays ``int8``; ``int32_tensor + 2.5`` is
``float32``; ``float64_tensor + 1j`` is ``complex128``).
"""
from __future__ import annotations

import builtins as _builtins

import numpy as np

from .errors import EmberTypeError

try:
    import ml_dtypes as _ml_dtypes
    _BF16 = np.dtype(_ml_dtypes.bfloat16)
except ImportError:  # bfloat16 is then unavailable, everything else works
    _ml_dtypes = None
    _BF16 = None

__all__ = ["DType", "float16", "bfloat16", "float32", "float64", "int8", "int16", "int32",
           "int64", "uint8", "bool", "half", "float", "double", "short", "int", "long",
           "complex64", "complex128", "cfloat", "cdouble", "promote_types", "result_type",
           "get_default_dtype", "set_default_dtype", "as_dtype"]

_BOOL, _INT, _FLOAT, _COMPLEX = 0, 1, 2, 3


class DType:
    """A tensor element type, such as ``ember.float32``.

    Attributes:
        name: the short name (``"float32"``).
        itemsize: bytes per element.
        is_floating_point: True for float16, bfloat16, float32, float64.
        is_complex: True for complex64 and complex128.
        is_signed: True unless uint8 or bool.
        differentiable: floating or complex (a tensor of it may require grad).
    """
    __slots__ = ("name", "np", "itemsize", "is_floating_point", "is_complex", "is_signed",
                 "differentiable", "_category", "_rank")

    def __init__(self, name: str, np_dtype, category: int, rank: int):
        self.name = name
        self.np = np_dtype
        self.itemsize = np_dtype.itemsize if np_dtype is not None else 2
        self.is_floating_point = category == _FLOAT
        self.is_complex = category == _COMPLEX
        self.differentiable = category >= _FLOAT  # (a tensor of it may require grad)
        self.is_signed = name not in ("uint8", "bool")
        self._category = category
        self._rank = rank

    def to_real(self) -> "DType":
        """The real dtype of a complex one's parts (``complex64`` -> ``float32``); a
        real dtype itself."""
        return _REAL_OF.get(self, self)

    def to_complex(self) -> "DType":
        """The complex dtype with parts of this floating dtype (``float64`` ->
        ``complex128``; float16 and bfloat16 -> ``complex64``); a complex dtype itself."""
        if self._category == _COMPLEX:
            return self
        return complex128 if self is float64 else complex64

    def __repr__(self) -> str:
        return f"ember.{self.name}"

    def __reduce__(self):
        return (as_dtype, (self.name,))


bool = DType("bool", np.dtype(np.bool_), _BOOL, 0)  # noqa: A001 - PyTorch's public name
uint8 = DType("uint8", np.dtype(np.uint8), _INT, 1)
int8 = DType("int8", np.dtype(np.int8), _INT, 1)
int16 = DType("int16", np.dtype(np.int16), _INT, 2)
int32 = DType("int32", np.dtype(np.int32), _INT, 3)
int64 = DType("int64", np.dtype(np.int64), _INT, 4)
float16 = DType("float16", np.dtype(np.float16), _FLOAT, 1)
bfloat16 = DType("bfloat16", _BF16, _FLOAT, 1)
float32 = DType("float32", np.dtype(np.float32), _FLOAT, 2)
float64 = DType("float64", np.dtype(np.float64), _FLOAT, 3)
complex64 = DType("complex64", np.dtype(np.complex64), _COMPLEX, 2)
complex128 = DType("complex128", np.dtype(np.complex128), _COMPLEX, 3)

half, float, double = float16, float32, float64  # noqa: A001
short, int, long = int16, int32, int64  # noqa: A001
cfloat, cdouble = complex64, complex128

ALL = (bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)
FLOATING = (float16, bfloat16, float32, float64)
INTEGRAL = (uint8, int8, int16, int32, int64)
# (not in ALL: the op tables check ALL's dtypes, and most ops take no complex input)
COMPLEX = (complex64, complex128)
_REAL_OF = {complex64: float32, complex128: float64}

_BY_NAME = {d.name: d for d in ALL + COMPLEX}
_BY_NAME.update(half=float16, float=float32, double=float64, short=int16, int=int32, long=int64,
                cfloat=complex64, cdouble=complex128)
_BY_NP = {d.np: d for d in ALL + COMPLEX if d.np is not None}


def as_dtype(obj, op: str = "as_dtype") -> DType:
    """Return the ember dtype for a DType, a name, a NumPy dtype or a torch dtype.

    ``op`` names the caller in the error raised for anything else.

    >>> ember.dtypes.as_dtype("float16")
    ember.float16
    """
    if isinstance(obj, DType):
        return obj
    found = None
    if isinstance(obj, str):
        found = _BY_NAME.get(obj.removeprefix("torch.").removeprefix("ember."))
    elif obj is _builtins.float:  # as in PyTorch: the Python type means double
        found = float64
    elif obj is _builtins.int:
        found = int64
    elif obj is _builtins.bool:
        found = bool
    elif obj is _builtins.complex:
        found = complex128
    elif obj is not None and not isinstance(obj, (_builtins.int, _builtins.float)):
        try:
            found = _BY_NP.get(np.dtype(obj))
        except TypeError:  # a torch dtype, or something with a dtype-like str()
            found = _BY_NAME.get(str(obj).removeprefix("torch."))
    if found is None:
        raise EmberTypeError(f"{op}: unsupported dtype {obj!r}; expected one of "
                             f"{', '.join('ember.' + d.name for d in ALL + COMPLEX)}")
    return found


def _promote_ints(a: DType, b: DType) -> DType:
    if a is uint8 and b is uint8:
        return uint8
    if a is uint8 or b is uint8:
        other = b if a is uint8 else a
        return int16 if other is int8 else other
    return a if a._rank >= b._rank else b


def promote_types(a: DType, b: DType) -> DType:
    """The smallest dtype both ``a`` and ``b`` convert to without losing category.

    >>> ember.promote_types(ember.uint8, ember.int8)
    ember.int16
    """
    if a is b:
        return a
    if a._category != b._category:
        high, low = (a, b) if a._category > b._category else (b, a)
        if high._category == _COMPLEX and low is float64:
            return complex128  # (the parts keep float64's width)
        return high
    if a._category == _FLOAT:
        if {a, b} == {float16, bfloat16}:
            return float32
        return a if a._rank >= b._rank else b
    if a._category == _COMPLEX:
        return a if a._rank >= b._rank else b
    if a._category == _INT:
        return _promote_ints(a, b)
    return bool


_default_dtype = float32


def get_default_dtype() -> DType:
    """The dtype of floating tensors made from Python floats (float32 unless changed)."""
    return _default_dtype


def set_default_dtype(dtype) -> None:
    """Set the default floating dtype (float32 or float64, as in PyTorch)."""
    global _default_dtype
    dtype = as_dtype(dtype, "set_default_dtype")
    if not dtype.is_floating_point:
        raise EmberTypeError(f"set_default_dtype: only floating dtypes are allowed, got "
                             f"{dtype}")
    _default_dtype = dtype


def scalar_dtype(value) -> DType:
    """The dtype PyTorch gives a Python scalar taking part in an op."""
    if isinstance(value, _builtins.bool):
        return bool
    if isinstance(value, _builtins.int):
        return int64
    if isinstance(value, _builtins.complex):
        return _default_dtype.to_complex()
    return _default_dtype


def _combine(higher: DType | None, lower: DType | None) -> DType | None:
    # PyTorch's combine_categories: a lower-priority group only wins on category (a
    # complex one over floating keeps the floating one's width).
    if higher is None:
        return lower
    if lower is None or higher._category == _COMPLEX:
        return higher
    if lower._category == _COMPLEX:
        return higher.to_complex() if higher._category == _FLOAT else lower
    if higher._category == _FLOAT:
        return higher
    if higher is bool or lower._category == _FLOAT:
        return promote_types(higher, lower)
    return higher


def result_type(*operands) -> DType:
    """The dtype of an elementwise op over ``operands`` (tensors and Python scalars).

    Dimensioned tensors take priority over 0-d tensors, which take priority over Python
    scalars; a lower group only changes the result when its category is higher.
    """
    dim = zero = scalar = None
    for x in operands:
        dt = getattr(x, "dtype", None)
        if isinstance(dt, DType):
            if x.ndim:
                dim = dt if dim is None else promote_types(dim, dt)
            else:
                zero = dt if zero is None else promote_types(zero, dt)
        elif x is not None:
            dt = scalar_dtype(x)
            scalar = dt if scalar is None else promote_types(scalar, dt)
    out = _combine(dim, _combine(zero, scalar))
    if out is None:
        raise TypeError("result_type: expected at least one tensor or number")
    return out


def can_cast(from_, to) -> bool:
    """Whether PyTorch's casting rules let a ``from_`` result be written into a ``to``
    tensor (no complex into a real tensor, no float into an integer tensor, no integer
    into a bool tensor)."""
    return as_dtype(from_, "can_cast")._category <= as_dtype(to, "can_cast")._category
