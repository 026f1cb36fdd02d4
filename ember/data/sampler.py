"""Samplers: the order in which a DataLoader reads a map-style dataset's indices."""
from __future__ import annotations

import numbers
from typing import Iterator, Sequence

from .. import dtypes as dt
from ..errors import EmberTypeError, ShapeError
from ..ops.creation import as_tensor
from ..ops.random import Generator, multinomial, randint, randperm
from .errors import DataError

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler"]

_SEED_HIGH = 2 ** 63 - 1


class Sampler:
    """Base class: subclasses define ``__iter__`` (the indices) and usually ``__len__``."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self) -> Iterator:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


def _check_positive_int(owner: str, name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise DataError(f"{owner}: {name} should be a positive integer value, but got "
                        f"{name}={value!r}")


def _check_bool(owner: str, name: str, value) -> None:
    if not isinstance(value, bool):
        raise EmberTypeError(f"{owner}: {name} should be a boolean value, but got "
                             f"{name}={value!r}")


def _check_generator(owner: str, generator) -> None:
    if generator is not None and not isinstance(generator, Generator):
        raise EmberTypeError(f"{owner}: generator must be an ember.Generator or None, got "
                             f"{type(generator).__name__}")


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1`` in order.

    >>> list(ember.data.SequentialSampler(range(3)))
    [0, 1, 2]
    """

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """Indices in random order: a fresh permutation each pass, or, with
    ``replacement=True``, ``num_samples`` independent draws.

    Args:
        data_source: the dataset (only its length is used).
        replacement: draw with replacement.
        num_samples: how many indices a pass yields (default ``len(data_source)``);
            without replacement, more than the length repeats whole permutations.
        generator: the :class:`ember.Generator` to draw from. Without one, each pass
            draws a seed from the default generator, so ``ember.manual_seed`` makes the
            sequence of passes repeat.

    >>> sorted(ember.data.RandomSampler(range(4)))
    [0, 1, 2, 3]
    """

    def __init__(self, data_source, replacement: bool = False, num_samples: int | None = None,
                 generator: Generator | None = None):
        _check_bool("RandomSampler", "replacement", replacement)
        _check_generator("RandomSampler", generator)
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        _check_positive_int("RandomSampler", "num_samples", self.num_samples)

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        if n == 0:
            raise DataError("RandomSampler: can't draw indices from an empty dataset")
        generator = self.generator
        if generator is None:
            seed = int(randint(0, _SEED_HIGH, ()).item())
            generator = Generator().manual_seed(seed)
        if self.replacement:
            full, rest = divmod(self.num_samples, 32)
            for _ in range(full):
                yield from randint(0, n, (32,), generator=generator).tolist()
            if rest:
                yield from randint(0, n, (rest,), generator=generator).tolist()
        else:
            full, rest = divmod(self.num_samples, n)
            for _ in range(full):
                yield from randperm(n, generator=generator).tolist()
            if rest:
                yield from randperm(n, generator=generator).tolist()[:rest]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a random order (a fresh permutation each pass).

    >>> sorted(ember.data.SubsetRandomSampler([5, 7, 9]))
    [5, 7, 9]
    """

    def __init__(self, indices: Sequence[int], generator: Generator | None = None):
        _check_generator("SubsetRandomSampler", generator)
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator:
        for i in randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices in ``[0, len(weights))``, index ``i`` drawn with
    probability proportional to ``weights[i]``.

    Args:
        weights: non-negative weights, one per index (a 1-D sequence or tensor; they
            need not sum to 1).
        num_samples: how many indices a pass yields.
        replacement: draw with replacement; without it no index repeats within a pass.
        generator: the :class:`ember.Generator` to draw from (default: the default one).

    >>> list(ember.data.WeightedRandomSampler([0.0, 1.0], 3))
    [1, 1, 1]
    """

    def __init__(self, weights, num_samples: int, replacement: bool = True,
                 generator: Generator | None = None):
        _check_positive_int("WeightedRandomSampler", "num_samples", num_samples)
        _check_bool("WeightedRandomSampler", "replacement", replacement)
        _check_generator("WeightedRandomSampler", generator)
        weights = as_tensor(weights, dtype=dt.float64)
        if weights.ndim != 1:
            raise ShapeError(f"WeightedRandomSampler: weights should be a 1-D sequence but "
                             f"given weights have shape {tuple(weights.shape)}")
        self.weights = weights
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        draws = multinomial(self.weights, self.num_samples, self.replacement,
                            generator=self.generator)
        return iter(draws.tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size``; the last, shorter
    list is kept unless ``drop_last``.

    >>> list(ember.data.BatchSampler(range(5), batch_size=2, drop_last=False))
    [[0, 1], [2, 3], [4]]
    """

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        _check_positive_int("BatchSampler", "batch_size", batch_size)
        if not isinstance(drop_last, bool):
            raise DataError(f"BatchSampler: drop_last should be a boolean value, but got "
                            f"drop_last={drop_last!r}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list]:
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return -(-len(self.sampler) // self.batch_size)
