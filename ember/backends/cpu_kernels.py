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

The same goes for eager mode's generated kernels of the fused primitives (softmax,
GELU, SiLU and the other activations, masked fills, cross-entropy's backward:
:mod:`ember.compiler.eager`). Most depend on a tensor's layout, not its sizes, so
:func:`eager_sources` gathers them by running the common layouts once, without
compiling, and :func:`build` builds them with the rest. The norms' kernels hold the
normalised size as a constant: those of a width not run here (64) still compile at
their first use.
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import EmberError


def sources() -> list:
    """``(cache name, C source)`` of every hand-written kernel, both float types (the
    eager kernels are :func:`eager_sources`)."""
    from ..ops import c_loops
    from ..quant import int8_gemm
    from . import cpu_blas, cpu_gemm
    found = [cpu_gemm.named_source(np.float32), cpu_gemm.named_source(np.float64),
             ("blas_driver", cpu_blas.SOURCE)]
    for loop in c_loops.ALL:
        found += loop.named_sources()
    found += [(name, source) for _, name, source in int8_gemm.KERNELS]
    return found


def _common_layers() -> None:
    """The fused primitives, forward and backward, in the layouts models use most, in
    float32 and float64, each with enough elements for eager mode's kernels."""
    import ember
    import ember.nn.functional as F
    for dtype in (ember.float32, ember.float64):
        x = ember.randn(4, 32, 64, dtype=dtype, requires_grad=True)
        w = ember.ones(64, dtype=dtype, requires_grad=True)
        b = ember.zeros(64, dtype=dtype, requires_grad=True)
        h = F.layer_norm(x, (64,), w, b) + F.layer_norm(x, (64,)) + F.rms_norm(x, (64,), w)
        acts = (F.gelu(h), F.gelu(h, approximate="tanh"), F.silu(h), F.mish(h),
                F.softplus(h), F.elu(h), F.leaky_relu(h), F.hardtanh(h), F.hardswish(h),
                F.hardsigmoid(h))
        h = sum(acts[1:], acts[0])
        total = (F.softmax(h, -1) * h).sum() + F.log_softmax(h, -1).sum()
        logits = h.reshape(-1, 64)
        target = ember.randint(0, 64, (logits.shape[0],))
        total = total + F.cross_entropy(logits, target)
        scores = ember.randn(2, 4, 32, 32, dtype=dtype, requires_grad=True)
        causal = ember.triu(ember.ones(32, 32, dtype=ember.bool), 1)  # (an attention mask)
        total = total + (F.softmax(scores.masked_fill(causal, float("-inf")), -1) *
                         scores).sum()
        image = ember.randn(8, 16, 8, 8, dtype=dtype, requires_grad=True)
        total = total + F.batch_norm(image, None, None, training=True).sum() + \
            F.group_norm(image, 4).sum()
        total.backward()


def eager_sources() -> list:
    """``(cache name, C source)`` of eager mode's kernels for :func:`_common_layers`."""
    from ..compiler import eager
    from ..compiler.codegen import backend_name
    try:
        if backend_name() != "c":
            return []
    except EmberError:
        return []
    return eager.kernel_sources(_common_layers)


def build() -> dict:
    """Compile every hand-written kernel, and eager mode's common generated ones, that the
    kernel cache lacks; ``{"kernels": how many there are, "compiled": how many were
    missing, "seconds": the time it took, "directory": the cache}``. Raises
    :class:`EmberError` where there is no C compiler, and the compiler's error where a
    hand-written kernel fails to build."""
    from ..compiler.codegen import build as kernel_build
    if kernel_build.find_compiler() is None:
        raise EmberError("no C compiler found (install gcc or clang, or set "
                         "CC); without one ember runs its NumPy paths")
    library, generated = sources(), eager_sources()
    before = kernel_build.STATS["compiled"]
    start = time.perf_counter()
    # one parallel batch; the generated kernels a few to a file, as ember.jit's are
    kernel_build.load_kernels(generated, merge=True, alongside=library)
    kernel_build.load_kernels(library)  # (raises where one of them failed to build)
    return {"kernels": len(library) + len(generated),
            "compiled": kernel_build.STATS["compiled"] - before,
            "seconds": time.perf_counter() - start, "directory": kernel_build.cache_dir()}


__all__ = ["build", "sources"]
