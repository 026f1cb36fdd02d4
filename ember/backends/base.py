"""What a backend provides: an array module, transfers, random numbers, BLAS calls."""
from __future__ import annotations


class Backend:
    """A compute backend.

    Attributes:
        name: the device type (``"cpu"``).
        xp: the array module ops are written against (NumPy-compatible).
    """
    name: str
    xp = None

    def asarray(self, data, dtype=None):
        """Return ``data`` as an array of this backend (no copy when possible)."""
        raise NotImplementedError

    def to_numpy(self, array):
        """Return ``array`` as a host NumPy array."""
        raise NotImplementedError

    def generator(self, seed: int | None):
        """Return a new random generator for this backend."""
        raise NotImplementedError

    def matmul(self, a, b):
        raise NotImplementedError


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
            self._backend = get_backend(self.type)
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
