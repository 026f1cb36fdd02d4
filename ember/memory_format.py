"""Memory formats: the order in which a tensor's elements lie in memory.

``ember.contiguous_format`` is row-major; ``ember.channels_last`` (4-D) and
``ember.channels_last_3d`` (5-D) put the channel dim innermost (NHWC, NDHWC), as
PyTorch's do; ``ember.preserve_format`` keeps what the input has. Values never change
with the format, only the strides (``x.contiguous(memory_format=ember.channels_last)``,
``x.is_contiguous(memory_format=...)``).
"""
from __future__ import annotations

from .errors import EmberError


class memory_format:  # noqa: N801  (PyTorch's name: torch.memory_format)
    """One memory format; compare with ``is``."""
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"ember.{self.name}"


contiguous_format = memory_format("contiguous_format")
preserve_format = memory_format("preserve_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")

_RANK = {channels_last: 4, channels_last_3d: 5}


def axis_order(fmt, ndim: int, op: str):
    """The dims from outermost to innermost in memory for ``fmt``, or None for the
    row-major order (``contiguous_format``, ``preserve_format`` and None)."""
    if fmt is None or fmt is contiguous_format or fmt is preserve_format:
        return None
    if fmt not in _RANK:
        raise EmberError(f"{op}: memory_format must be an ember memory format (e.g. "
                         f"ember.channels_last), got {fmt!r}")
    if ndim != _RANK[fmt]:
        raise EmberError(f"{op}: {fmt!r} needs a {_RANK[fmt]}-D tensor, got {ndim} dims")
    return (0,) + tuple(range(2, ndim)) + (1,)


def is_laid_out(arr, order) -> bool:
    """Whether ``arr``'s strides are the dense ones of ``order`` (dims of size 1 may have
    any stride, as in PyTorch)."""
    expected = arr.itemsize
    for axis in reversed(order):
        if arr.shape[axis] != 1 and arr.strides[axis] != expected:
            return False
        expected *= arr.shape[axis]
    return True
