"""ember.finfo / ember.iinfo against torch.finfo / torch.iinfo, value for value."""
import pytest

import ember
from ember.errors import EmberTypeError

torch = pytest.importorskip("torch")

FLOATS = ["float16", "bfloat16", "float32", "float64"]
INTS = ["uint8", "int8", "int16", "int32", "int64"]
FINFO_ATTRS = ["bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"]


@pytest.mark.parametrize("name", FLOATS)
def test_finfo_matches_torch(name):
    ours, ref = ember.finfo(getattr(ember, name)), torch.finfo(getattr(torch, name))
    for attr in FINFO_ATTRS:
        a, b = getattr(ours, attr), getattr(ref, attr)
        assert type(a) is type(b), attr
        assert a == b, (attr, a, b)
    assert repr(ours) == repr(ref)


@pytest.mark.parametrize("name", INTS)
def test_iinfo_matches_torch(name):
    ours, ref = ember.iinfo(getattr(ember, name)), torch.iinfo(getattr(torch, name))
    for attr in ["bits", "max", "min", "dtype"]:
        a, b = getattr(ours, attr), getattr(ref, attr)
        assert type(a) is type(b), attr
        assert a == b, (attr, a, b)
    assert repr(ours) == repr(ref)


def test_finfo_default_dtype_and_tensor_dtype():
    assert ember.finfo().dtype == "float32"
    ember.set_default_dtype(ember.float64)
    try:
        assert ember.finfo().eps == torch.finfo(torch.float64).eps
    finally:
        ember.set_default_dtype(ember.float32)
    assert ember.finfo(ember.ones(2).half().dtype).max == 65504.0
    assert ember.iinfo(ember.tensor([1]).dtype).bits == 64
    assert ember.finfo(ember.half) == ember.finfo(ember.float16)
    assert ember.finfo(ember.float32) != ember.finfo(ember.float64)
    assert ember.iinfo(ember.long).max == 2 ** 63 - 1


def test_read_only_and_unhashable():
    f = ember.finfo(ember.float32)
    with pytest.raises(AttributeError):
        f.eps = 1.0
    with pytest.raises(TypeError):
        hash(f)


@pytest.mark.parametrize("bad", [ember.int32, ember.bool, ember.uint8])
def test_finfo_rejects_non_float(bad):
    with pytest.raises(EmberTypeError, match=bad.name):
        ember.finfo(bad)


@pytest.mark.parametrize("bad", [ember.float32, ember.bfloat16, ember.bool])
def test_iinfo_rejects_non_int(bad):
    with pytest.raises(EmberTypeError, match=bad.name):
        ember.iinfo(bad)


@pytest.mark.parametrize("bad", ["float32", 3, None])
def test_rejects_non_dtype(bad):
    with pytest.raises(TypeError, match="must be ember.dtype"):
        ember.iinfo(bad)
    if bad is not None:
        with pytest.raises(TypeError, match="must be ember.dtype"):
            ember.finfo(bad)
