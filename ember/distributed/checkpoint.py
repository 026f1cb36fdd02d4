"""Distributed checkpoints: a directory that every rank writes its part of.

Layout of a checkpoint directory::

    model.safetensors                  rank 0: the model's state dict (a DDP wrapper is
                                       unwrapped, so a plain model loads it) and `extra`
    optimizer.safetensors              rank 0: a plain optimizer's state dict, or
    optimizer-rank00001-of-00004.safetensors
                                       each rank: its ZeroRedundancyOptimizer shard
    COMPLETE                           rank 0, last: world size and the file list

Every file is written through ``ember.save`` (temporary file, fsync, rename). The
``COMPLETE`` marker is removed before anything is written and written by rank 0 only
after a barrier that every rank reaches once its own files are on disk, so a
checkpoint interrupted half-way is never taken for a complete one.

:func:`consolidate` (or ``python -m ember.distributed.checkpoint consolidate DIR OUT``)
turns a sharded directory into one file ``{"model", "optimizer", "extra"}`` whose
optimizer state a plain optimizer loads.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any

from ..errors import EmberError
from ..serialization import atomic_write, load, save
from .process_group import DistributedError, ProcessGroup

__all__ = ["save_checkpoint", "load_checkpoint", "consolidate", "is_complete",
           "DistributedCheckpointError"]

MARKER = "COMPLETE"
MODEL_FILE = "model.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"


class DistributedCheckpointError(EmberError):
    """A distributed checkpoint that is incomplete, of another world size, or malformed."""


def _shard_file(rank: int, size: int) -> str:
    return f"optimizer-rank{rank:05d}-of-{size:05d}.safetensors"


def _is_zero(optimizer) -> bool:
    from .zero import ZeroRedundancyOptimizer
    return isinstance(optimizer, ZeroRedundancyOptimizer)


def _unwrap(model):
    from .ddp import DistributedDataParallel
    return model.module if isinstance(model, DistributedDataParallel) else model


def _group(group):
    from .collectives import _group as world_or
    return world_or(group)


def is_complete(directory: str | os.PathLike) -> bool:
    """Whether ``directory`` holds a checkpoint whose every part was written."""
    return os.path.isfile(os.path.join(os.fspath(directory), MARKER))


def save_checkpoint(directory: str | os.PathLike, model=None, optimizer=None,
                    extra: dict | None = None, group: ProcessGroup | None = None) -> str:
    """Write a checkpoint of ``model`` and ``optimizer`` into ``directory``; every rank
    of ``group`` must call it. Returns the directory.

    Args:
        directory: created if missing (a shared filesystem when the ranks run on
            several machines). An older checkpoint there is replaced.
        model: a module or a ``DistributedDataParallel`` (rank 0 writes it).
        optimizer: a plain optimizer (rank 0 writes it) or a
            ``ZeroRedundancyOptimizer`` (each rank writes its shard).
        extra: plain values to keep (step, epoch, ...), written by rank 0.

    >>> save_checkpoint("ckpt/step-100", model, opt, extra={"step": 100})
    """
    directory = os.fspath(directory)
    g = _group(group)
    marker = os.path.join(directory, MARKER)
    if g.rank == 0:
        os.makedirs(directory, exist_ok=True)
        if os.path.exists(marker):
            os.unlink(marker)   # from here on the directory is not a complete checkpoint
    g.barrier().wait()
    files = []
    if g.rank == 0:
        state = {"extra": dict(extra or {}), "world_size": g.size}
        if model is not None:
            state["model"] = _unwrap(model).state_dict()
        save(state, os.path.join(directory, MODEL_FILE))
    files.append(MODEL_FILE)
    if optimizer is not None:
        if _is_zero(optimizer):
            name = _shard_file(g.rank, g.size)
            save({"optimizer": optimizer.local_state_dict(), "rank": g.rank,
                  "world_size": g.size}, os.path.join(directory, name))
            files += [_shard_file(r, g.size) for r in range(g.size)]
        else:
            if g.rank == 0:
                save({"optimizer": optimizer.state_dict()},
                     os.path.join(directory, OPTIMIZER_FILE))
            files.append(OPTIMIZER_FILE)
    g.barrier().wait()          # every rank's files are on disk
    if g.rank == 0:
        text = json.dumps({"world_size": g.size, "files": files,
                           "sharded_optimizer": _is_zero(optimizer)}).encode()
        atomic_write(marker, text)
    g.barrier().wait()          # nobody returns before the checkpoint is complete
    return directory


def _read_marker(directory: str) -> dict:
    marker = os.path.join(directory, MARKER)
    if not os.path.isfile(marker):
        raise DistributedCheckpointError(
            f"{directory} is not a complete distributed checkpoint: its {MARKER} marker is "
            "missing (the save was interrupted, or this is not a checkpoint directory)")
    with open(marker, "rb") as f:
        try:
            info = json.loads(f.read())
        except ValueError as e:
            raise DistributedCheckpointError(f"{marker}: malformed marker ({e})") from None
    missing = [name for name in info.get("files", [])
               if not os.path.isfile(os.path.join(directory, name))]
    if missing:
        raise DistributedCheckpointError(f"{directory}: the checkpoint lists files that are "
                                         f"missing: {', '.join(missing)}")
    return info


def load_checkpoint(directory: str | os.PathLike, model=None, optimizer=None,
                    group: ProcessGroup | None = None) -> dict[str, Any]:
    """Restore ``model`` and ``optimizer`` from a checkpoint written by
    :func:`save_checkpoint`; every rank calls it. A sharded (ZeRO) optimizer needs the
    same world size as the save (or load the file :func:`consolidate` makes with
    ``optimizer.load_state_dict``). Returns the ``extra`` values.
    """
    directory = os.fspath(directory)
    g = _group(group)
    info = _read_marker(directory)
    state = load(os.path.join(directory, MODEL_FILE))
    if model is not None:
        if "model" not in state:
            raise DistributedCheckpointError(f"{directory}: the checkpoint holds no model")
        _unwrap(model).load_state_dict(state["model"])
    if optimizer is not None:
        if _is_zero(optimizer):
            if not info.get("sharded_optimizer"):
                raise DistributedCheckpointError(
                    f"{directory}: the optimizer was saved unsharded; a "
                    "ZeroRedundancyOptimizer loads it with optimizer.load_state_dict("
                    f"ember.load('{os.path.join(directory, OPTIMIZER_FILE)}')['optimizer'])")
            if info["world_size"] != g.size:
                raise DistributedCheckpointError(
                    f"{directory}: the optimizer shards were written by {info['world_size']} "
                    f"ranks, but this job has {g.size}; resume with {info['world_size']} "
                    "ranks, or consolidate() the checkpoint and load the single file")
            shard = load(os.path.join(directory, _shard_file(g.rank, g.size)))
            optimizer.load_state_dict(shard["optimizer"])
        else:
            if info.get("sharded_optimizer"):
                raise DistributedCheckpointError(
                    f"{directory}: the optimizer state is sharded (ZeRO); load it into a "
                    "ZeroRedundancyOptimizer, or consolidate() the checkpoint first")
            optimizer.load_state_dict(load(os.path.join(directory, OPTIMIZER_FILE))["optimizer"])
    # nobody moves on (and perhaps overwrites the checkpoint) while another still reads it
    g.barrier().wait()
    return state.get("extra", {})


def consolidate(sharded_dir: str | os.PathLike, out_file: str | os.PathLike) -> str:
    """Merge a checkpoint directory into one file ``{"model", "optimizer", "extra"}``
    (the optimizer state in the plain optimizer's format). Runs in one process, no
    MPI needed. Returns ``out_file``.

    >>> consolidate("ckpt/step-100", "step-100.safetensors")
    >>> opt.load_state_dict(ember.load("step-100.safetensors")["optimizer"])
    """
    from .zero import merge_shards
    directory = os.fspath(sharded_dir)
    info = _read_marker(directory)
    state = load(os.path.join(directory, MODEL_FILE))
    out: dict[str, Any] = {"extra": state.get("extra", {})}
    if "model" in state:
        out["model"] = state["model"]
    if info.get("sharded_optimizer"):
        shards = [load(os.path.join(directory, _shard_file(r, info["world_size"])))["optimizer"]
                  for r in range(info["world_size"])]
        try:
            out["optimizer"] = merge_shards(shards)
        except DistributedError as e:
            raise DistributedCheckpointError(f"{directory}: {e}") from None
    elif os.path.isfile(os.path.join(directory, OPTIMIZER_FILE)):
        out["optimizer"] = load(os.path.join(directory, OPTIMIZER_FILE))["optimizer"]
    save(out, os.fspath(out_file))
    return os.fspath(out_file)


def main(argv: list[str] | None = None) -> int:
    """``python -m ember.distributed.checkpoint consolidate DIR OUT``"""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3 or argv[0] != "consolidate":
        print("usage: python -m ember.distributed.checkpoint consolidate DIR OUT",
              file=sys.stderr)
        return 2
    try:
        consolidate(argv[1], argv[2])
    except (EmberError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
