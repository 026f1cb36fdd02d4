"""Lowering fused kernels: the renderers, by backend name, and choosing one.

A renderer turns :class:`~ember.compiler.fused.FusedKernel` objects into code for one
backend and binds each kernel to it: ``renderer.render(kernel) -> source`` and
``renderer.prepare(kernels, compile_now, extra)`` (build what is missing, then
``kernel.bind(run, name)``; ``extra``: more C sources to build with them, which only the
C renderer uses).
``"c"`` (``c.py``: C compiled by the system compiler) and ``"cuda"`` (``cuda.py``: CUDA C
compiled by NVRTC through CuPy) share the scalar rules of ``scalar.py``. ``"numpy"`` is
always there: the kernel runs its steps' NumPy forwards (with any array module).

Which one lowers a graph follows the device of its tensors (:func:`renderer_for`): on
the CPU ``EMBER_JIT_BACKEND`` chooses: ``numpy``, ``c``, or unset (``c`` when a C
compiler is found, else ``numpy``); another device names its renderer in its backend's
``kernel_renderer``.
"""
from __future__ import annotations

import os
from typing import Callable

from ...errors import EmberError

RENDERERS: dict[str, Callable] = {}
_HALF_TYPES: set = set()  # renderers that hold float16 and bfloat16


def register_renderer(name: str, factory: Callable, half_types: bool = False) -> None:
    """Make ``name`` (a backend's ``kernel_renderer``, or ``EMBER_JIT_BACKEND``) lower
    fused kernels with ``factory()``; ``half_types``: its kernels hold float16 and
    bfloat16 values (computing in float32), so the fusion pass fuses those ops too."""
    RENDERERS[name] = factory
    if half_types:
        _HALF_TYPES.add(name)


def _c_renderer():
    from .c import CRenderer
    return CRenderer()


def _cuda_renderer():
    from .cuda import CUDARenderer
    return CUDARenderer()


register_renderer("c", _c_renderer)
register_renderer("cuda", _cuda_renderer, half_types=True)


def holds_half_types(renderer: str) -> bool:
    """Whether ``renderer``'s kernels hold float16 and bfloat16 values."""
    return renderer in _HALF_TYPES


def renderer_for(device) -> str:
    """The renderer of fused kernels on ``device``: the backend's ``kernel_renderer``
    (``"numpy"``: its NumPy-style steps, through the backend's array module), where a C
    renderer means today's :func:`backend_name` choice (``EMBER_JIT_BACKEND``)."""
    name = getattr(device.backend, "kernel_renderer", None) or "c"
    return backend_name() if name == "c" else name


def backend_name() -> str:
    """The backend fused kernels on the CPU are lowered to now (``"c"`` or
    ``"numpy"``)."""
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
    raise EmberError(f"ember.jit: EMBER_JIT_BACKEND={chosen!r} is not a backend; expected "
                     "one of ['c', 'numpy'] (it chooses how fused kernels run on the CPU; "
                     "another device's backend names its own renderer)")


def prepare_kernels(ops, compile_now: bool = False, renderer: str | None = None,
                    extra=()) -> None:
    """Lower every fused kernel among ``ops`` not yet bound, all at once (so the C
    compiler runs once per missing kernel, several in parallel); with ``compile_now``
    the code is built before this returns rather than at the first kernel's call.
    ``renderer``: the renderer's name (default: :func:`backend_name`). ``extra``: more
    ``(name, source)`` C functions for the kernel cache (the hand-written loops the
    graph's ops call), built with the C renderer's kernels where it compiles some."""
    from ..fused import FusedKernel
    kernels = [op for op in ops if isinstance(op, FusedKernel) and op.backend is None]
    if not kernels:
        return
    name = backend_name() if renderer is None else renderer
    if name not in RENDERERS and name != "numpy":
        raise EmberError(f"ember.jit: no kernel renderer {name!r}; expected one of "
                         f"{sorted(set(RENDERERS) | {'numpy'})}")
    if name == "numpy":
        for k in kernels:
            k.bind(k.evaluate, "numpy")
        return
    RENDERERS[name]().prepare(kernels, compile_now, extra)


__all__ = ["RENDERERS", "register_renderer", "backend_name", "renderer_for",
           "holds_half_types", "prepare_kernels"]
