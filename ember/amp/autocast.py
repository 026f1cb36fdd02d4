"""``ember.amp.autocast``: run matmul- and conv-class ops in float16 or bfloat16.

Inside an autocast region every op consults :data:`ember.amp.policy.POLICY` before it
runs (the hook in :func:`ember.ops.registry.apply`): its floating inputs are cast with
ember's ``cast`` op, so autograd records the casts (gradients reach float32 parameters
in float32) and ``ember.jit`` traces them. The state is thread-local, like grad mode.
"""
from __future__ import annotations

import functools
import inspect
import threading

from .. import dtypes as dt
from ..autograd import grad_mode
from ..backends import is_device_type
from ..errors import EmberError, EmberTypeError
from ..ops import registry
from ..ops.elementwise import cast as _cast
from ..tensor import Tensor
from .policy import FLOAT32, LOWER_PRECISION, POLICY

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype",
           "is_autocast_cache_enabled", "clear_autocast_cache"]

_DEVICE_TYPES = ("cpu", "cuda")
_DEFAULT_DTYPES = {"cpu": "bfloat16", "cuda": "float16"}


def _device_types() -> tuple:
    """The device types autocast takes: the CPU, CUDA and any other registered backend."""
    from ..backends import _BACKENDS
    return _DEVICE_TYPES + tuple(sorted(set(_BACKENDS) - set(_DEVICE_TYPES)))


def _default_dtype(device_type: str) -> str:
    # PyTorch's defaults; an accelerator ember has no default for gets CUDA's
    return _DEFAULT_DTYPES.get(device_type, "float16")


class _AutocastState(threading.local):
    def __init__(self):
        self.dtypes: dict = {}      # device type -> autocast dtype, for enabled devices
        # device type -> the dtype set for it, enabled or not (ember.set_autocast_dtype)
        self.dtype_set: dict = {}
        self.cache_enabled = True
        self.nesting = 0            # autocast regions entered and not yet left
        # (id(weight), grad enabled) -> (weight, its version, cast weight)
        self.cache: dict = {}


_state = _AutocastState()


def _supported_dtypes():
    return (dt.bfloat16, dt.float16) if dt.bfloat16.np is not None else (dt.float16,)


class autocast:
    """Context manager and decorator that runs the ops of a region in mixed precision.

    Matrix products, linear layers, convolutions and attention run in ``dtype``;
    losses and ``prod`` run in float32; ``cat``/``stack`` promote to their widest
    input; every other op keeps its inputs' dtype (see ``docs/amp.md`` for the lists).
    Casts are recorded by autograd, so gradients of float32 parameters are float32.
    Regions nest (``autocast(enabled=False)`` inside turns it off), the state is per
    thread, and ``ember.jit`` compiles a function separately for each autocast state.

    Args:
        device_type: ``"cpu"`` (or ``"cuda"``): the device whose ops are autocast.
        dtype: ``ember.bfloat16`` (the CPU default) or ``ember.float16``.
        enabled: False makes the region run without autocast.
        cache_enabled: reuse the cast of a leaf float32 tensor that requires grad (a
            parameter) within the outermost autocast region, instead of casting it at
            every use. None (the default) keeps the current setting
            (``ember.is_autocast_cache_enabled()``, True unless changed).

    >>> model = ember.nn.Linear(4, 2)
    >>> with ember.autocast("cpu", dtype=ember.bfloat16):
    ...     y = model(ember.randn(3, 4))
    >>> y.dtype
    ember.bfloat16
    """

    def __init__(self, device_type: str = "cpu", dtype=None, enabled: bool = True,
                 cache_enabled: bool | None = None):
        if not is_device_type(device_type):
            raise EmberError(f"autocast: unsupported device_type {device_type!r}; expected "
                             f"one of {', '.join(repr(d) for d in _device_types())}")
        if dtype is None:  # as PyTorch: the dtype set for the device (see set_autocast_dtype)
            dtype = get_autocast_dtype(device_type)
        else:
            dtype = dt.as_dtype(dtype, "autocast")
        if dtype not in _supported_dtypes():
            raise EmberTypeError(f"autocast: unsupported dtype ember.{dtype.name} for device "
                                 f"type {device_type!r}; expected "
                                 f"{' or '.join('ember.' + d.name for d in _supported_dtypes())}")
        if not isinstance(enabled, bool):
            raise EmberTypeError(f"autocast: expected enabled to be a bool, got "
                                 f"{type(enabled).__name__}")
        self.device = device_type
        self.fast_dtype = dtype
        self._enabled = enabled
        # None: keep the current setting (ember.set_autocast_cache_enabled), as PyTorch
        self._cache_enabled = (_state.cache_enabled if cache_enabled is None
                               else bool(cache_enabled))

    def __enter__(self):
        state = _state
        self._prev = (dict(state.dtypes), state.cache_enabled, dict(state.dtype_set))
        state.dtype_set[self.device] = self.fast_dtype
        if self._enabled:
            state.dtypes[self.device] = self.fast_dtype
        else:
            state.dtypes.pop(self.device, None)
        state.cache_enabled = self._cache_enabled
        state.nesting += 1
        _install(state)
        return self

    def __exit__(self, *exc):
        state = _state
        state.dtypes, state.cache_enabled, state.dtype_set = self._prev
        state.nesting -= 1
        if state.nesting == 0:
            state.cache.clear()
        _install(state)
        return False

    def __call__(self, fn):
        """Use as a decorator: ``fn`` runs inside a region with these settings."""
        settings = (self.device, self.fast_dtype, self._enabled, self._cache_enabled)
        if inspect.isgeneratorfunction(fn):
            raise EmberError("autocast: decorating a generator function is not supported; "
                             "use `with ember.autocast(...)` inside it")

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(*settings):
                return fn(*args, **kwargs)
        return wrapper

    def __repr__(self) -> str:
        return (f"autocast(device_type={self.device!r}, dtype=ember.{self.fast_dtype.name}, "
                f"enabled={self._enabled}, cache_enabled={self._cache_enabled})")


_threads_lock = threading.Lock()


def _install(state) -> None:
    """Point registry's hook at the policy while any device autocasts on this thread,
    else at None; keep count of such threads (``apply`` checks that count first)."""
    hook = registry._autocast
    was_on = hook.cast is not None
    if state.dtypes:
        hook.cast = _cast_inputs
        hook.key = tuple(sorted((d, t.name) for d, t in state.dtypes.items()))
    else:
        hook.cast = None
        hook.key = None
    if was_on != (hook.cast is not None):
        with _threads_lock:
            registry._autocasting += 1 if hook.cast is not None else -1


def is_autocast_enabled(device_type: str = "cpu") -> bool:
    """True inside an enabled ``autocast`` region for ``device_type`` on this thread.

    >>> with ember.autocast("cpu"):
    ...     ember.amp.is_autocast_enabled()
    True
    """
    return device_type in _state.dtypes


def get_autocast_dtype(device_type: str = "cpu"):
    """The dtype autocast uses for ``device_type``: the active region's, else the one set
    by ``ember.set_autocast_dtype``, else the default (bfloat16 on the CPU, float16 on
    CUDA)."""
    found = _state.dtypes.get(device_type) or _state.dtype_set.get(device_type)
    if found is not None:
        return found
    if not is_device_type(device_type):
        raise EmberError(f"get_autocast_dtype: unsupported device_type {device_type!r}; "
                         f"expected one of {', '.join(repr(d) for d in _device_types())}")
    return dt.as_dtype(_default_dtype(device_type))


def is_autocast_cache_enabled() -> bool:
    """Whether autocast reuses casts of parameters within the current region."""
    return _state.cache_enabled


def clear_autocast_cache() -> None:
    """Drop the cached casts of parameters (done on leaving the outermost region)."""
    _state.cache.clear()


# The hook ------------------------------------------------------------------------------
def _cast_inputs(name: str, inputs: tuple) -> tuple:
    rule = POLICY.get(name)
    if rule is None:
        return inputs
    device = None
    for t in inputs:
        if isinstance(t, Tensor):
            device = t._device.type
            break
    low = _state.dtypes.get(device)
    if low is None:
        return inputs
    if rule is LOWER_PRECISION:
        target = low
    elif rule is FLOAT32:
        target = dt.float32
    else:  # promote: the widest eligible floating input
        target = None
        for t in inputs:
            if isinstance(t, Tensor) and _eligible(t):
                target = t._dtype if target is None else dt.promote_types(target, t._dtype)
        if target is None:
            return inputs
    out = None
    for i, t in enumerate(inputs):
        if isinstance(t, Tensor) and t._dtype is not target and _eligible(t):
            if out is None:
                out = list(inputs)
            out[i] = _cached_cast(t, target, low)
    return inputs if out is None else tuple(out)


def _eligible(t: Tensor) -> bool:
    # As in PyTorch: float64 and non-floating tensors are never autocast.
    return t._dtype.is_floating_point and t._dtype is not dt.float64


def _cached_cast(t: Tensor, dtype, low) -> Tensor:
    state = _state
    cacheable = (state.cache_enabled and dtype is low and t._dtype is dt.float32
                 and t._requires_grad and t._node is None and t._base is None
                 and registry._trace is None)  # a traced cast must not outlive its trace
    if not cacheable:
        return _cast(t, dtype)
    key = (id(t), grad_mode._state.enabled)  # a cast made under no_grad carries no graph
    hit = state.cache.get(key)
    if hit is not None and hit[0] is t and hit[1] == t._version[0] and hit[2]._dtype is dtype:
        return hit[2]
    out = _cast(t, dtype)
    state.cache[key] = (t, t._version[0], out)
    return out
