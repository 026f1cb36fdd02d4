"""``ember.amp``: automatic mixed precision.

:class:`autocast` runs matmul- and convolution-class ops in bfloat16 or float16 and
keeps losses in float32; :class:`GradScaler` scales the loss so float16 gradients do
not underflow, and skips steps whose gradients overflow.

>>> model = ember.nn.Linear(4, 2)
>>> with ember.amp.autocast("cpu", dtype=ember.bfloat16):
...     loss = model(ember.randn(8, 4)).float().pow(2).mean()
>>> loss.backward()
>>> model.weight.grad.dtype
ember.float32
"""
from .autocast import (autocast, clear_autocast_cache, get_autocast_dtype,
                       is_autocast_cache_enabled, is_autocast_enabled)
from .grad_scaler import GradScaler, GradScalerStateError
from .policy import FLOAT32, LOWER_PRECISION, POLICY, PROMOTE, policy_of

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype",
           "is_autocast_cache_enabled", "clear_autocast_cache", "GradScaler",
           "GradScalerStateError", "policy_of", "POLICY", "LOWER_PRECISION", "FLOAT32",
           "PROMOTE"]
