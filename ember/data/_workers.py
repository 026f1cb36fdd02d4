"""DataLoader worker processes: the loop a worker runs, the pool of workers, and the
iterator that hands their batches out in order.

The main process sends each worker small tasks (an epoch tag, a sequence number and the
indices of one batch) through the worker's own queue; workers answer through one shared
queue with the batch's arrays in shared memory (see ``_shared_memory``). Batch ``s`` of an
epoch goes to worker ``s % num_workers``, so which worker loads which batch does not
depend on timing. Waiting processes poll: the main process checks every
:data:`_POLL_S` seconds that its workers are alive, a worker that its parent is.
"""
from __future__ import annotations

import atexit
import itertools
import multiprocessing
import os
import pickle
import queue
import random
import secrets
import signal
import time
import traceback
import weakref

import numpy as np

from ..ops.random import manual_seed
from ._fetch import END, Fetcher, batch_seed, seeded_for_batch
from ._shared_memory import (discard, pack, remove_segments, shared_memory_available,
                             unpack)
from .errors import DataError, WorkerError

__all__ = ["WorkerInfo", "get_worker_info", "WorkerPool", "MultiProcessIter"]

_POLL_S = 0.1       # how often a waiting process checks on the other side
_JOIN_S = 2.0       # how long shutdown waits for a worker before terminating it
_FAILED_JOIN_S = 0.1
_epoch_tags = itertools.count()


class WorkerInfo:
    """What a DataLoader worker process knows about itself (from
    :func:`get_worker_info`).

    Attributes:
        id: this worker's number, ``0 <= id < num_workers``.
        num_workers: how many workers the DataLoader runs.
        seed: this worker's seed (``base_seed + id``); ember's default generator,
            ``random`` and NumPy's global generator were seeded from it.
        dataset: this process's copy of the dataset.
    """

    def __init__(self, id: int, num_workers: int, seed: int, dataset):
        self.id = id
        self.num_workers = num_workers
        self.seed = seed
        self.dataset = dataset

    def __repr__(self) -> str:
        return (f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, "
                f"seed={self.seed}, dataset={type(self.dataset).__name__})")


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """In a DataLoader worker process, its :class:`WorkerInfo`; None in the main process.

    An IterableDataset uses it to read only its share of the data in each worker:

    >>> class Range(ember.data.IterableDataset):
    ...     def __iter__(self):
    ...         info = ember.data.get_worker_info()
    ...         start, step = (0, 1) if info is None else (info.id, info.num_workers)
    ...         return iter(range(start, 10, step))
    """
    return _worker_info


def _seed_worker(base_seed: int, worker_id: int) -> int:
    seed = base_seed + worker_id
    random.seed(seed)
    manual_seed(seed)
    np.random.seed(np.random.SeedSequence([worker_id, base_seed]).generate_state(4))
    return seed


def _error_text(worker_id: int, where: str) -> str:
    return (f"DataLoader worker {worker_id} (pid {os.getpid()}) raised an error {where}; "
            f"the worker's traceback:\n{traceback.format_exc()}")


def _worker_loop(worker_id: int, num_workers: int, dataset, fetch_options: tuple,
                 index_queue, result_queue, base_seed: int, worker_init_fn,
                 segment_prefix: str | None, parent_pid: int) -> None:
    """The body of a worker process: fetch the batches asked for until told to stop (a
    ``None`` task) or until the parent process is gone."""
    global _worker_info
    # Ctrl-C reaches the whole process group; the main process decides when we stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    seed = _seed_worker(base_seed, worker_id)
    _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)

    def send(message: tuple) -> None:
        result_queue.put(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))

    try:
        if worker_init_fn is not None:
            worker_init_fn(worker_id)
        fetcher = Fetcher(dataset, *fetch_options)
    except Exception:
        send((worker_id, None, None, "error", _error_text(worker_id, "while starting")))
        return
    segment_names = (f"{segment_prefix}{n}" for n in itertools.count()) \
        if segment_prefix is not None else itertools.repeat(None)
    current_epoch = None
    while True:
        try:
            task = index_queue.get(timeout=_POLL_S)
        except queue.Empty:
            if os.getppid() != parent_pid:  # orphaned: nobody will read what we write
                break
            continue
        if task is None:
            break
        epoch, seq, indices, seed = task
        if seed is not None:
            seeded_for_batch(seed)
        if epoch != current_epoch:
            current_epoch = epoch
            fetcher.restart()
        segment = None
        try:
            batch = fetcher.fetch(indices)
            if batch is END:
                message = (worker_id, epoch, seq, "end", None)
            else:
                description, segment = pack(batch, next(segment_names))
                message = (worker_id, epoch, seq, "batch", (description, segment))
            send(message)
        except Exception:
            discard(segment)
            send((worker_id, epoch, seq, "error", _error_text(worker_id, f"in batch {seq}")))
    if os.getppid() != parent_pid and segment_prefix is not None:
        result_queue.cancel_join_thread()
        remove_segments(segment_prefix)


def _context(option):
    if option is None:
        return multiprocessing.get_context()
    if isinstance(option, str):
        try:
            return multiprocessing.get_context(option)
        except ValueError:
            methods = ", ".join(multiprocessing.get_all_start_methods())
            raise DataError(f"DataLoader: multiprocessing_context={option!r} is not a start "
                            f"method here; expected one of {methods}") from None
    if hasattr(option, "Process") and hasattr(option, "Queue"):
        return option
    raise DataError(f"DataLoader: multiprocessing_context should be None, a start method "
                    f"name or a multiprocessing context, got {type(option).__name__}")


def _describe_exit(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


_live_pools: "weakref.WeakSet[WorkerPool]" = weakref.WeakSet()


class WorkerPool:
    """``loader.num_workers`` worker processes with their queues. It lives for one
    epoch, or for the loader's life with ``persistent_workers``."""

    def __init__(self, loader, base_seed: int):
        ctx = _context(loader.multiprocessing_context)
        self.closed = False
        self.current_tag = None  # the pass now reading from these workers
        self.prefix = (f"ember-{os.getpid()}-{secrets.token_hex(4)}-"
                       if shared_memory_available() else None)
        self.result_queue = ctx.Queue()
        self.index_queues: list = []
        self.workers: list = []
        fetch_options = (loader._auto_collation, loader.collate_fn, loader.batch_size,
                         loader.drop_last)
        try:
            for worker_id in range(loader.num_workers):
                index_queue = ctx.Queue()
                worker_prefix = None if self.prefix is None else f"{self.prefix}w{worker_id}-"
                process = ctx.Process(
                    target=_worker_loop, name=f"ember-data-worker-{worker_id}", daemon=True,
                    args=(worker_id, loader.num_workers, loader.dataset, fetch_options,
                          index_queue, self.result_queue, base_seed, loader.worker_init_fn,
                          worker_prefix, os.getpid()))
                try:
                    process.start()
                except (TypeError, AttributeError, pickle.PicklingError) as e:
                    raise DataError(
                        f"DataLoader: could not start worker {worker_id} with "
                        f"multiprocessing_context={loader.multiprocessing_context!r}: the "
                        "dataset, collate_fn and worker_init_fn are pickled for it and "
                        f"this failed ({type(e).__name__}: {e}); use picklable objects "
                        "(NumPy arrays rather than ember tensors) or the 'fork' start "
                        "method") from e
                self.index_queues.append(index_queue)
                self.workers.append(process)
        except BaseException:
            self.shutdown()
            raise
        _live_pools.add(self)

    def alive(self) -> bool:
        return not self.closed and all(p.is_alive() for p in self.workers)

    def send(self, worker_id: int, task) -> None:
        self.index_queues[worker_id].put(task)

    def receive(self, timeout: float) -> tuple:
        """The next message from any worker. Raises :class:`WorkerError` if a worker
        has died or (``timeout > 0``) nothing came for ``timeout`` seconds."""
        deadline = time.monotonic() + timeout if timeout > 0 else None
        while True:
            wait = _POLL_S if deadline is None else max(0.0, min(
                _POLL_S, deadline - time.monotonic()))
            try:
                return pickle.loads(self.result_queue.get(timeout=wait))
            except queue.Empty:
                pass
            for worker_id, process in enumerate(self.workers):
                if not process.is_alive():
                    raise WorkerError(
                        f"DataLoader worker {worker_id} (pid {process.pid}) "
                        f"{_describe_exit(process.exitcode)} while the main process was "
                        "waiting for its batches; if it ran out of memory, try fewer "
                        "workers or a smaller batch_size")
            if deadline is not None and time.monotonic() >= deadline:
                raise WorkerError(f"DataLoader timed out after {timeout} seconds waiting "
                                  "for a batch from its worker processes (the timeout "
                                  "option)")

    def _drain(self) -> None:
        # Reading what workers still send lets them flush their queues and exit.
        try:
            while True:
                self.result_queue.get_nowait()
        except (queue.Empty, OSError, EOFError, ValueError):
            pass

    def shutdown(self, wait: float = _JOIN_S) -> None:
        """Stop the workers (asking first and waiting up to ``wait`` seconds, then
        SIGTERM, then SIGKILL), and remove any shared-memory segment nobody will read.
        Safe to call more than once."""
        if self.closed:
            return
        self.closed = True
        _live_pools.discard(self)
        for index_queue in self.index_queues:
            try:
                index_queue.put(None)
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + wait
        while any(p.is_alive() for p in self.workers) and time.monotonic() < deadline:
            self._drain()
            for process in self.workers:
                process.join(timeout=0.02)
        for process in self.workers:
            if process.is_alive():
                process.terminate()
                process.join(timeout=0.5)
            if process.is_alive():
                process.kill()
                process.join()
        self._drain()
        for q in (*self.index_queues, self.result_queue):
            q.cancel_join_thread()
            q.close()
        for process in self.workers:
            process.close()
        if self.prefix is not None:
            remove_segments(self.prefix)

    def __del__(self):
        try:
            self.shutdown()
        except Exception:  # at interpreter exit modules may already be torn down
            pass


@atexit.register
def _shutdown_all_pools() -> None:
    for pool in list(_live_pools):
        pool.shutdown()


class MultiProcessIter:
    """One pass over a DataLoader with worker processes; ``len()`` gives the number of
    batches. ``plan`` is the loader's epoch plan (see ``DataLoader.__iter__``)."""

    def __init__(self, loader, plan):
        self._loader = loader
        self._plan = plan
        self._progress = plan.progress
        self._num_workers = loader.num_workers
        self._timeout = loader.timeout
        self._in_order = loader.in_order
        pool = loader._persistent_pool
        if pool is not None and not pool.alive():
            pool.shutdown()
            pool = None
        if pool is None:
            pool = WorkerPool(loader, plan.base_seed)
            if loader.persistent_workers:
                loader._persistent_pool = pool
        self._pool = pool
        self._owns_pool = not loader.persistent_workers
        self._tag = next(_epoch_tags)  # results of an earlier pass are told apart by it
        pool.current_tag = self._tag
        self._tasks = plan.tasks
        self._next_send = 0
        self._next_yield = 0
        self._in_flight: dict[int, int] = {}
        self._ready: dict[int, tuple] = {}
        self._active = [True] * self._num_workers
        self._cursor = plan.first_batch % self._num_workers
        self._to_drop = plan.drop
        self._done = False
        try:
            for _ in range(loader.prefetch_factor * self._num_workers):
                self._send_one()
        except BaseException:
            self._stop(failed=True)
            raise

    def __iter__(self) -> "MultiProcessIter":
        return self

    def __len__(self) -> int:
        return len(self._loader)

    def _send_one(self) -> None:
        if self._tasks is None:  # an IterableDataset: ask the next worker with data left
            for _ in range(self._num_workers):
                worker_id = self._cursor
                self._cursor = (self._cursor + 1) % self._num_workers
                if self._active[worker_id]:
                    break
            else:
                return
            indices = None
        else:
            indices = next(self._tasks, END)
            if indices is END:
                return
            worker_id = (self._plan.first_batch + self._next_send) % self._num_workers
        seq = self._next_send
        seed = None if indices is None else \
            batch_seed(self._plan.base_seed, self._plan.first_batch + seq)
        self._next_send += 1
        self._in_flight[seq] = worker_id
        self._pool.send(worker_id, (self._tag, seq, indices, seed))

    def _receive_one(self) -> None:
        worker_id, tag, seq, kind, payload = self._pool.receive(self._timeout)
        if kind == "error" and seq is None:
            raise WorkerError(payload)
        if tag != self._tag:  # left over from an abandoned pass of persistent workers
            if kind == "batch":
                discard(payload[1])
            return
        if kind == "batch":
            payload = unpack(*payload)
        elif kind == "end":
            self._active[worker_id] = False
        del self._in_flight[seq]
        self._ready[seq] = (kind, payload)

    def _next_ready(self):
        """``(kind, payload)`` of the next batch to hand out, or None at the end."""
        while True:
            if self._in_order:
                seq = self._next_yield
                if seq in self._ready:
                    self._next_yield += 1
                    return self._ready.pop(seq)
                if seq not in self._in_flight:
                    return None
            else:
                if self._ready:
                    return self._ready.pop(min(self._ready))
                if not self._in_flight:
                    return None
            self._receive_one()

    def __next__(self):
        if self._done:
            raise StopIteration
        if self._pool.current_tag != self._tag:
            self._done = True
            raise DataError("DataLoader: this iterator's persistent workers were taken over "
                            "by a newer iter(loader); with persistent_workers=True only the "
                            "latest iterator of a loader can be read")
        try:
            while True:
                item = self._next_ready()
                if item is None:
                    self._progress.finished = True
                    self._stop(keep_persistent=True)
                    raise StopIteration
                kind, payload = item
                if kind == "error":
                    raise WorkerError(payload)
                self._send_one()
                if kind == "end":
                    continue
                if self._to_drop:
                    self._to_drop -= 1
                    continue
                self._progress.batches_yielded += 1
                return payload
        except StopIteration:
            raise
        except BaseException:
            self._stop(failed=True)
            raise

    def _stop(self, keep_persistent: bool = False, failed: bool = False) -> None:
        self._done = True
        if self._owns_pool or not keep_persistent:
            # After a failure the workers may be stuck in user code: don't wait long.
            self._pool.shutdown(wait=_FAILED_JOIN_S if failed else _JOIN_S)
            if self._loader._persistent_pool is self._pool:
                self._loader._persistent_pool = None

    def __del__(self):
        try:
            if not self._done and self._owns_pool:
                self._pool.shutdown()
        except Exception:
            pass
