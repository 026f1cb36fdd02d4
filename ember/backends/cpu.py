"""The CPU backend: NumPy arrays, NumPy's BLAS, NumPy's PCG64 generator."""
from __future__ import annotations

import ctypes
import os
import sys

import numpy as np

from .base import Backend


class CPUBackend(Backend):
    name = "cpu"
    xp = np
    kernel_renderer = "c"  # ember.jit's fused kernels: generated C

    def asarray(self, data, dtype=None):
        return np.asarray(data, dtype=dtype)

    def to_numpy(self, array):
        # (np.asarray also turns away the data of a tensor ember.jit is tracing)
        return array if array.__class__ is np.ndarray else np.asarray(array)

    def generator(self, seed: int | None):
        return np.random.Generator(np.random.PCG64(seed))

    def matmul(self, a, b):
        return np.matmul(a, b)


def keep_freed_memory() -> bool:
    """Ask glibc to keep freed blocks for reuse instead of handing them back to the OS.

    Eager mode allocates and frees arrays of the same few sizes on every step. By
    default glibc serves blocks over 128 KiB with mmap and unmaps them on free, so each
    new activation pays a page fault per 4 KiB page: on these machines that makes
    ``x @ w.T + b`` at transformer sizes more than twice as slow. Keeping the memory in
    the heap (as PyTorch's caching allocators do) removes the faults; peak memory stays
    what it was, but the process does not give it back until it exits. Set
    ``EMBER_MALLOC_TUNING=0`` to leave glibc's defaults alone.
    """
    if os.environ.get("EMBER_MALLOC_TUNING", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (musl): nothing to tune
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    limit = 1 << 30
    return bool(libc.mallopt(m_mmap_threshold, limit)) and bool(libc.mallopt(m_trim_threshold, limit))


keep_freed_memory()
