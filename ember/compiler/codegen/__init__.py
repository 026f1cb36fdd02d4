"""Lowering fused kernels: the renderers, by backend name, and choosing one.

A renderer turns :class:`~ember.compiler.fused.FusedKernel` objects into code for one
backend and binds each kernel to it: ``renderer.render(kernel) -> source`` and
``renderer.prepare(kernels)`` (build what is missing, then ``kernel.bind(run, name)``).
``"c"`` (``c.py``: C compiled by the system compiler) is the one there is; a CUDA
renderer registers itself with :func:`register_renderer` and reuses the scalar rules of
``scalar.py``. ``"numpy"`` is always there: the kernel runs its steps' NumPy forwards.

``EMBER_JIT_BACKEND`` chooses: ``numpy``, ``c``, or unset (``c`` when a C compiler is
found, else ``numpy``).
"""
from __future__ import annotations

import os
from typing import Callable

from ...errors import EmberError

RENDERERS: dict[str, Callable] = {}


def register_renderer(name: str, factory: Callable) -> None:
    """Make ``EMBER_JIT_BACKEND=name`` lower fused kernels with ``factory()``."""
    RENDERERS[name] = factory


def _c_renderer():
    from .c import CRenderer
    return CRenderer()


register_renderer("c", _c_renderer)


def backend_name() -> str:
    """The backend fused kernels are lowered to now (``"c"``, ``"numpy"``, ...)."""
    chosen = os.environ.get("EMBER_JIT_BACKEND", "").strip().lower()
    if chosen == "numpy":
        return "numpy"
    if chosen in ("", "auto", "c"):
        from .build import find_compiler
        if find_compiler() is not None:
            return "c"
        if chosen == "c":
            raise EmberError("ember.jit: EMBER_JIT_BACKEND=c but no C compiler was found "
                             "(set CC to one, or use EMBER_JIT_BACKEND=numpy)")
        return "numpy"
    if chosen in RENDERERS:
        return chosen
    raise EmberError(f"ember.jit: EMBER_JIT_BACKEND={chosen!r} is not a backend; expected "
                     f"one of {sorted(set(RENDERERS) | {'numpy'})}")


def prepare_kernels(ops, compile_now: bool = False) -> None:
    """Lower every fused kernel among ``ops`` not yet bound, all at once (so the C
    compiler runs once per missing kernel, several in parallel); with ``compile_now``
    the code is built before this returns rather than at the first kernel's call."""
    from ..fused import FusedKernel
    kernels = [op for op in ops if isinstance(op, FusedKernel) and op.backend is None]
    if not kernels:
        return
    name = backend_name()
    if name == "numpy":
        for k in kernels:
            k.bind(k.evaluate, "numpy")
        return
    RENDERERS[name]().prepare(kernels, compile_now)


__all__ = ["RENDERERS", "register_renderer", "backend_name", "prepare_kernels"]
