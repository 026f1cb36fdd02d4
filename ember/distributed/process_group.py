"""The process-group seam: the one place that talks to a transport.

A :class:`ProcessGroup` runs collectives on backend arrays (NumPy arrays on the CPU),
always as non-blocking operations returning a :class:`Work` handle; the blocking forms
are ``start(...).wait()``. Everything above this file — the tensor collectives, DDP,
ZeRO, the parallel layers — is written against this interface only, so another
transport (NCCL through CuPy) plugs in as another subclass.

Implementations here:

- :class:`MPIProcessGroup`: MPI through mpi4py (MPI-3 non-blocking collectives);
- :class:`SingleProcessGroup`: a world of one process (no mpiexec): every collective is
  the identity, as it is on one rank.

Every wait has a deadline (:func:`get_timeout`, ``EMBER_DIST_TIMEOUT`` seconds, default
300): a collective that another rank never joins raises :class:`DistributedError`
naming the collective, the group and this rank, instead of hanging.
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
    :class:`DistributedError` after the timeout); ``is_completed()`` polls."""

    def __init__(self, name: str, group: "ProcessGroup", requests=(), finish=None):
        self.name = name
        self.group = group
        self._requests = list(requests)
        self._finish = finish   # called once, after completion (unpacking, averaging)
        self._done = not self._requests

    def is_completed(self) -> bool:
        if not self._done and all(r.Test() for r in self._requests):
            self._complete()
        return self._done

    def wait(self, timeout: float | None = None) -> bool:
        if self._done:
            return True
        deadline = time.monotonic() + (get_timeout() if timeout is None else timeout)
        pause = 1e-6
        while not all(r.Test() for r in self._requests):
            if time.monotonic() > deadline:
                raise DistributedError(
                    f"{self.name} timed out after {get_timeout() if timeout is None else timeout:g} s "
                    f"on rank {self.group.global_rank} (group of ranks {self.group.ranks}): "
                    "another rank did not join it (it died, hangs, or called a different "
                    "collective)")
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)
        self._complete()
        return True

    def _complete(self) -> None:
        self._done = True
        if self._finish is not None:
            finish, self._finish = self._finish, None
            finish()


class ProcessGroup:
    """A set of ranks that run collectives together. ``rank`` is this process's index in
    the group, ``size`` the number of ranks, ``ranks`` their global ranks."""
    backend = "none"

    def __init__(self, rank: int, size: int, ranks: tuple, global_rank: int):
        self.rank, self.size, self.ranks, self.global_rank = rank, size, tuple(ranks), global_rank

    def __repr__(self) -> str:
        return f"<{type(self).__name__} rank {self.rank} of {self.size}, ranks {self.ranks}>"

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

    def _done(self, name):
        return Work(name, self)

    def allreduce(self, array, op):
        return self._done("all_reduce")

    def broadcast(self, array, src):
        return self._done("broadcast")

    def allgather(self, out, array):
        out[0] = array
        return self._done("all_gather")

    def reduce_scatter(self, out, array, op):
        out[...] = array.reshape(out.shape)
        return self._done("reduce_scatter")

    def reduce(self, array, dst, op):
        return self._done("reduce")

    def gather(self, out, array, dst):
        out[0] = array
        return self._done("gather")

    def scatter(self, out, array, src):
        out[...] = array[0]
        return self._done("scatter")

    def alltoall(self, out, array):
        out[...] = array
        return self._done("all_to_all")

    def send(self, array, dst, tag=0):
        raise DistributedError("send: a world of one process has no other rank to send to")

    def recv(self, array, src, tag=0):
        raise DistributedError("recv: a world of one process has no other rank to receive "
                               "from")

    def barrier(self):
        return self._done("barrier")

    def new_group(self, ranks):
        return self if list(ranks) == [0] else None


# MPI ------------------------------------------------------------------------------------
_HALF = ("float16", "bfloat16")


def _wire(array):
    """The array as MPI sees it: float16 and bfloat16 (no buffer format mpi4py takes)
    travel as their uint16 bits."""
    if array is not None and array.dtype.name in _HALF:
        return array.view(np.uint16)
    return array


def _reduce_copy(array, op):
    """Reductions MPI cannot do on this dtype (float16, bfloat16) run on a float32
    copy; returns (buffer to reduce, function writing the result back)."""
    if array.dtype.name in _HALF:
        wide = array.astype(np.float32)

        def back():
            array[...] = wide.astype(array.dtype)
        return wide, back
    return array, None


class MPIProcessGroup(ProcessGroup):
    """Collectives over an MPI communicator (mpi4py)."""
    backend = "mpi"

    def __init__(self, comm, global_rank: int, ranks: tuple):
        super().__init__(comm.Get_rank(), comm.Get_size(), ranks, global_rank)
        from mpi4py import MPI
        self.MPI = MPI
        self.comm = comm
        self._ops = {"sum": MPI.SUM, "avg": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN,
                     "product": MPI.PROD}

    def _op(self, op):
        if op not in self._ops:
            raise DistributedError(f"unknown reduce op {op!r}; expected one of "
                                   f"{', '.join(REDUCE_OPS)}")
        return self._ops[op]

    def allreduce(self, array, op):
        buf, back = _reduce_copy(array, op)
        req = self.comm.Iallreduce(self.MPI.IN_PLACE, buf, op=self._op(op))

        def finish():
            if op == "avg":
                np.divide(buf, self.size, out=buf, casting="unsafe")
            if back is not None:
                back()
        return Work("all_reduce", self, [req], finish)

    def broadcast(self, array, src):
        return Work("broadcast", self, [self.comm.Ibcast(_wire(array), root=src)])

    def allgather(self, out, array):
        return Work("all_gather", self, [self.comm.Iallgather(_wire(np.ascontiguousarray(array)),
                                                               _wire(out))])

    def reduce_scatter(self, out, array, op):
        buf, back = _reduce_copy(array, op)
        obuf, oback = _reduce_copy(out, op)
        req = self.comm.Ireduce_scatter_block(np.ascontiguousarray(buf), obuf,
                                              op=self._op(op))

        def finish():
            if op == "avg":
                np.divide(obuf, self.size, out=obuf, casting="unsafe")
            if oback is not None:
                oback()
        return Work("reduce_scatter", self, [req], finish)

    def reduce(self, array, dst, op):
        buf, back = _reduce_copy(array, op)
        inplace = self.rank == dst
        req = self.comm.Ireduce(self.MPI.IN_PLACE if inplace else buf,
                                buf if inplace else None, op=self._op(op), root=dst)

        def finish():
            if inplace:
                if op == "avg":
                    np.divide(buf, self.size, out=buf, casting="unsafe")
                if back is not None:
                    back()
        return Work("reduce", self, [req], finish)

    def gather(self, out, array, dst):
        recv = _wire(out) if self.rank == dst else None
        return Work("gather", self, [self.comm.Igather(_wire(np.ascontiguousarray(array)),
                                                        recv, root=dst)])

    def scatter(self, out, array, src):
        send = _wire(np.ascontiguousarray(array)) if self.rank == src else None
        return Work("scatter", self, [self.comm.Iscatter(send, _wire(out), root=src)])

    def alltoall(self, out, array):
        return Work("all_to_all", self, [self.comm.Ialltoall(_wire(np.ascontiguousarray(array)),
                                                              _wire(out))])

    def send(self, array, dst, tag=0):
        return Work("send", self, [self.comm.Isend(_wire(np.ascontiguousarray(array)),
                                                   dest=dst, tag=tag)])

    def recv(self, array, src, tag=0):
        return Work("recv", self, [self.comm.Irecv(_wire(array), source=src, tag=tag)])

    def barrier(self):
        return Work("barrier", self, [self.comm.Ibarrier()])

    def new_group(self, ranks):
        ranks = tuple(int(r) for r in ranks)
        world_group = self.comm.Get_group()
        # global ranks -> ranks of this communicator
        local = [self.ranks.index(r) for r in ranks]
        sub = self.comm.Create_group(world_group.Incl(local))
        if sub == self.MPI.COMM_NULL:
            return None
        return MPIProcessGroup(sub, self.global_rank, ranks)

    def abort(self, code: int = 1) -> None:
        self.comm.Abort(code)
