"""Process-wide settings with PyTorch's names: threads, deterministic algorithms, the
default device, float32 matmul precision, denormals and warnings.

ember's own C kernels (fused kernels, the GEMM driver, convolution, norm, attention,
loss and pooling loops, the int8 GEMM) split their work over ``get_num_threads()``
OpenMP threads; that count comes from ``EMBER_NUM_THREADS`` or, unset, the CPUs this
process may run on. :func:`set_num_threads` sets that variable and updates the kernels
already built, so the next call of each runs on the new count. Where ember's GEMM driver
runs products, NumPy's OpenBLAS stays on one thread (the driver does the splitting);
where it does not (``EMBER_BLAS=numpy``, or no OpenBLAS entry points found), OpenBLAS is
set to the same count. A function ``ember.jit`` compiled before the call keeps the count
it was compiled with until it is compiled again.
"""
from __future__ import annotations

import numbers
import operator
import os
import sys
import warnings

from .backends import CPU, placement
from .errors import EmberError, EmberTypeError

__all__ = ["set_num_threads", "get_num_threads", "set_num_interop_threads",
           "get_num_interop_threads", "use_deterministic_algorithms",
           "are_deterministic_algorithms_enabled",
           "is_deterministic_algorithms_warn_only_enabled", "set_deterministic_debug_mode",
           "get_deterministic_debug_mode", "set_default_device", "get_default_device",
           "set_float32_matmul_precision", "get_float32_matmul_precision",
           "set_flush_denormal", "set_warn_always", "is_warn_always_enabled"]

_THREADS_VARIABLE = "EMBER_NUM_THREADS"

_settings = {"interop_threads": None, "deterministic": False, "warn_only": False,
             "matmul_precision": "highest", "warn_always": False}


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise EmberTypeError(f"{name}: expects an int, but got {type(value).__name__}")
    if value <= 0:
        raise EmberError(f"{name}: expects a positive integer, got {value}")
    return operator.index(value)


def _bool(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise EmberTypeError(f"{name}: expects a bool, but got {type(value).__name__}")
    return value


# threads ----------------------------------------------------------------------------------
def get_num_threads() -> int:
    """The number of threads ember's C kernels split their work over.

    >>> ember.get_num_threads() >= 1
    True
    """
    from .compiler.codegen import build
    return build.max_threads()


def set_num_threads(int: int) -> None:  # noqa: A002  (PyTorch's argument name)
    """Set the number of threads ember's C kernels (and NumPy's OpenBLAS where ember's
    GEMM driver does not run the products) use from the next call on.

    It sets ``EMBER_NUM_THREADS`` (which processes started from this one inherit). A
    function ``ember.jit`` compiled before the call keeps its count until it is compiled
    again.

    Args:
        int: a positive number of threads.

    >>> ember.set_num_threads(1)
    >>> ember.get_num_threads()
    1
    """
    count = _positive_int("set_num_threads", int)
    os.environ[_THREADS_VARIABLE] = str(count)
    apply_thread_count()


def apply_thread_count() -> None:
    """Give the kernels built so far the thread count ``EMBER_NUM_THREADS`` now says:
    each loop's count, the GEMM driver's, the int8 kernel's; plans and eager kernels
    that baked the count in are dropped (made again at their next call), and OpenBLAS
    gets the count where ember's driver does not split the products."""
    from .backends import cpu_blas
    from .backends.addresses import Plans
    from .compiler.eager import EagerKernel
    from .ops import registry
    from .ops.c_loops import CLoop
    count = get_num_threads()
    for module in list(sys.modules.values()):
        if not getattr(module, "__name__", "").startswith("ember."):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, CLoop):
                value.built = {real: None if found is None else (found[0], count)
                               for real, found in value.built.items()}
            elif isinstance(value, Plans):
                value.plans.clear()
    for op in list(registry.OPS.values()):
        if isinstance(op.fast, EagerKernel):
            op.fast.entries.clear()
    driver = cpu_blas._state.get("driver")
    if driver:
        cpu_blas._state["driver"] = driver[:4] + (count,) + driver[5:]
    int8 = sys.modules.get("ember.quant.int8_gemm")
    if int8 is not None and int8._state.get("kernel"):
        int8._state["kernel"] = (int8._state["kernel"][0], count)
    if not driver:
        blas = cpu_blas._openblas()
        if blas is not None:
            blas[3](count)


def get_num_interop_threads() -> int:
    """The number of threads for running independent ops side by side. ember runs ops
    one after another, so this is only the number last set (by default the CPUs this
    process may run on, as in PyTorch).

    >>> ember.get_num_interop_threads() >= 1
    True
    """
    found = _settings["interop_threads"]
    if found is not None:
        return found
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def set_num_interop_threads(int: int) -> None:  # noqa: A002  (PyTorch's argument name)
    """Set the number :func:`get_num_interop_threads` reports (ember has no inter-op
    thread pool: its ops run one after another).

    Args:
        int: a positive number of threads.

    >>> ember.set_num_interop_threads(2)
    """
    _settings["interop_threads"] = _positive_int("set_num_interop_threads", int)


# deterministic algorithms -----------------------------------------------------------------
def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Ask for deterministic algorithms. ember's CPU ops give the same bits for the same
    inputs and thread count already (no atomics: every output element is computed by
    one thread in a fixed order), so the setting is recorded for code that reads it and
    changes no result.

    Args:
        mode: True to ask for deterministic algorithms.
        warn_only: (PyTorch) warn instead of raising where an op has no deterministic
            version; recorded as given.

    >>> ember.use_deterministic_algorithms(True)
    >>> ember.are_deterministic_algorithms_enabled()
    True
    """
    _settings["deterministic"] = _bool("use_deterministic_algorithms", mode)
    _settings["warn_only"] = _bool("use_deterministic_algorithms", warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    """Whether :func:`use_deterministic_algorithms` was last set to True."""
    return _settings["deterministic"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """The ``warn_only`` last given to :func:`use_deterministic_algorithms`."""
    return _settings["warn_only"]


_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_deterministic_debug_mode(debug_mode) -> None:
    """:func:`use_deterministic_algorithms` by level: ``"default"`` (0) off, ``"warn"``
    (1) on with ``warn_only``, ``"error"`` (2) on.

    >>> ember.set_deterministic_debug_mode("warn")
    >>> ember.get_deterministic_debug_mode()
    1
    """
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise EmberError(f"set_deterministic_debug_mode: invalid value of debug_mode "
                             f"{debug_mode!r}, expected one of {', '.join(_DEBUG_MODES)}")
        debug_mode = _DEBUG_MODES[debug_mode]
    elif isinstance(debug_mode, bool) or not isinstance(debug_mode, numbers.Integral):
        raise EmberTypeError(f"set_deterministic_debug_mode: debug_mode must be a str or "
                             f"int, but got {type(debug_mode).__name__}")
    if debug_mode not in (0, 1, 2):
        raise EmberError(f"set_deterministic_debug_mode: invalid value of debug_mode, "
                         f"expected 0, 1, or 2, but got {debug_mode}")
    use_deterministic_algorithms(debug_mode > 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode() -> int:
    """0 when deterministic algorithms are off, 1 when on with ``warn_only``, else 2."""
    if not _settings["deterministic"]:
        return 0
    return 1 if _settings["warn_only"] else 2


# default device ---------------------------------------------------------------------------
def set_default_device(device) -> None:
    """Set the device factory functions use when given none. ember supports only the
    CPU here (the default); for another device pass ``device=`` to the factory function
    or move the tensor with ``.to(device)``.

    Args:
        device: ``"cpu"`` (or a CPU device), or None for the default.

    >>> ember.set_default_device("cpu")
    """
    if device is None:
        return
    dev = placement(device)
    if dev is not CPU:
        raise EmberError(f"set_default_device: only the CPU can be the default device in "
                         f"ember, got {dev}; pass device={str(dev)!r} to the factory "
                         f"functions or move tensors with .to({str(dev)!r})")


def get_default_device():
    """The device factory functions use when given none: the CPU.

    >>> ember.get_default_device()
    device(type='cpu')
    """
    return CPU


# float32 matmul precision -----------------------------------------------------------------
_PRECISIONS = ("highest", "high", "medium")


def set_float32_matmul_precision(precision: str) -> None:
    """Record the precision float32 products may use: ``"highest"`` (the default),
    ``"high"`` or ``"medium"`` (which allow TF32/bfloat16 internals on GPUs in PyTorch).
    ember's float32 products always run in full float32, so this changes no result.
    Another value warns and changes nothing, as in PyTorch.

    >>> ember.set_float32_matmul_precision("high")
    >>> ember.get_float32_matmul_precision()
    'high'
    """
    if precision not in _PRECISIONS:
        warnings.warn(f"set_float32_matmul_precision: {precision!r} is not one of "
                      f"'highest', 'high', or 'medium'; the call has no effect",
                      stacklevel=2)
        return
    _settings["matmul_precision"] = precision


def get_float32_matmul_precision() -> str:
    """The precision last set by :func:`set_float32_matmul_precision`."""
    return _settings["matmul_precision"]


# denormals and warnings -------------------------------------------------------------------
def set_flush_denormal(mode: bool) -> bool:
    """Whether denormal floats could be flushed to zero: ember does not change the CPU's
    floating-point mode (its kernels run on several threads, each with its own), so this
    returns False and changes nothing, as PyTorch does where it is not supported.

    >>> ember.set_flush_denormal(True)
    False
    """
    _bool("set_flush_denormal", mode)
    return False


def set_warn_always(b: bool) -> None:
    """Ask for warnings that are issued once to be issued every time (recorded for
    :func:`is_warn_always_enabled`; code that warns once may read it).

    >>> ember.set_warn_always(False)
    """
    _settings["warn_always"] = _bool("set_warn_always", b)


def is_warn_always_enabled() -> bool:
    """What :func:`set_warn_always` last set (False by default)."""
    return _settings["warn_always"]
