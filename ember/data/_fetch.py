"""Turning a task (a list of indices, or "the next batch" of a stream) into a batch: the
one piece of loading code that the main process and the worker processes share."""
from __future__ import annotations

import itertools
from typing import Callable

from .dataset import IterableDataset

__all__ = ["Fetcher", "END"]

END = object()  # what fetch returns once an IterableDataset's stream has run out


class Fetcher:
    """Fetch batches of ``dataset`` as a DataLoader configured with these options would.

    For a map-style dataset ``fetch(indices)`` reads those indices (a list of them with
    auto-batching, one index without). For an IterableDataset ``fetch(None)`` reads the
    next batch of the stream, or returns :data:`END`; ``restart()`` begins a new pass.
    """

    def __init__(self, dataset, auto_collation: bool, collate_fn: Callable,
                 batch_size: int | None, drop_last: bool):
        self.dataset = dataset
        self.iterable = isinstance(dataset, IterableDataset)
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.batch_size = batch_size
        self.drop_last = drop_last
        self._stream = None
        self._ended = False

    def restart(self) -> None:
        self._stream = None
        self._ended = False

    def fetch(self, indices):
        if self.iterable:
            return self._next_from_stream()
        dataset = self.dataset
        if not self.auto_collation:
            return self.collate_fn(dataset[indices])
        getitems = getattr(dataset, "__getitems__", None)
        samples = getitems(indices) if callable(getitems) else [dataset[i] for i in indices]
        return self.collate_fn(samples)

    def _next_from_stream(self):
        if self._ended:
            return END
        if self._stream is None:
            self._stream = iter(self.dataset)
        if not self.auto_collation:
            for sample in self._stream:
                return self.collate_fn(sample)
            self._ended = True
            return END
        chunk = list(itertools.islice(self._stream, self.batch_size))
        if not chunk or (self.drop_last and len(chunk) < self.batch_size):
            self._ended = True
            return END
        return self.collate_fn(chunk)
