"""Every random state a training run depends on, captured as plain JSON-able values and
restored exactly: ember's default generator, the generators a DataLoader and its
samplers draw from, Python's ``random`` and NumPy's global generator."""
from __future__ import annotations

import random
from typing import Any

import numpy as np

from ..ops import random as ember_random
from ..ops.random import Generator

__all__ = ["loader_generators", "capture_rng", "rng_to_json", "restore_rng"]


def loader_generators(loader) -> list[Generator]:
    """The distinct :class:`ember.Generator` objects ``loader`` (or its samplers) draw
    from, in a fixed order (so a checkpoint lists them in the same order each time)."""
    if loader is None:
        return []
    found: list[Generator] = []
    candidates = [getattr(loader, "generator", None)]
    sampler = getattr(loader, "sampler", None)
    candidates.append(getattr(sampler, "generator", None))
    batch_sampler = getattr(loader, "batch_sampler", None)
    candidates.append(getattr(getattr(batch_sampler, "sampler", None), "generator", None))
    for gen in candidates:
        if isinstance(gen, Generator) and all(gen is not g for g in found):
            found.append(gen)
    return found


def capture_rng(generators: list[Generator]) -> dict[str, Any]:
    """The random states now, cheaply (a few microseconds: the Trainer takes one at every
    step); :func:`rng_to_json` turns them into plain values for a checkpoint."""
    return {"ember": ember_random.get_rng_state(),
            "python": random.getstate(),
            "numpy": np.random.get_state(legacy=False),
            "loader": [g.get_state() for g in generators]}


def rng_to_json(state: dict[str, Any]) -> dict[str, Any]:
    """A state from :func:`capture_rng` as JSON-able values (lists of ints)."""
    version, internal, gauss = state["python"]
    numpy_state = dict(state["numpy"])
    inner = dict(numpy_state["state"])
    inner["key"] = [int(k) for k in inner["key"]]
    numpy_state["state"] = inner
    return {"ember": state["ember"], "python": [version, list(internal), gauss],
            "numpy": numpy_state, "loader": list(state["loader"])}


def restore_rng(state: dict[str, Any], generators: list[Generator]) -> None:
    """Put back the random states from :func:`capture_rng` or :func:`rng_to_json`."""
    saved = state["loader"]
    if len(saved) != len(generators):
        from .errors import TrainerError
        raise TrainerError(f"checkpoint: it holds the states of {len(saved)} data-loader "
                           f"generator(s), but the train loader has {len(generators)}; "
                           "resume with a loader built the same way")
    ember_random.set_rng_state(state["ember"])
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    numpy_state = dict(state["numpy"])
    inner = dict(numpy_state["state"])
    inner["key"] = np.asarray(inner["key"], dtype=np.uint32)
    numpy_state["state"] = inner
    np.random.set_state(numpy_state)
    for gen, gen_state in zip(generators, saved):
        gen.set_state(gen_state)
