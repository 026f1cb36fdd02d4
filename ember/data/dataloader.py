"""The DataLoader: batches of samples from a dataset, in the order a sampler gives,
loaded in this process or in worker processes (``_workers``), with a state dict that
lets a run resume in the middle of an epoch."""
from __future__ import annotations

import copy
import itertools
import numbers
from typing import Callable, Iterator, NamedTuple

from ..errors import EmberTypeError
from ..ops.random import Generator, get_rng_state, randint, set_rng_state
from ._fetch import END, Fetcher, batch_seed, in_own_generators, seeded_for_batch
from ._workers import MultiProcessIter
from .collate import default_collate, default_convert
from .dataset import IterableDataset
from .errors import DataError
from .sampler import BatchSampler, RandomSampler, SequentialSampler, Sampler

__all__ = ["DataLoader"]

_SEED_HIGH = 2 ** 63 - 1


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
        num_workers: how many worker processes load batches (0: load in this
            process). Batches come back in the same order, with the same values, for
            any number of workers.
        collate_fn: merges a list of samples into a batch (default
            :func:`default_collate`).
        pin_memory: accepted for compatibility; batches stay in ordinary host memory
            (``.to("cuda")`` copies from there; the Trainer moves them to the model).
        drop_last: drop the last batch when it is smaller than ``batch_size``.
        timeout: with workers, the most seconds to wait for a batch before raising
            :class:`WorkerError` (0: wait as long as the workers are alive).
        worker_init_fn: called as ``worker_init_fn(worker_id)`` in each worker after it
            is seeded and before it loads anything.
        multiprocessing_context: a start method name (``"fork"``, ``"spawn"``,
            ``"forkserver"``) or a multiprocessing context; default: Python's default.
        generator: the :class:`ember.Generator` that shuffling and the workers' base
            seed draw from; without one, each epoch draws from the default generator
            (``ember.manual_seed`` makes the epochs repeat).
        prefetch_factor: batches each worker loads ahead (default 2 with workers).
        persistent_workers: keep the workers alive from one epoch to the next.
        pin_memory_device: accepted for compatibility (no-op).
        in_order: hand out batches in sampler order; ``False`` hands them out as soon
            as any worker has one.

    Each epoch draws a ``base_seed`` from ``generator`` (or the default generator).
    Batch ``s`` of a map-style dataset loads with ember's default generator, ``random``
    and NumPy's global generator seeded from ``(base_seed, s)``, in a worker or (set
    aside and restored after) in the main process: the same random augmentations for any
    number of workers, and exact resumption. Worker ``i`` is first seeded from
    ``base_seed + i`` (see :func:`get_worker_info`), which a stream keeps using.
    Batches travel from workers through shared memory. A worker's exception is raised here as a
    :class:`WorkerError` holding the worker's traceback; a worker that dies raises one
    within a fraction of a second.

    For an IterableDataset, ``sampler`` and ``batch_sampler`` are None: the stream is
    read in order; each worker holds a copy of it, and :func:`get_worker_info` lets it
    read its own share.

    :meth:`state_dict` and :meth:`load_state_dict` save and restore the position in
    the epoch, so an interrupted run resumes with exactly the batches it would have
    seen.

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
        self.prefetch_factor = 2 if num_workers > 0 and prefetch_factor is None \
            else prefetch_factor
        self.persistent_workers = persistent_workers
        self.pin_memory_device = pin_memory_device
        self.in_order = in_order
        self._auto_collation = batch_size is not None or batch_sampler is not None
        self.collate_fn = collate_fn or (default_collate if self._auto_collation
                                         else default_convert)

        self._epoch = 0
        self._progress: _Progress | None = None
        self._resume: _Progress | None = None
        self._resume_generators: dict = {}
        self._persistent_pool = None

    def __iter__(self):
        plan = self._begin_epoch()
        if self.num_workers == 0:
            return _SingleProcessIter(self, plan)
        return MultiProcessIter(self, plan)

    def __len__(self) -> int:
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self._auto_collation else self.sampler)

    # Epochs and their random draws ------------------------------------------------------
    def _generators(self) -> dict[str, Generator]:
        """The distinct generators this loader and its samplers hold, by role."""
        found: dict[str, Generator] = {}
        candidates = (("generator", self.generator),
                      ("sampler", getattr(self.sampler, "generator", None)),
                      ("batch_sampler", getattr(self.batch_sampler, "generator", None)),
                      ("batch_sampler.sampler", getattr(getattr(
                          self.batch_sampler, "sampler", None), "generator", None)))
        for role, gen in candidates:
            if isinstance(gen, Generator) and all(gen is not g for g in found.values()):
                found[role] = gen
        return found

    def _draw_epoch(self) -> tuple[int, Iterator | None]:
        """The epoch's worker base seed and its stream of tasks (index batches; None for
        an IterableDataset). The sampler's first task is taken here, so every random
        draw an epoch makes at its start happens now, inside ``iter(loader)``."""
        base_seed = int(randint(0, _SEED_HIGH, (), generator=self.generator).item())
        if isinstance(self.dataset, IterableDataset):
            return base_seed, None
        tasks = iter(self.batch_sampler if self._auto_collation else self.sampler)
        first = next(tasks, END)
        return base_seed, (tasks if first is END else itertools.chain([first], tasks))

    def _begin_epoch(self) -> "_EpochPlan":
        resume, self._resume = self._resume, None
        generators = self._generators()
        if resume is None:
            self._epoch += 1
            rng_start = {role: g.get_state() for role, g in generators.items()}
            rng_start["default"] = get_rng_state()
            progress = _Progress(self._epoch, 0, False, rng_start)
            base_seed, tasks = self._draw_epoch()
        else:
            # Redo the interrupted epoch's draws from its starting states, leaving the
            # default generator as it is now (a Trainer restores it on its own).
            progress = resume
            for role, gen in generators.items():
                gen.set_state(progress.rng_start[role])
            now = get_rng_state()
            set_rng_state(progress.rng_start["default"])
            try:
                base_seed, tasks = self._draw_epoch()
            finally:
                set_rng_state(now)
        self._progress = progress
        skip, first_batch, drop = progress.batches_yielded, 0, 0
        if skip and tasks is None:
            drop = skip  # a stream can only be skipped by reading it
        elif skip:
            first_batch = skip
            for _ in range(skip):
                if next(tasks, END) is END:
                    break
        return _EpochPlan(tasks, first_batch, drop, base_seed, progress)

    # Resumable loading ------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Where this loader is, as a JSON-serialisable dict: the epoch, how many batches
        of it were handed out, the random states the epoch started from, and the
        loader's (and its samplers') generators.

        After :meth:`load_state_dict` with it, the next ``iter(loader)`` hands out the
        rest of the interrupted epoch, exactly, and later epochs follow as in a run that
        was never interrupted. A finished epoch resumes at the next one.

        >>> loader = ember.data.DataLoader(range(10), batch_size=2, shuffle=True,
        ...                                generator=ember.Generator().manual_seed(0))
        >>> it = iter(loader); first = next(it)
        >>> state = loader.state_dict()
        >>> loader.load_state_dict(state)
        >>> len(list(loader))  # the 4 batches that were still to come
        4
        """
        progress = self._progress
        if progress is not None and not progress.finished and progress.batches_yielded \
                and self.num_workers > 0 and not self.in_order:
            raise DataError("DataLoader.state_dict: the position within an epoch is only "
                            "defined with in_order=True (with in_order=False the batches "
                            "handed out so far depend on timing); checkpoint between "
                            "epochs or use in_order=True")
        return {
            "version": _STATE_VERSION,
            "epoch": self._epoch,
            "batches_yielded": 0 if progress is None else progress.batches_yielded,
            "epoch_finished": True if progress is None else progress.finished,
            "epoch_start_rng": None if progress is None else copy.deepcopy(progress.rng_start),
            "generators": (copy.deepcopy(self._resume_generators) if self._resume is not None
                           else {role: g.get_state() for role, g in self._generators().items()}),
        }

    def load_state_dict(self, state_dict: dict) -> None:
        """Continue from a :meth:`state_dict` (of a loader built the same way: the same
        dataset, batch size, sampler kind and generators)."""
        state = _check_state(state_dict, set(self._generators()))
        if self._persistent_pool is not None:
            self._persistent_pool.shutdown()
            self._persistent_pool = None
        self._epoch = state["epoch"]
        rng_start = state["epoch_start_rng"]
        in_progress = rng_start is not None and not state["epoch_finished"]
        states = rng_start if in_progress else state["generators"]
        try:
            for role, gen in self._generators().items():
                gen.set_state(copy.deepcopy(states[role]))
        except (KeyError, TypeError, ValueError) as e:
            raise DataError(f"DataLoader.load_state_dict: a generator state is malformed "
                            f"({type(e).__name__}: {e}); expected what "
                            "ember.Generator.get_state returns") from None
        self._progress = None if rng_start is None else _Progress(
            state["epoch"], state["batches_yielded"], not in_progress,
            copy.deepcopy(rng_start))
        self._resume = self._progress if in_progress else None
        # Until the resumed epoch starts, state_dict() gives back what was loaded.
        self._resume_generators = copy.deepcopy(state["generators"])

    def __del__(self):
        pool = getattr(self, "_persistent_pool", None)
        if pool is not None:
            pool.shutdown()


_STATE_VERSION = 1
_STATE_KEYS = {"version", "epoch", "batches_yielded", "epoch_finished", "epoch_start_rng",
               "generators"}


def _check_state(state, roles: set) -> dict:
    where = "DataLoader.load_state_dict"
    if not isinstance(state, dict):
        raise DataError(f"{where}: expected the dict DataLoader.state_dict returns, got "
                        f"{type(state).__name__}")
    if set(state) != _STATE_KEYS:
        missing, extra = sorted(_STATE_KEYS - set(state)), sorted(set(state) - _STATE_KEYS)
        raise DataError(f"{where}: expected keys {sorted(_STATE_KEYS)}; missing {missing}, "
                        f"unexpected {extra}")
    if state["version"] != _STATE_VERSION:
        raise DataError(f"{where}: state version {state['version']!r} is not supported "
                        f"(expected {_STATE_VERSION})")
    for key in ("epoch", "batches_yielded"):
        value = state[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise DataError(f"{where}: {key} should be a non-negative integer, got "
                            f"{value!r}")
    if not isinstance(state["epoch_finished"], bool):
        raise DataError(f"{where}: epoch_finished should be a bool, got "
                        f"{state['epoch_finished']!r}")
    generators = state["generators"]
    if not isinstance(generators, dict) or set(generators) != roles:
        got = sorted(generators) if isinstance(generators, dict) else generators
        raise DataError(f"{where}: the state holds generators {got} but this loader has "
                        f"{sorted(roles)}; resume with a loader built the same way")
    rng_start = state["epoch_start_rng"]
    if rng_start is not None and (not isinstance(rng_start, dict)
                                  or set(rng_start) != roles | {"default"}):
        raise DataError(f"{where}: epoch_start_rng should hold the states of "
                        f"{sorted(roles | {'default'})}, got {rng_start!r:.200}")
    return state


class _Progress:
    """How far an epoch has got: what the state dict reports and a resume replays."""
    __slots__ = ("epoch", "batches_yielded", "finished", "rng_start")

    def __init__(self, epoch: int, batches_yielded: int, finished: bool, rng_start: dict):
        self.epoch = epoch
        self.batches_yielded = batches_yielded
        self.finished = finished
        self.rng_start = rng_start


class _EpochPlan(NamedTuple):
    """One epoch as the iterators run it: the index batches still to load (``tasks``;
    None for an IterableDataset), the number of the first of them (``first_batch``),
    how many batches of a stream to read and drop (``drop``, on resume), the workers'
    base seed, and the progress record to update."""
    tasks: Iterator | None
    first_batch: int
    drop: int
    base_seed: int
    progress: _Progress


def _check_workers(num_workers, timeout, prefetch_factor, persistent_workers) -> None:
    if isinstance(num_workers, bool) or not isinstance(num_workers, numbers.Integral) \
            or num_workers < 0:
        raise DataError(f"DataLoader: num_workers option should be a non-negative integer, "
                        f"got num_workers={num_workers!r}")
    if not isinstance(timeout, numbers.Real) or timeout < 0:
        raise DataError(f"DataLoader: timeout option should be non-negative, got {timeout}")
    if num_workers == 0:
        if prefetch_factor is not None:
            raise DataError("DataLoader: prefetch_factor option could only be specified in "
                            "multiprocessing; let num_workers > 0 to enable "
                            "multiprocessing, otherwise set prefetch_factor to None")
        if persistent_workers:
            raise DataError("DataLoader: persistent_workers option needs num_workers > 0")
    elif prefetch_factor is not None and (
            isinstance(prefetch_factor, bool) or not isinstance(prefetch_factor, numbers.Integral)
            or prefetch_factor <= 0):
        raise DataError(f"DataLoader: prefetch_factor option should be a positive integer, "
                        f"got prefetch_factor={prefetch_factor!r}")


class _SingleProcessIter:
    """One pass over a DataLoader, loading in this process; ``len()`` gives the number
    of batches."""

    def __init__(self, loader: DataLoader, plan: _EpochPlan):
        self._loader = loader
        self._fetcher = Fetcher(loader.dataset, loader._auto_collation, loader.collate_fn,
                                loader.batch_size, loader.drop_last)
        self._tasks = plan.tasks
        self._drop = plan.drop
        self._progress = plan.progress
        self._base_seed = plan.base_seed
        self._batch = plan.first_batch  # the number of the next batch of the epoch

    def __iter__(self) -> "_SingleProcessIter":
        return self

    def __next__(self):
        while True:
            if self._tasks is None:
                batch = self._fetcher.fetch(None)
            else:
                indices = next(self._tasks, END)
                if indices is END:
                    batch = END
                else:  # seeded as a worker would seed it (see _fetch)
                    with in_own_generators():
                        seeded_for_batch(batch_seed(self._base_seed, self._batch))
                        batch = self._fetcher.fetch(indices)
                    self._batch += 1
            if batch is END:
                self._progress.finished = True
                raise StopIteration
            if self._drop:
                self._drop -= 1
                continue
            self._progress.batches_yielded += 1
            return batch

    def __len__(self) -> int:
        return len(self._loader)
