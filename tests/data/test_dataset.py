"""Datasets, Subset, ConcatDataset and random_split, against torch.utils.data."""
import numpy as np
import pytest

import ember
from ember.data import (ChainDataset, ConcatDataset, DataError, Dataset, IterableDataset,
                        Subset, TensorDataset, random_split)

try:
    import torch
    import torch.utils.data as tud
except ImportError:
    torch = tud = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return i * i


class Stream(IterableDataset):
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        return iter(self.items)


def test_base_classes_need_their_methods():
    with pytest.raises(NotImplementedError, match="__getitem__"):
        Dataset()[0]
    with pytest.raises(NotImplementedError, match="__iter__"):
        iter(IterableDataset())


def test_tensor_dataset():
    x, y = ember.arange(12.0).reshape(4, 3), ember.tensor([3, 1, 4, 1])
    ds = TensorDataset(x, y)
    assert len(ds) == 4
    xi, yi = ds[2]
    assert xi.tolist() == [6.0, 7.0, 8.0] and yi.item() == 4
    assert isinstance(ds[-1], tuple) and ds[-1][1].item() == 1
    assert len(TensorDataset()) == 0


def test_tensor_dataset_errors():
    with pytest.raises(ember.ShapeError, match=r"sizes \[4, 3\] \(shapes \(4, 2\), \(3,\)\)"):
        TensorDataset(ember.zeros(4, 2), ember.zeros(3))
    with pytest.raises(ember.ShapeError, match="0-d"):
        TensorDataset(ember.tensor(1.0))
    with pytest.raises(ember.EmberTypeError, match="list"):
        TensorDataset([1, 2])


@needs_torch
def test_concat_dataset_against_torch():
    parts = [list(range(3)), list(range(10, 15)), [], list(range(20, 22))]
    ours, theirs = ConcatDataset(parts), tud.ConcatDataset(parts)
    assert ours.cumulative_sizes == theirs.cumulative_sizes
    assert len(ours) == len(theirs) == 10
    assert [ours[i] for i in range(-10, 10)] == [theirs[i] for i in range(-10, 10)]


def test_concat_dataset_errors():
    ds = ConcatDataset([range(3), range(2)])
    for bad in (5, -6):
        with pytest.raises(ember.EmberIndexError, match=f"index {bad} is out of range .* 5"):
            ds[bad]
    with pytest.raises(DataError, match="empty"):
        ConcatDataset([])
    with pytest.raises(ember.EmberTypeError, match="IterableDataset"):
        ConcatDataset([range(3), Stream([1])])


def test_add_concatenates_and_chains():
    both = Squares(3) + Squares(2)
    assert isinstance(both, ConcatDataset) and [both[i] for i in range(5)] == [0, 1, 4, 0, 1]
    chained = Stream([1, 2]) + Stream([3])
    assert isinstance(chained, ChainDataset) and list(chained) == [1, 2, 3]
    with pytest.raises(ember.EmberTypeError, match="only IterableDatasets"):
        list(ChainDataset([Stream([1]), [2, 3]]))


def test_chain_dataset_len():
    class Sized(Stream):
        def __len__(self):
            return len(self.items)

    assert len(ChainDataset([Sized([1, 2]), Sized([3])])) == 3


def test_subset():
    sub = Subset(Squares(10), [7, 2, 2])
    assert len(sub) == 3
    assert [sub[i] for i in range(3)] == [49, 4, 4]
    assert sub.__getitems__([0, 1]) == [49, 4]

    class Batched(Squares):
        def __getitems__(self, indices):
            return ["batch", *indices]

    assert Subset(Batched(10), [5, 6]).__getitems__([1, 0]) == ["batch", 6, 5]
    lists = Subset([[0, 1], [2, 3], [4, 5]], [2, 0])
    assert lists[1] == [0, 1]


@needs_torch
@pytest.mark.parametrize("n, fractions", [(10, [0.8, 0.2]), (7, [0.5, 0.5]),
                                          (11, [0.3, 0.3, 0.4]), (3, [0.1, 0.9]),
                                          (100, [1 / 3, 1 / 3, 1 / 3])])
def test_random_split_fraction_lengths_match_torch(n, fractions):
    ours = random_split(range(n), fractions, generator=ember.Generator().manual_seed(0))
    theirs = tud.random_split(range(n), fractions, generator=torch.Generator().manual_seed(0))
    assert [len(s) for s in ours] == [len(s) for s in theirs]


def test_random_split_is_a_partition_and_reproducible():
    splits = random_split(range(20), [5, 0, 15], generator=ember.Generator().manual_seed(3))
    assert [len(s) for s in splits] == [5, 0, 15]
    items = [x for s in splits for x in s]
    assert sorted(items) == list(range(20)) and items != list(range(20))
    again = random_split(range(20), [5, 0, 15], generator=ember.Generator().manual_seed(3))
    assert [list(s) for s in again] == [list(s) for s in splits]
    other = random_split(range(20), [5, 0, 15], generator=ember.Generator().manual_seed(4))
    assert [list(s) for s in other] != [list(s) for s in splits]
    ember.manual_seed(9)
    first = [list(s) for s in random_split(range(20), [10, 10])]
    ember.manual_seed(9)
    assert [list(s) for s in random_split(range(20), [10, 10])] == first


def test_random_split_errors():
    with pytest.raises(DataError, match=r"sum of input lengths \[3, 3\] is 6.*length of the "
                                        r"dataset \(10\)"):
        random_split(range(10), [3, 3])
    with pytest.raises(DataError, match="fraction at index 1 is not between 0 and 1"):
        random_split(range(10), [0.5, 1.5])
    with pytest.raises(DataError, match="fractions must sum to 1"):
        random_split(range(10), [0.5, 0.4])
    with pytest.raises(DataError, match="non-negative"):
        random_split(range(10), [12, -2])
    with pytest.warns(UserWarning) as record:
        sizes = [len(s) for s in random_split(range(2), [0.9, 0.05, 0.05])]
    assert sizes == [2, 0, 0]
    assert ["index 1 is 0" in str(w.message) for w in record] == [True, False]


def test_data_error_is_a_value_error():
    with pytest.raises(ValueError):
        random_split(range(10), [3, 3])
    assert issubclass(DataError, ember.EmberError)


def test_numpy_backed_dataset_through_subset():
    data = np.arange(10) * 2
    sub = Subset(data, [9, 0])
    assert sub[0] == 18 and sub[1] == 0


def test_tensor_dataset_getitems_equals_one_by_one():
    ds = ember.data.TensorDataset(ember.randn(10, 3), ember.arange(10))
    batch = ds.__getitems__([7, 0, -1, 7])
    for got, i in zip(batch, [7, 0, -1, 7]):
        want = ds[i]
        assert len(got) == 2
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
    with pytest.raises(ember.EmberIndexError, match="index 10 is out of range for 10"):
        ds.__getitems__([1, 10])
    # a loader batch goes through it: the same batch as indexing one by one
    x, y = next(iter(ember.data.DataLoader(ds, batch_size=4)))
    np.testing.assert_array_equal(x.numpy(), ds.tensors[0].numpy()[:4])
    np.testing.assert_array_equal(y.numpy(), [0, 1, 2, 3])
