"""``ember.backends.openmp``: PyTorch's ``torch.backends.openmp`` query, for porting.

>>> ember.backends.openmp.is_available()   # True where the C compiler takes -fopenmp
True
"""
from __future__ import annotations

__all__ = ["is_available"]


def is_available() -> bool:
    """Whether the kernels ember generates run their loops on several threads with
    OpenMP: a C compiler is found and accepts ``-fopenmp`` (probed once, by compiling
    an empty kernel). False without a C compiler (ember then runs NumPy only)."""
    from ..compiler.codegen import build
    compiler = build.find_compiler()
    return compiler is not None and build.OPENMP in build._optional_flags(compiler)
