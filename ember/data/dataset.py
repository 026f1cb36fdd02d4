"""Datasets: the map-style and iterable kinds, and ways to combine and split them."""
from __future__ import annotations

import bisect
import itertools
import math
import numbers
import warnings
from typing import Iterable, Sequence

import numpy as np

from ..errors import EmberIndexError, EmberTypeError, ShapeError
from ..ops.random import Generator, randperm
from ..tensor import Tensor
from .errors import DataError

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset",
           "Subset", "random_split"]


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__(index)`` and usually
    ``__len__()``. ``a + b`` concatenates two datasets.

    >>> class Squares(ember.data.Dataset):
    ...     def __len__(self): return 10
    ...     def __getitem__(self, i): return i * i
    """

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other: "Dataset") -> "ConcatDataset":
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is a stream: subclasses define ``__iter__()``. The DataLoader
    reads it in order (no sampler, no shuffle). ``a + b`` chains two streams.

    >>> class Count(ember.data.IterableDataset):
    ...     def __iter__(self): return iter(range(5))
    """

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __add__(self, other: "IterableDataset") -> "ChainDataset":
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Samples are the rows of tensors that share their first dim: item ``i`` is
    ``(t[i] for t in tensors)`` as a tuple.

    >>> ds = ember.data.TensorDataset(ember.randn(5, 3), ember.arange(5))
    >>> len(ds), ds[0][0].shape
    (5, ember.Size([3]))
    """

    def __init__(self, *tensors: Tensor):
        for t in tensors:
            if not isinstance(t, Tensor):
                raise EmberTypeError(f"TensorDataset: expected tensors, got "
                                     f"{type(t).__name__}")
            if t.ndim == 0:
                raise ShapeError("TensorDataset: tensors need a first dim to index, got a "
                                 "0-d tensor")
        sizes = [t.shape[0] for t in tensors]
        if len(set(sizes)) > 1:
            shapes = ", ".join(str(tuple(t.shape)) for t in tensors)
            raise ShapeError(f"TensorDataset: size mismatch between tensors: all must have "
                             f"the same size in dim 0, got sizes {sizes} (shapes {shapes})")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __getitems__(self, indices: list) -> list:
        """The samples at ``indices`` (what the DataLoader reads for a batch): one
        gather per tensor instead of an indexing op per sample and tensor."""
        if not self.tensors or any(t.requires_grad for t in self.tensors) or \
                any(type(i) is not int for i in indices):
            return [self[i] for i in indices]
        n = len(self)
        for i in indices:
            if not -n <= i < n:
                raise EmberIndexError(f"TensorDataset: index {i} is out of range for "
                                      f"{n} samples")
        index = np.asarray(indices, dtype=np.int64)
        rows = [(t._data[t._device.backend.asarray(index)], t._device) for t in self.tensors]
        return [tuple(Tensor._make(data[k], device) for data, device in rows)
                for k in range(len(indices))]

    def __len__(self) -> int:
        return self.tensors[0].shape[0] if self.tensors else 0


class ConcatDataset(Dataset):
    """The datasets one after another, as one map-style dataset.

    >>> len(ember.data.ConcatDataset([range(3), range(4)]))
    7
    """

    def __init__(self, datasets: Iterable[Dataset]):
        self.datasets = list(datasets)
        if not self.datasets:
            raise DataError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise EmberTypeError("ConcatDataset: does not support IterableDataset; "
                                     "use ChainDataset to chain streams")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int):
        n = len(self)
        if idx < -n or idx >= n:
            raise EmberIndexError(f"ConcatDataset: index {idx} is out of range for a "
                                  f"dataset of length {n}")
        if idx < 0:
            idx += n
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][idx - start]


class ChainDataset(IterableDataset):
    """Iterable datasets read one after another.

    >>> list(ember.data.ChainDataset([stream_a, stream_b]))  # doctest: +SKIP
    """

    def __init__(self, datasets: Iterable[IterableDataset]):
        self.datasets = list(datasets)

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise EmberTypeError(f"ChainDataset: only IterableDatasets can be chained, "
                                     f"got {type(d).__name__}")
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)


class Subset(Dataset):
    """The items of ``dataset`` at ``indices``, in that order.

    >>> ember.data.Subset(range(10), [7, 2])[1]
    2
    """

    def __init__(self, dataset: Dataset, indices: Sequence[int]):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list) -> list:
        # The DataLoader fetches a batch through __getitems__ when a dataset has one.
        inner = [self.indices[i] for i in indices]
        getitems = getattr(self.dataset, "__getitems__", None)
        if callable(getitems):
            return getitems(inner)
        return [self.dataset[i] for i in inner]

    def __len__(self) -> int:
        return len(self.indices)


def _split_lengths(n: int, lengths: Sequence) -> list[int]:
    """Integer lengths as given; fractions (any non-integer entry) turned into lengths
    that add up to ``n``, the remainder spread one at a time from the first split."""
    if all(isinstance(x, numbers.Integral) for x in lengths):
        return [int(x) for x in lengths]
    for i, frac in enumerate(lengths):
        if not 0 <= frac <= 1:
            raise DataError(f"random_split: fraction at index {i} is not between 0 and 1: "
                            f"{frac}")
    if not math.isclose(sum(lengths), 1.0):
        raise DataError(f"random_split: fractions must sum to 1, got {list(lengths)} "
                        f"(sum {sum(lengths)})")
    out = [int(math.floor(n * frac)) for frac in lengths]
    for i in range(n - sum(out)):
        out[i % len(out)] += 1
    for i, length in enumerate(out):
        if length == 0:
            warnings.warn(f"random_split: length of split at index {i} is 0; this split "
                          f"will be empty", stacklevel=3)
    return out


def random_split(dataset: Dataset, lengths: Sequence, generator: Generator | None = None
                 ) -> list[Subset]:
    """Split ``dataset`` into non-overlapping random subsets of the given ``lengths``
    (integers adding up to ``len(dataset)``, or fractions adding up to 1).

    Integer lengths are taken as counts and anything else as fractions (PyTorch also
    reads integers that sum to 1, such as ``[1, 0]``, as fractions; ember does not).
    The permutation comes from ``generator``, or the default generator.

    >>> train, val = ember.data.random_split(range(10), [0.8, 0.2],
    ...                                      generator=ember.Generator().manual_seed(0))
    >>> len(train), len(val)
    (8, 2)
    """
    n = len(dataset)
    sizes = _split_lengths(n, lengths)
    if any(s < 0 for s in sizes):
        raise DataError(f"random_split: lengths must be non-negative, got {sizes}")
    if sum(sizes) != n:
        raise DataError(f"random_split: sum of input lengths {sizes} is {sum(sizes)}, which "
                        f"does not equal the length of the dataset ({n})")
    indices = randperm(n, generator=generator).tolist()
    return [Subset(dataset, indices[end - size:end])
            for size, end in zip(sizes, itertools.accumulate(sizes))]
