"""``ember.cuda.amp``: PyTorch's deprecated ``torch.cuda.amp`` names, for porting.

``ember.cuda.amp.autocast(...)`` is ``ember.amp.autocast("cuda", ...)`` and
``ember.cuda.amp.GradScaler(...)`` is ``ember.amp.GradScaler("cuda", ...)``; each warns
with a ``FutureWarning`` as PyTorch does. As in PyTorch, without a usable GPU they also
warn and turn themselves off, so a ported script runs on the CPU in float32 unscaled.
:func:`custom_fwd` and :func:`custom_bwd` decorate a custom autograd Function's
``forward`` and ``backward`` so that they run in the autocast state of the forward.

>>> scaler = ember.cuda.amp.GradScaler()          # FutureWarning
>>> with ember.cuda.amp.autocast():              # FutureWarning
...     y = model(x)
"""
from __future__ import annotations

import functools
import warnings

from .. import amp as _amp
from .. import dtypes as _dt
from ..tensor import Tensor

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]


def _gpu_usable() -> bool:
    from . import is_available
    return is_available()


class autocast(_amp.autocast):
    """``ember.amp.autocast("cuda", ...)`` under its deprecated name.

    Args:
        enabled: False makes the region run without autocast.
        dtype: the lower precision (``ember.float16`` by default).
        cache_enabled: reuse the cast of a parameter within the region.
    """

    def __init__(self, enabled: bool = True, dtype=_dt.float16, cache_enabled: bool = True):
        warnings.warn("`ember.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`ember.amp.autocast('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        if enabled and not _gpu_usable():
            warnings.warn("CUDA is not available. Disabling autocast.", UserWarning,
                          stacklevel=2)
            enabled = False
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_amp.GradScaler):
    """``ember.amp.GradScaler("cuda", ...)`` under its deprecated name (same arguments,
    less ``device``)."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True):
        warnings.warn("`ember.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                      "`ember.amp.GradScaler('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        if enabled and not _gpu_usable():
            warnings.warn("ember.cuda.amp.GradScaler is enabled, but CUDA is not "
                          "available.  Disabling.", UserWarning, stacklevel=2)
            enabled = False
        super().__init__("cuda", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)


def _cast(value, device_type: str, dtype):
    """``value`` with its floating tensors on ``device_type`` (float64 aside) cast to
    ``dtype``, through lists, tuples and dicts."""
    if isinstance(value, Tensor):
        eligible = (value.dtype.is_floating_point and value.dtype is not _dt.float64 and
                    value.device.type == device_type)
        return value.to(dtype) if eligible else value
    if isinstance(value, dict):
        return {k: _cast(v, device_type, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, device_type, dtype) for v in value)
    return value


def _custom_fwd(fwd, device_type: str, cast_inputs):
    @functools.wraps(fwd)
    def forward(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = _amp.get_autocast_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = _amp.is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False
        if not _amp.is_autocast_enabled(device_type):
            return fwd(*args, **kwargs)
        with _amp.autocast(device_type, enabled=False):
            return fwd(*_cast(args, device_type, cast_inputs),
                       **_cast(kwargs, device_type, cast_inputs))
    return forward


def _custom_bwd(bwd, device_type: str):
    @functools.wraps(bwd)
    def backward(*args, **kwargs):
        ctx = args[0]
        with _amp.autocast(device_type, dtype=ctx._dtype, enabled=ctx._fwd_used_autocast):
            return bwd(*args, **kwargs)
    return backward


def custom_fwd(fwd=None, *, cast_inputs=None):
    """Decorate a custom Function's ``forward`` (deprecated name of PyTorch's
    ``torch.amp.custom_fwd(device_type="cuda")``).

    Args:
        fwd: the forward (None: returns a decorator).
        cast_inputs: None runs the forward in the current autocast state (and
            :func:`custom_bwd` runs the backward in the same one); a dtype runs it with
            autocast off, its floating CUDA tensor arguments cast to that dtype, when
            called inside an autocast region.

    >>> class Square(ember.autograd.Function):
    ...     @staticmethod
    ...     @ember.cuda.amp.custom_fwd(cast_inputs=ember.float32)
    ...     def forward(ctx, x): ...
    """
    warnings.warn("`ember.cuda.amp.custom_fwd(args...)` is deprecated. Please use "
                  "`ember.amp.custom_fwd(args..., device_type='cuda')` instead.",
                  FutureWarning, stacklevel=2)
    if fwd is None:
        return functools.partial(_custom_fwd, device_type="cuda", cast_inputs=cast_inputs)
    return _custom_fwd(fwd, "cuda", cast_inputs)


def custom_bwd(bwd):
    """Decorate a custom Function's ``backward`` so it runs in the autocast state its
    :func:`custom_fwd`-decorated forward ran in (deprecated name of PyTorch's
    ``torch.amp.custom_bwd(device_type="cuda")``)."""
    warnings.warn("`ember.cuda.amp.custom_bwd(args...)` is deprecated. Please use "
                  "`ember.amp.custom_bwd(args..., device_type='cuda')` instead.",
                  FutureWarning, stacklevel=2)
    return _custom_bwd(bwd, "cuda")
