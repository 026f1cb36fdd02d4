"""Compiled equals eager: every op of the op tables, run through ``ember.jit``, gives the
outputs and gradients eager mode gives (float64 to 1e-10, float32 to 1e-5 relative).

Ops whose output shape depends on the values (``nonzero``, ``unique``, ...) cannot be
held by a static graph: for those the check is that ember.jit refuses with a
:class:`~ember.compiler.TraceError` that names the op."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.compiler import TraceError
from tests.backends.op_table_check import all_cases
from tests.ops.optable import (_call, _first_float, _samples, float_positions, result_arrays,
                               to_ember)

CASES = all_cases()
TOL = {"float64": (1e-10, 1e-10), "float32": (1e-5, 1e-6)}


def _params(with_grad: bool):
    out = []
    for case in CASES:
        for dtype in case.dtypes:
            if with_grad and not (case.grad and dtype in ("float32", "float64")):
                continue
            if not with_grad and dtype not in ("float32", "float64", "int64", "bool"):
                continue
            out.append(pytest.param(case, dtype, id=f"{case.name}-{dtype}"))
    return out


def _close(actual, expected, dtype, what):
    rtol, atol = TOL.get(dtype, (0, 0))
    assert len(actual) == len(expected), what
    for a, e in zip(actual, expected):
        assert a.shape == e.shape, f"{what}: shape {a.shape}, eager {e.shape}"
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def _compiled(fn):
    """``fn`` through ember.jit, or None when ember.jit rightly refuses it."""
    def run(*args):
        try:
            return ember.jit(fn)(*args)
        except TraceError as exc:
            text = str(exc)
            assert "ember.jit" in text and ("depends on the values" in text or
                                            "value of a traced tensor" in text or
                                            "values as an argument" in text), text
            return None
    return run


def forward_of(case, sample):
    """``(args, kwargs, tensors, fn)`` for one sample: ``fn(*ts)`` calls the case with
    its tensor arguments (at positions ``tensors``) replaced by ``ts``."""
    args, kwargs = _call(case, sample, to_ember)
    tensors = [i for i, a in enumerate(args) if isinstance(a, ember.Tensor)]

    def fn(*ts):
        full = list(args)
        for i, t in zip(tensors, ts):
            full[i] = t
        return case.fn(*full, **kwargs)
    return args, kwargs, tensors, fn


@pytest.mark.parametrize("case,dtype", _params(with_grad=False))
def test_forward_compiled_equals_eager(case, dtype):
    for sample in _samples(case, dtype):
        args, kwargs, tensors, fn = forward_of(case, sample)
        try:
            eager = case.fn(*args, **kwargs)
        except ember.EmberError:
            continue  # a sample that checks an error: eager refuses it too
        compiled = _compiled(fn)(*[args[i] for i in tensors])
        if compiled is None:
            continue
        _close(result_arrays(compiled), result_arrays(eager), dtype,
               f"{case.name}[{dtype}] {sample}")


def gradient_of(case, sample, upstream):
    """``(pos, args, grads)`` for one sample: ``grads(*ts)`` differentiates the case's
    first float output, against ``upstream(out)``, with respect to the float arguments at
    ``pos`` (given as ``ts``); None when there is nothing to differentiate."""
    pos = float_positions(sample)
    args, kwargs = _call(case, sample, to_ember, pos) if pos else (None, None)

    def grads(*ts):
        full = list(args)
        for i, t in zip(pos, ts):
            full[i] = t
        out = _first_float(case.fn(*full, **kwargs))
        if out is None or not out.requires_grad or out.numel() == 0:
            return None
        return ember.autograd.grad(out, list(ts), upstream(out), allow_unused=True)
    return pos, args, grads


def _varied_upstream(out):
    return ember.ones_like(out) * 0.5 + ember.arange(out.numel()).reshape(out.shape) \
        .to(out.dtype) * 0.01


@pytest.mark.parametrize("case,dtype", _params(with_grad=True))
def test_grad_compiled_equals_eager(case, dtype):
    for sample in _samples(case, dtype):
        pos, args, grads = gradient_of(case, sample, _varied_upstream)
        if not pos:
            continue
        eager = grads(*[args[i] for i in pos])
        if eager is None:
            continue
        compiled = _compiled(grads)(*[args[i].detach().requires_grad_() for i in pos])
        if compiled is None:
            continue
        for i, (c, e) in enumerate(zip(compiled, eager)):
            if e is None:
                assert c is None or not c.numpy().any()
                continue
            _close(result_arrays(c), result_arrays(e), dtype,
                   f"{case.name}[{dtype}] grad of arg {pos[i]} {sample}")

