"""Memory accounting for the CUDA backend, on CuPy's memory pool.

CuPy's default pool knows the bytes in use now (``used_bytes``) and held from the
driver (``total_bytes``) but keeps no peak. A ``cupy.cuda.MemoryHook`` counts every
block the pool hands out and takes back, per device, and remembers the largest total:
that is ``ember.cuda.max_memory_allocated`` (PyTorch's counterpart counts the same
thing, bytes handed to tensors, rounded up to the allocator's block size: 512 bytes in
CuPy's pool). The hook is registered for the thread that first used CUDA (CuPy keeps
hooks per thread): blocks allocated or freed on other threads are not counted.
"""
from __future__ import annotations

_current: dict[int, int] = {}
_peak: dict[int, int] = {}
_hook = None


def start(cupy) -> None:
    """Register the counting hook (once)."""
    global _hook
    if _hook is not None:
        return

    class PoolCounter(cupy.cuda.MemoryHook):
        name = "ember.cuda memory stats"

        def malloc_postprocess(self, device_id=0, mem_size=0, mem_ptr=0, **_):
            if mem_ptr:
                now = _current.get(device_id, 0) + mem_size
                _current[device_id] = now
                if now > _peak.get(device_id, 0):
                    _peak[device_id] = now

        def free_postprocess(self, device_id=0, mem_size=0, **_):
            _current[device_id] = _current.get(device_id, 0) - mem_size

    _hook = PoolCounter()
    _hook.__enter__()  # registered for good on this thread


def peak(index: int) -> int:
    """The most bytes in use at once on device ``index`` since the start or the last
    :func:`reset_peak`."""
    return _peak.get(index, 0)


def reset_peak(index: int, in_use: int) -> None:
    """Start a new peak from ``in_use`` (the pool's bytes in use now)."""
    _current[index] = in_use
    _peak[index] = in_use
