"""Samplers: PyTorch's semantics (orders, lengths, batching), reproducible from a seed."""
import collections

import pytest

import ember
from ember.data import (BatchSampler, DataError, RandomSampler, Sampler, SequentialSampler,
                        SubsetRandomSampler, WeightedRandomSampler)

try:
    import torch.utils.data as tud
except ImportError:
    tud = None

needs_torch = pytest.mark.skipif(tud is None, reason="PyTorch is not installed")


def gen(seed):
    return ember.Generator().manual_seed(seed)


def test_base_sampler_needs_iter():
    with pytest.raises(NotImplementedError, match="__iter__"):
        iter(Sampler())


def test_sequential_sampler():
    s = SequentialSampler(range(5))
    assert list(s) == [0, 1, 2, 3, 4] and len(s) == 5
    assert list(SequentialSampler([])) == []


def test_random_sampler_is_a_fresh_permutation_each_pass():
    s = RandomSampler(range(50), generator=gen(0))
    first, second = list(s), list(s)
    assert sorted(first) == sorted(second) == list(range(50))
    assert first != second and first != list(range(50))
    assert len(s) == 50


def test_random_sampler_reproducible_from_a_generator():
    a = RandomSampler(range(30), generator=gen(7))
    b = RandomSampler(range(30), generator=gen(7))
    assert [list(a) for _ in range(3)] == [list(b) for _ in range(3)]
    assert list(RandomSampler(range(30), generator=gen(8))) != list(
        RandomSampler(range(30), generator=gen(7)))


def test_random_sampler_reproducible_from_manual_seed():
    s = RandomSampler(range(30))
    ember.manual_seed(123)
    epochs = [list(s), list(s)]
    ember.manual_seed(123)
    assert [list(s), list(s)] == epochs
    assert epochs[0] != epochs[1]


def test_random_sampler_num_samples_without_replacement():
    s = RandomSampler(range(4), num_samples=10, generator=gen(1))
    order = list(s)
    assert len(order) == len(s) == 10
    assert sorted(order[:4]) == sorted(order[4:8]) == [0, 1, 2, 3]
    assert len(set(order[8:])) == 2
    fewer = list(RandomSampler(range(6), num_samples=3, generator=gen(2)))
    assert len(set(fewer)) == 3 and set(fewer) <= set(range(6))


def test_random_sampler_with_replacement():
    s = RandomSampler(range(5), replacement=True, num_samples=1000, generator=gen(3))
    order = list(s)
    assert len(order) == len(s) == 1000
    counts = collections.Counter(order)
    assert set(counts) == set(range(5))
    assert all(150 < c < 250 for c in counts.values())
    small = list(RandomSampler(range(5), replacement=True, num_samples=7, generator=gen(3)))
    assert len(small) == 7 and all(0 <= i < 5 for i in small)


def test_random_sampler_errors():
    with pytest.raises(DataError, match="num_samples should be a positive integer value, but "
                                        "got num_samples=0"):
        RandomSampler(range(0))
    with pytest.raises(DataError, match="num_samples=-1"):
        RandomSampler(range(3), num_samples=-1)
    with pytest.raises(ember.EmberTypeError, match="replacement should be a boolean"):
        RandomSampler(range(3), replacement=1)
    with pytest.raises(ember.EmberTypeError, match="ember.Generator"):
        RandomSampler(range(3), generator=123)
    with pytest.raises(DataError, match="empty dataset"):
        list(RandomSampler([], num_samples=3))


def test_subset_random_sampler():
    indices = [10, 20, 30, 40, 50, 60]
    s = SubsetRandomSampler(indices, generator=gen(5))
    order = list(s)
    assert sorted(order) == indices and len(s) == 6
    assert list(SubsetRandomSampler(indices, generator=gen(5))) == order
    ember.manual_seed(0)
    a = list(SubsetRandomSampler(indices))
    ember.manual_seed(0)
    assert list(SubsetRandomSampler(indices)) == a


def test_weighted_random_sampler():
    s = WeightedRandomSampler([0.0, 1.0, 3.0, 0.0], num_samples=4000, generator=gen(0))
    counts = collections.Counter(s)
    assert set(counts) == {1, 2} and len(s) == 4000
    assert 0.7 < counts[2] / 4000 < 0.8
    unique = list(WeightedRandomSampler(ember.tensor([1.0, 2.0, 3.0, 4.0]), 4,
                                        replacement=False, generator=gen(1)))
    assert sorted(unique) == [0, 1, 2, 3]
    assert list(WeightedRandomSampler([1, 2, 3], 5, generator=gen(2))) == list(
        WeightedRandomSampler([1, 2, 3], 5, generator=gen(2)))


def test_weighted_random_sampler_errors():
    with pytest.raises(ember.ShapeError, match=r"1-D .* shape \(2, 2\)"):
        WeightedRandomSampler([[1.0, 2.0], [3.0, 4.0]], 2)
    with pytest.raises(DataError, match="num_samples=0"):
        WeightedRandomSampler([1.0], 0)
    with pytest.raises(ember.EmberTypeError, match="replacement"):
        WeightedRandomSampler([1.0], 1, replacement="yes")
    with pytest.raises(ember.EmberError, match="without replacement"):
        list(WeightedRandomSampler([1.0, 0.0], 2, replacement=False))
    with pytest.raises(ember.EmberError, match="non-negative"):
        list(WeightedRandomSampler([1.0, -1.0], 2))


@needs_torch
@pytest.mark.parametrize("n", [0, 1, 9, 10, 11])
@pytest.mark.parametrize("batch_size", [1, 3, 10])
@pytest.mark.parametrize("drop_last", [False, True])
def test_batch_sampler_matches_torch(n, batch_size, drop_last):
    ours = BatchSampler(SequentialSampler(range(n)), batch_size, drop_last)
    theirs = tud.BatchSampler(tud.SequentialSampler(range(n)), batch_size, drop_last)
    assert list(ours) == list(theirs)
    assert len(ours) == len(theirs)


def test_batch_sampler_over_any_iterable_and_errors():
    assert list(BatchSampler([5, 3, 1, 4], 3, False)) == [[5, 3, 1], [4]]
    for bad in (0, -2, 1.5, True):
        with pytest.raises(DataError, match="batch_size should be a positive integer"):
            BatchSampler(range(3), bad, False)
    with pytest.raises(DataError, match="drop_last should be a boolean"):
        BatchSampler(range(3), 2, 0)
