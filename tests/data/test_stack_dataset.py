"""data.StackDataset against torch.utils.data.StackDataset."""
import numpy as np
import pytest

import ember
from ember.data import DataLoader, StackDataset, TensorDataset


class Plain(ember.data.Dataset):
    """A dataset without __getitems__ (samples read one at a time)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i * 10


class Batched(Plain):
    calls = 0

    def __getitems__(self, indices):
        Batched.calls += 1
        return [i * 100 for i in indices]


class Short(Plain):
    def __getitems__(self, indices):
        return [0]


def test_tuple_and_dict_samples():
    a, b = ember.arange(5), Plain(5)
    ds = StackDataset(a, b)
    assert len(ds) == 5
    x, y = ds[3]
    assert x.item() == 3 and y == 30
    named = StackDataset(first=a, second=b)
    sample = named[2]
    assert list(sample) == ["first", "second"] and sample["second"] == 20
    assert ds.datasets == (a, b) and named.datasets == {"first": a, "second": b}


def test_getitems_batches_through_the_inner_datasets():
    Batched.calls = 0
    ds = StackDataset(Plain(6), Batched(6))
    assert ds.__getitems__([1, 4]) == [(10, 100), (40, 400)]
    assert Batched.calls == 1
    named = StackDataset(p=Plain(6), b=Batched(6))
    assert named.__getitems__([0, 5]) == [{"p": 0, "b": 0}, {"p": 50, "b": 500}]
    with pytest.raises(ValueError, match="output size mismatch. Expected 2, got 1"):
        StackDataset(Short(3)).__getitems__([0, 1])


def test_errors_match_torch():
    for bad in (lambda: StackDataset(), lambda: StackDataset(Plain(2), x=Plain(2)),
                lambda: StackDataset(Plain(2), Plain(3)), lambda: StackDataset(x=Plain(2),
                                                                              y=Plain(1))):
        with pytest.raises(ValueError):
            bad()


def test_dataloader_batches_match_torch():
    torch = pytest.importorskip("torch")
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    y = np.arange(6)
    ds = StackDataset(x=TensorDataset(ember.tensor(x)), y=ember.tensor(y))
    tds = torch.utils.data.StackDataset(x=torch.utils.data.TensorDataset(torch.tensor(x)),
                                        y=torch.tensor(y))
    got = list(DataLoader(ds, batch_size=4))
    want = list(torch.utils.data.DataLoader(tds, batch_size=4))
    assert len(got) == len(want) == 2
    for g, w in zip(got, want):
        assert list(g) == list(w) == ["x", "y"]
        np.testing.assert_array_equal(g["x"][0].numpy(), w["x"][0].numpy())
        np.testing.assert_array_equal(g["y"].numpy(), w["y"].numpy())
    t_sample, e_sample = tds.__getitems__([1, 2]), ds.__getitems__([1, 2])
    assert [sorted(s) for s in t_sample] == [sorted(s) for s in e_sample]
