"""Hand-written C loops beside the NumPy ops (col2im, norm backward, max pooling, row
sums): one C source each, with ``REAL`` standing for the element type, built for float32
and float64 through the kernel cache on first use.

A loop applies only where the kernel cache has a C compiler (the C backend), eager
kernels are on (``EMBER_EAGER_KERNELS`` is not ``0``), and in the process that first
asked (OpenMP is not fork-safe: a forked child takes the NumPy path). Anywhere else
:meth:`CLoop.get` says None and the caller runs its NumPy path.
"""
from __future__ import annotations

import os

import numpy as np

from ..backends.addresses import address  # noqa: F401  (the loops' callers use it)
from ..errors import EmberError

_FLOATS = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


_BY_OP: dict = {}  # registry op name -> the loops its forward may call
ALL: list = []  # every loop made (ember.backends.cpu_kernels builds them ahead of time)


class CLoop:
    """``void ember_kernel(int64_t *params)`` from ``source``, per float dtype. ``ops``:
    the registry ops whose forward calls it, so that ``ember.jit`` can build it with a
    graph's fused kernels (:func:`sources_for`) rather than at its first call, alone."""

    def __init__(self, name: str, source: str, prelude: str = "", ops: tuple = ()):
        self.name, self.source, self.prelude = name, source, prelude
        self.built: dict = {}
        self.pid = os.getpid()
        ALL.append(self)
        for op in ops:
            _BY_OP.setdefault(op, []).append(self)

    def get(self, dtype):
        """(function, threads it may use) for ``dtype``, or None (the NumPy path)."""
        real = _FLOATS.get(np.dtype(dtype))
        if real is None or os.getpid() != self.pid:
            return None
        if real not in self.built:
            if not _enabled():  # (not remembered: a later call may find the C backend on)
                return None
            from ..compiler.codegen import build
            self.built[real] = None
            function = build.load_c_function(*self.named_source(real))
            if function is not None:  # (else the NumPy path)
                self.built[real] = (function, build.max_threads())
        return self.built[real]

    def available(self, dtype) -> bool:
        """Whether :meth:`get` would give a function for ``dtype`` (without building it
        where it is not built yet: a build that then fails takes the NumPy path)."""
        real = _FLOATS.get(np.dtype(dtype))
        if real is None or os.getpid() != self.pid:
            return False
        if real in self.built:
            return self.built[real] is not None
        from ..compiler.codegen import build
        return _enabled() and build.find_compiler() is not None

    def named_source(self, real: str) -> tuple:
        """(cache name, C source) of the loop for C type ``real``."""
        return f"{self.name}_{real}", f"#define REAL {real}\n{self.prelude}{self.source}"

    def named_sources(self) -> list:
        """(cache name, C source) of the loop for each float type."""
        return [self.named_source(real) for real in _FLOATS.values()]


def _enabled() -> bool:
    """Whether hand-written loops run at all: the C backend, eager kernels not off."""
    from ..compiler.codegen import backend_name
    try:
        return os.environ.get("EMBER_EAGER_KERNELS", "1") != "0" and backend_name() == "c"
    except EmberError:  # an unknown EMBER_JIT_BACKEND: the NumPy path
        return False


def sources_for(uses) -> list:
    """``(name, source)`` of the loops not built yet that ops among ``uses`` (``(op
    name, dtype)`` pairs) call, for ``ember.jit`` to compile with a graph's kernels."""
    if not _enabled():
        return []
    found = {}
    for op, dtype in uses:
        real = _FLOATS.get(np.dtype(dtype))
        for loop in _BY_OP.get(op, ()) if real is not None else ():
            if real not in loop.built and os.getpid() == loop.pid:
                found[(loop.name, real)] = loop.named_source(real)
    return list(found.values())


__all__ = ["ALL", "CLoop", "address", "sources_for"]
