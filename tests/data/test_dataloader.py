"""DataLoader: batches, lengths and options as torch.utils.data.DataLoader; shuffling
reproducible from an ember.Generator or ember.manual_seed."""
import numpy as np
import pytest

import ember
from ember.data import (BatchSampler, DataError, DataLoader, Dataset, IterableDataset,
                        SequentialSampler, SubsetRandomSampler, TensorDataset)

try:
    import torch
    import torch.utils.data as tud
except ImportError:
    torch = tud = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


def pair_dataset(n):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    y = np.arange(n, dtype=np.int64) % 4
    return x, y


class Stream(IterableDataset):
    def __init__(self, n, sized=True):
        self.n, self.sized = n, sized

    def __iter__(self):
        return iter({"i": i, "v": float(i)} for i in range(self.n))

    def __len__(self):
        if not self.sized:
            raise TypeError("no len")
        return self.n


def _as_lists(batches):
    return [[b.tolist() if hasattr(b, "tolist") else b for b in batch] for batch in batches]


@needs_torch
@pytest.mark.parametrize("n", [1, 10, 64, 65])
@pytest.mark.parametrize("batch_size", [1, 7, 64])
@pytest.mark.parametrize("drop_last", [False, True])
def test_sequential_batches_match_torch(n, batch_size, drop_last):
    x, y = pair_dataset(n)
    ours = DataLoader(TensorDataset(ember.tensor(x), ember.tensor(y)), batch_size=batch_size,
                      drop_last=drop_last)
    theirs = tud.DataLoader(tud.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)),
                            batch_size=batch_size, drop_last=drop_last)
    assert len(ours) == len(theirs)
    got, want = list(ours), list(theirs)
    assert len(got) == len(want)
    for (gx, gy), (wx, wy) in zip(got, want):
        assert gx.dtype is ember.float32 and gy.dtype is ember.int64
        np.testing.assert_array_equal(gx.numpy(), wx.numpy())
        np.testing.assert_array_equal(gy.numpy(), wy.numpy())


def _epoch_order(loader):
    return [i for batch in loader for i in batch[1].tolist()]


def index_loader(n, **kwargs):
    return DataLoader(TensorDataset(ember.zeros(n, 1), ember.arange(n)), **kwargs)


def test_shuffle_is_a_permutation_reproducible_from_a_generator():
    loader = index_loader(100, batch_size=16, shuffle=True,
                          generator=ember.Generator().manual_seed(0))
    first, second = _epoch_order(loader), _epoch_order(loader)
    assert sorted(first) == sorted(second) == list(range(100))
    assert first != list(range(100)) and first != second
    again = index_loader(100, batch_size=16, shuffle=True,
                         generator=ember.Generator().manual_seed(0))
    assert [_epoch_order(again), _epoch_order(again)] == [first, second]
    other = index_loader(100, batch_size=16, shuffle=True,
                         generator=ember.Generator().manual_seed(1))
    assert _epoch_order(other) != first


def test_shuffle_reproducible_from_manual_seed():
    loader = index_loader(50, batch_size=8, shuffle=True)
    ember.manual_seed(42)
    first = [_epoch_order(loader), _epoch_order(loader)]
    ember.manual_seed(42)
    assert [_epoch_order(loader), _epoch_order(loader)] == first


def test_shuffle_with_drop_last_drops_the_remainder():
    loader = index_loader(10, batch_size=4, shuffle=True, drop_last=True,
                          generator=ember.Generator().manual_seed(3))
    sizes = [len(b[1]) for b in loader]
    assert sizes == [4, 4] and len(loader) == 2
    assert len(set(_epoch_order(loader))) == 8


def test_sampler_and_batch_sampler_options():
    loader = index_loader(10, batch_size=3, sampler=[9, 8, 7, 6, 5])
    assert [b[1].tolist() for b in loader] == [[9, 8, 7], [6, 5]]
    loader = index_loader(10, batch_sampler=[[1, 2], [0], [5, 6, 7]])
    assert [b[1].tolist() for b in loader] == [[1, 2], [0], [5, 6, 7]]
    assert len(loader) == 3 and loader.batch_size is None and loader.drop_last is False
    sampler = SubsetRandomSampler([1, 3, 5], generator=ember.Generator().manual_seed(0))
    assert sorted(_epoch_order(index_loader(10, batch_size=2, sampler=sampler))) == [1, 3, 5]
    loader = index_loader(10, batch_sampler=BatchSampler(SequentialSampler(range(4)), 3, True))
    assert [b[1].tolist() for b in loader] == [[0, 1, 2]]


def test_default_samplers_are_exposed():
    loader = index_loader(5, batch_size=2, shuffle=True)
    assert type(loader.sampler).__name__ == "RandomSampler"
    assert isinstance(loader.batch_sampler, BatchSampler)
    assert isinstance(index_loader(5).sampler, SequentialSampler)


def test_collate_fn_and_len_of_iterator():
    loader = index_loader(5, batch_size=2, collate_fn=lambda items: len(items))
    assert list(loader) == [2, 2, 1]
    it = iter(loader)
    assert len(it) == 3 and next(it) == 2


@needs_torch
def test_batch_size_none_converts_each_sample_like_torch():
    data = [np.array([1.0, 2.0]), (np.int32(3), "a"), {"k": np.zeros(2, np.float32)}]
    ours = list(DataLoader(data, batch_size=None))
    theirs = list(tud.DataLoader(data, batch_size=None))
    assert len(ours) == len(theirs) == 3
    assert ours[0].dtype is ember.float64 and ours[0].tolist() == theirs[0].tolist()
    assert isinstance(ours[1], list) and ours[1][0].item() == 3 and ours[1][1] == "a"
    assert str(theirs[1][0].dtype) == "torch.int32" and ours[1][0].dtype is ember.int32
    assert ours[2]["k"].dtype is ember.float32


@needs_torch
@pytest.mark.parametrize("n, batch_size, drop_last", [(10, 3, False), (10, 3, True),
                                                      (9, 3, True), (0, 2, False)])
def test_iterable_dataset_matches_torch(n, batch_size, drop_last):
    class TorchStream(tud.IterableDataset):
        def __iter__(self):
            return iter({"i": i, "v": float(i)} for i in range(n))

        def __len__(self):
            return n

    ours = DataLoader(Stream(n), batch_size=batch_size, drop_last=drop_last)
    theirs = tud.DataLoader(TorchStream(), batch_size=batch_size, drop_last=drop_last)
    assert len(ours) == len(theirs)
    got, want = list(ours), list(theirs)
    assert [b["i"].tolist() for b in got] == [b["i"].tolist() for b in want]
    assert all(b["v"].dtype is ember.float64 and b["i"].dtype is ember.int64 for b in got)


def test_iterable_dataset_without_batching_and_without_len():
    assert [d["i"] for d in DataLoader(Stream(3), batch_size=None)] == [0, 1, 2]
    loader = DataLoader(Stream(5, sized=False), batch_size=2)
    assert [b["i"].tolist() for b in loader] == [[0, 1], [2, 3], [4]]
    with pytest.raises(TypeError):
        len(loader)
    assert loader.sampler is None and loader.batch_sampler is None


def test_getitems_is_used_for_batches():
    class Batched(Dataset):
        calls = 0

        def __len__(self):
            return 6

        def __getitem__(self, i):
            raise AssertionError("__getitems__ should have been used")

        def __getitems__(self, indices):
            Batched.calls += 1
            return [float(i) for i in indices]

    out = [b.tolist() for b in DataLoader(Batched(), batch_size=4)]
    assert out == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0]] and Batched.calls == 2


def test_worker_options_are_kept():
    loader = index_loader(4, num_workers=2)
    assert loader.num_workers == 2 and loader.prefetch_factor == 2
    assert index_loader(4, num_workers=1, prefetch_factor=5).prefetch_factor == 5
    assert index_loader(4).prefetch_factor is None


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_workers=-1), "num_workers option should be a non-negative integer"),
    (dict(batch_size=0), "batch_size should be a positive integer value, but got "
                         "batch_size=0"),
    (dict(batch_size=2.5), "batch_size=2.5"),
    (dict(shuffle=True, sampler=[0, 1]), "sampler option is mutually exclusive with shuffle"),
    (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler option is mutually exclusive"),
    (dict(batch_sampler=[[0]], drop_last=True), "batch_sampler option is mutually exclusive"),
    (dict(batch_sampler=[[0]], shuffle=True), "batch_sampler option is mutually exclusive"),
    (dict(batch_size=None, drop_last=True), "batch_size=None option disables auto-batching"),
    (dict(timeout=-1), "timeout option should be non-negative"),
    (dict(prefetch_factor=2), "prefetch_factor option could only be specified"),
    (dict(persistent_workers=True), "persistent_workers option needs num_workers > 0"),
    (dict(num_workers=1, prefetch_factor=0), "prefetch_factor option should be a positive"),
])
def test_option_errors(kwargs, message):
    with pytest.raises(DataError, match=message):
        index_loader(4, **kwargs)


@pytest.mark.parametrize("option", ["shuffle", "sampler", "batch_sampler"])
def test_iterable_dataset_refuses_ordering_options(option):
    value = {"shuffle": True, "sampler": [0], "batch_sampler": [[0]]}[option]
    with pytest.raises(DataError, match=f"IterableDataset: expected unspecified {option}"):
        DataLoader(Stream(3), **{option: value})


def test_generator_must_be_an_ember_generator():
    with pytest.raises(ember.EmberTypeError, match="ember.Generator"):
        index_loader(4, shuffle=True, generator=np.random.default_rng(0))
