"""Capture: run a function once on tracer tensors and record every op into a
:class:`~ember.compiler.ir.Graph`.

A traced tensor is an ordinary :class:`~ember.Tensor` whose data is a
:class:`TracerArray` (a shape, a dtype and the SSA value it stands for) instead of an
array. ``ember.ops.registry.apply`` hands ops on such tensors to the active
:class:`Trace`, which records them and answers with new tracer arrays, so everything
above the registry — modules, the autograd engine, optimizers — runs unchanged and is
recorded op by op.

Tensors the function reaches that existed before (parameters, buffers, optimizer
state, ``.grad``) are *lifted*: their data becomes a graph input read at every call.
In-place ops rebind a tensor to its new value (``ember.ops.inplace``), and what a lifted
tensor holds when the function returns becomes an explicit update of the graph. The
lifted tensors get their real data back when tracing ends.

A graph runs on one device (:attr:`Trace.device`: that of the tensors it reads). As in
eager mode, a 0-d CPU tensor (a step counter) may join tensors of another device: while
traced it is seen on the graph's device, and the executor copies its value over.
Graph constants are host NumPy arrays whatever the device (the passes and the ONNX
exporter read them); the executor places them on the graph's device.
"""
from __future__ import annotations

import gc
import os
import sys
import weakref

import numpy as np

from ..backends import CPU
from ..dtypes import as_dtype
from ..errors import EmberError
from ..ops import registry
from ..ops.registry import AbstractValue, Op
from ..tensor import set_value_read_hook
from .ir import Constant, Graph, Input, Instr, Update, Value

_EMBER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class TraceError(EmberError):
    """Something in a function ``ember.jit`` cannot capture: control flow on tensor
    values, a traced tensor leaking out of the function, an op that cannot be traced."""


class DataDependentError(TraceError, AttributeError):
    """A traced tensor's value was read (``.item()``, ``bool(x)``, ``.numpy()``).

    Also an ``AttributeError`` so that ``hasattr`` probes on a tracer answer False."""


def user_frame(skip_ember: bool = True) -> str:
    """``file:line`` of the innermost caller outside the ember package."""
    f = sys._getframe(1)
    while f is not None:
        filename = f.f_code.co_filename
        if not (skip_ember and filename.startswith(_EMBER_DIR)):
            return f"{filename}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>"


def _ember_entry() -> str:
    """The ember function the user called that ended up reading a tracer's data."""
    f = sys._getframe(1)
    name = None
    while f is not None and f.f_code.co_filename.startswith(_EMBER_DIR):
        name = f.f_code.co_name
        f = f.f_back
    return name or "?"


_HOW = {"item": "x.item()", "__bool__": "bool(x) / `if x:`", "__float__": "float(x)",
        "__int__": "int(x)", "__index__": "using x as an index", "numpy": "x.numpy()",
        "tolist": "x.tolist()", "__array__": "np.asarray(x)", "__len__": "len(x)"}


class _Flags:
    c_contiguous = True
    f_contiguous = False
    writeable = True
    owndata = True


class TracerArray:
    """What a traced tensor holds instead of an array: its value's shape and dtype.

    Reading the data (``.item()``, ``bool()``, NumPy calls) raises
    :class:`DataDependentError`, naming the user's line."""
    __slots__ = ("value", "trace")
    _ember_tracer = True
    flags = _Flags()
    base = None

    def __init__(self, value: Value, trace: "Trace"):
        self.value = value
        self.trace = trace

    shape = property(lambda self: self.value.shape)
    dtype = property(lambda self: self.value.dtype.np)
    ndim = property(lambda self: len(self.value.shape))
    size = property(lambda self: int(np.prod(self.value.shape, dtype=np.int64)))
    itemsize = property(lambda self: self.value.dtype.itemsize)
    nbytes = property(lambda self: self.size * self.itemsize)

    @property
    def strides(self):
        out, step = [], self.itemsize
        for n in reversed(self.value.shape):
            out.append(step)
            step *= max(n, 1)
        return tuple(reversed(out))

    def _read(self, *args, **kwargs):
        raise data_error(self.value)

    __array__ = __bool__ = __float__ = __int__ = __index__ = __getitem__ = __setitem__ = \
        __iter__ = __array_ufunc__ = __array_function__ = _read

    def __getattr__(self, name):
        raise data_error(self.value, name)

    def __repr__(self) -> str:
        return f"TracerArray({self.value.describe()})"


def data_error(value: Value, attr: str | None = None) -> DataDependentError:
    entry = _ember_entry()
    how = _HOW.get(entry, f"{entry}() (it reads the tensor's data{'' if attr is None else ' .' + attr})")
    return DataDependentError(
        f"ember.jit: {how} at {user_frame()} needs the value of a traced tensor "
        f"({value.dtype.name}{list(value.shape)}), which is not known while tracing. "
        "Python control flow and conversions run once, at trace time. Use tensor ops "
        "instead (ember.where(cond, a, b) for a branch, keep the value as a tensor), move "
        "the line out of the compiled function, or compile with "
        "ember.jit(fn, fallback=True) to run such calls eagerly.")


def _random_forward(xp, *, make, rng):
    return make(rng())


RANDOM = Op("random", _random_forward, saves_inputs=False)


class _Lifted:
    """A tensor that existed before tracing, its real state, and its graph input.

    ``owner`` is set when the tensor is another lifted tensor's ``.grad`` (then it is
    read, and updated, as that tensor's grad rather than as an object of its own)."""
    __slots__ = ("tensor", "data", "version", "grad", "input", "owner", "grad_none", "node",
                 "view_version", "device")

    def __init__(self, tensor, inp: Input, owner=None, grad_none: bool = True):
        self.tensor, self.data, self.input, self.owner = tensor, tensor._data, inp, owner
        self.device = tensor._device
        self.version, self.grad = tensor._version[0], tensor.grad
        self.grad_none = grad_none  # was .grad None when the function was entered
        self.node = (tensor._node, tensor._out_index, tensor._requires_grad)
        self.view_version = tensor._view_version

    def host_data(self):
        """The tensor's real data as a host NumPy array (a graph constant)."""
        return self.device.backend.to_numpy(self.data)


class Trace:
    """The state of one capture; active while ``registry._trace`` is this object.

    ``device``: the device the graph runs on, when known before tracing (else the
    device of the first tensor lifted that is not a 0-d CPU tensor); ``devices``: the
    devices of the lifted tensors other than 0-d CPU ones (one, for a graph that can
    run)."""

    def __init__(self, device=None, rewrites: bool = False):
        self.device = device
        self.devices: set = set()
        self.graph = Graph()
        self.lifted: dict[int, _Lifted] = {}
        self.by_shape: dict[tuple, list] = {}  # lifted tensors by shape (grad owners)
        self.made = weakref.WeakSet()      # traced tensors made by ops
        self.tensors = weakref.WeakValueDictionary()  # value id -> the tensor holding it
        self.numbers = weakref.WeakValueDictionary()  # id -> a 0-d tensor made from a number
        # op name -> a rewrite (ember.compiler.rewrites), while none is running
        self.rewrites = None
        self.rewritten: dict = {}          # rewrite name -> how many times it applied
        if rewrites:
            from .rewrites import REWRITES
            self.rewrites = REWRITES
        self.scalars: dict = {}            # key -> scalar Input
        self.host_calls: list = []         # (callable, runs before the graph?)
        self.guards: list = []             # (getter, value when traced, label)
        self.value_reads: set = set()      # ids of tensors whose values Python read
        self.cleared: dict = {}            # id -> tensor whose grad the function cleared
        self.entry_grad_none: dict = {}    # id -> was its grad None on entry
        self.entry_grads: dict = {}        # id -> its grad on entry (to restore)
        self.done = False
        self.region = None                 # the recompute region being traced, if any
        # ember.utils.checkpoint: the draws its forward made (a list collecting them)
        # and, while its recomputation is traced, those draws to hand out again
        self.draw_log: list | None = None
        self.replay = None
        self.modules_called: dict = {}     # id -> Module whose __call__ ran while tracing

    # Activation ---------------------------------------------------------------------
    def __enter__(self) -> "Trace":
        if registry._trace is not None:
            raise TraceError("ember.jit: a compiled function was called while another is "
                             "being traced; nested ember.jit functions are traced inline "
                             "only when called as plain Python (call fn.__wrapped__)")
        registry._trace = self
        set_value_read_hook(self._note_value_read)
        return self

    def __exit__(self, *exc) -> None:
        registry._trace = None
        set_value_read_hook(None)
        self.restore()

    def _note_value_read(self, t) -> None:
        """Python read the values of ``t`` (not a traced value): they are baked into the
        graph, so a later write to ``t`` (a new version, or new storage) retraces."""
        if id(t) in self.value_reads or isinstance(t._data, TracerArray):
            return
        self.value_reads.add(id(t))
        data, version = t._data, t._version[0]
        self.guard(lambda: t._version[0] if t._data is data else -1, version,
                   f"the version of a {list(t.shape)} tensor whose values were read while "
                   f"tracing (by .item(), .tolist(), bool(), ...)")

    # Values -------------------------------------------------------------------------
    def add_arg(self, tensor, position: int, label: str) -> None:
        """Make a positional tensor argument a graph input (fed from the call)."""
        if id(tensor) not in self.lifted:
            self._lift(tensor, "arg", position, label)

    def traced_value(self, t) -> Value | None:
        """The value a tensor made while tracing stands for (None for other tensors)."""
        data = t._data
        return data.value if data.__class__ is TracerArray and data.trace is self else None

    def tensor_of(self, value: Value):
        """The tensor (still alive) that holds ``value``, or None."""
        return self.tensors.get(value.id)

    def note(self, t) -> None:
        """``t`` was made by an op while tracing."""
        self.made.add(t)
        self.tensors[t._data.value.id] = t

    def rewrite(self, op, inputs, params):
        """What a rewrite (:mod:`ember.compiler.rewrites`) records instead of ``op``, or
        None (then ``op`` is recorded as it is)."""
        rule = self.rewrites.get(op.name)
        if rule is None:
            return None
        saved, self.rewrites = self.rewrites, None  # (not while one runs)
        try:
            result = rule(self, op, inputs, params)
        finally:
            self.rewrites = saved
        if result is not None:
            self.rewritten[rule.__name__] = self.rewritten.get(rule.__name__, 0) + 1
        return result

    def value_of(self, t) -> Value:
        data = t._data
        if data.__class__ is TracerArray:
            if data.trace is not self:
                raise escaped_error(data.value)
            return data.value
        owner = self._grad_owner(t)
        if owner is not None:
            return self._lift(t, "grad", _target(owner), f"{owner.input.label}.grad", owner)
        return self._lift(t, "data", t, f"tensor{list(data.shape)}")

    def _grad_owner(self, t):
        """The lifted tensor whose ``.grad`` is ``t`` (among those of its shape)."""
        for rec in self.by_shape.get(t._data.shape, ()):
            if rec.tensor.grad is t and rec.owner is None:
                return rec
        return None

    def _lift(self, t, kind, source, label, owner=None) -> Value:
        data = t._data
        value = Value(data.shape, as_dtype(data.dtype))
        inp = Input(kind, source, value, label)
        self.graph.inputs.append(inp)
        grad_none = self.entry_grad_none.get(id(t), t.grad is None)
        rec = self.lifted[id(t)] = _Lifted(t, inp, owner, grad_none)
        scalar_on_cpu = t._device is CPU and len(data.shape) == 0
        if scalar_on_cpu and self.device is not None:
            t._device = self.device  # seen on the graph's device (restored on exit)
        elif self.device is None and not scalar_on_cpu:
            self.device = t._device
        if not scalar_on_cpu:
            self.devices.add(t._device)
        self.by_shape.setdefault(data.shape, []).append(rec)
        t._data = TracerArray(value, self)
        self.tensors[value.id] = t
        t._node = None  # inside the graph a lifted tensor is where gradients stop
        return value

    def clear_grad(self, t) -> None:
        """``t.grad = None`` inside the function (``zero_grad``): applied at every call."""
        key = id(t)
        if key not in self.cleared:
            self.cleared[key] = t
            if key not in self.lifted:
                self.entry_grad_none.setdefault(key, t.grad is None)
                self.entry_grads.setdefault(key, t.grad)
        t.grad = None

    def scalar(self, key, getter, dtype) -> "Value":
        """A 0-d input read from ``getter()`` at every call (a learning rate)."""
        inp = self.scalars.get(key)
        if inp is None:
            value = Value((), dtype)
            inp = self.scalars[key] = Input("scalar", getter, value, str(key))
            self.graph.inputs.append(inp)
        return inp.value

    def scalar_tensor(self, key, getter, dtype):
        """:meth:`scalar` as a traced 0-d tensor (on the graph's device)."""
        from ..tensor import Tensor
        return Tensor._make(TracerArray(self.scalar(key, getter, dtype), self),
                            self.device or CPU)

    def guard(self, getter, expected, label: str) -> None:
        """Retrace when ``getter()`` no longer equals ``expected`` (Python state the
        trace baked in, like an optimizer's betas)."""
        self.guards.append((getter, expected, label))

    # Recording ----------------------------------------------------------------------
    def emit(self, op, inputs, params):
        """Record ``op(*inputs, **params)``; returns its tracer array(s)."""
        if op.dynamic_shape:
            raise TraceError(f"ember.jit: {op.name} at {user_frame()} makes a tensor whose "
                             "shape depends on the values, which a static graph cannot "
                             "hold; compute it outside the compiled function or use "
                             "ember.jit(fn, fallback=True)")
        for v in params.values():
            if v.__class__ is TracerArray or isinstance(v, (tuple, list)) and \
                    any(x.__class__ is TracerArray for x in v):
                raise TraceError(f"ember.jit: {op.name} at {user_frame()} uses a traced "
                                 "tensor's values as an argument (an index or a size), "
                                 "which ember.jit cannot capture yet")
        values = [self.value_of(t) for t in inputs]
        avals = [AbstractValue(v.shape, v.dtype) for v in values]
        out = registry.infer(op, *avals, **params)
        multi = op.n_outputs != 1
        outs = out if multi else (out,)
        ins = Instr(op, values, params, [(a.shape, a.dtype) for a in outs], where=user_frame())
        ins.region = self.region
        self.graph.instrs.append(ins)
        arrays = tuple(TracerArray(v, self) for v in ins.outputs)
        return arrays if multi else arrays[0]

    def draw(self, make, rng, shape, np_dtype):
        """A random array made by ``make(generator)`` at every call, in program order
        (while a checkpoint's recomputation is traced: the forward's array again)."""
        if self.replay is not None:
            value = next(self.replay, None)
            if value is not None and value.shape == tuple(shape) and \
                    value.dtype.np == np.dtype(np_dtype):
                return TracerArray(value, self)
            self.replay = None  # the recomputation draws differently: draw afresh
        ins = Instr(RANDOM, [], {"make": make, "rng": rng},
                    [(tuple(shape), as_dtype(np.dtype(np_dtype)))], effect=True,
                    where=user_frame())
        self.graph.instrs.append(ins)
        if self.draw_log is not None:
            self.draw_log.append(ins.outputs[0])
        return TracerArray(ins.outputs[0], self)

    def host_call(self, fn) -> None:
        """Run ``fn()`` (Python-only state, like a scheduler's step) at every call:
        before the graph when no scalar input has been read yet, after it otherwise."""
        self.host_calls.append((fn, not self.scalars))

    # Finishing ----------------------------------------------------------------------
    def finish(self, out_values) -> Graph:
        """Set the outputs, turn what lifted tensors now hold into updates, and check
        that no traced tensor escaped."""
        g = self.graph
        g.outputs = list(out_values)
        for rec in list(self.lifted.values()):
            t = rec.tensor
            if t._data.__class__ is not TracerArray or t._data.value is not rec.input.value:
                if rec.owner is not None:
                    if rec.owner.tensor.grad is t:
                        g.updates.append(Update("grad", _target(rec.owner), self.value_of(t),
                                                rec.input.label))
                else:
                    g.updates.append(Update("data", _target(rec), self.value_of(t),
                                            rec.input.label))
            if rec.owner is None and t.grad is not rec.grad:
                new = None if t.grad is None else self.value_of(t.grad)
                g.updates.append(Update("grad", _target(rec), new, rec.input.label))
        for key, t in self.cleared.items():
            if key not in self.lifted and t.grad is None:
                g.updates.append(Update("grad", t, None, f"tensor{list(t.shape)}"))
        return g

    def grad_guards(self) -> list:
        """(target, grad was None) for lifted tensors whose grad the function did not
        clear itself: the graph assumed that state."""
        return [(_target(rec), rec.grad_none) for key, rec in self.lifted.items()
                if rec.owner is None and key not in self.cleared]

    def fold_temporaries(self) -> None:
        """Inputs bound to tensors that nothing outside the trace holds any more
        (numbers and masks made inside the function) are constants. Call after
        :meth:`check_escapes` (which collects garbage) and after the trace's own
        references to the function's results are gone."""
        updates: dict[int, int] = {}
        for u in self.graph.updates:
            updates[id(u.target)] = updates.get(id(u.target), 0) + 1
        keep, dropped = [], set()
        for inp in self.graph.inputs:
            if inp.kind == "data" and \
                    _only_held_by_trace(inp, updates.get(id(inp.source), 0)):
                # made inside the function (a number, a mask, an accumulator): its first
                # value is a constant, and what the function did to it is no update
                dropped.add(id(inp.source))
                rec = self.lifted.pop(id(inp.source))
                inp.source = None
                rec.tensor = None
                self.graph.constants.append(Constant(rec.host_data(), inp.value))
            else:
                keep.append(inp)
        self.graph.inputs = keep
        self.graph.updates = [u for u in self.graph.updates if id(u.target) not in dropped]

    def restore(self) -> None:
        """Give every lifted tensor its real data, version and grad back (the compiled
        graph, not the trace, changes state)."""
        for rec in self.lifted.values():
            t = rec.tensor
            t._data = rec.data
            t._version[0] = rec.version
            t._node, t._out_index, t._requires_grad = rec.node
            t._view_version = rec.view_version
            t._device = rec.device
            if rec.owner is None:
                t.grad = rec.grad
        for key, t in self.cleared.items():
            if key in self.entry_grads:
                t.grad = self.entry_grads[key]
        self.done = True

    def check_escapes(self, returned_ids: set) -> None:
        """Raise when a traced tensor is still reachable after tracing (stored on an
        object, in a global, in a container the tracer could not see)."""
        if len(self.made) == 0:
            return
        gc.collect()  # only what a reference cycle keeps alive is left to collect
        for t in list(self.made):
            if id(t) in returned_ids:
                continue
            data = t._data
            if data.__class__ is TracerArray and data.trace is self:
                raise escaped_error(data.value, stored=True)


def _only_held_by_trace(inp, n_updates: int) -> bool:
    # references: Input.source, the _Lifted record, getrefcount's argument, and the
    # targets of its updates
    return sys.getrefcount(inp.source) <= 3 + n_updates


def _target(rec):
    """An update's target: the argument position, or the tensor itself."""
    inp = rec.input
    return ("arg", inp.source) if inp.kind == "arg" else rec.tensor


def escaped_error(value: Value, stored: bool = False) -> TraceError:
    producer = value.producer
    where = getattr(producer, "where", "") or "?"
    made = getattr(getattr(producer, "op", None), "name", "an input")
    how = ("is still referenced after the compiled function returned" if stored else
           "from a finished trace was used")
    return TraceError(
        f"ember.jit: a traced tensor ({value.dtype.name}{list(value.shape)}, made by "
        f"{made} at {where}) {how}: it escaped the function (stored on self, in a global "
        "or in a container the compiled function does not return). Return it from the "
        "function instead, or store a detached copy outside the compiled function.")
