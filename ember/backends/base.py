"""What a backend provides: an array module, transfers, random numbers, BLAS calls."""
from __future__ import annotations

import contextlib

_NO_SCOPE = contextlib.nullcontext()


class Backend:
    """A compute backend.

    Attributes:
        name: the device type (``"cpu"``, ``"cuda"``).
        xp: the array module ops are written against (NumPy-compatible). An array
            module may carry optional capability flags that ops read with ``getattr``:
            ``native_half_matmul`` (float16/bfloat16 products are fast as they are, so
            they need not run in float32).
        kernel_renderer: which code generator ``ember.jit`` uses for this backend's
            fused kernels (``"c"`` on the CPU, ``"cuda"`` on CUDA).
        scoped: True where ``xp`` serves several devices and a call must run inside
            :meth:`activate` to land on this backend's device (CuPy with more than one
            GPU); False where there is nothing to select.
    """
    name: str
    xp = None
    kernel_renderer: str | None = None
    scoped = False

    def asarray(self, data, dtype=None):
        """Return ``data`` as an array of this backend (no copy when possible)."""
        raise NotImplementedError

    def to_numpy(self, array):
        """Return ``array`` as a host NumPy array."""
        raise NotImplementedError

    def generator(self, seed: int | None):
        """Return a new random generator for this backend, with NumPy's
        ``Generator`` methods (``random``, ``standard_normal``, ``integers``, ...)."""
        raise NotImplementedError

    def matmul(self, a, b):
        raise NotImplementedError

    def for_index(self, index: int | None) -> "Backend":
        """The backend of device ``index`` of this type (itself where there is one)."""
        return self

    def current_index(self) -> int | None:
        """The index a device named without one (``"cuda"``) means now: the current
        device, as in PyTorch; None for a backend with a single device."""
        return None

    def activate(self):
        """A context in which ``xp`` calls run on this backend's device."""
        return _NO_SCOPE

    def data_ptr(self, array) -> int:
        """The address of ``array``'s first element (a device address on a GPU)."""
        return array.__array_interface__["data"][0]

    def synchronize(self) -> None:
        """Wait for the work queued on this backend's device (nothing on the CPU)."""


class Device:
    """A device: a type and, for accelerators, an index. ``device(type='cpu')``.

    A device can be named before its backend is usable (``ember.device("cuda")`` works
    without a GPU); :attr:`backend` raises a clear error when it is not available.
    """
    __slots__ = ("type", "index", "_backend")

    def __init__(self, type: str, index: int | None, backend: Backend | None = None):
        self.type = type
        self.index = index
        self._backend = backend

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            from . import get_backend
            self._backend = get_backend(self.type).for_index(self.index)
        return self._backend

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            return str(self) == other
        return isinstance(other, Device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))
