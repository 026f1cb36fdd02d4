"""The compiler: ``ember.jit`` captures a function into a graph of registry ops,
optimises it and runs it (see ``jit.py`` for the entry point, ``trace.py`` for capture,
``ir.py`` for the graph, ``passes/`` for the optimisations, ``runtime.py`` for running)."""
from .explain import explain, to_dot
from .jit import CompiledFunction, jit
from .trace import DataDependentError, TraceError

jit.explain = explain  # ember.jit.explain(fn, *args), as well as ember.compiler.explain

__all__ = ["jit", "CompiledFunction", "TraceError", "DataDependentError", "explain",
           "to_dot"]
