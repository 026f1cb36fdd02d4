"""A stand-in accelerator for tests that need a second device but no GPU.

``fakegpu`` is a backend like any other: its arrays are NumPy arrays, but they live on
their own device, so everything that must not mix devices (ops, optimizers, checkpoints,
the jit) is checked the way it would be on CUDA. Importing this module registers it.
"""
from __future__ import annotations

import numpy as np

import ember
from ember.backends import Backend, register_backend


class FakeGPUBackend(Backend):
    name = "fakegpu"
    xp = np
    kernel_renderer = "numpy"  # fused kernels run their NumPy steps

    def asarray(self, data, dtype=None):
        return np.asarray(data, dtype=dtype)

    def to_numpy(self, array):
        return np.asarray(array)

    def generator(self, seed):
        return np.random.Generator(np.random.PCG64(seed))

    def matmul(self, a, b):
        return np.matmul(a, b)


register_backend(FakeGPUBackend())
FAKE = ember.device("fakegpu")
