"""The model graph for TensorBoard: trace a module's forward with ember.jit's tracer and
write the captured graph as a TensorFlow ``GraphDef`` (the protos tensorboardX ships),
which TensorBoard's Graphs tab draws.

Nodes: one per graph input (a positional argument ``input_<i>``, or a parameter or
buffer named by its state-dict key with ``/`` for ``.``: ``blocks/0/fc1/weight``), one
per constant (``Const``, next to the instruction that first reads it) and one per
instruction (its registry op as the node's op, ``<module path>/<op>[_<k>]``). TensorBoard
folds names on ``/``, so each module becomes a box holding its parameters and the ops
its ``forward`` issued. Every node carries ``_output_shapes`` and ``dtype``;
instructions also their ``params`` and the ``source`` line that issued them.

Tracing records and never runs: nothing is computed, no random number is drawn, and
every tensor the forward reached gets its data, version and grad back (ember.jit's
``Trace`` restores them). The forward hooks that note which module issued each op are
removed afterwards. Calling the model through ``ember.jit`` would run the traced graph
once as well, drawing dropout masks and updating batch-norm statistics, so the trace is
used directly.
"""
from __future__ import annotations

import re

import numpy as np

from ..autograd.grad_mode import no_grad
from ..compiler.ir import Graph
from ..tensor import Tensor

__all__ = ["trace_forward", "graph_def"]

# TensorFlow's DataType enum (tensorboardX/proto/types.proto), by ember dtype name
_DT = {"float32": 1, "float64": 2, "int32": 3, "uint8": 4, "int16": 5, "int8": 6,
       "int64": 9, "bool": 10, "bfloat16": 14, "float16": 19}
_BAD_CHARS = re.compile(r"[^A-Za-z0-9_./]")


def trace_forward(model, args: tuple) -> tuple[Graph, dict[int, str]]:
    """Capture ``model(*args)`` without gradients; returns the graph (its ``arg``
    inputs numbered over the tensors in ``args``, nested ones included) and, for each
    instruction (by ``id``), the dotted path of the innermost module whose forward
    issued it (``""`` for the model's own ``forward``)."""
    from ..compiler.jit import flatten
    from ..compiler.trace import Trace
    trace = Trace()
    instrs = trace.graph.instrs
    scopes: dict[int, str] = {}
    starts: list[int] = []

    def enter(module, inputs):
        starts.append(len(instrs))

    def make_leave(path):
        def leave(module, inputs, output):
            # inner modules leave first, so an op keeps the innermost module's path
            for ins in instrs[starts.pop():]:
                scopes.setdefault(id(ins), path)
        return leave

    handles = []
    try:
        for path, module in model.named_modules():
            handles.append(module.register_forward_pre_hook(enter, prepend=True))
            handles.append(module.register_forward_hook(make_leave(path), always_call=True))
        with no_grad(), trace:
            for i, t in enumerate(flatten(args)[0]):  # tensors, also inside lists/dicts
                trace.add_arg(t, i, f"input_{i}")
            out = model(*args)
            out_leaves, _ = flatten(out)
            graph = trace.finish([trace.value_of(t) for t in out_leaves])
            del out, out_leaves
    finally:
        for h in handles:
            h.remove()
    trace.check_escapes(set())
    trace.fold_temporaries()  # tensors made inside forward become constants
    return graph, scopes


def graph_def(graph: Graph, model, scopes: dict[int, str]):
    """The ``GraphDef`` of ``graph`` (from :func:`trace_forward` on ``model``)."""
    from tensorboardX.proto.graph_pb2 import GraphDef
    from tensorboardX.proto.versions_pb2 import VersionDef

    state = {id(t): name for name, t in model.named_parameters()}
    buffers = {id(t): name for name, t in model.named_buffers()}
    state.update(buffers)
    # the modules' boxes (named_modules lists every level): no node may take their names
    names = _Names({_path(path) for path, _ in model.named_modules() if path})
    producer: dict[int, str] = {}  # value id -> "node" or "node:k"
    nodes = []

    # the scope of a value's first reader places unnamed inputs and constants
    first_reader: dict[int, str] = {}
    for ins in graph.instrs:
        for v in ins.inputs:
            first_reader.setdefault(v.id, _path(scopes.get(id(ins), "")))

    for inp in graph.inputs:
        v = inp.value
        if inp.kind == "arg":
            name, op = names.take(f"input_{inp.source}"), "Input"
        elif inp.kind == "data" and id(inp.source) in state:
            key = state[id(inp.source)]
            name = names.take(_path(key))
            op = "Buffer" if id(inp.source) in buffers else "Parameter"
        elif inp.kind == "grad" and id(inp.source) in state:
            name, op = names.take(_path(state[id(inp.source)]) + "_grad"), "Grad"
        else:  # a tensor the forward reached outside the model's state, a scalar
            name = names.take(_join(first_reader.get(v.id, ""), inp.kind))
            op = "Scalar" if inp.kind == "scalar" else "Tensor"
        producer[v.id] = name
        nodes.append(_node(name, op, [], [v]))

    for c in graph.constants:
        v = c.value
        name = names.take(_join(first_reader.get(v.id, ""), "const"))
        producer[v.id] = name
        extra = {}
        if c.array.size == 1:
            extra["value"] = repr(np.asarray(c.array).reshape(-1)[0].item())
        nodes.append(_node(name, "Const", [], [v], extra))

    for ins in graph.instrs:
        scope = _path(scopes.get(id(ins), ""))
        name = names.take(_join(scope, ins.op.name))
        edges = [producer.get(v.id, "") for v in ins.inputs]
        extra = {"params": _params(ins.params)}
        if ins.where:
            extra["source"] = ins.where
        nodes.append(_node(name, ins.op.name, [e for e in edges if e], ins.outputs, extra))
        for k, v in enumerate(ins.outputs):
            producer[v.id] = name if k == 0 else f"{name}:{k}"
    return GraphDef(node=nodes, versions=VersionDef(producer=22))


class _Names:
    """Unique node names, numbered TensorFlow's way on repeats (``linear``,
    ``linear_1``, ...), that never take the name of a module's box."""

    def __init__(self, groups: set[str]):
        self.taken = set(groups)
        self.counts: dict[str, int] = {}

    def take(self, name: str) -> str:
        k = self.counts.get(name, 0)
        candidate = name if k == 0 else f"{name}_{k}"
        while candidate in self.taken:
            k += 1
            candidate = f"{name}_{k}"
        self.counts[name] = k + 1
        self.taken.add(candidate)
        return candidate


def _path(dotted: str) -> str:
    """A state-dict key or module path as a TensorBoard node name (``.`` -> ``/``)."""
    return _BAD_CHARS.sub("_", dotted.replace(".", "/"))


def _join(scope: str, leaf: str) -> str:
    return f"{scope}/{leaf}" if scope else leaf


def _node(name: str, op: str, inputs: list[str], values, extra: dict | None = None):
    from tensorboardX.proto.attr_value_pb2 import AttrValue
    from tensorboardX.proto.node_def_pb2 import NodeDef
    from tensorboardX.proto.tensor_shape_pb2 import TensorShapeProto
    shapes = [TensorShapeProto(dim=[TensorShapeProto.Dim(size=int(n)) for n in v.shape])
              for v in values]
    attr = {"_output_shapes": AttrValue(list=AttrValue.ListValue(shape=shapes))}
    if values:
        attr["dtype"] = AttrValue(type=_DT.get(values[0].dtype.name, 0))
    for key, text in (extra or {}).items():
        if text:
            attr[key] = AttrValue(s=text.encode("utf-8"))
    return NodeDef(name=name, op=op, input=inputs, attr=attr)


def _params(params: dict) -> str:
    """An instruction's parameters as ``k=v`` text (functions left out, arrays by
    shape, long values cut)."""
    parts = []
    for key, value in params.items():
        if callable(value):
            continue
        if isinstance(value, np.ndarray):
            text = f"array{list(value.shape)}"
        elif isinstance(value, Tensor):
            text = f"tensor{list(value.shape)}"
        else:
            text = repr(value)
            text = text if len(text) <= 60 else text[:57] + "..."
        parts.append(f"{key}={text}")
    return ", ".join(parts)
