"""Running a captured graph: the NumPy executor, and binding a graph's inputs, outputs
and updates to the tensors of a call.

The executor turns the instruction list into a flat program over numbered slots: each
instruction calls its op's forward on the slots it reads and frees the slots nothing
reads afterwards (so intermediate arrays die as early as in eager mode, or earlier).
The program runs as one generated Python function, a line per step
(:mod:`ember.compiler.straightline`).

A graph runs on one device: every op gets that device's array module, the fused kernels
are lowered by its renderer (:func:`~ember.compiler.codegen.renderer_for`), and the
arrays the executor makes itself (constants, scalar inputs) are that backend's.
"""
from __future__ import annotations

import numpy as np

from ..backends import CPU, cpu_blas
from ..errors import EmberError
from ..ops import c_loops
from ..ops.shape import _cat_forward
from ..tensor import Tensor
from . import codegen, straightline
from .ir import Graph
from .straightline import WRITTEN


class GuardFailure(Exception):
    """A state input no longer fits the graph (a grad became None, a buffer was
    replaced by one of another shape): the function must be traced again."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _reshape_forward(xp, a, shape):
    return a.reshape(shape)


def _join_forward(xp, *arrays, dim):
    """``cat``: where the arrays are already side by side along ``dim`` in one buffer
    (the q, k and v gradients of attention's fused backward), a view of that buffer;
    else a copy. (Inside a graph nothing writes into an op's result, so sharing its
    memory is safe; eagerly it is not: ``cat`` itself always copies.)"""
    first = arrays[0]
    if xp is np and len(arrays) > 1 and first.__class__ is np.ndarray and \
            first.base is not None and 0 <= dim < first.ndim:
        strides, step = first.strides, first.strides[dim]
        at = first.__array_interface__["data"][0] + first.shape[dim] * step
        for a in arrays[1:]:
            if a.__class__ is not np.ndarray or a.base is not first.base or \
                    a.strides != strides or a.dtype != first.dtype or \
                    a.shape[:dim] + a.shape[dim + 1:] != first.shape[:dim] + first.shape[dim + 1:] \
                    or a.__array_interface__["data"][0] != at:
                break
            at += a.shape[dim] * step
        else:
            shape = list(first.shape)
            shape[dim] = sum(a.shape[dim] for a in arrays)
            return np.lib.stride_tricks.as_strided(first, tuple(shape), strides)
    return _cat_forward(xp, *arrays, dim=dim)


# Ops whose eager forward depends on a memory layout the graph does not fix: in the graph
# a value has no strides, so "view" is any reshape (a copy where the strides need one),
# and "cat" of pieces already side by side in one buffer is a view of it.
LAYOUT_FREE = {"view": _reshape_forward, "cat": _join_forward}


def _loop_uses(graph: Graph) -> list:
    """(op name, dtype of its first input) of each instruction: which hand-written C
    loops the graph's ops may call (:func:`ember.ops.c_loops.sources_for`)."""
    return [(ins.op.name, ins.inputs[0].dtype.np) for ins in graph.instrs if ins.inputs]


class NumpyExecutor:
    """Runs a graph's instructions one by one with each op's forward, on ``device``
    (default the CPU). ``keep_inputs``: indices of inputs the run must not write into
    (copies of tensors of another device: their updates are applied afterwards)."""

    def __init__(self, graph: Graph, compile_now: bool = False, device=None,
                 keep_inputs=()):
        self.device = CPU if device is None else device
        self.backend = self.device.backend
        self.xp = self.backend.xp
        slots: dict[int, int] = {}

        def slot(v):
            if v.id not in slots:
                slots[v.id] = len(slots)
            return slots[v.id]

        self.input_slots = [slot(inp.value) for inp in graph.inputs]
        # (constants are host arrays: see ember.compiler.trace)
        self.constants = [(slot(c.value), self.backend.asarray(c.array))
                          for c in graph.constants]
        keep = {v.id for v in graph.live_roots()}
        last_use: dict[int, int] = {}
        for i, ins in enumerate(graph.instrs):
            for v in ins.inputs:
                last_use[v.id] = i
        program = []
        for i, ins in enumerate(graph.instrs):
            ins_slots = tuple(slot(v) for v in ins.inputs)
            outs = tuple(slot(v) for v in ins.outputs)
            frees = tuple({slots[v.id] for v in ins.inputs
                           if last_use.get(v.id) == i and v.id not in keep})
            frees += tuple(slots[v.id] for v in ins.outputs
                           if v.id not in last_use and v.id not in keep)
            forward = LAYOUT_FREE.get(ins.op.name, ins.op.forward)
            program.append((forward, ins_slots, outs[0] if len(outs) == 1 else outs,
                            ins.params, frees, ins, None))
        self.program = program
        extra, renderer = [], codegen.renderer_for(self.device)
        if self.device is CPU and renderer == "c":
            extra = c_loops.sources_for(_loop_uses(graph))
            # the specialized calls below build the BLAS driver and the GEMM: where they
            # are not built yet, build them now, in one parallel batch with the graph's
            # kernels (a cold first call then waits for one batch, not two)
            driver = cpu_blas.unbuilt_sources() if any(
                getattr(ins.op, "specialize", None) for ins in graph.instrs) else []
            if driver:
                extra += driver
                compile_now = True
        codegen.prepare_kernels([ins.op for ins in graph.instrs], compile_now, renderer,
                                extra)
        self.output_slots = [slot(v) for v in graph.outputs]
        self.update_slots = [None if u.value is None else slot(u.value) for u in graph.updates]
        position = {inp.value.id: j for j, inp in enumerate(graph.inputs)}
        self.in_place = {}  # instr index -> [(update, slots)]
        for i, writes in plan_in_place_updates(graph).items():
            writes = [w for w in writes if position[w[2]] not in keep_inputs]
            if writes:
                self.in_place[i] = writes
        for i, writes in self.in_place.items():
            copies = [(k, slots[vid], position[tid]) for k, vid, tid, o in writes if o is None]
            direct = [(k, o, position[tid]) for k, vid, tid, o in writes if o is not None]
            self.program[i] = self.program[i][:6] + ((copies, direct),)
        if self.device is CPU:
            self.specialize(graph)
        self.grad_slots = [None if v is None else slot(v) for v in graph.grad_outputs]
        self._straight = None  # the program as one function, made at the first run

    def specialize(self, graph: Graph) -> None:
        """Instructions whose op has a ``specialize`` rule call the forward it gives for
        their inputs' shapes and dtypes (its params bound): work that depends only on
        those is done here, once, not at every call. Not where the run writes the
        result into a tensor's array (the ``out`` of an in-place update), nor, for a
        forward that lays its results out its own way (``changes_layout``), where one
        leaves the graph (an output, a gradient, an update: its user expects the op's
        own layout)."""
        leaving = {v.id for v in graph.live_roots()}
        for i, (forward, ins, outs, params, frees, instr, writes) in enumerate(self.program):
            rule = getattr(instr.op, "specialize", None)  # (fused kernels have none)
            if rule is None or writes is not None or instr.op.name in LAYOUT_FREE:
                continue
            run = rule([(v.shape, v.dtype.np) for v in instr.inputs], **params)
            if run is not None and getattr(run, "changes_layout", False) and \
                    any(v.id in leaving for v in instr.outputs):
                run = None
            if run is not None:
                self.program[i] = (run, ins, outs, {}, frees, instr, writes)

    def run(self, inputs: list) -> tuple[list, list, list]:
        """(output arrays, update arrays, gradient arrays) for the input arrays."""
        if getattr(self.backend, "scoped", False):  # one of several GPUs
            with self.backend.activate():
                return self._run(inputs)
        return self._run(inputs)

    def _run(self, inputs: list) -> tuple[list, list, list]:
        if self._straight is None:
            self._straight = straightline.build(
                self.program, self.input_slots, self.constants, self.output_slots,
                self.update_slots, self.grad_slots, _runtime_error)
        return self._straight(inputs, self.xp)


def plan_in_place_updates(graph: Graph) -> dict:
    """Where each data update can be written into its tensor's own array during the
    run, instead of into a new array copied at the end: right after the later of the
    instruction that makes the new value and the last reader of the old value (or of
    anything that may share its memory). Where that instruction is a fused kernel
    that is the last reader of the old value and reads it element by element, the
    kernel writes the new value straight into the tensor's array (``out=``). Returns
    {instr index: [(update index, value id, old value id, kernel output index or None
    for a copy)]}. Only values made by fused kernels (always fresh arrays) are written
    this way; the peak memory of a training step then stays that of eager mode, where
    each parameter is updated in place."""
    made_at = {v.id: i for i, ins in enumerate(graph.instrs) for v in ins.outputs}
    last_use: dict[int, int] = {}
    for i, ins in enumerate(graph.instrs):
        for v in ins.inputs:
            last_use[v.id] = i
    old_value = {target_key(input_target(inp)): inp.value for inp in graph.inputs
                 if inp.kind in ("arg", "data")}
    roots: dict[int, int] = {}
    for v in graph.live_roots():
        roots[v.id] = roots.get(v.id, 0) + 1
    plan: dict = {}
    for k, u in enumerate(graph.updates):
        if u.kind != "data" or u.value is None or roots.get(u.value.id) != 1:
            continue
        at = made_at.get(u.value.id)
        old = old_value.get(target_key(u.target))
        if old is None or at is None or old.id in roots or \
                not getattr(graph.instrs[at].op, "fresh_outputs", False):
            continue
        kernel = graph.instrs[at]
        last = _last_alias_use(graph, old, last_use)
        direct = None
        if last <= at and u.value.dtype is old.dtype and u.value.shape == old.shape and \
                all(kernel.op.writes_in_place(j) for j, v in enumerate(kernel.inputs)
                    if v.id == old.id):
            direct = u.value.index
        plan.setdefault(max(at, last), []).append((k, u.value.id, old.id, direct))
    return plan


def _may_alias(op) -> bool:
    """Whether ``op``'s outputs may share memory with its inputs: views, and a graph's
    layout-free reshapes. Every other op returns fresh arrays (the op tables check it
    for the whole registry: a result only a view may share its input's memory)."""
    return getattr(op, "is_view", False) or op.name in LAYOUT_FREE


def _last_alias_use(graph, old, last_use) -> int:
    """The last instruction reading ``old`` or a value that may share its memory
    (anything computed from it by views)."""
    shared = {old.id}
    last = last_use.get(old.id, -1)
    for ins in graph.instrs:
        if not _may_alias(ins.op):
            continue
        if any(v.id in shared for v in ins.inputs):
            for v in ins.outputs:
                shared.add(v.id)
                last = max(last, last_use.get(v.id, -1))
    return last


def place(array, source, target):
    """``array``, an array of device ``source``, as an array of device ``target`` (a
    copy where they differ)."""
    if source is target:
        return array
    src, dst = source.backend, target.backend
    if dst.xp is not src.xp:
        array = src.to_numpy(array)
    return dst.asarray(array)


def _runtime_error(instr, exc):
    return EmberError(f"ember.jit: {instr.op.name} (traced at {instr.where}) failed when "
                      f"the compiled graph ran: {exc}")


# Binding a graph to a call ----------------------------------------------------------------
def resolve(target, args):
    """The tensor an input or update refers to: an argument or a tensor object."""
    if target.__class__ is tuple:
        return args[target[1]]
    return target


def target_key(target):
    """A hashable key for an input's or update's target: ``("arg", i)`` or the tensor's
    id."""
    return target if target.__class__ is tuple else id(target)


def input_target(inp):
    """The target an input of kind "arg" or "data" reads."""
    return ("arg", inp.source) if inp.kind == "arg" else inp.source


def fetch_inputs(graph: Graph, args: list, xp=np) -> list:
    """The arrays to feed the graph's inputs for this call (raises GuardFailure when a
    state tensor no longer matches what was traced); scalar inputs are made with the
    array module ``xp``."""
    arrays = []
    for inp in graph.inputs:
        kind = inp.kind
        if kind == "arg":
            arr = args[inp.source]._data
        elif kind == "data":
            arr = inp.source._data
        elif kind in ("cotangent", "residual"):
            continue  # fed by the autograd node (ember.compiler.autodiff), not fetched
        elif kind == "grad":
            owner = resolve(inp.source, args)
            grad = owner.grad
            if grad is None:
                raise GuardFailure(f"{inp.label} was read when traced but is now None")
            arr = grad._data
        else:
            arr = xp.asarray(inp.source(), dtype=inp.value.dtype.np)
        v = inp.value
        if kind != "arg" and (arr.shape != v.shape or arr.dtype != v.dtype.np):
            raise GuardFailure(f"{inp.label} changed from {v.dtype.name}{list(v.shape)} to "
                               f"{arr.dtype}{list(arr.shape)}")
        arrays.append(arr)
    return arrays


def apply_updates(graph: Graph, args: list, arrays: list, inputs: list,
                  device=CPU) -> None:
    """Write the update values (arrays of ``device``) into their tensors (data in
    place, grads as new tensors that own their memory)."""
    if not graph.updates:
        return
    fed = {id(a) for a in inputs}
    seen = set()
    for u, arr in zip(graph.updates, arrays):
        t = resolve(u.target, args)
        if arr is WRITTEN:
            t._version[0] += 1
        elif u.kind == "data":
            t._device.backend.xp.copyto(t._data, place(arr, device, t._device),
                                        casting="unsafe")
            t._version[0] += 1
        elif arr is None:
            t.grad = None
        else:
            arr = place(arr, device, t._device)
            if id(arr) in fed or id(arr) in seen or arr.base is not None or \
                    not getattr(arr.flags, "writeable", True) or not arr.flags.c_contiguous:
                arr = arr.copy()
            seen.add(id(arr))
            t.grad = Tensor._make(arr, t._device)
