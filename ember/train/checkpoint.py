"""Trainer checkpoints on disk: one safetensors file each (tensors in safetensors, the
rest JSON, never pickle), written atomically by :func:`ember.save`, so a process killed
while writing leaves the previous checkpoint whole.

A checkpoint is a dict::

    {"format": "ember.train.checkpoint", "version": 1,
     "model": ..., "optimizer": ..., "scheduler": ... | None, "grad_scaler": ... | None,
     "loop": {"epoch", "batch", "global_step", ...},   # where training stands
     "rng": ..., "epoch_start_rng": ...,               # every random state
     "loader": ... | None,                             # train_loader.state_dict()
     "callbacks": {...}, "history": {...}, "emergency": bool}

File names carry the step (``epoch=2-step=300.safetensors``); the latest checkpoint of
a folder is the one with the highest step (the newest file among equal steps).
"""
from __future__ import annotations

import os
import re
from typing import Any

from ..serialization import CheckpointError, load, save
from .errors import TrainerError

__all__ = ["FORMAT", "VERSION", "checkpoint_name", "write_checkpoint", "read_checkpoint",
           "find_checkpoints", "latest_checkpoint"]

FORMAT = "ember.train.checkpoint"
VERSION = 1
SUFFIX = ".safetensors"
_STEP = re.compile(r"step=(\d+)")


def checkpoint_name(epoch: int, step: int, prefix: str = "") -> str:
    """``"{prefix}epoch={epoch}-step={step}.safetensors"``."""
    return f"{prefix}epoch={epoch}-step={step}{SUFFIX}"


def write_checkpoint(state: dict[str, Any], path: str | os.PathLike) -> str:
    """Write ``state`` to ``path`` atomically; returns the path."""
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    save(state, path)
    return path


def read_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Load a checkpoint written by :func:`write_checkpoint`; a file that is not one is
    a :class:`~ember.serialization.CheckpointError` naming the path."""
    state = load(path)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"Trainer: {os.fspath(path)!r} is not a Trainer checkpoint "
                              f"(no format {FORMAT!r}); a model's state dict loads with "
                              "model.load_state_dict(ember.load(path))")
    if state.get("version") != VERSION:
        raise CheckpointError(f"Trainer: {os.fspath(path)!r} is a version "
                              f"{state.get('version')!r} checkpoint; this ember reads "
                              f"version {VERSION}")
    return state


def find_checkpoints(dirpath: str | os.PathLike) -> list[str]:
    """The Trainer checkpoints in ``dirpath``, oldest first: by step, then by file time
    (half-written temporary files are not checkpoints and are skipped)."""
    dirpath = os.fspath(dirpath)
    if not os.path.isdir(dirpath):
        return []
    found = []
    for name in os.listdir(dirpath):
        match = _STEP.search(name)
        if name.startswith(".") or not name.endswith(SUFFIX) or match is None:
            continue
        path = os.path.join(dirpath, name)
        try:
            mtime = os.stat(path).st_mtime_ns
        except FileNotFoundError:  # removed meanwhile (keep_last_k of another run)
            continue
        found.append((int(match.group(1)), mtime, path))
    return [path for _, _, path in sorted(found)]


def latest_checkpoint(dirpath: str | os.PathLike) -> str:
    """The path of the latest checkpoint in ``dirpath`` that loads; error if none."""
    candidates = find_checkpoints(dirpath)
    for path in reversed(candidates):
        try:
            read_checkpoint(path)
        except CheckpointError:
            continue  # damaged (a copy cut short by hand): fall back to the one before
        return path
    raise TrainerError(f"Trainer: resume_from='latest' found no loadable checkpoint in "
                       f"{os.fspath(dirpath)!r} (expected files named like "
                       f"{checkpoint_name(0, 100)!r})")
