"""``ember.cuda``: GPUs, as ``torch.cuda``: availability, devices, seeding, memory
statistics, streams and events.

Everything here works on a machine without CuPy or a GPU: :func:`is_available` is
False, :func:`device_count` and the memory figures are 0, :func:`manual_seed` is
remembered for later, and what needs a GPU (:func:`synchronize`, :class:`Stream`,
:class:`Event`, :func:`set_device`) raises an :class:`~ember.EmberError` saying why.

The cuBLAS settings are ``ember.backends.cuda.matmul`` (``allow_tf32``), as PyTorch's
``torch.backends.cuda.matmul``. The backend itself is ``ember/backends/cuda.py``.
"""
from __future__ import annotations

from ..backends import device as _device, get_backend
from ..backends import cuda_memory as _memory
from ..errors import EmberError
from ..ops import random as _random
from . import amp  # noqa: F401  (torch.cuda.amp's deprecated names)

__all__ = ["is_available", "device_count", "current_device", "set_device", "device",
           "synchronize", "manual_seed", "manual_seed_all", "seed", "seed_all",
           "is_bf16_supported", "get_device_name", "get_device_capability",
           "memory_allocated", "max_memory_allocated", "reset_peak_memory_stats",
           "memory_reserved", "empty_cache", "Stream", "Event", "current_stream", "stream"]


def _backend(what: str):
    """The CUDA backend, or an error naming ``what`` needed it."""
    try:
        return get_backend("cuda")
    except EmberError as exc:
        raise EmberError(f"{what}: {exc}") from None


def _loaded():
    """The CUDA backend if it can be used, else None (never raises)."""
    try:
        return get_backend("cuda")
    except EmberError:
        return None


def _index(device, what: str) -> int:
    """The GPU index ``device`` (None, an int, ``"cuda:1"`` or a Device) names."""
    backend = _backend(what)
    if device is None:
        return backend.current_index()
    if isinstance(device, int) and not isinstance(device, bool):
        index = device
    else:
        dev = _device(device)
        if dev.type != "cuda":
            raise EmberError(f"{what}: expected a CUDA device, got {dev}")
        index = backend.current_index() if dev.index is None else dev.index
    if not 0 <= index < backend.device_count:
        raise EmberError(f"{what}: there is no device cuda:{index}; CuPy sees "
                         f"{backend.device_count} GPU(s)")
    return index


# Devices ------------------------------------------------------------------------------
def is_available() -> bool:
    """True when CuPy is installed and sees at least one GPU.

    >>> ember.cuda.is_available()
    False
    """
    return _loaded() is not None


def device_count() -> int:
    """The number of GPUs CuPy sees (0 without CuPy or a GPU)."""
    backend = _loaded()
    return 0 if backend is None else backend.device_count


def current_device() -> int:
    """The index of the current GPU (where ``device="cuda"`` puts tensors)."""
    return _backend("current_device").current_index()


def set_device(device) -> None:
    """Make ``device`` (an index, ``"cuda:1"`` or a Device) the current GPU."""
    index = _index(device, "set_device")
    _backend("set_device").cupy.cuda.Device(index).use()


class device:
    """Context manager that makes ``device`` the current GPU, then restores the one
    before.

    >>> with ember.cuda.device(1):
    ...     x = ember.zeros(3, device="cuda")   # on cuda:1
    """

    def __init__(self, device):
        self._index = _index(device, "ember.cuda.device")
        self._context = None

    def __enter__(self):
        self._context = _backend("ember.cuda.device").cupy.cuda.Device(self._index)
        self._context.__enter__()
        return self

    def __exit__(self, *exc):
        self._context.__exit__(*exc)


def synchronize(device=None) -> None:
    """Wait until all work queued on ``device`` (default: the current GPU) has run."""
    index = _index(device, "synchronize")
    _backend("synchronize").for_index(index).synchronize()


def is_bf16_supported() -> bool:
    """True when bfloat16 tensors can live on the GPU (CuPy 14 or later with
    ``ml_dtypes``); False without a GPU."""
    backend = _loaded()
    return backend is not None and backend.supports_bfloat16


def _properties(device, what: str) -> dict:
    index = _index(device, what)
    return _backend(what).cupy.cuda.runtime.getDeviceProperties(index)


def get_device_name(device=None) -> str:
    """The GPU's name (``"NVIDIA H200"``)."""
    name = _properties(device, "get_device_name")["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def get_device_capability(device=None) -> tuple[int, int]:
    """The GPU's compute capability as ``(major, minor)``."""
    props = _properties(device, "get_device_capability")
    return int(props["major"]), int(props["minor"])


# Random numbers -----------------------------------------------------------------------
def manual_seed(seed: int) -> None:
    """Seed the current GPU's default generator (remembered for later without a GPU,
    as PyTorch ignores it there)."""
    backend = _loaded()
    if backend is None:
        _random.seed_devices("cuda", seed)
        return
    _random.default_generator(_device("cuda", backend.current_index())).manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    """Seed the default generators of every GPU."""
    _random.seed_devices("cuda", seed)
    for index in range(device_count()):
        _random.default_generator(_device("cuda", index)).manual_seed(seed)


def seed() -> None:
    """Seed the current GPU's default generator from the OS's entropy."""
    if is_available():
        _random.default_generator(_device("cuda", current_device())).seed()


def seed_all() -> None:
    """Seed every GPU's default generator from the OS's entropy."""
    for index in range(device_count()):
        _random.default_generator(_device("cuda", index)).seed()


# Memory -------------------------------------------------------------------------------
def _pool_figure(device, what: str, read) -> int:
    backend = _loaded()
    if backend is None:
        return 0
    index = _index(device, what)
    cupy = backend.cupy
    with cupy.cuda.Device(index):
        return int(read(cupy.get_default_memory_pool()))


def memory_allocated(device=None) -> int:
    """Bytes of GPU memory held by arrays now (CuPy's memory pool, in use); 0 without
    a GPU.

    >>> ember.cuda.memory_allocated()
    0
    """
    return _pool_figure(device, "memory_allocated", lambda pool: pool.used_bytes())


def memory_reserved(device=None) -> int:
    """Bytes the memory pool holds from the driver: in use plus cached for reuse."""
    return _pool_figure(device, "memory_reserved", lambda pool: pool.total_bytes())


def max_memory_allocated(device=None) -> int:
    """The most bytes in use at once since the program started or the last
    :func:`reset_peak_memory_stats` (counted by ember on CuPy's pool; blocks of 512
    bytes, as the pool hands them out)."""
    if _loaded() is None:
        return 0
    return _memory.peak(_index(device, "max_memory_allocated"))


def reset_peak_memory_stats(device=None) -> None:
    """Start :func:`max_memory_allocated` afresh from the bytes in use now."""
    if _loaded() is None:
        return
    _memory.reset_peak(_index(device, "reset_peak_memory_stats"), memory_allocated(device))


def empty_cache() -> None:
    """Give the blocks the memory pool caches (not those in use) back to the driver."""
    backend = _loaded()
    if backend is None:
        return
    backend.cupy.get_default_memory_pool().free_all_blocks()
    backend.cupy.get_default_pinned_memory_pool().free_all_blocks()


# Streams and events -------------------------------------------------------------------
class Stream:
    """A CUDA stream: a queue of GPU work that runs in order, as ``torch.cuda.Stream``.
    Ops run on the current stream; ``with ember.cuda.stream(s):`` makes ``s`` current.

    Args:
        device: the GPU (default: the current one).
        priority: lower numbers are higher priority (0: the default).
    """

    def __init__(self, device=None, priority: int = 0, *, _wrap=None):
        if _wrap is not None:
            self._stream, self.device = _wrap
            return
        index = _index(device, "Stream")
        cupy = _backend("Stream").cupy
        with cupy.cuda.Device(index):
            try:
                self._stream = (cupy.cuda.Stream(non_blocking=False) if priority == 0 else
                                cupy.cuda.Stream(non_blocking=False, priority=priority))
            except TypeError as exc:
                raise EmberError(f"Stream: this CuPy can't set a priority ({exc})") from None
        self.device = _device("cuda", index)

    def synchronize(self) -> None:
        """Wait until the work queued on this stream has run."""
        self._stream.synchronize()

    def query(self) -> bool:
        """True when all the work queued on this stream has run."""
        return bool(self._stream.done)

    def wait_event(self, event: "Event") -> None:
        """Make the work queued on this stream from now wait for ``event``."""
        self._stream.wait_event(event._event)

    def wait_stream(self, stream: "Stream") -> None:
        """Make the work queued on this stream from now wait for what ``stream`` has
        queued so far."""
        self.wait_event(stream.record_event())

    def record_event(self, event: "Event | None" = None) -> "Event":
        """Record ``event`` (a new one by default) on this stream; returns it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    @property
    def cuda_stream(self) -> int:
        """The raw ``cudaStream_t`` handle."""
        return self._stream.ptr

    def __eq__(self, other) -> bool:
        return isinstance(other, Stream) and self._stream.ptr == other._stream.ptr

    def __hash__(self) -> int:
        return hash(self._stream.ptr)

    def __repr__(self) -> str:
        return f"<ember.cuda.Stream device={self.device} cuda_stream={self._stream.ptr:#x}>"


def current_stream(device=None) -> Stream:
    """The stream ops on ``device`` (default: the current GPU) are queued on now."""
    index = _index(device, "current_stream")
    cupy = _backend("current_stream").cupy
    with cupy.cuda.Device(index):
        return Stream(_wrap=(cupy.cuda.get_current_stream(), _device("cuda", index)))


class stream:
    """Context manager that queues the ops run inside it on ``stream`` (None: no
    change).

    >>> s = ember.cuda.Stream()
    >>> with ember.cuda.stream(s):
    ...     y = x @ x
    """

    def __init__(self, stream: Stream | None):
        self._stream = stream

    def __enter__(self):
        if self._stream is not None:
            self._stream._stream.__enter__()
        return self._stream

    def __exit__(self, *exc):
        if self._stream is not None:
            self._stream._stream.__exit__(*exc)


class Event:
    """A marker in a stream's queue, for waiting and timing, as ``torch.cuda.Event``.

    Args:
        enable_timing: the event can measure :meth:`elapsed_time` (off by default).
        blocking: :meth:`synchronize` blocks the thread instead of spinning.
        interprocess: the event can be shared with other processes.

    >>> start, end = ember.cuda.Event(enable_timing=True), ember.cuda.Event(enable_timing=True)
    >>> start.record(); y = x @ x; end.record(); end.synchronize()
    >>> start.elapsed_time(end)   # milliseconds
    """

    def __init__(self, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False):
        cupy = _backend("Event").cupy
        self._event = cupy.cuda.Event(block=blocking, disable_timing=not enable_timing,
                                      interprocess=interprocess)
        self._cupy = cupy

    def record(self, stream: Stream | None = None) -> None:
        """Record the event on ``stream`` (default: the current stream)."""
        self._event.record(None if stream is None else stream._stream)

    def wait(self, stream: Stream | None = None) -> None:
        """Make ``stream`` (default: the current stream) wait for this event."""
        (current_stream() if stream is None else stream).wait_event(self)

    def query(self) -> bool:
        """True when the work before the event has run."""
        return bool(self._event.done)

    def synchronize(self) -> None:
        """Wait until the work before the event has run."""
        self._event.synchronize()

    def elapsed_time(self, end_event: "Event") -> float:
        """Milliseconds between this event and ``end_event`` (both recorded, the end
        one completed, both made with ``enable_timing=True``)."""
        try:
            return float(self._cupy.cuda.get_elapsed_time(self._event, end_event._event))
        except Exception as exc:  # CUDARuntimeError: not recorded, or timing disabled
            raise EmberError(f"Event.elapsed_time: {exc}; record both events (made with "
                             f"enable_timing=True) and synchronize the end one "
                             f"first") from None

    def __repr__(self) -> str:
        return f"<ember.cuda.Event done={self.query()}>"

