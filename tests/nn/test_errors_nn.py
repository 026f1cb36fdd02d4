"""Issue 3's bad inputs, each a clear ember error naming the layer or op and the shapes."""
import os
import pickle

import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.serialization import CheckpointError


@pytest.mark.parametrize("call,error,message", [
    (lambda: nn.Conv2d(3, 8, 3)(ember.randn(2, 4, 8, 8)), ember.ShapeError,
     r"Conv2d: expected input with 3 channels.*\(2, 4, 8, 8\)"),
    (lambda: nn.Conv2d(3, 8, 3)(ember.randn(8, 8)), ember.ShapeError,
     r"Conv2d: expected a 3-D \(unbatched\) or 4-D \(batched\) input.*\(8, 8\)"),
    (lambda: nn.Linear(4, 2)(ember.randn(3, 5)), ember.ShapeError,
     r"Linear: expected input with 4 features.*\(3, 5\)"),
    (lambda: nn.LSTM(10, 5)(ember.randn(4, 2, 7)), ember.ShapeError,
     r"LSTM: input.size\(-1\) must be equal to input_size. Expected 10, got 7"),
    (lambda: nn.MultiheadAttention(8, 2)(*[ember.randn(3, 2, 6)] * 3), ember.ShapeError,
     r"MultiheadAttention: .*embedding dimension of 8, but got 6"),
    (lambda: F.cross_entropy(ember.randn(4, 5), ember.tensor([0, 1, 7, 2])), IndexError,
     r"cross_entropy: target 7 is out of bounds for 5 classes"),
    (lambda: F.cross_entropy(ember.randn(4, 5), ember.tensor([0.0, 1, 2, 3])), TypeError,
     r"cross_entropy: expected class-index targets of dtype int64"),
    (lambda: ember.optim.SGD([1, 2], lr=0.1), TypeError, r"SGD: params must be tensors, got int"),
    (lambda: ember.optim.SGD([], lr=0.1), ValueError, r"SGD: got an empty parameter list"),
    (lambda: ember.optim.Adam([ember.zeros(2, requires_grad=True)], lr=-1), ValueError,
     r"Adam: invalid learning rate -1"),
])
def test_bad_input_is_a_clear_ember_error(call, error, message):
    with pytest.raises(error, match=message) as info:
        call()
    assert isinstance(info.value, ember.EmberError)


def test_state_dict_of_another_architecture_leaves_the_module_unchanged():
    model = nn.Linear(4, 2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ember.EmberError, match="size mismatch for weight"):
        model.load_state_dict(nn.Linear(3, 2).state_dict())
    for key, value in model.state_dict().items():
        assert ember.equal(value, before[key])


def test_pickle_and_truncated_checkpoints_are_refused(tmp_path):
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))
    hostile = tmp_path / "hostile.pt"
    hostile.write_bytes(pickle.dumps(Payload()))
    with pytest.raises(CheckpointError, match="pickle"):
        ember.load(str(hostile))
    assert not marker.exists()

    path = tmp_path / "model.safetensors"
    ember.save(nn.Linear(4, 2).state_dict(), str(path))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated"):
        ember.load(str(path))
    assert os.path.getsize(path) == len(data) // 2
