"""The CUDA backend, on CuPy: GPU arrays, cuBLAS products, cuRAND random numbers.

Importing this module does not import CuPy: :func:`load` does, the first time a ``cuda``
device is used (``ember.backends.get_backend("cuda")``), and gives a clear error where
CuPy or a GPU is missing. What this module holds before then is the settings object
``ember.backends.cuda.matmul`` (PyTorch's ``torch.backends.cuda.matmul``).

One :class:`CUDABackend` serves each GPU (``cuda:0``, ``cuda:1``, ...). CuPy runs every
call on the *current* device, so with more than one GPU a backend is ``scoped``: ember
runs its ops inside :meth:`CUDABackend.activate` (``cupy.cuda.Device(index)``), and
arrays are made on the device of the tensor they belong to.

Random numbers come from CuPy's ``cupy.random.RandomState`` (cuRAND's default
pseudo-random generator, XORWOW), one per device, behind :class:`CUDAGenerator`. Its
stream of numbers is not the CPU's (NumPy's PCG64): the same seed gives different
numbers on ``cpu`` and ``cuda``, as it does in PyTorch. cuRAND's state cannot be read
out, so ``Generator.get_state`` on a CUDA generator raises; re-seed instead.
"""
from __future__ import annotations

import contextlib
import importlib
import types
import warnings

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, EmberTypeError
from .base import Backend

__all__ = ["matmul", "load", "CUDABackend", "CUDAGenerator"]

_INSTALL_HINT = ("pip install 'ember[cuda12]' (CUDA 12) or 'ember[cuda13]' (CUDA 13)")
_NO_SCOPE = contextlib.nullcontext()


class MatmulSettings:
    """cuBLAS settings, as ``torch.backends.cuda.matmul``.

    Attributes:
        allow_tf32: run float32 matrix products (matmul, linear layers, convolutions)
            on the tensor cores in TF32, which keeps 10 bits of mantissa: several times
            faster on Ampere and later GPUs, at about 1e-3 relative error. Off by
            default, as in PyTorch. Needs a GPU of compute capability 8.0 or higher.

    >>> ember.backends.cuda.matmul.allow_tf32 = True
    """

    def __init__(self):
        self._allow_tf32 = False

    @property
    def allow_tf32(self) -> bool:
        return self._allow_tf32

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        self._allow_tf32 = bool(value)
        if _loaded is not None:
            _set_tf32(_loaded.cupy, self._allow_tf32)

    def __repr__(self) -> str:
        return f"ember.backends.cuda.matmul(allow_tf32={self._allow_tf32})"


matmul = MatmulSettings()
_loaded: "CUDABackend | None" = None


def _set_tf32(cupy, allow: bool) -> None:
    """Point CuPy's float32 GEMMs at TF32 or back to full float32 (CuPy's per-dtype
    compute type, the setting its ``CUPY_TF32`` environment variable chooses)."""
    try:
        linalg = importlib.import_module("cupy._core._routines_linalg")
        kind = linalg.COMPUTE_TYPE_TF32 if allow else linalg.COMPUTE_TYPE_DEFAULT
        linalg.set_compute_type(np.float32, kind)
    except (ImportError, AttributeError) as exc:
        raise EmberError(f"ember.backends.cuda.matmul.allow_tf32: CuPy "
                         f"{cupy.__version__} has no compute-type setting ({exc}); set "
                         f"CUPY_TF32=1 in the environment before starting Python "
                         f"instead") from None


def _import_cupy():
    try:
        return importlib.import_module("cupy")
    except ImportError as exc:
        raise EmberError(f"ember's CUDA backend needs CuPy and a GPU, and CuPy is not "
                         f"installed ({exc}); {_INSTALL_HINT}") from None


def load() -> "CUDABackend":
    """Import CuPy, check that it sees a GPU, and return the backend of the current
    device (what ``ember.backends.get_backend("cuda")`` registers)."""
    global _loaded
    if _loaded is not None:
        return _loaded
    cupy = _import_cupy()
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError: no driver, no device, driver too old
        raise EmberError(f"ember's CUDA backend needs CuPy and a GPU, and CuPy "
                         f"{cupy.__version__} finds no usable GPU ({exc})") from None
    if count < 1:
        raise EmberError(f"ember's CUDA backend needs CuPy and a GPU, and CuPy "
                         f"{cupy.__version__} finds no GPU")
    backend = CUDABackend(cupy, count)
    from . import cuda_memory
    cuda_memory.start(cupy)
    if matmul.allow_tf32:
        try:
            _set_tf32(cupy, True)
        except EmberError as exc:
            warnings.warn(str(exc))
    _loaded = backend
    return backend


class CUDABackend(Backend):
    """CuPy on one GPU (``index``), or on whichever is current (``index=None``, the
    backend of the bare device type, used to resolve ``"cuda"`` to ``cuda:N``).

    Attributes:
        cupy: the CuPy module.
        xp: CuPy as ember's ops see it: CuPy's namespace plus capability flags
            (``native_half_matmul``, ``asynchronous``, ``fast_reductions``: see
            ``ember/ops/_xp.py``) and ``erf``/``erfc`` from ``cupyx.scipy.special``.
        device_count: the number of GPUs CuPy sees.
        supports_bfloat16: CuPy can hold bfloat16 arrays (CuPy 14 or later, with
            ``ml_dtypes``).
    """
    name = "cuda"
    kernel_renderer = "cuda"  # ember.jit's fused kernels: generated CUDA C

    def __init__(self, cupy, count: int, index: int | None = None, xp=None,
                 supports_bfloat16: bool | None = None):
        self.cupy = cupy
        self.device_count = count
        self.index = index
        self.xp = xp if xp is not None else _array_namespace(cupy)
        self.scoped = index is not None and count > 1
        self._ndarray = cupy.ndarray
        self._children: dict[int, CUDABackend] = {}
        self.supports_bfloat16 = (_holds_bfloat16(cupy) if supports_bfloat16 is None
                                  else supports_bfloat16)

    def __repr__(self) -> str:
        where = "current device" if self.index is None else f"cuda:{self.index}"
        return f"<ember CUDA backend on {where} (CuPy {self.cupy.__version__})>"

    # Devices --------------------------------------------------------------------------
    def for_index(self, index: int | None) -> "CUDABackend":
        if index is None:
            return self
        backend = self._children.get(index)
        if backend is None:
            if index >= self.device_count:
                raise EmberError(f"device 'cuda:{index}' is not available: CuPy sees "
                                 f"{self.device_count} GPU(s) (cuda:0 to "
                                 f"cuda:{self.device_count - 1})")
            backend = self._children[index] = CUDABackend(
                self.cupy, self.device_count, index, self.xp, self.supports_bfloat16)
        return backend

    def current_index(self) -> int:
        return self.cupy.cuda.runtime.getDevice()

    def activate(self):
        if self.index is None:
            return _NO_SCOPE
        return self.cupy.cuda.Device(self.index)

    def synchronize(self) -> None:
        with self.activate():
            self.cupy.cuda.runtime.deviceSynchronize()

    # Arrays ---------------------------------------------------------------------------
    def asarray(self, data, dtype=None):
        if isinstance(data, self._ndarray):
            if not self.scoped or data.data.device_id == self.index:
                if dtype is None or data.dtype == dtype:
                    return data
                with self.activate():
                    return data.astype(dtype)
            with self.activate():  # from another GPU: ndarray.copy lands on this one
                out = data.copy()
            return out if dtype is None else out.astype(dtype, copy=False)
        if getattr(data, "_ember_tracer", False):
            return data
        want = np.dtype(dtype) if dtype is not None else getattr(data, "dtype", None)
        if not self.supports_bfloat16 and want is not None and _is_bfloat16(want):
            raise EmberTypeError(f"cuda: bfloat16 tensors need CuPy 14 or later with "
                                 f"ml_dtypes installed; CuPy {self.cupy.__version__} "
                                 f"here can't hold them. Use float16 (with "
                                 f"ember.amp.GradScaler) or upgrade CuPy")
        with self.activate():
            return self.cupy.asarray(data, dtype=dtype)

    def to_numpy(self, array):
        if isinstance(array, self._ndarray):
            return array.get()
        return np.asarray(array)

    def data_ptr(self, array) -> int:
        return array.data.ptr

    def generator(self, seed: int | None) -> "CUDAGenerator":
        return CUDAGenerator(self, seed)

    def matmul(self, a, b):
        with self.activate():
            return self.cupy.matmul(a, b)


def _is_bfloat16(dtype) -> bool:
    return dt.bfloat16.np is not None and dtype == dt.bfloat16.np


def _holds_bfloat16(cupy) -> bool:
    if dt.bfloat16.np is None:
        return False
    try:
        cupy.zeros(1, dtype=dt.bfloat16.np)
        return True
    except (TypeError, ValueError, NotImplementedError):
        return False


_SPECIAL = ("erf", "erfc")


def _array_namespace(cupy):
    """CuPy's namespace as a module of its own, with ember's capability flags; names it
    lacks are looked up in CuPy (and ``erf``/``erfc`` in ``cupyx.scipy.special``)."""
    ns = types.ModuleType("ember.backends.cuda.xp", "CuPy, as ember's ops see it.")
    ns.__dict__.update((k, v) for k, v in vars(cupy).items() if not k.startswith("__"))
    ns.native_half_matmul = True  # cuBLAS runs float16/bfloat16 GEMMs on tensor cores
    ns.asynchronous = True  # kernels are queued: a value read on the host waits for them
    ns.fast_reductions = True  # row sums need no BLAS tricks (which TF32 would round)

    def missing(name: str):
        if name in _SPECIAL:
            special = importlib.import_module("cupyx.scipy.special")
            value = getattr(special, name)
            setattr(ns, name, value)
            return value
        return getattr(cupy, name)
    ns.__getattr__ = missing
    return ns


class CUDAGenerator:
    """Random draws on one GPU with NumPy ``Generator`` method names, from CuPy's
    ``RandomState`` (cuRAND's default generator, XORWOW). Floats are drawn in float32
    or float64 (cuRAND's types); narrower dtypes are cast by the caller."""

    def __init__(self, backend: CUDABackend, seed: int | None):
        self._backend = backend
        # (a NumPy uint64: CuPy casts the seed to uint64 'safely', which NumPy 2 refuses
        # for a Python int)
        seed = None if seed is None else np.uint64(seed % 2 ** 64)
        with backend.activate():
            self._state = backend.cupy.random.RandomState(seed)

    def random(self, size=None, dtype=np.float64):
        with self._backend.activate():
            return self._state.random_sample(size, dtype)

    def standard_normal(self, size=None, dtype=np.float64):
        with self._backend.activate():
            return self._state.standard_normal(size, dtype)

    def uniform(self, low=0.0, high=1.0, size=None):
        with self._backend.activate():
            return self._state.uniform(low, high, size)

    def normal(self, loc=0.0, scale=1.0, size=None):
        with self._backend.activate():
            return self._state.normal(loc, scale, size)

    def exponential(self, scale=1.0, size=None):
        with self._backend.activate():
            return self._state.exponential(scale, size)

    def integers(self, low, high=None, size=None, dtype=np.int64):
        with self._backend.activate():
            return self._state.randint(low, high, size, dtype)

    def permutation(self, n: int):
        with self._backend.activate():
            return self._state.permutation(n).astype(np.int64)

    @property
    def bit_generator(self):
        raise NotImplementedError("a CUDA generator's state can't be read or restored: "
                                  "cuRAND keeps it on the GPU; re-seed it with "
                                  "manual_seed instead")
