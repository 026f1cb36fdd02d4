"""Reductions and scans against PyTorch, NumPy and finite differences."""
import math

import numpy as np
import pytest

import ember
from .optable import ALL, FLOATS, INTS, OpCase, S, generate, nc, needs_torch, rand, torch

T = torch
pytestmark = pytest.mark.filterwarnings("ignore:.*degrees of freedom:UserWarning")
NUMERIC = FLOATS + INTS


def _t(fn):
    """A torch reference, None without torch."""
    return None if T is None else fn()


def dim_samples(low=-2.0, high=2.0, all_dims=True, tuples=True, empty=True, keepdim=True):
    """A reduction's samples: every dim form (none, int, negative, tuple), keepdim,
    0-d, size-1, empty and non-contiguous inputs."""
    def samples(rng, dtype):
        r = lambda shape: rand(rng, shape, dtype, low, high)  # noqa: E731
        k = (True,) if keepdim else ()
        out = [S(r((3, 4)), 1), S(r((3, 4)), -1, *k), S(r((2, 3, 4)), dim=0),
               S(nc(r((4, 3))), 0), S(r((1, 5)), 0, *k), S(r((2, 1, 3)), -2), S(r(()), 0),
               S(r(()), -1, *k)]
        if tuples:
            out += [S(r((2, 3, 4)), (0, 2)), S(r((2, 3, 4)), (-1, 0), *k)]
        if empty:
            out += [S(r((0, 3)), 1), S(r((3, 0)), 0)]
        if all_dims:
            out += [S(r((3, 4))), S(nc(r((4, 3)))), S(r(()))]
        return out
    return samples


def red(name, dtypes=FLOATS, samples=None, **kw):
    """A table entry for ``ember.<name>`` against ``torch.<name>``."""
    return OpCase(name, getattr(ember, name), _t(lambda: getattr(T, name)),
                  samples or dim_samples(), dtypes=dtypes, **kw)


def _fixed(*samples):
    return lambda rng, dtype: [S(*(np.asarray(a, dtype=np.float64).astype(
        ember.dtypes.as_dtype(dtype).np) if isinstance(a, list) else a for a in s.args),
        **s.kwargs) for s in samples]


def np_reduce(fn):
    """A NumPy reference taking torch-style (dim, keepdim) arguments."""
    def ref(x, dim=None, keepdim=False):
        axis = dim if dim is None or isinstance(dim, tuple) or np.ndim(x) else None
        return fn(np.asarray(x, dtype=np.float64), axis=axis, keepdims=keepdim)
    return ref


VAR_SAMPLES = lambda rng, d: [  # noqa: E731
    S(rand(rng, (3, 4), d), 1), S(rand(rng, (3, 4), d), correction=0),
    S(rand(rng, (2, 3, 4), d), (0, 2), keepdim=True), S(rand(rng, (3, 4), d), 0, unbiased=False),
    S(nc(rand(rng, (4, 3), d)), -1, correction=2), S(rand(rng, (5,), d), dim=None),
    S(rand(rng, (0, 3), d), 1), S(rand(rng, (1, 3), d), 1, correction=0),
    S(rand(rng, (4, 3), d), dim=0, correction=0.5), S(rand(rng, (), d), 0, correction=0)]

NORM_SAMPLES = lambda rng, d: [  # noqa: E731
    S(rand(rng, (3, 4), d)), S(rand(rng, (3, 4), d), 1), S(rand(rng, (3, 4), d), 3, 0),
    S(rand(rng, (3, 4), d), math.inf, -1, True), S(rand(rng, (3, 4), d), -math.inf, 1),
    S(rand(rng, (2, 3, 4), d), 0.5, (0, 2)), S(rand(rng, (3, 4), d), "fro", (0, 1)),
    S(nc(rand(rng, (4, 3), d)), 2, 0), S(rand(rng, (3,), d), 0),
    S(rand(rng, (), d), 2), S(rand(rng, (0, 3), d), 2, 0), S(rand(rng, (2, 3), d), -1.5, 1)]


CASES = [
    red("sum", NUMERIC, np_fn=np_reduce(np.sum)),
    OpCase("sum_dtype", lambda x: ember.sum(x, 1, dtype=ember.float64),
           _t(lambda: lambda x: T.sum(x, 1, dtype=T.float64)),
           lambda rng, d: [S(rand(rng, (3, 4), d))], dtypes=("float16", "float32", "int32")),
    red("mean", np_fn=np_reduce(np.mean)),
    red("prod", NUMERIC, np_fn=np_reduce(np.prod), samples=dim_samples(0.5, 1.5, tuples=False)),
    OpCase("prod_zeros", ember.prod, _t(lambda: T.prod),
           _fixed(S([[2.0, 0.0, 3.0], [1.5, 0.5, 2.0], [0.0, 4.0, 0.0]], 1),
                  S([[2.0, 0.0, 3.0], [0.0, 0.5, -2.0]]), S([0.0], 0), S([[0.0, 1.5]], 0))),
    OpCase("prod_dtype", lambda x: ember.prod(x, 0, dtype=ember.float64),
           _t(lambda: lambda x: T.prod(x, 0, dtype=T.float64)),
           lambda rng, d: [S(rand(rng, (3, 4), d))], dtypes=("float32", "int16")),
    red("var", samples=VAR_SAMPLES),
    red("std", samples=VAR_SAMPLES),
    red("var_mean", samples=VAR_SAMPLES),
    red("std_mean", samples=lambda rng, d: VAR_SAMPLES(rng, d)[:4]),
    red("amax", NUMERIC + ("bool",), np_fn=np_reduce(np.max),
        samples=dim_samples(empty=False)),
    red("amin", NUMERIC + ("bool",), np_fn=np_reduce(np.min), samples=dim_samples(empty=False)),
    OpCase("max_all", ember.max, _t(lambda: T.max),
           lambda rng, d: [S(rand(rng, (3, 4), d)), S(rand(rng, (), d)),
                           S(nc(rand(rng, (4, 3), d)))], dtypes=ALL),
    OpCase("max_dim", ember.max, _t(lambda: T.max),
           dim_samples(all_dims=False, tuples=False, empty=False), dtypes=ALL),
    OpCase("min_dim", ember.min, _t(lambda: T.min),
           dim_samples(all_dims=False, tuples=False, empty=False), dtypes=ALL),
    OpCase("min_all", ember.min, _t(lambda: T.min),
           lambda rng, d: [S(rand(rng, (3, 4), d)), S(rand(rng, (1,), d))], dtypes=NUMERIC),
    OpCase("max_other", ember.max, _t(lambda: T.max),
           lambda rng, d: [S(rand(rng, (3, 4), d), rand(rng, (4,), d))], dtypes=NUMERIC),
    OpCase("max_empty_other_dim", lambda x: ember.max(x, 0),
           _t(lambda: lambda x: T.max(x, 0)),
           lambda rng, d: [S(rand(rng, (3, 0), d))], dtypes=("float32", "int64")),
    OpCase("aminmax", ember.aminmax, _t(lambda: T.aminmax),
           lambda rng, d: [S(rand(rng, (3, 4), d)), S(rand(rng, (3, 4), d), dim=1),
                           S(rand(rng, (3, 4), d), dim=0, keepdim=True)], dtypes=NUMERIC),
    red("argmax", NUMERIC, samples=dim_samples(tuples=False, empty=False), grad=False),
    red("argmin", NUMERIC, samples=dim_samples(tuples=False, empty=False), grad=False),
    OpCase("argmax_keepdim_all", lambda x: ember.argmax(x, keepdim=True),
           _t(lambda: lambda x: T.argmax(x, keepdim=True)),
           lambda rng, d: [S(rand(rng, (3, 4), d)), S(rand(rng, (2, 3, 4), d))],
           dtypes=("float32",), grad=False),
    red("logsumexp", np_fn=np_reduce(lambda x, axis, keepdims: np.log(
        np.sum(np.exp(x), axis=axis, keepdims=keepdims))),
        samples=dim_samples(-5, 5, all_dims=False)),
    OpCase("logsumexp_inf", lambda x: ember.logsumexp(x, 1),
           _t(lambda: lambda x: T.logsumexp(x, 1)),
           _fixed(S([[-math.inf, -math.inf], [1000.0, 1000.0], [-1000.0, 0.0],
                     [math.inf, 1.0]])), grad=False),
    red("norm", samples=NORM_SAMPLES),
    OpCase("norm_dtype", lambda x: ember.norm(x, dtype=ember.float64),
           _t(lambda: lambda x: T.norm(x, dtype=T.float64)),
           lambda rng, d: [S(rand(rng, (3, 4), d))], dtypes=("float32",)),
    red("all", ALL, samples=dim_samples(-1, 2), grad=False),
    red("any", ALL, samples=dim_samples(-1, 2), grad=False),
    red("count_nonzero", ALL, grad=False, samples=dim_samples(-1, 2, keepdim=False)),
    red("cumsum", NUMERIC + ("bool",), np_fn=lambda x, dim: np.cumsum(x, axis=dim)
        if np.ndim(x) else x, samples=dim_samples(all_dims=False, tuples=False, keepdim=False)),
    red("cumprod", NUMERIC, samples=dim_samples(0.5, 1.5, all_dims=False, tuples=False,
                                                keepdim=False)),
    OpCase("cumprod_zeros", ember.cumprod, _t(lambda: T.cumprod),
           _fixed(S([[2.0, 0.0, 3.0, 1.5], [0.0, 0.5, 0.0, 2.0], [1.5, 2.0, 0.5, 0.0]], 1),
                  S([[2.0, 0.0], [0.0, 1.5], [3.0, 0.0]], 0), S([1.5, 0.0, 0.0, 2.0], 0))),
    OpCase("cumsum_dtype", lambda x: ember.cumsum(x, 0, dtype=ember.float64),
           _t(lambda: lambda x: T.cumsum(x, 0, dtype=T.float64)),
           lambda rng, d: [S(rand(rng, (3, 4), d))], dtypes=("float16", "int8")),
]
generate(CASES, globals())


# Known values -----------------------------------------------------------------------------
def test_known_values():
    x = ember.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]])
    assert x.sum().item() == 22.0
    assert x.prod(1).tolist() == [10.0, 0.0]
    assert x.max().item() == 7.0
    values, indices = x.max(1)
    assert values.tolist() == [5.0, 7.0] and indices.tolist() == [1, 0]  # first of tied
    assert x.max(dim=1).indices.dtype is ember.int64
    assert x.min(0, keepdim=True).values.tolist() == [[1.0, 0.0, 2.0]]
    assert x.argmax().item() == 3 and x.argmin().item() == 4
    assert x.amax((0, 1)).item() == 7.0
    assert x.aminmax().min.item() == 0.0 and x.aminmax().max.item() == 7.0
    assert ember.tensor([1.0, 2.0, 3.0, 4.0]).var().item() == pytest.approx(5 / 3)
    assert ember.tensor([1.0, 2.0, 3.0, 4.0]).var(unbiased=False).item() == 1.25
    assert ember.tensor([1.0, 2.0, 3.0, 4.0]).std(correction=0).item() == \
        pytest.approx(math.sqrt(1.25))
    assert ember.tensor([3.0, -4.0]).norm().item() == 5.0
    assert ember.tensor([3.0, -4.0]).norm(1).item() == 7.0
    assert ember.tensor([3.0, -4.0]).norm(float("inf")).item() == 4.0
    assert ember.tensor([3.0, 0.0]).norm(0).item() == 1.0
    assert ember.tensor([[1, 0], [2, 3]]).count_nonzero().item() == 3
    assert ember.tensor([1.0, 2.0, 3.0]).cumsum(0).tolist() == [1.0, 3.0, 6.0]
    assert ember.tensor([1.0, 2.0, 3.0]).cumprod(0).tolist() == [1.0, 2.0, 6.0]
    assert ember.tensor([[True, False]]).all(1).tolist() == [False]
    assert ember.tensor([[True, False]]).any(1).tolist() == [True]


def test_old_var_overloads():
    x = ember.tensor([[1.0, 2.0], [3.0, 5.0]])
    assert ember.var(x, True).item() == pytest.approx(np.var([1, 2, 3, 5], ddof=1))
    assert ember.var(x, False).item() == pytest.approx(np.var([1, 2, 3, 5]))
    assert ember.var(x, 0, True, True).tolist() == [[2.0, 4.5]]
    with pytest.raises(ember.EmberError, match="both"):
        ember.var(x, 0, unbiased=True, correction=0)


def test_var_degenerate_cases():
    assert math.isnan(ember.tensor(2.0).var().item())  # one element, correction 1
    assert math.isnan(ember.zeros(0).var().item())
    assert math.isinf(ember.tensor([1.0, 2.0]).var(correction=2).item())
    x = ember.ones(3, requires_grad=True)
    x.std(correction=0).backward()  # zero std: a zero gradient, as in PyTorch
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


def test_max_with_tensor_is_maximum():
    a, b = ember.tensor([1.0, 5.0]), ember.tensor([3.0, 2.0])
    assert ember.max(a, b).tolist() == [3.0, 5.0]
    assert ember.min(a, other=b).tolist() == [1.0, 2.0]


def test_result_dtypes():
    i8 = ember.tensor([1, 2, 3], dtype=ember.int8)
    assert i8.sum().dtype is ember.int64
    assert i8.prod().dtype is ember.int64
    assert i8.cumsum(0).dtype is ember.int64
    assert ember.tensor([True, True]).sum().item() == 2
    assert i8.max().dtype is ember.int8
    assert ember.tensor([1, 0], dtype=ember.uint8).all().dtype is ember.uint8
    assert ember.tensor([1.0]).all().dtype is ember.bool
    h = ember.ones(3, dtype=ember.float16)
    assert h.sum().dtype is ember.float16 and h.var().dtype is ember.float16


def test_half_sums_accumulate_in_float32():
    # 4096 ones + tiny values: float16 accumulation would stall at 2048.
    x = ember.ones(4096, dtype=ember.float16)
    assert x.sum().item() == 4096.0
    assert x.mean().item() == 1.0
    assert x.cumsum(0)[-1].item() == 4096.0
    b = ember.ones(4096, dtype=ember.bfloat16)
    assert b.sum().item() == 4096.0


def test_logsumexp_is_stable():
    x = ember.tensor([1000.0, 1000.0])
    assert x.logsumexp(0).item() == pytest.approx(1000.0 + math.log(2.0))
    assert ember.tensor([-math.inf, -math.inf]).logsumexp(0).item() == -math.inf


def test_logsumexp_of_ints_is_float():
    out = ember.tensor([[0, 1], [2, 2]], dtype=ember.uint8).logsumexp(1)
    assert out.dtype is ember.float32
    np.testing.assert_allclose(out.numpy(), [math.log(1 + math.e), 2 + math.log(2)], rtol=1e-6)


@needs_torch
@pytest.mark.parametrize("p", [2, 1, 3, 0.5, math.inf])
def test_norm_grad_at_zero_matches_torch(p):
    x = ember.zeros(2, 3, requires_grad=True)
    x.norm(p, 1).sum().backward()
    t = T.zeros(2, 3, requires_grad=True)
    t.norm(p, 1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


def test_grad_split_evenly_among_ties():
    x = ember.tensor([1.0, 3.0, 3.0], requires_grad=True)
    x.max().backward()
    assert x.grad.tolist() == [0.0, 0.5, 0.5]
    x.grad = None
    x.amax(0).backward()
    assert x.grad.tolist() == [0.0, 0.5, 0.5]
    x.grad = None
    x.max(0).values.backward()  # with a dim, the gradient goes to the returned index
    assert x.grad.tolist() == [0.0, 1.0, 0.0]
    y = ember.tensor([-3.0, 3.0, 1.0], requires_grad=True)
    y.norm(float("inf")).backward()
    assert y.grad.tolist() == [-0.5, 0.5, 0.0]


def test_prod_and_cumprod_grads_with_zeros():
    x = ember.tensor([2.0, 0.0, 3.0, 0.5], requires_grad=True)
    x.prod().backward()
    assert x.grad.tolist() == [0.0, 3.0, 0.0, 0.0]
    x.grad = None
    x.cumprod(0).sum().backward()
    # d/dx_i of x0 + x0x1 + x0x1x2 + x0x1x2x3 at x1 = 0
    assert x.grad.tolist() == [1.0, 2.0 + 6.0 + 3.0, 0.0, 0.0]
    y = ember.tensor([0.0, 0.0, 2.0], requires_grad=True)
    y.prod().backward()
    assert y.grad.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("values", [[1.0, 0.0, 0.0], [2.0, 0.0, 3.0], [1.0, 0.0, 0.0, 2.0],
                                    [0.0, 2.0, 0.0, 0.0]])
@pytest.mark.parametrize("fn", ["prod", "cumprod"])
def test_hessian_with_zeros(values, fn):
    """Second derivatives through zeros, against the exact polynomial Hessian."""
    n = len(values)
    weights = np.arange(1.0, n + 1)
    f = (lambda t: t.prod()) if fn == "prod" else \
        (lambda t: (t.cumprod(0) * ember.tensor(weights)).sum())
    got = np.zeros((n, n))
    for i in range(n):
        x = ember.tensor(values, dtype=ember.float64, requires_grad=True)
        g, = ember.autograd.grad(f(x), [x], create_graph=True)
        row, = ember.autograd.grad(g[i], [x], allow_unused=True)
        got[i] = 0 if row is None else row.numpy()
    want = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            rest = [values[k] for k in range(n) if k not in (i, j)]
            if fn == "prod":
                want[i, j] = np.prod(rest)
            else:  # sum_m w_m prod_{k<=m} x_k: terms with m >= max(i, j)
                want[i, j] = sum(weights[m] * np.prod([values[k] for k in range(m + 1)
                                                       if k not in (i, j)])
                                 for m in range(max(i, j), n))
    np.testing.assert_allclose(got, want)


# Errors ---------------------------------------------------------------------------------------
def test_dim_out_of_range():
    with pytest.raises(ember.EmberIndexError, match=r"sum: Dimension out of range .*got 2"):
        ember.ones(3, 4).sum(2)
    with pytest.raises(IndexError, match="amax"):
        ember.ones(3).amax(-2)
    with pytest.raises(ember.EmberError, match="appears multiple times"):
        ember.ones(3, 4).sum((1, -1))


def test_mean_of_ints_is_an_error():
    with pytest.raises(ember.EmberError, match=r"mean\(\): could not infer output dtype.*int64"):
        ember.tensor([1, 2]).mean()
    assert ember.tensor([1, 2]).mean(dtype=ember.float32).item() == 1.5


def test_empty_reductions_without_identity():
    with pytest.raises(ember.EmberIndexError, match=r"max\(\): Expected reduction dim to be"):
        ember.zeros(0).max()
    with pytest.raises(ember.EmberIndexError, match=r"amax\(\).*dim 0 .*non-zero size"):
        ember.zeros(0, 3).amax(0)
    with pytest.raises(ember.EmberIndexError, match="argmax"):
        ember.zeros(0).argmax()
    with pytest.raises(ember.EmberError, match="aminmax"):
        ember.zeros(3, 0).aminmax(dim=1)
    assert ember.zeros(0).sum().item() == 0.0
    assert ember.zeros(0).prod().item() == 1.0
    assert math.isnan(ember.zeros(0).mean().item())


def test_dtype_errors():
    with pytest.raises(ember.EmberTypeError, match="var.*int64"):
        ember.tensor([1, 2]).var()
    with pytest.raises(ember.EmberTypeError, match="norm.*int64"):
        ember.tensor([1, 2]).norm()
    with pytest.raises(ember.EmberTypeError, match="prod.*dim must be an int"):
        ember.ones(2, 3).prod((0, 1))
    # the nuclear norm is the sum of singular values: ones(2, 3) has one, sqrt(6)
    assert abs(ember.ones(2, 3).norm("nuc").item() - 6 ** 0.5) < 1e-6


@needs_torch
def test_method_surface_matches_torch():
    for name in ("sum", "mean", "prod", "var", "std", "max", "min", "amax", "amin", "aminmax",
                 "argmax", "argmin", "logsumexp", "norm", "all", "any", "cumsum", "cumprod",
                 "count_nonzero"):
        assert hasattr(T.Tensor, name) and hasattr(ember.Tensor, name), name
