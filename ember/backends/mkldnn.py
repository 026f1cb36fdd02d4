"""``ember.backends.mkldnn``: PyTorch's ``torch.backends.mkldnn`` settings, for porting.

ember's CPU kernels are NumPy, its BLAS, and C it generates; it does not use oneDNN
(MKL-DNN), so :func:`is_available` is False and the flags (``enabled``,
``deterministic``, ``allow_tf32``) are accepted, kept and read back, and change nothing.

>>> ember.backends.mkldnn.enabled = False          # accepted; no effect
>>> ember.backends.mkldnn.is_available()
False
"""
from __future__ import annotations

import contextlib

__all__ = ["is_available", "flags", "set_flags", "enabled", "deterministic", "allow_tf32",
           "fp32_precision"]

enabled: bool = True
deterministic: bool = False
allow_tf32: bool = True
fp32_precision: str = "none"

_FLAGS = ("enabled", "deterministic", "allow_tf32", "fp32_precision")


def is_available() -> bool:
    """False: ember is not built on oneDNN (MKL-DNN)."""
    return False


def set_flags(_enabled=None, _deterministic=None, _allow_tf32=None,
              _fp32_precision="none") -> tuple:
    """Set the flags given (None keeps one); returns their values before (enabled,
    deterministic, allow_tf32, fp32_precision)."""
    before = tuple(globals()[name] for name in _FLAGS)
    for name, value in zip(_FLAGS, (_enabled, _deterministic, _allow_tf32, _fp32_precision)):
        if value is not None:
            globals()[name] = value
    return before


@contextlib.contextmanager
def flags(enabled=False, deterministic=False, allow_tf32=True, fp32_precision="none"):
    """Context manager that sets every flag (PyTorch's defaults for this call) and
    restores the previous values after."""
    before = set_flags(enabled, deterministic, allow_tf32, fp32_precision)
    try:
        yield
    finally:
        set_flags(*before)
