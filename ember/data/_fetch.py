"""Turning a task (a list of indices, or "the next batch" of a stream) into a batch: the
one piece of loading code that the main process and the worker processes share.

Random augmentation inside a map-style dataset draws from generators seeded for each
batch: ember's default generator, ``random`` and NumPy's global generator start every
batch from a seed made of the epoch's base seed and the batch's number. So a batch has
the same augmentations whichever worker — or the main process — loads it, and a resumed
epoch loads its remaining batches exactly as an uninterrupted one would. (A stream, an
IterableDataset, keeps each worker's own generators, as PyTorch does: resuming reads it
again from its start.)"""
from __future__ import annotations

import itertools
import random
from typing import Callable

import numpy as np

from ..ops.random import get_rng_state, manual_seed, set_rng_state
from .dataset import IterableDataset

__all__ = ["Fetcher", "END", "batch_seed", "seeded_for_batch", "in_own_generators"]

END = object()  # what fetch returns once an IterableDataset's stream has run out


def batch_seed(base_seed: int, batch: int) -> int:
    """The seed batch number ``batch`` of an epoch with ``base_seed`` is loaded with."""
    return int(np.random.SeedSequence([base_seed, batch]).generate_state(1, np.uint64)[0]
               >> np.uint64(1))


def seeded_for_batch(seed: int) -> None:
    """Seed ember's default generator, ``random`` and NumPy's global generator."""
    manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % (1 << 32))


class in_own_generators:
    """Run a block with the process's generators set aside and restored after (the main
    process loading a batch must not consume the training's random numbers)."""

    def __enter__(self):
        self.saved = (get_rng_state(), random.getstate(), np.random.get_state())
        return self

    def __exit__(self, *exc):
        ember_state, py_state, np_state = self.saved
        set_rng_state(ember_state)
        random.setstate(py_state)
        np.random.set_state(np_state)
        return False


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
