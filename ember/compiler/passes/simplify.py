"""Algebraic simplification: rewrite instructions that compute nothing new.

Rules, each exact (the same numbers, shape and dtype, never a tolerance):

- identities: ``x + 0``, ``0 + x``, ``x - 0``, ``x * 1``, ``1 * x``, ``x / 1``, ``x ** 1``
  become ``x`` when the result has ``x``'s shape and dtype (a constant that broadcasts
  ``x`` up, or promotes it, keeps the instruction). A constant counts as 0 or 1 when
  every element is; ``x + 0`` maps ``-0.0`` to ``+0.0``, which compares equal;
- ``neg(neg(x))``, ``cast(x)`` to ``x``'s own dtype, ``clone(x)`` (the graph is
  functional: nothing writes into ``x`` afterwards), ``view``/``expand`` to ``x``'s own
  shape and ``permute`` by the identity become ``x``;
- chains: ``view(view(x))`` is one ``view`` of ``x``, ``expand(expand(x))`` one
  ``expand``, ``permute(permute(x))`` one ``permute`` (or ``x`` when they cancel);
- broadcasts feeding an elementwise op: an operand made by ``expand(s)``, or a constant
  whose elements are all equal, is read as ``s`` (or a 0-d constant) when the op's
  result keeps its shape, so the broadcast array is never made.

What the caller receives (an output or an update) is replaced only by a fresh array no
other output, view, input or constant shares, so no result aliases anything it did not
alias in eager mode. Instructions with an effect, and kernels that are not registry ops,
are never touched. Instructions a rewrite bypasses (the inner ``view`` of a chain) are
left for dead-code elimination.
"""
from __future__ import annotations

import numpy as np

from ...ops.registry import OPS
from ..ir import Constant, Graph, Instr, Value

# Ops computed element by element over broadcast operands: any operand may be replaced
# by one that broadcasts to the same result shape.
ELEMENTWISE = frozenset({
    "add", "sub", "mul", "div", "floor_divide", "trunc_divide", "remainder", "fmod", "pow",
    "maximum", "minimum", "fmax", "fmin", "atan2", "xlogy", "where", "lerp", "clamp",
    "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
    "bitwise_and", "bitwise_or", "bitwise_xor"})

# Constants up to this many elements are scanned to see whether all elements are equal
# (bigger ones count only when they are a broadcast of one element).
UNIFORM_SCAN_LIMIT = 1 << 16


def simplify(graph: Graph) -> Graph:
    """Apply the rules above once, in program order (so chains collapse fully).

    Example: ``x.transpose(0, 1).transpose(0, 1) * 1`` becomes ``x``."""
    facts = _Facts(graph)
    mapping: dict[int, Value] = {}
    kept = []
    for ins in graph.instrs:
        ins.inputs = [mapping.get(v.id, v) for v in ins.inputs]
        rule = RULES.get(ins.op.name)
        if rule is not None and not ins.effect and OPS.get(ins.op.name) is ins.op:
            replacement = rule(ins, facts)
            if replacement is not None and facts.may_replace(ins.outputs[0], replacement):
                mapping[ins.outputs[0].id] = replacement
                if ins.outputs[0].id in facts.roots:
                    facts.roots.add(replacement.id)
                continue
        facts.produced(ins)
        kept.append(ins)
    graph.instrs = kept
    graph.replace_uses(mapping)
    return graph


class _Facts:
    """What the rules may ask about values: constant contents, producers, roots."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.constants = {c.value.id: c.array for c in graph.constants}
        self.producer: dict[int, Instr] = {}
        self.roots = {v.id for v in graph.live_roots()}
        self.viewed = {v.id for ins in graph.instrs if getattr(ins.op, "is_view", False)
                       for v in ins.inputs}
        self._uniform: dict[int, object] = {}
        self._scalars: dict[int, Value] = {}

    def produced(self, ins: Instr) -> None:
        for v in ins.outputs:
            self.producer[v.id] = ins

    def made_by(self, v: Value, name: str) -> Instr | None:
        """The instruction that made ``v`` when it is the registry op ``name``."""
        ins = self.producer.get(v.id)
        if ins is None or ins.effect or ins.op.name != name or OPS.get(name) is not ins.op:
            return None
        return ins

    def uniform(self, v: Value):
        """The one element of constant ``v`` when all its elements are equal, else
        None."""
        if v.id not in self._uniform:
            a = self.constants.get(v.id)
            value = None
            if a is not None and a.size > 0:
                first = a[(0,) * a.ndim]
                broadcast = all(s == 0 for s in a.strides)  # one element, repeated
                if a.size == 1 or broadcast or (a.size <= UNIFORM_SCAN_LIMIT and
                                                bool((a == first).all())):
                    value = first.item()
            self._uniform[v.id] = value
        return self._uniform[v.id]

    def is_number(self, v: Value, number) -> bool:
        u = self.uniform(v)
        return u is not None and not isinstance(u, (bytes, str)) and u == number

    def scalar_constant(self, v: Value) -> Value:
        """A 0-d constant holding the one element of uniform constant ``v``."""
        if v.id not in self._scalars:
            a = self.constants[v.id]
            array = np.asarray(a[(0,) * a.ndim])
            value = self._scalars[v.id] = Value((), v.dtype)
            self.graph.constants.append(Constant(array, value))
            self.constants[value.id] = array
        return self._scalars[v.id]

    def may_replace(self, old: Value, new: Value) -> bool:
        """Whether readers of ``old`` may read ``new`` instead. A value the caller
        receives must stay a fresh array: ``new`` must be made by a non-view
        instruction, and no other result or view may share it."""
        if old.id not in self.roots:
            return True
        ins = self.producer.get(new.id)
        return (ins is not None and not getattr(ins.op, "is_view", False)
                and new.id not in self.roots and new.id not in self.viewed)


def _same_as(ins: Instr, x: Value) -> bool:
    out = ins.outputs[0]
    return out.shape == x.shape and out.dtype is x.dtype


# Rules: each returns the value the instruction's output equals, or None (having
# possibly rewritten the instruction's inputs and parameters in place).
def _drop_broadcasts(ins: Instr, facts: _Facts) -> None:
    out_shape = ins.outputs[0].shape
    for i, v in enumerate(ins.inputs):
        source = None
        expand = facts.made_by(v, "expand")
        if expand is not None:
            source = expand.inputs[0]
        elif v.shape and v.id in facts.constants and facts.uniform(v) is not None:
            source = facts.scalar_constant(v)
        if source is None:
            continue
        shapes = [source.shape if j == i else w.shape for j, w in enumerate(ins.inputs)]
        if np.broadcast_shapes(*shapes) == out_shape:
            ins.inputs = ins.inputs[:i] + [source] + ins.inputs[i + 1:]


def _binary_identity(unit, left_too: bool):
    def rule(ins, facts):
        _drop_broadcasts(ins, facts)
        a, b = ins.inputs
        if facts.is_number(b, unit) and _same_as(ins, a):
            return a
        if left_too and facts.is_number(a, unit) and _same_as(ins, b):
            return b
        return None
    return rule


def _elementwise(ins, facts):
    _drop_broadcasts(ins, facts)
    return None


def _neg(ins, facts):
    inner = facts.made_by(ins.inputs[0], "neg")
    return inner.inputs[0] if inner is not None else None


def _cast(ins, facts):
    x = ins.inputs[0]
    return x if ins.params.get("dtype") is x.dtype else None


def _clone(ins, facts):
    return ins.inputs[0]


def _chain(name, param):
    """``name(name(x, p), q)`` is ``name(x, q)``; ``name(x, x.shape)`` is ``x``."""
    def rule(ins, facts):
        inner = facts.made_by(ins.inputs[0], name)
        if inner is not None:
            ins.inputs = [inner.inputs[0]]
            facts.viewed.add(inner.inputs[0].id)
        x = ins.inputs[0]
        return x if tuple(ins.params[param]) == x.shape else None
    return rule


def _permute(ins, facts):
    dims = tuple(int(d) for d in ins.params["dims"])
    inner = facts.made_by(ins.inputs[0], "permute")
    if inner is not None:
        first = inner.params["dims"]
        dims = tuple(int(first[d]) for d in dims)
        ins.inputs = [inner.inputs[0]]
        ins.params = {**ins.params, "dims": dims}
        facts.viewed.add(inner.inputs[0].id)
    return ins.inputs[0] if dims == tuple(range(len(dims))) else None


RULES = {
    "add": _binary_identity(0, left_too=True),
    "sub": _binary_identity(0, left_too=False),
    "mul": _binary_identity(1, left_too=True),
    "div": _binary_identity(1, left_too=False),
    "pow": _binary_identity(1, left_too=False),
    "neg": _neg,
    "cast": _cast,
    "clone": _clone,
    "view": _chain("view", "shape"),
    "expand": _chain("expand", "shape"),
    "permute": _permute,
}
for _name in ELEMENTWISE - RULES.keys():
    RULES[_name] = _elementwise
