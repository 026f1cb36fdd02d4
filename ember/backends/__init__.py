"""The backend seam: everything device-specific lives behind a small :class:`Backend`.

Code above ``ember.backends`` asks a tensor's device for its backend and uses the
backend's array module (``xp``) and calls; it never branches on the backend's name.
"""
from __future__ import annotations

from .base import Backend, Device
from .cpu import CPUBackend

__all__ = ["Backend", "Device", "device", "get_backend", "register_backend"]

_BACKENDS: dict[str, Backend] = {}
_DEVICES: dict[tuple[str, int | None], Device] = {}


def register_backend(backend: Backend) -> None:
    """Make ``backend`` available under ``backend.name`` (``"cpu"``, ``"cuda"``)."""
    _BACKENDS[backend.name] = backend


def get_backend(name: str) -> Backend:
    backend = _BACKENDS.get(name)
    if backend is None:
        if name == "cuda":
            raise RuntimeError("ember: device 'cuda' is not available in this build "
                               "(the CUDA backend needs CuPy and a GPU)")
        raise RuntimeError(f"ember: unknown device type {name!r}; expected one of "
                           f"{sorted(_BACKENDS)}")
    return backend


def device(spec="cpu", index: int | None = None) -> Device:
    """Return the :class:`Device` for ``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a Device.

    >>> ember.device("cpu")
    device(type='cpu')
    """
    if isinstance(spec, Device):
        return spec
    if not isinstance(spec, str):
        spec = str(spec)  # a torch.device or similar
    kind, _, idx = spec.partition(":")
    if idx:
        if not idx.isdigit():
            raise RuntimeError(f"ember: invalid device string {spec!r}")
        index = int(idx)
    if kind == "cpu":
        index = None
    key = (kind, index)
    dev = _DEVICES.get(key)
    if dev is None:
        dev = _DEVICES[key] = Device(kind, index, get_backend(kind))
    return dev


register_backend(CPUBackend())
CPU = device("cpu")
