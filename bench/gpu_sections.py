"""The sections of ``gpu_check.py``, each run in a child process of its own (so a CUDA
error that poisons one process, or a compile that runs long, costs one section, not
the run). A section prints what it does as it goes and one ``RESULT {json}`` line per
figure; the driver collects those into the table.

Sections: ``ops`` (the op table on the device against the CPU), ``matmul`` (8192³
products, TFLOP/s), ``workloads`` (mlp, cnn, gpt training steps), ``gpt2`` (a
GPT-2-small training step under bfloat16 autocast, with peak memory).
"""
from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import time
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import ember  # noqa: E402
from training import batch, build  # noqa: E402

GPT2_SMALL = (50257, 1024, 768, 12, 12)  # vocab, context, width, heads, layers
GPT2_TINY = (64, 16, 32, 2, 2)           # the same code path at --quick sizes


def stand_in(device: str) -> None:
    """Register the tests' stand-in device when ``device`` names it (``fakegpu``: the
    --quick smoke run on a machine without a GPU)."""
    if device.split(":")[0] == "fakegpu":
        import tests.fake_device  # noqa: F401


def record(row: str, side: str, value=None, unit: str = "", error: str | None = None,
           **extra) -> None:
    """One figure for the table (``side`` is ``ember`` or ``torch``)."""
    item = {"row": row, "side": side, "value": value, "unit": unit, **extra}
    if error is not None:
        item["error"] = error[:300]
        print(f"    {side:5} {row}: ERROR {error[:300]}", flush=True)
    print("RESULT " + json.dumps(item), flush=True)


def _sig(x: float) -> float:
    """``x`` to four significant digits."""
    return float(f"{x:.4g}")


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


class Context:
    """The devices of one run: ember's, PyTorch's (CUDA where ember uses CUDA, else the
    CPU), their synchronizations and memory counters, and the time left."""

    def __init__(self, device: str, quick: bool, seconds: float):
        stand_in(device)
        self.quick = quick
        self.deadline = time.monotonic() + seconds
        self.device = ember.backends.placement(device)
        self.cuda = self.device.type == "cuda"
        try:
            import torch
        except ImportError:
            torch = None
        self.torch = torch
        self.torch_device = "cuda" if self.cuda else "cpu"

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def ember_sync(self) -> None:
        self.device.backend.synchronize()

    def torch_sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def reset_memory(self) -> None:
        gc.collect()
        if self.cuda:
            ember.cuda.empty_cache()
            ember.cuda.reset_peak_memory_stats()
            if self.torch is not None:
                self.torch.cuda.empty_cache()
                self.torch.cuda.reset_peak_memory_stats()

    def peak_gib(self, side: str):
        if not self.cuda:
            return None
        peak = ember.cuda.max_memory_allocated() if side == "ember" else \
            self.torch.cuda.max_memory_allocated()
        return round(peak / 2 ** 30, 3)


def median_ms(fn, sync, warmup: int, iters: int, ctx: Context) -> float:
    """The median wall time of ``fn`` in milliseconds, synchronized, after ``warmup``
    calls; fewer calls when the section's time runs out (at least one)."""
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
        if ctx.left() < 0:
            break
    return statistics.median(times) * 1e3


# ops -------------------------------------------------------------------------------------
def _pytest_stand_in() -> types.ModuleType:
    """Where pytest is not installed (the GPU machine need not have it): a module with
    the names the op tables use while being imported, as decorators that change
    nothing. Only imports the tables; running their tests needs the real pytest."""
    mod = types.ModuleType("pytest")

    def marker(*args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]
        return lambda fn: fn

    def unavailable(*args, **kwargs):
        raise RuntimeError("gpu_check's pytest stand-in only imports the op tables")
    mod.mark = types.SimpleNamespace(**{name: marker for name in (
        "parametrize", "skipif", "filterwarnings", "slow", "xfail", "skip")})
    mod.param = lambda *values, **kwargs: values[0] if len(values) == 1 else values
    mod.fixture = marker
    mod.skip = mod.raises = mod.approx = mod.warns = mod.importorskip = unavailable
    return mod


def section_ops(ctx: Context) -> None:
    """Every op of the op tables on the device against the CPU: float32 (or float64)
    and an integer or bool dtype first, then float16 and bfloat16 while time lasts."""
    try:
        import pytest  # noqa: F401
    except ImportError:
        sys.modules["pytest"] = _pytest_stand_in()
    from tests.backends.op_table_check import all_cases, check_case, core_dtypes
    cases = all_cases()
    if ctx.quick:
        cases = cases[::20]
    halves = ["float16"] + (["bfloat16"] if not ctx.cuda or ember.cuda.is_bf16_supported()
                            else [])
    plan = [(c, d) for c in cases for d in core_dtypes(c)]
    plan += [(c, d) for d in halves for c in cases if d in c.dtypes and not ctx.quick]
    tol_scale = 10.0 if ctx.cuda else 1.0  # a GPU sums in another order
    failures, checked = [], 0
    for case, dtype in plan:
        if ctx.left() < 3:
            print(f"    stopped after {checked} of {len(plan)} checks (time budget)")
            break
        try:
            problems = check_case(case, dtype, ctx.device, tol_scale)
        except Exception as exc:  # noqa: BLE001 - a broken check is a failure, not the end
            problems = [f"{case.name}[{dtype}]: the check itself failed: {_error(exc)}"]
        checked += 1
        if problems:
            failures.append(problems[0] + (f" (+{len(problems) - 1} more samples)"
                                           if len(problems) > 1 else ""))
    for line in failures[:60]:
        print(f"    FAIL {line}")
    if len(failures) > 60:
        print(f"    ... and {len(failures) - 60} more")
    record(f"op table on {ctx.device.type} vs cpu", "ember",
           f"{checked - len(failures)}/{checked}", "ops passed",
           note="" if not halves or "bfloat16" in halves else "no bfloat16 in this CuPy")


# matmul ----------------------------------------------------------------------------------
def section_matmul(ctx: Context) -> None:
    """n×n×n products: bfloat16, float32, and float32 with TF32 allowed (both sides)."""
    n = 64 if ctx.quick else 8192
    iters = 2 if ctx.quick else 10
    flop = 2.0 * n ** 3
    torch = ctx.torch
    for label, dtype, tf32 in (("bf16", "bfloat16", False), ("fp32", "float32", False),
                               ("fp32 tf32", "float32", True)):
        row = f"matmul {label} {n}^3"
        try:
            ember.backends.cuda.matmul.allow_tf32 = tf32
            with ember.no_grad():
                a = ember.randn(n, n, dtype=getattr(ember, dtype), device=ctx.device)
                b = ember.randn(n, n, dtype=getattr(ember, dtype), device=ctx.device)
                ms = median_ms(lambda: a @ b, ctx.ember_sync, 2, iters, ctx)
            record(row, "ember", _sig(flop / ms / 1e9), "TFLOP/s",
                   target=">=0.8" if label == "bf16" else None, better="higher")
        except Exception as exc:  # noqa: BLE001
            record(row, "ember", error=_error(exc), unit="TFLOP/s")
        finally:
            ember.backends.cuda.matmul.allow_tf32 = False
        if torch is None:
            continue
        try:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a = torch.randn(n, n, dtype=getattr(torch, dtype), device=ctx.torch_device)
            b = torch.randn(n, n, dtype=getattr(torch, dtype), device=ctx.torch_device)
            ms = median_ms(lambda: a @ b, ctx.torch_sync, 2, iters, ctx)
            record(row, "torch", _sig(flop / ms / 1e9), "TFLOP/s", better="higher")
        except Exception as exc:  # noqa: BLE001
            record(row, "torch", error=_error(exc), unit="TFLOP/s")
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False


# training steps --------------------------------------------------------------------------
def _torch_step(torch, workload, device, shape, amp_dtype, compiled, rows=None):
    """A PyTorch training step from bench/training.py's code; ``compiled`` compiles
    the model and loss (``torch.compile``), with backward and AdamW/Adam left eager."""
    torch.manual_seed(0)
    model, opt, loss_fn = _build(torch, workload, shape)
    model.to(device)
    x, y = _batch(workload, shape, rows)
    x, y = torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)
    loss_of = torch.compile(loss_fn) if compiled else loss_fn

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = loss_of(x, y)
        loss.backward()
        opt.step()
        return loss
    return step


def _ember_step(workload, device, shape, amp_dtype, compiled, rows=None):
    """The same step in ember; ``compiled`` runs the whole step (forward, backward,
    optimizer) as one ``ember.jit`` graph."""
    ember.manual_seed(0)
    model, opt, loss_fn = _build(ember, workload, shape)
    model.to(device)
    x, y = _batch(workload, shape, rows)
    x, y = ember.from_numpy(x).to(device), ember.from_numpy(y).to(device)

    def step():
        opt.zero_grad()
        with ember.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = loss_fn(x, y)
        loss.backward()
        opt.step()
        return loss
    return ember.jit(step) if compiled else step


def _build(lib, workload, shape):
    """bench/training.py's (model, optimizer, loss_fn), the gpt model at ``shape``. The
    model is built on the CPU (the same initialization for every device) and moved."""
    return build(lib, workload) if shape is None else build(lib, workload, shape)


def _batch(workload, shape, rows=None):
    """The workload's (inputs, targets) as NumPy arrays (its first ``rows`` rows), or
    random tokens for a gpt model of ``shape``."""
    if shape is None:
        x, y = batch(workload)
        return np.ascontiguousarray(x[:rows]), np.ascontiguousarray(y[:rows])
    vocab, context = shape[0], shape[1]
    count = 2 if shape is GPT2_TINY else 8  # GPT-2-small: batch 8
    tokens = np.random.default_rng(0).integers(0, vocab, (count, context + 1))
    return np.ascontiguousarray(tokens[:, :-1]), np.ascontiguousarray(tokens[:, 1:])


def _measure(ctx, row, side, make, warmup, iters, memory=False, **extra):
    """Time one step function (and its peak memory); one RESULT line, or its error."""
    ctx.reset_memory()
    try:
        step = make()
        sync = ctx.ember_sync if side == "ember" else ctx.torch_sync
        start = time.perf_counter()
        loss = float(step().detach())
        first = time.perf_counter() - start
        ms = median_ms(step, sync, max(warmup - 1, 0), iters, ctx)
        record(row, side, _sig(ms), "ms/step", first_s=round(first, 1),
               loss=round(loss, 4), better="lower", **extra)
        if memory:
            record(row.replace("ms/step", "peak memory"), side, ctx.peak_gib(side), "GiB",
                   better="lower", **({"target": "<=1.3"} if side == "ember" else {}))
    except Exception as exc:  # noqa: BLE001
        record(row, side, error=_error(exc), unit="ms/step")
    finally:
        step = None
        gc.collect()


def _modes(ctx, jobs, amp, warmup, iters, targets, memory=False):
    """Each job ``(row, workload, shape)`` four ways: torch eager, ember eager,
    torch.compile, ember.jit; every job's eager figures first, and the riskiest compile
    last, while the section's time lasts."""
    torch = ctx.torch
    rows = 16 if ctx.quick else None  # (--quick: a few rows of the workloads' batches)
    runs = [("eager", "torch", False), ("eager", "ember", False),
            ("compiled", "torch", True), ("compiled", "ember", True)]
    for mode, side, compiled in runs:
        for row, workload, shape in jobs:
            name = f"{row} {mode} ms/step"
            if ctx.left() < 5:
                record(name, side, error="skipped: the section's time ran out",
                       unit="ms/step")
                continue
            if side == "torch" and (torch is None or (compiled and not ctx.cuda)):
                record(name, side, error="skipped: torch.compile runs only on the GPU here"
                       if torch is not None else "skipped: no PyTorch", unit="ms/step")
                continue
            if side == "torch":
                dtype = None if amp is None else getattr(torch, amp)
                make = (lambda c=compiled, d=dtype, w=workload, s=shape:
                        _torch_step(torch, w, ctx.torch_device, s, d, c, rows))
            else:
                dtype = None if amp is None else getattr(ember, amp)
                make = (lambda c=compiled, d=dtype, w=workload, s=shape:
                        _ember_step(w, ctx.device, s, d, c, rows))
            extra = {"target": targets[mode]} if side == "ember" and targets.get(mode) else {}
            _measure(ctx, name, side, make, warmup, iters, memory, **extra)


def section_workloads(ctx: Context) -> None:
    """DESIGN.md's mlp, cnn and gpt training steps."""
    warmup, iters = (1, 1) if ctx.quick else (3, 10)
    names = ("mlp",) if ctx.quick else ("mlp", "cnn", "gpt")
    _modes(ctx, [(w, w, None) for w in names], None, warmup, iters, {})


def section_gpt2(ctx: Context) -> None:
    """A GPT-2-small step (12 layers, width 768, 12 heads, context 1024, batch 8) under
    bfloat16 autocast with AdamW (float16 where this CuPy has no bfloat16)."""
    shape = GPT2_TINY if ctx.quick else GPT2_SMALL
    amp = "bfloat16"
    if ctx.cuda and not ember.cuda.is_bf16_supported():
        amp = "float16"
        print("    this CuPy has no bfloat16 (CuPy 14 with ml_dtypes needed): float16 "
              "autocast on both sides instead")
    warmup, iters = (1, 1) if ctx.quick else (2, 5)
    label = "gpt2-small" + (" (tiny)" if ctx.quick else "") + f" {amp}"
    _modes(ctx, [(label, "gpt", shape)], amp, warmup, iters,
           {"eager": "<=1.5", "compiled": "<=1.2"}, memory=True)


SECTIONS = {"ops": section_ops, "matmul": section_matmul, "workloads": section_workloads,
            "gpt2": section_gpt2}


def run(name: str, device: str, quick: bool, seconds: float) -> None:
    """Run section ``name`` (in this, a child, process)."""
    ctx = Context(device, quick, seconds)
    SECTIONS[name](ctx)
