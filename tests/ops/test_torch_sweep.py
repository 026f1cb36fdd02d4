"""Regressions from an adversarial sweep of ember's ops against PyTorch: each case once
disagreed with PyTorch (value, shape, dtype, gradient, or an error PyTorch raises)."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional
# x[[[0, 1], [1, 2]]] (a list of lists read as a tuple): PyTorch warns it may change
pytestmark = pytest.mark.filterwarnings("ignore:Using a non-tuple sequence:UserWarning")


def _pair(array):
    return ember.from_numpy(array.copy()), torch.from_numpy(array.copy())


def _grad_pair(array):
    e, t = _pair(array)
    return e.requires_grad_(), t.requires_grad_()


def _close(ours, theirs, rtol=1e-7, atol=1e-9):
    theirs = theirs.detach().numpy()
    ours = ours.detach().numpy()
    assert ours.shape == theirs.shape
    assert str(ours.dtype) == str(theirs.dtype)
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol, equal_nan=True)


def _check_value_and_grad(e_fn, t_fn, *arrays):
    """Forward values and the gradient of sum(out * w) for every float64 input."""
    e_in = [_grad_pair(a)[0] if a.dtype == np.float64 else _pair(a)[0] for a in arrays]
    t_in = [torch.from_numpy(a.copy()).requires_grad_(a.dtype == np.float64) for a in arrays]
    e_out, t_out = e_fn(*e_in), t_fn(*t_in)
    _close(e_out, t_out)
    w = np.random.default_rng(0).standard_normal(tuple(t_out.shape))
    e_leaves = [x for x in e_in if x.requires_grad]
    t_leaves = [x for x in t_in if x.requires_grad]
    e_grads = ember.autograd.grad((e_out * ember.from_numpy(w)).sum(), e_leaves)
    t_grads = torch.autograd.grad((t_out * torch.from_numpy(w)).sum(), t_leaves)
    for ours, theirs in zip(e_grads, t_grads):
        _close(ours, theirs)


X = np.arange(60.0).reshape(3, 4, 5)


# Indexing: PyTorch applies ints before advanced indices, and reads a short list of
# lists as a tuple.
@pytest.mark.parametrize("index", [
    (0, slice(None), [0, 4]),
    (1, Ellipsis, [0, 4]),
    (slice(None), 2, [[1], [3]]),
    (-1, slice(1, None), [True, False, True, False, True]),
    ([0, 2], slice(None), 1),
    (0, [1, 3], slice(None)),
    [[0, 1], [1, 2]],
])
def test_getitem_and_its_gradient_follow_torch(index):
    def conv(lib, i):
        if isinstance(i, tuple):
            return tuple(conv(lib, j) for j in i)
        return lib.tensor(i) if isinstance(i, list) and not isinstance(i[0], list) else i
    _check_value_and_grad(lambda x: x[conv(ember, index)], lambda x: x[conv(torch, index)], X)


def _put(lib, accumulate):
    def fn(x, v):
        index = (1, slice(None), lib.tensor([1, 1] if accumulate else [1, 3]))
        if lib is ember:
            return ember.index_put(x, index, v, accumulate=accumulate)
        return x.index_put((lib.tensor(1), lib.arange(4)[:, None], index[2]), v,
                           accumulate=accumulate)
    return fn


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_with_ints_and_arrays(accumulate):
    values = np.arange(8.0).reshape(4, 2)
    _check_value_and_grad(_put(ember, accumulate), _put(torch, accumulate), X, values)


def test_setitem_with_ints_and_arrays():
    e, t = _pair(X)
    e[0, :, ember.tensor([0, 4])] = ember.ones(4, 2, dtype=ember.float64) * 7
    t[0, :, torch.tensor([0, 4])] = torch.ones(4, 2, dtype=torch.float64) * 7
    _close(e, t)
    e[-1, ..., [True, False, True, False, True]] = -1.0
    t[-1, ..., [True, False, True, False, True]] = -1.0
    _close(e, t)


def test_split_index_errors_name_the_right_dim():
    x = ember.zeros(3, 4)
    with pytest.raises(ember.EmberIndexError, match="index 7 is out of bounds for dimension 1"):
        x[0, [7]]
    with pytest.raises(ember.EmberIndexError, match="index 5 is out of bounds for dimension 0"):
        x[[5], 0]


# Elementwise semantics.
@pytest.mark.parametrize("name, a, b", [
    ("xlogy", [0.0, 0.0, 1.0, 2.0], [0.0, np.nan, 0.0, 3.0]),
    ("pow", [0, 2, 1, -1, -1, 3, -2], [-1, -1, -1, -1, -2, -2, -3]),
])
def test_binary_special_values(name, a, b):
    a, b = np.array(a), np.array(b)
    _close(getattr(ember, name)(*_pair(a)[:1], _pair(b)[0]),
           getattr(torch, name)(torch.from_numpy(a), torch.from_numpy(b)))


def test_xlogy_gradient_at_nan():
    _check_value_and_grad(ember.xlogy, torch.xlogy, np.array([0.0, 0.0, 1.0, 2.0]),
                          np.array([0.5, np.nan, 2.0, 3.0]))


@pytest.mark.parametrize("name", ["sign", "sgn"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sign_of_nan_is_zero(name, dtype):
    a = np.array([np.nan, -0.0, 2.0, -3.0, np.inf], dtype=dtype)
    _close(getattr(ember, name)(_pair(a)[0]), getattr(torch, name)(torch.from_numpy(a)))


@pytest.mark.parametrize("fn", [
    lambda m, a, b: m.floor_divide(a, b), lambda m, a, b: m.remainder(a, b),
    lambda m, a, b: m.fmod(a, b), lambda m, a, b: m.div(a, b, rounding_mode="trunc"),
    lambda m, a, b: m.div(a, b, rounding_mode="floor"), lambda m, a, b: a // 0,
    lambda m, a, b: a % 0,
])
def test_integer_division_by_zero_raises(fn):
    a, b = np.array([7, -7]), np.array([0, 2])
    with pytest.raises(RuntimeError):
        fn(torch, torch.from_numpy(a), torch.from_numpy(b))
    with pytest.raises(ember.EmberError, match="division by zero"):
        fn(ember, ember.from_numpy(a), ember.from_numpy(b))
    # float division by zero stays inf / nan, as in PyTorch
    _close(fn(ember, ember.from_numpy(a * 1.0), ember.from_numpy(b * 1.0)),
           fn(torch, torch.from_numpy(a * 1.0), torch.from_numpy(b * 1.0)))


@pytest.mark.parametrize("call", [
    lambda m: m.tensor([2, 3], dtype=m.uint8) ** -1,
    lambda m: m.pow(m.tensor([2, 3]), -2),
    lambda m: m.add(m.tensor([1, 2]), m.tensor([3, 4]), alpha=2.5),
    lambda m: m.sub(m.tensor([1, 2]), 3, alpha=0.5),
])
def test_errors_torch_raises(call):
    with pytest.raises(RuntimeError):
        call(torch)
    with pytest.raises(ember.EmberError):
        call(ember)


def test_float_alpha_with_a_float_operand_still_works():
    _close(ember.add(ember.tensor([1.0, 2.0]), ember.tensor([3, 4]), alpha=2.5),
           torch.add(torch.tensor([1.0, 2.0]), torch.tensor([3, 4]), alpha=2.5))


def test_clamp_gradient_when_min_exceeds_max():
    _check_value_and_grad(ember.clamp, torch.clamp, np.array([1.0, 2.0, 3.0, 0.5, 1.5]),
                          np.array([1.0, 2.5, 0.0, 0.0, 2.0]), np.array([2.0, 2.0, 1.0, 0.2, 1.0]))


@pytest.mark.parametrize("name, kwargs", [
    ("hardswish", {}), ("threshold", {"threshold": 0.5, "value": -1.0}),
])
def test_activation_boundaries_and_nan(name, kwargs):
    a = np.array([-4.0, -3.0, -1.0, 0.0, 0.5, 2.9, 3.0, 4.0, np.inf, np.nan])
    _check_value_and_grad(lambda x: getattr(F, name)(x, **kwargs),
                          lambda x: getattr(TF, name)(x, **kwargs), a)


@pytest.mark.parametrize("name", ["all", "any"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_all_any_over_no_dims_reduce_nothing(name, keepdim):
    a = np.array([[1.0, 0.0], [2.0, 3.0]])
    _close(getattr(ember, name)(_pair(a)[0], dim=(), keepdim=keepdim),
           getattr(torch, name)(torch.from_numpy(a), dim=(), keepdim=keepdim))


@pytest.mark.parametrize("equation, shapes", [
    ("ij,j", [(2, 3), (1,)]), ("ij,ij->i", [(2, 3), (1, 3)]),
    ("bij,bjk->bik", [(1, 2, 3), (4, 3, 5)]),
])
def test_einsum_gradient_with_broadcast_size_one(equation, shapes):
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(s) for s in shapes]
    _check_value_and_grad(lambda *x: ember.einsum(equation, *x),
                          lambda *x: torch.einsum(equation, *x), *arrays)
