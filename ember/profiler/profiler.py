"""``ember.profiler.profile``: ``torch.profiler.profile``'s interface over ember's ops."""
from __future__ import annotations

import os
import socket
import time
import warnings
from enum import Enum
from typing import Callable, Iterable

from ..errors import EmberValueError
from . import recorder as _recorder
from .events import EventList, FunctionEvent, write_json, chrome_trace

__all__ = ["profile", "schedule", "ProfilerAction", "ProfilerActivity",
           "tensorboard_trace_handler", "supported_activities"]


class ProfilerActivity(Enum):
    """What to profile: ``CPU`` (every op, backward node and compiled call) and
    ``CUDA`` (ops on a GPU are waited for, so their times include the kernel's). The
    other members are accepted and change nothing."""
    CPU = 0
    CUDA = 1
    XPU = 2
    MTIA = 3
    HPU = 4
    PrivateUse1 = 5


class ProfilerAction(Enum):
    """What a :func:`schedule` says to do at a step."""
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def supported_activities() -> set:
    """``{ProfilerActivity.CPU}``, with ``CUDA`` where ember's CUDA backend is usable."""
    from ..cuda import is_available
    return {ProfilerActivity.CPU} | ({ProfilerActivity.CUDA} if is_available() else set())


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0) -> Callable[[int], ProfilerAction]:
    """The step -> :class:`ProfilerAction` function of ``torch.profiler.schedule``:
    after ``skip_first`` steps, cycles of ``wait`` idle steps, ``warmup`` steps and
    ``active`` recorded steps (the last of which hands the trace to ``on_trace_ready``),
    ``repeat`` times (0: for ever). ``skip_first_wait`` skips the first cycle's wait.

    >>> s = ember.profiler.schedule(wait=1, warmup=1, active=2)
    >>> [s(i).name for i in range(4)]
    ['NONE', 'WARMUP', 'RECORD', 'RECORD_AND_SAVE']
    """
    if not (wait >= 0 and warmup >= 0 and active > 0 and repeat >= 0 and skip_first >= 0):
        raise EmberValueError(f"Invalid profiler schedule arguments. Got wait={wait} (need >= "
                              f"0), warmup={warmup} (need >= 0), active={active} (need > 0), "
                              f"repeat={repeat} (need >= 0), skip_first={skip_first} (need "
                              f">= 0).")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results",
                      stacklevel=2)
    cycle = wait + warmup + active

    def schedule_fn(step: int) -> ProfilerAction:
        if step < 0:
            raise EmberValueError(f"schedule: step must be >= 0, got {step}")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:
            step += wait
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        phase = step % cycle
        if phase < wait:
            return ProfilerAction.NONE
        if phase < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if phase < cycle - 1 else ProfilerAction.RECORD_AND_SAVE
    return schedule_fn


def _always_record(step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None,
                              use_gzip: bool = False, use_python_export: bool = False):
    """An ``on_trace_ready`` handler that writes each trace into ``dir_name`` as
    ``<worker_name>.<time in ns>.pt.trace.json`` (``.gz`` with ``use_gzip``), the
    layout TensorBoard's profiler plugin reads; ``worker_name`` defaults to
    ``<hostname>_<pid>``.

    >>> with ember.profiler.profile(schedule=ember.profiler.schedule(wait=1, warmup=1,
    ...         active=2), on_trace_ready=ember.profiler.tensorboard_trace_handler("log")) as p:
    ...     for batch in loader:
    ...         train_step(batch)
    ...         p.step()
    """
    name = worker_name or f"{socket.gethostname()}_{os.getpid()}"

    def handler_fn(prof) -> None:
        os.makedirs(dir_name, exist_ok=True)
        file_name = f"{name}.{time.time_ns()}.pt.trace.json" + (".gz" if use_gzip else "")
        prof.export_chrome_trace(os.path.join(dir_name, file_name))
    return handler_fn


class profile:
    """Record ember's work: each op call (by name: ``linear``, ``matmul``, ...), each
    backward node (``LinearBackward0``, holding the ops its gradient runs), each call
    of an ``ember.jit`` compiled function (one event: ``ember.jit: <name>``) and each
    :class:`record_function` range, with times, and optionally input shapes, output
    bytes and Python stacks. A context manager (or :meth:`start` / :meth:`stop`);
    nothing is recorded, and nothing is paid, outside it.

    Args:
        activities: :class:`ProfilerActivity` members (default: what
            :func:`supported_activities` gives). With ``CUDA``, each op on a GPU is
            waited for, so its time includes the kernel's (``device_time_total``).
        schedule: a step -> :class:`ProfilerAction` function (see :func:`schedule`);
            :meth:`step` advances it. Without one, everything between start and stop
            is recorded.
        on_trace_ready: called with this profile whenever a trace is complete (the end
            of each active window, and at stop while recording).
        record_shapes: keep each op's input shapes.
        profile_memory: keep the bytes each op's outputs take (``cpu_memory_usage``;
            allocations only: frees are not seen).
        with_stack: keep the Python frames that called each op (``event.stack``).
        acc_events: keep the events of every window, not only the last one.
        with_flops, with_modules, experimental_config, execution_trace_observer,
            use_cuda, custom_trace_id_callback, post_processing_timeout_s: accepted and
            ignored (``use_cuda=True`` adds ``CUDA`` to the activities).

    >>> model = ember.nn.Linear(4, 2)
    >>> with ember.profiler.profile(record_shapes=True) as prof:
    ...     with ember.profiler.record_function("model_inference"):
    ...         model(ember.randn(3, 4)).sum().backward()
    >>> print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=5))
    >>> prof.export_chrome_trace("trace.json")
    """

    def __init__(self, *, activities: Iterable[ProfilerActivity] | None = None,
                 schedule: Callable[[int], ProfilerAction] | None = None,
                 on_trace_ready: Callable | None = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False,
                 with_flops: bool = False, with_modules: bool = False,
                 experimental_config=None, execution_trace_observer=None,
                 acc_events: bool = False, use_cuda: bool | None = None,
                 custom_trace_id_callback=None, post_processing_timeout_s=None):
        self.activities = set(supported_activities() if activities is None else activities)
        if use_cuda:
            self.activities.add(ProfilerActivity.CUDA)
        for activity in self.activities:
            if not isinstance(activity, ProfilerActivity):
                raise EmberValueError(f"profile: activities must be ProfilerActivity "
                                      f"members, got {activity!r}")
        self.record_steps = schedule is not None
        self.schedule = schedule if schedule is not None else _always_record
        self.on_trace_ready = on_trace_ready
        self.record_shapes = bool(record_shapes)
        self.profile_memory = bool(profile_memory)
        self.with_stack = bool(with_stack)
        self.acc_events = bool(acc_events)
        self.step_num = 0
        self.current_action = self.schedule(self.step_num)
        self._recorder = None
        self._events: list[FunctionEvent] = []
        self._base_wall_ns = 0
        self._step_range = None
        self._running = False

    # Starting, stepping, stopping -----------------------------------------------------------
    def __enter__(self) -> "profile":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        """Begin (the schedule's action for step 0 decides whether recording starts)."""
        self._running = True
        self._transit(ProfilerAction.NONE, self.current_action)
        self._enter_step()

    def stop(self) -> None:
        """End; a recording window still open is finished and handed to
        ``on_trace_ready``."""
        if not self._running:
            return
        self._exit_step()
        self._transit(self.current_action, None)
        self._running = False

    def step(self) -> None:
        """Mark the end of a training step: the schedule moves to the next one, which
        may start, finish (calling ``on_trace_ready``) or skip a recording window."""
        self._exit_step()
        previous = self.current_action
        self.step_num += 1
        self.current_action = self.schedule(self.step_num)
        if self._running:
            self._transit(previous, self.current_action)
        self._enter_step()

    def _enter_step(self) -> None:
        if self.record_steps and self._running:
            self._step_range = _recorder.record_function(f"ProfilerStep#{self.step_num}")
            self._step_range.__enter__()

    def _exit_step(self) -> None:
        if self._step_range is not None:
            self._step_range.__exit__(None, None, None)
            self._step_range = None

    def _transit(self, before: ProfilerAction, after: ProfilerAction | None) -> None:
        recording = before in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        if before is ProfilerAction.RECORD_AND_SAVE or (recording and after in (
                None, ProfilerAction.NONE, ProfilerAction.WARMUP)):
            if after is not None and before is ProfilerAction.RECORD:
                warnings.warn(f"Incorrect schedule: RECORD followed by {after.name}",
                              stacklevel=3)
            self._finish_window()
            recording = False
        if not recording and after in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._start_window()

    def _start_window(self) -> None:
        self._recorder = _recorder.Recorder(
            self.record_shapes, self.profile_memory, self.with_stack,
            ProfilerActivity.CUDA in self.activities)
        _recorder.start_recording(self._recorder)

    def _finish_window(self) -> None:
        rec = self._recorder
        if rec is None:
            return
        _recorder.stop_recording(rec)
        self._recorder = None
        events = _build_events(rec)
        self._base_wall_ns = rec.start_wall_ns
        self._events = (self._events + events) if self.acc_events else events
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    # Results --------------------------------------------------------------------------------
    def events(self) -> EventList:
        """The events of the last finished recording window (of all of them with
        ``acc_events=True``), in order of their start."""
        return EventList(self._events, profile_memory=self.profile_memory,
                         base_wall_ns=self._base_wall_ns)

    def key_averages(self, group_by_input_shape: bool = False,
                     group_by_stack_n: int = 0, group_by_overload_name: bool = False
                     ) -> EventList:
        """The events averaged per key (per input shapes too with
        ``group_by_input_shape=True``; needs ``record_shapes=True``)."""
        return self.events().key_averages(group_by_input_shape, group_by_stack_n)

    def export_chrome_trace(self, path: str) -> None:
        """Write the events as a Chrome trace (JSON; gzip for ``*.gz``)."""
        write_json(path, chrome_trace(self._events, self._base_wall_ns, name=str(path)))


def _build_events(rec) -> list[FunctionEvent]:
    """The recorder's raw ranges as :class:`FunctionEvent` s with parents and
    children, ordered by start (ranges still open at the end are left out)."""
    raws = sorted((r for r in rec.events if r.end is not None), key=lambda r: (r.start, r.id))
    origin = rec.start_ns
    by_id = {}
    events = []
    for r in raws:
        e = FunctionEvent(r.id, r.name, r.cat, r.tid, (r.start - origin) / 1e3,
                          (r.end - origin) / 1e3, r.shapes, r.memory, r.stack, r.device_type)
        by_id[r.id] = e
        events.append(e)
    for r, e in zip(raws, events):
        parent = by_id.get(r.parent)
        if parent is not None:
            e.cpu_parent = parent
            parent.cpu_children.append(e)
    return events
