"""Generated C kernels (``ember.compiler.codegen``): every op rule against the op's own
NumPy forward, for each dtype and broadcasting layout; reductions and multi-pass
kernels; the on-disk cache shared between processes; compiler failures; the NumPy
backend."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ember
from ember import dtypes as dt
from ember.compiler.codegen import backend_name, build, c, prepare_kernels, scalar
from ember.compiler.fused import FusedKernel, Step
from ember.ops.registry import OPS, AbstractValue, infer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RNG = np.random.default_rng(1)
TOL = {"float32": dict(rtol=3e-6, atol=1e-6), "float64": dict(rtol=1e-13, atol=1e-14)}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("kernels"))


@pytest.fixture
def use_c(monkeypatch, cache_dir):
    """The C backend, compiling on a kernel's first call, into a private cache."""
    if build.find_compiler() is None:
        pytest.skip("no C compiler")
    monkeypatch.setenv("EMBER_CACHE_DIR", cache_dir)
    monkeypatch.delenv("EMBER_JIT_BACKEND", raising=False)


def make_kernel(inputs, program, outputs=None, domain=None, reduced=()):
    """A kernel over ``inputs`` (arrays: their shapes and dtypes) running ``program``,
    a list of ``(op name, argument indices, params)``; returns every step by default."""
    avals = [(np.shape(a), dt.as_dtype(np.asarray(a).dtype)) for a in inputs]
    steps = []
    for name, args, params in program:
        op = OPS[name]
        out = infer(op, *[AbstractValue(*avals[i]) for i in args], **params)
        steps.append(Step(op, args, params, out.shape, out.dtype))
        avals.append((out.shape, out.dtype))
    if outputs is None:
        outputs = list(range(len(inputs), len(avals)))
    if domain is None:
        domain = np.broadcast_shapes(*[a[0] for a in avals])
    return FusedKernel(avals[:len(inputs)], [], steps, outputs, domain, reduced)


def compiled_and_reference(kernel, arrays):
    """(the compiled kernel's outputs, the steps' NumPy forwards' outputs)."""
    expected = kernel.evaluate(np, *arrays)
    prepare_kernels([kernel])
    actual = kernel.forward(np, *arrays)
    assert kernel.backend == "c"
    if kernel.n_outputs == 1:
        return [actual], [expected]
    return list(actual), list(expected)


def assert_same(kernel, actual, expected, tol):
    for k, (a, e) in enumerate(zip(actual, expected)):
        step = kernel.steps[kernel.outputs[k] - kernel.first_step]
        e = np.asarray(e)
        what = f"{step.op.name} {step.params or ''} -> {step.dtype.name}"
        assert a.shape == e.shape and a.dtype == e.dtype, what
        if a.dtype.kind == "f":
            np.testing.assert_allclose(a, e, equal_nan=True, err_msg=what, **tol)
        else:
            np.testing.assert_array_equal(a, e, err_msg=what)


# Every rule, each dtype ----------------------------------------------------------------
UNIT = ["exp", "exp2", "log", "log2", "log10", "log1p", "expm1", "sqrt", "rsqrt",
        "reciprocal", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
        "sigmoid", "erf"]
SIGNED = ["neg", "abs", "sign", "square", "relu", "floor", "ceil", "trunc"]
PAIR = ["add", "sub", "mul", "div", "pow", "atan2", "maximum", "minimum", "fmax", "fmin",
        "xlogy", "eq", "ne", "lt", "le", "gt", "ge"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_rules_match_numpy_forwards(use_c, dtype):
    x = RNG.uniform(0.1, 0.9, (4, 3, 5)).astype(dtype)        # inside every op's domain
    y = RNG.uniform(0.5, 2.0, (3, 5)).astype(dtype)           # broadcasts along dim 0
    z = np.round(RNG.uniform(-2, 2, (4, 3, 5)), 1).astype(dtype)  # signs, halves, zeros
    s = np.asarray(0.3, dtype)
    mask = RNG.random((3, 5)) < 0.5
    other = "float64" if dtype == "float32" else "float32"
    program = [(n, [0], {}) for n in UNIT] + [(n, [2], {}) for n in SIGNED]
    program += [(n, [0, 1], {}) for n in PAIR]
    program += [("round", [2], {"decimals": 0}), ("lerp", [0, 1, 3], {}),
                ("clamp", [2, 3, 1], {}), ("where", [4, 0, 2], {}),
                ("masked_fill", [0, 4, 3], {}), ("cast", [2], {"dtype": dt.as_dtype(other)}),
                ("cast", [2], {"dtype": dt.int32}), ("cast", [2], {"dtype": dt.bool}),
                ("isnan", [2], {}), ("isinf", [0], {}), ("isfinite", [0], {})]
    kernel = make_kernel([x, y, z, s, mask], program)
    actual, expected = compiled_and_reference(kernel, [x, y, z, s, mask])
    assert_same(kernel, actual, expected, TOL[dtype])


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8"])
def test_integer_rules_match_numpy_forwards(use_c, dtype):
    lo, hi = (0, 200) if dtype == "uint8" else (-100, 100)   # int8 sums wrap, as in NumPy
    a = RNG.integers(lo, hi, (4, 3, 5)).astype(dtype)
    b = RNG.integers(lo + 1, hi, (3, 5)).astype(dtype)
    mask = RNG.random((4, 3, 5)) < 0.5
    names = ["add", "sub", "mul", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge"]
    program = [(n, [0, 1], {}) for n in names]
    program += [(n, [0], {}) for n in ("neg", "square", "relu", "floor")]
    program += [("where", [2, 0, 1], {}), ("clamp", [0, 1, 0], {}),
                ("cast", [0], {"dtype": dt.float32}), ("cast", [0], {"dtype": dt.bool}),
                ("cast", [0], {"dtype": dt.int64 if dtype != "int64" else dt.int16})]
    if dtype != "uint8":
        program += [("abs", [0], {}), ("sign", [0], {})]
    kernel = make_kernel([a, b, mask], program)
    actual, expected = compiled_and_reference(kernel, [a, b, mask])
    assert_same(kernel, actual, expected, {})


def test_bool_rules_match_numpy_forwards(use_c):
    p, q = RNG.random((6, 7)) < 0.5, RNG.random((7,)) < 0.5
    program = [(n, [0, 1], {}) for n in ("logical_and", "logical_or", "logical_xor",
                                         "eq", "ne")]
    program += [("logical_not", [0], {}), ("where", [0, 1, 0], {}),
                ("cast", [0], {"dtype": dt.float32})]
    kernel = make_kernel([p, q], program)
    actual, expected = compiled_and_reference(kernel, [p, q])
    assert_same(kernel, actual, expected, {})


def test_nan_and_infinity_propagate_as_in_numpy(use_c):
    x = np.array([np.nan, 1.0, -np.inf, np.inf, -0.0, 2.0], np.float32)
    y = np.array([1.0, np.nan, 0.0, np.nan, 0.0, -np.inf], np.float32)
    program = [(n, [0, 1], {}) for n in ("maximum", "minimum", "fmax", "fmin", "add")]
    program += [(n, [0], {}) for n in ("relu", "sign", "abs", "sigmoid", "exp", "isnan")]
    kernel = make_kernel([x, y], program)
    actual, expected = compiled_and_reference(kernel, [x, y])
    assert_same(kernel, actual, expected, TOL["float32"])


def test_float32_exp_is_within_one_ulp_everywhere(use_c):
    # every 4099th float32 bit pattern: each sign and magnitude, NaN, infinities, and
    # the edges of overflow and of subnormal results
    x = np.arange(0, 2 ** 32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32)
    edges = [np.nan, np.inf, -np.inf, 0.0, -0.0, 88.72283, 88.7229, -87.4, -103.9, -104.0,
             -104.1, -1e30]
    x = np.concatenate([x, np.array(edges, np.float32)])
    kernel = make_kernel([x], [("exp", [0], {})])
    prepare_kernels([kernel])
    actual = kernel.forward(np, x)
    with np.errstate(over="ignore", invalid="ignore"):
        exact = np.exp(x.astype(np.float64)).astype(np.float32)
    special = ~np.isfinite(exact) | (exact == 0)
    np.testing.assert_array_equal(actual[special], exact[special])
    a, e = actual[~special], exact[~special]
    assert (np.abs(a.astype(np.float64) - e) / np.spacing(e)).max() <= 1


@pytest.mark.parametrize("name, exact, limit", [("log", np.log, 1), ("log1p", np.log1p, 2),
                                                ("tanh", np.tanh, 1)])
def test_float32_log_log1p_tanh_are_within_their_ulps_everywhere(use_c, name, exact, limit):
    """The generated kernels' own float32 log (1 ulp), log1p (2 ulp) and tanh (1 ulp),
    which the C compiler vectorises: every 4099th bit pattern, zeros of both signs,
    subnormals, infinities, NaN, negative numbers and the edges of the reductions."""
    x = np.arange(0, 2 ** 32, 4099, dtype=np.uint64).astype(np.uint32).view(np.float32)
    edges = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1e-45, 1.1754942e-38,
             1.1754944e-38, 3.4028235e38, 1.4142135, 1.4142137, 0.70710677, 1e-8, -1e-8,
             -0.99999994, 5.9604645e-08, 0.625, 0.62499994, -0.625, 9.0, 44.0, -45.0]
    x = np.concatenate([x, np.array(edges, np.float32)])
    kernel = make_kernel([x], [(name, [0], {})])
    prepare_kernels([kernel])
    actual = kernel.forward(np, x)
    with np.errstate(all="ignore"):
        want = exact(x.astype(np.float64)).astype(np.float32)
    special = ~np.isfinite(want) | (want == 0)
    np.testing.assert_array_equal(actual[special], want[special])
    assert (np.signbit(actual[want == 0]) == np.signbit(want[want == 0])).all()
    a, e = actual[~special], want[~special]
    assert (np.abs(a.astype(np.float64) - e) / np.spacing(np.abs(e))).max() <= limit


# Layouts ---------------------------------------------------------------------------------
@pytest.mark.parametrize("shapes", [[(3, 1, 5), (4, 1)], [(2, 3), (2, 1)], [(6,), ()],
                                    [(2, 1, 4), (1, 3, 1)], [(4, 1, 5), (4, 1, 5)],
                                    [(1,), (5,)], [(), ()], [(2, 3, 4, 5), (3, 1, 5)]],
                         ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_broadcasting_layouts(use_c, shapes, dtype):
    arrays = [RNG.standard_normal(s).astype(dtype) for s in shapes]
    kernel = make_kernel(arrays, [("add", [0, 1], {}), ("mul", [2, 0], {}),
                                  ("tanh", [3], {})])
    actual, expected = compiled_and_reference(kernel, arrays)
    assert_same(kernel, actual, expected, TOL[dtype])
    np.testing.assert_allclose(actual[-1], np.tanh((arrays[0] + arrays[1]) * arrays[0]),
                               **TOL[dtype])


def test_inputs_that_are_views_scalars_or_another_dtype(use_c):
    base = RNG.standard_normal((5, 8)).astype(np.float32)
    y = RNG.standard_normal((8, 5)).astype(np.float32)
    kernel = make_kernel([y, y, np.float32(1)], [("add", [0, 1], {}), ("mul", [3, 2], {})])
    prepare_kernels([kernel])
    views = [base.T, y[::-1], np.float32(2.5)]  # transposed, negative strides, a scalar
    out = kernel.forward(np, *views)
    np.testing.assert_allclose(out[1], (base.T + y[::-1]) * 2.5, rtol=1e-6)
    out64 = kernel.forward(np, y.astype(np.float64), y, 2.0)  # converted to the kernel's
    np.testing.assert_allclose(out64[1], (y + y) * 2, rtol=1e-6)


def test_arrays_passed_by_address_where_their_layout_is_unknown(use_c, monkeypatch):
    monkeypatch.setattr(build, "array_data_offset", lambda: None)
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    kernel = make_kernel([x, x[0]], [("sub", [0, 1], {}), ("exp", [2], {})])
    assert "#define ARRAY_DATA(a) ((void *)(a))" in c.render(kernel, None)
    actual, expected = compiled_and_reference(kernel, [x, x[0]])
    assert_same(kernel, actual, expected, TOL["float32"])


def test_source_does_not_depend_on_sizes():
    def source(shape, bias_shape):
        x, b = np.zeros(shape, np.float32), np.zeros(bias_shape, np.float32)
        return c.render(make_kernel([x, b], [("add", [0, 1], {}), ("exp", [2], {})]), 16)
    assert source((8, 5), (5,)) == source((30, 7), (7,))     # one function for both
    assert source((8, 5), (5,)) == source((8, 5, 2), (5, 2))  # dims 1, 2 merge: [8, 10]
    assert source((8, 5), (5,)) != source((8, 5), (8, 1))     # another broadcast pattern
    assert source((8, 5), (5,)) != source((8, 5, 2), (5, 1))  # three dims stay apart


# Reductions -------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["sum", "amax", "amin"])
@pytest.mark.parametrize("dims,keepdim", [((1,), True), ((1,), False), ((1, 2), True),
                                          ((0, 1, 2), False)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_trailing_reductions(use_c, op, dims, keepdim, dtype):
    x = RNG.standard_normal((3, 4, 50)).astype(dtype)
    x[1, 2, 7] = np.nan  # NaN propagates through max and min, as NumPy's
    if dims == (1,):
        x = x[:, :, 0].copy()
    params = {"dims": dims, "keepdim": keepdim}
    if op == "sum":
        params["dtype"] = None
    kernel = make_kernel([x], [("neg", [0], {}), (op, [1], params)], domain=x.shape,
                         reduced=dims)
    actual, expected = compiled_and_reference(kernel, [x])
    assert_same(kernel, actual, expected, dict(rtol=1e-5 if dtype == "float32" else 1e-12,
                                               atol=1e-6))


def test_float32_sums_of_long_rows_stay_accurate(use_c):
    x = RNG.uniform(0, 1, (3, 5000)).astype(np.float32)  # many blocks of c.SUM_BLOCK
    kernel = make_kernel([x], [("sum", [0], {"dims": (1,), "keepdim": False, "dtype": None})],
                         domain=x.shape, reduced=(1,))
    prepare_kernels([kernel])
    # a float32 running sum would be off by ~1e-5 here; NumPy's pairwise sum by ~1e-7
    np.testing.assert_allclose(kernel.forward(np, x), x.astype(np.float64).sum(1), rtol=3e-7)


@pytest.mark.parametrize("op", ["amax", "amin"])
def test_max_and_min_of_rows_of_infinities_and_nan(use_c, op):
    x = RNG.standard_normal((4, 40)).astype(np.float32)
    x[0], x[1], x[2, 9] = -np.inf, np.inf, np.nan
    kernel = make_kernel([x], [("neg", [0], {}), (op, [1], {"dims": (1,), "keepdim": False})],
                         domain=x.shape, reduced=(1,))
    actual, expected = compiled_and_reference(kernel, [x])
    assert_same(kernel, actual, expected, {})


@pytest.mark.parametrize("op", ["sum", "amax", "amin"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cols", [2, 7, 8, 15, 16, 17, 33, 64, 255, 256, 257, 600])
def test_lane_reductions_at_every_tail_and_block_length(use_c, op, dtype, cols):
    """Float reductions run through a block buffer and the lanes helpers (vector
    partials, then a scalar tail): every split of a row into whole vectors, a tail and
    blocks of SUM_BLOCK gives NumPy's result, and a NaN anywhere (the first value, a
    tail, a later block) makes max and min NaN."""
    x = RNG.standard_normal((6, cols)).astype(dtype)
    for row, at in enumerate((0, cols - 1, cols // 2, min(cols - 1, 300))):
        x[row, at] = np.nan
    x[4] = -np.inf
    params = {"dims": (1,), "keepdim": False}
    if op == "sum":
        params["dtype"] = None
    kernel = make_kernel([x], [("neg", [0], {}), (op, [1], params)], domain=x.shape,
                         reduced=(1,))
    source = c.render(kernel, 16)
    assert f"ember_{op.lstrip('a')}_{'float' if dtype == 'float32' else 'double'}(" in source
    actual, expected = compiled_and_reference(kernel, [x])
    tol = dict(TOL[dtype])
    if op == "sum":  # summed in another order than NumPy's: within a few ulp of sum |x|
        tol["atol"] = 4 * np.finfo(dtype).eps * cols * 3
    assert_same(kernel, actual, expected, tol)


@pytest.mark.parametrize("op", ["amax", "amin"])
def test_integer_max_and_min(use_c, op):
    x = RNG.integers(-1000, 1000, (5, 300)).astype(np.int32)
    kernel = make_kernel([x], [("neg", [0], {}), (op, [1], {"dims": (1,), "keepdim": True})],
                         domain=x.shape, reduced=(1,))
    actual, expected = compiled_and_reference(kernel, [x])
    assert_same(kernel, actual, expected, {})


def test_integer_sum_accumulates_in_int64(use_c):
    x = RNG.integers(-(2 ** 30), 2 ** 30, (4, 64)).astype(np.int32)
    kernel = make_kernel([x], [("abs", [0], {}),
                               ("sum", [1], {"dims": (1,), "keepdim": False,
                                             "dtype": dt.int64})],
                         domain=x.shape, reduced=(1,))
    actual, expected = compiled_and_reference(kernel, [x])
    assert actual[1].dtype == np.int64
    assert_same(kernel, actual, expected, {})


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_and_layer_norm_kernels(use_c, dtype):
    x = (RNG.standard_normal((6, 33)) * 4).astype(dtype)
    w, b = RNG.standard_normal(33).astype(dtype), RNG.standard_normal(33).astype(dtype)
    n, eps = np.asarray(33.0, dtype), np.asarray(1e-5, dtype)
    red = {"dims": (1,), "keepdim": True}
    softmax = make_kernel([x], [("amax", [0], red), ("sub", [0, 1], {}), ("exp", [2], {}),
                                ("sum", [3], dict(red, dtype=None)), ("div", [3, 4], {})],
                          outputs=[5], domain=x.shape, reduced=(1,))
    actual, expected = compiled_and_reference(softmax, [x])
    assert_same(softmax, actual, expected, TOL[dtype])
    # mean, centre, variance, scale and shift: three passes over each row
    norm = make_kernel([x, w, b, n, eps], [
        ("sum", [0], dict(red, dtype=None)), ("div", [5, 3], {}), ("sub", [0, 6], {}),
        ("mul", [7, 7], {}), ("sum", [8], dict(red, dtype=None)), ("div", [9, 3], {}),
        ("add", [10, 4], {}), ("rsqrt", [11], {}), ("mul", [7, 12], {}),
        ("mul", [13, 1], {}), ("add", [14, 2], {})], outputs=[6, 12, 15],
        domain=x.shape, reduced=(1,))
    actual, expected = compiled_and_reference(norm, [x, w, b, n, eps])
    assert_same(norm, actual, expected, dict(rtol=1e-5 if dtype == "float32" else 1e-12,
                                             atol=1e-6))


def test_a_value_the_last_pass_needs_again_is_stored_not_recomputed():
    # softmax: the exp pass keeps exp(x - max) in the output, the last pass divides it
    x = np.zeros((6, 33), np.float32)
    red = {"dims": (1,), "keepdim": True}
    kernel = make_kernel([x], [("amax", [0], red), ("sub", [0, 1], {}), ("exp", [2], {}),
                               ("sum", [3], dict(red, dtype=None)), ("div", [3, 4], {})],
                         outputs=[5], domain=x.shape, reduced=(1,))
    body = c.render(kernel, 16).split("void ember_kernel")[1]
    assert body.count("ember_expf(") == 1


# Fused primitives, decomposed into their steps (passes/decompose.py) --------------------
def _transformer_bits(x, w, b, t):
    """Every primitive ember.jit decomposes, and their backwards."""
    F = ember.nn.functional
    n = x.shape[-1]
    h = F.layer_norm(x + 0.5, (n,), w, b)
    h = F.gelu(h) + F.gelu(h * 0.7, approximate="tanh")
    h = F.rms_norm(h, (n,), w)
    h = F.softmax(h * 3, -1) + F.log_softmax(h, -1) * 0.1
    return F.cross_entropy(h.reshape(-1, n) * 4, t, ignore_index=0, label_smoothing=0.1)


# (float32 gradients through a dozen steps: 1e-6 absolute was exceeded by 1.4x on some
# of 30 seeds, eager against compiled, whatever the kernels' vector width)
@pytest.mark.parametrize("dtype,tol", [("float32", dict(rtol=1e-5, atol=5e-6)),
                                       ("float64", dict(rtol=1e-10, atol=1e-12))])
def test_decomposed_primitives_compiled_equal_eager(use_c, dtype, tol):
    rng = np.random.default_rng(7)  # (its own: the inputs never depend on test order)
    x = ember.from_numpy((rng.standard_normal((4, 6, 40)) * 2).astype(dtype))
    w = ember.from_numpy(rng.standard_normal(40).astype(dtype))
    b = ember.from_numpy(rng.standard_normal(40).astype(dtype))
    t = ember.from_numpy(rng.integers(0, 40, 24))

    def loss_and_grads(x, w, b, t):
        loss = _transformer_bits(x, w, b, t)
        return (loss,) + ember.autograd.grad(loss, [x, w, b])
    leaves = [a.detach().requires_grad_() for a in (x, w, b)]
    eager = loss_and_grads(*leaves, t)
    compiled = ember.jit(loss_and_grads)
    actual = compiled(*leaves, t)
    names = {ins.op.name for ins in compiled.graph().instrs}
    # (normalize_backward stays whole: a hand-written C kernel, ops/norm_kernels.py)
    assert not names & {"native_layer_norm", "rms_norm", "gelu",
                        "gelu_backward", "softmax", "softmax_backward", "log_softmax",
                        "log_softmax_backward", "cross_entropy_loss_backward"}
    kernels = [ins.op for ins in compiled.graph().instrs if isinstance(ins.op, FusedKernel)]
    assert all(k.backend == "c" for k in kernels)
    for a, e in zip(actual, eager):
        np.testing.assert_allclose(a.detach().numpy(), e.detach().numpy(), **tol)


def test_large_kernels_agree_on_one_and_on_several_threads(use_c, monkeypatch):
    monkeypatch.setenv("EMBER_NUM_THREADS", "2")
    x = RNG.standard_normal((300, 200)).astype(np.float32)
    y = RNG.standard_normal((200,)).astype(np.float32)
    flat = make_kernel([x, y], [("mul", [0, 1], {}), ("exp", [2], {})])
    rows = make_kernel([x], [("exp", [0], {}), ("sum", [1], {"dims": (1,), "keepdim": False,
                                                               "dtype": None})],
                       domain=x.shape, reduced=(1,))
    for kernel, arrays in ((flat, [x, y]), (rows, [x])):
        expected = kernel.evaluate(np, *arrays)
        prepare_kernels([kernel])
        for _ in range(8):  # the first six calls alternate one and two threads
            out = kernel.forward(np, *arrays)
            np.testing.assert_allclose(out[1], expected[1], rtol=1e-5)


# Compiling, caching, failing ----------------------------------------------------------
def test_kernels_compile_on_their_first_call(monkeypatch, cache_dir):
    # every call runs the same compiled code, so the values never change between the
    # first call and later ones (a resumed run computes what the uninterrupted one did)
    if build.find_compiler() is None:
        pytest.skip("no C compiler")
    monkeypatch.setenv("EMBER_CACHE_DIR", cache_dir)
    monkeypatch.delenv("EMBER_JIT_BACKEND", raising=False)
    x = np.full((3, 11), 0.25, np.float32)  # a shape and constant no other test uses
    kernel = make_kernel([x], [("mul", [0, 0], {}), ("cosh", [1], {}), ("atan", [2], {})])
    prepare_kernels([kernel])
    before = dict(build.STATS)
    assert kernel.backend == "c-pending"
    first = kernel.forward(np, x)
    assert build.STATS["compiled"] + build.STATS["disk_hits"] > \
        before["compiled"] + before["disk_hits"]
    assert kernel.backend == "c"
    second = kernel.forward(np, x)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    assert not [f for f in os.listdir(os.path.join(cache_dir, "kernels")) if "tmp" in f]


SCRIPT = textwrap.dedent("""
    import json, sys
    import ember
    from ember.compiler.codegen import build
    f = ember.jit(lambda x, y: ((x * y).sinh() + 1.5).sum(1, keepdim=True))
    x, y = ember.ones(8, 40), ember.full((40,), 0.5)
    for _ in range(3):
        r = f(x, y)
    print(json.dumps({"stats": build.STATS, "result": float(r.sum())}))
""")


def test_a_second_process_reuses_the_compiled_kernel(tmp_path):
    if build.find_compiler() is None:
        pytest.skip("no C compiler")
    env = {k: v for k, v in os.environ.items() if k not in ("EMBER_JIT_BACKEND", "CC")}
    env.update(EMBER_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT, EMBER_JIT_LOG="1")

    def run():
        proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr
    first, log1 = run()
    second, log2 = run()
    assert first["stats"]["compiled"] == 1 and "compiled fused_mul_sinh_add_sum" in log1
    assert second["stats"]["compiled"] == 0 and second["stats"]["disk_hits"] == 1
    assert "kernel cache hit" in log2 and "compiled" not in log2
    assert second["result"] == first["result"]
    names = sorted(os.listdir(tmp_path / "kernels"))
    assert len(names) == 2 and names[0].endswith(".c") and names[1].endswith(".so")


BATCH_SCRIPT = textwrap.dedent("""
    import json
    import ember
    from ember.compiler.codegen import build
    batches = []
    original = build._compile_all
    def record(units, compiler, directory, optional=()):
        batches.append(sorted(name for unit in list(units) + list(optional)
                              for _, name, _ in unit))
        return original(units, compiler, directory, optional)
    build._compile_all = record
    model = ember.nn.Sequential(ember.nn.Linear(8, 16), ember.nn.ReLU(), ember.nn.Linear(16, 4))
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    x, y = ember.randn(32, 8), ember.randint(0, 4, (32,))
    def step():
        opt.zero_grad()
        loss = ember.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    ember.jit(step)()
    print(json.dumps(batches))
""")


def test_a_cold_first_call_builds_the_blas_driver_with_the_graphs_kernels(tmp_path):
    """The BLAS driver and the GEMM the specialized calls use compile in the same
    parallel batch as the graph's fused kernels, not on their own first."""
    if build.find_compiler() is None:
        pytest.skip("no C compiler")
    env = {k: v for k, v in os.environ.items() if k not in ("EMBER_JIT_BACKEND", "CC")}
    env.update(EMBER_CACHE_DIR=str(tmp_path), PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-c", BATCH_SCRIPT], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    batches = json.loads(proc.stdout.strip().splitlines()[-1])
    from ember.backends import cpu_blas
    if not cpu_blas.wanted():
        pytest.skip("products do not go through the BLAS driver here")
    first = batches[0]
    assert "blas_driver" in first and "gemm_float" in first
    assert any(name.startswith("fused_") for name in first)
    assert not any("blas_driver" in b for b in batches[1:])


def test_a_failing_compiler_gives_its_message_and_the_kernel_file(monkeypatch, tmp_path):
    fake = tmp_path / "fake-cc"
    fake.write_text("#!/bin/sh\necho 'fake-cc: internal error: out of ideals' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("EMBER_JIT_BACKEND", raising=False)
    with pytest.raises(build.KernelCompileError) as info:
        build.load_kernels([("fused_test", "void ember_kernel(void) {}\n")])
    text = str(info.value)
    assert "fake-cc: internal error: out of ideals" in text and "exit status 3" in text
    c_file = text.split("kernel source: ")[1].split()[0]
    assert c_file.endswith(".c") and open(c_file).read() == "void ember_kernel(void) {}\n"
    # through ember.jit: the same message, as an ember error, on the call that compiles
    f = ember.jit(lambda x: (x * 2).exp())
    x = ember.ones(4)
    with pytest.raises(ember.EmberError, match="out of ideals"):
        f(x)


def test_a_real_compiler_error_names_the_line(monkeypatch, tmp_path):
    if build.find_compiler() is None:
        pytest.skip("no C compiler")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    with pytest.raises(build.KernelCompileError) as info:
        build.load_kernels([("fused_broken", "void ember_kernel(void) { undeclared = 1; }\n")])
    text = str(info.value)
    assert "undeclared" in text and "fused_broken" in text and ".c" in text


def test_without_a_compiler_kernels_run_with_numpy(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.delenv("EMBER_JIT_BACKEND", raising=False)
    with pytest.warns(UserWarning, match="not an executable"):
        assert backend_name() == "numpy"
    f = ember.jit(lambda x: (x * 2).exp().sum(0))
    x = ember.randn(5, 3)
    for _ in range(3):
        out = f(x)
    (kernel,) = [i.op for i in f.graph().instrs if isinstance(i.op, FusedKernel)]
    assert kernel.backend == "numpy"
    np.testing.assert_allclose(out.numpy(), np.exp(x.numpy() * 2).sum(0), rtol=1e-6)


def test_numpy_backend_gives_the_c_results(use_c, monkeypatch):
    x = RNG.standard_normal((7, 9)).astype(np.float32)
    program = [("exp", [0], {}), ("add", [1, 0], {}), ("sum", [2], {"dims": (1,),
                                                                 "keepdim": True,
                                                                 "dtype": None}),
               ("div", [2, 3], {})]
    in_c = make_kernel([x], program, domain=x.shape, reduced=(1,))
    in_numpy = make_kernel([x], program, domain=x.shape, reduced=(1,))
    prepare_kernels([in_c])
    from_c = in_c.forward(np, x)
    monkeypatch.setenv("EMBER_JIT_BACKEND", "numpy")
    prepare_kernels([in_numpy])
    assert (in_c.backend, in_numpy.backend) == ("c", "numpy")
    for a, b in zip(from_c, in_numpy.forward(np, x)):
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-6)


def test_an_unknown_backend_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("EMBER_JIT_BACKEND", "fortran")
    with pytest.raises(ember.EmberError, match="'fortran' is not a backend.*'c'.*'numpy'"):
        backend_name()


def test_hand_written_loops_build_with_a_graphs_kernels(use_c):
    """A graph's ops name the C loops they call (CLoop's ``ops``): the loops not built
    yet compile in the same batch as the graph's fused kernels, so their first call
    loads them from the cache instead of compiling them alone."""
    from ember.ops import c_loops
    loop = c_loops.CLoop("test_loop", "#include <stdint.h>\n"
                         "void ember_kernel(int64_t *p) { p[0] = sizeof(REAL); }",
                         ops=("test_loop_op",))
    wanted = c_loops.sources_for([("test_loop_op", np.float64), ("add", np.float64),
                                  ("test_loop_op", np.int32)])
    assert wanted == [loop.named_source("double")] and not loop.built
    assert loop.available(np.float64) and not loop.available(np.int32)
    x = RNG.standard_normal((4, 5))
    # (a program no other test compiles into this cache: the kernel is compiled here)
    kernel = make_kernel([x, x], [("add", [0, 1], {}), ("abs", [2], {}), ("exp", [3], {}),
                                  ("neg", [4], {})])
    c.CRenderer().prepare([kernel], extra=wanted)
    assert kernel.backend == "c-pending"
    before = build.STATS["compiled"]
    np.testing.assert_allclose(kernel.forward(np, x, x)[-1], -np.exp(np.abs(x + x)))
    assert build.STATS["compiled"] >= before + 2   # the kernel and the loop, together
    compiled = build.STATS["compiled"]
    function, _ = loop.get(np.float64)              # from the cache: nothing compiles
    assert build.STATS["compiled"] == compiled
    p = np.zeros(1, np.int64)
    function(p.ctypes.data)
    assert p[0] == 8


def _vectoriser_report(source: str, tmp_path) -> str:
    """GCC's report of the loops it vectorised in ``source``, compiled with the flags
    of ember's kernels (skips where the compiler is not GCC)."""
    compiler = build.find_compiler()
    if compiler is None:
        pytest.skip("no C compiler")
    version = subprocess.run(compiler + ["--version"], capture_output=True, text=True).stdout
    if "Free Software Foundation" not in version:
        pytest.skip("the vectoriser report is GCC's")
    path = tmp_path / "k.c"
    path.write_text(source)
    flags = [f for f in build.FLAGS if f != "-shared"] + [build.OPENMP]
    return subprocess.run(compiler + flags + ["-c", str(path), "-o", str(tmp_path / "k.o"),
                                              "-fopt-info-vec-all"],
                          capture_output=True, text=True).stderr


def test_a_relu_gradient_mask_loop_is_vectorised(tmp_path):
    """A comparison's byte converted to a float (a ReLU's gradient mask) goes through an
    int: GCC 12 left such a loop scalar (4x slower). Checked with GCC's vectoriser
    report, where the compiler is GCC."""
    fn = ember.jit(lambda g, x: g * (x > 0).float())
    fn(ember.randn(64, 64), ember.randn(64, 64))
    kernel = next(ins.op for ins in fn.graph().instrs if isinstance(ins.op, FusedKernel))
    report = _vectoriser_report(c.render(kernel, build.array_data_offset()), tmp_path)
    assert "optimized: loop vectorized" in report, report


@pytest.mark.parametrize("name", scalar.PRELUDE_NAMES)
def test_loops_calling_the_own_float32_functions_are_vectorised(tmp_path, name):
    """ember_expf, ember_logf, ember_log1pf and ember_tanhf choose between computed
    values by selects. On a CPU without AVX-512 (no mask registers) GCC turned those
    selects into branches under its default -ftrapping-math and left every loop calling
    them scalar: a GELU kernel ran 25x slower. The flags and the code must keep them
    vectorised."""
    source = "#include <math.h>\n#include <stdint.h>\n" + scalar.PRELUDE + f"""
void loop(const float *restrict a, float *restrict b, long n)
{{
    for (long i = 0; i < n; i++) b[i] = {name}(a[i]);
}}
"""
    report = _vectoriser_report(source, tmp_path)
    assert "optimized: loop vectorized" in report, report
    assert "couldn't vectorize loop" not in report, report
