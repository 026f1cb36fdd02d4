"""``ember.cpu``: PyTorch's ``torch.cpu`` queries, so that device-generic code written
as ``getattr(torch, device_type).synchronize()`` runs with ``device_type="cpu"``, and
``ember.cpu.amp`` (the deprecated autocast and GradScaler names).

>>> ember.cpu.is_available(), ember.cpu.device_count(), ember.cpu.current_device()
(True, 1, 'cpu')
"""
from __future__ import annotations

from . import amp

__all__ = ["amp", "is_available", "is_initialized", "device_count", "current_device",
           "set_device", "synchronize"]


def is_available() -> bool:
    """True: the CPU is always there."""
    return True


def is_initialized() -> bool:
    """True: the CPU needs no initialisation."""
    return True


def device_count() -> int:
    """1: ember sees the CPU as one device."""
    return 1


def current_device() -> str:
    """``"cpu"``."""
    return "cpu"


def set_device(device) -> None:
    """Does nothing (there is one CPU device), as in PyTorch."""


def synchronize(device=None) -> None:
    """Does nothing: CPU ops have finished when they return."""
