"""Data pointers of NumPy arrays for C calls, without ``a.ctypes.data``'s object per call."""
from __future__ import annotations

import ctypes

import numpy as np

_state: dict = {}
_from_address = ctypes.c_void_p.from_address


def address(a) -> int:
    """The data pointer of NumPy array ``a``: read from the array object's header where
    CPython lays arrays out as NumPy declares (0.25 us, against 1.2 us for
    ``a.ctypes.data``, which makes an object per call)."""
    offset = _state.get("offset", False)
    if offset is False:
        from ..compiler.codegen import build
        offset = _state["offset"] = build.array_data_offset()
    if offset is None or a.__class__ is not np.ndarray:
        return a.ctypes.data
    return _from_address(id(a) + offset).value


__all__ = ["address"]
