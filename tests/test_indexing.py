"""``x[...]`` and ``x[...] = v`` against PyTorch: values, dtypes, views versus copies,
gradients (duplicate indices accumulate), writes inside a graph, and errors."""
import warnings

import numpy as np
import pytest

import ember
from tests.ops.optable import needs_torch, torch as T

SHAPE = (3, 4, 5)
_rng = np.random.default_rng(0)
MASK_FULL = _rng.random(SHAPE) < 0.5
MASK_2D = _rng.random(SHAPE[:2]) < 0.5
MASK_1D = np.array([True, False, True])
MASK_LAST = np.array([False, True, True, False, True])

BASIC = [
    1, -1, (1, 2), (-1, -4, 0), (2, 3, -5), slice(None), slice(1, None), slice(None, None, 2),
    (slice(None), slice(1, 4, 2)), (Ellipsis, 1), (None, 1), (1, None, slice(None)),
    (Ellipsis, None), slice(0, 0), slice(5, 10), slice(-2, None), (), Ellipsis,
    (0, Ellipsis, 2), (slice(None, None, 3), None, slice(1, -1)), np.array(1),
]
ADVANCED = [
    np.array([0, 2, 0]), [2, 0], np.array([[0, 1], [2, 2]]), np.array([], dtype=np.int64),
    (np.array([0, 2]), np.array([1, 3])), (np.array([[0], [2]]), np.array([1, 3])),
    (slice(None), np.array([3, 0, 3])), (np.array([0, 1]), slice(None), np.array([1, 2])),
    (1, np.array([0, 3])), (Ellipsis, np.array([4, 0])), (np.array([-1, 0]), 2, slice(1, 3)),
    (None, np.array([1, 1])), np.array([0, 2], dtype=np.int32), MASK_FULL, MASK_2D, MASK_1D,
    (slice(None), slice(None), MASK_LAST), (1, MASK_2D[0]), (MASK_1D, np.array([0, 3])),
    True, (1, False), np.array(True), np.array(False), [True, False, True],
]
IDS_BASIC = [f"basic{i}" for i in range(len(BASIC))]
IDS_ADVANCED = [f"advanced{i}" for i in range(len(ADVANCED))]


def convert(index, lib):
    """The same index for ``lib`` (ember or torch): arrays become that library's tensors."""
    if isinstance(index, tuple):
        return tuple(convert(i, lib) for i in index)
    if isinstance(index, np.ndarray):
        return ember.from_numpy(index.copy()) if lib is ember else T.from_numpy(index.copy())
    return index


def pair(shape=SHAPE, dtype=np.float64, seed=1, requires_grad=False):
    arr = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    e = ember.tensor(arr, requires_grad=requires_grad)
    t = T.tensor(arr, requires_grad=requires_grad)
    return arr, e, t


def check_same(e, t, what=""):
    assert tuple(e.shape) == tuple(t.shape), f"{what}: shape {tuple(e.shape)} vs {tuple(t.shape)}"
    assert e.dtype.name == str(t.dtype).removeprefix("torch."), what
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), err_msg=what)


# Reading ---------------------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("index", BASIC, ids=IDS_BASIC)
def test_basic_indexing_matches_torch_and_is_a_view(index):
    _, e, t = pair()
    out = e[convert(index, ember)]
    check_same(out, t[convert(index, T)], repr(index))
    if out.numel():
        assert np.shares_memory(out.numpy(), e.numpy())
        out.fill_(7.0)  # writes through to the indexed tensor
        assert (e.numpy() == 7.0).sum() == out.numel()


@needs_torch
@pytest.mark.parametrize("index", ADVANCED, ids=IDS_ADVANCED)
def test_advanced_indexing_matches_torch_and_is_a_copy(index):
    _, e, t = pair()
    out = e[convert(index, ember)]
    check_same(out, t[convert(index, T)], repr(index))
    assert not np.shares_memory(out.numpy(), e.numpy())
    before = e.numpy().copy()
    out.fill_(7.0)
    np.testing.assert_array_equal(e.numpy(), before)


@needs_torch
@pytest.mark.parametrize("dtype", [np.int64, np.int8, np.bool_, np.float16])
def test_indexing_keeps_the_dtype(dtype):
    arr = (np.random.default_rng(0).standard_normal(SHAPE) * 3).astype(dtype)
    e, t = ember.from_numpy(arr), T.from_numpy(arr)
    for index in (1, (slice(None), np.array([0, 2])), MASK_2D):
        check_same(e[convert(index, ember)], t[convert(index, T)], repr(index))


@needs_torch
def test_byte_tensor_index_is_a_mask():
    mask = np.array([1, 0, 1], dtype=np.uint8)
    _, e, t = pair()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # PyTorch deprecates byte masks
        check_same(e[ember.from_numpy(mask)], t[T.from_numpy(mask)])


def test_zero_dim_tensors():
    x = ember.tensor(3.0)
    assert x[...].shape == () and x[...].item() == 3.0
    assert x[None].shape == (1,) and x[None, None].shape == (1, 1)
    assert x[True].shape == (1,) and x[False].shape == (0,)
    assert x[ember.tensor(True)].tolist() == [3.0]
    assert x[()].shape == ()
    with pytest.raises(ember.EmberIndexError, match="invalid index of a 0-dim tensor"):
        x[0]
    y = ember.arange(4.0)
    assert y[ember.tensor(2)].shape == () and y[ember.tensor(2)].item() == 2.0
    y[2].fill_(9.0)  # an element is a 0-d view
    assert y.tolist() == [0.0, 1.0, 9.0, 3.0]
    x[...] = 5.0
    assert x.item() == 5.0


def test_index_tensors_may_be_int32_or_int64():
    x = ember.arange(6.0)
    for dtype in (ember.int64, ember.int32):
        assert x[ember.tensor([4, 1], dtype=dtype)].tolist() == [4.0, 1.0]


# Gradients -------------------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("index", BASIC + ADVANCED, ids=IDS_BASIC + IDS_ADVANCED)
def test_indexing_gradients_match_torch(index):
    _, e, t = pair(requires_grad=True)
    oe, ot = e[convert(index, ember)], t[convert(index, T)]
    up = np.random.default_rng(2).standard_normal(tuple(ot.shape))
    (oe * ember.from_numpy(up)).sum().backward()
    (ot * T.from_numpy(up)).sum().backward()
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), err_msg=repr(index))


def test_duplicate_indices_accumulate_gradients():
    x = ember.arange(4.0, requires_grad=True)
    x[[1, 1, 3, 1]].sum().backward()
    assert x.grad.tolist() == [0.0, 3.0, 0.0, 1.0]
    y = ember.zeros(2, 3, requires_grad=True)
    (y[ember.tensor([0, 0]), ember.tensor([2, 2])] * ember.tensor([1.0, 2.0])).sum().backward()
    assert y.grad.tolist() == [[0.0, 0.0, 3.0], [0.0, 0.0, 0.0]]


@needs_torch
@pytest.mark.parametrize("index", [(1, slice(None, None, 2)), np.array([0, 2, 0]), MASK_2D],
                         ids=["basic", "duplicates", "mask"])
def test_indexing_second_order_gradients_match_torch(index):
    _, e, t = pair(requires_grad=True)
    ge, = ember.autograd.grad((e[convert(index, ember)] ** 3).sum(), e, create_graph=True)
    gt, = T.autograd.grad((t[convert(index, T)] ** 3).sum(), t, create_graph=True)
    (ge * ge).sum().backward()
    (gt * gt).sum().backward()
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy())


# Writing ---------------------------------------------------------------------------------
SET_CASES = [
    (1, lambda: 2.5), ((slice(None), 2), lambda: np.arange(5.0)),
    ((Ellipsis, slice(1, 3)), lambda: np.ones((4, 1))), (np.array([2, 0]), lambda: -1),
    ((np.array([0, 2]), np.array([1, 3])), lambda: np.array([[10.0], [20.0]])),
    ((slice(None), np.array([3, 0])), lambda: np.arange(5.0)), (MASK_FULL, lambda: 4.0),
    (MASK_2D, lambda: np.arange(5.0)), ((1, MASK_2D[0]), lambda: np.array(6.0)),
    ((slice(None, None, 2), None, 0), lambda: np.ones((2, 1, 5))), (Ellipsis, lambda: 0.5),
]
SET_IDS = [f"set{i}" for i in range(len(SET_CASES))]


def _value(make, lib, requires_grad=False):
    v = make()
    if not isinstance(v, np.ndarray):
        return v
    if lib is ember:
        return ember.tensor(v, requires_grad=requires_grad)
    return T.tensor(v, requires_grad=requires_grad)


@needs_torch
@pytest.mark.parametrize("case", SET_CASES, ids=SET_IDS)
def test_setitem_matches_torch(case):
    index, make = case
    _, e, t = pair()
    view = e[0]
    version = e._version_value
    e[convert(index, ember)] = _value(make, ember)
    t[convert(index, T)] = _value(make, T)
    check_same(e, t, repr(index))
    assert e._version_value == version + 1
    np.testing.assert_array_equal(view.numpy(), e.numpy()[0])  # views see the write


@needs_torch
def test_setitem_casts_the_value_to_the_tensor_dtype():
    arr = np.arange(12).reshape(3, 4)
    e, t = ember.from_numpy(arr.copy()), T.from_numpy(arr.copy())
    e[1] = 2.7
    t[1] = 2.7
    e[:, 0] = ember.tensor([1.9, -1.9, 3.5])
    t[:, 0] = T.tensor([1.9, -1.9, 3.5])
    check_same(e, t)
    b = ember.zeros(3, dtype=ember.bool)
    b[1] = 5
    assert b.tolist() == [False, True, False]


@needs_torch
@pytest.mark.parametrize("case", SET_CASES, ids=SET_IDS)
def test_setitem_in_a_graph_gradients_match_torch(case):
    index, make = case
    arr, _, _ = pair()
    le, lt = ember.tensor(arr, requires_grad=True), T.tensor(arr, requires_grad=True)
    ve, vt = _value(make, ember, True), _value(make, T, True)
    ye, yt = le * 2, lt * 2
    ye[convert(index, ember)] = ve
    yt[convert(index, T)] = vt
    check_same(ye, yt, repr(index))
    up = np.random.default_rng(3).standard_normal(SHAPE)
    (ye * ember.from_numpy(up)).sum().backward()
    (yt * T.from_numpy(up)).sum().backward()
    np.testing.assert_allclose(le.grad.numpy(), lt.grad.numpy(), err_msg=repr(index))
    if isinstance(vt, T.Tensor):
        np.testing.assert_allclose(ve.grad.numpy(), vt.grad.numpy(), err_msg=repr(index))


def test_setitem_into_a_view_in_a_graph():
    leaf = ember.ones(2, 3, requires_grad=True)
    y = leaf * 3
    row = y[1]
    row[ember.tensor([0, 2])] = ember.tensor(0.0)
    assert y.tolist() == [[3.0, 3.0, 3.0], [0.0, 3.0, 0.0]]
    y.sum().backward()
    assert leaf.grad.tolist() == [[3.0, 3.0, 3.0], [0.0, 3.0, 0.0]]


def test_setitem_on_a_leaf_that_requires_grad_raises():
    leaf = ember.ones(3, requires_grad=True)
    with pytest.raises(ember.EmberError, match="leaf Variable that requires grad"):
        leaf[0] = 2.0
    with pytest.raises(ember.EmberError, match="leaf Variable"):
        leaf[0].fill_(2.0)
    with ember.no_grad():
        leaf[0] = 2.0
    assert leaf.tolist() == [2.0, 1.0, 1.0]


def test_index_put_accumulates():
    x = ember.zeros(4)
    out = ember.index_put(x, (ember.tensor([1, 1, 3]),), ember.tensor([1.0, 2.0, 3.0]),
                          accumulate=True)
    assert out.tolist() == [0.0, 3.0, 0.0, 3.0] and x.tolist() == [0.0] * 4


# Errors ----------------------------------------------------------------------------------
X = ember.arange(12.0).reshape(3, 4)


@pytest.mark.parametrize("index, match", [
    (3, r"index: index 3 is out of bounds for dimension 0 with size 3 \(tensor of shape "
        r"\(3, 4\)\)"),
    ((1, -5), r"index: index -5 is out of bounds for dimension 1 with size 4"),
    (ember.tensor([0, 3]), r"index: index 3 is out of bounds for dimension 0 with size 3"),
    ([0, 5], r"index: index 5 is out of bounds for dimension 0 with size 3"),
    ((slice(None), ember.tensor([4])), r"index: index 4 is out of bounds for dimension 1 with "
                                       r"size 4"),
    (ember.ones(2, dtype=ember.bool), r"index: boolean index did not match .* size of dimension "
                                      r"is 3"),
    ((1, 2, 3), r"index: too many indices for tensor"),
    (ember.tensor([1.0]), r"index: tensors used as indices must be long, int, byte or bool "
                          r"tensors, got float32"),
    (ember.tensor([1], dtype=ember.int16), r"got int16"),
])
def test_getitem_errors(index, match):
    with pytest.raises(ember.EmberIndexError, match=match):
        X[index]


@pytest.mark.parametrize("index, match", [
    (3, r"setitem: index 3 is out of bounds for dimension 0 with size 3"),
    (ember.tensor([5]), r"setitem: index 5 is out of bounds for dimension 0 with size 3"),
    ((0, [7]), r"setitem: index 7 is out of bounds for dimension 1 with size 4"),
])
def test_setitem_errors(index, match):
    x = X.clone()
    with pytest.raises(ember.EmberIndexError, match=match):
        x[index] = 1.0
    assert x.tolist() == X.tolist()  # nothing was written
    y = X.clone().requires_grad_() * 1  # the graph path says the same
    with pytest.raises(ember.EmberIndexError, match=match.replace("setitem", "index_put")):
        y[index] = ember.tensor(1.0, requires_grad=True)


def test_other_index_errors():
    with pytest.raises(ember.EmberError, match=r"setitem: can't assign a value of shape \(2,\)"):
        X.clone()[:] = ember.ones(2)
    with pytest.raises(ember.ShapeError, match=r"index_put: can't assign a value of shape \(2,\)"):
        (X.clone().requires_grad_() * 1)[:] = ember.ones(2, requires_grad=True)
    with pytest.raises(ember.EmberError, match="slice step must be greater than zero"):
        X[::-1]
    with pytest.raises(ember.EmberTypeError, match="unsupported index of type str"):
        X["a"]
    with pytest.raises(ember.EmberTypeError, match="unsupported index of type float"):
        X[1.5]
