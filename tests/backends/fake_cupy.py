"""A stand-in for the parts of CuPy ember's CUDA backend calls, on NumPy, for testing
that backend's glue (loading, devices, transfers, random numbers, memory statistics,
streams, events, the TF32 switch) on a machine without a GPU. It fakes two GPUs.

It does not model CuPy's numerics or its differences from NumPy: the op table on a real
GPU is ``bench/gpu_check.py``'s job.
"""
from __future__ import annotations

import types
import weakref

import numpy as np

N_DEVICES = 2
_state = {"device": 0, "hooks": [], "used": {}, "tf32": []}


class _MemoryPointer:
    def __init__(self, array):
        self.ptr = array.__array_interface__["data"][0]
        self.device_id = array._device_id


class ndarray(np.ndarray):
    """A NumPy array that remembers the fake device it was made on."""

    def __array_finalize__(self, obj):
        self._device_id = getattr(obj, "_device_id", _state["device"])

    @property
    def data(self):
        return _MemoryPointer(self)

    def get(self):
        return np.array(self)

    def copy(self, order="C"):
        return _allocate(np.asarray(self))  # as CuPy's: onto the current device


def _allocate(arr) -> ndarray:
    """``arr`` as a fake device array on the current device, through the fake pool."""
    out = np.array(arr, copy=True).view(ndarray)
    out._device_id = _state["device"]
    size = -(-max(out.nbytes, 1) // 512) * 512
    device = out._device_id
    _state["used"][device] = _state["used"].get(device, 0) + size
    for hook in list(_state["hooks"]):
        hook.malloc_postprocess(device_id=device, size=out.nbytes, mem_size=size,
                                mem_ptr=out.data.ptr, pmem_id=id(out))

    used = _state["used"]

    def free():
        used[device] -= size
        for hook in list(_state["hooks"]):
            hook.free_postprocess(device_id=device, mem_size=size, mem_ptr=0, pmem_id=0)
    weakref.finalize(out, free)
    return out


def asarray(data, dtype=None):
    if isinstance(data, ndarray) and data._device_id == _state["device"] and \
            (dtype is None or data.dtype == dtype):
        return data
    return _allocate(np.asarray(data, dtype=dtype))


class _Device:
    def __init__(self, device=None):
        self.id = _state["device"] if device is None else int(device)
        self._stack = []

    def __enter__(self):
        self._stack.append(_state["device"])
        _state["device"] = self.id
        return self

    def __exit__(self, *exc):
        _state["device"] = self._stack.pop()

    def use(self):
        _state["device"] = self.id

    def synchronize(self):
        pass


class MemoryHook:
    name = "MemoryHook"

    def __enter__(self):
        _state["hooks"].append(self)
        return self

    def __exit__(self, *exc):
        _state["hooks"].remove(self)

    def malloc_postprocess(self, **kwargs):
        pass

    def free_postprocess(self, **kwargs):
        pass


class _Pool:
    def used_bytes(self):
        return _state["used"].get(_state["device"], 0)

    def total_bytes(self):
        return self.used_bytes() + 4096

    def free_all_blocks(self):
        _state.setdefault("freed", 0)
        _state["freed"] += 1


class Stream:
    def __init__(self, non_blocking=False, priority=None):
        self.ptr = id(self)
        self.done = True
        self.waited = []

    def synchronize(self):
        pass

    def wait_event(self, event):
        self.waited.append(event)

    def __enter__(self):
        _state["stream"] = self
        return self

    def __exit__(self, *exc):
        _state["stream"] = None


class Event:
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.disable_timing = disable_timing
        self.recorded = False
        self.done = True

    def record(self, stream=None):
        self.recorded = True
        _state["clock"] = _state.get("clock", 0.0) + 1.5
        self.time = _state["clock"]

    def synchronize(self):
        pass


def get_elapsed_time(start, end):
    if start.disable_timing or end.disable_timing or not start.recorded:
        raise RuntimeError("cudaErrorInvalidResourceHandle")
    return end.time - start.time


class RandomState:
    def __init__(self, seed=None):
        self.device = _state["device"]
        assert seed is None or isinstance(seed, np.uint64), "CuPy wants a uint64 seed"
        self._rng = np.random.RandomState(None if seed is None else int(seed) % 2 ** 32)

    def _out(self, arr, dtype=None):
        assert _state["device"] == self.device, "drawn outside the generator's device"
        return asarray(arr if dtype is None else np.asarray(arr).astype(dtype))

    def random_sample(self, size=None, dtype=float):
        return self._out(self._rng.random_sample(size), dtype)

    def standard_normal(self, size=None, dtype=float):
        return self._out(self._rng.standard_normal(size), dtype)

    def uniform(self, low=0.0, high=1.0, size=None, dtype=float):
        return self._out(self._rng.uniform(low, high, size), dtype)

    def normal(self, loc=0.0, scale=1.0, size=None, dtype=float):
        return self._out(self._rng.normal(loc, scale, size), dtype)

    def exponential(self, scale=1.0, size=None, dtype=float):
        return self._out(self._rng.exponential(scale, size), dtype)

    def randint(self, low, high=None, size=None, dtype=int):
        return self._out(self._rng.randint(low, high, size), dtype)

    def permutation(self, n):
        return self._out(self._rng.permutation(n).astype(np.int32))


def install() -> dict[str, types.ModuleType]:
    """Fresh fake modules, by the names ``sys.modules`` should hold them under."""
    _state.update(device=0, hooks=[], used={}, tf32=[], stream=None)
    cupy = types.ModuleType("cupy")
    cupy.__dict__.update({k: v for k, v in vars(np).items() if not k.startswith("__")})
    cupy.__version__ = "14.0.0+fake"
    cupy.ndarray, cupy.asarray = ndarray, asarray
    cupy.zeros = lambda shape, dtype=float: asarray(np.zeros(shape, dtype))
    pool = _Pool()
    cupy.get_default_memory_pool = lambda: pool
    cupy.get_default_pinned_memory_pool = lambda: pool
    runtime = types.SimpleNamespace(
        getDeviceCount=lambda: N_DEVICES, getDevice=lambda: _state["device"],
        setDevice=lambda i: _state.update(device=i), deviceSynchronize=lambda: None,
        getDeviceProperties=lambda i: {"name": b"Fake GPU", "major": 9, "minor": 0})
    cupy.cuda = types.SimpleNamespace(
        runtime=runtime, Device=_Device, MemoryHook=MemoryHook, Stream=Stream, Event=Event,
        get_elapsed_time=get_elapsed_time,
        get_current_stream=lambda: _state.get("stream") or Stream())
    cupy.random = types.SimpleNamespace(RandomState=RandomState)
    linalg = types.ModuleType("cupy._core._routines_linalg")
    linalg.COMPUTE_TYPE_DEFAULT, linalg.COMPUTE_TYPE_TF32 = 1, 7
    linalg.set_compute_type = lambda dtype, kind: _state["tf32"].append((np.dtype(dtype), kind))
    core = types.ModuleType("cupy._core")
    core._routines_linalg = linalg
    return {"cupy": cupy, "cupy._core": core, "cupy._core._routines_linalg": linalg}


def state() -> dict:
    """The fake's bookkeeping: current device, bytes in use per device, TF32 calls."""
    return _state
