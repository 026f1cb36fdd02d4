"""A stand-in for ``cupy.cuda.nccl`` and the CUDA runtime, for testing ember's NCCL
process group where there are no GPUs: the "device" arrays are the ``fakegpu`` device's
(NumPy arrays, see ``tests/fake_device.py``), and each NCCL call reads the buffers at the
addresses it is given and does its work with MPI (mpi4py's COMM_WORLD), synchronously.

``calls`` records every call (name, element count, datatype), so a test can check which
collectives went through NCCL."""
from __future__ import annotations

import ctypes

import numpy as np
from mpi4py import MPI

import ember

# cupy.cuda.nccl's constants (NCCL's own values)
NCCL_SUM, NCCL_PROD, NCCL_MAX, NCCL_MIN, NCCL_AVG = 0, 1, 2, 3, 4
NCCL_INT8, NCCL_UINT8, NCCL_INT32, NCCL_UINT32, NCCL_INT64, NCCL_UINT64 = 0, 1, 2, 3, 4, 5
NCCL_FLOAT16, NCCL_FLOAT32, NCCL_FLOAT64, NCCL_BFLOAT16 = 6, 7, 8, 9

_NUMPY = {NCCL_INT8: np.int8, NCCL_UINT8: np.uint8, NCCL_INT32: np.int32,
          NCCL_INT64: np.int64, NCCL_FLOAT16: np.float16, NCCL_FLOAT32: np.float32,
          NCCL_FLOAT64: np.float64}
if ember.bfloat16.np is not None:
    _NUMPY[NCCL_BFLOAT16] = ember.bfloat16.np
_MPI_OPS = {NCCL_SUM: MPI.SUM, NCCL_PROD: MPI.PROD, NCCL_MAX: MPI.MAX, NCCL_MIN: MPI.MIN}

calls: list = []
_pending: list = []  # point-to-point requests of the open group


def get_unique_id() -> tuple:
    return tuple(int(b) for b in np.random.default_rng().integers(-128, 128, 128))


def _view(ptr: int, count: int, datatype: int) -> np.ndarray:
    """The ``count`` elements of ``datatype`` at address ``ptr`` (writable)."""
    dtype = np.dtype(_NUMPY[datatype])
    return np.frombuffer((ctypes.c_char * (count * dtype.itemsize)).from_address(ptr), dtype)


def _reduced(array: np.ndarray, op: int, reduce) -> np.ndarray:
    """``reduce(send, recv, mpi_op)`` of ``array`` (half types in float32, as MPI has
    none), as ``array``'s dtype."""
    wide = array.astype(np.float32) if array.dtype.itemsize == 2 and array.dtype.kind not in "iu" \
        else array.copy()
    out = np.empty_like(wide)
    reduce(wide, out, _MPI_OPS[op])
    return out.astype(array.dtype)


def groupStart() -> None:  # noqa: N802 (cupy's names)
    calls.append(("groupStart", 0, None))


def groupEnd() -> None:  # noqa: N802
    calls.append(("groupEnd", 0, None))
    MPI.Request.Waitall([r for r, _ in _pending])
    _pending.clear()


class NcclCommunicator:
    """One rank's communicator: checks that every rank got the same unique id."""

    def __init__(self, ndev: int, comm_id: tuple, rank: int):
        self.comm = MPI.COMM_WORLD
        ids = self.comm.allgather(comm_id)
        assert len(comm_id) == 128 and all(i == ids[0] for i in ids), "unique ids differ"
        assert (ndev, rank) == (self.comm.Get_size(), self.comm.Get_rank())

    def allReduce(self, sendbuf, recvbuf, count, datatype, op, stream):  # noqa: N802
        calls.append(("allReduce", count, datatype))
        result = _reduced(_view(sendbuf, count, datatype), op,
                          lambda s, r, o: self.comm.Allreduce(s, r, op=o))
        _view(recvbuf, count, datatype)[...] = result

    def reduce(self, sendbuf, recvbuf, count, datatype, op, root, stream):
        calls.append(("reduce", count, datatype))
        result = _reduced(_view(sendbuf, count, datatype), op,
                          lambda s, r, o: self.comm.Reduce(s, r, op=o, root=root))
        if self.comm.Get_rank() == root:
            _view(recvbuf, count, datatype)[...] = result

    def bcast(self, buff, count, datatype, root, stream):
        calls.append(("bcast", count, datatype))
        self.comm.Bcast(_view(buff, count, datatype), root=root)

    def reduceScatter(self, sendbuf, recvbuf, recvcount, datatype, op, stream):  # noqa: N802
        calls.append(("reduceScatter", recvcount, datatype))
        size = self.comm.Get_size()
        result = _reduced(_view(sendbuf, recvcount * size, datatype), op,
                          lambda s, r, o: self.comm.Allreduce(s, r, op=o))
        rank = self.comm.Get_rank()
        _view(recvbuf, recvcount, datatype)[...] = result[rank * recvcount:
                                                          (rank + 1) * recvcount]

    def allGather(self, sendbuf, recvbuf, count, datatype, stream):  # noqa: N802
        calls.append(("allGather", count, datatype))
        self.comm.Allgather(_view(sendbuf, count, datatype).copy(),
                            _view(recvbuf, count * self.comm.Get_size(), datatype))

    def send(self, sendbuf, count, datatype, peer, stream):
        calls.append(("send", count, datatype))
        data = _view(sendbuf, count, datatype).copy()
        _pending.append((self.comm.Isend(data, dest=peer), data))

    def recv(self, recvbuf, count, datatype, peer, stream):
        calls.append(("recv", count, datatype))
        data = _view(recvbuf, count, datatype)
        _pending.append((self.comm.Irecv(data, source=peer), data))


class _Done:
    def Test(self) -> bool:  # noqa: N802
        return True


class FakeRuntime:
    """:class:`ember.distributed.nccl.CuPyRuntime`'s methods, for the ``fakegpu`` device
    (one "GPU" a node) and this module as ``cupy.cuda.nccl``."""

    def __init__(self):
        import sys
        from tests.fake_device import FAKE
        self.nccl = sys.modules[__name__]
        self.fake = FAKE

    def device_count(self) -> int:
        return 1

    def device(self, index: int):
        assert index == 0
        return self.fake

    def stream(self) -> int:
        return 0

    def completion(self):
        return _Done()

    def is_device_array(self, array) -> bool:
        return True  # (fakegpu arrays are NumPy arrays: every array is a device array)
