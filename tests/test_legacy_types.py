"""Legacy typed tensor classes (ember.FloatTensor, ...), set_default_tensor_type and the
top-level is_signed / get_device / is_inference, against PyTorch."""
import warnings

import numpy as np
import pytest

import ember
from ember.errors import EmberTypeError

torch = pytest.importorskip("torch")

NAMES = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
         "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor"]


def _edtype(t):
    return str(t.dtype).removeprefix("torch.")


@pytest.mark.parametrize("name", NAMES)
def test_constructors_match_torch(name):
    ours, ref = getattr(ember, name), getattr(torch, name)
    assert ours.dtype.name == _edtype(ref(1))
    for args in [(), (2, 3), (0,), (ember.Size([2, 1]),)]:
        targs = tuple(torch.Size(a) if isinstance(a, ember.Size) else a for a in args)
        e, t = ours(*args), ref(*targs)
        assert tuple(e.shape) == tuple(t.shape) and e.dtype.name == _edtype(t)
    for data in ([1, 0, 3], [[1.7, 2.2]], [], np.array([2, 0])):
        e, t = ours(data), ref(data)
        assert e.dtype.name == _edtype(t)
        np.testing.assert_array_equal(e.float().numpy(), t.float().numpy())


def test_isinstance_is_dtype_and_cpu():
    x = ember.ones(2)
    assert isinstance(x, ember.FloatTensor) and isinstance(x, ember.Tensor)
    assert not isinstance(x, ember.DoubleTensor)
    assert isinstance(x.double(), ember.DoubleTensor)
    assert isinstance(ember.tensor([1, 2]), ember.LongTensor)
    assert isinstance(ember.tensor([True]), ember.BoolTensor)
    assert not isinstance(np.ones(2, np.float32), ember.FloatTensor)
    assert not isinstance(3.0, ember.FloatTensor)
    assert type(ember.FloatTensor(2)) is ember.Tensor
    assert not issubclass(ember.Tensor, ember.FloatTensor)
    assert repr(ember.FloatTensor) == "<class 'ember.FloatTensor'>"


def test_tensor_argument_is_alias():
    x = ember.ones(3)
    y = ember.FloatTensor(x)
    y[0] = 5.0
    assert x[0].item() == 5.0
    with pytest.raises(EmberTypeError, match="float32"):
        ember.FloatTensor(ember.tensor([1, 2]))


@pytest.mark.parametrize("bad", [(2.5,), ("a",), (2, -1), (True,)])
def test_constructor_errors(bad):
    with pytest.raises((EmberTypeError, ember.EmberError)):
        ember.FloatTensor(*bad)


def test_set_default_tensor_type():
    try:
        with pytest.warns(UserWarning, match="deprecated"):
            ember.set_default_tensor_type(ember.DoubleTensor)
        assert ember.get_default_dtype() is ember.float64
        assert ember.tensor([1.0]).dtype is ember.float64
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ember.set_default_tensor_type("torch.HalfTensor")
            assert ember.get_default_dtype() is ember.float16
            ember.set_default_tensor_type("ember.FloatTensor")
            assert ember.get_default_dtype() is ember.float32
            for bad in [ember.LongTensor, "torch.IntTensor", "foo", ember.float64,
                        "torch.cuda.FloatTensor"]:
                with pytest.raises(EmberTypeError):
                    ember.set_default_tensor_type(bad)
            assert ember.get_default_dtype() is ember.float32
    finally:
        ember.set_default_dtype(ember.float32)


@pytest.mark.parametrize("dtype", ["float32", "uint8", "bool", "int8", "int64"])
def test_is_signed_matches_torch(dtype):
    e = ember.ones(2, dtype=getattr(ember, dtype))
    t = torch.ones(2, dtype=getattr(torch, dtype))
    assert ember.is_signed(e) == torch.is_signed(t)


def test_get_device_and_is_inference():
    assert ember.get_device(ember.ones(2)) == torch.get_device(torch.ones(2)) == -1
    assert ember.is_inference(ember.ones(2)) is False
    for fn in (ember.is_signed, ember.get_device, ember.is_inference):
        with pytest.raises(EmberTypeError, match="must be Tensor, not int"):
            fn(3)


def test_long_truncates_toward_zero():
    np.testing.assert_array_equal(ember.LongTensor([1.7, -1.7]).numpy(),
                                  torch.LongTensor([1.7, -1.7]).numpy())


@pytest.mark.parametrize("name", NAMES)
def test_tensor_type_takes_legacy_class(name):
    e = ember.tensor([1.0, 0.0, 2.0]).type(getattr(ember, name))
    t = torch.tensor([1.0, 0.0, 2.0]).type(getattr(torch, name))
    assert isinstance(e, getattr(ember, name)) and e.dtype.name == _edtype(t)
    assert e.type() == "ember." + name
