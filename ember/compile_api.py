"""``ember.compile``: PyTorch's ``torch.compile`` signature on top of :func:`ember.jit`.

A ported script keeps its ``model = torch.compile(model, mode="max-autotune")`` line:
the arguments are accepted, the function or module is compiled by ``ember.jit`` (one
optimised graph per signature of shapes, dtypes and modes), and the settings that
belong to PyTorch's compiler stack (backends, modes, Inductor options) are ignored.
"""
from __future__ import annotations

import warnings
from typing import Callable

from .compiler.jit import jit
from .errors import EmberError

__all__ = ["compile"]

# What torch.compile accepts (torch._dynamo.list_backends(exclude_tags=()) of 2.13, and
# Inductor's modes). All of them mean "compile with ember.jit" here.
KNOWN_BACKENDS = frozenset({
    "inductor", "eager", "aot_eager", "aot_eager_decomp_partition",
    "aot_eager_default_partitioner", "cudagraphs", "openxla", "openxla_eval", "tvm",
    "onnxrt", "ipex", "tensorrt", "torch_tensorrt", "ts", "aot_ts"})
KNOWN_MODES = frozenset({"default", "lite", "reduce-overhead", "max-autotune",
                         "max-autotune-no-cudagraphs"})

_warned: set = set()  # the (kind, value) pairs warned about once already


def _warn_once(kind: str, value) -> None:
    key = (kind, value if isinstance(value, str) else type(value).__name__)
    if key in _warned:
        return
    _warned.add(key)
    warnings.warn(f"ember.compile: {kind}={value!r} is not one ember knows; it is ignored "
                  f"and the function is compiled with ember.jit", UserWarning, stacklevel=3)


def compile(model: Callable | None = None, *, fullgraph: bool = False,
            dynamic: bool | None = None, backend: str | Callable | None = None,
            mode: str | None = None, options: dict | None = None, name: str | None = None,
            disable: bool = False, recompile_limit: int | None = None,
            isolate_recompiles: bool = False, shapes_spec=None):
    """Compile a function or a Module, as ``torch.compile``: returns what
    :func:`ember.jit` returns.

    ember traces ``model`` into one graph per signature (argument shapes and dtypes,
    grad mode, training flags), optimises it and runs generated kernels; see
    ``ember.jit``. The PyTorch-only settings are accepted so that a ported script runs
    unchanged:

    Args:
        model: the function or Module; None makes a decorator with these settings.
        fullgraph: True raises when ``model`` does something a graph cannot hold
            (``.item()``, ``if x > 0``); False (PyTorch's default, "graph breaks
            allowed") runs such a signature eagerly instead, with a warning.
        dynamic: accepted and ignored (ember.jit specialises on shapes and retraces
            when they change, at most ``ember.compiler.jit.CACHE_SIZE`` kept).
        backend: ``"inductor"`` (default), ``"eager"``, ``"aot_eager"``, ... all compile
            with ember.jit; an unknown name or a callable backend warns once and is
            ignored.
        mode: ``"default"``, ``"reduce-overhead"``, ``"max-autotune"``, ... are
            accepted; an unknown one warns once and is ignored.
        options: Inductor options; accepted and ignored (not together with ``mode``,
            as in PyTorch).
        name, recompile_limit, isolate_recompiles, shapes_spec: accepted and ignored.
        disable: True returns ``model`` itself, uncompiled.

    >>> model = ember.compile(ember.nn.Linear(4, 2), mode="max-autotune")
    >>> model(ember.ones(3, 4)).shape
    ember.Size([3, 2])
    >>> @ember.compile
    ... def f(x):
    ...     return x.sin() + 1
    """
    if mode is not None and options is not None:
        raise EmberError("Either mode or options can be specified, but both can't be "
                         "specified at the same time.")
    if mode is not None and mode not in KNOWN_MODES:
        _warn_once("mode", mode)
    if backend is not None and not (isinstance(backend, str) and backend in KNOWN_BACKENDS):
        _warn_once("backend", backend)
    if model is None:
        def decorate(fn):
            return compile(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                           mode=mode, options=options, name=name, disable=disable,
                           recompile_limit=recompile_limit,
                           isolate_recompiles=isolate_recompiles, shapes_spec=shapes_spec)
        return decorate
    if not callable(model):
        raise EmberError(f"ember.compile: expected a function or a Module, got "
                         f"{type(model).__name__}")
    if disable:
        return model
    return jit(model, fallback=not fullgraph)
