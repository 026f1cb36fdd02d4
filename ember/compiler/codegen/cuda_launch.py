"""Compiling the CUDA renderer's modules with NVRTC through CuPy, and launching their
kernels: the part of ``cuda.py`` that needs CuPy (and a GPU).

A graph's kernels are compiled as one ``cupy.RawModule`` (CuPy keeps compiled modules on
disk by the hash of their source; this file also keeps each module once per process, by
the same hash), at the first call of any of them. A launcher makes its inputs contiguous
in their dtypes (as the C runner does), allocates the outputs with the backend's array
module and launches on the current stream, with :func:`~.cuda.launch_shape`'s grid.
"""
from __future__ import annotations

import hashlib
import os

import numpy as np

from ...errors import EmberError
from ..fused import FusedKernel
from .cuda import launch_shape, module_source, render_function

_MODULES: dict = {}       # hash of the source -> _Module (one compilation per process)
_MULTIPROCESSORS: dict = {}  # device id -> multiprocessor count


def _cupy():
    try:
        import cupy
    except ImportError:
        raise EmberError("ember.jit: the CUDA kernel renderer needs CuPy (pip install "
                         "cupy-cuda12x, matching the CUDA driver)") from None
    return cupy


class _Module:
    """A module of kernel functions, compiled by NVRTC at its first use (CuPy finds
    it in its on-disk cache when another process compiled the same source)."""

    def __init__(self, cupy, source: str, names):
        self.cupy, self.source, self.names = cupy, source, list(names)
        self.options = _options(cupy, source)
        self._raw = None
        self._functions: dict = {}

    def function(self, name: str):
        f = self._functions.get(name)
        if f is None:
            try:
                if self._raw is None:
                    self._raw = self.cupy.RawModule(code=self.source, options=self.options)
                f = self._functions[name] = self._raw.get_function(name)
            except Exception as exc:  # CuPy's CompileException carries NVRTC's log
                raise EmberError(f"ember.jit: NVRTC could not compile the module of "
                                 f"{len(self.names)} fused CUDA kernel(s): {exc}") from exc
        return f


def _options(cupy, source: str) -> tuple:
    """NVRTC options: the CUDA headers' folder where the source includes the half
    types' headers (some NVRTC versions do not find them alone)."""
    if "#include" not in source:
        return ()
    get_path = getattr(getattr(cupy, "cuda", None), "get_cuda_path", None)
    path = get_path() if callable(get_path) else None
    include = os.path.join(path, "include") if path else None
    return (f"-I{include}",) if include and os.path.isdir(include) else ()


def _module(cupy, functions) -> _Module:
    source = module_source(functions)
    key = hashlib.sha256(source.encode()).hexdigest()
    module = _MODULES.get(key)
    if module is None:
        module = _MODULES[key] = _Module(cupy, source, {f[0] for f in functions})
    return module


def _multiprocessors(cupy) -> int:
    device = cupy.cuda.Device()
    count = _MULTIPROCESSORS.get(device.id)
    if count is None:
        count = _MULTIPROCESSORS[device.id] = int(device.attributes["MultiProcessorCount"])
    return count


def _runner(kernel: FusedKernel, module: _Module, name: str, blocks: int, threads: int):
    """``run(xp, *arrays, out=None)`` launching ``name`` for ``kernel``'s shapes on the
    current stream. Inputs are made contiguous in their dtypes (as the C runner
    does); an ``out`` array that is not contiguous gets the result copied in."""
    sizes = [np.int64(s) for s in kernel.layout.sizes]
    in_dtypes = [dtype.np for _, dtype in kernel.inputs]
    out_specs = [(tuple(kernel.avals[v][0]), kernel.avals[v][1].np) for v in kernel.outputs]
    grid, block = (blocks,), (threads,)
    single = kernel.n_outputs == 1

    def run(xp, *arrays, out=None):
        args = list(sizes)
        for a, dtype in zip(arrays, in_dtypes):
            if a.dtype != dtype or not a.flags.c_contiguous:
                a = xp.ascontiguousarray(a, dtype=dtype)
            args.append(a)
        outs, copies = [], []
        for j, (shape, dtype) in enumerate(out_specs):
            given = None if out is None else out[j]
            if given is not None and given.flags.c_contiguous:
                outs.append(given)
            else:
                outs.append(xp.empty(shape, dtype))
                if given is not None:
                    copies.append((given, outs[-1]))
        module.function(name)(grid, block, tuple(args + outs))
        for given, made in copies:
            xp.copyto(given, made)
        results = [given if given is not None else made for given, made in
                   zip(out or [None] * len(outs), outs)]
        return results[0] if single else tuple(results)
    return run


def prepare(kernels, compile_now: bool = False) -> None:
    """Bind every kernel to its function in the module of all of them."""
    cupy = _cupy()
    functions = [render_function(k) for k in kernels]
    module = _module(cupy, functions)
    multiprocessors = _multiprocessors(cupy)
    for kernel, (name, _, _) in zip(kernels, functions):
        blocks, threads = launch_shape(kernel, multiprocessors)
        kernel.bind(_runner(kernel, module, name, blocks, threads), "cuda")
    if compile_now:
        module.function(functions[0][0])


__all__ = ["prepare"]
