"""Selection, scatter and sorting ops (gather, scatter*, index_*, masked_*, take, sort,
topk, unique, nonzero, searchsorted, ...) against PyTorch, NumPy and finite differences,
plus known values, in-place variants and errors."""
import numpy as np
import pytest

import ember
from ember.ops import OPS
from .optable import ALL, FLOATS, INTS, OpCase, S, generate, nc, needs_torch, np_dtype, rand, \
    torch

T = torch
NUMERIC = FLOATS + INTS


def _t(fn):
    return None if T is None else fn


def _tn(name):
    return None if T is None else getattr(T, name)


def idx(rng, shape, high, low=0):
    """Random int64 indices in [low, high) (repeats allowed)."""
    return rng.integers(low, high, size=shape).astype(np.int64)


def distinct_idx(rng, shape, dim, size):
    """Indices in [0, size) that never repeat along ``dim`` (so a scatter is deterministic)."""
    dim %= len(shape)
    lines = tuple(s for k, s in enumerate(shape) if k != dim) + (size,)
    perm = np.argsort(rng.random(lines), axis=-1)[..., :shape[dim]]
    return np.moveaxis(perm, -1, dim).astype(np.int64)


def distinct(rng, shape, dtype):
    """Values without ties, exact in every dtype (so sort/topk orders are unique)."""
    n = int(np.prod(shape, dtype=np.int64))
    vals = rng.permutation(n) - (0 if dtype == "uint8" else n // 2)
    if dtype in FLOATS:
        vals = vals * 0.5
    return vals.reshape(shape).astype(np_dtype(dtype))


def rounded(rng, shape, dtype, low, high):
    """Random whole numbers (many repeats and zeros) in any dtype."""
    return np.asarray(np.round(rand(rng, shape, dtype, low, high))).astype(np_dtype(dtype))


def first(src, index):
    """``src`` cut down to ``index``'s shape: what a scatter reads of it (PyTorch's own
    scatter backward fails when src is larger, so the oracle gets the cut src)."""
    return src[tuple(slice(0, n) for n in index.shape)]


def gather_ref(x, dim, index):
    x = np.asarray(x)
    if x.ndim == 0:  # a 0-d input is one element: every index is 0
        return np.broadcast_to(x, np.shape(index)).copy()
    region = x[tuple(slice(None) if k == dim % x.ndim else slice(0, n)
                     for k, n in enumerate(index.shape))]
    return np.take_along_axis(region, index, dim)


# Samples ---------------------------------------------------------------------------------
def gather_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    return [S(r((3, 4)), 1, idx(rng, (3, 2), 4)), S(r((3, 4)), 0, idx(rng, (5, 4), 3)),
            S(r((3, 4)), -1, idx(rng, (2, 3), 4)), S(r(()), 0, idx(rng, (), 1)),
            S(r(()), 0, idx(rng, (3,), 1)), S(r((3, 4)), 1, idx(rng, (3, 0), 4)),
            S(nc(r((4, 3))), 0, idx(rng, (2, 3), 4)), S(r((2, 3, 4)), 1, idx(rng, (2, 5, 4), 3)),
            S(r((3, 4)), 1, idx(rng, (3, 2), 4).astype(np.int32))]


def scatter_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    return [S(r((3, 4)), 0, distinct_idx(rng, (2, 4), 0, 3), r((2, 4))),
            S(r((3, 4)), 1, distinct_idx(rng, (3, 2), 1, 4), r((3, 3))),
            S(r((3, 4)), -1, distinct_idx(rng, (2, 3), 1, 4), 1.5),
            S(r(()), 0, idx(rng, (), 1), r(())), S(r((3, 4)), 0, idx(rng, (0, 4), 3), r((0, 4))),
            S(nc(r((4, 3))), 1, distinct_idx(rng, (4, 2), 1, 3), nc(r((4, 2)))),
            S(r((2, 3, 4)), 2, distinct_idx(rng, (2, 3, 3), 2, 4), r((2, 3, 3)))]


def scatter_add_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    return [S(r((3, 4)), 0, idx(rng, (5, 4), 3), r((5, 4))),
            S(r((3, 4)), 1, idx(rng, (2, 6), 4), r((3, 7))),
            S(r(()), 0, idx(rng, (), 1), r(())), S(r((3, 4)), -2, idx(rng, (0, 2), 3), r((1, 2))),
            S(nc(r((4, 3))), 1, idx(rng, (4, 5), 3), nc(r((4, 5)))),
            S(r((3, 4)), 1, idx(rng, (3, 5), 4).astype(np.int32), r((3, 5)))]


def scatter_reduce_samples(reduce, include_self):
    def samples(rng, d):
        r = lambda shape: rand(rng, shape, d)  # noqa: E731
        kw = dict(include_self=include_self)
        out = [S(r((3, 4)), 0, idx(rng, (5, 4), 3), r((5, 4)), reduce, **kw),
               S(r((3, 4)), 1, idx(rng, (2, 6), 4), r((2, 6)), reduce, **kw),
               S(r(()), 0, idx(rng, (2,), 1), r((2,)), reduce, **kw),
               S(nc(r((4, 3))), -1, idx(rng, (4, 4), 3), r((4, 4)), reduce, **kw)]
        if reduce == "prod":  # a zero reaching a position (the gradient's special case)
            src = r((6,))
            src[[0, 3]] = 0
            out.append(S(r((3,)), 0, np.array([0, 0, 1, 1, 1, 2]), src, reduce, **kw))
        return out
    return samples


def index_select_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    return [S(r((3, 4)), 0, idx(rng, (5,), 3)),
            S(r((3, 4)), -1, idx(rng, (3,), 4).astype(np.int32)),
            S(r(()), 0, np.array([0])), S(r((3, 4)), 1, idx(rng, (), 4)),
            S(r((3, 4)), 0, idx(rng, (0,), 3)), S(nc(r((4, 3))), 1, idx(rng, (4,), 3))]


def index_add_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    return [S(r((3, 4)), 0, idx(rng, (5,), 3), r((5, 4))),
            S(r((3, 4)), 1, idx(rng, (6,), 4).astype(np.int32), r((3, 6))),
            S(r(()), 0, np.array([0]), r(())), S(nc(r((4, 3))), -1, idx(rng, (2,), 3), r((4, 2))),
            S(r((3, 4)), 0, idx(rng, (0,), 3), r((0, 4))),
            S(r((2, 3)), 0, idx(rng, (3,), 2), r((3, 3)), alpha=2)]


def index_copy_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    return [S(r((3, 4)), 0, rng.permutation(3)[:2].astype(np.int64), r((2, 4))),
            S(r((3, 4)), -1, rng.permutation(4)[:3].astype(np.int64), r((3, 3))),
            S(r(()), 0, np.array([0]), r(())), S(nc(r((4, 3))), 1, np.array([2, 0]), r((4, 2)))]


def index_fill_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    return [S(r((3, 4)), 0, idx(rng, (2,), 3), 1.5), S(r((3, 4)), 1, np.array([0, -1, 0]), r(())),
            S(r(()), 0, np.array([0]), r(())), S(nc(r((4, 3))), -1, np.array([1]), -2),
            S(r((3, 4)), 0, idx(rng, (0,), 3), r(()))]


def masked_fill_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    m = lambda shape: rand(rng, shape, "bool")  # noqa: E731
    return [S(r((3, 4)), m((3, 4)), 1.5), S(r((3, 4)), m((4,)), r(())), S(r((4,)), m((3, 4)), -1),
            S(r(()), m(()), r(())), S(r((0, 3)), m((1, 3)), 2), S(nc(r((4, 3))), m((4, 3)), 0.5)]


def masked_select_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    m = lambda shape: rand(rng, shape, "bool")  # noqa: E731
    return [S(r((3, 4)), m((3, 4))), S(r((3, 1)), m((4,))), S(r(()), np.array(True)),
            S(r((0, 3)), m((3,))), S(nc(r((4, 3))), m((4, 3)))]


def masked_scatter_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    m = lambda shape: rand(rng, shape, "bool")  # noqa: E731
    return [S(r((3, 4)), m((3, 4)), r((12,))), S(r((3, 4)), m((4,)), r((4, 5))),
            S(r((4,)), m((2, 4)), r((3, 3))), S(r(()), np.array(True), r((2,))),
            S(nc(r((4, 3))), m((4, 3)), nc(r((4, 3))))]


def take_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    return [S(r((3, 4)), idx(rng, (2, 5), 12, -12)), S(r((3, 4)), idx(rng, (), 12)),
            S(r(()), np.array([0, -1, 0])), S(r((3, 4)), idx(rng, (0,), 12)),
            S(nc(r((4, 3))), idx(rng, (7,), 12))]


def take_along_dim_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    return [S(r((3, 4)), idx(rng, (3, 2), 4), 1), S(r((3, 4)), idx(rng, (2, 1), 3, -3), 0),
            S(r((3, 1)), idx(rng, (1, 4), 1), -1), S(r((3, 4)), idx(rng, (2, 3), 12)),
            S(nc(r((4, 3))), idx(rng, (4, 3), 4), 0)]


def sort_samples(rng, d):
    r = lambda shape: rand(rng, shape, d)  # noqa: E731
    # ties are common here, so the order among equal elements must be the stable one
    out = [S(r((3, 5)), stable=True), S(r((3, 5)), dim=0, descending=True, stable=True),
           S(r((2, 3, 4)), dim=-2, stable=True), S(r(()), stable=True),
           S(r((0, 3)), stable=True), S(nc(r((4, 3))), dim=1, descending=True, stable=True),
           S(distinct(rng, (4, 5), d), dim=1, descending=True, stable=True)]
    if d in FLOATS:
        nan = np.array([1.0, np.nan, -1.0, np.inf, np.nan, -np.inf]).astype(np_dtype(d))
        out += [S(nan, stable=True), S(nan, dim=0, descending=True, stable=True)]
    return out


def topk_samples(rng, d):
    x = lambda shape: distinct(rng, shape, d)  # noqa: E731
    return [S(x((3, 5)), 2), S(x((3, 5)), 3, 0, False), S(x((4, 5)), 0), S(x(()), 1),
            S(x((6,)), 6, largest=False), S(nc(x((4, 3))), 2, 1)]


def kthvalue_samples(rng, d):
    x = lambda shape: distinct(rng, shape, d)  # noqa: E731
    return [S(x((3, 5)), 2), S(x((3, 5)), 3, 0, True), S(x(()), 1), S(x((6,)), 6),
            S(nc(x((4, 3))), 1, -1)]


def unique_samples(rng, d):
    r = lambda shape: rounded(rng, shape, d, -3, 3)  # noqa: E731
    kw = dict(return_inverse=True, return_counts=True)
    out = [S(r((20,))), S(r((4, 5)), **kw), S(r(())), S(r((0,)), **kw),
           S(r((6, 2)), dim=0, **kw), S(r((2, 6)), dim=-1, **kw)]
    if d in FLOATS:  # every NaN is distinct
        out.append(S(np.array([2.0, np.nan, -1.0, np.nan, 2.0]).astype(np_dtype(d)), **kw))
    return out


def unique_consecutive_samples(rng, d):
    r = lambda shape: rounded(rng, shape, d, -2, 2)  # noqa: E731
    kw = dict(return_inverse=True, return_counts=True)
    return [S(r((20,))), S(r((4, 5)), **kw), S(r(()), **kw), S(r((0,)), **kw),
            S(np.repeat(r((3, 2)), 2, axis=0), dim=0, **kw), S(r((2, 6)), dim=1, **kw)]


def nonzero_samples(rng, d):
    r = lambda shape: rounded(rng, shape, d, -1, 2)  # noqa: E731
    return [S(r((3, 4))), S(r((2, 3, 2))), S(r(())), S(np.ones((), np_dtype(d))),
            S(r((0, 3))), S(r((3, 4)), as_tuple=True), S(r(()), as_tuple=True),
            S(np.ones((), np_dtype(d)), as_tuple=True)]


def searchsorted_samples(rng, d):
    seq = lambda shape: np.sort(rand(rng, shape, d, -5, 5), axis=-1)  # noqa: E731
    r = lambda shape: rand(rng, shape, d, -6, 6)  # noqa: E731
    perm = rng.permutation(6).astype(np.int64)
    return [S(seq((6,)), r((3, 4))), S(seq((6,)), r((3, 4)), right=True),
            S(seq((6,)), r((5,)), side="right"), S(seq((3, 6)), r((3, 4))),
            S(seq((2, 3, 4)), r((2, 3, 5)), right=True), S(seq((6,)), 2),
            S(seq((6,))[perm.argsort()], r((4,)), sorter=perm),
            S(seq((6,)), r((4,)), out_int32=True), S(seq((6,)), r((0,))),
            S(seq((2, 6)), r((2, 0))), S(seq((0, 6)), r((0, 2))), S(seq((2, 0)), r((2, 3)))]


def bucketize_samples(rng, d):
    b = np.sort(rand(rng, (5,), d, -5, 5))
    r = lambda shape: rand(rng, shape, d, -6, 6)  # noqa: E731
    return [S(r((3, 4)), b), S(r((3, 4)), b, right=True), S(3, b), S(r(()), b, out_int32=True)]


SORTABLE = FLOATS + INTS + ("bool",)
CASES = [
    OpCase("gather", ember.gather, _tn("gather"), gather_samples, dtypes=ALL, np_fn=gather_ref),
    OpCase("scatter", ember.scatter,
           _t(lambda x, d, i, s: T.scatter(x, d, i, first(s, i) if T.is_tensor(s) else s)),
           scatter_samples, dtypes=ALL),
    OpCase("scatter_add", ember.scatter_add,
           _t(lambda x, d, i, s: T.scatter_add(x, d, i, first(s, i))), scatter_add_samples,
           dtypes=NUMERIC),
    OpCase("scatter_reduce_add", lambda *a: ember.scatter(*a, reduce="add"),
           _t(lambda *a: T.scatter(*a, reduce="add")), scatter_samples, dtypes=NUMERIC,
           grad=False),
    OpCase("index_select", ember.index_select, _tn("index_select"), index_select_samples,
           dtypes=ALL),
    OpCase("index_add", ember.index_add, _tn("index_add"), index_add_samples, dtypes=NUMERIC),
    OpCase("index_copy", ember.index_copy, _tn("index_copy"), index_copy_samples, dtypes=ALL),
    # PyTorch's index_fill backward fails on negative indices: its oracle gets them wrapped
    OpCase("index_fill", ember.index_fill,
           _t(lambda x, d, i, v: T.index_fill(x, d, i % max(x.shape[d] if x.dim() else 1, 1), v)),
           index_fill_samples, dtypes=ALL),
    OpCase("masked_fill", ember.masked_fill, _tn("masked_fill"), masked_fill_samples,
           dtypes=ALL),
    OpCase("masked_select", ember.masked_select, _tn("masked_select"), masked_select_samples,
           dtypes=ALL),
    OpCase("masked_scatter", ember.masked_scatter, _t(lambda x, m, s: x.masked_scatter(m, s)),
           masked_scatter_samples, dtypes=ALL),
    OpCase("take", ember.take, _tn("take"), take_samples, dtypes=ALL,
           np_fn=lambda x, i: np.take(np.asarray(x), i)),
    OpCase("take_along_dim", ember.take_along_dim, _tn("take_along_dim"),
           take_along_dim_samples, dtypes=ALL),
    OpCase("sort", ember.sort, _tn("sort"), sort_samples, dtypes=SORTABLE),
    OpCase("argsort", ember.argsort, _tn("argsort"), sort_samples, dtypes=SORTABLE, grad=False),
    OpCase("msort", ember.msort, _tn("msort"), lambda rng, d: [
        S(distinct(rng, (4, 3), d)), S(distinct(rng, (5,), d))], dtypes=NUMERIC,
        np_fn=lambda x: np.sort(x, axis=0)),
    OpCase("topk", ember.topk, _tn("topk"), topk_samples, dtypes=NUMERIC),
    OpCase("kthvalue", ember.kthvalue, _tn("kthvalue"), kthvalue_samples,
           dtypes=FLOATS[:2] + INTS),
    OpCase("unique", ember.unique, _tn("unique"), unique_samples, dtypes=SORTABLE, grad=False),
    OpCase("unique_consecutive", ember.unique_consecutive, _tn("unique_consecutive"),
           unique_consecutive_samples, dtypes=SORTABLE, grad=False),
    OpCase("nonzero", ember.nonzero, _tn("nonzero"), nonzero_samples, dtypes=ALL, grad=False),
    OpCase("argwhere", ember.argwhere, _tn("argwhere"),
           lambda rng, d: [s for s in nonzero_samples(rng, d) if not s.kwargs], dtypes=ALL,
           grad=False, np_fn=np.argwhere),
    OpCase("searchsorted", ember.searchsorted, _tn("searchsorted"), searchsorted_samples,
           dtypes=("float32", "float64", "bfloat16", "int64", "int32", "int16"), grad=False),
    OpCase("bucketize", ember.bucketize, _tn("bucketize"), bucketize_samples,
           dtypes=("float32", "float64", "int64", "int32"), grad=False),
]
for _reduce in ("sum", "prod", "mean", "amax", "amin"):
    for _self in (True, False):
        CASES.append(OpCase(f"scatter_reduce_{_reduce}{'' if _self else '_noself'}",
                            ember.scatter_reduce, _tn("scatter_reduce"),
                            scatter_reduce_samples(_reduce, _self),
                            dtypes=("float32", "float64", "float16", "int64", "int32")))

generate(CASES, globals())


# Known values ----------------------------------------------------------------------------
def test_gather_and_scatter_known_values():
    x = ember.tensor([[1, 2], [3, 4]])
    assert ember.gather(x, 1, ember.tensor([[0, 0], [1, 0]])).tolist() == [[1, 1], [4, 3]]
    z = ember.zeros(3).scatter(0, ember.tensor([2, 0]), ember.tensor([5.0, 6.0]))
    assert z.tolist() == [6.0, 0.0, 5.0]
    z = ember.zeros(2, 3).scatter(1, ember.tensor([[2], [0]]), 7.0)
    assert z.tolist() == [[0, 0, 7], [7, 0, 0]]
    z = ember.zeros(3).scatter_add(0, ember.tensor([2, 2, 0]), ember.tensor([1.0, 2.0, 3.0]))
    assert z.tolist() == [3.0, 0.0, 3.0]  # repeated positions accumulate
    z = ember.ones(2).scatter(0, ember.tensor([1, 1]), 3.0, reduce="multiply")
    assert z.tolist() == [1.0, 9.0]
    r = ember.tensor([10, 10, 10]).scatter_reduce(0, ember.tensor([0, 0, 1]),
                                                  ember.tensor([1, 2, 4]), "mean")
    assert r.tolist() == [4, 7, 10]  # integer mean rounds down
    r = ember.tensor([1.0, 2.0]).scatter_reduce(0, ember.tensor([0, 0]),
                                                ember.tensor([5.0, 3.0]), "amin",
                                                include_self=False)
    assert r.tolist() == [3.0, 2.0]


def test_index_ops_known_values():
    x = ember.tensor([[1, 2], [3, 4]])
    assert ember.index_select(x, 0, ember.tensor([1, 1])).tolist() == [[3, 4], [3, 4]]
    z = ember.zeros(3).index_add(0, ember.tensor([0, 0, 2]), ember.tensor([1.0, 2.0, 3.0]),
                                 alpha=2)
    assert z.tolist() == [6.0, 0.0, 6.0]
    assert ember.arange(4).index_add(0, ember.tensor([1, 1]), ember.tensor([1, 1]),
                                     alpha=1.5).tolist() == [0, 3, 2, 3]
    assert ember.zeros(3).index_copy(0, ember.tensor([2, 0]),
                                     ember.tensor([1.0, 2.0])).tolist() == [2.0, 0.0, 1.0]
    assert ember.zeros(2, 2).index_fill(1, ember.tensor([-1]), 5.0).tolist() == \
        [[0.0, 5.0], [0.0, 5.0]]


def test_masked_ops_known_values():
    m = ember.tensor([True, False, True])
    assert ember.zeros(3).masked_fill(m, 2.0).tolist() == [2.0, 0.0, 2.0]
    assert ember.arange(3).masked_fill(m, 1.7).tolist() == [1, 1, 1]  # cast to input dtype
    assert ember.masked_fill(ember.zeros(3), m, ember.tensor(1.5, dtype=ember.float64)).dtype \
        is ember.float32
    assert ember.masked_select(ember.tensor([1, 2, 3]), m).tolist() == [1, 3]
    out = ember.zeros(4).masked_scatter(ember.tensor([True, False, True, False]),
                                        ember.tensor([5.0, 6.0, 7.0]))
    assert out.tolist() == [5.0, 0.0, 6.0, 0.0]


def test_take_known_values():
    x = ember.tensor([[1, 2], [3, 4]])
    assert ember.take(x, ember.tensor([[0, -1]])).tolist() == [[1, 4]]
    assert ember.take_along_dim(x, ember.tensor([[1], [0]]), 1).tolist() == [[2], [3]]
    assert ember.take_along_dim(x, ember.tensor([-1, 0])).tolist() == [4, 1]
    s = ember.tensor([[3.0, 1.0, 2.0]])
    assert ember.take_along_dim(s, s.argsort(1), 1).tolist() == [[1.0, 2.0, 3.0]]


def test_sort_family_known_values():
    r = ember.sort(ember.tensor([3.0, float("nan"), 1.0, 3.0]), descending=True, stable=True)
    assert r.indices.tolist() == [1, 0, 3, 2]  # NaN first when descending; ties keep order
    assert r.values.dtype is ember.float32 and r.indices.dtype is ember.int64
    values, indices = ember.sort(ember.tensor([2, 1, 2, 0]), stable=True)
    assert values.tolist() == [0, 1, 2, 2] and indices.tolist() == [3, 1, 0, 2]
    t = ember.topk(ember.tensor([1.0, 5.0, 3.0, 4.0]), 2)
    assert t.values.tolist() == [5.0, 4.0] and t.indices.tolist() == [1, 3]
    t = ember.topk(ember.tensor([1.0, float("nan"), 3.0]), 2, largest=False)
    assert t.indices.tolist() == [0, 2]  # NaN is larger than every number
    k = ember.kthvalue(ember.tensor([[5.0, 1.0, 4.0]]), 2, dim=1, keepdim=True)
    assert k.values.tolist() == [[4.0]] and k.indices.tolist() == [[2]]
    assert ember.msort(ember.tensor([[3, 1], [1, 2]])).tolist() == [[1, 1], [3, 2]]


@needs_torch
def test_topk_unsorted_selects_the_same_elements():
    x = np.random.default_rng(0).permutation(20).astype(np.float32)
    e = ember.topk(ember.from_numpy(x), 5, sorted=False)
    t = T.topk(T.from_numpy(x), 5, sorted=False)
    assert sorted(e.values.tolist()) == sorted(t.values.tolist())
    assert x[e.indices.numpy()].tolist() == e.values.tolist()


def test_unique_known_values():
    vals, inv, counts = ember.unique(ember.tensor([[3, 1], [3, 2]]), sorted=False,
                                     return_inverse=True, return_counts=True)
    assert vals.tolist() == [1, 2, 3] and counts.tolist() == [1, 1, 2]
    assert inv.tolist() == [[2, 0], [2, 1]] and inv.dtype is ember.int64
    assert ember.unique(ember.tensor([1.0, float("nan"), float("nan")])).shape == (3,)
    rows = ember.unique(ember.tensor([[1, 2], [0, 1], [1, 2]]), dim=0, return_counts=True)
    assert rows[0].tolist() == [[0, 1], [1, 2]] and rows[1].tolist() == [1, 2]
    out = ember.unique_consecutive(ember.tensor([1, 1, 2, 2, 3, 1, 1, 2]), return_inverse=True,
                                   return_counts=True)
    assert [o.tolist() for o in out] == [[1, 2, 3, 1, 2], [0, 0, 1, 1, 2, 3, 3, 4],
                                         [2, 2, 1, 2, 1]]


def test_nonzero_known_values():
    x = ember.tensor([[1, 0], [0, 2]])
    assert ember.nonzero(x).tolist() == [[0, 0], [1, 1]]
    rows, cols = ember.nonzero(x, as_tuple=True)
    assert rows.tolist() == [0, 1] and cols.tolist() == [0, 1] and rows.is_contiguous()
    assert x[ember.nonzero(x, as_tuple=True)].tolist() == [1, 2]
    assert ember.nonzero(ember.tensor(3.0)).shape == (1, 0)
    assert [t.tolist() for t in ember.nonzero(ember.tensor(0.0), as_tuple=True)] == [[]]
    assert ember.argwhere(x).tolist() == [[0, 0], [1, 1]]


def test_searchsorted_known_values():
    seq = ember.tensor([1, 3, 5, 7])
    assert ember.searchsorted(seq, ember.tensor([3, 6, 9])).tolist() == [1, 3, 4]
    assert ember.searchsorted(seq, ember.tensor([3, 6, 9]), right=True).tolist() == [2, 3, 4]
    assert ember.searchsorted(seq, 4).shape == ()
    assert ember.searchsorted(seq, ember.tensor([3]), out_int32=True).dtype is ember.int32
    assert ember.bucketize(ember.tensor([1, 5, 9]), seq).tolist() == [0, 2, 4]
    assert ember.bucketize(ember.tensor([1, 5, 9]), seq, right=True).tolist() == [1, 3, 4]


def test_value_dependent_ops_are_dynamic():
    for name in ("masked_select", "nonzero", "unique", "unique_consecutive"):
        assert OPS[name].dynamic_shape, name
    for name in ("gather", "scatter", "index_select", "masked_scatter", "take", "argsort"):
        assert not OPS[name].dynamic_shape, name


def test_methods_and_exports():
    x = ember.tensor([[3.0, 1.0], [2.0, 4.0]])
    assert x.sort(1).values.tolist() == [[1.0, 3.0], [2.0, 4.0]]
    assert x.gather(1, ember.tensor([[1], [0]])).tolist() == [[1.0], [2.0]]
    assert x.masked_fill(x > 2, 0.0).tolist() == [[0.0, 1.0], [2.0, 0.0]]
    assert not hasattr(ember.Tensor, "searchsorted") and not hasattr(ember.Tensor, "bucketize")
    for name in ("scatter_", "scatter_add_", "scatter_reduce_", "index_add_", "index_copy_",
                 "index_fill_", "masked_fill_", "masked_scatter_"):
        assert callable(getattr(ember.Tensor, name)), name


# Gradients: duplicates accumulate ----------------------------------------------------------
def test_duplicate_indices_accumulate_gradients():
    x = ember.arange(4.0, requires_grad=True)
    ember.gather(x, 0, ember.tensor([1, 1, 1])).sum().backward()
    assert x.grad.tolist() == [0.0, 3.0, 0.0, 0.0]
    x.grad = None
    ember.index_select(x, 0, ember.tensor([2, 0, 2])).sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 2.0, 0.0]
    x.grad = None
    ember.take(x, ember.tensor([[3, -1], [0, 3]])).sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 0.0, 3.0]


# In-place variants ---------------------------------------------------------------------
INPLACE = [
    ("scatter_", lambda i: (0, i["perm"], i["src"])),
    ("scatter_", lambda i: (0, i["perm"], 2.5)),
    ("scatter_add_", lambda i: (0, i["dup"], i["src"])),
    ("scatter_reduce_", lambda i: (0, i["dup"], i["src"], "amax")),
    ("index_add_", lambda i: (1, i["vec"], i["cols"])),
    ("index_copy_", lambda i: (1, i["uvec"], i["cols"])),
    ("index_fill_", lambda i: (1, i["vec"], -1.5)),
    ("masked_fill_", lambda i: (i["mask"], 3.0)),
    ("masked_scatter_", lambda i: (i["mask"], i["src"])),
]


def _inplace_inputs(lib, rng, requires_grad):
    conv = (lambda a: lib.from_numpy(a.copy())) if lib is T else ember.from_numpy
    src = conv(rng.standard_normal((3, 4)))
    cols = conv(rng.standard_normal((3, 3)))
    if requires_grad:
        src.requires_grad_()
        cols.requires_grad_()
    return {"src": src, "cols": cols, "perm": conv(distinct_idx(rng, (3, 4), 0, 3)),
            "dup": conv(idx(rng, (3, 4), 3)), "vec": conv(np.array([0, 3, 0])),
            "uvec": conv(np.array([2, 0, 3])), "mask": conv(rng.random((4,)) < 0.5)}


@needs_torch
@pytest.mark.parametrize("case", range(len(INPLACE)))
def test_inplace_matches_torch(case):
    name, args = INPLACE[case]
    base = np.random.default_rng(case).standard_normal((3, 4))
    # no autograd: the fast path that writes straight into the tensor
    ie = _inplace_inputs(ember, np.random.default_rng(1), False)
    it = _inplace_inputs(T, np.random.default_rng(1), False)
    e = ember.from_numpy(base.copy())
    t = T.from_numpy(base.copy())
    version = e._version_value
    out = getattr(e, name)(*args(ie))
    getattr(t, name)(*args(it))
    assert out is e and e._version_value == version + 1
    np.testing.assert_allclose(e.numpy(), t.numpy(), err_msg=name)
    # a non-leaf in a graph: gradients flow to the leaf and to the sources
    ie = _inplace_inputs(ember, np.random.default_rng(1), True)
    it = _inplace_inputs(T, np.random.default_rng(1), True)
    le = ember.tensor(base, requires_grad=True)
    lt = T.tensor(base, requires_grad=True)
    ye, yt = le * 2, lt * 2
    getattr(ye, name)(*args(ie))
    getattr(yt, name)(*args(it))
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), err_msg=name)
    up = np.random.default_rng(2).standard_normal((3, 4))
    (ye * ember.from_numpy(up)).sum().backward()
    (yt * T.from_numpy(up)).sum().backward()
    np.testing.assert_allclose(le.grad.numpy(), lt.grad.numpy(), err_msg=name)
    for key in ("src", "cols"):
        if it[key].grad is not None:
            np.testing.assert_allclose(ie[key].grad.numpy(), it[key].grad.numpy(),
                                       err_msg=f"{name} grad of {key}")


def test_inplace_on_a_view_writes_the_base():
    x = ember.zeros(3, 4)
    x[1].index_fill_(0, ember.tensor([0, 2]), 5.0)
    x[:, 3].masked_fill_(ember.tensor([True, False, True]), -1.0)
    x.t().scatter_add_(0, ember.tensor([[1, 1, 1]]), ember.ones(1, 3))
    assert x.tolist() == [[0, 1, 0, -1], [5, 1, 5, 0], [0, 1, 0, -1]]


def test_inplace_on_a_view_in_a_graph():
    leaf = ember.ones(2, 3, requires_grad=True)
    y = leaf * 3
    y[0].index_fill_(0, ember.tensor([1]), 0.0)
    y.sum().backward()
    assert leaf.grad.tolist() == [[3, 0, 3], [3, 3, 3]]


def test_inplace_errors():
    leaf = ember.ones(3, requires_grad=True)
    with pytest.raises(ember.EmberError, match="leaf Variable"):
        leaf.scatter_(0, ember.tensor([0]), 2.0)
    with pytest.raises(ember.EmberError, match="masked_fill_"):
        ember.zeros(3).masked_fill_(ember.ones(2, 3, dtype=ember.bool), 1.0)
    with pytest.raises(ember.EmberError, match="masked_scatter_"):
        ember.zeros(3).masked_scatter_(ember.ones(2, 3, dtype=ember.bool), ember.ones(6))
    with pytest.raises(ember.EmberIndexError, match="index_add_.*index 3.*size 3"):
        ember.zeros(3).index_add_(0, ember.tensor([3]), ember.ones(1))
    x = ember.zeros(3)
    with pytest.raises(ember.EmberIndexError, match="scatter_"):
        x.scatter_(0, ember.tensor([5]), 1.0)
    assert x.tolist() == [0.0, 0.0, 0.0] and x._version_value == 0


# Errors ----------------------------------------------------------------------------------
X = ember.arange(12.0).reshape(3, 4)


@pytest.mark.parametrize("call, match", [
    (lambda: ember.gather(X, 1, ember.tensor([[4]])), r"gather: index 4 is out of bounds for "
                                                      r"dimension 1 with size 4"),
    (lambda: ember.gather(X, 1, ember.tensor([[-1]])), r"gather: index -1 .* size 4"),
    (lambda: ember.scatter(X, 0, ember.tensor([[3]]), 1.0), r"scatter: index 3 .* size 3"),
    (lambda: ember.scatter_add(X, 1, ember.tensor([[9]]), ember.ones(1, 1)),
     r"scatter_add: index 9 .* size 4"),
    (lambda: ember.scatter_reduce(X, 1, ember.tensor([[9]]), ember.ones(1, 1), "sum"),
     r"scatter_reduce: index 9 .* size 4"),
    (lambda: ember.index_select(X, 0, ember.tensor([3])), r"index_select: index 3 .* size 3"),
    (lambda: ember.index_select(X, 0, ember.tensor([-1])), r"index_select: index -1"),
    (lambda: ember.index_add(X, 0, ember.tensor([-1]), ember.ones(1, 4)), r"index_add: index -1"),
    (lambda: ember.index_copy(X, 1, ember.tensor([4]), ember.ones(3, 1)), r"index_copy: index 4"),
    (lambda: ember.index_fill(X, 0, ember.tensor([-4]), 1.0), r"index_fill: index -4 .* size 3"),
    (lambda: ember.take(X, ember.tensor([12])), r"take: index 12 .* 12 elements"),
    (lambda: ember.take(X, ember.tensor([-13])), r"take: index -13"),
    (lambda: ember.take_along_dim(X, ember.tensor([[4]]), 1), r"take_along_dim: index 4 .* size 4"),
    (lambda: ember.topk(X, 5), r"topk: k \(5\) .* size 4"),
    (lambda: ember.kthvalue(X, 0), r"kthvalue: .*k \(0\)"),
    (lambda: ember.index_select(X, 0, ember.tensor([[1]])), r"index_select: index is supposed "
                                                            r"to be a vector"),
    (lambda: ember.gather(X, 2, ember.tensor([[1]])), r"gather: Dimension out of range"),
    (lambda: ember.unique(ember.tensor(3), dim=0), r"unique: dimension specified as 0"),
])
def test_index_errors(call, match):
    with pytest.raises(ember.EmberIndexError, match=match):
        call()


@pytest.mark.parametrize("call, match", [
    (lambda: ember.gather(X, 1, ember.tensor([[1]], dtype=ember.int16)),
     r"gather: expected dtype int32 or int64 for index, got int16"),
    (lambda: ember.gather(X, 1, [[1]]), r"gather: expected index to be a Tensor"),
    (lambda: ember.index_select(X, 0, ember.tensor([1.0])), r"index_select: expected dtype"),
    (lambda: ember.index_copy(X, 0, ember.tensor([1], dtype=ember.int32), ember.ones(1, 4)),
     r"index_copy: expected dtype int64"),
    (lambda: ember.index_fill(X, 0, ember.tensor([1], dtype=ember.int32), 1.0),
     r"index_fill: expected dtype int64"),
    (lambda: ember.take(X, ember.tensor([1], dtype=ember.int32)), r"take: expected dtype int64"),
    (lambda: ember.take_along_dim(X, ember.tensor([[1]], dtype=ember.int32), 1),
     r"take_along_dim: expected dtype int64 for indices"),
    (lambda: ember.scatter(X, 0, ember.tensor([[1]]), ember.ones(1, 1, dtype=ember.float64)),
     r"scatter: expected self and src to have the same dtype, got float32 and float64"),
    (lambda: ember.index_add(X, 0, ember.tensor([1]), ember.ones(1, 4, dtype=ember.float64)),
     r"index_add: expected self and source"),
    (lambda: ember.masked_fill(X, ember.ones(3, 4, dtype=ember.uint8), 1.0),
     r"masked_fill: expected a bool tensor for mask, got uint8"),
    (lambda: ember.masked_select(X, X > 1.0 + 0), None),
    (lambda: ember.masked_select(X, ember.ones(4)), r"masked_select: expected a bool tensor"),
    (lambda: ember.masked_scatter(X, X > 1, ember.ones(12, dtype=ember.float64)),
     r"masked_scatter: expected self and source"),
    (lambda: ember.scatter(X, 0, ember.tensor([[1]])), r"scatter: expected exactly one of src"),
])
def test_type_errors(call, match):
    if match is None:  # a bool mask is fine
        assert call().shape == (10,)
        return
    with pytest.raises(ember.EmberTypeError, match=match):
        call()


@pytest.mark.parametrize("call, exc, match", [
    (lambda: ember.gather(X, 1, ember.tensor([1])), ember.ShapeError,
     r"gather: index tensor must have the same number of dimensions"),
    (lambda: ember.gather(X, 1, ember.zeros(4, 1, dtype=ember.int64)), ember.ShapeError,
     r"gather: expected index \[4, 1\] to be no larger than self \[3, 4\] apart from dimension 1"),
    (lambda: ember.scatter(X, 1, ember.tensor([[1, 2]]), ember.ones(1, 1)), ember.ShapeError,
     r"scatter: expected index \[1, 2\] .* no larger than src \[1, 1\]"),
    (lambda: ember.index_add(X, 0, ember.tensor([1]), ember.ones(1, 3)), ember.ShapeError,
     r"index_add: source must have self's shape apart from dimension 0"),
    (lambda: ember.masked_fill(X, X > 1, ember.tensor([1.0])), ember.EmberError,
     r"masked_fill: only supports a 0-dimensional value tensor"),
    (lambda: ember.index_fill(X, 0, ember.tensor([1]), ember.ones(2)), ember.EmberError,
     r"index_fill: only supports a 0-dimensional value tensor"),
    (lambda: ember.masked_scatter(X, X > 1, ember.ones(3)), ember.EmberError,
     r"masked_scatter: source has 3 elements, fewer than the 10 True values"),
    (lambda: ember.scatter(X, 0, ember.tensor([[1]]), 1.0, reduce="mean"), ember.EmberError,
     r"scatter: reduce argument must be either add or multiply"),
    (lambda: ember.scatter_reduce(X, 0, ember.tensor([[1]]), X[:1, :1], "max"), ember.EmberError,
     r"scatter_reduce: reduce argument must be one of"),
    (lambda: ember.take_along_dim(X, ember.tensor([1]), 1), ember.ShapeError,
     r"take_along_dim: input and indices should have the same number of dimensions"),
    (lambda: ember.searchsorted(ember.tensor([1, 2]), ember.tensor([1]), side="left", right=True),
     ember.EmberError, r"searchsorted: side and right can't be set to opposites"),
    (lambda: ember.searchsorted(ember.tensor([[1, 2]]), ember.tensor([[1], [2]])), ember.ShapeError,
     r"searchsorted: sorted_sequence should be 1-d or have the leading dims of input"),
    (lambda: ember.bucketize(ember.tensor([1]), ember.tensor([[1, 2]])), ember.ShapeError,
     r"bucketize: boundaries must be a 1-d tensor"),
])
def test_shape_and_value_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_index_modified_in_place_after_use_is_caught():
    x = ember.ones(3, requires_grad=True)
    index = ember.tensor([0, 2])
    y = ember.gather(x, 0, index)
    index.zero_()
    with pytest.raises(ember.EmberError, match="modified by an inplace operation"):
        y.sum().backward()


@needs_torch
def test_scatter_reduce_prod_with_several_zeros_at_one_position():
    a = np.array([0.5, -1.2, 0.7])
    s = np.array([0.0, 0.4, -1.5, 0.0, 0.0, 0.2])
    i = np.array([0, 0, 1, 1, 1, 2])
    ea, es = ember.tensor(a, requires_grad=True), ember.tensor(s, requires_grad=True)
    ta, ts = T.tensor(a, requires_grad=True), T.tensor(s, requires_grad=True)
    ember.scatter_reduce(ea, 0, ember.from_numpy(i), es, "prod").sum().backward()
    T.scatter_reduce(ta, 0, T.from_numpy(i), ts, "prod").sum().backward()
    np.testing.assert_allclose(es.grad.numpy(), ts.grad.numpy())
    np.testing.assert_allclose(ea.grad.numpy(), ta.grad.numpy())
    out = ember.scatter_reduce(ea, 0, ember.from_numpy(i), es, "prod").sum()
    with pytest.raises(ember.EmberError, match="double backward is unsupported"):
        ember.autograd.grad(out, es, create_graph=True)
