"""What a Trainer checkpoint holds: building it from a Trainer's state, and putting a
loaded one back (the file format is in :mod:`ember.train.checkpoint`)."""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any

from .arguments import state_of
from .checkpoint import FORMAT, VERSION
from .errors import TrainerError
from .rng_state import capture_rng, restore_rng, rng_to_json

__all__ = ["build_checkpoint", "restore_checkpoint", "callback_keys"]

# The Trainer's own entries and the JSON type each must have (None allowed where a
# Trainer may have no such object).
_ENTRIES = {"model": dict, "optimizer": dict, "scheduler": (dict, type(None)),
            "grad_scaler": (dict, type(None)), "loop": dict, "train_metrics": dict,
            "rng": dict, "epoch_start_rng": dict, "loader": (dict, type(None)),
            "callbacks": dict, "history": dict, "logged": dict}
_COUNTS = ("epoch", "batch", "global_step", "skipped_steps")


def _malformed(path, key: str, what: str) -> TrainerError:
    return TrainerError(f"Trainer: the checkpoint {os.fspath(path)!r} is malformed: its "
                        f"entry {key!r} {what}; it was not written by ember.train, or was "
                        "damaged")


def _check_structure(state: dict[str, Any], path) -> None:
    """Check the types of the entries the Trainer reads itself, so a hostile or damaged
    file is an error naming the entry rather than a raw TypeError deep inside."""
    for key, kind in _ENTRIES.items():
        if key not in state:
            raise TrainerError(f"Trainer: the checkpoint {os.fspath(path)!r} lacks the "
                               f"entry {key!r}; it was not written by this version of "
                               "ember.train")
        if not isinstance(state[key], kind):
            raise _malformed(path, key, f"is a {type(state[key]).__name__}")
    loop = state["loop"]
    for key in _COUNTS:
        value = loop.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _malformed(path, f"loop.{key}", f"is {value!r}, not an int >= 0")
    loss = loop.get("epoch_loss")
    if not (isinstance(loss, list) and len(loss) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in loss)):
        raise _malformed(path, "loop.epoch_loss", f"is {str(loss)[:60]}, not [sum, count]")
    for key, value in state["logged"].items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise _malformed(path, f"logged.{key}", f"is {str(value)[:60]}, not a number")


@contextmanager
def _entry(path, key: str):
    """Turn a raw error from restoring entry ``key`` into one that names it."""
    try:
        yield
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        if isinstance(exc, TrainerError):
            raise
        raise _malformed(path, key, f"does not fit ({type(exc).__name__}: {exc})") \
            from None


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
    if batch == 0 and not trainer._epoch_done and trainer._epoch_start_rng is not None:
        # The epoch's iterator was made (its order drawn) but no batch is done: the
        # resume makes it again, so it must start from the states before it was made.
        rng = trainer._epoch_start_rng
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
    _check_structure(state, path)
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
            with _entry(path, name):
                obj.load_state_dict(saved)
    for name, m in trainer.train_metrics.items():
        with _entry(path, f"train_metrics.{name}"):
            m.load_state_dict(state["train_metrics"][name])
    with _entry(path, "history"):
        trainer.history.load_state_dict(state["history"])
    with _entry(path, "rng"):
        restore_rng(state["rng"], trainer._generators())
    with _entry(path, "epoch_start_rng"):  # (checked now: it is used only later)
        restore_rng(state["epoch_start_rng"], trainer._generators())
        restore_rng(state["rng"], trainer._generators())
    loop = state["loop"]
    trainer.epoch, trainer.batch_in_epoch = loop["epoch"], loop["batch"]
    trainer.global_step = loop["global_step"]
    trainer.skipped_steps = loop["skipped_steps"]
    trainer._epoch_loss = list(loop["epoch_loss"])
    trainer._epoch_done = False
    trainer.logged = dict(state["logged"])
    trainer._resume = {"batch": trainer.batch_in_epoch, "rng": state["rng"],
                       "epoch_start_rng": state["epoch_start_rng"],
                       "loader": state["loader"]}
    for key, cb in callback_keys(trainer.callbacks):
        if key in state["callbacks"]:
            with _entry(path, f"callbacks.{key}"):
                cb.load_state_dict(state["callbacks"][key])
