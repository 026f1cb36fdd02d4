"""Dynamic batching: predict requests arriving within ``max_wait_ms`` of the first one
are concatenated along dim 0 into one forward (at most ``max_batch_size`` rows), run on
the model's worker thread, and the outputs split back to their requests. A batch stops
waiting as soon as every request in flight is in it: a lone client never pays the
wait."""
from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import EmberError
from .errors import ServeError
from .metrics import Metrics
from .tensors import Batch

__all__ = ["DynamicBatcher"]

RunBatch = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


@dataclass
class _Pending:
    batch: Batch
    future: asyncio.Future
    arrived: float = field(default=0.0)


class DynamicBatcher:
    """Gathers requests into batches for ``run_batch`` (inputs by name -> outputs by
    name, every output with the batch on dim 0), which runs on ``executor``.

    Requests whose inputs differ in a non-batch dim (say two sequence lengths) go into
    separate forwards. ``max_batch_size=1`` runs every request alone.
    """

    def __init__(self, run_batch: RunBatch, executor: Executor, metrics: Metrics,
                 max_batch_size: int = 32, max_wait_ms: float = 5.0) -> None:
        if max_batch_size < 1:
            raise EmberError(f"DynamicBatcher: max_batch_size must be >= 1, got "
                             f"{max_batch_size}")
        if max_wait_ms < 0:
            raise EmberError(f"DynamicBatcher: max_wait_ms must be >= 0, got {max_wait_ms}")
        self.run_batch, self.executor, self.metrics = run_batch, executor, metrics
        self.max_batch_size, self.max_wait = max_batch_size, max_wait_ms / 1000.0
        self._queue: asyncio.Queue[_Pending | None] | None = None
        self._task: asyncio.Task | None = None
        self._closing = False
        self._in_flight = 0  # requests submitted and not answered yet

    async def start(self) -> None:
        """Start the gathering loop on the running event loop."""
        self._queue = asyncio.Queue()
        self._closing = False
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def close(self) -> None:
        """Refuse new requests, finish every queued one, then stop."""
        if self._task is None:
            return
        self._closing = True
        self._queue.put_nowait(None)
        await self._task
        self._task = None

    async def submit(self, batch: Batch) -> dict[str, np.ndarray]:
        """Queue ``batch`` and wait for its outputs."""
        if self._task is None or self._closing:
            raise ServeError(503, "the server is shutting down (or not started); retry on "
                                  "another replica")
        loop = asyncio.get_running_loop()
        pending = _Pending(batch, loop.create_future(), loop.time())
        self._in_flight += 1
        try:
            self._queue.put_nowait(pending)
            return await pending.future
        finally:
            self._in_flight -= 1

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        done = False
        while not done:
            first = await self._queue.get()
            if first is None:
                break
            gathered, rows = [first], first.batch.rows
            deadline = first.arrived + self.max_wait
            while rows < self.max_batch_size:
                if self._in_flight <= len(gathered) and self._queue.empty():
                    break  # nobody else is waiting: waiting for company only adds latency
                timeout = deadline - loop.time()
                try:
                    item = (self._queue.get_nowait() if timeout <= 0
                            else await asyncio.wait_for(self._queue.get(), timeout))
                except (asyncio.QueueEmpty, asyncio.TimeoutError):
                    break
                if item is None:  # closing: run what is gathered, then stop
                    done = True
                    break
                gathered.append(item)
                rows += item.batch.rows
            for group in self._groups(gathered):
                await self._run(group)
        # after close(): anything still queued is answered too
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is not None:
                await self._run([item])

    def _groups(self, gathered: list[_Pending]) -> list[list[_Pending]]:
        """Split into runs of equal input shapes, each at most max_batch_size rows (a
        single larger request runs alone)."""
        by_key: dict[tuple, list[list[_Pending]]] = {}
        for item in gathered:
            runs = by_key.setdefault(item.batch.key(), [[]])
            if runs[-1] and sum(p.batch.rows for p in runs[-1]) + item.batch.rows > \
                    self.max_batch_size:
                runs.append([])
            runs[-1].append(item)
        return [run for runs in by_key.values() for run in runs]

    async def _run(self, group: list[_Pending]) -> None:
        group = [p for p in group if not p.future.done()]  # (a client that went away)
        if not group:
            return
        names = list(group[0].batch.arrays)
        inputs = {n: np.concatenate([p.batch.arrays[n] for p in group]) if len(group) > 1
                  else group[0].batch.arrays[n] for n in names}
        rows = [p.batch.rows for p in group]
        total = sum(rows)
        try:
            outputs = await asyncio.get_running_loop().run_in_executor(
                self.executor, self.run_batch, inputs)
        except Exception as exc:  # the model failed: every request of the batch says why
            error = exc if isinstance(exc, ServeError) else ServeError(
                500, f"the model failed: {type(exc).__name__}: {exc}")
            for p in group:
                if not p.future.done():
                    p.future.set_exception(error)
            return
        self.metrics.observe_batch(total, len(group))
        unsplittable = [n for n, a in outputs.items() if a.ndim == 0 or a.shape[0] != total]
        if unsplittable and len(group) > 1:
            error = ServeError(500, f"the model's outputs {unsplittable} don't have the "
                                    f"batch ({total} rows) on dim 0, so a batch can't be "
                                    f"split; serve it with max_batch_size=1")
            for p in group:
                if not p.future.done():
                    p.future.set_exception(error)
            return
        start = 0
        for p, n in zip(group, rows):
            if not p.future.done():
                p.future.set_result(outputs if len(group) == 1 else
                                    {k: a[start:start + n] for k, a in outputs.items()})
            start += n
