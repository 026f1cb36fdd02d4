"""``ember.jit``: trace a function once per signature, optimise the graph, run it.

A compiled function keeps a small cache of specialisations, keyed by what the trace
depended on: the shapes, dtypes and ``requires_grad`` of the tensor arguments, the
other arguments' values, grad mode, the default dtype, the autocast state and the
``training`` flags of the modules the function reaches. State the graph reads
(parameters, optimizer state, gradients) is checked as it is fetched. Every retrace
records its reason.

A graph runs on the device of the tensors it reads (one device; a 0-d CPU tensor may
join, as in eager mode): the same passes and memory plan everywhere, its fused kernels
lowered by that device's renderer (generated C on the CPU, CUDA C on CUDA).
"""
from __future__ import annotations

import functools
import os
import sys
import time
import warnings
from collections import OrderedDict

from .. import dtypes
from ..autograd import grad_mode
from ..errors import EmberError
from ..nn.module import STATE_EPOCH
from ..ops import registry
from ..tensor import Tensor
from . import codegen, passes
from .explain import explain_compiled, snapshot
from ..backends import CPU
from .autodiff import CompiledBackward, split, trace_backward
from .runtime import (GuardFailure, NumpyExecutor, apply_updates, fetch_inputs, input_target,
                      place, resolve, target_key)
from .trace import DataDependentError, Trace, TraceError

CACHE_SIZE = 8
_EAGER = "eager"  # a cache entry: this signature runs eagerly (fallback=True)


def _log(message: str) -> None:
    if os.environ.get("EMBER_JIT_LOG", "") not in ("", "0"):
        print(f"[ember.jit] {message}", file=sys.stderr)


# Arguments as leaves and structure -------------------------------------------------------
def flatten(obj):
    """(tensor leaves, a hashable description of everything else)."""
    leaves: list = []
    return leaves, _walk(obj, leaves)


_TENSORS_ONLY: dict = {}  # n -> the tree of ``((n tensors), {})``


def _flatten_call(args: tuple, kwargs: dict):
    """:func:`flatten` of ``(args, kwargs)``, without the walk for the common call: only
    positional tensors."""
    if not kwargs:
        for a in args:
            if not isinstance(a, Tensor):
                break
        else:
            tree = _TENSORS_ONLY.get(len(args))
            if tree is None:
                tree = _TENSORS_ONLY[len(args)] = flatten((args, kwargs))[1]
            return list(args), tree
    return flatten((args, kwargs))


def _walk(x, leaves):
    # (module-level, not a closure: a recursive closure is a reference cycle that would
    # keep the traced tensors alive until the next garbage collection)
    if isinstance(x, Tensor):
        leaves.append(x)
        return ("T",)
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(_walk(i, leaves) for i in x))
    if isinstance(x, dict):
        return ("dict", tuple((k, _walk(v, leaves)) for k, v in x.items()))
    try:
        hash(x)
    except TypeError:
        raise EmberError(f"ember.jit: cannot use an argument of type {type(x).__name__} "
                         "(tensors, numbers, strings, None and lists/tuples/dicts of them "
                         "are supported)") from None
    return ("C", x)


def unflatten(tree, leaves):
    """The structure ``tree`` (from :func:`flatten`) filled with ``leaves``."""
    return _build(tree, iter(leaves))


def _build(node, it):
    tag = node[0]
    if tag == "T":
        return next(it)
    if tag == "C":
        return node[1]
    if tag == "dict":
        return {k: _build(v, it) for k, v in node[1]}
    items = [_build(i, it) for i in node[1]]
    return tuple(items) if tag == "tuple" else items


def _modules_reached(fn, depth: int = 3) -> list:
    """Modules the function can reach through self, closures and globals (their
    training flags are part of the signature)."""
    from ..nn.module import Module
    found: dict[int, Module] = {}
    seen: set = set()

    def visit(obj, d):
        if id(obj) in seen or d < 0:
            return
        seen.add(id(obj))
        if isinstance(obj, Module):
            for m in obj.modules():
                found.setdefault(id(m), m)
            return
        if isinstance(obj, functools.partial):
            visit(obj.func, d)
            for a in obj.args:
                visit(a, d - 1)
            return
        self_ = getattr(obj, "__self__", None)
        if self_ is not None:
            visit(self_, d - 1)
        code = getattr(obj, "__code__", None)
        if code is None:
            return
        for cell in getattr(obj, "__closure__", None) or ():
            try:
                visit(cell.cell_contents, d - 1)
            except ValueError:
                pass
        globs = getattr(obj, "__globals__", {})
        for name in _names(code):
            if name in globs:
                visit(globs[name], d - 1)
    visit(fn, depth)
    return list(found.values())


def _names(code):
    names = set(code.co_names)
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            names |= _names(c)
    return names


# The compiled function -------------------------------------------------------------------
class Specialization:
    """One traced and optimised graph, and how to feed and apply it."""

    def __init__(self, graph, trace: Trace, out_tree, reason: str, trace_seconds: float,
                 original=None, backward=None, name: str = "fn", device=CPU, args=()):
        self.graph = graph
        self.device = device
        self.original = original  # the graph before the passes (for explain)
        self.out_tree = out_tree
        self.grad_guards = trace.grad_guards()
        self.guards = trace.guards
        self.host_calls = trace.host_calls
        self.reason = reason
        self.trace_seconds = trace_seconds
        self.rewritten = dict(trace.rewritten)  # (for explain)
        # inputs of tensors on another device (0-d CPU tensors): copied over at each
        # call, and their updates written back after the run
        self.placed = []
        for j, inp in enumerate(graph.inputs):
            source = _input_device(inp, args)
            if source is not None and source is not device:
                self.placed.append((j, source))
        # the tensors the graph reads as state: (tensor, shape, dtype, requires_grad, device,
        # label) when traced, checked before each call
        self.state_guards = [(inp.source, inp.value.shape, inp.value.dtype.np,
                              inp.source._requires_grad, inp.source._device, inp.label)
                             for inp in graph.inputs if inp.kind == "data"]
        # only arguments and state tensors: fetched without the general loop
        self.plain_inputs = None
        if all(inp.kind in ("arg", "data") for inp in graph.inputs):
            self.plain_inputs = [inp.source for inp in graph.inputs]  # (index or tensor)
        self.executor = NumpyExecutor(graph, device=device,
                                      keep_inputs={j for j, _ in self.placed})
        # grads the graph replaces without reading: dropped before it runs (as
        # zero_grad does eagerly), so old and new gradients never coexist
        read = {target_key(inp.source) for inp in graph.inputs if inp.kind == "grad"}
        self.clear_first = [u.target for u in graph.updates
                            if u.kind == "grad" and target_key(u.target) not in read]
        self.n_outputs = len(graph.outputs)
        self.returns_state = _returned_state(graph, self.n_outputs)
        self.backward = None
        if backward is not None:
            bwd_graph, self.diff_targets, self.diff_outputs = backward
            self.n_outputs -= len(bwd_graph.inputs) - len(self.diff_outputs)  # residuals
            avals = [(v.shape, v.dtype) for v in (graph.outputs[i] for i in self.diff_outputs)]
            self.backward = CompiledBackward(name, NumpyExecutor(bwd_graph, device=device),
                                             len(self.diff_outputs), avals)
            self.bwd_graph = bwd_graph

    def check_grads(self, args) -> str | None:
        """Why the state no longer fits this graph (None when it fits)."""
        for getter, expected, label in self.guards:
            now = getter()
            if now != expected:
                return f"{label} changed: {_short(expected)} -> {_short(now)}"
        for t, shape, dtype, flag, device, label in self.state_guards:
            if t._device is not device:
                return f"a {list(t.shape)} tensor moved from {device} to {t._device}"
            if t._requires_grad != flag:
                return (f"requires_grad of a {list(t.shape)} tensor changed: {flag} -> "
                        f"{t._requires_grad}")
            data = t._data
            if data.shape != shape or (data.dtype is not dtype and data.dtype != dtype):
                return (f"{label} changed from {dtype}{list(shape)} to "
                        f"{data.dtype}{list(data.shape)}")
        for target, was_none in self.grad_guards:
            t = target if target.__class__ is not tuple else args[target[1]]
            if (t.grad is None) is not was_none:
                return (f"the .grad of a {list(t.shape)} tensor was "
                        f"{'None' if was_none else 'set'} when traced and is now "
                        f"{'None' if t.grad is None else 'set'}")
        return None

    def run(self, args: list):
        for fn, before in self.host_calls:
            if before:
                fn()
        device = self.device
        if self.plain_inputs is not None:  # (state tensors checked by check_grads)
            inputs = [args[src]._data if src.__class__ is int else src._data
                      for src in self.plain_inputs]
        else:
            inputs = fetch_inputs(self.graph, args, self.executor.xp)
        for j, source in self.placed:
            inputs[j] = place(inputs[j], source, device)
        for target in self.clear_first:
            resolve(target, args).grad = None
        outs, updates, _ = self.executor.run(inputs)
        apply_updates(self.graph, args, updates, inputs, device)
        for fn, before in self.host_calls:
            if not before:
                fn()
        leaves = [Tensor._make(a, device) if same is None else resolve(same, args)
                  for a, same in zip(outs[:self.n_outputs], self.returns_state)]
        if self.backward is not None:
            # (a returned argument or parameter is that tensor: it needs no node)
            self.backward.attach([leaves[i] if self.returns_state[i] is None else None
                                  for i in self.diff_outputs],
                                 [resolve(t, args) for t in self.diff_targets],
                                 outs[self.n_outputs:])
        return unflatten(self.out_tree, leaves)


class CompiledFunction:
    """What ``ember.jit(fn)`` returns: call it like ``fn``."""

    def __init__(self, fn, *, fallback: bool = False, optimize: bool = True):
        functools.update_wrapper(self, fn, updated=())
        self.fn = fn
        self.fallback = fallback
        self.optimize = optimize
        self.cache: OrderedDict = OrderedDict()
        self.retraces: list[str] = []
        self._modules = None
        self._warned = False
        self._last_key = None
        self._modules_epoch = self._modules_state = None

    # Signature --------------------------------------------------------------------------
    def _key(self, leaves, tree):
        if self._modules is None:
            self._modules = _modules_reached(self.fn)
        aliases = None
        if len(leaves) > 1:
            ids = [id(t) for t in leaves]
            # which arguments are the same tensor (the graph reads a repeated one once)
            if len(set(ids)) < len(ids):
                aliases = tuple(ids.index(i) for i in ids)
        if self._modules_epoch != STATE_EPOCH[0]:  # (else the modules are as last read)
            self._modules_epoch = STATE_EPOCH[0]
            self._modules_state = tuple([(m.training, m.__dict__.get("_structure_version", 0))
                                         for m in self._modules])
        return ((tree, aliases),
                tuple([(t._data.shape, t._dtype, t._requires_grad, t.grad is None, t._device)
                       for t in leaves]),
                grad_mode._state.enabled, dtypes.get_default_dtype(),
                registry._autocast.key, self._modules_state)

    def __call__(self, *args, **kwargs):
        if registry._trace is not None:  # called inside another trace: trace inline
            return self.fn(*args, **kwargs)
        leaves, tree = _flatten_call(args, kwargs)
        key = self._key(leaves, tree)
        spec = self.cache.get(key)
        reason = None
        if spec is _EAGER:  # (fallback=True) this signature could not be traced
            return self.fn(*args, **kwargs)
        if spec is not None:
            reason = spec.check_grads(leaves)
            if reason is None:
                try:
                    return spec.run(leaves)
                except GuardFailure as failure:
                    reason = failure.reason
        if reason is None:
            reason = self._why(key)
        return self._trace_and_run(args, kwargs, leaves, key, reason)

    def _why(self, key) -> str:
        last = self._last_key
        if last is None:
            return "first call"
        names = ("argument structure or non-tensor values", "tensor shapes/dtypes/"
                 "requires_grad", "grad mode", "default dtype", "autocast state",
                 "training/eval mode or the modules' parameters, buffers or submodules")
        for name, a, b in zip(names, last, key):
            if a != b and name.startswith("argument"):
                if a[0] == b[0]:
                    return "which arguments are the same tensor changed"
                return f"{name} changed: {_describe(a[0])} -> {_describe(b[0])}"
            if a != b:
                if name.startswith("tensor"):
                    for i, (x, y) in enumerate(zip(a, b)):
                        if x != y:
                            return (f"tensor argument {i} changed: {_sig(x)} -> {_sig(y)}")
                return f"{name} changed: {_short(a)} -> {_short(b)}"
        return "state changed"

    def _trace_and_run(self, args, kwargs, leaves, key, reason):
        start = time.perf_counter()
        trace = Trace(_device_hint(leaves, self._modules), rewrites=self.optimize)
        try:
            with trace:
                for i, t in enumerate(leaves):
                    trace.add_arg(t, i, f"arg{i}")
                out = self.fn(*args, **kwargs)
                out_leaves, out_tree = flatten(out)
                out_values = [trace.value_of(t) for t in out_leaves]  # (lifts returned state)
                diff = [i for i, t in enumerate(out_leaves) if t._requires_grad] \
                    if grad_mode._state.enabled else []
                targets = trace_backward(trace, [out_leaves[i] for i in diff]) \
                    if diff else None
                if targets is None:
                    diff = []
                graph = trace.finish(out_values)
            del out, out_leaves
            trace.check_escapes(set())
            trace.fold_temporaries()
        except (DataDependentError, TraceError) as exc:
            if not self.fallback:
                raise
            if not self._warned:
                self._warned = True
                warnings.warn(f"ember.jit: running {self.__name__} eagerly: {exc}",
                              stacklevel=3)
            self.cache[key] = _EAGER
            self.retraces.append(f"{reason} (not traceable: runs eagerly)")
            self._last_key = key
            return self.fn(*args, **kwargs)
        device = _graph_device(trace, self.__name__)
        renderer = codegen.renderer_for(device)
        original = snapshot(graph)  # the passes rewrite graph in place
        if self.optimize:
            graph = passes.optimize(graph, passes.SIMPLIFY)
        backward = None
        if targets is not None:
            graph, bwd_graph, _ = split(graph)
            if self.optimize:
                bwd_graph = passes.lower(bwd_graph, renderer)
            backward = (bwd_graph, targets, diff)
        if self.optimize:
            graph = passes.lower(graph, renderer)
        spec = Specialization(graph, trace, out_tree, reason, time.perf_counter() - start,
                              original, backward, self.__name__, device, leaves)
        known = {id(m) for m in self._modules}
        new = [m for m in trace.modules_called.values() if id(m) not in known]
        if new:  # modules the function reached in ways _modules_reached cannot see
            self._modules = self._modules + new
            key = self._key(leaves, key[0][0])
        self.cache[key] = spec
        self.cache.move_to_end(key)
        while len(self.cache) > CACHE_SIZE:
            self.cache.popitem(last=False)
        self.retraces.append(reason)
        self._last_key = key
        _log(f"traced {self.__name__} ({reason}): {len(original.instrs)} ops -> "
             f"{len(graph.instrs)} after passes, {spec.trace_seconds * 1e3:.0f} ms")
        del trace  # (it holds the arrays it saw, old gradients among them)
        return spec.run(leaves)

    # Looking inside ---------------------------------------------------------------------
    def graph(self):
        """The optimised graph of the most recent specialisation."""
        return self.latest().graph

    def latest(self) -> Specialization:
        """The most recently traced specialisation."""
        specs = [s for s in self.cache.values() if s is not _EAGER]
        if not specs:
            raise EmberError("ember.jit: nothing traced yet; call the function first")
        return specs[-1]

    def explain(self) -> str:
        """Print and return what ember.jit made of the most recent specialisation:
        traces and their reasons, graph sizes, fusion, memory (see
        :func:`ember.compiler.explain`)."""
        text = explain_compiled(self)
        print(text)
        return text


def _device_hint(leaves, modules):
    """The device a graph will run on, when the arguments or the modules' parameters
    tell before tracing (so that 0-d CPU tensors read before any other join it)."""
    for t in leaves:
        if t._device is not CPU or t.ndim:
            return t._device
    for m in modules or ():
        for p in m.parameters():
            return p._device
    return None


def _graph_device(trace: Trace, name: str):
    """The one device of the tensors the traced function read (CPU when none)."""
    devices = sorted(trace.devices, key=str)
    if len(devices) > 1:
        raise EmberError(f"ember.jit: {name} reads tensors on several devices "
                         f"({', '.join(map(str, devices))}); a compiled function runs on "
                         "one device (0-d CPU tensors may join it): move them with "
                         ".to(device) before the call")
    return devices[0] if devices else trace.device or CPU


def _input_device(inp, args):
    """The device of the tensor a graph input reads (None for scalars and constants)."""
    if inp.kind == "arg":
        return args[inp.source]._device
    if inp.kind == "data":
        return inp.source._device
    if inp.kind == "grad":
        return resolve(inp.source, args)._device
    return None


def _returned_state(graph, n: int) -> list:
    """For each output: the argument or state tensor it is (eager mode returns that very
    tensor, updated in place or not), or None for a new tensor."""
    data_updates = [u for u in graph.updates if u.kind == "data"]
    updated = {target_key(u.target) for u in data_updates}
    # an input value is what its tensor holds only while nothing updates the tensor
    holds = {inp.value.id: input_target(inp) for inp in graph.inputs
             if inp.kind in ("arg", "data") and
             target_key(input_target(inp)) not in updated}
    holds.update((u.value.id, u.target) for u in data_updates if u.value is not None)
    return [holds.get(v.id) for v in graph.outputs[:n]]


def _describe(tree) -> str:
    """An argument structure from :func:`flatten`, readably: ``(T, scale=3.0)``."""
    args, kwargs = tree[1]
    parts = [_describe_node(n) for n in args[1]]
    parts += [f"{k}={_describe_node(v)}" for k, v in kwargs[1]]
    text = "(" + ", ".join(parts) + ")"
    return text if len(text) < 80 else text[:76] + "...)"


def _describe_node(node) -> str:
    tag = node[0]
    if tag == "T":
        return "tensor"
    if tag == "C":
        return repr(node[1])
    if tag == "dict":
        return "{" + ", ".join(f"{k!r}: {_describe_node(v)}" for k, v in node[1]) + "}"
    inner = ", ".join(_describe_node(n) for n in node[1])
    return f"[{inner}]" if tag == "list" else f"({inner})"


def _sig(x):
    shape, dtype, requires_grad, grad_none, device = x
    where = "" if device is CPU else f" on {device}"
    return f"{dtype.name}{list(shape)}{' requires_grad' if requires_grad else ''}{where}"


def _short(x) -> str:
    text = repr(x)
    return text if len(text) < 80 else text[:77] + "..."


def jit(fn=None, *, fallback: bool = False, optimize: bool = True):
    """Compile ``fn`` (a function or a Module) into an optimised static graph.

    The first call with a new signature traces ``fn`` on tracer tensors, recording
    every op (forward, ``backward()``, optimizer steps) into a graph; the graph is
    optimised and run, and later calls with the same signature run it directly.

    Args:
        fn: the function, or a Module (its forward is compiled).
        fallback: run eagerly (and warn once) instead of raising when ``fn`` does
            something a static graph cannot hold (``.item()``, ``if x > 0``).
        optimize: run the graph passes (turn off to debug a pass).

    >>> @ember.jit
    ... def f(x):
    ...     return (x * 2).sin().sum()
    >>> f(ember.ones(3))
    tensor(2.7279)
    """
    if fn is None:
        return lambda f: jit(f, fallback=fallback, optimize=optimize)
    from ..nn.module import Module
    if isinstance(fn, Module):
        from .module import CompiledModule
        return CompiledModule(fn, fallback=fallback, optimize=optimize)
    return CompiledFunction(fn, fallback=fallback, optimize=optimize)
