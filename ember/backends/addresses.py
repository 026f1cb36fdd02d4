"""For calls into C: data pointers of NumPy arrays (without ``a.ctypes.data``'s object
per call), and call plans (what a call needs beyond its arrays' pointers, made once per
shape)."""
from __future__ import annotations

import ctypes
import threading

import numpy as np

_state: dict = {}
_from_address = ctypes.c_void_p.from_address


def address(a) -> int:
    """The data pointer of NumPy array ``a``: read from the array object's header where
    CPython lays arrays out as NumPy declares (0.25 us, against 1.2 us for
    ``a.ctypes.data``, which makes an object per call)."""
    offset = _state.get("offset", False)
    if offset is False:
        offset = _offset()
    if offset is None or a.__class__ is not np.ndarray:
        return a.ctypes.data
    return _from_address(id(a) + offset).value


# For C that takes NumPy arrays as objects: an array's data pointer, read from its
# object at offset ``at`` (``array_data_offset``), or the argument itself where ``at`` is
# -1 (the caller passed data pointers: another interpreter's layout)
C_ARRAY_DATA = r"""
#include <stdint.h>
static inline int64_t ember_array_data(const char *a, int64_t at)
{
    return at >= 0 ? *(const int64_t *)(a + at) : (int64_t)(intptr_t)a;
}
"""


def takes_arrays(function, count: int):
    """Declare ``function(params, array, ...)`` (``count`` arrays, as C_ARRAY_DATA reads
    them) for ctypes: the arrays go in as objects where their data pointer's offset is
    known, else as data pointers. Returns that offset, or None (then the caller passes
    ``address(a)`` for each array and -1 as the offset in its params)."""
    at = _offset()
    array = ctypes.c_void_p if at is None else ctypes.py_object
    function.argtypes = [ctypes.c_void_p] + [array] * count
    return at


def _offset():
    offset = _state.get("offset", False)
    if offset is False:
        from ..compiler.codegen import build
        offset = _state["offset"] = build.array_data_offset()
    return offset


_scratch = threading.local()  # each Python thread's scratch arrays, grown as needed


def scratch(dtype, size):
    """This Python thread's scratch array of ``dtype`` with at least ``size`` elements,
    for a C call's work space (the call is done with it when it returns)."""
    key = np.dtype(dtype).char
    buf = getattr(_scratch, key, None)
    if buf is None or buf.size < size:
        buf = np.empty(max(size, 1), dtype)
        setattr(_scratch, key, buf)
    return buf


class Plans:
    """Plans by key, each made once by ``make(*args)`` at its key's first call; the
    oldest goes past ``size`` of them (one is cheap to make again). A plan is read only:
    a caller copies what it fills in per call, so threads may share them."""

    def __init__(self, make, size: int = 512):
        self.make, self.size, self.plans = make, size, {}

    def get(self, key, *args):
        plan = self.plans.get(key)
        if plan is None:
            plan = self.plans[key] = self.make(*args)
            if len(self.plans) > self.size:
                self.plans.pop(next(iter(self.plans)), None)
        return plan


__all__ = ["C_ARRAY_DATA", "Plans", "address", "scratch", "takes_arrays"]
