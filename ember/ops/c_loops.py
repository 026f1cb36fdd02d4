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


class CLoop:
    """``void ember_kernel(int64_t *params)`` from ``source``, per float dtype."""

    def __init__(self, name: str, source: str, prelude: str = ""):
        self.name, self.source, self.prelude = name, source, prelude
        self.built: dict = {}
        self.pid = os.getpid()

    def get(self, dtype):
        """(function, threads it may use) for ``dtype``, or None (the NumPy path)."""
        real = _FLOATS.get(np.dtype(dtype))
        if real is None or os.getpid() != self.pid:
            return None
        if real not in self.built:
            from ..compiler.codegen import backend_name, build
            try:
                compiled = os.environ.get("EMBER_EAGER_KERNELS", "1") != "0" and \
                    backend_name() == "c"
            except EmberError:  # an unknown EMBER_JIT_BACKEND: the NumPy path
                compiled = False
            if not compiled:  # (not remembered: a later call may find the C backend on)
                return None
            self.built[real] = None
            source = f"#define REAL {real}\n{self.prelude}{self.source}"
            function = build.load_c_function(f"{self.name}_{real}", source)
            if function is not None:  # (else the NumPy path)
                self.built[real] = (function, build.max_threads())
        return self.built[real]


__all__ = ["CLoop", "address"]
