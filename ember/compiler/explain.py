"""Looking inside ``ember.jit``: what it captured, what the passes made of it, the
kernels it fused, a memory estimate, and why it traced each time.

:func:`explain` writes a report a user can read; :func:`to_dot` draws a graph for
Graphviz. Both read a :class:`~ember.compiler.jit.CompiledFunction`'s specialisations
and never change them.
"""
from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
import tempfile

from ..errors import EmberError
from ..ops.registry import OPS
from .ir import Graph, Instr, Update


def snapshot(graph: Graph) -> Graph:
    """A copy of ``graph``'s structure (instruction, output and update lists; the
    values, inputs, constants and ops themselves are shared), which the passes, rewriting
    the original in place, leave as it was: what ``explain`` shows as captured."""
    copy = Graph()
    for name, item in vars(graph).items():
        setattr(copy, name, list(item) if isinstance(item, list) else item)
    copy.instrs = [_copy_instr(ins) for ins in graph.instrs]
    copy.updates = [Update(u.kind, u.target, u.value, u.label) for u in graph.updates]
    return copy


def _copy_instr(ins: Instr) -> Instr:
    twin = Instr.__new__(Instr)
    for name in Instr.__slots__:
        if hasattr(ins, name):
            setattr(twin, name, getattr(ins, name))
    twin.inputs, twin.outputs = list(ins.inputs), list(ins.outputs)
    return twin


# explain ----------------------------------------------------------------------------------
def explain(fn, *args, **kwargs) -> str:
    """Print, and return, what ``ember.jit`` does with ``fn``.

    ``fn`` is a function or Module (compiled here) or an ``ember.jit`` function. Like
    ``torch._dynamo.explain``, the function is called once with ``args`` and
    ``kwargs`` (so a training step takes a step); an already compiled function called
    before is explained without calling it again when no arguments are given.
    ``ember.jit.explain`` is this function.

    The report holds every trace and its reason; the captured graph's size and the
    optimised graph; the fusion groups and any generated kernel source; and a memory
    estimate. The estimate sums :attr:`Value.nbytes` of the values alive at each
    instruction (outputs of view ops share their base's memory; inputs and constants,
    which the caller or the compiled function hold anyway, are listed apart):

    - compiled: over the optimised graph, each value freed after its last reader, as
      the NumPy executor frees it;
    - eager: over the captured graph, in two bounds — each value freed after its last
      reader (eager mode cannot do better; Python variables keep some values longer)
      and none freed before the function returns.

    Args:
        fn: the function, Module or compiled function.
        *args, **kwargs: what to call it with.

    Returns:
        The report (also printed).

    >>> text = ember.jit.explain(lambda x: (x * 2).sin().sum(), ember.ones(3))
    """
    from .jit import CompiledFunction, flatten, jit
    compiled = fn if _is_compiled(fn) else jit(fn)
    spec = None
    if args or kwargs or not compiled.cache:
        key = None
        if isinstance(compiled, CompiledFunction):
            key = compiled._key(*flatten((args, kwargs)))
        compiled(*args, **kwargs)
        spec = compiled.cache.get(key)
        if isinstance(spec, str):  # ran eagerly (fallback=True): report the traces only
            spec = None
    text = explain_compiled(compiled, spec)
    print(text)
    return text


def _is_compiled(fn) -> bool:
    return hasattr(fn, "cache") and hasattr(fn, "retraces")


def explain_compiled(compiled, spec=None) -> str:
    """The report of :func:`explain` for a compiled function (its most recent
    specialisation unless ``spec`` is given), without calling it."""
    if spec is None:
        try:
            spec = compiled.latest()
        except EmberError:
            raise EmberError("ember.jit: nothing traced yet; call the function first or "
                             "pass example arguments: ember.jit.explain(fn, *args)") from None
    graph = spec.graph
    original = spec.original if spec.original is not None else graph
    name = getattr(compiled, "__name__", type(compiled).__name__)
    lines = [f"ember.jit explain: {name}"]
    backward = _backward_graph(spec)
    lines += _traces_section(compiled)
    lines += _graph_section(compiled, spec, original, graph, backward)
    lines += _fusion_section(graph, backward)
    lines += _memory_section(original, graph, backward)
    lines.append("optimised graph:")
    lines += ["  " + line for line in str(graph).splitlines()[1:]]
    if backward is not None:
        lines.append("optimised backward graph:")
        lines += ["  " + line for line in str(backward).splitlines()[1:]]
    return "\n".join(lines)


def _backward_graph(spec) -> Graph | None:
    """The graph ``.backward()`` runs, where the function's result is differentiated
    through a graph of its own."""
    for candidate in (getattr(spec, "bwd_graph", None), getattr(spec, "backward", None)):
        if isinstance(candidate, tuple) and candidate:
            candidate = candidate[0]
        if isinstance(candidate, Graph):
            return candidate
    return None


def _traces_section(compiled) -> list[str]:
    reasons = list(compiled.retraces)
    lines = [f"traced {len(reasons)} time{'s' if len(reasons) != 1 else ''} "
             f"({max(len(reasons) - 1, 0)} retrace{'s' if len(reasons) != 2 else ''}):"]
    lines += [f"  {i}. {reason}" for i, reason in enumerate(reasons, 1)]
    return lines


def _graph_section(compiled, spec, original, graph, backward) -> list[str]:
    from . import passes
    n0, n1 = len(original.instrs), len(graph.instrs)
    n_back = 0 if backward is None else len(backward.instrs)
    names = ", ".join(p.__name__ for p in passes.PIPELINE) if getattr(
        compiled, "optimize", True) else "none (optimize=False)"
    counts = collections.Counter(ins.op.name for ins in graph.instrs)
    back = "" if backward is None else f" + {n_back} in the backward graph"
    seconds = getattr(spec, "trace_seconds", None)
    rewritten = getattr(spec, "rewritten", None)
    took = f" in {seconds * 1e3:.0f} ms" if seconds is not None else ""
    return [
        f"graph (traced because: {spec.reason}{took}):",
        f"  captured:     {n0} instructions, {len(original.inputs)} inputs, "
        f"{len(original.constants)} constants",
        f"  after passes: {n1} instructions{back} ({n1 + n_back - n0:+d}), "
        f"{len(graph.inputs)} inputs, {len(graph.constants)} constants",
        f"  passes: {names}",
    ] + ([f"  rewritten while tracing: " + ", ".join(
        f"{name} x{n}" for name, n in sorted(rewritten.items()))] if rewritten else []) + [
        "  ops: " + ", ".join(f"{op} {n}" for op, n in counts.most_common()),
    ]


def is_registry_op(op) -> bool:
    """Whether ``op`` is a registry primitive (or the tracer's random draw) rather than
    a kernel a pass made."""
    from .trace import RANDOM
    return OPS.get(getattr(op, "name", None)) is op or op is RANDOM


def _members(op) -> list[str]:
    """Names of what a fused kernel computes, from whatever list it keeps."""
    for attr in ("steps", "instrs", "members", "ops"):
        items = getattr(op, attr, None)
        if isinstance(items, (list, tuple)) and items:
            return [getattr(getattr(m, "op", m), "name", type(m).__name__) for m in items]
    return []


def _fusion_section(graph, backward=None) -> list[str]:
    groups: dict = {}  # kernels alike (same name and program) are listed once
    for ins in graph.instrs + ([] if backward is None else backward.instrs):
        op = ins.op
        if is_registry_op(op):
            continue
        name = getattr(op, "name", type(op).__name__)
        program = _SHAPE.sub("[..]", _describe(op))  # alike kernels over other shapes
        key = (name, program, tuple(_members(op)))
        groups.setdefault(key, []).append(op)
    if not groups:
        return ["fusion groups: none", "generated kernels: none"]
    total = sum(len(ops) for ops in groups.values())
    lines = [f"fusion groups: {total} ({len(groups)} distinct)"]
    sources: dict[str, list[str]] = {}
    for (name, program, members), ops in groups.items():
        backend = getattr(ops[0], "backend", None)
        what = (f"{len(members)} ops: {', '.join(members)}" if members
                else "contents unknown")
        lines.append(f"  {name} x{len(ops)} ({what})"
                     + (f" [runs as {backend}]" if isinstance(backend, str) else ""))
        domains = [getattr(op, "domain", None) for op in ops]
        if all(isinstance(d, tuple) for d in domains):
            lines.append("      over " + ", ".join(str(list(d)) for d in domains))
        lines += ["      " + line for line in program.splitlines()]
        source = _source(ops[0])
        if source:
            sources.setdefault(source, []).append(name)
    lines.append(f"generated kernels: {len(sources)} distinct" if sources else
                 "generated kernels: none")
    for source, names in sources.items():
        lines.append(f"  --- {', '.join(dict.fromkeys(names))}")
        lines += ["    " + line for line in source.rstrip().splitlines()]
    return lines


_SHAPE = re.compile(r"\[[0-9][0-9, ]*\]")


def _describe(op) -> str:
    describe = getattr(op, "describe", None)
    if not callable(describe):
        return ""
    try:
        return str(describe())
    except Exception:  # a report must not fail on a kernel it cannot describe
        return ""


def _source(op) -> str | None:
    """The kernel's generated code: kept on it as ``source``, or rendered again by the
    backend it was lowered with (rendering compiles nothing)."""
    source = getattr(op, "source", None)
    if isinstance(source, str) and source.strip():
        return source
    backend = getattr(op, "backend", None)
    try:
        from .codegen import RENDERERS
        factory = RENDERERS.get(backend) if isinstance(backend, str) else None
        return factory().render(op) if factory is not None else None
    except Exception:  # no source to show is better than no report
        return None


# memory -----------------------------------------------------------------------------------
def peak_bytes(graph: Graph, free_dead: bool = True) -> int:
    """Largest sum of the sizes of instruction results alive at once.

    A view op's result shares its input's memory (it keeps that memory alive instead
    of adding to it); results read by nothing are freed at once. With ``free_dead``,
    a result dies after its last reader unless it is an output or update; without it,
    nothing dies before the end. Inputs and constants are not counted."""
    owner: dict[int, int] = {}
    size: dict[int, int] = {}
    for ins in graph.instrs:
        view = getattr(ins.op, "is_view", False) and ins.inputs
        for v in ins.outputs:
            if view:
                owner[v.id] = owner.get(ins.inputs[0].id, -1)  # -1: an input's memory
            else:
                owner[v.id] = v.id
                size[v.id] = v.nbytes
    end = len(graph.instrs)
    last: dict[int, int] = {}
    for i, ins in enumerate(graph.instrs):
        for v in ins.inputs:
            o = owner.get(v.id)
            if o is not None:
                last[o] = i
    for v in graph.live_roots():
        o = owner.get(v.id)
        if o is not None:
            last[o] = end
    dies: dict[int, list[int]] = collections.defaultdict(list)
    live = peak = 0
    for i, ins in enumerate(graph.instrs):
        for v in ins.outputs:
            if owner[v.id] == v.id:
                live += size[v.id]
                dies[max(last.get(v.id, i), i) if free_dead else end].append(v.id)
        peak = max(peak, live)
        for o in dies.pop(i, ()):
            live -= size[o]
    return peak


def _memory_section(original, graph, backward=None) -> list[str]:
    inputs = sum(inp.value.nbytes for inp in graph.inputs)
    constants = sum(c.array.nbytes for c in graph.constants)
    split = [] if backward is None else [
        f"  compiled backward graph: peak {_bytes(peak_bytes(backward))} of "
        "intermediates (above the forward values it reads)"]
    return [
        "memory (estimated from value sizes):",
        f"  inputs held by the caller: {_bytes(inputs)}; constants: {_bytes(constants)}",
        f"  eager peak of intermediates: {_bytes(peak_bytes(original))} if each is freed "
        f"after its last use (a lower bound), {_bytes(peak_bytes(original, False))} if "
        "none is freed before the function returns (an upper bound)",
        f"  compiled peak of intermediates: {_bytes(peak_bytes(graph))} (the optimised "
        "graph, each value freed after its last use, as the executor does)",
    ] + split


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


# Graphviz ---------------------------------------------------------------------------------
def to_dot(compiled_or_graph, path: str | os.PathLike | None = None) -> str:
    """The graph as Graphviz DOT text: one node per input, constant, instruction,
    output and update, an edge per value read (labelled with its dtype and shape).

    With ``path``, the text is written there and, where Graphviz's ``dot`` program is
    installed, drawn into an SVG next to it (``step.dot`` -> ``step.svg``; a ``path``
    ending in ``.svg`` gets the drawing, and the text goes to the ``.dot`` beside it).

    Args:
        compiled_or_graph: an ``ember.jit`` function (its most recent optimised graph)
            or a :class:`~ember.compiler.ir.Graph`.
        path: where to write it, or None to only return the text.

    >>> dot = ember.compiler.to_dot(compiled, "step.dot")
    """
    graph = compiled_or_graph if isinstance(compiled_or_graph, Graph) else \
        compiled_or_graph.graph()
    lines = ["digraph ember_graph {", "  rankdir=TB;",
             '  node [fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=8];']
    source: dict[int, tuple[str, int, int]] = {}  # value id -> (node, output index, count)
    for i, inp in enumerate(graph.inputs):
        node = f"in{i}"
        source[inp.value.id] = (node, 0, 1)
        lines.append(f'  {node} [shape=ellipse, label="{_esc(inp.label or inp.kind)}\\n'
                     f'{_esc(_type(inp.value))}"];')
    for i, c in enumerate(graph.constants):
        node = f"c{i}"
        source[c.value.id] = (node, 0, 1)
        shown = repr(c.array.reshape(-1)[0].item()) if c.array.size == 1 else "const"
        lines.append(f'  {node} [shape=note, label="{_esc(shown)}\\n'
                     f'{_esc(_type(c.value))}"];')
    for k, ins in enumerate(graph.instrs):
        node = f"i{k}"
        fused = not is_registry_op(ins.op)
        style = ', style=filled, fillcolor="#cfe2f3"' if fused else \
            ", style=dashed" if ins.effect else ""
        lines.append(f'  {node} [shape=box{style}, label="{_esc(ins.op.name)}"];')
        for v in ins.inputs:
            lines.append(_edge(source.get(v.id), node, v))
        for j, v in enumerate(ins.outputs):
            source[v.id] = (node, j, len(ins.outputs))
    for k, v in enumerate(graph.outputs):
        lines.append(f'  out{k} [shape=doubleoctagon, label="output {k}"];')
        lines.append(_edge(source.get(v.id), f"out{k}", v))
    for k, u in enumerate(graph.updates):
        what = "data" if u.kind == "data" else "grad"
        label = f"{u.label or 'tensor'}.{what}" + (" = None" if u.value is None else "")
        lines.append(f'  upd{k} [shape=house, label="{_esc(label)}"];')
        if u.value is not None:
            lines.append(_edge(source.get(u.value.id), f"upd{k}", u.value))
    lines = [line for line in lines if line]
    lines.append("}")
    text = "\n".join(lines) + "\n"
    if path is not None:
        _write_dot(text, os.fspath(path))
    return text


def _type(v) -> str:
    return f"{v.dtype.name}{list(v.shape)}"


def _esc(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _edge(src, dst: str, v) -> str:
    if src is None:  # a value from outside this graph (only in a malformed graph)
        return ""
    node, index, count = src
    port = f"#{index} " if count > 1 else ""
    return f'  {node} -> {dst} [label="{_esc(port + _type(v))}"];'


def _write_dot(text: str, path: str) -> None:
    root, ext = os.path.splitext(path)
    dot_path, svg_path = (root + ".dot", path) if ext.lower() == ".svg" else \
        (path, root + ".svg")
    folder = os.path.dirname(os.path.abspath(dot_path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".ember-dot-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, dot_path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dot = shutil.which("dot")
    if dot is None:
        return
    try:
        subprocess.run([dot, "-Tsvg", dot_path, "-o", svg_path], capture_output=True,
                       timeout=120, check=False)
    except (OSError, subprocess.SubprocessError):
        pass  # the drawing is a convenience; the DOT file is written
