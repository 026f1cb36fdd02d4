"""The NCCL process group: collectives on GPU arrays through ``cupy.cuda.nccl``, behind
the same seam as MPI (:class:`~ember.distributed.ProcessGroup`).

``init_process_group("nccl")`` joins the world with MPI as usual, then uses MPI for one
thing: rank 0 makes an NCCL unique id and broadcasts it, and every rank builds its
``NcclCommunicator`` from it, on GPU ``local rank % GPUs on the node``. From then on,
collectives on device arrays are NCCL calls on the current CUDA stream (their
:class:`~ember.distributed.Work` completes when an event recorded after them has);
host arrays — the small bookkeeping messages of DDP and ZeRO, debug checks — still go
through the MPI group, which also keeps the timeout diagnostics.

NCCL has no int16 and no bool: int16 reductions run on an int32 copy, bool on its
bytes (a logical or is a max, a logical and a min, as with MPI); data that is only
moved travels as bytes. ``ReduceOp.AVG`` is a sum divided on the device. Gather,
scatter and all-to-all are grouped point-to-point calls (NCCL has none of them).
Point-to-point messages are matched in order per pair of ranks: NCCL has no tags.

Everything CUDA-specific goes through a small runtime object (:class:`CuPyRuntime`),
which the tests replace with a stand-in.
"""
from __future__ import annotations

import os

import numpy as np

from .process_group import REDUCE_OPS, DistributedError, ProcessGroup

__all__ = ["NCCLProcessGroup", "CuPyRuntime", "load_runtime", "create_group",
           "reduction_spec"]

# NCCL's datatype for each reducible dtype (bool travels as its bytes)
_DATATYPES = {"int8": "NCCL_INT8", "uint8": "NCCL_UINT8", "bool": "NCCL_UINT8",
              "int32": "NCCL_INT32", "int64": "NCCL_INT64", "float16": "NCCL_FLOAT16",
              "bfloat16": "NCCL_BFLOAT16", "float32": "NCCL_FLOAT32",
              "float64": "NCCL_FLOAT64"}
_WIDENED = {"int16": "int32"}  # reduced in a wider copy
_OPS = {"sum": "NCCL_SUM", "avg": "NCCL_SUM", "max": "NCCL_MAX", "min": "NCCL_MIN",
        "product": "NCCL_PROD"}
_BOOL_OPS = {"sum": "NCCL_MAX", "max": "NCCL_MAX", "min": "NCCL_MIN", "product": "NCCL_MIN"}
# where launchers put the rank among the processes of this node
_LOCAL_RANK = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
               "PMI_LOCAL_RANK", "SLURM_LOCALID")


def reduction_spec(dtype, op: str) -> tuple[str, str, str | None]:
    """How an array of ``dtype`` is reduced with ``op``: (the name of the NCCL datatype
    constant, the name of the NCCL op constant, the dtype of the copy it is reduced in,
    or None to reduce the array itself). ``avg`` is a sum, divided afterwards."""
    name = np.dtype(dtype).name
    if op not in _OPS:
        raise DistributedError(f"unknown reduce op {op!r}; expected one of "
                               f"{', '.join(REDUCE_OPS)}")
    wide = _WIDENED.get(name)
    datatype = _DATATYPES.get(wide or name)
    if datatype is None:
        raise DistributedError(f"NCCL cannot reduce arrays of dtype {name}")
    return datatype, (_BOOL_OPS if name == "bool" else _OPS)[op], wide


class CuPyRuntime:
    """What the NCCL group needs from CUDA, through CuPy: devices, the current stream,
    completion events, and the ``cupy.cuda.nccl`` module."""

    def __init__(self, cupy, nccl):
        self.cupy, self.nccl = cupy, nccl

    def device_count(self) -> int:
        return self.cupy.cuda.runtime.getDeviceCount()

    def device(self, index: int):
        """The ember device of GPU ``index`` (made the current one)."""
        from ..backends import device
        self.cupy.cuda.Device(index).use()
        return device("cuda", index)

    def stream(self) -> int:
        return self.cupy.cuda.get_current_stream().ptr

    def completion(self):
        """Something whose ``Test()`` says when the work queued so far on the current
        stream is done (an event recorded now)."""
        event = self.cupy.cuda.Event(block=False, disable_timing=True)
        event.record()
        return _EventDone(event)

    def is_device_array(self, array) -> bool:
        return isinstance(array, self.cupy.ndarray)


class _EventDone:
    __slots__ = ("event",)

    def __init__(self, event):
        self.event = event

    def Test(self) -> bool:  # noqa: N802 (the name MPI requests use, as Work expects)
        return self.event.done


def load_runtime() -> CuPyRuntime:
    """The CuPy runtime, or a :class:`DistributedError` saying what is missing."""
    try:
        import cupy
        from cupy.cuda import nccl
    except ImportError as exc:
        raise DistributedError(
            f"init_process_group: backend 'nccl' needs CuPy with NCCL support (pip "
            f"install cupy-cuda12x, and NCCL: pip install nvidia-nccl-cu12); {exc}. On "
            "CPUs use backend='mpi'") from None
    if not getattr(nccl, "available", True):
        raise DistributedError("init_process_group: backend 'nccl' needs NCCL, and this "
                               "CuPy was built without it (install nvidia-nccl-cu12)")
    return CuPyRuntime(cupy, nccl)


def _local_rank(host: ProcessGroup) -> int:
    for name in _LOCAL_RANK:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    comm = getattr(host, "comm", None)
    if comm is None:
        return 0
    from mpi4py import MPI
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return node.Get_rank()
    finally:
        node.Free()


def create_group(host: ProcessGroup, runtime) -> "NCCLProcessGroup":
    """The NCCL group of the ranks of ``host`` (an MPI group, or a world of one): the
    unique id travels through ``host``; each rank takes GPU ``local rank % count``."""
    count = runtime.device_count()
    if count < 1:
        raise DistributedError("init_process_group: backend 'nccl' found no GPU")
    device = runtime.device(_local_rank(host) % count)
    uid = np.zeros(128, np.int8)  # NCCL_UNIQUE_ID_BYTES
    if host.rank == 0:
        uid[:] = runtime.nccl.get_unique_id()
    host.broadcast(uid, 0).wait()
    # ncclCommInitRank blocks with no deadline: meet first, under the timeout
    host.barrier().wait()
    comm = runtime.nccl.NcclCommunicator(host.size, tuple(int(b) for b in uid), host.rank)
    return NCCLProcessGroup(host, runtime, comm, device)


class NCCLProcessGroup(ProcessGroup):
    """Collectives over an NCCL communicator, on the arrays of one GPU (``device``).

    Args:
        host: the MPI group (or world of one) of the same ranks: it carries host
            arrays and the timeout diagnostics.
        runtime: a :class:`CuPyRuntime` (or a stand-in with the same methods).
        comm: the ``NcclCommunicator`` of these ranks.
        device: the ember device whose arrays the collectives take.
    """
    backend = "nccl"

    def __init__(self, host: ProcessGroup, runtime, comm, device):
        super().__init__(host.rank, host.size, host.ranks, host.global_rank, host.group_id)
        self.host, self.runtime, self.comm, self.device = host, runtime, comm, device
        self.nccl = runtime.nccl
        self.xp = device.backend.xp
        self._status = host._status
        if self._status is not None:
            self._status.register(self)  # (in the host group's place: one numbering)

    # Helpers --------------------------------------------------------------------------
    def _on_host(self, *arrays) -> bool:
        return not all(a is None or self.runtime.is_device_array(a) for a in arrays)

    def _host_call(self, method: str, *args):
        """``self.host.method(*args)``, numbered in this group's sequence of
        collectives (so that every rank numbers every collective of the group alike,
        whichever transport ran it)."""
        host = self.host
        host.seq = self.seq
        work = getattr(host, method)(*args)
        self.seq, self.last_name = host.seq, host.last_name
        return work

    def _ptr(self, array) -> int:
        return self.device.backend.data_ptr(array)

    def _bytes(self, array):
        """A contiguous array's bytes (what is only moved travels as NCCL_UINT8)."""
        return array.reshape(-1).view(np.uint8)

    def _queued(self, name: str, keep=(), p2p: bool = False):
        """The Work of what was just queued on the current stream."""
        return self._work(name, [self.runtime.completion()], keep=keep, p2p=p2p)

    def _reducible(self, array, op: str):
        """(the buffer NCCL reduces, its datatype, the NCCL op, write-back or None)."""
        datatype, nccl_op, wide = reduction_spec(array.dtype, op)
        datatype, nccl_op = getattr(self.nccl, datatype), getattr(self.nccl, nccl_op)
        if array.dtype == np.bool_:
            return array.view(np.uint8), datatype, nccl_op, None
        if wide is not None:
            buf = array.astype(wide)

            def back():
                array[...] = buf.astype(array.dtype)
            return buf, datatype, nccl_op, back
        return array, datatype, nccl_op, None

    def _finish_reduction(self, buf, op: str, back) -> None:
        """Queue what follows the reduction on the stream: the average's division, the
        copy back from a widened buffer."""
        if op == "avg":
            self.xp.divide(buf, self.size, out=buf, casting="unsafe")
        if back is not None:
            back()

    # Collectives ----------------------------------------------------------------------
    def allreduce(self, array, op):
        if self._on_host(array):
            return self._host_call("allreduce", array, op)
        buf, datatype, nccl_op, back = self._reducible(array, op)
        ptr = self._ptr(buf)
        self.comm.allReduce(ptr, ptr, buf.size, datatype, nccl_op, self.runtime.stream())
        self._finish_reduction(buf, op, back)
        return self._queued("all_reduce", (buf,))

    def broadcast(self, array, src):
        if self._on_host(array):
            return self._host_call("broadcast", array, src)
        data = self._bytes(array)
        self.comm.bcast(self._ptr(data), data.size, self.nccl.NCCL_UINT8, src,
                        self.runtime.stream())
        return self._queued("broadcast", (array,))

    def allgather(self, out, array):
        if self._on_host(out, array):
            return self._host_call("allgather", out, array)
        send = self._bytes(self.xp.ascontiguousarray(array))
        self.comm.allGather(self._ptr(send), self._ptr(self._bytes(out)), send.size,
                            self.nccl.NCCL_UINT8, self.runtime.stream())
        return self._queued("all_gather", (send, out))

    def reduce_scatter(self, out, array, op):
        if self._on_host(out, array):
            return self._host_call("reduce_scatter", out, array, op)
        send, datatype, nccl_op, _ = self._reducible(self.xp.ascontiguousarray(array), op)
        recv, _, _, back = self._reducible(out, op)
        self.comm.reduceScatter(self._ptr(send), self._ptr(recv), recv.size, datatype,
                                nccl_op, self.runtime.stream())
        self._finish_reduction(recv, op, back)
        return self._queued("reduce_scatter", (send, recv))

    def reduce(self, array, dst, op):
        if self._on_host(array):
            return self._host_call("reduce", array, dst, op)
        buf, datatype, nccl_op, back = self._reducible(array, op)
        ptr = self._ptr(buf)
        self.comm.reduce(ptr, ptr, buf.size, datatype, nccl_op, dst, self.runtime.stream())
        if self.rank == dst:
            self._finish_reduction(buf, op, back)
        return self._queued("reduce", (buf,))

    def _exchange(self, sends, recvs) -> None:
        """Grouped point-to-point calls: ``sends``/``recvs`` are (array, peer) pairs
        (a message to this rank itself is a copy)."""
        stream = self.runtime.stream()
        self.nccl.groupStart()
        try:
            for array, peer in sends:
                if peer != self.rank:
                    data = self._bytes(array)
                    self.comm.send(self._ptr(data), data.size, self.nccl.NCCL_UINT8, peer,
                                   stream)
            for array, peer in recvs:
                if peer != self.rank:
                    data = self._bytes(array)
                    self.comm.recv(self._ptr(data), data.size, self.nccl.NCCL_UINT8, peer,
                                   stream)
        finally:
            self.nccl.groupEnd()
        mine = [a for a, peer in sends if peer == self.rank]
        for (target, peer), source in zip([r for r in recvs if r[1] == self.rank], mine):
            target[...] = source

    def gather(self, out, array, dst):
        if self._on_host(out, array):
            return self._host_call("gather", out, array, dst)
        array = self.xp.ascontiguousarray(array)
        recvs = list(zip(out.reshape(self.size, -1), range(self.size))) \
            if self.rank == dst else []
        self._exchange([(array, dst)], recvs)
        return self._queued("gather", (array, out))

    def scatter(self, out, array, src):
        if self._on_host(out, array):
            return self._host_call("scatter", out, array, src)
        sends = []
        if self.rank == src:
            array = self.xp.ascontiguousarray(array)
            sends = list(zip(array.reshape(self.size, -1), range(self.size)))
        self._exchange(sends, [(out.reshape(-1), src)])
        return self._queued("scatter", (array, out))

    def alltoall(self, out, array):
        if self._on_host(out, array):
            return self._host_call("alltoall", out, array)
        array = self.xp.ascontiguousarray(array)
        # (blocks along dim 0, as MPI's all-to-all splits its buffers)
        self._exchange(list(zip(array.reshape(self.size, -1), range(self.size))),
                       list(zip(out.reshape(self.size, -1), range(self.size))))
        return self._queued("all_to_all", (array, out))

    def _check_tag(self, name: str, tag: int) -> None:
        if tag != 0:
            raise DistributedError(f"{name}: the NCCL backend matches messages in order, "
                                   f"not by tag; got tag={tag} (use 0)")

    def send(self, array, dst, tag=0):
        if self._on_host(array):
            return self._host_call("send", array, dst, tag)
        self._check_tag("send", tag)
        array = self.xp.ascontiguousarray(array)
        self._exchange([(array, dst)], [])
        return self._queued(f"send to rank {self.ranks[dst]}", (array,), p2p=True)

    def recv(self, array, src, tag=0):
        if self._on_host(array):
            return self._host_call("recv", array, src, tag)
        self._check_tag("recv", tag)
        self._exchange([], [(array, src)])
        return self._queued(f"recv from rank {self.ranks[src]}", (array,), p2p=True)

    def barrier(self):
        # an all-reduce of one byte, as PyTorch's NCCL barrier: done when every rank's
        # GPU has reached it
        token = self.xp.zeros(1, np.uint8)
        self.comm.allReduce(self._ptr(token), self._ptr(token), 1, self.nccl.NCCL_UINT8,
                            self.nccl.NCCL_SUM, self.runtime.stream())
        return self._queued("barrier", (token,))

    def exchange(self, payload, name):
        return self._host_call("exchange", payload, name)

    def new_group(self, ranks):
        sub = self._host_call("new_group", ranks)
        return None if sub is None else create_group(sub, self.runtime)

    def abort(self, code: int = 1) -> None:
        self.host.abort(code)
