"""``ember.cpu.amp``: PyTorch's deprecated ``torch.cpu.amp`` names, for porting.

``ember.cpu.amp.autocast(...)`` is ``ember.amp.autocast("cpu", ...)`` (bfloat16 by
default) and ``ember.cpu.amp.GradScaler(...)`` is ``ember.amp.GradScaler("cpu", ...)``;
each warns with a ``FutureWarning``, as PyTorch does.

>>> with ember.cpu.amp.autocast():               # FutureWarning
...     y = model(x)                             # linear layers in bfloat16
"""
from __future__ import annotations

import warnings

from .. import amp as _amp
from .. import dtypes as _dt

__all__ = ["autocast", "GradScaler"]


class autocast(_amp.autocast):
    """``ember.amp.autocast("cpu", ...)`` under its deprecated name.

    Args:
        enabled: False makes the region run without autocast.
        dtype: the lower precision (``ember.bfloat16`` by default).
        cache_enabled: reuse the cast of a parameter within the region.
    """

    def __init__(self, enabled: bool = True, dtype=_dt.bfloat16, cache_enabled: bool = True):
        warnings.warn("`ember.cpu.amp.autocast(args...)` is deprecated. Please use "
                      "`ember.amp.autocast('cpu', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_amp.GradScaler):
    """``ember.amp.GradScaler("cpu", ...)`` under its deprecated name (same arguments,
    less ``device``)."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True):
        warnings.warn("`ember.cpu.amp.GradScaler(args...)` is deprecated. Please use "
                      "`ember.amp.GradScaler('cpu', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cpu", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)
