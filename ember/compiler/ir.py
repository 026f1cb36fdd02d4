"""The graph IR that ``ember.jit`` captures: SSA values and the instructions that make
them, each instruction an op of the same registry eager mode runs.

A :class:`Graph` has

- ``inputs``: values fed at every call — a positional tensor argument, the current data
  or ``.grad`` of a tensor the function reached (a parameter, a buffer, optimizer state),
  or a Python scalar read through a getter (a learning rate);
- ``constants``: values known when tracing (arrays made inside the function);
- ``instrs``: in program order; an instruction with ``effect`` set (a random draw) is
  never removed, merged or reordered past another effect;
- ``outputs``: the values the function returns;
- ``updates``: in-place updates as explicit outputs — "tensor ``t``'s data becomes value
  ``v``" or "``t.grad`` becomes ``v`` (or None)".
"""
from __future__ import annotations

import itertools

import numpy as np

from ..dtypes import DType

_ids = itertools.count()


class Value:
    """One SSA value: a shape and a dtype, made by exactly one instruction, input or
    constant."""
    __slots__ = ("id", "shape", "dtype", "producer", "index", "__weakref__")

    def __init__(self, shape, dtype: DType, producer=None, index: int = 0):
        self.id = next(_ids)
        self.shape = tuple(shape)
        self.dtype = dtype
        self.producer = producer  # the Instr, an Input, or a Constant
        self.index = index        # which output of its instruction

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def __repr__(self) -> str:
        return f"%{self.id}"

    def describe(self) -> str:
        return f"%{self.id}:{self.dtype.name}{list(self.shape)}"


class Input:
    """Where an input value comes from at each call.

    ``kind`` is ``"arg"`` (``source`` = position among the flattened tensor arguments),
    ``"data"`` or ``"grad"`` (``source`` = the tensor whose data / .grad is read), or
    ``"scalar"`` (``source`` = a zero-argument function returning a Python number).
    """
    __slots__ = ("kind", "source", "value", "label")

    def __init__(self, kind: str, source, value: Value, label: str = ""):
        self.kind, self.source, self.value, self.label = kind, source, value, label
        value.producer = self


class Constant:
    """A value known at trace time (an array made inside the traced function)."""
    __slots__ = ("array", "value")

    def __init__(self, array, value: Value):
        self.array, self.value = array, value
        value.producer = self


class Instr:
    """``outputs = op(*inputs, **params)``; ``op`` is an :class:`ember.ops.registry.Op`
    (or a fused kernel made by a pass, which has the same ``forward`` signature)."""
    __slots__ = ("op", "inputs", "params", "outputs", "effect", "where", "region")

    def __init__(self, op, inputs, params, out_avals, effect: bool = False, where: str = ""):
        self.op = op
        self.inputs = list(inputs)
        self.params = params
        self.outputs = [Value(shape, dtype, self, i) for i, (shape, dtype) in
                        enumerate(out_avals)]
        self.effect = effect
        self.where = where  # the user's file:line that issued it
        # a recompute region (ember.utils.checkpoint's backward): never merged with the
        # same computation outside it, so the forward's intermediates can die early
        self.region = None

    def __repr__(self) -> str:
        outs = ", ".join(v.describe() for v in self.outputs)
        args = ", ".join(map(repr, self.inputs))
        params = ", ".join(f"{k}={_short(v)}" for k, v in self.params.items())
        sep = ", " if args and params else ""
        mark = "!" if self.effect else ""
        return f"{outs} = {self.op.name}{mark}({args}{sep}{params})"


class Update:
    """After the call, ``target``'s data (``kind="data"``) or ``.grad`` (``"grad"``)
    becomes ``value`` (None clears a grad)."""
    __slots__ = ("kind", "target", "value", "label")

    def __init__(self, kind: str, target, value: Value | None, label: str = ""):
        self.kind, self.target, self.value, self.label = kind, target, value, label

    def __repr__(self) -> str:
        what = "data" if self.kind == "data" else "grad"
        return f"{self.label or 'tensor'}.{what} <- {self.value!r}"


class Graph:
    """A captured function: inputs, constants, instructions, outputs and updates."""

    def __init__(self):
        self.inputs: list[Input] = []
        self.constants: list[Constant] = []
        self.instrs: list[Instr] = []
        self.outputs: list[Value] = []
        self.updates: list[Update] = []
        # Gradients of the outputs' cotangents (inputs of kind "cotangent") with respect
        # to the differentiable inputs, when the function is differentiated as a whole.
        self.grad_outputs: list[Value | None] = []

    def live_roots(self) -> list[Value]:
        """The values the caller sees: outputs, update values and gradients."""
        return self.outputs + [u.value for u in self.updates if u.value is not None] + \
            [v for v in self.grad_outputs if v is not None]

    def users(self) -> dict[int, list[Instr]]:
        """Value id -> the instructions reading it."""
        users: dict[int, list[Instr]] = {}
        for ins in self.instrs:
            for v in ins.inputs:
                users.setdefault(v.id, []).append(ins)
        return users

    def replace_uses(self, mapping: dict[int, Value]) -> None:
        """Read ``mapping[v.id]`` wherever ``v`` was read (instructions, outputs,
        updates)."""
        if not mapping:
            return

        def resolve(v):
            while v is not None and v.id in mapping:
                v = mapping[v.id]
            return v
        for ins in self.instrs:
            ins.inputs = [resolve(v) for v in ins.inputs]
        self.outputs = [resolve(v) for v in self.outputs]
        self.grad_outputs = [resolve(v) for v in self.grad_outputs]
        for u in self.updates:
            u.value = resolve(u.value)

    def __str__(self) -> str:
        lines = []
        for inp in self.inputs:
            lines.append(f"  in    {inp.value.describe()}  <- {inp.kind} {inp.label}")
        for c in self.constants:
            lines.append(f"  const {c.value.describe()}")
        for ins in self.instrs:
            lines.append(f"  {ins!r}")
        lines.append("  return " + ", ".join(map(repr, self.outputs)))
        if self.grad_outputs:
            lines.append("  gradients " + ", ".join(map(repr, self.grad_outputs)))
        for u in self.updates:
            lines.append(f"  update {u!r}")
        return "graph:\n" + "\n".join(lines)


def _short(v) -> str:
    if isinstance(v, np.ndarray):
        return f"array{list(v.shape)}"
    if isinstance(v, (list, tuple)) and len(v) > 6:
        return f"{type(v).__name__}[{len(v)}]"
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."
