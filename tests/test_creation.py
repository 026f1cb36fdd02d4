"""Making tensors: from data, filled, ranges and random, checked against PyTorch."""
import json

import numpy as np
import pytest

import ember

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the oracle) not installed")
pytestmark = pytest.mark.filterwarnings("ignore:To copy construct from a tensor:UserWarning")


def _dtype_name(t) -> str:
    return str(t.dtype).split(".")[-1]


def _values(t):
    t = t.detach()
    if _dtype_name(t) == "bfloat16":
        t = t.float()
    return np.asarray(t).tolist()


def assert_same(e, t, exact=True):
    """ember tensor ``e`` has torch tensor ``t``'s dtype, shape and values (``exact``, or to
    a rounding step of the dtype)."""
    assert _dtype_name(e) == _dtype_name(t)
    assert tuple(e.shape) == tuple(t.shape)
    if exact:
        assert _values(e) == _values(t)
    else:
        rtol = {"bfloat16": 1e-2, "float16": 2e-3}.get(_dtype_name(e), 1e-6)
        np.testing.assert_allclose(np.asarray(_values(e), dtype=np.float64),
                                   np.asarray(_values(t), dtype=np.float64), rtol=rtol,
                                   atol=1e-6)


def both(fn, exact=True):
    e, t = fn(ember), fn(torch)
    assert_same(e, t, exact)
    return e


# tensor() ---------------------------------------------------------------------------------
TENSOR_DATA = {
    "float": lambda lib: lib.tensor(1.5),
    "int": lambda lib: lib.tensor(2),
    "bool": lambda lib: lib.tensor(True),
    "int_float_list": lambda lib: lib.tensor([1, 2.5]),
    "bool_int_list": lambda lib: lib.tensor([True, 1]),
    "bool_list": lambda lib: lib.tensor([True, False]),
    "nested": lambda lib: lib.tensor([[1, 2], [3, 4]]),
    "tuple": lambda lib: lib.tensor(((1.0,), (2.0,))),
    "empty": lambda lib: lib.tensor([]),
    "empty_nested": lambda lib: lib.tensor([[], []]),
    "range": lambda lib: lib.tensor(range(4)),
    "np_int32": lambda lib: lib.tensor(np.array([1, 2], dtype=np.int32)),
    "np_float64": lambda lib: lib.tensor(np.array([1.0, 2.0])),
    "np_bool": lambda lib: lib.tensor(np.array([True, False])),
    "np_scalar_f64": lambda lib: lib.tensor(np.float64(1.5)),
    "np_scalar_f32": lambda lib: lib.tensor(np.float32(1.5)),
    "np_scalar_i16": lambda lib: lib.tensor(np.int16(3)),
    "list_np_scalars": lambda lib: lib.tensor([np.int32(1), 2]),
    "list_np_f32_float": lambda lib: lib.tensor([np.float32(1.0), 2.5]),
    "list_np_f16_float": lambda lib: lib.tensor([np.float16(1.0), 2.0]),
    "list_0d_float": lambda lib: lib.tensor([lib.tensor(1.0), lib.tensor(2.0)]),
    "list_0d_int": lambda lib: lib.tensor([lib.tensor(1), lib.tensor(2)]),
    "nested_0d": lambda lib: lib.tensor([[lib.tensor(1.0)], [lib.tensor(2.0)]]),
    "list_0d_int8_int": lambda lib: lib.tensor([lib.tensor(1, dtype=lib.int8), 2]),
    "list_0d_int8_float": lambda lib: lib.tensor([lib.tensor(1, dtype=lib.int8), 2.5]),
    "list_0d_f64_float": lambda lib: lib.tensor([lib.tensor(1.0, dtype=lib.float64), 2.5]),
    "from_tensor": lambda lib: lib.tensor(lib.tensor([1.0, 2.0])),
    "from_tensor_cast": lambda lib: lib.tensor(lib.tensor([1, 2]), dtype=lib.float64),
    "dtype_f16": lambda lib: lib.tensor([1, 2], dtype=lib.float16),
    "dtype_bf16": lambda lib: lib.tensor([1.5, -2.25], dtype=lib.bfloat16),
    "float_to_int_truncates": lambda lib: lib.tensor([1.7, -2.7], dtype=lib.int64),
    "float_to_bool": lambda lib: lib.tensor([1.5, 0.0], dtype=lib.bool),
    "float_inf_in_f16": lambda lib: lib.tensor([70000.0], dtype=lib.float16),
}


@needs_torch
@pytest.mark.parametrize("name", TENSOR_DATA)
def test_tensor_matches_torch(name):
    both(TENSOR_DATA[name])


def test_tensor_copies_its_data():
    a = np.array([1.0, 2.0])
    t = ember.tensor(a)
    a[0] = 9.0
    assert t.tolist() == [1.0, 2.0]
    src = ember.tensor([1, 2])
    copy = ember.tensor(src)
    src[0] = 7
    assert copy.tolist() == [1, 2]


def test_tensor_of_grad_tensors_is_a_detached_leaf():
    x = ember.tensor(2.0, requires_grad=True)
    t = ember.tensor([x, x * 3])
    assert t.tolist() == [2.0, 6.0] and not t.requires_grad and t.grad_fn is None


def test_tensor_requires_grad():
    t = ember.tensor([1.0, 2.0], requires_grad=True)
    assert t.requires_grad and t.is_leaf


def test_tensor_from_torch_tensor():
    if torch is None:
        pytest.skip("needs torch")
    assert_same(ember.tensor(torch.arange(3)), torch.arange(3))


@pytest.mark.parametrize("data,match", [
    ([[1, 2], [3]], r"tensor: expected a sequence of equal-length sequences, but at dim 0 "
                    r"element 0 has shape \(2,\) and element 1 has shape \(1,\)"),
    ([1, [2, 3]], r"tensor: .*element 0 has shape \(\) and element 1 has shape \(2,\)"),
    ([[[1], [2]], [[1], [2, 3]]], r"tensor: .*at dim 1 element 0 has shape \(1,\) and "
                                  r"element 1 has shape \(2,\)"),
])
def test_tensor_ragged_lists(data, match):
    with pytest.raises(ember.EmberError, match=match):
        ember.tensor(data)


@pytest.mark.parametrize("data,match", [
    ("abc", "tensor: can't make a tensor from the string 'abc'"),
    (["a"], "tensor: can't make a tensor from the string 'a'"),
    (None, "tensor: could not infer the dtype of NoneType"),
    ([1, None], "tensor: could not infer the dtype of NoneType"),
    ({1: 2}, "tensor: could not infer the dtype of dict"),
    (object(), "tensor: could not infer the dtype of object"),
    (np.array(["a"]), "tensor: can't convert NumPy data of dtype <U1"),
])
def test_tensor_bad_data(data, match):
    with pytest.raises(ember.EmberTypeError, match=match):
        ember.tensor(data)


def test_tensor_overflow_and_bad_dtype():
    with pytest.raises(ember.EmberError, match="tensor: a value in the data is out of range "
                                               "for uint8"):
        ember.tensor([300], dtype=ember.uint8)
    with pytest.raises(ember.EmberError, match="out of range for int64"):
        ember.tensor(2 ** 70)
    with pytest.raises(ember.EmberTypeError, match="tensor: unsupported dtype 'floaty'"):
        ember.tensor([1.0], dtype="floaty")


def test_requires_grad_on_integer_tensor():
    with pytest.raises(ember.EmberTypeError, match="tensor: only Tensors of floating point "
                                                   "and complex dtype can require gradients, "
                                                   "got dtype int64"):
        ember.tensor([1, 2], requires_grad=True)
    with pytest.raises(ember.EmberTypeError, match="zeros: only Tensors of floating point "
                                                   "and complex dtype can require gradients, "
                                                   "got dtype int32"):
        ember.zeros(2, dtype=ember.int32, requires_grad=True)
    with pytest.raises(ember.EmberTypeError, match="arange: .*got dtype int64"):
        ember.arange(3, requires_grad=True)


# Sharing memory -------------------------------------------------------------------------
def test_from_numpy_shares_memory_both_ways():
    a = np.zeros(3, dtype=np.float32)
    t = ember.from_numpy(a)
    a[0] = 1.0
    t[1] = 2.0
    assert t.tolist() == [1.0, 2.0, 0.0]
    assert a.tolist() == [1.0, 2.0, 0.0]
    assert t.dtype is ember.float32
    assert ember.from_numpy(np.arange(3.0)).dtype is ember.float64


def test_from_numpy_errors():
    with pytest.raises(ember.EmberTypeError, match="from_numpy: expected np.ndarray, got list"):
        ember.from_numpy([1, 2])
    with pytest.raises(ember.EmberTypeError, match="from_numpy: can't share NumPy data of "
                                                   "dtype complex256"):
        ember.from_numpy(np.ones(2, dtype=np.clongdouble))


def test_as_tensor_and_asarray_share_numpy_memory():
    a = np.arange(3.0)
    for make in (ember.as_tensor, ember.asarray):
        t = make(a)
        a[0] = 5.0
        assert t[0].item() == 5.0 and t.dtype is ember.float64
    # a dtype change needs a copy
    t = ember.as_tensor(a, dtype=ember.float32)
    a[1] = -1.0
    assert t[1].item() == 1.0


def test_as_tensor_returns_the_same_tensor_and_keeps_history():
    x = ember.ones(2, requires_grad=True)
    assert ember.as_tensor(x) is x
    y = ember.as_tensor(x, dtype=ember.float64)
    assert y.dtype is ember.float64 and y.grad_fn is not None
    assert ember.as_tensor([1, 2.0]).dtype is ember.float32


def test_asarray_copy_and_requires_grad():
    z = ember.ones(2)
    assert ember.asarray(z) is z
    c = ember.asarray(z, copy=True)
    c[0] = 3.0
    assert z[0].item() == 1.0
    with pytest.raises(ember.EmberError, match="asarray: can't share memory of a float32 "
                                               "tensor on cpu as float64"):
        ember.asarray(z, dtype=ember.float64, copy=False)
    with pytest.raises(ember.EmberError, match="asarray: can't share memory with list"):
        ember.asarray([1, 2], copy=False)
    x = ember.ones(2, requires_grad=True)
    assert not ember.asarray(x, requires_grad=False).requires_grad
    assert ember.asarray([1.0, 2.0], requires_grad=True).requires_grad
    assert ember.asarray(np.float64(1.5)).dtype is ember.float64
    assert ember.asarray(3).dtype is ember.int64


@needs_torch
def test_dlpack_round_trip_with_torch_shares_memory():
    e = ember.arange(6, dtype=ember.float32).reshape(2, 3)
    t = torch.from_dlpack(e)
    assert t.dtype == torch.float32 and tuple(t.shape) == (2, 3)
    t[0, 0] = 100.0
    assert e[0, 0].item() == 100.0

    src = torch.arange(4.0)
    back = ember.from_dlpack(src)
    back[1] = 50.0
    assert src.tolist() == [0.0, 50.0, 2.0, 3.0]

    view = ember.arange(6.0).reshape(2, 3).T
    assert torch.from_dlpack(view).tolist() == view.tolist()
    assert torch.from_dlpack(view).stride() == view.stride()
    for name in ("float16", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"):
        x = ember.ones(3, dtype=getattr(ember, name))
        assert torch.from_dlpack(x).dtype == getattr(torch, name)
        assert ember.from_dlpack(torch.ones(3, dtype=getattr(torch, name))).dtype is x.dtype


@needs_torch
def test_dlpack_errors():
    with pytest.raises(ember.EmberError, match="__dlpack__: can't export a Tensor that "
                                               "requires grad"):
        torch.from_dlpack(ember.ones(2, requires_grad=True))
    with pytest.raises(ember.EmberTypeError, match="__dlpack__: bfloat16"):
        torch.from_dlpack(ember.ones(2, dtype=ember.bfloat16))
    with pytest.raises(ember.EmberTypeError, match="from_dlpack: can't import list"):
        ember.from_dlpack([1, 2])


# Filled -----------------------------------------------------------------------------------
FILLED = {
    "zeros_varargs": lambda lib: lib.zeros(2, 3),
    "zeros_tuple": lambda lib: lib.zeros((2, 3)),
    "zeros_list": lambda lib: lib.zeros([2, 3]),
    "zeros_size": lambda lib: lib.zeros(lib.Size([2, 3])),
    "zeros_0d": lambda lib: lib.zeros(()),
    "zeros_empty": lambda lib: lib.zeros(0, 3),
    "zeros_0d_tensor_size": lambda lib: lib.zeros(lib.tensor(3)),
    "zeros_int32": lambda lib: lib.zeros(2, 3, dtype=lib.int32),
    "ones_bool": lambda lib: lib.ones(3, dtype=lib.bool),
    "ones_f16": lambda lib: lib.ones((2,), dtype=lib.float16),
    "full_int": lambda lib: lib.full((2,), 3),
    "full_float": lambda lib: lib.full((2,), 3.0),
    "full_bool": lambda lib: lib.full((2,), True),
    "full_dtype": lambda lib: lib.full([2, 2], 1.5, dtype=lib.int64),
    "full_0d_tensor": lambda lib: lib.full((2,), lib.tensor(3)),
    "zeros_like": lambda lib: lib.zeros_like(lib.ones(2, dtype=lib.int32)),
    "zeros_like_dtype": lambda lib: lib.zeros_like(lib.ones(2, dtype=lib.int32),
                                                   dtype=lib.float64),
    "ones_like": lambda lib: lib.ones_like(lib.zeros(2, 3)),
    "full_like_int": lambda lib: lib.full_like(lib.ones(2, dtype=lib.int32), 2.7),
    "full_like_float": lambda lib: lib.full_like(lib.ones(2), 7),
    "new_zeros": lambda lib: lib.ones(2, 3).new_zeros(2),
    "new_zeros_tuple": lambda lib: lib.ones(2, dtype=lib.int32).new_zeros((2, 2)),
    "new_zeros_dtype": lambda lib: lib.ones(2).new_zeros(2, dtype=lib.int8),
    "new_ones": lambda lib: lib.ones(2, dtype=lib.int32).new_ones(3),
    "new_full": lambda lib: lib.ones(2, dtype=lib.int32).new_full((2,), 2.5),
    "new_full_float": lambda lib: lib.ones(2).new_full((2,), 2),
    "new_tensor": lambda lib: lib.ones(2, dtype=lib.int32).new_tensor([1.5, 2.5]),
    "new_tensor_f64": lambda lib: lib.ones(2, dtype=lib.float64).new_tensor([1, 2]),
    "new_tensor_scalar": lambda lib: lib.ones(2).new_tensor(3),
    "scalar_tensor": lambda lib: lib.scalar_tensor(3),
    "scalar_tensor_dtype": lambda lib: lib.scalar_tensor(3, dtype=lib.int32),
    "eye": lambda lib: lib.eye(3),
    "eye_rect": lambda lib: lib.eye(2, 3),
    "eye_bool": lambda lib: lib.eye(2, dtype=lib.bool),
    "eye_int": lambda lib: lib.eye(2, 3, dtype=lib.int32),
    "eye_0": lambda lib: lib.eye(0),
}


@needs_torch
@pytest.mark.parametrize("name", FILLED)
def test_filled_matches_torch(name):
    both(FILLED[name])


def test_empty_and_new_empty_shapes_and_dtypes():
    assert ember.empty(2, 3).shape == (2, 3) and ember.empty(2).dtype is ember.float32
    assert ember.empty((2, 3), dtype=ember.int8).dtype is ember.int8
    x = ember.ones(2, dtype=ember.int32)
    assert x.new_empty(2, 3).shape == (2, 3) and x.new_empty(2, 3).dtype is ember.int32
    assert ember.empty_like(ember.ones(2, 3, dtype=ember.float16)).dtype is ember.float16
    assert ember.ones(2).new_ones(2, requires_grad=True).requires_grad


@pytest.mark.parametrize("call,error,match", [
    (lambda: ember.zeros(2, -1), ember.EmberError,
     r"zeros: negative dimension -1 in size \(2, -1\); sizes must be non-negative"),
    (lambda: ember.ones((-3,)), ember.EmberError, r"ones: negative dimension -3"),
    (lambda: ember.zeros(2.5), ember.EmberTypeError,
     r"zeros: size must be a tuple of ints, got \(2.5,\)"),
    (lambda: ember.empty("3"), ember.EmberTypeError, r"empty: size must be a tuple of ints"),
    (lambda: ember.zeros(2, dtype="float128"), ember.EmberTypeError,
     r"as_dtype: unsupported dtype 'float128'|zeros: unsupported dtype 'float128'"),
    (lambda: ember.eye(-1), ember.EmberError, r"eye: n must be greater or equal to 0, got -1"),
    (lambda: ember.eye(2, -2), ember.EmberError, r"eye: m must be greater or equal to 0"),
])
def test_filled_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


# Ranges -----------------------------------------------------------------------------------
ARANGE = [
    (5,), (1, 4), (0, 1, 0.1), (0, 1, 0.3), (5, 0, -1), (5.0, 0, -1.5), (-1, 1, 0.25),
    (1, 2.5), (0, 10, 3), (10, 0, -3), (0, -10, -3), (1, 1), (0, 1.0000001, 0.1),
    (0, 2.2, 0.2), (1e-3, 0.7, 0.01), (-2.5, 3.7, 0.35), (0, 0.3, 0.1), (1, 1.3, 0.1),
]


@needs_torch
@pytest.mark.parametrize("args", ARANGE, ids=[str(a) for a in ARANGE])
@pytest.mark.parametrize("dtype", [None, "float64", "float16", "int64", "int32", "bfloat16"])
def test_arange_matches_torch(args, dtype):
    def make(lib):
        kwargs = {} if dtype is None else {"dtype": getattr(lib, dtype)}
        return lib.arange(*args, **kwargs)
    try:
        t = make(torch)
    except (RuntimeError, ValueError):
        with pytest.raises(ember.EmberError):
            make(ember)
        return
    # lengths exactly; float values to the dtype's rounding
    assert_same(make(ember), t, exact=dtype in ("int64", "int32"))


def test_arange_random_float_lengths_equal_torch():
    if torch is None:
        pytest.skip("needs torch")
    rng = np.random.default_rng(0)
    for _ in range(200):
        start = float(np.round(rng.uniform(-10, 10), rng.integers(0, 4)))
        step = float(np.round(rng.uniform(0.01, 3), rng.integers(1, 4))) or 0.5
        step *= 1 if rng.random() < 0.7 else -1
        end = start + step * rng.uniform(0, 60)
        for dtype in ("float32", "float64"):
            e = ember.arange(start, end, step, dtype=getattr(ember, dtype))
            t = torch.arange(start, end, step, dtype=getattr(torch, dtype))
            assert e.numel() == t.numel(), (start, end, step, dtype)
            np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6, atol=1e-5)


def test_arange_known_values_and_errors():
    assert ember.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert ember.arange(5).dtype is ember.int64
    assert ember.arange(1, 2.5, 0.5).tolist() == [1.0, 1.5, 2.0]
    assert ember.arange(ember.tensor(3)).tolist() == [0, 1, 2]
    assert ember.arange(-0.5, 2.5, dtype=ember.int64).tolist() == [0, 1]
    with pytest.raises(ember.EmberError, match="arange: step must be nonzero"):
        ember.arange(0, 5, 0)
    with pytest.raises(ember.EmberError, match="arange: upper bound and lower bound "
                                               "inconsistent with step sign"):
        ember.arange(0, 5, -1)
    with pytest.raises(ember.EmberTypeError, match="arange: expected a number, got str"):
        ember.arange("5")
    with pytest.raises(ember.EmberTypeError, match="arange: dtype bool"):
        ember.arange(3, dtype=ember.bool)


LINSPACE = [(0, 1, 5), (0, 1, 1), (0, 1, 0), (1, 0, 5), (-1, 1, 7), (0, 10, 4), (10, 0, 4),
            (-5, 5, 4), (0.5, 9.7, 5), (-2.5, 2.5, 6), (-3, 7, 6), (0, -7, 4), (2, 2, 3)]


@needs_torch
@pytest.mark.parametrize("args", LINSPACE, ids=[str(a) for a in LINSPACE])
@pytest.mark.parametrize("dtype", [None, "float64", "float16", "int64", "int32"])
def test_linspace_matches_torch(args, dtype):
    kwargs = lambda lib: {} if dtype is None else {"dtype": getattr(lib, dtype)}  # noqa: E731
    both(lambda lib: lib.linspace(*args, **kwargs(lib)),
         exact=dtype in ("int64", "int32"))


LOGSPACE = [((0, 2, 3), {}), ((0, 3, 4), {"base": 2}), ((-1, 2, 4), {}), ((0.5, 2.5, 3), {}),
            ((0, 1, 0), {}), ((2, 0, 5), {"base": 3.0})]


@needs_torch
@pytest.mark.parametrize("args,kw", LOGSPACE, ids=[str(a) for a in LOGSPACE])
@pytest.mark.parametrize("dtype", [None, "float64", "int64"])
def test_logspace_matches_torch(args, kw, dtype):
    def make(lib):
        extra = {} if dtype is None else {"dtype": getattr(lib, dtype)}
        return lib.logspace(*args, **kw, **extra)
    both(make, exact=dtype == "int64")


def test_linspace_known_values_and_errors():
    assert ember.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert ember.linspace(ember.tensor(0.0), ember.tensor(2.0), 3).tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(ember.EmberError, match="linspace: number of steps must be "
                                               "non-negative, got -1"):
        ember.linspace(0, 1, -1)
    with pytest.raises(ember.EmberTypeError, match="logspace: steps must be an int, got float"):
        ember.logspace(0, 1, 2.5)


# Random -----------------------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("call", [
    lambda lib: lib.rand(2, 3), lambda lib: lib.rand((2, 3)), lambda lib: lib.rand(()),
    lambda lib: lib.rand(2, dtype=lib.float64), lambda lib: lib.rand(2, dtype=lib.float16),
    lambda lib: lib.rand(2, dtype=lib.bfloat16), lambda lib: lib.randn(0),
    lambda lib: lib.randn(lib.Size([2, 2])), lambda lib: lib.randn(3, dtype=lib.float16),
    lambda lib: lib.randint(10, (3,)), lambda lib: lib.randint(2, 10, (3,)),
    lambda lib: lib.randint(3, (2, 2), dtype=lib.int32),
    lambda lib: lib.randint(3, (2,), dtype=lib.float32), lambda lib: lib.randint(3, size=(2,)),
    lambda lib: lib.randint(low=1, high=3, size=(2,)), lambda lib: lib.randint(0, 2, (0,)),
    lambda lib: lib.normal(0.0, 1.0, (2, 3)), lambda lib: lib.normal(lib.zeros(3), 1.0),
    lambda lib: lib.normal(lib.zeros(3), lib.ones(3)), lambda lib: lib.normal(2.0, lib.ones(2, 2)),
    lambda lib: lib.normal(0.0, 1.0, (2,), dtype=lib.float64),
    lambda lib: lib.normal(lib.zeros(3, dtype=lib.float64), 1.0),
    lambda lib: lib.randperm(5), lambda lib: lib.randperm(0),
    lambda lib: lib.randperm(4, dtype=lib.float32),
    lambda lib: lib.rand_like(lib.ones(2, dtype=lib.float64)),
    lambda lib: lib.randn_like(lib.ones(2, 3)),
    lambda lib: lib.randint_like(lib.ones(2), 5),
    lambda lib: lib.randint_like(lib.ones(3, dtype=lib.int32), 2, 5),
    lambda lib: lib.bernoulli(lib.full((3,), 0.5)),
    lambda lib: lib.bernoulli(lib.full((3,), 0.5, dtype=lib.float64)),
    lambda lib: lib.multinomial(lib.tensor([1.0, 2.0, 3.0]), 2),
    lambda lib: lib.multinomial(lib.ones(4, 3), 5, replacement=True),
])
def test_random_shapes_and_dtypes_match_torch(call):
    e, t = call(ember), call(torch)
    assert _dtype_name(e) == _dtype_name(t) and tuple(e.shape) == tuple(t.shape)


def test_random_ranges():
    ember.manual_seed(0)
    u = ember.rand(20000).numpy()
    assert u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.01
    for dtype in (ember.float16, ember.bfloat16):
        h = ember.rand(20000, dtype=dtype).float().numpy()
        assert h.min() >= 0.0 and h.max() < 1.0
    n = ember.randn(20000).numpy()
    assert abs(n.mean()) < 0.03 and abs(n.std() - 1.0) < 0.03
    m = ember.normal(3.0, 0.5, (20000,)).numpy()
    assert abs(m.mean() - 3.0) < 0.02 and abs(m.std() - 0.5) < 0.02
    m = ember.normal(ember.full((20000,), -2.0), ember.full((20000,), 2.0)).numpy()
    assert abs(m.mean() + 2.0) < 0.1 and abs(m.std() - 2.0) < 0.1
    r = ember.randint(-3, 4, (5000,)).numpy()
    assert r.min() == -3 and r.max() == 3
    assert sorted(ember.randperm(50).tolist()) == list(range(50))
    b = ember.bernoulli(ember.full((20000,), 0.25)).numpy()
    assert set(np.unique(b).tolist()) <= {0.0, 1.0} and abs(b.mean() - 0.25) < 0.02
    assert ember.bernoulli(ember.ones(3)).tolist() == [1.0, 1.0, 1.0]
    assert ember.bernoulli(ember.ones(3), 0.0).tolist() == [0.0, 0.0, 0.0]


def test_multinomial_values():
    ember.manual_seed(1)
    assert ember.multinomial(ember.tensor([0.0, 1.0, 0.0]), 4, replacement=True).tolist() == \
        [1, 1, 1, 1]
    picks = ember.multinomial(ember.tensor([[0.0, 1.0], [1.0, 0.0]]), 1).tolist()
    assert picks == [[1], [0]]
    draw = ember.multinomial(ember.tensor([1.0, 1.0, 1.0, 0.0]), 3).tolist()
    assert sorted(draw) == [0, 1, 2]
    counts = np.bincount(ember.multinomial(ember.tensor([1.0, 3.0]), 20000,
                                           replacement=True).numpy(), minlength=2)
    assert abs(counts[1] / 20000 - 0.75) < 0.02


def test_seeding_reproduces():
    ember.manual_seed(123)
    a = [ember.rand(3).tolist(), ember.randn(2).tolist(), ember.randint(0, 100, (4,)).tolist(),
         ember.randperm(6).tolist(), ember.normal(0.0, 1.0, (2,)).tolist()]
    ember.manual_seed(123)
    b = [ember.rand(3).tolist(), ember.randn(2).tolist(), ember.randint(0, 100, (4,)).tolist(),
         ember.randperm(6).tolist(), ember.normal(0.0, 1.0, (2,)).tolist()]
    assert a == b
    assert ember.initial_seed() == 123
    ember.manual_seed(124)
    assert ember.rand(3).tolist() != a[0]


def test_generator_objects():
    g1 = ember.Generator().manual_seed(7)
    g2 = ember.Generator().manual_seed(7)
    assert ember.randn(4, generator=g1).tolist() == ember.randn(4, generator=g2).tolist()
    # a private generator does not move the default one
    ember.manual_seed(0)
    first = ember.rand(2).tolist()
    ember.manual_seed(0)
    ember.rand(5, generator=g1)
    assert ember.rand(2).tolist() == first
    assert g1.initial_seed() == 7
    assert ember.Generator().initial_seed() == ember.Generator().initial_seed()
    s = ember.Generator().seed()
    assert isinstance(s, int)


def test_rng_state_round_trip():
    ember.manual_seed(5)
    ember.rand(3)
    state = ember.get_rng_state()
    json.dumps(state)  # a checkpoint stores it as JSON
    a = ember.randn(4).tolist()
    ember.rand(10)
    ember.set_rng_state(state)
    assert ember.randn(4).tolist() == a
    g = ember.Generator().manual_seed(3)
    st = g.get_state()
    x = ember.rand(3, generator=g).tolist()
    g.set_state(st)
    assert ember.rand(3, generator=g).tolist() == x


def test_default_dtype_float64():
    old = ember.get_default_dtype()
    try:
        ember.set_default_dtype(ember.float64)
        assert ember.tensor(1.5).dtype is ember.float64
        assert ember.tensor([1, 2.5]).dtype is ember.float64
        assert ember.randn(2).dtype is ember.float64
        assert ember.rand(2).dtype is ember.float64
        assert ember.zeros(2).dtype is ember.float64
        assert ember.arange(0.0, 1.0, 0.5).dtype is ember.float64
        assert ember.linspace(0, 1, 3).dtype is ember.float64
        assert ember.tensor(1).dtype is ember.int64
    finally:
        ember.set_default_dtype(old)
    assert ember.tensor(1.5).dtype is ember.float32


@pytest.mark.parametrize("call,error,match", [
    (lambda: ember.randint(5, 5, (3,)), ember.EmberError,
     "randint: expected low < high, got low=5, high=5"),
    (lambda: ember.randint(5, 3, (3,)), ember.EmberError,
     "randint: expected low < high, got low=5, high=3"),
    (lambda: ember.randint(10), ember.EmberTypeError, "randint: size is required"),
    (lambda: ember.randint(0, 300, (2,), dtype=ember.uint8), ember.EmberError,
     r"randint: \[0, 300\) does not fit in dtype uint8"),
    (lambda: ember.rand(2, dtype=ember.int64), ember.EmberTypeError,
     "rand: expected a floating dtype, got int64"),
    (lambda: ember.randn(2, dtype=ember.bool), ember.EmberTypeError,
     "randn: expected a floating dtype, got bool"),
    (lambda: ember.randn_like(ember.ones(2, dtype=ember.int64)), ember.EmberTypeError,
     "randn: expected a floating dtype, got int64"),
    (lambda: ember.normal(0.0, -1.0, (2,)), ember.EmberError,
     r"normal: expects std >= 0.0, but found std -1.0"),
    (lambda: ember.normal(ember.zeros(2), -ember.ones(2)), ember.EmberError,
     r"normal: expects std >= 0.0"),
    (lambda: ember.normal(0.0, 1.0), ember.EmberTypeError, "normal: size is required"),
    (lambda: ember.randperm(-1), ember.EmberError, "randperm: n must be non-negative, got -1"),
    (lambda: ember.bernoulli(ember.full((3,), 1.5)), ember.EmberError,
     r"bernoulli: expected all probabilities in \[0, 1\]"),
    (lambda: ember.bernoulli(ember.ones(3, dtype=ember.int64)), ember.EmberTypeError,
     "bernoulli: expected a floating input, got int64"),
    (lambda: ember.multinomial(ember.tensor([1.0, 1.0]), 3), ember.EmberError,
     "multinomial: cannot draw 3 samples without replacement"),
    (lambda: ember.multinomial(ember.tensor([-1.0, 1.0]), 1), ember.EmberError,
     "multinomial: probabilities must be finite and non-negative"),
    (lambda: ember.multinomial(ember.tensor([0.0, 0.0]), 1), ember.EmberError,
     "multinomial: a row of probabilities sums to zero"),
    (lambda: ember.multinomial(ember.tensor([1.0, 1.0]), 0), ember.EmberError,
     "multinomial: num_samples must be positive, got 0"),
    (lambda: ember.multinomial(ember.tensor([1, 1]), 1), ember.EmberTypeError,
     "multinomial: expected a floating input, got int64"),
    (lambda: ember.multinomial(ember.ones(2, 2, 2), 1), ember.EmberError,
     r"multinomial: expected a 1-D or 2-D input, got shape \(2, 2, 2\)"),
])
def test_random_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()
