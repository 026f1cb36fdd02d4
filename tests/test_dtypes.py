"""The ten dtypes: conversions and PyTorch's promotion rules."""
import itertools

import numpy as np
import pytest

import ember
from ember.dtypes import as_dtype

torch = pytest.importorskip("torch")

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
         "float64"]
FLOATS = ["float16", "bfloat16", "float32", "float64"]


def ename(t) -> str:
    return t.dtype.name


def tname(t) -> str:
    return str(t.dtype).removeprefix("torch.")


def values(t):
    if isinstance(t, torch.Tensor):
        return (t.float() if t.dtype == torch.bfloat16 else t).tolist()
    return (t.float() if t.dtype is ember.bfloat16 else t).tolist()


@pytest.mark.parametrize("name", NAMES)
def test_dtype_attributes_match_torch(name):
    e, t = getattr(ember, name), getattr(torch, name)
    assert e.is_floating_point == t.is_floating_point
    assert e.is_signed == t.is_signed
    assert e.itemsize == t.itemsize
    assert repr(e) == repr(t).replace("torch", "ember")
    assert as_dtype(t) is e and as_dtype(name) is e and as_dtype(f"torch.{name}") is e


def test_as_dtype_aliases_and_errors():
    assert as_dtype(np.float32) is ember.float32
    assert as_dtype(np.dtype("int16")) is ember.int16
    assert as_dtype(float) is ember.float64  # the Python type means double, as in torch
    assert as_dtype(int) is ember.int64 and as_dtype(bool) is ember.bool
    assert as_dtype("half") is ember.float16 and as_dtype("long") is ember.int64
    assert ember.half is ember.float16 and ember.double is ember.float64
    assert ember.long is ember.int64 and ember.short is ember.int16
    assert ember.zeros(2, dtype=float).dtype is ember.float64
    assert as_dtype(torch.complex64) is ember.complex64 and as_dtype(np.complex128) is \
        ember.complex128 and as_dtype(complex) is ember.complex128
    for bad in ("floaty", None, 3, torch.complex32, np.clongdouble):
        with pytest.raises(ember.EmberTypeError, match="as_dtype: unsupported dtype"):
            as_dtype(bad)
    with pytest.raises(ember.EmberTypeError, match="ones: unsupported dtype 'float8'"):
        ember.ones(2, dtype="float8")


SAMPLE = [0.0, 1.0, 2.5, 100.0, -3.75]


def _sample(lib, name):
    vals = [v for v in SAMPLE if v >= 0] if name in ("uint8", "bool") else SAMPLE
    return lib.tensor(vals, dtype=lib.float64).to(getattr(lib, name))


@pytest.mark.parametrize("src,dst", list(itertools.product(NAMES, NAMES)))
def test_to_dtype_matches_torch(src, dst):
    if src in FLOATS and dst == "uint8":  # negative floats to uint8 are undefined in C
        pytest.skip("undefined conversion")
    e = _sample(ember, src).to(getattr(ember, dst))
    t = _sample(torch, src).to(getattr(torch, dst))
    assert ename(e) == tname(t) == dst
    assert values(e) == values(t)


METHODS = ["float", "double", "half", "bfloat16", "long", "int", "short", "char", "byte", "bool"]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("src", ["float32", "int64", "bool"])
def test_conversion_methods_match_torch(method, src):
    e = getattr(ember.tensor([0, 1, 2, 7], dtype=getattr(ember, src)), method)()
    t = getattr(torch.tensor([0, 1, 2, 7], dtype=getattr(torch, src)), method)()
    assert ename(e) == tname(t)
    assert values(e) == values(t)


@pytest.mark.parametrize("name", NAMES)
def test_round_trip_through_numpy(name):
    x = ember.tensor([0, 1, 1, 0], dtype=getattr(ember, name))
    arr = x.numpy()
    assert as_dtype(arr.dtype) is x.dtype
    back = ember.from_numpy(arr)
    assert back.dtype is x.dtype and values(back) == values(x)
    assert ember.tensor(arr).dtype is x.dtype
    assert np.asarray(x).dtype == arr.dtype


def test_to_same_dtype_returns_self_and_copy_copies():
    x = ember.ones(2)
    assert x.to(ember.float32) is x
    c = x.to(dtype=ember.float32, copy=True)
    assert c is not x
    c[0] = 5.0
    assert x[0].item() == 1.0


def test_promote_types_all_pairs_match_torch():
    for a, b in itertools.product(NAMES, NAMES):
        got = ember.promote_types(getattr(ember, a), getattr(ember, b))
        want = torch.promote_types(getattr(torch, a), getattr(torch, b))
        assert got.name == str(want).removeprefix("torch."), (a, b)


def test_promote_types_known_values():
    assert ember.promote_types(ember.uint8, ember.int8) is ember.int16
    assert ember.promote_types(ember.float16, ember.bfloat16) is ember.float32
    assert ember.promote_types(ember.int64, ember.float16) is ember.float16
    assert ember.promote_types(ember.bool, ember.uint8) is ember.uint8


def _operand(lib, name, ndim):
    return lib.ones((2,) if ndim else (), dtype=getattr(lib, name))


def test_result_type_tensor_tensor_matches_torch():
    for a, b in itertools.product(NAMES, NAMES):
        for da, db in itertools.product((0, 1), (0, 1)):
            got = ember.result_type(_operand(ember, a, da), _operand(ember, b, db))
            want = torch.result_type(_operand(torch, a, da), _operand(torch, b, db))
            assert got.name == str(want).removeprefix("torch."), (a, da, b, db)


@pytest.mark.parametrize("scalar", [True, 2, 2.5, -7])
def test_result_type_tensor_scalar_matches_torch(scalar):
    for name, ndim in itertools.product(NAMES, (0, 1)):
        for order in (1, -1):
            args_e = (_operand(ember, name, ndim), scalar)[::order]
            args_t = (_operand(torch, name, ndim), scalar)[::order]
            got, want = ember.result_type(*args_e), torch.result_type(*args_t)
            assert got.name == str(want).removeprefix("torch."), (name, ndim, scalar)


def test_result_type_known_values():
    assert ember.result_type(ember.ones(2, dtype=ember.int8), 5) is ember.int8
    assert ember.result_type(ember.ones(2, dtype=ember.int32), 2.5) is ember.float32
    assert ember.result_type(ember.ones(2, dtype=ember.float16),
                             ember.tensor(1.0, dtype=ember.float64)) is ember.float16
    assert ember.result_type(ember.ones(2, dtype=ember.uint8),
                             ember.tensor(1, dtype=ember.int64)) is ember.uint8


def test_default_dtype_changes_inference_and_results():
    old = ember.get_default_dtype()
    assert old is ember.float32
    try:
        ember.set_default_dtype(ember.float64)
        assert ember.get_default_dtype() is ember.float64
        assert ember.tensor(1.5).dtype is ember.float64
        assert ember.randn(3).dtype is ember.float64
        assert ember.result_type(ember.ones(2, dtype=ember.int32), 2.5) is ember.float64
        assert ember.result_type(ember.ones(2, dtype=ember.float32), 2.5) is ember.float32
    finally:
        ember.set_default_dtype(old)
    assert ember.tensor(1.5).dtype is ember.float32 and ember.randn(2).dtype is ember.float32


def test_set_default_dtype_rejects_integers():
    with pytest.raises(ember.EmberTypeError, match="set_default_dtype: only floating dtypes "
                                                   "are allowed, got ember.int64"):
        ember.set_default_dtype(ember.int64)
    with pytest.raises(ember.EmberTypeError, match="set_default_dtype: unsupported dtype"):
        ember.set_default_dtype("float80")
    assert ember.get_default_dtype() is ember.float32
