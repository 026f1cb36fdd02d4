"""What a Trainer checkpoint holds: building it from a Trainer's state, and putting a
loaded one back (the file format is in :mod:`ember.train.checkpoint`)."""
from __future__ import annotations

import os
from typing import Any

from .arguments import state_of
from .checkpoint import FORMAT, VERSION
from .errors import TrainerError
from .rng_state import capture_rng, restore_rng, rng_to_json

__all__ = ["build_checkpoint", "restore_checkpoint", "callback_keys"]


def callback_keys(callbacks) -> list[tuple[str, Any]]:
    """``(key, callback)`` pairs: each callback's ``state_key``, numbered ``#1``,
    ``#2``, ... from the second callback of a kind on."""
    seen: dict[str, int] = {}
    out = []
    for cb in callbacks:
        key = cb.state_key
        n = seen.get(key, 0)
        seen[key] = n + 1
        out.append((key if n == 0 else f"{key}#{n}", cb))
    return out


def build_checkpoint(trainer, emergency: bool) -> dict[str, Any]:
    """The trainer's full state as a checkpoint dict. An emergency checkpoint taken
    inside a step stands at that step's start, so a resume redoes the step."""
    epoch, batch = trainer.position()
    rng = capture_rng(trainer._generators())
    loader_state = None
    if emergency and trainer._in_step:
        rng, batch = trainer._step_start
    elif batch > 0 and callable(getattr(trainer.train_loader, "state_dict", None)):
        loader_state = trainer.train_loader.state_dict()
    epoch_start = trainer._epoch_start_rng if batch > 0 else rng
    return {
        "format": FORMAT, "version": VERSION, "emergency": emergency,
        "model": trainer.model.state_dict(), "optimizer": trainer.optimizer.state_dict(),
        "scheduler": state_of(trainer.scheduler),
        "grad_scaler": state_of(trainer.grad_scaler),
        "loop": {"epoch": epoch, "batch": batch, "global_step": trainer.global_step,
                 "skipped_steps": trainer.skipped_steps,
                 "epoch_loss": list(trainer._epoch_loss) if batch > 0 else [0.0, 0]},
        "train_metrics": {k: m.state_dict() for k, m in trainer.train_metrics.items()},
        "rng": rng_to_json(rng), "epoch_start_rng": rng_to_json(epoch_start),
        "loader": loader_state,
        "callbacks": {key: cb.state_dict() for key, cb in callback_keys(trainer.callbacks)},
        "history": trainer.history.state_dict(), "logged": dict(trainer.logged),
    }


def restore_checkpoint(trainer, state: dict[str, Any], path: str | os.PathLike) -> None:
    """Put the state of a loaded checkpoint back into ``trainer``; its next ``fit``
    continues from there."""
    try:
        trainer.model.load_state_dict(state["model"])
        trainer.optimizer.load_state_dict(state["optimizer"])
        for name, obj in (("scheduler", trainer.scheduler),
                          ("grad_scaler", trainer.grad_scaler)):
            saved = state[name]
            if (saved is None) != (obj is None):
                has = "has no" if saved is None else "has a"
                raise TrainerError(f"Trainer: the checkpoint {has} {name} state but this "
                                   f"Trainer {'has' if saved is None else 'has no'} {name}")
            if obj is not None:
                obj.load_state_dict(saved)
        loop = state["loop"]
        trainer.epoch, trainer.batch_in_epoch = loop["epoch"], loop["batch"]
        trainer.global_step = loop["global_step"]
        trainer.skipped_steps = loop["skipped_steps"]
        trainer._epoch_loss = list(loop["epoch_loss"])
        trainer._epoch_done = False
        for name, m in trainer.train_metrics.items():
            m.load_state_dict(state["train_metrics"][name])
        trainer.history.load_state_dict(state["history"])
        trainer.logged = dict(state["logged"])
        trainer._resume = {"batch": trainer.batch_in_epoch, "rng": state["rng"],
                           "epoch_start_rng": state["epoch_start_rng"],
                           "loader": state["loader"]}
        restore_rng(state["rng"], trainer._generators())
        for key, cb in callback_keys(trainer.callbacks):
            if key in state["callbacks"]:
                cb.load_state_dict(state["callbacks"][key])
    except KeyError as exc:
        raise TrainerError(f"Trainer: the checkpoint {os.fspath(path)!r} lacks the entry "
                           f"{exc}; it was not written by this version of ember.train") \
            from None
