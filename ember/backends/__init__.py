"""The backend seam: everything device-specific lives behind a small :class:`Backend`.

Code above ``ember.backends`` asks a tensor's device for its backend and uses the
backend's array module (``xp``) and calls; it never branches on the backend's name.

The CPU backend is always there. The CUDA backend (``cuda.py``, on CuPy) is loaded the
first time a ``cuda`` device is used, so ``import ember`` never imports CuPy.
"""
from __future__ import annotations

import importlib

from ..errors import EmberError
from .base import Backend, Device
from .cpu import CPUBackend
from . import cuda  # noqa: F401  (its flags; CuPy loads on first use)
from . import cuda_flags as _cuda_flags
from . import cudnn, mkldnn, mps, openmp  # noqa: F401  (PyTorch's flags, for porting)

_cuda_flags.install(cuda)  # is_built, the SDPA switches, ... (torch.backends.cuda's)

__all__ = ["Backend", "Device", "device", "get_backend", "register_backend", "placement",
           "is_device_type"]

_BACKENDS: dict[str, Backend] = {}
_DEVICES: dict[tuple[str, int | None], Device] = {}
# Device types ember can name, and the module whose load() makes each usable.
_LAZY = {"cuda": "ember.backends.cuda"}
_FAILED: dict[str, str] = {}  # type -> why loading its backend failed (not retried)


def register_backend(backend: Backend) -> None:
    """Make ``backend`` available under ``backend.name`` (``"cpu"``, ``"cuda"``)."""
    _BACKENDS[backend.name] = backend
    _FAILED.pop(backend.name, None)


def get_backend(name: str) -> Backend:
    """The registered backend for a device type, loading it on first use (CUDA needs
    CuPy and a GPU); a clear error when it is unavailable."""
    backend = _BACKENDS.get(name)
    if backend is not None:
        return backend
    if name in _LAZY:
        if name not in _FAILED:
            try:
                register_backend(importlib.import_module(_LAZY[name]).load())
                return _BACKENDS[name]
            except EmberError as exc:
                _FAILED[name] = str(exc)
        raise EmberError(f"device {name!r} is not available: {_FAILED[name]}; use 'cpu'")
    raise EmberError(f"unknown device type {name!r}; expected one of "
                     f"{sorted(set(_BACKENDS) | set(_LAZY))}")


def is_device_type(name) -> bool:
    """True when ``name`` is a device type ember knows (usable or not)."""
    return isinstance(name, str) and (name in _BACKENDS or name in _LAZY)


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
    if not is_device_type(kind):
        raise EmberError(f"device: unknown device type {kind!r}; expected one of "
                         f"{sorted(set(_LAZY) | set(_BACKENDS))}")
    if index is not None and index < 0:
        raise EmberError(f"device: index must be non-negative, got {index}")
    if kind == "cpu":
        index = None  # there is one CPU device; 'cpu:0' names it too
    key = (kind, index)
    dev = _DEVICES.get(key)
    if dev is None:
        dev = _DEVICES[key] = Device(kind, index)
    return dev


def placement(spec) -> Device:
    """The device a tensor made or moved "to ``spec``" lives on: the device named, its
    backend loaded (a clear error where it is unavailable), and ``"cuda"`` without an
    index meaning the current CUDA device (``cuda:0`` unless set otherwise), as in
    PyTorch, so that tensors always carry a concrete device.

    >>> ember.zeros(2, device="cuda").device   # on a machine with a GPU
    device(type='cuda', index=0)
    """
    dev = device(spec)
    backend = dev.backend
    if dev.index is None:
        index = backend.current_index()
        if index is not None:
            dev = device(dev.type, index)
    return dev


register_backend(CPUBackend())
CPU = device("cpu")
