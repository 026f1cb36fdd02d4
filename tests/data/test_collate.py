"""default_collate / default_convert against torch.utils.data's, structure and dtypes."""
import collections

import numpy as np
import pytest

import ember
from ember.data import default_collate, default_convert

torch = pytest.importorskip("torch")
tud = pytest.importorskip("torch.utils.data")

Point = collections.namedtuple("Point", ["x", "y"])


def to_torch(obj):
    """The same sample built from torch tensors (ember tensors swapped for torch ones)."""
    if isinstance(obj, ember.Tensor):
        return torch.from_numpy(obj.numpy().copy())
    if isinstance(obj, dict):
        return type(obj)((k, to_torch(v)) for k, v in obj.items())
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(to_torch(v) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_torch(v) for v in obj)
    return obj


def assert_same(ours, theirs):
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, ember.Tensor), type(ours)
        assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
        assert tuple(ours.shape) == tuple(theirs.shape)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
        return
    assert type(ours) is type(theirs), (type(ours), type(theirs))
    if isinstance(theirs, dict):
        assert list(ours) == list(theirs)
        for k in theirs:
            assert_same(ours[k], theirs[k])
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert_same(a, b)
    else:
        assert ours == theirs


class MyList(list):
    pass


BATCHES = {
    "float32 tensors": [ember.tensor([1.0, 2.0]), ember.tensor([3.0, 4.0])],
    "int64 tensors": [ember.tensor([[1, 2]]), ember.tensor([[3, 4]])],
    "bool 0-d tensors": [ember.tensor(True), ember.tensor(False)],
    "uint8 tensors": [ember.tensor([1, 2], dtype=ember.uint8)] * 3,
    "empty tensors": [ember.zeros(0, 3), ember.zeros(0, 3)],
    "float64 arrays": [np.array([1.0, 2.0]), np.array([3.0, 4.0])],
    "int32 arrays": [np.arange(4, dtype=np.int32).reshape(2, 2)] * 2,
    "bool arrays": [np.array([True, False])] * 2,
    "numpy float32 scalars": [np.float32(1.5), np.float32(2.5)],
    "numpy int16 scalars": [np.int16(1), np.int16(-3)],
    "numpy bool scalars": [np.bool_(True), np.bool_(False)],
    "numpy float64 scalars": [np.float64(0.25), np.float64(1.0)],
    "python floats": [0.5, 1.5, -2.0],
    "python ints": [1, 2, 3],
    "python bools": [True, False],
    "ints then a float": [1, 2.5],
    "strings": ["a", "bc"],
    "bytes": [b"a", b"bc"],
    "tuples": [(ember.tensor([1.0]), 0), (ember.tensor([2.0]), 1)],
    "lists": [[1, 2.0, "a"], [3, 4.0, "b"]],  # the string column comes back a tuple
    "list subclass": [MyList([1, 2]), MyList([3, 4])],
    "dicts": [{"x": ember.tensor([1.0]), "y": 0, "name": "a"},
              {"x": ember.tensor([2.0]), "y": 1, "name": "b"}],
    "ordered dicts": [collections.OrderedDict(b=1.0, a=2), collections.OrderedDict(b=3.0, a=4)],
    "namedtuples": [Point(ember.tensor(1.0), 2), Point(ember.tensor(3.0), 4)],
    "nested": [{"img": (np.zeros((2, 2), np.float32), [1, {"k": 2.0}]), "meta": {"id": 7}},
               {"img": (np.ones((2, 2), np.float32), [3, {"k": 4.0}]), "meta": {"id": 8}}],
}


@pytest.mark.parametrize("name", list(BATCHES))
def test_default_collate_matches_torch(name):
    batch = BATCHES[name]
    assert_same(default_collate(batch), tud.default_collate(to_torch(batch)))


@pytest.mark.parametrize("name", list(BATCHES))
def test_default_convert_matches_torch(name):
    sample = BATCHES[name][0]
    assert_same(default_convert(sample), tud.default_convert(to_torch(sample)))


def test_default_convert_leaves_text_arrays_and_objects():
    text = np.array(["a", "b"])
    assert default_convert(text) is text
    marker = object()
    assert default_convert(marker) is marker


def test_collate_mixed_dtypes_promote_and_grads_flow():
    a = ember.tensor([1.0, 2.0], requires_grad=True)
    b = ember.tensor([3.0, 4.0], dtype=ember.float64)
    out = default_collate([a, b])
    theirs = tud.default_collate([torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0],
                                                                        dtype=torch.float64)])
    assert out.dtype.name == str(theirs.dtype).removeprefix("torch.")
    out.sum().backward()
    assert a.grad.tolist() == [1.0, 1.0]


def test_collate_result_owns_its_memory():
    items = [ember.zeros(2), ember.ones(2)]
    out = default_collate(items)
    out.add_(5.0)
    assert items[0].tolist() == [0.0, 0.0]


def test_collate_errors():
    with pytest.raises(ember.ShapeError, match=r"same shape .* \(2,\) at entry 0 and \(3,\) at "
                                               r"entry 1"):
        default_collate([ember.zeros(2), ember.zeros(3)])
    with pytest.raises(ember.EmberError, match=r"equal size, got sizes \[2, 1\]"):
        default_collate([[1, 2], [3]])
    with pytest.raises(ember.EmberTypeError, match="found <class 'object'>"):
        default_collate([object(), object()])
    with pytest.raises(ember.EmberTypeError, match="found <U1"):
        default_collate([np.array(["a"]), np.array(["b"])])
    with pytest.raises(ember.EmberTypeError, match="entry 0 is Tensor and entry 1 is int"):
        default_collate([ember.zeros(2), 3])
    with pytest.raises(ember.EmberTypeError, match="entry 0 is int and entry 2 is str"):
        default_collate([1, 2, "a"])
    with pytest.raises(ember.EmberTypeError, match=r"same keys; entry 0 has \['a'\] and entry "
                                                   r"1 has \['b'\]"):
        default_collate([{"a": 1}, {"b": 2}])
    with pytest.raises(ember.EmberError, match="empty batch"):
        default_collate([])
