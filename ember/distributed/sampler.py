"""``DistributedSampler``: each rank reads its own shard of a map-style dataset."""
from __future__ import annotations

import math
import numbers
from typing import Iterator

from ..data.errors import DataError
from ..data.sampler import Sampler
from ..ops.random import Generator, randperm

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    """The indices of rank ``rank``'s shard of ``dataset``, out of ``num_replicas``.

    Every rank orders the whole dataset the same way (a permutation seeded by
    ``seed + epoch`` when ``shuffle``, else ``0..len-1``), pads it by repeating its
    start so that it splits evenly (or, with ``drop_last``, cuts the tail), and takes
    every ``num_replicas``-th index from position ``rank`` on: the shards are disjoint
    and of equal length, ``ceil(len / num_replicas)`` each (``floor`` with
    ``drop_last``). Call :meth:`set_epoch` before each epoch so the order changes.

    Args:
        dataset: a map-style dataset (has ``__len__``).
        num_replicas: the number of shards (default: the world size).
        rank: this process's shard (default: its rank).
        shuffle: permute the indices (the same permutation on every rank).
        seed: the permutation's seed; must be the same on every rank.
        drop_last: drop the tail instead of padding to an even split.

    >>> sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    >>> loader = ember.data.DataLoader(dataset, batch_size=32, sampler=sampler)
    >>> for epoch in range(epochs):
    ...     sampler.set_epoch(epoch)
    ...     for batch in loader: ...
    """

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        from .collectives import get_rank, get_world_size
        if num_replicas is None:
            num_replicas = get_world_size()
        if rank is None:
            rank = get_rank()
        for name, value in (("num_replicas", num_replicas), ("rank", rank), ("seed", seed)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise DataError(f"DistributedSampler: {name} must be an integer, got "
                                f"{value!r}")
        if num_replicas < 1:
            raise DataError(f"DistributedSampler: num_replicas must be at least 1, got "
                            f"{num_replicas}")
        if not 0 <= rank < num_replicas:
            raise DataError(f"Invalid rank {rank}, rank should be in the interval "
                            f"[0, {num_replicas - 1}]")
        if not hasattr(dataset, "__len__"):
            raise DataError(f"DistributedSampler: the dataset ({type(dataset).__name__}) "
                            "has no __len__; it needs a map-style dataset")
        self.dataset = dataset
        self.num_replicas, self.rank = int(num_replicas), int(rank)
        self.shuffle, self.seed, self.drop_last = bool(shuffle), int(seed), bool(drop_last)
        self.epoch = 0
        n = len(dataset)
        if self.drop_last and n % self.num_replicas:
            # the largest even split below n, so no rank reads a padded duplicate
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            generator = Generator().manual_seed(self.seed + self.epoch)
            indices = randperm(n, generator=generator).tolist()
        else:
            indices = list(range(n))
        if self.drop_last:
            indices = indices[:self.total_size]
        else:
            missing = self.total_size - len(indices)
            if missing and indices:
                indices += (indices * math.ceil(missing / len(indices)))[:missing]
        if len(indices) != self.total_size:
            raise DataError(f"DistributedSampler: the dataset's length changed from the "
                            f"{n} it had when the sampler was made")
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` in the seed of the next pass's permutation (every rank must
        set the same epoch)."""
        self.epoch = int(epoch)

    def state_dict(self) -> dict:
        """The sampler's position in the schedule of permutations (its epoch)."""
        return {"epoch": self.epoch, "seed": self.seed}

    def load_state_dict(self, state: dict) -> None:
        self.epoch = int(state["epoch"])
        self.seed = int(state.get("seed", self.seed))
