"""The CPU backend's hand-written C kernels, built ahead of time.

Each hand-written kernel (the BLAS driver, the GEMM library, the convolution, norm,
attention, loss, pooling and index loops, the int8 GEMMs) compiles through the kernel
cache the first time a process needs it. On an empty cache that first use waits for
the compiler: about a second for the first matrix product, three for the first
convolution's forward and backward, most of a cold ``ember.jit`` training step's first
call. :func:`build` compiles them all at once, side by side on every core, as
``ember kernels`` does and as the README's set-up commands do after installing; later
processes find them in the cache. Only what ``ember.jit`` generates for a graph (its
fused kernels) is then left to compile on a first call.
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import EmberError


def sources() -> list:
    """``(cache name, C source)`` of every hand-written kernel, both float types."""
    from ..ops import c_loops
    from ..quant import int8_gemm
    from . import cpu_blas, cpu_gemm
    found = [cpu_gemm.named_source(np.float32), cpu_gemm.named_source(np.float64),
             ("blas_driver", cpu_blas.SOURCE)]
    for loop in c_loops.ALL:
        found += loop.named_sources()
    found += [(name, source) for _, name, source in int8_gemm.KERNELS]
    return found


def build() -> dict:
    """Compile every hand-written kernel the kernel cache lacks; ``{"kernels": how many
    there are, "compiled": how many were missing, "seconds": the time it took,
    "directory": the cache}``. Raises :class:`EmberError` where there is no C compiler,
    and the compiler's error where a kernel fails to build."""
    from ..compiler.codegen import build as kernel_build
    if kernel_build.find_compiler() is None:
        raise EmberError("no C compiler found (install gcc or clang, or set "
                         "CC); without one ember runs its NumPy paths")
    found = sources()
    before = kernel_build.STATS["compiled"]
    start = time.perf_counter()
    kernel_build.load_kernels(found)
    return {"kernels": len(found), "compiled": kernel_build.STATS["compiled"] - before,
            "seconds": time.perf_counter() - start, "directory": kernel_build.cache_dir()}


__all__ = ["build", "sources"]
