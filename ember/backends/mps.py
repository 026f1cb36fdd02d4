"""``ember.backends.mps``: PyTorch's ``torch.backends.mps`` queries, for porting.

ember has no Metal (Apple GPU) backend, so a script's ``device = "mps" if
torch.backends.mps.is_available() else "cpu"`` picks the CPU.

>>> ember.backends.mps.is_available()
False
"""
from __future__ import annotations

__all__ = ["is_available", "is_built", "is_macos13_or_newer", "is_macos_or_newer"]


def is_available() -> bool:
    """False: ember has no MPS (Apple GPU) backend."""
    return False


def is_built() -> bool:
    """False: ember is not built with MPS support."""
    return False


def is_macos_or_newer(major: int, minor: int) -> bool:
    """False, as PyTorch answers without its MPS backend (asked only to pick MPS
    kernels)."""
    return False


def is_macos13_or_newer(minor: int = 0) -> bool:
    """False, as :func:`is_macos_or_newer`."""
    return False
