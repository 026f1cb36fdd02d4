"""The DataLoader: batches of samples from a dataset, in the order a sampler gives.

Single-process for now: worker processes (``num_workers > 0``) come with issue 5.
"""
from __future__ import annotations

import itertools
import numbers
from typing import Callable, Iterator

from ..errors import EmberTypeError
from ..ops.random import Generator
from .collate import default_collate, default_convert
from .dataset import IterableDataset
from .errors import DataError
from .sampler import BatchSampler, RandomSampler, SequentialSampler, Sampler

__all__ = ["DataLoader"]


class DataLoader:
    """Iterate over ``dataset`` in batches.

    Args:
        dataset: a map-style :class:`Dataset` (anything with ``__getitem__`` and
            ``__len__``) or an :class:`IterableDataset`.
        batch_size: samples per batch; ``None`` turns batching off (each sample is
            passed through ``collate_fn``, by default :func:`default_convert`).
        shuffle: a fresh random order each epoch (a :class:`RandomSampler`).
        sampler: the order of indices (excludes ``shuffle``).
        batch_sampler: yields whole lists of indices (excludes ``batch_size``,
            ``shuffle``, ``sampler`` and ``drop_last``).
        num_workers: only 0 for now (loading in this process).
        collate_fn: merges a list of samples into a batch (default
            :func:`default_collate`).
        pin_memory: accepted for compatibility; CPU tensors need no pinning.
        drop_last: drop the last batch when it is smaller than ``batch_size``.
        generator: the :class:`ember.Generator` that shuffling draws from; without one,
            each epoch draws a seed from the default generator (``ember.manual_seed``
            makes the epochs repeat).

    For an IterableDataset, ``sampler`` and ``batch_sampler`` are None: the stream is
    read in order. ``timeout``, ``worker_init_fn``, ``multiprocessing_context``,
    ``prefetch_factor``, ``persistent_workers``, ``pin_memory_device`` and ``in_order``
    concern worker processes and are checked as PyTorch checks them.

    >>> ds = ember.data.TensorDataset(ember.randn(10, 3), ember.arange(10))
    >>> x, y = next(iter(ember.data.DataLoader(ds, batch_size=4, shuffle=True)))
    >>> x.shape, y.shape
    (ember.Size([4, 3]), ember.Size([4]))
    """

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Sampler | None = None, batch_sampler=None, num_workers: int = 0,
                 collate_fn: Callable | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn=None,
                 multiprocessing_context=None, generator: Generator | None = None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True):
        _check_workers(num_workers, timeout, prefetch_factor, persistent_workers)
        if generator is not None and not isinstance(generator, Generator):
            raise EmberTypeError(f"DataLoader: generator must be an ember.Generator or None, "
                                 f"got {type(generator).__name__}")
        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            for name, value in (("shuffle", shuffle), ("sampler", sampler),
                                ("batch_sampler", batch_sampler)):
                if value is not None and value is not False:
                    raise DataError(f"DataLoader with IterableDataset: expected unspecified "
                                    f"{name} option, but got {name}={value!r}")
        elif sampler is not None and shuffle:
            raise DataError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise DataError("DataLoader: batch_sampler option is mutually exclusive with "
                                "batch_size, shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None:
            if drop_last:
                raise DataError("DataLoader: batch_size=None option disables auto-batching "
                                "and is mutually exclusive with drop_last")
        elif isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) \
                or batch_size <= 0:
            raise DataError(f"DataLoader: batch_size should be a positive integer value, but "
                            f"got batch_size={batch_size!r}")

        if not iterable:
            if sampler is None:
                sampler = (RandomSampler(dataset, generator=generator) if shuffle
                           else SequentialSampler(dataset))
            if batch_size is not None and batch_sampler is None:
                batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.pin_memory_device = pin_memory_device
        self.in_order = in_order
        self._auto_collation = batch_size is not None or batch_sampler is not None
        self.collate_fn = collate_fn or (default_collate if self._auto_collation
                                         else default_convert)

    def __iter__(self) -> "_SingleProcessIter":
        return _SingleProcessIter(self)

    def _batches(self) -> Iterator:
        collate, dataset = self.collate_fn, self.dataset
        if isinstance(dataset, IterableDataset):
            stream = iter(dataset)
            if not self._auto_collation:
                for sample in stream:
                    yield collate(sample)
                return
            while True:
                chunk = list(itertools.islice(stream, self.batch_size))
                if not chunk or (self.drop_last and len(chunk) < self.batch_size):
                    return
                yield collate(chunk)
        if not self._auto_collation:
            for index in self.sampler:
                yield collate(dataset[index])
            return
        getitems = getattr(dataset, "__getitems__", None)
        for indices in self.batch_sampler:
            samples = getitems(indices) if callable(getitems) else [dataset[i] for i in indices]
            yield collate(samples)

    def __len__(self) -> int:
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self._auto_collation else self.sampler)


def _check_workers(num_workers, timeout, prefetch_factor, persistent_workers) -> None:
    if isinstance(num_workers, bool) or not isinstance(num_workers, numbers.Integral) \
            or num_workers < 0:
        raise DataError(f"DataLoader: num_workers option should be a non-negative integer, "
                        f"got num_workers={num_workers!r}")
    if num_workers > 0:
        raise NotImplementedError(f"DataLoader: num_workers={num_workers} (worker "
                                  "processes) is not available yet; it comes with issue 5 "
                                  "(parallel loading). Use num_workers=0.")
    if timeout < 0:
        raise DataError(f"DataLoader: timeout option should be non-negative, got {timeout}")
    if prefetch_factor is not None:
        raise DataError("DataLoader: prefetch_factor option could only be specified in "
                        "multiprocessing; let num_workers > 0 to enable multiprocessing, "
                        "otherwise set prefetch_factor to None")
    if persistent_workers:
        raise DataError("DataLoader: persistent_workers option needs num_workers > 0")


class _SingleProcessIter:
    """One pass over a DataLoader; ``len()`` gives the number of batches."""

    def __init__(self, loader: DataLoader):
        self._loader = loader
        self._batches = loader._batches()

    def __iter__(self) -> "_SingleProcessIter":
        return self

    def __next__(self):
        return next(self._batches)

    def __len__(self) -> int:
        return len(self._loader)
