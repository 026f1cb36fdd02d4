"""The CPU backend: NumPy arrays, NumPy's BLAS, NumPy's PCG64 generator."""
from __future__ import annotations

import numpy as np

from .base import Backend


class CPUBackend(Backend):
    name = "cpu"
    xp = np

    def asarray(self, data, dtype=None):
        return np.asarray(data, dtype=dtype)

    def to_numpy(self, array):
        return array

    def generator(self, seed: int | None):
        return np.random.Generator(np.random.PCG64(seed))

    def matmul(self, a, b):
        return np.matmul(a, b)
