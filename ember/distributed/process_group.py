"""The process-group seam: the one place that talks to a transport.

A :class:`ProcessGroup` runs collectives on backend arrays (NumPy arrays on the CPU),
always as non-blocking operations returning a :class:`Work` handle; the blocking forms
are ``start(...).wait()``. Everything above this file — the tensor collectives, DDP,
ZeRO, the parallel layers — is written against this interface only, so another
transport plugs in as another subclass.

Implementations here:

- :class:`MPIProcessGroup`: MPI through mpi4py (MPI-3 non-blocking collectives);
- :class:`SingleProcessGroup`: a world of one process (no mpiexec): every collective is
  the identity, as it is on one rank;

and in ``nccl.py``, :class:`~ember.distributed.nccl.NCCLProcessGroup`: NCCL through CuPy,
for GPU arrays.

Every wait has a deadline (:func:`get_timeout`, ``EMBER_DIST_TIMEOUT`` seconds, default
300). A collective that another rank never joins raises :class:`DistributedError`
naming the collective, its number in the group, and — found by asking the other ranks
on a side channel (:mod:`ember.distributed.faults`) — which ranks did not join and what
they are doing instead.
"""
from __future__ import annotations

import os
import time

import numpy as np

from ..errors import EmberError

__all__ = ["DistributedError", "Work", "ProcessGroup", "SingleProcessGroup",
           "MPIProcessGroup", "REDUCE_OPS", "get_timeout", "set_timeout"]

REDUCE_OPS = ("sum", "avg", "max", "min", "product")
_DEFAULT_TIMEOUT = float(os.environ.get("EMBER_DIST_TIMEOUT", "300"))
_timeout = [_DEFAULT_TIMEOUT]


class DistributedError(EmberError):
    """A collective failed, timed out, or was called wrongly."""


def get_timeout() -> float:
    """Seconds a collective may wait for the other ranks before it raises."""
    return _timeout[0]


def set_timeout(seconds: float) -> None:
    """Set the collective timeout (``init_process_group(timeout=...)`` does too)."""
    seconds = float(seconds)
    if not seconds > 0:
        raise DistributedError(f"the collective timeout must be positive, got {seconds}")
    _timeout[0] = seconds


class Work:
    """A collective in flight. ``wait()`` blocks until it completed (or raises
    :class:`DistributedError` after the timeout); ``is_completed()`` polls.

    ``seq`` is the collective's number in its group (1 for the group's first); every
    rank of the group numbers the same call alike, which is how a timeout names the
    ranks that did not join. Point-to-point operations have ``seq`` None.
    """

    def __init__(self, name: str, group: "ProcessGroup", requests=(), finish=None,
                 keep=(), seq: int | None = None):
        self.name = name
        self.group = group
        self.seq = seq
        self._requests = list(requests)
        self._finish = finish   # called once, after completion (unpacking, averaging)
        self._keep = keep       # buffers MPI reads or writes until completion
        self._done = not self._requests

    def __repr__(self) -> str:
        return f"<Work {self.describe()}{' done' if self._done else ''}>"

    def describe(self) -> str:
        """``all_reduce #3 of ranks [0, 1]`` (the name alone for point-to-point)."""
        if self.seq is None:
            return self.name
        return f"{self.name} #{self.seq} of ranks {list(self.group.ranks)}"

    def _test(self) -> bool:
        try:
            return all(r.Test() for r in self._requests)
        except Exception as error:  # the transport's own error (a peer vanished)
            raise DistributedError(f"{self.describe()} failed on rank "
                                   f"{self.group.global_rank}: {error}") from error

    def is_completed(self) -> bool:
        if not self._done and self._test():
            self._complete()
        return self._done

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the operation completed; raise :class:`DistributedError` naming
        the ranks that did not join when ``timeout`` (default :func:`get_timeout`)
        seconds pass first."""
        if self._done:
            return True
        limit = get_timeout() if timeout is None else float(timeout)
        start = time.monotonic()
        deadline = start + limit
        watch = self.group._status
        previous = watch.enter(self, start) if watch is not None else None
        try:
            pause, next_serve = 1e-6, start
            while not self._test():
                now = time.monotonic()
                if now > deadline:
                    raise DistributedError(self._timeout_message(limit))
                if watch is not None and now >= next_serve:
                    watch.serve()
                    next_serve = now + 0.005
                time.sleep(pause)
                pause = min(pause * 2, 1e-3)
        finally:
            if watch is not None:
                watch.leave(previous)
        self._complete()
        return True

    def _timeout_message(self, limit: float) -> str:
        head = (f"{self.describe()} timed out after {limit:g} s on rank "
                f"{self.group.global_rank}")
        watch = self.group._status
        if watch is None:
            return head + ": another rank did not join it"
        return head + ": " + watch.diagnose(self, limit)

    def _complete(self) -> None:
        self._done = True
        self._keep = ()
        if self._finish is not None:
            finish, self._finish = self._finish, None
            finish()


class ProcessGroup:
    """A set of ranks that run collectives together. ``rank`` is this process's index in
    the group, ``size`` the number of ranks, ``ranks`` their global ranks, ``group_id``
    the same number on every rank (0 for the world, then in ``new_group`` order).
    ``device``: the device whose tensors the group's collectives take (None: those of
    any device its transport can carry)."""
    backend = "none"
    device = None

    def __init__(self, rank: int, size: int, ranks: tuple, global_rank: int,
                 group_id: int = 0):
        self.rank, self.size, self.ranks, self.global_rank = rank, size, tuple(ranks), global_rank
        self.group_id = group_id
        self.seq = 0            # collectives started on this group
        self.last_name = None   # the name of the last one
        self._status = None     # the side channel that explains timeouts (MPI only)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} rank {self.rank} of {self.size}, ranks {self.ranks}>"

    def _work(self, name: str, requests=(), finish=None, keep=(), p2p: bool = False) -> Work:
        """A Work for a collective this rank just started (numbered in the group)."""
        if p2p:
            return Work(name, self, requests, finish, keep)
        self.seq += 1
        self.last_name = name
        return Work(name, self, requests, finish, keep, self.seq)

    # Each returns a Work; arrays are written in place.
    def allreduce(self, array, op: str) -> Work: raise NotImplementedError  # noqa: E704
    def broadcast(self, array, src: int) -> Work: raise NotImplementedError  # noqa: E704
    def allgather(self, out, array) -> Work: raise NotImplementedError  # noqa: E704
    def reduce_scatter(self, out, array, op: str) -> Work: raise NotImplementedError  # noqa: E704
    def reduce(self, array, dst: int, op: str) -> Work: raise NotImplementedError  # noqa: E704
    def gather(self, out, array, dst: int) -> Work: raise NotImplementedError  # noqa: E704
    def scatter(self, out, array, src: int) -> Work: raise NotImplementedError  # noqa: E704
    def alltoall(self, out, array) -> Work: raise NotImplementedError  # noqa: E704
    def send(self, array, dst: int, tag: int = 0) -> Work: raise NotImplementedError  # noqa: E704
    def recv(self, array, src: int, tag: int = 0) -> Work: raise NotImplementedError  # noqa: E704
    def barrier(self) -> Work: raise NotImplementedError  # noqa: E704

    def exchange(self, payload: bytes, name: str) -> list:
        """Every rank's ``payload`` (small bytes), in group-rank order, without touching
        the numbering or the order of the group's collectives (debug mode's check)."""
        raise NotImplementedError

    def new_group(self, ranks) -> "ProcessGroup | None":
        """A subgroup of the given global ranks (None on ranks outside it)."""
        raise NotImplementedError

    def abort(self, code: int = 1) -> None:
        """End every process of the job now (an unhandled error on one rank)."""
        os._exit(code)


class SingleProcessGroup(ProcessGroup):
    """The world of one process: every collective leaves its data as it is."""
    backend = "single"

    def __init__(self):
        super().__init__(0, 1, (0,), 0)

    def allreduce(self, array, op):
        return self._work("all_reduce")

    def broadcast(self, array, src):
        return self._work("broadcast")

    def allgather(self, out, array):
        out[0] = array
        return self._work("all_gather")

    def reduce_scatter(self, out, array, op):
        out[...] = array.reshape(out.shape)
        return self._work("reduce_scatter")

    def reduce(self, array, dst, op):
        return self._work("reduce")

    def gather(self, out, array, dst):
        if out is not None:
            out[0] = array
        return self._work("gather")

    def scatter(self, out, array, src):
        out[...] = array[0]
        return self._work("scatter")

    def alltoall(self, out, array):
        out[...] = array
        return self._work("all_to_all")

    def send(self, array, dst, tag=0):
        raise DistributedError("send: a world of one process has no other rank to send to")

    def recv(self, array, src, tag=0):
        raise DistributedError("recv: a world of one process has no other rank to receive "
                               "from")

    def barrier(self):
        return self._work("barrier")

    def exchange(self, payload, name):
        return [bytes(payload)]

    def new_group(self, ranks):
        return self if list(ranks) == [0] else None


# MPI ------------------------------------------------------------------------------------
_HALF = ("float16", "bfloat16")
# bool travels as uint8 0/1: a logical or is a max, a logical and a min (as PyTorch does).
_BOOL_OPS = {"sum": "max", "max": "max", "min": "min", "product": "min"}


def _wire(array):
    """The array as MPI sees it: float16 and bfloat16 (no buffer format mpi4py takes)
    travel as their uint16 bits."""
    if array is not None and array.dtype.name in _HALF:
        return array.view(np.uint16)
    return array


def _reduction(array, op):
    """(buffer MPI reduces, the op it applies, function writing the result back):
    float16 and bfloat16 reduce on a float32 copy, bool on its uint8 bytes."""
    if array.dtype.kind == "b":
        return array.view(np.uint8), _BOOL_OPS[op], None
    if array.dtype.name in _HALF:
        wide = array.astype(np.float32)

        def back():
            array[...] = wide.astype(array.dtype)
        return wide, op, back
    return array, op, None


class MPIProcessGroup(ProcessGroup):
    """Collectives over an MPI communicator (mpi4py).

    ``status`` is the world's :class:`~ember.distributed.faults.StatusChannel` (made
    for the world, shared by its subgroups); each group also keeps a duplicate of its
    communicator for :meth:`exchange`, so debug checks never interleave with its
    collectives.
    """
    backend = "mpi"

    def __init__(self, comm, global_rank: int, ranks: tuple, group_id: int = 0,
                 status=None):
        super().__init__(comm.Get_rank(), comm.Get_size(), ranks, global_rank, group_id)
        from mpi4py import MPI
        self.MPI = MPI
        self.comm = comm
        self._control = comm.Dup()
        self._groups_made = 0
        if status is None:
            from .faults import StatusChannel
            status = StatusChannel(comm.Dup(), global_rank)
        self._status = status
        status.register(self)
        self._ops = {"sum": MPI.SUM, "avg": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN,
                     "product": MPI.PROD}

    def _op(self, op):
        if op not in self._ops:
            raise DistributedError(f"unknown reduce op {op!r}; expected one of "
                                   f"{', '.join(REDUCE_OPS)}")
        return self._ops[op]

    def _averaged(self, buf, op, back):
        def finish():
            if op == "avg":
                np.divide(buf, self.size, out=buf, casting="unsafe")
            if back is not None:
                back()
        return finish

    def allreduce(self, array, op):
        buf, mpi_op, back = _reduction(array, op)
        req = self.comm.Iallreduce(self.MPI.IN_PLACE, buf, op=self._op(mpi_op))
        return self._work("all_reduce", [req], self._averaged(buf, op, back), (buf,))

    def broadcast(self, array, src):
        buf = _wire(array)
        return self._work("broadcast", [self.comm.Ibcast(buf, root=src)], keep=(buf,))

    def allgather(self, out, array):
        send, recv = _wire(np.ascontiguousarray(array)), _wire(out)
        return self._work("all_gather", [self.comm.Iallgather(send, recv)], keep=(send, recv))

    def reduce_scatter(self, out, array, op):
        buf, mpi_op, _ = _reduction(np.ascontiguousarray(array), op)
        obuf, _, oback = _reduction(out, op)
        req = self.comm.Ireduce_scatter_block(buf, obuf, op=self._op(mpi_op))
        return self._work("reduce_scatter", [req], self._averaged(obuf, op, oback),
                          (buf, obuf))

    def reduce(self, array, dst, op):
        buf, mpi_op, back = _reduction(array, op)
        root = self.rank == dst
        req = self.comm.Ireduce(self.MPI.IN_PLACE if root else buf, buf if root else None,
                                op=self._op(mpi_op), root=dst)
        finish = self._averaged(buf, op, back) if root else None
        return self._work("reduce", [req], finish, (buf,))

    def gather(self, out, array, dst):
        send = _wire(np.ascontiguousarray(array))
        recv = _wire(out) if self.rank == dst else None
        return self._work("gather", [self.comm.Igather(send, recv, root=dst)],
                          keep=(send, recv))

    def scatter(self, out, array, src):
        send = _wire(np.ascontiguousarray(array)) if self.rank == src else None
        recv = _wire(out)
        return self._work("scatter", [self.comm.Iscatter(send, recv, root=src)],
                          keep=(send, recv))

    def alltoall(self, out, array):
        send, recv = _wire(np.ascontiguousarray(array)), _wire(out)
        return self._work("all_to_all", [self.comm.Ialltoall(send, recv)], keep=(send, recv))

    def send(self, array, dst, tag=0):
        buf = _wire(np.ascontiguousarray(array))
        return self._work(f"send to rank {self.ranks[dst]}",
                          [self.comm.Isend(buf, dest=dst, tag=tag)], keep=(buf,), p2p=True)

    def recv(self, array, src, tag=0):
        buf = _wire(array)
        return self._work(f"recv from rank {self.ranks[src]}",
                          [self.comm.Irecv(buf, source=src, tag=tag)], keep=(buf,), p2p=True)

    def barrier(self):
        return self._work("barrier", [self.comm.Ibarrier()])

    def exchange(self, payload, name):
        payload = np.frombuffer(bytes(payload), np.uint8)
        lengths = np.zeros(self.size, np.int64)
        mine = np.array([payload.size], np.int64)
        Work(name, self, [self._control.Iallgather(mine, lengths)], seq=self.seq + 1).wait()
        width = int(lengths.max())
        padded = np.zeros(width, np.uint8)
        padded[:payload.size] = payload
        table = np.zeros((self.size, width), np.uint8)
        Work(name, self, [self._control.Iallgather(padded, table)], seq=self.seq + 1).wait()
        return [table[i, :lengths[i]].tobytes() for i in range(self.size)]

    def new_group(self, ranks):
        ranks = tuple(int(r) for r in ranks)
        # Making a communicator blocks with no deadline: meet first, under the timeout,
        # so a rank that never calls new_group is named instead of hanging the others.
        self._work("new_group", [self.comm.Ibarrier()]).wait()
        self._groups_made += 1  # on every rank, so the id agrees everywhere
        group_id = self.group_id * 1000 + self._groups_made
        if self.global_rank not in ranks:
            return None
        local = [self.ranks.index(r) for r in ranks]
        sub = self.comm.Create_group(self.comm.Get_group().Incl(local), tag=group_id % 32768)
        sub.Set_errhandler(self.MPI.ERRORS_RETURN)
        return MPIProcessGroup(sub, self.global_rank, ranks, group_id, self._status)

    def abort(self, code: int = 1) -> None:
        self.comm.Abort(code)

