"""``DistributedDataParallel``: the same model on every rank, each rank on its own
shard of the batch, gradients averaged across ranks during the backward pass.

Gradients are averaged in buckets: the parameters, in reverse registration order
(roughly the order backward produces their gradients), are packed into flat buffers of
about ``bucket_cap_mb`` each (the first one small, so communication starts early). A
hook on every parameter copies its gradient into its bucket; when a bucket's last
gradient arrives its all-reduce starts, non-blocking, while the backward pass goes on
computing the earlier layers' gradients. A callback queued on the autograd engine
waits for the buckets and writes the averages into ``.grad`` before ``backward()``
returns, so the optimizer sees the averaged gradients.

Buckets are always started in the same order on every rank (bucket ``i + 1`` waits
for bucket ``i``), since MPI needs every rank to issue collectives in the same order.
"""
from __future__ import annotations

import contextlib
import time
from typing import Any, Iterator

import numpy as np

from ..autograd import grad_mode
from ..autograd.graph import queue_callback, reachable_leaves
from ..nn.module import Module
from ..tensor import Tensor
from .process_group import DistributedError, ProcessGroup

__all__ = ["DistributedDataParallel", "broadcast_tensors"]

_FIRST_BUCKET_BYTES = 1024 * 1024  # PyTorch's first bucket is small too


def broadcast_tensors(tensors, group: ProcessGroup, src: int = 0) -> None:
    """Overwrite every rank's ``tensors`` with rank ``src``'s (``src`` a rank of
    ``group``), packed into one flat message per dtype."""
    by_dtype: dict = {}
    for t in tensors:
        by_dtype.setdefault(t._data.dtype, []).append(t)
    pending = []
    for dtype, ts in by_dtype.items():
        flat = ts[0]._device.backend.xp.concatenate([t._data.reshape(-1) for t in ts])
        pending.append((ts, flat, group.broadcast(flat, src)))
    for ts, flat, work in pending:
        work.wait()
        offset = 0
        for t in ts:
            n = t._data.size
            t._data[...] = flat[offset:offset + n].reshape(t._data.shape)
            t._version[0] += 1
            offset += n


class _Bucket:
    """Gradients of some parameters of one dtype, reduced by one all-reduce."""

    def __init__(self, index: int, sizes: list, dtype, xp=np):
        self.index = index
        self.members = [i for i, _ in sizes]   # parameter indices
        self.offsets = {}                       # parameter index -> (offset, numel)
        offset = 0
        for i, n in sizes:
            self.offsets[i] = (offset, n)
            offset += n
        self.xp = xp
        self.buffer = xp.zeros(offset, dtype)  # on the parameters' device
        self.pending = set()
        self.work = None
        self.launched_at = self.done_at = 0.0

    @property
    def nbytes(self) -> int:
        return self.buffer.nbytes


class DistributedDataParallel(Module):
    """Data parallel training of ``module`` over the ranks of ``process_group``.

    At construction every rank's parameters and buffers are overwritten with rank 0's.
    Call the wrapper like the module; ``backward()`` then returns the gradients averaged
    over the ranks (each rank's loss being the mean over its shard, the result equals
    one process training on the concatenated batch).

    Args:
        module: the model (the same architecture on every rank).
        device_ids: accepted for PyTorch compatibility; must be None or one device.
        output_device: accepted for PyTorch compatibility (unused).
        dim: accepted for PyTorch compatibility; must be 0.
        broadcast_buffers: copy rank 0's buffers (BatchNorm statistics) to every rank
            at the start of each forward.
        process_group: the ranks to average over (default: the world).
        bucket_cap_mb: the size of a gradient bucket in MiB.
        find_unused_parameters: parameters that the forward did not use count as zero
            gradients (found by walking the output's graph after each forward); without
            it, a parameter that gets no gradient is an error.
        gradient_as_bucket_view: the ``.grad`` tensors become views into the buckets
            (no second copy of the gradients).

    Attributes:
        module: the wrapped model.
        stats: figures of the last reduction: ``bytes_per_step`` (bytes all-reduced),
            ``buckets``, ``bucket_bytes``, ``started_during_backward`` (buckets whose
            all-reduce started before the backward pass ended), ``allreduce_time``
            (first start to last completion, s), ``wait_time`` (time blocked waiting
            after the backward pass, s), ``overlap`` (``1 - wait_time /
            allreduce_time``: the share of communication hidden behind backward), and
            totals over all steps (``steps``, ``total_bytes``, ``total_allreduce_time``,
            ``total_wait_time``).

    The state dict keeps the ``module.`` prefix, as PyTorch's does.

    >>> dist.init_process_group("mpi")
    >>> model = DistributedDataParallel(Net())
    >>> loss = F.cross_entropy(model(x_shard), y_shard)
    >>> loss.backward()          # gradients averaged over the ranks
    >>> opt.step()
    """

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool = True, process_group: ProcessGroup | None = None,
                 bucket_cap_mb: float = 25, find_unused_parameters: bool = False,
                 gradient_as_bucket_view: bool = False) -> None:
        super().__init__()
        if not isinstance(module, Module):
            raise DistributedError(f"DistributedDataParallel: module must be an "
                                   f"ember.nn.Module, got {type(module).__name__}")
        if device_ids is not None and len(device_ids) > 1:
            raise DistributedError(f"DistributedDataParallel: device_ids must be None or a "
                                   f"single device (one process per device), got "
                                   f"{list(device_ids)}")
        if dim != 0:
            raise DistributedError(f"DistributedDataParallel: only dim=0 is supported, got "
                                   f"dim={dim}")
        if not bucket_cap_mb > 0:
            raise DistributedError(f"DistributedDataParallel: bucket_cap_mb must be "
                                   f"positive, got {bucket_cap_mb}")
        from .collectives import _group
        self.module = module
        self.process_group = _group(process_group)
        self.device_ids = device_ids
        self.broadcast_buffers = bool(broadcast_buffers)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.gradient_as_bucket_view = bool(gradient_as_bucket_view)
        self.bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)
        self.require_backward_grad_sync = True

        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        self._names = [n for n, _ in named]
        self._params = [p for _, p in named]
        self._check_same_model()
        broadcast_tensors(list(module.parameters()) + list(module.buffers()),
                          self.process_group)
        self._buckets = self._make_buckets()
        self._where = {i: b for b in self._buckets for i in b.members}
        self._unused: set = set()
        self._reducing = False
        self._next_bucket = 0
        self._ready_params: set = set()
        self._backward_end = 0.0
        self.stats: dict[str, Any] = {
            "steps": 0, "bytes_per_step": 0, "buckets": len(self._buckets),
            "bucket_bytes": [b.nbytes for b in self._buckets], "started_during_backward": 0,
            "allreduce_time": 0.0, "wait_time": 0.0, "overlap": 0.0, "total_bytes": 0,
            "total_allreduce_time": 0.0, "total_wait_time": 0.0}
        self._grad_hooks = [p.register_hook(self._make_hook(i)) for i, p in enumerate(self._params)]

    # Construction -----------------------------------------------------------------------
    def _check_same_model(self) -> None:
        """Every rank must wrap the same architecture: compare parameter counts and
        sizes (a mismatch would otherwise garble every all-reduce)."""
        group = self.process_group
        sizes = [p._data.size for p in self._params]
        mine = np.array([len(sizes), sum(sizes), hash(tuple(sizes)) % (2 ** 52)], np.float64)
        both = np.concatenate([mine, -mine])
        group.allreduce(both, "max").wait()
        if not np.array_equal(both[:3], -both[3:]):
            raise DistributedError(
                f"DistributedDataParallel: the ranks wrap different models: rank "
                f"{group.global_rank} has {len(sizes)} trainable parameters with "
                f"{sum(sizes)} elements, and another rank has a different count or shapes; "
                "expected the same architecture on every rank")

    def _make_buckets(self) -> list[_Bucket]:
        """Reverse registration order, one dtype per bucket; the first bucket is capped
        at 1 MiB so the first all-reduce starts early."""
        buckets: list[_Bucket] = []
        open_: dict = {}   # dtype -> (members, bytes)
        xp = self._params[0]._device.backend.xp if self._params else np
        for i in reversed(range(len(self._params))):
            data = self._params[i]._data
            members, size = open_.get(data.dtype, ([], 0))
            members.append((i, data.size))
            size += data.nbytes
            cap = _FIRST_BUCKET_BYTES if not buckets else self.bucket_bytes_cap
            if size >= min(cap, self.bucket_bytes_cap):
                buckets.append(_Bucket(len(buckets), members, data.dtype, xp))
                members, size = [], 0
            open_[data.dtype] = (members, size)
        for dtype, (members, _) in open_.items():
            if members:
                buckets.append(_Bucket(len(buckets), members, dtype, xp))
        return buckets

    # Forward ----------------------------------------------------------------------------
    def forward(self, *inputs, **kwargs):
        if self.broadcast_buffers and self.process_group.size > 1:
            buffers = list(self.module.buffers())
            if buffers:
                broadcast_tensors(buffers, self.process_group)
        output = self.module(*inputs, **kwargs)
        if self.find_unused_parameters and grad_mode.is_grad_enabled() \
                and self.require_backward_grad_sync:
            self._unused = self._find_unused(output)
        return output

    def _find_unused(self, output) -> set:
        """Indices of the parameters the output's graph does not reach."""
        reached = {id(t) for t in reachable_leaves(_tensors_in(output))}
        return {i for i, p in enumerate(self._params) if id(p) not in reached}

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Skip the gradient all-reduce inside the block: gradients accumulate locally
        in ``.grad``, and the first backward after the block averages the sum.

        >>> with ddp.no_sync():
        ...     ddp(x1).sum().backward()    # local only
        >>> ddp(x2).sum().backward()        # averages the gradients of x1 and x2
        """
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

    # Backward ---------------------------------------------------------------------------
    def _make_hook(self, index: int):
        def hook(grad):
            if self.require_backward_grad_sync:
                self._grad_ready(index, grad)
        return hook

    def _start_reduction(self) -> None:
        self._reducing = True
        self._next_bucket = 0
        self._ready_params = set()
        for b in self._buckets:
            b.pending = set(b.members)
            b.work = None
        queue_callback(self._finish_reduction)
        for i in sorted(self._unused):
            self._mark_ready(i, None)

    def _grad_ready(self, index: int, grad: Tensor) -> None:
        if not self._reducing:
            self._start_reduction()
        if index in self._ready_params:
            raise DistributedError(
                f"DistributedDataParallel: parameter {self._names[index]!r} got a second "
                "gradient in one backward pass (marked unused by find_unused_parameters, "
                "or reached twice); expected one gradient per parameter per backward")
        self._poll()
        self._mark_ready(index, grad)

    def _mark_ready(self, index: int, grad: Tensor | None) -> None:
        """Copy the parameter's accumulated gradient (``.grad`` plus this backward's)
        into its bucket; start the buckets that are complete, in order."""
        p = self._params[index]
        bucket = self._where[index]
        offset, n = bucket.offsets[index]
        view = bucket.buffer[offset:offset + n]
        old = None if p.grad is None else p.grad._data.reshape(-1)
        if grad is None:
            view[...] = 0 if old is None else old
        elif old is None:
            view[...] = grad._data.reshape(-1)
        else:
            bucket.xp.add(old, grad._data.reshape(-1), out=view)
        if grad is not None and self.gradient_as_bucket_view and p.grad is not None:
            # .grad is (or may be) a view into the bucket, which now holds the sum: drop
            # it, so the engine stores this backward's gradient apart from the bucket
            p.grad = None
        self._ready_params.add(index)
        bucket.pending.discard(index)
        self._launch_ready()

    def _launch_ready(self) -> None:
        while self._next_bucket < len(self._buckets):
            bucket = self._buckets[self._next_bucket]
            if bucket.pending:
                return
            bucket.launched_at = time.perf_counter()
            bucket.work = self.process_group.allreduce(bucket.buffer, "avg")
            self._next_bucket += 1

    def _poll(self) -> None:
        """Let MPI progress the all-reduces in flight (and note when they finished)."""
        for bucket in self._buckets[:self._next_bucket]:
            if not bucket.done_at and bucket.work.is_completed():
                bucket.done_at = time.perf_counter()

    def _finish_reduction(self) -> None:
        """At the end of backward: every gradient is in; finish and wait for the
        all-reduces and write the averages into ``.grad``."""
        self._backward_end = time.perf_counter()
        started_during = self._next_bucket
        missing = [i for b in self._buckets for i in sorted(b.pending)]
        try:
            if missing and not self.find_unused_parameters:
                names = ", ".join(repr(self._names[i]) for i in missing[:8])
                more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
                raise DistributedError(
                    f"DistributedDataParallel: {len(missing)} parameter(s) received no "
                    f"gradient in this backward pass: {names}{more}. Expected every "
                    "trainable parameter to take part in the loss; pass "
                    "find_unused_parameters=True to DistributedDataParallel to count "
                    "them as zero, or set requires_grad=False on them")
            for i in missing:
                self._mark_ready(i, None)
            used = self._used_anywhere(missing)
            wait_start = time.perf_counter()
            for bucket in self._buckets:
                if not bucket.done_at:
                    bucket.work.wait()
                    bucket.done_at = time.perf_counter()
            wait_end = time.perf_counter()
        finally:
            self._reducing = False
        self._write_grads(used)
        self._record(started_during, wait_end - wait_start)
        for bucket in self._buckets:
            bucket.done_at = 0.0
        self._unused = set()

    def _used_anywhere(self, locally_unused: list):
        """With ``find_unused_parameters``: which parameters some rank used (those no
        rank used keep their ``.grad``, as in PyTorch). None: all were used."""
        if not self.find_unused_parameters:
            return None
        used = np.ones(len(self._params), np.float64)
        used[list(self._unused | set(locally_unused))] = 0
        self.process_group.allreduce(used, "max").wait()
        return used

    def _write_grads(self, used) -> None:
        for bucket in self._buckets:
            for i in bucket.members:
                if used is not None and not used[i]:
                    continue
                p = self._params[i]
                offset, n = bucket.offsets[i]
                avg = bucket.buffer[offset:offset + n].reshape(p._data.shape)
                if self.gradient_as_bucket_view:
                    p.grad = Tensor._make(avg, p._device)
                elif p.grad is None:
                    p.grad = Tensor._make(avg.copy(), p._device)
                else:
                    p.grad._data[...] = avg
                    p.grad._version[0] += 1

    def _record(self, started_during: int, wait_time: float) -> None:
        first = min(b.launched_at for b in self._buckets) if self._buckets else 0.0
        last = max(b.done_at for b in self._buckets) if self._buckets else 0.0
        span = max(last - first, 0.0)
        nbytes = sum(b.nbytes for b in self._buckets)
        s = self.stats
        s["steps"] += 1
        s["bytes_per_step"] = nbytes
        s["started_during_backward"] = started_during
        s["allreduce_time"] = span
        s["wait_time"] = wait_time
        s["overlap"] = 0.0 if span <= 0 else max(0.0, 1.0 - wait_time / span)
        s["total_bytes"] += nbytes
        s["total_allreduce_time"] += span
        s["total_wait_time"] += wait_time

    def extra_repr(self) -> str:
        return (f"world_size={self.process_group.size}, buckets={len(self._buckets)}, "
                f"bucket_cap_mb={self.bucket_bytes_cap / 2 ** 20:g}")


def _tensors_in(obj) -> list:
    """The tensors in a (nested) output: a tensor, tuples, lists and dicts of them."""
    if isinstance(obj, Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors_in(o)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in _tensors_in(o)]
    return []
