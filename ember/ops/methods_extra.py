"""Tensor methods for the op files that load after :mod:`ember.ops.methods`
(``x.median()``, ``x.det()``, ``x << 2``, ...)."""
from __future__ import annotations

from ..tensor import Tensor
from . import (linalg_decomp, linalg_extra, linalg_more, math_extra, scan_extra, special_fns,
               statistics, stats_extra)
from .methods import _inplace_method, _swap, register_methods

for _module in (statistics, scan_extra, math_extra, stats_extra):
    register_methods(_module, skip=getattr(_module, "NOT_METHODS", ()))

# Methods PyTorch gives Tensor from torch.linalg and torch.special under their old names.
_NAMED = {"det": linalg_decomp.det, "slogdet": linalg_decomp.slogdet,
          "inverse": linalg_extra.inverse, "logdet": linalg_extra.logdet,
          "svd": linalg_extra.svd, "pinverse": linalg_extra.pinverse,
          "cholesky": linalg_extra.cholesky, "qr": linalg_extra.qr,
          "matrix_power": linalg_extra.matrix_power, "matrix_exp": linalg_more.matrix_exp,
          "lgamma": special_fns.lgamma,
          "digamma": special_fns.digamma, "polygamma": lambda self, n: special_fns.polygamma(n, self),
          "erfinv": special_fns.erfinv, "i0": special_fns.i0, "xlog1py": special_fns.xlog1py}
for _name, _fn in _NAMED.items():
    if not hasattr(Tensor, _name):
        setattr(Tensor, _name, _fn)

_OPERATORS = {"__lshift__": math_extra.bitwise_left_shift,
              "__rlshift__": _swap(math_extra.bitwise_left_shift),
              "__rshift__": math_extra.bitwise_right_shift,
              "__rrshift__": _swap(math_extra.bitwise_right_shift)}
for _name, _fn in _OPERATORS.items():
    setattr(Tensor, _name, _fn)
Tensor.__ilshift__ = _inplace_method(math_extra.bitwise_left_shift, "__ilshift__")
Tensor.__irshift__ = _inplace_method(math_extra.bitwise_right_shift, "__irshift__")
for _name in ("bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm", "ldexp", "lgamma",
              "digamma", "erfinv", "i0", "logcumsumexp", "nan_to_num", "addr", "addbmm",
              "renorm"):
    if not hasattr(Tensor, _name + "_"):
        setattr(Tensor, _name + "_", _inplace_method(getattr(Tensor, _name), _name + "_"))
Tensor.polygamma_ = _inplace_method(lambda self, n: special_fns.polygamma(n, self),
                                    "polygamma_")
