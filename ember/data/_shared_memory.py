"""Batches from worker processes through shared memory.

A worker copies every array of a batch into one POSIX shared-memory segment (a file
under ``/dev/shm``) and sends only a small description through its queue: where each
array lies in the segment, its shape and dtype. The main process maps the segment,
removes its name at once (the memory lives on while an array uses it) and wraps the
arrays in place, so a batch is copied once, by the worker, and never pickled.

Where there is no ``/dev/shm``, or it is full, the arrays travel inside the message.
"""
from __future__ import annotations

import collections.abc
import mmap
import os
from typing import NamedTuple

import numpy as np

from ..tensor import Tensor
from .collate import _rebuild_mapping, _rebuild_sequence

__all__ = ["pack", "unpack", "discard", "remove_segments", "shared_memory_available",
           "SHM_DIR"]

SHM_DIR = "/dev/shm"
_ALIGN = 64  # each array starts on a cache line


class _Slot(NamedTuple):
    """Where one array of a batch is: ``offset`` into the segment, or ``inline`` data."""
    tensor: bool
    requires_grad: bool
    shape: tuple
    dtype: np.dtype
    offset: int
    inline: np.ndarray | None


def _shareable(arr) -> bool:
    return isinstance(arr, np.ndarray) and not arr.dtype.hasobject


def _is_array(x) -> bool:
    return isinstance(x, Tensor) or _shareable(x)


def _map(obj, is_leaf, fn):
    """``obj`` with every leaf (``is_leaf(x)``) replaced by ``fn(x)``, keeping the
    containers (mappings, namedtuples, tuples, lists) and leaving anything else as is."""
    if is_leaf(obj):
        return fn(obj)
    if isinstance(obj, (str, bytes)) or not isinstance(
            obj, (collections.abc.Mapping, collections.abc.Sequence)):
        return obj
    if isinstance(obj, collections.abc.Mapping):
        return _rebuild_mapping(obj, {k: _map(v, is_leaf, fn) for k, v in obj.items()})
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_map(v, is_leaf, fn) for v in obj))
    if isinstance(obj, tuple):
        return tuple(_map(v, is_leaf, fn) for v in obj)
    return _rebuild_sequence(obj, [_map(v, is_leaf, fn) for v in obj])


def _array_of(x) -> np.ndarray:
    return x._data if isinstance(x, Tensor) else x


def pack(batch, name: str | None):
    """``(description, segment)``: ``batch`` with its arrays described, and the name of
    the segment under :data:`SHM_DIR` holding them (None if nothing was written there).
    ``name=None`` sends the arrays inline."""
    arrays: list[np.ndarray] = []

    def collect(x):
        arr = _array_of(x)
        if not isinstance(arr, np.ndarray):  # a device array: let pickling say what's wrong
            return x
        arrays.append(arr)
        return x

    _map(batch, _is_array, collect)
    offsets, total = [], 0
    for arr in arrays:
        offsets.append(total)
        total += -(-arr.nbytes // _ALIGN) * _ALIGN
    segment = None
    if name is not None and total > 0:
        segment = _write_segment(name, arrays, offsets, total)
    inline = segment is None
    slots = iter(zip(arrays, offsets))

    def describe(x):
        arr = _array_of(x)
        if not isinstance(arr, np.ndarray):
            return x
        arr, offset = next(slots)
        return _Slot(isinstance(x, Tensor), isinstance(x, Tensor) and x.requires_grad,
                     arr.shape, arr.dtype, offset, arr if inline else None)

    return _map(batch, _is_array, describe), segment


def _write_segment(name: str, arrays: list, offsets: list, total: int) -> str | None:
    path = os.path.join(SHM_DIR, name)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    except OSError:
        return None
    try:
        # Plain writes, not a mapping: about twice as fast (no page faults), and a full
        # /dev/shm fails here with ENOSPC rather than with SIGBUS later. Only alignment
        # padding, which nobody reads, is left as holes by the final truncate.
        for arr, offset in zip(arrays, offsets):
            data = memoryview(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))
            while data:
                written = os.pwrite(fd, data, offset)
                if written == 0:  # never loop forever on a file that takes nothing
                    raise OSError(f"could not write to {path}")
                data, offset = data[written:], offset + written
        os.ftruncate(fd, total)
    except OSError:
        os.close(fd)
        discard(name)
        return None
    os.close(fd)
    return name


def unpack(description, segment: str | None):
    """The batch :func:`pack` described, its arrays mapped from ``segment`` (whose name
    is removed here: the memory is freed when the last array using it is)."""
    mm = None
    if segment is not None:
        path = os.path.join(SHM_DIR, segment)
        fd = os.open(path, os.O_RDWR)
        try:
            mm = mmap.mmap(fd, 0)
        finally:
            os.close(fd)
            discard(segment)

    def rebuild(slot):
        if slot.inline is not None:
            arr = slot.inline
        elif 0 in slot.shape:
            arr = np.empty(slot.shape, slot.dtype)
        else:
            count = int(np.prod(slot.shape, dtype=np.int64))
            arr = np.frombuffer(mm, slot.dtype, count, slot.offset).reshape(slot.shape)
        if slot.tensor:
            return Tensor._make(arr, requires_grad=slot.requires_grad)
        return arr

    return _map(description, lambda x: isinstance(x, _Slot), rebuild)


def discard(segment: str | None) -> None:
    """Remove a segment's name (a no-op if it is already gone)."""
    if segment is None:
        return
    try:
        os.unlink(os.path.join(SHM_DIR, segment))
    except FileNotFoundError:
        pass


def remove_segments(prefix: str) -> None:
    """Remove every segment whose name starts with ``prefix``: those written by workers
    that were stopped or killed before the main process read them."""
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return
    for name in names:
        if name.startswith(prefix):
            discard(name)


def shared_memory_available() -> bool:
    return os.path.isdir(SHM_DIR) and os.access(SHM_DIR, os.W_OK)
