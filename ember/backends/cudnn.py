"""``ember.backends.cudnn``: PyTorch's ``torch.backends.cudnn`` settings, for porting.

ember's GPU convolutions run through its CUDA backend (CuPy), not through settings
PyTorch gives cuDNN, so these flags are accepted, kept and read back, and change
nothing: ``benchmark`` (ember picks no per-shape algorithm), ``deterministic`` (ember's
convolutions always give the same result for the same input), ``enabled`` and
``allow_tf32`` (TF32 products on the GPU follow ``ember.backends.cuda.matmul.allow_tf32``
alone). :func:`is_available` tells whether ember's CUDA backend is usable.

>>> ember.backends.cudnn.benchmark = True          # accepted; no effect
>>> ember.backends.cudnn.is_available()            # False without CuPy and a GPU
False
"""
from __future__ import annotations

import contextlib

__all__ = ["is_available", "version", "is_acceptable", "flags", "set_flags", "enabled",
           "benchmark", "benchmark_limit", "deterministic", "allow_tf32", "fp32_precision",
           "depthwise_kernel"]

enabled: bool = True
benchmark: bool = False
benchmark_limit: int = 10
deterministic: bool = False
allow_tf32: bool = True
fp32_precision: str = "none"
depthwise_kernel: str = "auto"

_FLAGS = ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32",
          "fp32_precision", "depthwise_kernel")


def _cuda_backend():
    """ember's CUDA backend if it can be used, else None (never raises)."""
    from . import get_backend
    from ..errors import EmberError
    try:
        return get_backend("cuda")
    except EmberError:
        return None


def is_available() -> bool:
    """True when ember's CUDA backend (CuPy with a GPU) is usable, where PyTorch says
    whether cuDNN is.

    >>> ember.backends.cudnn.is_available()
    False
    """
    return _cuda_backend() is not None


def version() -> int | None:
    """The cuDNN version CuPy loads (``90100`` for 9.1.0), or None without a usable
    GPU or without cuDNN (as PyTorch, where cuDNN is unavailable)."""
    backend = _cuda_backend()
    if backend is None:
        return None
    try:
        from cupy.cuda import cudnn as _cudnn  # needs the cuDNN library itself
        return int(_cudnn.getVersion())
    except Exception:  # ImportError, or the library failing to load: no cuDNN here
        return None


def is_acceptable(tensor) -> bool:
    """Whether a convolution on ``tensor`` would run on the GPU path PyTorch calls
    cuDNN's: enabled, a floating tensor on a CUDA device, and the backend usable."""
    if not enabled or tensor.device.type != "cuda":
        return False
    return tensor.dtype.is_floating_point and is_available()


def set_flags(_enabled=None, _benchmark=None, _benchmark_limit=None, _deterministic=None,
              _allow_tf32=None, _fp32_precision="none", _depthwise_kernel=None) -> tuple:
    """Set the flags given (None keeps one); returns their values before, in this
    order: enabled, benchmark, benchmark_limit, deterministic, allow_tf32,
    fp32_precision, depthwise_kernel."""
    before = tuple(globals()[name] for name in _FLAGS)
    given = (_enabled, _benchmark, _benchmark_limit, _deterministic, _allow_tf32,
             _fp32_precision, _depthwise_kernel)
    for name, value in zip(_FLAGS, given):
        if value is not None:
            globals()[name] = value
    return before


@contextlib.contextmanager
def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False,
          allow_tf32=True, fp32_precision="none", depthwise_kernel="auto"):
    """Context manager that sets every flag (PyTorch's defaults for this call: note
    ``enabled=False``) and restores the previous values after.

    >>> with ember.backends.cudnn.flags(enabled=True, deterministic=True):
    ...     assert ember.backends.cudnn.deterministic
    """
    before = set_flags(enabled, benchmark, benchmark_limit, deterministic, allow_tf32,
                       fp32_precision, depthwise_kernel)
    try:
        yield
    finally:
        set_flags(*before)
