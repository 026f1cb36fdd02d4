"""Array-module helpers: what NumPy and CuPy spell differently, in one place, so op
forwards stay written once against ``xp``.

An array module may carry capability flags (set by its backend; NumPy has none):

- ``native_half_matmul``: float16/bfloat16 products are fast and accurate as they are
  (cuBLAS on tensor cores), so they need not be computed in float32;
- ``asynchronous``: work is queued on a device, so reading a value on the host
  (``bool(a.any())``, ``a.item()``) waits for everything queued before it; forwards
  take their branch-free path there;
- ``fast_reductions``: sums along short rows are as fast as anything else, so
  forwards reduce with ``sum``/``mean`` rather than as products with a ones vector
  (NumPy's trick, which a GPU would also round to TF32 where that is allowed).
"""
from __future__ import annotations

import math

import numpy as np


def native_half_matmul(xp) -> bool:
    """True where float16/bfloat16 products need not run in float32."""
    # (NumPy answers a missing attribute through a slow module __getattr__: skip it)
    return xp is not np and getattr(xp, "native_half_matmul", False)


def asynchronous(xp) -> bool:
    """True where reading a value on the host stalls the device's queue."""
    return xp is not np and getattr(xp, "asynchronous", False)


def blas_reductions(xp) -> bool:
    """True where row sums are faster as BLAS products (NumPy)."""
    return xp is np or not getattr(xp, "fast_reductions", False)


def max_keepdims(xp, x, axis):
    """``x.max(axis, keepdims=True)``, with -inf for empty slices (NumPy's
    ``initial=-inf``, which CuPy's ``max`` lacks)."""
    if x.size:  # then no slice is empty
        return xp.max(x, axis=axis, keepdims=True)
    axes = range(x.ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
    shape = list(x.shape)
    for a in axes:
        shape[a] = 1
    return xp.full(tuple(shape), -np.inf, dtype=x.dtype)


def as_strided(xp, x, shape, strides, writeable: bool = True):
    """``x`` viewed with ``shape`` and ``strides`` (bytes); read-only unless
    ``writeable`` where the array module has read-only views (NumPy; CuPy has none)."""
    view = xp.lib.stride_tricks.as_strided(x, shape, strides)
    if not writeable and isinstance(view, np.ndarray):
        view.flags.writeable = False
    return view


def erf(xp, a):
    """The error function of a float64 array, to float64 precision: the array module's
    own where it has one (CuPy, through ``cupyx.scipy.special``), else Python's
    ``math.erf`` per element on the host."""
    fn = None if xp is np else getattr(xp, "erf", None)
    if fn is not None:
        return fn(a)
    return np.asarray(np.frompyfunc(math.erf, 1, 1)(a), dtype=np.float64)


def erfc(xp, a):
    """The complementary error function, as :func:`erf`; the result keeps ``a``'s dtype."""
    fn = None if xp is np else getattr(xp, "erfc", None)
    if fn is not None:  # (in float32 for the 2-byte floats, which CuPy's may lack)
        return fn(a.astype(np.float32) if a.dtype.itemsize == 2 else a).astype(a.dtype)
    return np.asarray(np.frompyfunc(math.erfc, 1, 1)(a), dtype=a.dtype)


def gemm(xp, a, b, bias=None, relu=False):
    """``xp.matmul(a, b)`` (``+ bias``, a vector of the last dim in the product's dtype,
    then ReLU, where given); NumPy's products go through the CPU backend's driver, which
    splits large ones over ember's threads and adds the bias and ReLU block by block
    while each is in cache (:mod:`ember.backends.cpu_blas`)."""
    if xp is np:
        return _cpu_matmul(a, b, bias, relu)
    out = xp.matmul(a, b)
    if bias is not None:
        out += bias
    if relu:
        xp.maximum(out, 0, out=out)
    return out


from ..backends.cpu_blas import matmul as _cpu_matmul  # noqa: E402
