"""Profiler results with PyTorch's names: :class:`FunctionEvent` (one range),
:class:`FunctionEventAvg` (the ranges of one key, summed) and :class:`EventList`
(``table``, ``key_averages``, ``export_chrome_trace``). Times are in microseconds and
memory in bytes, as in ``torch.autograd.profiler_util``."""
from __future__ import annotations

import gzip
import json
import os
import tempfile

from ..errors import EmberValueError

__all__ = ["FunctionEvent", "FunctionEventAvg", "EventList"]


def _format_time(us: float) -> str:
    if abs(us) >= 1e6:
        return f"{us / 1e6:.3f}s"
    if abs(us) >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _format_memory(nbytes: int) -> str:
    for unit, size in (("GB", 1024 ** 3), ("MB", 1024 ** 2), ("KB", 1024)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} B"


class _Times:
    """The ``*_str`` forms and device-time names shared by events and averages."""
    device_time_total = 0.0
    self_device_time_total = 0.0
    device_memory_usage = 0
    self_device_memory_usage = 0
    flops = 0
    node_id = -1
    is_async = False
    is_remote = False
    is_legacy = False

    @property
    def cpu_time_str(self) -> str:
        return _format_time(self.cpu_time)

    @property
    def cpu_time_total_str(self) -> str:
        return _format_time(self.cpu_time_total)

    @property
    def self_cpu_time_total_str(self) -> str:
        return _format_time(self.self_cpu_time_total)

    @property
    def cuda_time_total(self) -> float:
        return self.device_time_total

    @property
    def self_cuda_time_total(self) -> float:
        return self.self_device_time_total


class FunctionEvent(_Times):
    """One recorded range: an op call, a backward node, a compiled call or a
    ``record_function`` block.

    Attributes:
        id, name, key: its number, its name, and the key it is averaged under (the
            name; ``ProfilerStep*`` for every ``ProfilerStep#N``).
        thread: the thread id. start_us, end_us: from the profile's start.
        cpu_time_total: its duration; self_cpu_time_total: less its children's.
        input_shapes: the shapes of an op's inputs (``record_shapes=True``).
        cpu_memory_usage: bytes of the outputs of the ops in it (``profile_memory=True``);
            self_cpu_memory_usage: of its own outputs only.
        cpu_parent, cpu_children: the enclosing event and the events directly inside.
        stack: the calling Python frames (``with_stack=True``).
    """
    count = 1

    def __init__(self, id: int, name: str, cat: str, thread: int, start_us: float,
                 end_us: float, input_shapes=None, memory: int = 0, stack=None,
                 device_type: str = "CPU"):
        self.id = id
        self.name = name
        self.cat = cat
        self.thread = thread
        self.start_us = start_us
        self.end_us = end_us
        self.input_shapes = input_shapes if input_shapes is not None else []
        self.own_memory = memory
        self.stack = stack or []
        self.device_type = device_type
        self.cpu_parent = None
        self.cpu_children: list[FunctionEvent] = []

    @property
    def key(self) -> str:
        return "ProfilerStep*" if self.name.startswith("ProfilerStep#") else self.name

    @property
    def is_user_annotation(self) -> bool:
        return self.cat == "user_annotation"

    @property
    def time_range(self) -> tuple[float, float]:
        return self.start_us, self.end_us

    @property
    def cpu_time_total(self) -> float:
        return self.end_us - self.start_us

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def cpu_memory_usage(self) -> int:
        return self.own_memory + sum(c.cpu_memory_usage for c in self.cpu_children)

    @property
    def self_cpu_memory_usage(self) -> int:
        return self.own_memory

    @property
    def device_time_total(self) -> float:
        return self.cpu_time_total if self.device_type == "CUDA" else 0.0

    @property
    def self_device_time_total(self) -> float:
        return self.device_time_total

    def __repr__(self) -> str:
        return (f"<FunctionEvent id={self.id} name={self.name} "
                f"cpu_time={_format_time(self.cpu_time_total)} "
                f"self_cpu_time={_format_time(self.self_cpu_time_total)} "
                f"input_shapes={self.input_shapes}>")


class FunctionEventAvg(_Times):
    """The events of one key (and input shapes or stack, when grouped by them), summed:
    ``count`` calls, ``cpu_time_total`` and ``self_cpu_time_total`` in all, ``cpu_time``
    per call, ``cpu_memory_usage`` and ``self_cpu_memory_usage`` in all; the other
    attributes are the first event's."""

    def __init__(self, key: str):
        self.key = key
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.device_time_total = 0.0
        self.self_device_time_total = 0.0
        self.cpu_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.input_shapes = None
        self.stack = None
        self.is_user_annotation = False
        self.device_type = "CPU"
        self.cpu_children = self.cpu_parent = None

    def add(self, other) -> "FunctionEventAvg":
        """Add an event (or another average) into this one."""
        if self.count == 0:
            self.input_shapes = other.input_shapes
            self.stack = other.stack
            self.is_user_annotation = other.is_user_annotation
            self.device_type = other.device_type
        self.count += other.count
        self.cpu_time_total += other.cpu_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        self.device_time_total += other.device_time_total
        self.self_device_time_total += other.self_device_time_total
        self.cpu_memory_usage += other.cpu_memory_usage
        self.self_cpu_memory_usage += other.self_cpu_memory_usage
        return self

    __iadd__ = add

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def device_time(self) -> float:
        return self.device_time_total / self.count if self.count else 0.0

    def __repr__(self) -> str:
        return (f"<FunctionEventAvg key={self.key} self_cpu_time="
                f"{_format_time(self.self_cpu_time_total)} cpu_time="
                f"{_format_time(self.cpu_time_total)} input_shapes={self.input_shapes}>")


class EventList(list):
    """A list of :class:`FunctionEvent` or :class:`FunctionEventAvg`, with PyTorch's
    ``table``, ``key_averages``, ``total_average`` and ``export_chrome_trace``."""

    def __init__(self, events=(), *, profile_memory: bool = False,
                 grouped_by_shape: bool = False, base_wall_ns: int = 0):
        super().__init__(events)
        self._profile_memory = profile_memory
        self._grouped_by_shape = grouped_by_shape
        self._base_wall_ns = base_wall_ns

    @property
    def self_cpu_time_total(self) -> float:
        """The sum of the events' self times (the time the profile saw, in us)."""
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shape: bool = False,
                     group_by_stack_n: int = 0) -> "EventList":
        """One :class:`FunctionEventAvg` per key (and per input shapes, and per first
        ``group_by_stack_n`` frames, when asked), in order of first appearance."""
        groups: dict = {}
        for e in self:
            key = [e.key]
            if group_by_input_shape:
                key.append(str(e.input_shapes))
            if group_by_stack_n > 0:
                key.append(tuple((e.stack or [])[:group_by_stack_n]))
            key = tuple(key)
            if key not in groups:
                groups[key] = FunctionEventAvg(e.key)
            groups[key].add(e)
        return EventList(groups.values(), profile_memory=self._profile_memory,
                         grouped_by_shape=group_by_input_shape)

    def total_average(self) -> FunctionEventAvg:
        """All the events summed into one (key ``"Total"``)."""
        total = FunctionEventAvg("Total")
        for e in self:
            total.add(e)
        return total

    def table(self, sort_by: str | None = None, row_limit: int = 100,
              max_src_column_width: int = 75, max_name_column_width: int = 55,
              max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False) -> str:
        """The events as a text table: name, self and total CPU time (and their
        shares), average time, memory (with ``profile_memory``), calls, input shapes
        (when grouped by them).

        Args:
            sort_by: an attribute to sort by, largest first (``"cpu_time_total"``,
                ``"self_cpu_time_total"``, ``"count"``, ``"cpu_memory_usage"``, ...).
            row_limit: the most rows shown (-1 or less: all).
            header: a line printed above the table.
            top_level_events_only: only events with no parent.

        >>> print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))
        """
        rows = list(self)
        if top_level_events_only:
            rows = [e for e in rows if getattr(e, "cpu_parent", None) is None]
        if sort_by is not None:
            if not rows or not hasattr(rows[0], sort_by):
                if rows:
                    raise EmberValueError(f"table: cannot sort by {sort_by!r}; use an "
                                          f"attribute of the events such as "
                                          f"'cpu_time_total' or 'self_cpu_time_total'")
            rows.sort(key=lambda e: getattr(e, sort_by), reverse=True)
        if row_limit is not None and row_limit >= 0:
            rows = rows[:row_limit]
        total_self = self.self_cpu_time_total
        name_width = max([len(e.key) for e in rows] + [4])
        name_width = min(name_width + 4, max_name_column_width)
        columns = [("Name", name_width)] + [(h, 12) for h in (
            "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg")]
        if self._profile_memory:
            columns += [("CPU Mem", 12), ("Self CPU Mem", 12)]
        columns.append(("# of Calls", 12))
        if self._grouped_by_shape:
            shape_width = min(max([len(str(e.input_shapes)) for e in rows] + [12]) + 4,
                              max_shapes_column_width)
            columns.append(("Input Shapes", shape_width))
        line = "  ".join("-" * w for _, w in columns) + "  "

        def share(us):
            return f"{100.0 * us / total_self:.2f}%" if total_self > 0 else "0.00%"

        out = []
        if header is not None:
            out += ["=" * len(line), header]
        out += [line, "  ".join(h.rjust(w) for h, w in columns) + "  ", line]
        for e in rows:
            name = e.key if len(e.key) <= name_width else e.key[:name_width - 3] + "..."
            cells = [name, share(e.self_cpu_time_total), _format_time(e.self_cpu_time_total),
                     share(e.cpu_time_total), _format_time(e.cpu_time_total),
                     _format_time(e.cpu_time)]
            if self._profile_memory:
                cells += [_format_memory(e.cpu_memory_usage),
                          _format_memory(e.self_cpu_memory_usage)]
            cells.append(str(e.count))
            if self._grouped_by_shape:
                shapes = str(e.input_shapes)
                cells.append(shapes if len(shapes) <= columns[-1][1] else
                             shapes[:columns[-1][1] - 3] + "...")
            out.append("  ".join(c.rjust(w) for c, (_, w) in zip(cells, columns)) + "  ")
        out += [line, f"Self CPU time total: {_format_time(total_self)}"]
        return "\n".join(out) + "\n"

    def __str__(self) -> str:
        return self.table()

    def export_chrome_trace(self, path: str) -> None:
        """Write the events (not averages) as a Chrome trace (JSON; gzip when ``path``
        ends in ``.gz``): open it in ``chrome://tracing`` or https://ui.perfetto.dev."""
        trace = chrome_trace(self, self._base_wall_ns)
        write_json(path, trace)


def chrome_trace(events, base_wall_ns: int = 0, name: str = "ember") -> dict:
    """The Chrome trace event format of ``events``: one complete (``"X"``) event per
    range, with process and thread names."""
    pid = os.getpid()
    threads = sorted({e.thread for e in events if isinstance(e, FunctionEvent)})
    trace_events = [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": 0,
                     "args": {"name": "python"}}]
    trace_events += [{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "ts": 0,
                      "args": {"name": f"thread {tid} (python)"}} for tid in threads]
    for e in events:
        if not isinstance(e, FunctionEvent):
            raise EmberValueError("export_chrome_trace: needs the events themselves "
                                  "(prof.events()), not key_averages()")
        args = {"External id": e.id}
        if e.input_shapes:
            args["Input Dims"] = e.input_shapes
        if e.own_memory:
            args["Output bytes"] = e.own_memory
        if e.stack:
            args["Call stack"] = ";".join(e.stack)
        trace_events.append({"ph": "X", "cat": e.cat, "name": e.name, "pid": pid,
                             "tid": e.thread, "ts": round(e.start_us, 3),
                             "dur": round(e.cpu_time_total, 3), "args": args})
    return {"schemaVersion": 1, "traceName": name, "displayTimeUnit": "ms",
            "baseTimeNanoseconds": base_wall_ns, "traceEvents": trace_events}


def write_json(path: str, obj) -> None:
    """Write ``obj`` as JSON to ``path`` atomically (gzip for ``*.gz``)."""
    path = os.fspath(path)
    data = json.dumps(obj).encode()
    if path.endswith(".gz"):
        data = gzip.compress(data)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".trace-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
