"""``ember.random``: the seeding functions of ``torch.random`` (the same ones
``ember.manual_seed`` and friends are) and :func:`fork_rng`, which runs a block of code
with the random state put back afterwards.

>>> with ember.random.fork_rng():
...     noise = ember.randn(3)  # the global stream continues as if this never ran
"""
from __future__ import annotations

import contextlib
from typing import Iterable, Iterator

from .backends import device as _device
from .ops.random import (default_generator, get_rng_state, initial_seed, manual_seed, seed,
                         set_rng_state)

__all__ = ["fork_rng", "get_rng_state", "initial_seed", "manual_seed", "seed",
           "set_rng_state"]


def _device_count(device_type: str) -> int:
    if device_type == "cuda":
        from . import cuda
        return cuda.device_count()
    return 0


@contextlib.contextmanager
def fork_rng(devices: Iterable[int] | None = None, enabled: bool = True,
             _caller: str = "fork_rng", _devices_kw: str = "devices",
             device_type: str | None = None) -> Iterator[None]:
    """A context manager that saves the CPU's default generator state, and those of the
    ``devices`` of ``device_type`` (``"cuda"`` by default; all of them when ``devices``
    is None), and restores them on exit, so random draws inside the block leave the
    streams outside it untouched.

    Args:
        devices: indices of the devices whose generators to save (None: every one).
        enabled: False makes the context manager do nothing.
        device_type: the device type of ``devices`` (``"cuda"``).

    >>> _ = ember.manual_seed(0)
    >>> with ember.random.fork_rng():
    ...     _ = ember.rand(2)
    >>> after = ember.rand(2)
    >>> _ = ember.manual_seed(0)
    >>> bool((ember.rand(2) == after).all())
    True
    """
    if not enabled:
        yield
        return
    device_type = device_type or "cuda"
    indices = range(_device_count(device_type)) if devices is None else devices
    generators = [default_generator(_device(f"{device_type}:{int(i)}")) for i in indices]
    cpu_state = get_rng_state()
    states = [g.get_state() for g in generators]
    try:
        yield
    finally:
        set_rng_state(cpu_state)
        for g, state in zip(generators, states):
            g.set_state(state)
