"""Every op of the op tables on another device against the CPU: the same results
(values, dtypes, shapes), on that device, and the same first-order gradients.

Used by ``test_op_table_on_device.py`` (on the ``fakegpu`` stand-in) and by
``bench/gpu_check.py`` (on ``cuda``). A sample the CPU refuses with an error must be
refused on the device too.
"""
from __future__ import annotations

import functools
import importlib

import numpy as np

import ember
from tests.ops.optable import (GRAD_TOL, TOL, _call, _first_float, _samples, assert_close,
                               float_positions, result_arrays, result_dtypes, to_ember)

TABLES = ["tests.ops.test_elementwise", "tests.ops.test_elementwise_composite",
          "tests.ops.test_linalg", "tests.ops.test_movement", "tests.ops.test_reduce",
          "tests.ops.test_selection", "tests.ops.test_shape",
          "tests.nn.test_functional_activation", "tests.nn.test_functional_conv",
          "tests.nn.test_functional_loss", "tests.nn.test_functional_misc",
          "tests.nn.test_functional_norm", "tests.nn.test_functional_pooling"]


def all_cases() -> list:
    """The OpCase entries of every op table."""
    return [c for name in TABLES for c in importlib.import_module(name).CASES]


def core_dtypes(case) -> list[str]:
    """One floating dtype (float32, else float64) and one integer or bool dtype, of
    those the op takes: what the device checks run first."""
    floats = [d for d in ("float32", "float64") if d in case.dtypes][:1]
    others = [d for d in ("int64", "bool") if d in case.dtypes][:1]
    return floats + others


def _devices_of(out) -> list[str]:
    if isinstance(out, (tuple, list)):
        return [d for o in out for d in _devices_of(o)]
    return [out.device.type] if isinstance(out, ember.Tensor) else []


def _upstream(out: ember.Tensor) -> ember.Tensor:
    """A fixed, non-uniform upstream gradient for ``out``, on its device."""
    n = out.numel()
    values = 0.5 + 0.01 * np.arange(n, dtype=np.float64).reshape(tuple(out.shape))
    return ember.from_numpy(values.astype(out.dtype.np)).to(out.device)


def _run(case, sample, device, grad_positions):
    """("ok", results, dtypes, devices, grads) or ("error", text) for one sample."""
    ember.manual_seed(0)
    args, kwargs = _call(case, sample, functools.partial(to_ember, device=device),
                         grad_positions)
    try:
        out = case.fn(*args, **kwargs)
        grads = None
        first = _first_float(out) if grad_positions else None
        if first is not None and first.requires_grad and first.numel():
            found = ember.autograd.grad(first, [args[i] for i in grad_positions],
                                        _upstream(first), allow_unused=True)
            grads = [None if g is None else result_arrays(g)[0] for g in found]
    except Exception as exc:  # noqa: BLE001 - a device may fail where the CPU does not
        return ("error", f"{type(exc).__name__}: {str(exc)[:200]}")
    return ("ok", result_arrays(out), result_dtypes(out), _devices_of(out), grads)


def check_case(case, dtype: str, device, tol_scale: float = 1.0) -> list[str]:
    """What differs between ``case`` in ``dtype`` on ``device`` and on the CPU (an empty
    list when nothing does). ``tol_scale`` widens the op tables' tolerances (a GPU sums
    in another order than the CPU)."""
    device_type = ember.device(device).type
    tol = {k: (r * tol_scale, a * tol_scale) for k, (r, a) in (case.tol or TOL).items()}
    grad_tol = {k: (r * tol_scale, a * tol_scale) for k, (r, a) in GRAD_TOL.items()}
    problems = []
    for sample in _samples(case, dtype):
        pos = float_positions(sample) if case.grad and dtype in GRAD_TOL else []
        what = f"{case.name}[{dtype}] {sample}"
        cpu, dev = _run(case, sample, "cpu", pos), _run(case, sample, device, pos)
        if cpu[0] == "error":
            if dev[0] != "error":
                problems.append(f"{what}: the CPU raises ({cpu[1]}), {device_type} does not")
            continue
        if dev[0] == "error":
            problems.append(f"{what}: {device_type} raises {dev[1]}")
            continue
        _, c_out, c_dtypes, _, c_grads = cpu
        _, d_out, d_dtypes, d_devices, d_grads = dev
        if d_dtypes != c_dtypes:
            problems.append(f"{what}: dtypes {d_dtypes}, the CPU gives {c_dtypes}")
            continue
        if any(d != device_type for d in d_devices):
            problems.append(f"{what}: results on {d_devices}, expected {device_type}")
        try:
            assert_close(d_out, c_out, dtype, tol, what)
            if (c_grads is None) != (d_grads is None):
                raise AssertionError(f"{what}: gradients on one device only")
            for i, (dg, cg) in enumerate(zip(d_grads or (), c_grads or ())):
                if (dg is None) != (cg is None):
                    raise AssertionError(f"{what}: gradient of arg {pos[i]} on one device only")
                if dg is not None:
                    assert_close([dg], [cg], dtype, grad_tol, f"{what} grad of arg {pos[i]}")
        except AssertionError as exc:
            problems.append(str(exc).strip().splitlines()[0][:300])
    return problems
