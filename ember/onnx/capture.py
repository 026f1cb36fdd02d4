"""Capture a model's forward for export: ember.jit's tracer, run twice when axes are
dynamic.

The tracer records concrete shapes. To learn which sizes in the graph follow a dynamic
axis (a reshape target that embeds the batch size, a constant made with ``zeros(b, n)``),
the forward is traced a second time with every dynamic axis at another size; a size
that differs between the two traces depends on a dynamic axis, one that agrees is
static. Nothing runs: tracing records ops and restores every tensor it reached.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np

from ..compiler.ir import Graph, Value
from ..compiler.jit import flatten, unflatten
from ..errors import EmberError
from ..ops.creation import zeros


class OnnxExportError(EmberError):
    """A model that ``ember.onnx.export`` cannot write: an op without an ONNX mapping, a
    size that changes with a dynamic axis in a way ONNX cannot express, bad arguments."""


@dataclass
class Capture:
    """The traced graph at the example shapes and, when axes are dynamic, what the
    second trace saw for each value, constant and instruction."""
    graph: Graph
    scopes: dict[int, str]            # id(instr) -> module path that issued it
    alt_shapes: dict[int, tuple] = field(default_factory=dict)   # value id -> shape
    alt_params: dict[int, dict] = field(default_factory=dict)    # id(instr) -> params
    alt_arrays: dict[int, np.ndarray] = field(default_factory=dict)  # const value id

    def alt_shape(self, v: Value) -> tuple:
        return self.alt_shapes.get(v.id, v.shape)

    def dynamic_dims(self, v: Value) -> list[bool]:
        alt = self.alt_shape(v)
        return [a != b for a, b in zip(v.shape, alt)]


def capture(model, args: tuple, dynamic: dict[int, dict[int, str]]) -> Capture:
    """Trace ``model(*args)``; ``dynamic`` maps a flattened input position to its dynamic
    axes (axis -> name)."""
    from ..train.tb_graph import trace_forward
    with _stand_ins(model):
        graph, scopes = trace_forward(model, args)
    result = Capture(graph, scopes)
    if not dynamic:
        return result
    alt_args = _alternative_args(args, dynamic)
    try:
        with _stand_ins(model):
            alt_graph, _ = trace_forward(model, alt_args)
    except EmberError as exc:
        sizes = _describe_alt(alt_args)
        raise OnnxExportError(
            f"ember.onnx.export: the model does not run with the dynamic axes at other "
            f"sizes (traced again with inputs of shapes {sizes}): {exc}. Mark as dynamic "
            "only axes the model accepts at any size (a model with a fixed context "
            "length has no dynamic sequence axis).") from None
    _match(result, alt_graph)
    return result


@contextlib.contextmanager
def _stand_ins(model):
    """Modules that trace as one export-only instruction (nn.LSTM, quantized layers):
    within, their instance's ``forward`` is replaced by one that records it."""
    from .map_quant import stand_in_forward as quantized_stand_in
    from .map_rnn import stand_in_forward as lstm_stand_in
    patched = []
    for _, m in (model.named_modules() if hasattr(model, "named_modules") else ()):
        if "forward" in vars(m):
            continue
        forward = lstm_stand_in(m) or quantized_stand_in(m)
        if forward is not None:
            m.forward = forward
            patched.append(m)
    try:
        yield
    finally:
        for m in patched:
            del m.forward


def _alternative_args(args, dynamic):
    """``args`` with every dynamic axis at another size: distinct per axis name, so two
    axes that happen to share a size are told apart."""
    leaves, tree = flatten(args)
    names: dict[str, int] = {}
    new_leaves = []
    for i, t in enumerate(leaves):
        shape = list(t.shape)
        for axis, name in dynamic.get(i, {}).items():
            if name not in names:
                k = len(names)
                size = shape[axis]
                names[name] = size - 1 - k if size - 1 - k >= 2 else size + 1 + k
            shape[axis] = names[name]
        new_leaves.append(zeros(*shape, dtype=t.dtype, device=t.device))
    return unflatten(tree, new_leaves)


def _describe_alt(args) -> str:
    return ", ".join(str(tuple(t.shape)) for t in flatten(args)[0])


def _match(result: Capture, alt: Graph) -> None:
    """Pair each value of the second trace with the first's, by position."""
    g = result.graph
    same = len(g.instrs) == len(alt.instrs) and len(g.inputs) == len(alt.inputs) and \
        len(g.constants) == len(alt.constants) and len(g.outputs) == len(alt.outputs) and \
        all(a.op.name == b.op.name for a, b in zip(g.instrs, alt.instrs))
    if not same:
        first = next((a for a, b in zip(g.instrs, alt.instrs) if a.op.name != b.op.name),
                     None)
        where = f" (first difference: {first.op.name} at {first.where})" if first else ""
        raise OnnxExportError(
            "ember.onnx.export: the model's forward issues different ops when a dynamic "
            f"axis changes size ({len(g.instrs)} ops vs {len(alt.instrs)}){where}: Python "
            "control flow or a loop over a dynamic axis (an unrolled recurrence over the "
            "sequence) cannot become one ONNX graph. Keep that axis static.")
    shapes = result.alt_shapes
    for a, b in zip(g.inputs, alt.inputs):
        shapes[a.value.id] = b.value.shape
    for a, b in zip(g.constants, alt.constants):
        shapes[a.value.id] = b.value.shape
        result.alt_arrays[a.value.id] = np.asarray(b.array)
    for a, b in zip(g.instrs, alt.instrs):
        result.alt_params[id(a)] = b.params
        for va, vb in zip(a.outputs, b.outputs):
            shapes[va.id] = vb.shape
