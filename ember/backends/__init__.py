"""The backend seam: everything device-specific lives behind a small :class:`Backend`.

Code above ``ember.backends`` asks a tensor's device for its backend and uses the
backend's array module (``xp``) and calls; it never branches on the backend's name.
"""
from __future__ import annotations

from ..errors import EmberError
from .base import Backend, Device
from .cpu import CPUBackend

__all__ = ["Backend", "Device", "device", "get_backend", "register_backend"]

_BACKENDS: dict[str, Backend] = {}
_DEVICES: dict[tuple[str, int | None], Device] = {}


def register_backend(backend: Backend) -> None:
    """Make ``backend`` available under ``backend.name`` (``"cpu"``, ``"cuda"``)."""
    _BACKENDS[backend.name] = backend


# Device types ember can name; a backend makes one usable.
_KNOWN_TYPES = ("cpu", "cuda")


def get_backend(name: str) -> Backend:
    """The registered backend for a device type; a clear error when it is unavailable."""
    backend = _BACKENDS.get(name)
    if backend is None:
        if name == "cuda":
            raise EmberError("device 'cuda' is not available: ember's CUDA backend needs "
                             "CuPy and a GPU, and this process has neither; use 'cpu'")
        raise EmberError(f"unknown device type {name!r}; expected one of {sorted(_BACKENDS)}")
    return backend


def device(type="cpu", index: int | None = None) -> Device:
    """Return the :class:`Device` for ``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a Device.

    Naming a device needs no hardware; moving a tensor to one that is unavailable raises.

    >>> ember.device("cpu")
    device(type='cpu')
    >>> ember.device("cuda", 1)
    device(type='cuda', index=1)
    """
    if isinstance(type, Device):
        return type
    spec = type if isinstance(type, str) else str(type)  # a torch.device or similar
    kind, _, idx = spec.partition(":")
    if idx:
        if not idx.isdigit() or index is not None:
            raise EmberError(f"device: invalid device string {spec!r}")
        index = int(idx)
    if kind not in _KNOWN_TYPES and kind not in _BACKENDS:
        raise EmberError(f"device: unknown device type {kind!r}; expected one of "
                         f"{sorted(set(_KNOWN_TYPES) | set(_BACKENDS))}")
    if index is not None and index < 0:
        raise EmberError(f"device: index must be non-negative, got {index}")
    if kind == "cpu":
        index = None  # there is one CPU device; 'cpu:0' names it too
    key = (kind, index)
    dev = _DEVICES.get(key)
    if dev is None:
        dev = _DEVICES[key] = Device(kind, index, _BACKENDS.get(kind))
    return dev


register_backend(CPUBackend())
CPU = device("cpu")
