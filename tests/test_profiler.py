"""ember.profiler: torch.profiler's interface. Event counts and names, nesting of
record_function, self and total times, shapes and memory, the table, the Chrome trace,
schedules (against torch.profiler.schedule and its on_trace_ready windows), the
TensorBoard handler, compiled calls as one event, and nothing recorded when off."""
import gzip
import json
import os
import threading

import numpy as np
import pytest

import ember
from ember.autograd import graph
from ember.compiler.jit import CompiledFunction
from ember.ops import registry
from ember.profiler import (ProfilerAction, ProfilerActivity, profile, record_function,
                            schedule, tensorboard_trace_handler)

torch = pytest.importorskip("torch")

_ORIGINAL_CALL = CompiledFunction.__call__


def _mlp():
    ember.manual_seed(0)
    return ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.ReLU(), ember.nn.Linear(8, 8),
                               ember.nn.ReLU(), ember.nn.Linear(8, 2))


def _by_key(prof, **kwargs):
    return {e.key: e for e in prof.key_averages(**kwargs)}


def _assert_off():
    assert registry._profile is None and graph._profile is None
    assert CompiledFunction.__call__ is _ORIGINAL_CALL


def test_counts_of_ops_and_backward_nodes():
    net, x = _mlp(), ember.randn(3, 4)
    net(x)  # (warm: eager kernels built outside the profile)
    with profile() as prof:
        for _ in range(2):
            net(x).sum().backward()
    rows = _by_key(prof)
    assert rows["linear"].count == 6
    assert rows["relu"].count == 4
    assert rows["sum"].count == 2
    assert rows["LinearBackward0"].count == 6
    assert rows["ReluBackward0"].count == 4
    assert rows["SumBackward0"].count == 2
    for e in prof.key_averages():
        assert e.cpu_time_total > 0, e.key
        assert 0 <= e.self_cpu_time_total <= e.cpu_time_total + 1e-9, e.key
        assert e.cpu_time == pytest.approx(e.cpu_time_total / e.count)
    assert len(prof.events()) == sum(e.count for e in prof.key_averages())
    _assert_off()


def test_nothing_is_recorded_outside_a_profile():
    net, x = _mlp(), ember.randn(2, 4)
    with profile() as prof:
        net(x)
    n = len(prof.events())
    _assert_off()
    with record_function("outside"):  # a no-op without a profile
        net(x).sum().backward()
    assert len(prof.events()) == n and "outside" not in _by_key(prof)
    prof2 = profile()
    with record_function("before"):
        net(x)
    prof2.start()
    net(x)
    prof2.stop()
    net(x)
    assert _by_key(prof2)["linear"].count == 3 and "before" not in _by_key(prof2)
    _assert_off()


def test_record_function_nesting_and_self_time():
    net, x = _mlp(), ember.randn(3, 4)
    net(x)
    with profile() as prof:
        with record_function("outer"):
            with record_function("inner"):
                y = net(x)
            y.sum()

    @record_function("decorated")
    def f(t):
        return t * 2

    events = {e.name: e for e in prof.events() if e.name in ("outer", "inner")}
    outer, inner = events["outer"], events["inner"]
    assert inner.cpu_parent is outer and outer.cpu_parent is None
    linears = [e for e in prof.events() if e.name == "linear"]
    assert len(linears) == 3 and all(e.cpu_parent is inner for e in linears)
    assert [e.name for e in outer.cpu_children] == ["inner", "sum"]
    assert outer.start_us <= inner.start_us and inner.end_us <= outer.end_us
    assert inner.cpu_time_total >= sum(e.cpu_time_total for e in linears)
    assert inner.self_cpu_time_total == pytest.approx(
        inner.cpu_time_total - sum(c.cpu_time_total for c in inner.cpu_children))
    assert outer.is_user_annotation and not linears[0].is_user_annotation
    with profile() as prof:
        f(ember.ones(2))
        f(ember.ones(2))
    rows = _by_key(prof)
    assert rows["decorated"].count == 2 and rows["mul"].count == 2
    assert all(e.cpu_parent.name == "decorated" for e in prof.events() if e.name == "mul")
    assert f.__name__ == "f"


def test_backward_ops_nest_under_their_node():
    w = ember.randn(3, 3, requires_grad=True)
    with profile() as prof:
        (w.exp() * 2).sum().backward()
    nodes = [e for e in prof.events() if e.name.endswith("Backward0")]
    assert {e.name for e in nodes} == {"ExpBackward0", "MulBackward0", "SumBackward0"}
    exp_node = next(e for e in nodes if e.name == "ExpBackward0")
    assert exp_node.cpu_children and all(c.cpu_parent is exp_node
                                         for c in exp_node.cpu_children)
    assert exp_node.self_cpu_time_total < exp_node.cpu_time_total


def test_shapes_and_memory():
    lin = ember.nn.Linear(4, 8)
    with profile(record_shapes=True, profile_memory=True) as prof:
        lin(ember.randn(3, 4))
        lin(ember.randn(5, 4))
        lin(ember.randn(3, 4))
    rows = prof.key_averages(group_by_input_shape=True)
    linear = [e for e in rows if e.key == "linear"]
    assert sorted((e.input_shapes, e.count) for e in linear) == [
        ([[3, 4], [8, 4], [8]], 2), ([[5, 4], [8, 4], [8]], 1)]
    total = _by_key(prof)["linear"]
    assert total.count == 3
    assert total.cpu_memory_usage == 4 * 8 * (3 + 5 + 3)  # the float32 outputs
    assert total.self_cpu_memory_usage == total.cpu_memory_usage
    with profile() as prof:
        lin(ember.randn(3, 4))
    assert _by_key(prof)["linear"].input_shapes == [] and \
        _by_key(prof)["linear"].cpu_memory_usage == 0


def test_with_stack_names_the_calling_frame():
    with profile(with_stack=True) as prof:
        ember.ones(2) + 1
    event = next(e for e in prof.events() if e.name == "add")
    assert any("test_profiler.py" in frame for frame in event.stack)


def test_table_columns_sorting_and_limit():
    net, x = _mlp(), ember.randn(3, 4)
    with profile(profile_memory=True) as prof:
        net(x).sum().backward()
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=3)
    lines = table.strip().splitlines()
    for column in ("Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total",
                   "CPU time avg", "CPU Mem", "Self CPU Mem", "# of Calls"):
        assert column in lines[1]
    assert lines[-1].startswith("Self CPU time total:")
    assert len(lines) == 3 + 3 + 2
    ordered = sorted(prof.key_averages(), key=lambda e: e.cpu_time_total, reverse=True)
    assert [line.split()[0] for line in lines[3:6]] == [e.key for e in ordered[:3]]
    by_count = prof.key_averages().table(sort_by="count", row_limit=-1)
    assert len(by_count.strip().splitlines()) == 5 + len(prof.key_averages())
    with pytest.raises(ValueError, match="sort by"):
        prof.key_averages().table(sort_by="no_such_column")
    shapes = prof.key_averages(group_by_input_shape=True).table()
    assert "Input Shapes" in shapes


def test_chrome_trace(tmp_path):
    net, x = _mlp(), ember.randn(3, 4)
    with profile(record_shapes=True) as prof:
        with record_function("step"):
            net(x).sum().backward()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    ranges = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(ranges) == len(prof.events())
    names = [e["name"] for e in ranges]
    assert names.count("linear") == 3 and names.count("LinearBackward0") == 3
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in ranges)
    step = next(e for e in ranges if e["name"] == "step")
    assert step["cat"] == "user_annotation"
    for e in ranges:
        if e is not step:
            assert step["ts"] <= e["ts"] + 1e-3
            assert e["ts"] + e["dur"] <= step["ts"] + step["dur"] + 1e-3
    linear = next(e for e in ranges if e["name"] == "linear")
    assert linear["args"]["Input Dims"] == [[3, 4], [8, 4], [8]]
    assert any(e["ph"] == "M" and e["name"] == "thread_name" for e in trace["traceEvents"])
    prof.export_chrome_trace(str(tmp_path / "trace.json.gz"))
    with gzip.open(tmp_path / "trace.json.gz") as f:
        assert len([e for e in json.load(f)["traceEvents"] if e["ph"] == "X"]) == len(ranges)
    with pytest.raises(ValueError, match="events themselves"):
        prof.key_averages().export_chrome_trace(str(tmp_path / "avg.json"))


def test_compiled_calls_are_one_event_each():
    net, x = _mlp(), ember.randn(3, 4)
    compiled = ember.jit(net)

    @ember.jit
    def double(t):
        return (t * 2).sin()

    compiled(x)
    with profile() as prof:
        for _ in range(3):
            compiled(x)
        double(x)  # (its first call: the trace runs no op)
        double(x)
    rows = _by_key(prof)
    assert rows["ember.jit: Sequential"].count == 3
    assert rows["ember.jit: double"].count == 2
    assert set(rows) == {"ember.jit: Sequential", "ember.jit: double"}
    with profile() as prof:
        compiled(x).sum().backward()
    rows = _by_key(prof)
    assert rows["ember.jit: Sequential"].count == 1
    assert sum(e.count for k, e in rows.items() if k.endswith("Backward0")) == 2  # (+ sum's)
    np.testing.assert_allclose(compiled(x).detach().numpy(), net(x).detach().numpy(),
                               rtol=1e-6)
    _assert_off()


def test_schedule_matches_torch():
    configs = [dict(wait=1, warmup=1, active=2), dict(wait=0, warmup=2, active=1, repeat=2),
               dict(wait=2, warmup=1, active=3, repeat=1, skip_first=3),
               dict(wait=2, warmup=1, active=1, skip_first_wait=1)]
    for config in configs:
        ours, theirs = schedule(**config), torch.profiler.schedule(**config)
        assert [ours(i).name for i in range(20)] == [theirs(i).name for i in range(20)]
    with pytest.raises(ValueError, match="Invalid profiler schedule"):
        schedule(wait=0, warmup=0, active=0)
    with pytest.warns(UserWarning, match="warmup"):
        schedule(wait=0, warmup=0, active=1)
    assert list(ProfilerAction.__members__)[:4] == ["NONE", "WARMUP", "RECORD",
                                                    "RECORD_AND_SAVE"]


def _windows(lib, sched, steps, **kwargs):
    windows = []

    def ready(p):
        windows.append(sorted({e.key for e in p.key_averages()
                               if e.key.startswith(("mark", "ProfilerStep"))}))
    with lib.profiler.profile(schedule=sched, on_trace_ready=ready, **kwargs) as p:
        for i in range(steps):
            with lib.profiler.record_function(f"mark{i}"):
                lib.ones(2) + 1
            p.step()
    return windows, p


def test_schedule_windows_and_on_trace_ready_as_torch():
    for config, steps in [(dict(wait=1, warmup=1, active=2, repeat=2), 10),
                          (dict(wait=0, warmup=1, active=3), 2),
                          (dict(wait=1, warmup=0, active=1), 5)]:
        ours, p = _windows(ember, schedule(**config), steps)
        theirs, _ = _windows(torch, torch.profiler.schedule(**config), steps)
        assert ours == theirs, config
        assert p.step_num == steps
    ours, p = _windows(ember, schedule(wait=1, warmup=1, active=1, repeat=2), 6,
                       acc_events=True)
    assert {e.key for e in p.key_averages() if e.key.startswith("mark")} == {"mark2", "mark5"}
    _assert_off()


def test_profile_without_schedule_calls_on_trace_ready_once():
    calls = []
    with profile(on_trace_ready=calls.append) as prof:
        ember.ones(2) + 1
        prof.step()
        ember.ones(2) * 3
    assert calls == [prof]
    assert set(_by_key(prof)) == {"add", "mul"}  # (no ProfilerStep ranges)


def test_tensorboard_trace_handler(tmp_path):
    handler = tensorboard_trace_handler(str(tmp_path / "log"), worker_name="w0")
    with profile(schedule=schedule(wait=0, warmup=1, active=1, repeat=2),
                 on_trace_ready=handler) as prof:
        for _ in range(5):
            ember.ones(3).exp()
            prof.step()
    files = sorted(os.listdir(tmp_path / "log"))
    assert len(files) == 2
    assert all(f.startswith("w0.") and f.endswith(".pt.trace.json") for f in files)
    for f in files:
        trace = json.loads((tmp_path / "log" / f).read_text())
        names = [e["name"] for e in trace["traceEvents"] if e["ph"] == "X"]
        assert names.count("exp") == 1 and sum(n.startswith("ProfilerStep#") for n in names)
    gz = tensorboard_trace_handler(str(tmp_path / "gz"), use_gzip=True)
    with profile(on_trace_ready=gz):
        ember.ones(2).exp()
    (name,) = os.listdir(tmp_path / "gz")
    assert name.endswith(".pt.trace.json.gz") and str(os.getpid()) in name


def test_activities_errors_and_cleanup_after_a_raise():
    assert ProfilerActivity.CPU in ember.profiler.supported_activities()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        ember.ones(2) + 1
    assert _by_key(prof)["add"].count == 1
    with pytest.raises(ValueError, match="ProfilerActivity"):
        profile(activities=["cpu"])
    with pytest.raises(ZeroDivisionError):
        with profile():
            ember.ones(2) + 1
            1 / 0
    _assert_off()
    with profile():
        with pytest.raises(RuntimeError, match="already recording"):
            with profile():
                pass
    _assert_off()


def test_other_threads_are_recorded_on_their_own_stack():
    with profile() as prof:
        with record_function("main"):
            worker = threading.Thread(target=lambda: ember.ones(4).exp())
            worker.start()
            worker.join()
    exp = next(e for e in prof.events() if e.name == "exp")
    main = next(e for e in prof.events() if e.name == "main")
    assert exp.thread != main.thread and exp.cpu_parent is None
