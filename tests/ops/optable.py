"""The op-table test templates.

Each op family's file lists :class:`OpCase` entries; :func:`generate` turns them into
tests that check, for every sample and dtype:

- forward against PyTorch (skipped without torch) and against a NumPy reference;
- the result dtype against PyTorch;
- gradients against PyTorch and against float64 central differences in a random
  direction; second-order gradients against central differences of the first;
- every primitive's shape/dtype rule against what it actually produced.

The PyTorch comparisons run on each of ``DEVICES`` (``cpu``, and ``cuda``, which skips
without CuPy and a GPU): the ember side computes on the device, PyTorch on the CPU.

A sample is ``S(*args, **kwargs)``; NumPy arrays among the arguments become tensors
(both ember and torch), anything else passes through unchanged. ``nc(array)`` marks an
array to be passed as a non-contiguous view.
"""
from __future__ import annotations

import dataclasses
import functools
import zlib
from typing import Any, Callable

import numpy as np
import pytest

import ember
from ember.ops import registry
from tests.backends.devices import DEVICES, skip_unsupported

try:
    import torch
except ImportError:  # the torch checks skip; the finite-difference checks still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the oracle) not installed")

FLOATS = ("float32", "float64", "float16", "bfloat16")
INTS = ("int64", "int32", "int16", "int8", "uint8")
ALL = FLOATS + INTS + ("bool",)

# Tolerances, written down once: (rtol, atol) per dtype.
TOL = {"float64": (1e-7, 1e-9), "float32": (1e-5, 1e-5), "float16": (2e-3, 2e-3),
       "bfloat16": (2e-2, 2e-2)}
GRAD_TOL = {"float64": (1e-6, 1e-8), "float32": (1e-4, 1e-4)}


class NonContiguous:
    """Marks an array to be passed to ember as a non-contiguous view of the same values."""

    def __init__(self, array):
        self.array = np.asarray(array)


def nc(array) -> NonContiguous:
    return NonContiguous(array)


@dataclasses.dataclass
class S:
    """One sample: the op's positional and keyword arguments."""
    args: tuple
    kwargs: dict

    def __init__(self, *args, **kwargs):
        self.args = args
        self.kwargs = kwargs


@dataclasses.dataclass
class OpCase:
    """One op in a table.

    Args:
        name: test id.
        fn: the ember function, called as ``fn(*args, **kwargs)``.
        torch_fn: the PyTorch function with the same call (None: no torch check).
        samples: ``samples(rng, dtype) -> list[S]``.
        np_fn: optional NumPy reference over float64 arrays.
        dtypes: dtypes to test.
        grad: check first-order gradients; gradgrad: second order too.
        tol: overrides of TOL for this op.
    """
    name: str
    fn: Callable
    torch_fn: Callable | None
    samples: Callable
    np_fn: Callable | None = None
    dtypes: tuple = FLOATS
    grad: bool = True
    gradgrad: bool = True
    tol: dict | None = None
    grad_dtypes: tuple = ("float32", "float64")

    def __repr__(self):
        return self.name


def rand(rng, shape, dtype="float64", low=-2.0, high=2.0):
    """Random values of ``dtype`` (integers in [low, high))."""
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if dtype in INTS:
        lo = 0 if dtype == "uint8" else int(low)
        return rng.integers(lo, max(int(high), lo + 1), size=shape).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(np_dtype(dtype))


def np_dtype(name):
    return ember.dtypes.as_dtype(name).np


def to_ember(value, requires_grad=False, device=None):
    """NumPy arrays as leaf tensors (on ``device``, default the CPU), ``nc`` arrays as
    non-contiguous views; other values pass through."""
    if device is not None and ember.device(device).type != "cpu":
        return _on_device(value, requires_grad, device)
    if isinstance(value, NonContiguous):
        arr = value.array
        # a transposed copy, transposed back: same values, non-contiguous strides
        if arr.ndim >= 2:
            view = np.ascontiguousarray(arr.swapaxes(0, -1)).swapaxes(0, -1)
        elif arr.ndim == 1 and arr.size:
            view = np.repeat(arr, 2)[::2]
        else:
            view = arr.copy()
        return ember.from_numpy(view).requires_grad_(requires_grad)
    if isinstance(value, np.ndarray):
        return ember.from_numpy(value.copy()).requires_grad_(requires_grad)
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (np.ndarray, NonContiguous)):
        return type(value)(to_ember(v, requires_grad) for v in value)
    return value


def _on_device(value, requires_grad, device):
    """:func:`to_ember` on another device: the same values and the same kinds of views."""
    if isinstance(value, NonContiguous):
        arr = value.array
        if arr.ndim >= 2:
            base = ember.from_numpy(np.ascontiguousarray(arr.swapaxes(0, -1))).to(device)
            view = base.transpose(0, arr.ndim - 1)
        elif arr.ndim == 1 and arr.size:
            view = ember.from_numpy(np.repeat(arr, 2)).to(device)[::2]
        else:
            view = ember.from_numpy(arr.copy()).to(device)
        return view.requires_grad_(requires_grad)
    if isinstance(value, np.ndarray):
        return ember.from_numpy(value.copy()).to(device).requires_grad_(requires_grad)
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (np.ndarray, NonContiguous)):
        return type(value)(_on_device(v, requires_grad, device) for v in value)
    return value


def to_torch(value, requires_grad=False):
    if isinstance(value, NonContiguous):
        value = value.array
    if isinstance(value, np.ndarray):
        if value.dtype == ember.bfloat16.np:
            t = torch.from_numpy(value.astype(np.float32)).to(torch.bfloat16)
        else:
            t = torch.from_numpy(value.copy())
        return t.requires_grad_(requires_grad)
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (np.ndarray, NonContiguous)):
        return type(value)(to_torch(v, requires_grad) for v in value)
    if isinstance(value, ember.DType):
        return getattr(torch, value.name)
    return value


def to_numpy(value):
    if isinstance(value, NonContiguous):
        return value.array
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], (np.ndarray, NonContiguous)):
        return type(value)(to_numpy(v) for v in value)
    return value


def result_arrays(out):
    """An op's result(s) as a list of float64/int/bool NumPy arrays."""
    if isinstance(out, (tuple, list)):
        return [a for o in out for a in result_arrays(o)]
    if isinstance(out, ember.Tensor):
        arr = out.detach().numpy()
        return [arr.astype(np.float64) if out.dtype.is_floating_point else arr]
    if torch is not None and isinstance(out, torch.Tensor):
        t = out.detach()
        return [t.double().numpy() if t.is_floating_point() else t.numpy()]
    return [np.asarray(out)]


def result_dtypes(out):
    if isinstance(out, (tuple, list)):
        return [d for o in out for d in result_dtypes(o)]
    if isinstance(out, ember.Tensor):
        return [out.dtype.name]
    if torch is not None and isinstance(out, torch.Tensor):
        return [str(out.dtype).removeprefix("torch.")]
    return []


def assert_close(actual, expected, dtype, tol=None, what=""):
    rtol, atol = (tol or TOL).get(dtype, (0, 0)) if dtype in FLOATS else (0, 0)
    assert len(actual) == len(expected), f"{what}: {len(actual)} results, expected {len(expected)}"
    for a, e in zip(actual, expected):
        assert a.shape == e.shape, f"{what}: shape {a.shape}, expected {e.shape}"
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def on_device_tol(tol: dict, device: str) -> dict:
    """``tol`` for results computed on ``device``: ten times wider on a GPU, which sums
    in another order than the CPU (and PyTorch's CPU kernels)."""
    if ember.device(device).type == "cpu":
        return tol
    return {k: (r * 10, a * 10) for k, (r, a) in tol.items()}


def float_positions(sample):
    """Indices of the positional arguments that are floating arrays (differentiable)."""
    out = []
    for i, a in enumerate(sample.args):
        arr = a.array if isinstance(a, NonContiguous) else a
        if isinstance(arr, np.ndarray) and arr.dtype.kind == "f":
            out.append(i)
    return out


def _samples(case, dtype):
    rng = np.random.default_rng(zlib.crc32(f"{case.name}-{dtype}".encode()))
    return case.samples(rng, dtype)


def _call(case, sample, convert, grad_positions=()):
    args = [convert(a, i in grad_positions) for i, a in enumerate(sample.args)]
    kwargs = {k: convert(v) for k, v in sample.kwargs.items()}
    return args, kwargs


class _ShapeRuleObserver:
    """Checks every primitive's shape/dtype rule against the result it produced."""

    def __call__(self, op, inputs, params, out):
        if op.dynamic_shape:
            return
        avals = [registry.AbstractValue(t.shape, t.dtype) for t in inputs]
        inferred = registry.infer(op, *avals, **params)
        outs = out if op.n_outputs > 1 else (out,)
        inferred = inferred if op.n_outputs > 1 else (inferred,)
        for got, want in zip(outs, inferred):
            shape = tuple(got.shape) if hasattr(got, "shape") else np.shape(got)
            dtype = got.dtype if hasattr(got, "dtype") else np.asarray(got).dtype
            assert shape == tuple(want.shape), \
                f"{op.name}: shape rule says {want.shape}, forward gave {shape}"
            assert ember.dtypes.as_dtype(dtype) is want.dtype, \
                f"{op.name}: dtype rule says {want.dtype}, forward gave {dtype}"
            # only views may share memory with an input (ember.jit's memory plan and
            # in-place ops on results rely on it)
            if not op.is_view and isinstance(got, np.ndarray):
                assert not any(np.may_share_memory(got, t._data) for t in inputs
                               if isinstance(t._data, np.ndarray)), \
                    f"{op.name}: its result shares memory with an input but it is no view"


def generate(cases, namespace):
    """Add the template tests for ``cases`` to a test module's ``namespace``."""
    fwd = [(c, d) for c in cases for d in c.dtypes]
    grad = [(c, d) for c in cases if c.grad for d in c.grad_dtypes if d in c.dtypes]
    fd = [c for c in cases if c.grad and "float64" in c.dtypes]
    fd2 = [c for c in cases if c.grad and c.gradgrad and "float64" in c.dtypes]
    ids = lambda p: f"{p[0].name}-{p[1]}"  # noqa: E731

    @needs_torch
    @pytest.mark.parametrize("device", DEVICES)
    @pytest.mark.parametrize("case_dtype", fwd, ids=ids)
    def test_forward_matches_torch(case_dtype, device):
        case, dtype = case_dtype
        if case.torch_fn is None:
            pytest.skip("no torch reference")
        skip_unsupported(device, dtype)
        on_device = functools.partial(to_ember, device=device)
        for sample in _samples(case, dtype):
            eargs, ekw = _call(case, sample, on_device)
            targs, tkw = _call(case, sample, to_torch)
            registry._observer = _ShapeRuleObserver()
            try:
                out = case.fn(*eargs, **ekw)
            finally:
                registry._observer = None
            ref = case.torch_fn(*targs, **tkw)
            what = f"{case.name}[{dtype}] {sample}"
            assert result_dtypes(out) == result_dtypes(ref), \
                f"{what}: dtypes {result_dtypes(out)}, torch gives {result_dtypes(ref)}"
            assert_close(result_arrays(out), result_arrays(ref), dtype,
                         on_device_tol(case.tol or TOL, device), what)

    @pytest.mark.parametrize("case", [c for c in cases if c.np_fn], ids=repr)
    def test_forward_matches_numpy(case):
        dtype = "float64" if "float64" in case.dtypes else case.dtypes[0]
        for sample in _samples(case, dtype):
            eargs, ekw = _call(case, sample, to_ember)
            nargs, nkw = _call(case, sample, lambda v, *_: to_numpy(v))
            out = case.fn(*eargs, **ekw)
            ref = case.np_fn(*nargs, **nkw)
            ref = ref if isinstance(ref, (tuple, list)) else [ref]
            assert_close(result_arrays(out), [np.asarray(r) for r in ref], dtype, case.tol,
                         f"{case.name} vs numpy {sample}")

    @needs_torch
    @pytest.mark.parametrize("device", DEVICES)
    @pytest.mark.parametrize("case_dtype", grad, ids=ids)
    def test_grad_matches_torch(case_dtype, device):
        case, dtype = case_dtype
        if case.torch_fn is None:
            pytest.skip("no torch reference")
        on_device = functools.partial(to_ember, device=device)
        for sample in _samples(case, dtype):
            pos = float_positions(sample)
            if not pos:
                continue
            eargs, ekw = _call(case, sample, on_device, pos)
            targs, tkw = _call(case, sample, to_torch, pos)
            eout = _first_float(case.fn(*eargs, **ekw))
            tout = _first_float(case.torch_fn(*targs, **tkw))
            if eout is None or tout.numel() == 0 or not tout.requires_grad:
                continue
            rng = np.random.default_rng(0)
            up = rng.standard_normal(tuple(tout.shape)).astype(np_dtype(dtype))
            egrads = ember.autograd.grad(eout, [eargs[i] for i in pos],
                                         ember.from_numpy(up).to(device), allow_unused=True)
            tgrads = torch.autograd.grad(tout, [targs[i] for i in pos], torch.from_numpy(up),
                                         allow_unused=True)
            for i, eg, tg in zip(pos, egrads, tgrads):
                what = f"{case.name}[{dtype}] grad of arg {i} {sample}"
                if tg is None:
                    assert eg is None or not eg.detach().numpy().any(), what
                    continue
                if eg is None:  # not connected in ember's graph: torch's must be zero
                    assert not result_arrays(tg)[0].any(), f"{what}: ember gave no gradient"
                    continue
                assert eg.dtype.name == dtype, f"{what}: grad dtype {eg.dtype}"
                assert_close(result_arrays(eg), result_arrays(tg), dtype,
                             on_device_tol(GRAD_TOL, device), what)

    @pytest.mark.parametrize("case", fd, ids=repr)
    def test_grad_matches_finite_differences(case):
        for sample in _samples(case, "float64"):
            check_vjp_fd(case, sample, order=1)

    @pytest.mark.parametrize("case", fd2, ids=repr)
    def test_gradgrad_matches_finite_differences(case):
        for sample in _samples(case, "float64"):
            check_vjp_fd(case, sample, order=2)

    namespace.update(test_forward_matches_torch=test_forward_matches_torch,
                     test_forward_matches_numpy=test_forward_matches_numpy,
                     test_grad_matches_torch=test_grad_matches_torch,
                     test_grad_matches_finite_differences=test_grad_matches_finite_differences,
                     test_gradgrad_matches_finite_differences=test_gradgrad_matches_finite_differences)


def _first_float(out):
    if isinstance(out, (tuple, list)):
        for o in out:
            f = _first_float(o)
            if f is not None:
                return f
        return None
    return out if out.is_floating_point() else None


def check_vjp_fd(case, sample, order=1, eps=1e-6):
    """Autograd against float64 central differences, in a random direction.

    Order 1 checks <J^T u, v> against the difference of <f(x), u> along v. Order 2
    differentiates <J(x)^T u, w> with respect to both x and the upstream gradient u,
    so it also checks the VJP of the VJP of ops that are linear in x.
    """
    pos = float_positions(sample)
    if not pos:
        return
    kwargs = {k: to_ember(v) for k, v in sample.kwargs.items()}
    x0 = [np.asarray(to_numpy(sample.args[i]), dtype=np.float64) for i in pos]
    if any(x.size == 0 or not np.isfinite(x).all() for x in x0):
        return

    def call(xs):
        args = [to_ember(a) for a in sample.args]
        leaves = []
        for i, x in zip(pos, xs):
            args[i] = ember.tensor(x, dtype=ember.float64, requires_grad=True)
            leaves.append(args[i])
        return _first_float(case.fn(*args, **kwargs)), leaves

    with ember.no_grad():
        out0, _ = call(x0)
    if out0 is None or out0.numel() == 0:
        return
    rng = np.random.default_rng(1)
    u0 = rng.standard_normal(tuple(out0.shape))
    ws = [rng.standard_normal(x.shape) for x in x0]
    variables0 = x0 + ([u0] if order == 2 else [])
    direction = [rng.standard_normal(v.shape) for v in variables0]

    def scalar_fn(variables):
        """order 1: <f(x), u>; order 2: <d<f(x), u>/dx, w> as a function of (x, u)."""
        out, leaves = call(variables[:len(pos)])
        u = ember.tensor(variables[-1] if order == 2 else u0, requires_grad=order == 2)
        value = (out * u).sum()
        if order == 2:
            grads = ember.autograd.grad(value, leaves, create_graph=True, allow_unused=True)
            value = ember.zeros((), dtype=ember.float64)
            for g, w in zip(grads, ws):
                if g is not None:
                    value = value + (g * ember.tensor(w)).sum()
            leaves = leaves + [u]
        return value, leaves

    value, leaves = scalar_fn(variables0)
    if not value.requires_grad:
        return
    analytic = ember.autograd.grad(value, leaves, allow_unused=True)
    predicted = sum(float((g.detach().numpy() * d).sum())
                    for g, d in zip(analytic, direction) if g is not None)
    plus, _ = scalar_fn([v + eps * d for v, d in zip(variables0, direction)])
    minus, _ = scalar_fn([v - eps * d for v, d in zip(variables0, direction)])
    numeric = (plus.item() - minus.item()) / (2 * eps)
    scale = max(1.0, abs(numeric))
    assert abs(predicted - numeric) <= 1e-5 * scale, \
        f"{case.name} order {order}: autograd {predicted}, finite differences {numeric} ({sample})"
