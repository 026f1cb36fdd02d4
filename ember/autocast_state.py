"""PyTorch's top-level autocast state functions (``ember.is_autocast_enabled``,
``ember.set_autocast_dtype``, ...), reading and writing the state that
:class:`ember.autocast` regions use.

As in PyTorch, each device type has an enabled flag and a dtype; the dtype is kept while
autocast is off and is what ``ember.autocast(device_type)`` uses when given no dtype. An
``ember.autocast`` region restores both, and the cache flag, when it exits. The ``*_cpu_*``
and ``*_gpu_*`` forms are deprecated in PyTorch and warn here too. The state is per thread.

>>> ember.set_autocast_enabled("cpu", True)
>>> ember.mm(ember.ones(2, 2), ember.ones(2, 2)).dtype
ember.bfloat16
>>> ember.set_autocast_enabled("cpu", False)
"""
from __future__ import annotations

import builtins
import warnings

from . import dtypes as dt
from .amp.autocast import (_device_types, _install, _state, clear_autocast_cache as _clear,
                            get_autocast_dtype as _get_dtype,
                            is_autocast_cache_enabled as _cache_enabled)
from .backends import is_device_type
from .errors import EmberError, EmberTypeError

__all__ = ["is_autocast_enabled", "set_autocast_enabled", "get_autocast_dtype",
           "set_autocast_dtype", "get_autocast_cpu_dtype", "get_autocast_gpu_dtype",
           "is_autocast_cpu_enabled", "set_autocast_cpu_enabled", "set_autocast_cpu_dtype",
           "set_autocast_gpu_dtype", "is_autocast_cache_enabled",
           "set_autocast_cache_enabled", "clear_autocast_cache",
           "autocast_increment_nesting", "autocast_decrement_nesting"]


def _device_type(op: str, device_type) -> str:
    if not is_device_type(device_type):
        raise EmberError(f"{op}: unsupported device_type {device_type!r}; expected one of "
                         f"{', '.join(repr(d) for d in _device_types())}")
    return device_type


def _check_bool(op: str, name: str, value) -> None:
    if not isinstance(value, builtins.bool):
        raise EmberTypeError(f"{op}(): argument '{name}' must be bool, not "
                             f"{type(value).__name__}")


def _check_dtype(op: str, dtype) -> dt.DType:
    if not isinstance(dtype, dt.DType):
        raise EmberTypeError(f"{op}(): argument 'dtype' must be ember.dtype, not "
                             f"{type(dtype).__name__}")
    if not dtype.is_floating_point:  # PyTorch accepts any dtype here and breaks later
        raise EmberTypeError(f"{op}: autocast dtype must be a floating dtype, got "
                             f"ember.{dtype.name}")
    return dtype


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"ember.{old} is deprecated. Please use ember.{new} instead.",
                  DeprecationWarning, stacklevel=3)


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on for ``device_type`` on this thread (inside an enabled
    :class:`ember.autocast` region, or after :func:`set_autocast_enabled`).

    Args:
        device_type: ``"cpu"``, ``"cuda"``, ...; omitted means ``"cuda"``, as PyTorch.

    >>> with ember.autocast("cpu"):
    ...     ember.is_autocast_enabled("cpu")
    True
    """
    if device_type is None:
        device_type = "cuda"
    return _device_type("is_autocast_enabled", device_type) in _state.dtypes


def set_autocast_enabled(device_type, enabled: bool | None = None) -> None:
    """Turn autocast on or off for ``device_type`` on this thread, with the dtype
    :func:`get_autocast_dtype` reports. ``set_autocast_enabled(enabled)`` (one argument)
    sets CUDA's, as in PyTorch. An enclosing ``ember.autocast`` region restores the
    previous setting when it exits.

    >>> ember.set_autocast_enabled("cpu", True)
    >>> ember.is_autocast_enabled("cpu")
    True
    >>> ember.set_autocast_enabled("cpu", False)
    """
    if enabled is None:
        device_type, enabled = "cuda", device_type
    _device_type("set_autocast_enabled", device_type)
    _check_bool("set_autocast_enabled", "enabled", enabled)
    state = _state
    if enabled:
        state.dtypes[device_type] = _get_dtype(device_type)
    else:
        state.dtypes.pop(device_type, None)
    _install(state)


def get_autocast_dtype(device_type: str) -> dt.DType:
    """The dtype autocast runs ``device_type``'s lower-precision ops in: the region's, the
    one set by :func:`set_autocast_dtype`, else bfloat16 on the CPU and float16 on CUDA.

    >>> ember.get_autocast_dtype("cpu")
    ember.bfloat16
    """
    return _get_dtype(_device_type("get_autocast_dtype", device_type))


def set_autocast_dtype(device_type: str, dtype) -> None:
    """Set the dtype autocast uses for ``device_type`` (now, if enabled, and for later
    ``ember.autocast(device_type)`` regions given no dtype).

    >>> ember.set_autocast_dtype("cpu", ember.float16)
    >>> with ember.autocast("cpu"):
    ...     ember.mm(ember.ones(2, 2), ember.ones(2, 2)).dtype
    ember.float16
    >>> ember.set_autocast_dtype("cpu", ember.bfloat16)
    """
    _device_type("set_autocast_dtype", device_type)
    dtype = _check_dtype("set_autocast_dtype", dtype)
    state = _state
    state.dtype_set[device_type] = dtype
    if device_type in state.dtypes:
        state.dtypes[device_type] = dtype
        _install(state)  # the hook's key (jit's guard) names the dtype


def is_autocast_cpu_enabled() -> bool:
    """Deprecated: ``is_autocast_enabled("cpu")``."""
    _deprecated("is_autocast_cpu_enabled()", "is_autocast_enabled('cpu')")
    return is_autocast_enabled("cpu")


def set_autocast_cpu_enabled(enabled: bool) -> None:
    """Deprecated: ``set_autocast_enabled("cpu", enabled)``."""
    _deprecated("set_autocast_cpu_enabled(enabled)", "set_autocast_enabled('cpu', enabled)")
    set_autocast_enabled("cpu", enabled)


def get_autocast_cpu_dtype() -> dt.DType:
    """Deprecated: ``get_autocast_dtype("cpu")``."""
    _deprecated("get_autocast_cpu_dtype()", "get_autocast_dtype('cpu')")
    return get_autocast_dtype("cpu")


def set_autocast_cpu_dtype(dtype) -> None:
    """Deprecated: ``set_autocast_dtype("cpu", dtype)``."""
    _deprecated("set_autocast_cpu_dtype(dtype)", "set_autocast_dtype('cpu', dtype)")
    set_autocast_dtype("cpu", dtype)


def get_autocast_gpu_dtype() -> dt.DType:
    """Deprecated: ``get_autocast_dtype("cuda")``."""
    _deprecated("get_autocast_gpu_dtype()", "get_autocast_dtype('cuda')")
    return get_autocast_dtype("cuda")


def set_autocast_gpu_dtype(dtype) -> None:
    """Deprecated: ``set_autocast_dtype("cuda", dtype)``."""
    _deprecated("set_autocast_gpu_dtype(dtype)", "set_autocast_dtype('cuda', dtype)")
    set_autocast_dtype("cuda", dtype)


def is_autocast_cache_enabled() -> bool:
    """Whether autocast reuses the casts of parameters within a region.

    >>> ember.is_autocast_cache_enabled()
    True
    """
    return _cache_enabled()


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Turn autocast's cast cache on or off (a region restores it when it exits).

    >>> ember.set_autocast_cache_enabled(False)
    >>> ember.set_autocast_cache_enabled(True)
    """
    _check_bool("set_autocast_cache_enabled", "enabled", enabled)
    _state.cache_enabled = enabled


def clear_autocast_cache() -> None:
    """Drop autocast's cached casts of parameters (done when the outermost region exits).
    """
    _clear()


def autocast_increment_nesting() -> int:
    """Count one more autocast region entered on this thread; returns the new depth.

    >>> ember.autocast_increment_nesting()
    1
    >>> ember.autocast_decrement_nesting()
    0
    """
    _state.nesting += 1
    return _state.nesting


def autocast_decrement_nesting() -> int:
    """Count one autocast region left on this thread; returns the new depth (it may go
    below zero, as in PyTorch). At depth 0 :func:`clear_autocast_cache` is due."""
    _state.nesting -= 1
    return _state.nesting
