"""The process group's world and the collectives on ember tensors, with
``torch.distributed``'s names and arguments.

Collectives write into the tensors they are given (as PyTorch's do) and bump their
version counters; ``async_op=True`` returns a :class:`~ember.distributed.Work` whose
``wait()`` completes it. Ranks named in ``src``/``dst`` are global ranks, as in PyTorch.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

from ..tensor import Tensor
from .debug import check_call, set_debug
from .process_group import (REDUCE_OPS, DistributedError, MPIProcessGroup, ProcessGroup,
                            SingleProcessGroup, Work, get_timeout, set_timeout)

__all__ = ["GroupMember", "ReduceOp", "init_process_group", "is_initialized", "is_available",
           "destroy_process_group", "get_rank", "get_world_size", "get_backend",
           "new_group", "barrier", "all_reduce", "broadcast", "all_gather",
           "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "reduce",
           "gather", "scatter", "all_to_all", "all_to_all_single", "send", "recv", "isend",
           "irecv", "group_world"]


class ReduceOp:
    """Reduction operations: ``ReduceOp.SUM`` and the others (strings underneath)."""
    SUM, AVG, MAX, MIN, PRODUCT = "sum", "avg", "max", "min", "product"


_world: list = [None]

# Environment variables the MPI launchers set in every rank (Open MPI, MPICH/Hydra, PMIx).
_LAUNCHED_BY = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS")


def is_available() -> bool:
    """Whether mpi4py can be imported (the MPI backend can run)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def init_process_group(backend: str = "mpi", *, timeout: float | None = None,
                       world_size: int | None = None, rank: int | None = None,
                       init_method: str | None = None,
                       debug: bool | None = None) -> ProcessGroup:
    """Join the job's world. With ``backend="mpi"`` rank and size come from MPI; run
    without ``mpiexec`` it is a world of one process where every collective is the
    identity. ``backend="nccl"`` (GPUs, through CuPy) joins the same way, then MPI
    hands every rank the NCCL unique id, and each rank's collectives run on its GPU
    (``local rank % GPUs``; see :mod:`ember.distributed.nccl`).

    Args:
        backend: ``"mpi"``, ``"nccl"`` (or ``"single"``, a world of one process).
        timeout: seconds (or a ``timedelta``) a collective may wait for the other ranks
            before it raises; default ``EMBER_DIST_TIMEOUT`` or 300.
        world_size, rank: checked against what the launcher set, when given.
        init_method: accepted for PyTorch compatibility; MPI needs none.
        debug: before every collective, check that all ranks call the same one with
            the same shapes, dtypes and arguments (default ``EMBER_DIST_DEBUG=1``).

    >>> dist.init_process_group("mpi")
    >>> dist.get_rank(), dist.get_world_size()
    (0, 1)
    """
    if _world[0] is not None:
        raise DistributedError("init_process_group: the default process group is already "
                               "initialized (call destroy_process_group() first)")
    if debug is not None:
        set_debug(debug)
    if timeout is not None:
        set_timeout(timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout)
    if backend not in ("mpi", "nccl", "single"):
        raise DistributedError(f"init_process_group: unknown backend {backend!r}; expected "
                               "'mpi', 'nccl' (or 'single', a world of one process)")
    runtime = None
    if backend == "nccl":  # (what is missing is said before any process waits on another)
        from . import nccl
        runtime = nccl.load_runtime()
    if backend == "single" or not any(v in os.environ for v in _LAUNCHED_BY):
        group = SingleProcessGroup()
    else:
        try:
            from mpi4py import MPI
        except ImportError:
            raise DistributedError(f"init_process_group: backend {backend!r} needs mpi4py "
                                   "(pip install 'ember[mpi]')") from None
        comm = MPI.COMM_WORLD
        comm.Set_errhandler(MPI.ERRORS_RETURN)
        _meet(comm)
        group = MPIProcessGroup(comm, comm.Get_rank(), tuple(range(comm.Get_size())))
    if runtime is not None:
        group = nccl.create_group(group, runtime)
    for name, want in (("world_size", world_size), ("rank", rank)):
        have = group.size if name == "world_size" else group.rank
        if want is not None and want != have:
            raise DistributedError(f"init_process_group: {name}={want} was asked for but "
                                   f"the launcher started this process as {name} {have}")
    _world[0] = group
    from . import faults
    faults.install(group)
    return group


def _meet(comm) -> None:
    """Wait, under the timeout, until every rank called init_process_group: making the
    group's communicators blocks with no deadline."""
    request, limit = comm.Ibarrier(), get_timeout()
    deadline = time.monotonic() + limit
    while not request.Test():
        if time.monotonic() > deadline:
            # abort, not raise: MPI's exit handler would wait for the missing ranks
            sys.stderr.write(f"[ember.distributed] init_process_group timed out after "
                             f"{limit:g} s on rank {comm.Get_rank()}: not every one of the "
                             f"{comm.Get_size()} ranks called it; aborting the job\n")
            sys.stderr.flush()
            comm.Abort(1)
        time.sleep(0.001)


def is_initialized() -> bool:
    return _world[0] is not None


def group_world() -> ProcessGroup:
    """The default (world) process group; raises when none was initialized."""
    if _world[0] is None:
        raise DistributedError("ember.distributed: the default process group is not "
                               "initialized; call ember.distributed.init_process_group() "
                               "first")
    return _world[0]


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Leave the default group (the process may init again)."""
    if group is None or group is _world[0]:
        _world[0] = None


class _NonGroupMember(ProcessGroup):
    """What :func:`new_group` returns on ranks outside the group (PyTorch's
    ``GroupMember.NON_GROUP_MEMBER``): its rank and size are -1, and a collective on it
    is an error (on its members the group works; here there is nothing to join)."""
    backend = "none"

    def __init__(self):
        super().__init__(-1, -1, (), -1)

    def __repr__(self) -> str:
        return "<ember.distributed non-group member>"


class GroupMember:
    """``GroupMember.WORLD`` (None: the default group) and
    ``GroupMember.NON_GROUP_MEMBER`` (what :func:`new_group` gives non-members)."""
    WORLD = None
    NON_GROUP_MEMBER = _NonGroupMember()


def _group(group) -> ProcessGroup:
    if group is None:
        return group_world()
    if group is GroupMember.NON_GROUP_MEMBER:
        raise DistributedError(
            f"rank {get_rank()} called a collective on a group it is not a member of "
            "(new_group returned GroupMember.NON_GROUP_MEMBER here); only the group's "
            "ranks may call its collectives")
    if not isinstance(group, ProcessGroup):
        raise DistributedError(f"expected group to be a ProcessGroup (from new_group) or "
                               f"None for the world, got {type(group).__name__}")
    return group


def get_rank(group: ProcessGroup | None = None) -> int:
    """This process's rank in ``group`` (the world by default); -1 outside it."""
    if group is None:
        return 0 if _world[0] is None else _world[0].rank
    return group.rank


def get_world_size(group: ProcessGroup | None = None) -> int:
    """The number of ranks of ``group`` (the world by default); -1 outside it."""
    if group is None and _world[0] is None:
        return 1
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return _group(group).size


def get_backend(group: ProcessGroup | None = None) -> str:
    return _group(group).backend


def new_group(ranks=None) -> ProcessGroup:
    """A group of the given global ranks (all by default); every rank of the world must
    call it. Ranks outside the group get ``GroupMember.NON_GROUP_MEMBER`` (rank and size
    -1; a collective on it is an error), as in PyTorch."""
    world = group_world()
    try:
        ranks = list(range(world.size)) if ranks is None else sorted(int(r) for r in ranks)
    except (TypeError, ValueError):
        raise DistributedError(f"new_group: ranks must be a list of integer ranks, got "
                               f"{ranks!r}") from None
    if not ranks or any(not 0 <= r < world.size for r in ranks) or len(set(ranks)) != len(ranks):
        raise DistributedError(f"new_group: ranks must be distinct ranks of the world of "
                               f"{world.size}, got {ranks}")
    group = world.new_group(ranks)
    return GroupMember.NON_GROUP_MEMBER if group is None else group


# Tensors <-> arrays ---------------------------------------------------------------------
def _check_tensor(name, t, what="tensor"):
    if not isinstance(t, Tensor):
        raise DistributedError(f"{name}: expected {what} to be an ember Tensor, got "
                               f"{type(t).__name__}")


def _shape(t) -> str:
    return str(tuple(t.shape))


def _xp(t):
    """The array module of ``t``'s device (buffers for a collective live there too)."""
    return t._device.backend.xp


def _check_device(g: ProcessGroup, name: str, *tensors) -> None:
    """A group bound to one device (NCCL: this rank's GPU) takes tensors on it only."""
    if g.device is None:
        return
    for t in tensors:
        if isinstance(t, Tensor) and t._device != g.device:
            raise DistributedError(
                f"{name}: the {g.backend} process group runs collectives on tensors on "
                f"{g.device} (this rank's device); got a tensor of shape {tuple(t.shape)} "
                f"on {t._device}. Move it with .to('{g.device}') first")


class _Target:
    """A tensor's array to write into (a contiguous copy when it is not contiguous),
    written back and versioned when the collective completes."""

    def __init__(self, name, tensor, what="tensor"):
        _check_tensor(name, tensor, what)
        self.tensor = tensor
        data = tensor._data
        self.array = data if data.flags.c_contiguous and \
            getattr(data.flags, "writeable", True) else _xp(tensor).ascontiguousarray(data)

    def finish(self):
        data = self.tensor._data
        if self.array is not data:
            data[...] = self.array
        self.tensor._version[0] += 1


def _local(group: ProcessGroup, rank, what: str) -> int:
    """The group rank of global rank ``rank``."""
    if isinstance(rank, Tensor) or not isinstance(rank, (int, np.integer)) or \
            rank not in group.ranks:
        raise DistributedError(f"{what}: rank {rank!r} is not in the group of ranks "
                               f"{list(group.ranks)}")
    return group.ranks.index(int(rank))


def _run(work: Work, finishers, async_op: bool):
    inner = work._finish

    def finish():
        if inner is not None:
            inner()
        for f in finishers:
            f()
    work._finish = finish
    if work._done:  # completed at once (a world of one)
        work._done = False
        work._complete()
    if async_op:
        return work
    work.wait()
    return None


def _op_name(name: str, op, tensor) -> str:
    """The reduce op as a string; AVG needs a floating-point tensor (an integer or
    bool average cannot be stored in place)."""
    op = getattr(op, "value", op)
    if op not in REDUCE_OPS:
        raise DistributedError(f"{name}: unknown reduce op {op!r}; expected ReduceOp.SUM, "
                               "AVG, MAX, MIN or PRODUCT")
    if op == "avg" and not tensor.dtype.is_floating_point:
        raise DistributedError(f"{name}: ReduceOp.AVG needs a floating-point tensor, got "
                               f"dtype {tensor.dtype.name}; reduce with SUM and divide")
    return op


def _same_shapes(name, what, tensors, shape, dtype, listed=True):
    for i, t in enumerate(tensors):
        label = f"{what}[{i}]" if listed else what
        _check_tensor(name, t, label)
        if tuple(t.shape) != tuple(shape) or t.dtype is not dtype:
            raise DistributedError(f"{name}: {label} has shape {tuple(t.shape)} and "
                                   f"dtype {t.dtype.name}; expected {tuple(shape)} "
                                   f"{dtype.name}")


def _one_per_rank(name, what, tensors, g):
    if tensors is None or len(tensors) != g.size:
        have = "none" if tensors is None else len(tensors)
        raise DistributedError(f"{name}: {what} has {have} tensors; expected one per rank of "
                               f"the group ({g.size})")


def _split_dim0(name, t, g):
    if t.ndim == 0 or t.shape[0] % g.size:
        raise DistributedError(f"{name}: input of shape {tuple(t.shape)} does not split into "
                               f"{g.size} equal blocks along dim 0 (one per rank)")


def _unpacker(out, targets):
    def unpack():
        for i, t in enumerate(targets):
            t.array[...] = out[i]
            t.finish()
    return unpack


# Collectives ----------------------------------------------------------------------------
def barrier(group=None, async_op: bool = False):
    """Wait until every rank of the group reaches the barrier."""
    g = _group(group)
    check_call(g, "barrier")
    return _run(g.barrier(), [], async_op)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce ``tensor`` across the group, in place, on every rank.

    Args:
        tensor: the same shape and dtype on every rank; holds the result afterwards.
        op: ``ReduceOp.SUM`` (bool: logical or), ``AVG`` (floating point only),
            ``MAX``, ``MIN``, ``PRODUCT`` (bool: logical and).
        group: the process group (the world by default).
        async_op: return a :class:`Work` to ``wait()`` on instead of blocking.

    >>> t = ember.ones(3) * (dist.get_rank() + 1)
    >>> dist.all_reduce(t)            # every rank: 1 + 2 + ... + world size
    """
    g = _group(group)
    _check_device(g, "all_reduce", tensor)
    target = _Target("all_reduce", tensor)
    op = _op_name("all_reduce", op, tensor)
    check_call(g, "all_reduce", shape=_shape(tensor), dtype=tensor.dtype.name, op=op)
    return _run(g.allreduce(target.array, op), [target.finish], async_op)


def broadcast(tensor, src: int, group=None, async_op: bool = False):
    """Copy rank ``src``'s ``tensor`` into every rank's ``tensor`` (same shape and
    dtype on every rank)."""
    g = _group(group)
    _check_device(g, "broadcast", tensor)
    target = _Target("broadcast", tensor)
    root = _local(g, src, "broadcast")
    check_call(g, "broadcast", shape=_shape(tensor), dtype=tensor.dtype.name, src=src)
    return _run(g.broadcast(target.array, root), [target.finish], async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op: bool = False):
    """Every rank's ``input_tensor`` in one ``output_tensor``: concatenated along dim 0
    (``(world * n, ...)`` for an input of ``(n, ...)``; ``(world,)`` for a 0-d input)
    or stacked (``(world, n, ...)``), as PyTorch accepts both."""
    name = "all_gather_into_tensor"
    g = _group(group)
    _check_tensor(name, input_tensor, "input_tensor")
    _check_tensor(name, output_tensor, "output_tensor")
    _check_device(g, name, input_tensor, output_tensor)
    shape = tuple(input_tensor.shape)
    stacked = (g.size,) + shape
    concatenated = (shape[0] * g.size,) + shape[1:] if shape else (g.size,)
    if tuple(output_tensor.shape) not in (stacked, concatenated) or \
            output_tensor.dtype is not input_tensor.dtype:
        raise DistributedError(f"{name}: output_tensor has shape {tuple(output_tensor.shape)}"
                               f" and dtype {output_tensor.dtype.name}; expected "
                               f"{concatenated} (concatenated) or {stacked} (stacked), "
                               f"{input_tensor.dtype.name}")
    target = _Target(name, output_tensor)
    out = target.array.reshape(stacked)
    check_call(g, name, shape=_shape(input_tensor), dtype=input_tensor.dtype.name)
    return _run(g.allgather(out, input_tensor._data), [target.finish], async_op)


def all_gather(tensor_list, tensor, group=None, async_op: bool = False):
    """``tensor_list[i]`` gets rank ``i``'s ``tensor`` (``i`` a rank of the group)."""
    g = _group(group)
    _check_tensor("all_gather", tensor)
    _one_per_rank("all_gather", "tensor_list", tensor_list, g)
    _same_shapes("all_gather", "tensor_list", tensor_list, tensor.shape, tensor.dtype)
    _check_device(g, "all_gather", tensor, *tensor_list)
    out = _xp(tensor).empty((g.size,) + tuple(tensor.shape), tensor._data.dtype)
    targets = [_Target("all_gather", t) for t in tensor_list]
    check_call(g, "all_gather", shape=_shape(tensor), dtype=tensor.dtype.name)
    return _run(g.allgather(out, tensor._data), [_unpacker(out, targets)], async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce ``input`` across ranks and give rank ``i`` its ``i``-th block along dim 0."""
    name = "reduce_scatter_tensor"
    g = _group(group)
    _check_tensor(name, input, "input")
    _split_dim0(name, input, g)
    want = (input.shape[0] // g.size,) + tuple(input.shape[1:])
    _same_shapes(name, "output", [output], want, input.dtype, listed=False)
    op = _op_name(name, op, input)
    _check_device(g, name, input, output)
    target = _Target(name, output)
    check_call(g, name, shape=_shape(input), dtype=input.dtype.name, op=op)
    return _run(g.reduce_scatter(target.array, _xp(input).ascontiguousarray(input._data), op),
                [target.finish], async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce ``input_list`` element-wise across ranks; rank ``i`` gets element ``i``."""
    g = _group(group)
    _check_tensor("reduce_scatter", output, "output")
    _one_per_rank("reduce_scatter", "input_list", input_list, g)
    _same_shapes("reduce_scatter", "input_list", input_list, output.shape, output.dtype)
    op = _op_name("reduce_scatter", op, output)
    _check_device(g, "reduce_scatter", output, *input_list)
    stacked = _xp(output).stack([t._data for t in input_list])
    target = _Target("reduce_scatter", output)
    out = target.array.reshape((1,) + tuple(output.shape))
    check_call(g, "reduce_scatter", shape=_shape(output), dtype=output.dtype.name, op=op)
    return _run(g.reduce_scatter(out, stacked, op), [target.finish], async_op)


def reduce(tensor, dst: int, op=ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce ``tensor`` across ranks into rank ``dst``'s ``tensor`` (the others' are
    left as they were)."""
    g = _group(group)
    _check_device(g, "reduce", tensor)
    target = _Target("reduce", tensor)
    root = _local(g, dst, "reduce")
    op = _op_name("reduce", op, tensor)
    check_call(g, "reduce", shape=_shape(tensor), dtype=tensor.dtype.name, dst=dst, op=op)
    finishers = [target.finish] if g.rank == root else []
    return _run(g.reduce(target.array, root, op), finishers, async_op)


def gather(tensor, gather_list=None, dst: int = 0, group=None, async_op: bool = False):
    """Rank ``dst``'s ``gather_list[i]`` gets rank ``i``'s ``tensor``; the other ranks
    pass no list."""
    g = _group(group)
    _check_tensor("gather", tensor)
    _check_device(g, "gather", tensor, *(gather_list or ()))
    root = _local(g, dst, "gather")
    out, targets = None, []
    if g.rank == root:
        _one_per_rank("gather", f"gather_list on rank {dst}", gather_list, g)
        _same_shapes("gather", "gather_list", gather_list, tensor.shape, tensor.dtype)
        out = _xp(tensor).empty((g.size,) + tuple(tensor.shape), tensor._data.dtype)
        targets = [_Target("gather", t) for t in gather_list]
    check_call(g, "gather", shape=_shape(tensor), dtype=tensor.dtype.name, dst=dst)
    return _run(g.gather(out, tensor._data, root), [_unpacker(out, targets)], async_op)


def scatter(tensor, scatter_list=None, src: int = 0, group=None, async_op: bool = False):
    """Rank ``i``'s ``tensor`` gets rank ``src``'s ``scatter_list[i]``; the other ranks
    pass no list."""
    g = _group(group)
    root = _local(g, src, "scatter")
    _check_device(g, "scatter", tensor, *(scatter_list or ()))
    target = _Target("scatter", tensor)
    stacked = None
    if g.rank == root:
        _one_per_rank("scatter", f"scatter_list on rank {src}", scatter_list, g)
        _same_shapes("scatter", "scatter_list", scatter_list, tensor.shape, tensor.dtype)
        stacked = _xp(tensor).stack([t._data for t in scatter_list])
    out = target.array.reshape((1,) + tuple(tensor.shape))
    check_call(g, "scatter", shape=_shape(tensor), dtype=tensor.dtype.name, src=src)
    return _run(g.scatter(out, stacked, root), [target.finish], async_op)


def all_to_all_single(output, input, group=None, async_op: bool = False):
    """Block ``j`` of rank ``i``'s ``input`` (dim 0) becomes block ``i`` of rank ``j``'s
    ``output`` (equal blocks; uneven split sizes are not supported)."""
    name = "all_to_all_single"
    g = _group(group)
    _check_tensor(name, input, "input")
    _split_dim0(name, input, g)
    _same_shapes(name, "output", [output], input.shape, input.dtype, listed=False)
    _check_device(g, name, input, output)
    target = _Target(name, output)
    check_call(g, name, shape=_shape(input), dtype=input.dtype.name)
    return _run(g.alltoall(target.array, _xp(input).ascontiguousarray(input._data)),
                [target.finish],
                async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op: bool = False):
    """``output_tensor_list[i]`` on rank ``j`` gets ``input_tensor_list[j]`` of rank ``i``
    (all tensors of one shape and dtype)."""
    g = _group(group)
    _one_per_rank("all_to_all", "output_tensor_list", output_tensor_list, g)
    _one_per_rank("all_to_all", "input_tensor_list", input_tensor_list, g)
    first = input_tensor_list[0]
    _check_tensor("all_to_all", first, "input_tensor_list[0]")
    _same_shapes("all_to_all", "input_tensor_list", input_tensor_list, first.shape, first.dtype)
    _same_shapes("all_to_all", "output_tensor_list", output_tensor_list, first.shape,
                 first.dtype)
    _check_device(g, "all_to_all", *input_tensor_list, *output_tensor_list)
    stacked = _xp(first).stack([t._data for t in input_tensor_list])
    out = _xp(first).empty_like(stacked)
    targets = [_Target("all_to_all", t) for t in output_tensor_list]
    check_call(g, "all_to_all", shape=_shape(first), dtype=first.dtype.name)
    return _run(g.alltoall(out, stacked), [_unpacker(out, targets)], async_op)


def _check_tag(name: str, tag) -> int:
    # MPI guarantees tags 0..32767 on every implementation
    if isinstance(tag, bool) or not isinstance(tag, (int, np.integer)) or \
            not 0 <= tag <= 32767:
        raise DistributedError(f"{name}: tag must be an integer in [0, 32767], got {tag!r}")
    return int(tag)


def isend(tensor, dst: int, group=None, tag: int = 0) -> Work:
    """Send ``tensor`` to rank ``dst`` without waiting; ``wait()`` the returned work
    before changing ``tensor``."""
    g = _group(group)
    _check_tensor("isend", tensor)
    _check_device(g, "isend", tensor)
    tag = _check_tag("isend", tag)
    return _run(g.send(tensor._data, _local(g, dst, "isend"), tag), [], True)


def irecv(tensor, src: int, group=None, tag: int = 0) -> Work:
    """Receive into ``tensor`` from rank ``src`` without waiting (``src=None``, any
    source, is not supported: name the sender)."""
    g = _group(group)
    _check_device(g, "irecv", tensor)
    target = _Target("irecv", tensor)
    tag = _check_tag("irecv", tag)
    return _run(g.recv(target.array, _local(g, src, "irecv"), tag), [target.finish], True)


def send(tensor, dst: int, group=None, tag: int = 0) -> None:
    """Send ``tensor`` to rank ``dst``; returns when it may be changed again."""
    isend(tensor, dst, group, tag).wait()


def recv(tensor, src: int, group=None, tag: int = 0) -> int:
    """Receive into ``tensor`` from rank ``src``; returns ``src``."""
    irecv(tensor, src, group, tag).wait()
    return src
