"""What records events while an ``ember.profiler.profile`` is recording.

Three hooks, installed only while recording (so nothing is paid otherwise): the op
registry's ``_profile`` (each op's forward, timed), the autograd engine's ``_profile``
(each backward node's VJP, timed; the ops it runs nest inside), and ember.jit's
``CompiledFunction.__call__`` (each call of a compiled function as one event: the graph
runs without the registry). :class:`record_function` opens a named range that the
events inside nest under.
"""
from __future__ import annotations

import functools
import itertools
import os
import threading
import time
import traceback

from ..autograd import graph as _graph
from ..ops import registry as _registry

__all__ = ["record_function"]

_ember_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class RawEvent:
    """One recorded range, as recorded (times in ns from ``perf_counter_ns``)."""
    __slots__ = ("id", "name", "cat", "start", "end", "parent", "tid", "shapes", "memory",
                 "stack", "device_type")

    def __init__(self, id, name, cat, start, parent, tid, shapes=None, memory=0,
                 stack=None, device_type="CPU"):
        self.id, self.name, self.cat, self.start = id, name, cat, start
        self.end = None
        self.parent, self.tid, self.shapes, self.memory = parent, tid, shapes, memory
        self.stack, self.device_type = stack, device_type


class _Stack(threading.local):
    def __init__(self):
        self.open: list = []


class Recorder:
    """The events of one recording window (one cycle of a schedule).

    Args:
        record_shapes: keep each op's input shapes.
        profile_memory: keep the bytes each op's outputs take.
        with_stack: keep the Python frames (outside ember) that called each op.
        sync_devices: wait for the GPU after each op on one (``ProfilerActivity.CUDA``),
            so that its time includes the kernel's.
    """

    def __init__(self, record_shapes: bool, profile_memory: bool, with_stack: bool,
                 sync_devices: bool):
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.sync_devices = sync_devices
        self.events: list[RawEvent] = []
        self.ids = itertools.count()
        self.stacks = _Stack()
        self.start_ns = time.perf_counter_ns()
        self.start_wall_ns = time.time_ns()
        self.end_ns = None

    # Ranges ---------------------------------------------------------------------------
    def open(self, name: str, cat: str, shapes=None) -> RawEvent:
        stack = self.stacks.open
        event = RawEvent(next(self.ids), name, cat, 0, stack[-1].id if stack else None,
                         threading.get_ident(), shapes if self.record_shapes else None,
                         stack=self._frames() if self.with_stack else None)
        stack.append(event)
        event.start = time.perf_counter_ns()
        return event

    def close(self, event: RawEvent) -> None:
        event.end = time.perf_counter_ns()
        stack = self.stacks.open
        if event in stack:  # (normally the top; a range left open by a raise is dropped)
            del stack[stack.index(event):]
        self.events.append(event)

    def _frames(self) -> list[str]:
        """The caller's frames outside ember, innermost first, as ``file(line): name``."""
        frames = traceback.extract_stack()[:-3]
        return [f"{f.filename}({f.lineno}): {f.name}" for f in reversed(frames)
                if not os.path.abspath(f.filename).startswith(_ember_dir)]

    # Hooks ----------------------------------------------------------------------------
    def op_hook(self, op, forward, inputs):
        """registry._profile: ``forward`` wrapped to record one event per call."""
        device = inputs[0]._device if inputs else None
        sync = self.sync_devices and device is not None and device.type != "cpu"

        def timed(xp, *arrays, **params):
            stack = self.stacks.open
            event = RawEvent(next(self.ids), op.name, "cpu_op", 0,
                             stack[-1].id if stack else None, threading.get_ident(),
                             [list(a.shape) for a in arrays] if self.record_shapes else None,
                             stack=self._frames() if self.with_stack else None,
                             device_type="CUDA" if sync else "CPU")
            event.start = time.perf_counter_ns()
            out = forward(xp, *arrays, **params)
            if sync:
                device.backend.synchronize()
            event.end = time.perf_counter_ns()
            if self.profile_memory:
                outs = out if isinstance(out, tuple) else (out,)
                event.memory = sum(int(getattr(o, "nbytes", 0)) for o in outs)
            self.events.append(event)
            return out
        return timed

    def node_hook(self, node, call):
        """autograd's _profile: the node's VJP call wrapped to record one event."""
        if _registry._trace is not None:  # (ember.jit tracing a backward: nothing runs)
            return call

        def timed(item, slot):
            event = self.open(item.name(), "cpu_op")
            try:
                return call(item, slot)
            finally:
                self.close(event)
        return timed


_ACTIVE: Recorder | None = None  # the recorder of the profile that is recording now
_lock = threading.Lock()
_compiled_call = None  # CompiledFunction.__call__ as ember.jit defines it, while swapped


def active() -> Recorder | None:
    """The recorder of the profile recording now, or None."""
    return _ACTIVE


def start_recording(recorder: Recorder) -> None:
    """Install the hooks so that ``recorder`` sees every op, node and compiled call."""
    global _ACTIVE, _compiled_call
    from ..compiler.jit import CompiledFunction
    with _lock:
        if _ACTIVE is not None:
            from ..errors import EmberError
            raise EmberError("ember.profiler: another profile is already recording; stop it "
                             "before starting this one")
        _ACTIVE = recorder
        _registry._profile = recorder.op_hook
        _graph._profile = recorder.node_hook
        _compiled_call = CompiledFunction.__call__
        CompiledFunction.__call__ = _profiled_compiled_call


def stop_recording(recorder: Recorder) -> None:
    """Remove the hooks (everything runs as if no profiler existed) and seal the
    recorder's events."""
    global _ACTIVE, _compiled_call
    from ..compiler.jit import CompiledFunction
    with _lock:
        if _ACTIVE is not recorder:
            return
        _registry._profile = None
        _graph._profile = None
        CompiledFunction.__call__ = _compiled_call
        _compiled_call = None
        _ACTIVE = None
        recorder.end_ns = time.perf_counter_ns()


def _profiled_compiled_call(self, *args, **kwargs):
    """``CompiledFunction.__call__`` while recording: the call is one event."""
    call = _compiled_call
    recorder = _ACTIVE
    if call is None:  # (recording stopped on another thread meanwhile)
        from ..compiler.jit import CompiledFunction
        return CompiledFunction.__call__(self, *args, **kwargs)
    if recorder is None or _registry._trace is not None:
        return call(self, *args, **kwargs)
    event = recorder.open(f"ember.jit: {self.__name__}", "compiled")
    try:
        return call(self, *args, **kwargs)
    finally:
        recorder.close(event)


class record_function:
    """Label a range of code in the profile: a context manager (or a decorator) whose
    event holds the events of the ops run inside it. Costs nothing when no profile is
    recording.

    Args:
        name: the label (the event's key).
        args: an optional string kept with the event.

    >>> with ember.profiler.profile() as prof:
    ...     with ember.profiler.record_function("forward"):
    ...         y = model(x)
    >>> [e.key for e in prof.key_averages()][:2]
    ['forward', 'linear']
    """

    def __init__(self, name: str, args: str | None = None):
        self.name = name
        self.args = args
        self._event = None
        self._recorder = None

    def __enter__(self) -> "record_function":
        recorder = _ACTIVE
        if recorder is not None:
            self._recorder = recorder
            self._event = recorder.open(self.name, "user_annotation")
        return self

    def __exit__(self, *exc) -> None:
        if self._event is not None:
            self._recorder.close(self._event)
            self._event = self._recorder = None

    def __call__(self, fn):
        """Use as a decorator: every call of ``fn`` is a range named ``name``."""
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name, self.args):
                return fn(*args, **kwargs)
        return wrapper
