"""Views with explicit strides: ``unfold`` (sliding windows along a dim) and
``as_strided`` (any sizes and strides over a tensor's storage), and the storage facts
they read (``storage_offset``).

ember keeps no storage object: a tensor's storage is the memory of the outermost array
its backend array is a view of (the array that owns the memory, or the outermost one
over foreign memory). Offsets and strides count elements of the tensor's dtype from the
start of that memory, as PyTorch's do from the start of its storage.

``as_strided`` reads memory, not values, so ``ember.jit`` refuses it: a compiled graph
is free to lay values out anew. Its gradient goes to the input's elements the view
covers (each storage location shared by several input elements splits it evenly, as
PyTorch's does); locations outside the input get none.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..errors import EmberError, EmberIndexError, ShapeError
from . import registry
from .registry import AbstractValue, apply, register
from .shape import wrap_dim

__all__ = ["as_strided"]  # (unfold is a Tensor method only, as in PyTorch)


# Storage ---------------------------------------------------------------------------------
def _root(a):
    """The outermost array that ``a`` is a view of (whose memory holds ``a``'s)."""
    root, obj = a, a.base
    while obj is not None:
        if hasattr(obj, "strides") and hasattr(obj, "dtype"):
            root = obj
        obj = getattr(obj, "base", None)  # (through NumPy's as_strided holders too)
    return root


def _pointer(a) -> int:
    interface = getattr(a, "__array_interface__", None)
    if interface is not None:
        return interface["data"][0]
    return a.data.ptr  # (a CuPy array)


def _byte_extent(a) -> tuple:
    """The lowest address ``a`` reads and one past the highest."""
    lo = hi = _pointer(a)
    if a.size == 0:
        return lo, hi
    for n, s in zip(a.shape, a.strides):
        if s > 0:
            hi += (n - 1) * s
        else:
            lo += (n - 1) * s
    return lo, hi + a.itemsize


def storage_span(a) -> tuple:
    """``(offset, size)``: elements of ``a``'s dtype before ``a``'s first one in its
    storage, and in the whole storage."""
    lo, hi = _byte_extent(_root(a))
    ptr, size = _pointer(a), a.itemsize
    before = max(ptr - lo, 0) // size
    return before, before + max(hi - ptr, 0) // size


def _storage_view(xp, a, offset: int, shape: tuple, strides: tuple):
    """A view of ``a``'s storage: ``shape`` and element ``strides`` from ``offset``
    (which the caller has checked to lie inside the storage)."""
    before, total = storage_span(a)
    size = a.itemsize
    tricks = xp.lib.stride_tricks
    # Back from a's first element to the storage's first (a view may not start earlier
    # than its array; reversed, this one starts there), then the storage as 1-d.
    back = tricks.as_strided(a, (before + 1,), (-size,))[::-1]
    flat = tricks.as_strided(back, (total,), (size,))
    return tricks.as_strided(flat[offset:], shape, tuple(s * size for s in strides))


def storage_offset(self) -> int:
    """The offset of this tensor's first element in its storage, in elements.

    >>> ember.arange(6)[2:].storage_offset()
    2
    """
    if getattr(self._data, "_ember_tracer", False):
        raise EmberError("storage_offset: a tensor ember.jit is tracing has no storage "
                         "yet; its layout is decided when the graph is compiled")
    return storage_span(self._data)[0]


def needed_storage(size: tuple, stride: tuple) -> int:
    """Elements of storage that sizes ``size`` with strides ``stride`` reach."""
    if any(n == 0 for n in size):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(size, stride))


def check_size_stride(op: str, size, stride) -> tuple:
    """``(size, stride)`` as tuples of ints, or PyTorch's errors."""
    try:
        size, stride = tuple(int(n) for n in size), tuple(int(s) for s in stride)
    except TypeError:
        raise EmberError(f"{op}: size and stride must be sequences of ints, got "
                         f"{size!r} and {stride!r}") from None
    if len(size) != len(stride):
        raise ShapeError(f"{op}: mismatch in length of strides and shape: sizes "
                         f"{list(size)} ({len(size)} dims), strides {list(stride)} "
                         f"({len(stride)} dims)")
    if any(n < 0 for n in size):
        raise ShapeError(f"{op}: sizes must be non-negative, got {list(size)}")
    if any(s < 0 for s in stride):
        raise EmberError(f"{op}: Negative strides are not supported at the moment, got "
                         f"strides: {list(stride)}")
    return size, stride


# as_strided ------------------------------------------------------------------------------
def _as_strided_forward(xp, a, size, stride, offset, in_strides):
    before, total = storage_span(a)
    start = before + offset
    if start < 0 or start + needed_storage(size, stride) > total:
        raise EmberError(f"as_strided: sizes {list(size)} and strides {list(stride)} from "
                         f"{offset:+d} elements of the input reach outside the memory of "
                         f"this array ({total} elements); the view was made over a "
                         f"storage this copy does not have")
    return _storage_view(xp, a, start, size, stride)


def _offsets(xp, shape, strides, start=0):
    """The storage offset of every element of a ``shape`` array with ``strides``."""
    out = xp.full(shape, start, dtype=np.int64)
    for d, (n, s) in enumerate(zip(shape, strides)):
        step = xp.arange(n, dtype=np.int64) * s
        out = out + step.reshape((n,) + (1,) * (len(shape) - d - 1))
    return out


def _geometry(xp, in_shape, params):
    """Offsets of the input's and the view's elements, shifted to start at 0, and the
    number of input elements at each offset."""
    o_in = _offsets(xp, in_shape, params["in_strides"]).reshape(-1)
    o_out = _offsets(xp, params["size"], params["stride"], params["offset"]).reshape(-1)
    low = min(int(o_in.min()) if o_in.size else 0, int(o_out.min()) if o_out.size else 0)
    o_in, o_out = o_in - low, o_out - low
    span = max(int(o_in.max()) + 1 if o_in.size else 0,
               int(o_out.max()) + 1 if o_out.size else 0)
    return o_in, o_out, span, xp.bincount(o_in, minlength=span)


def _as_strided_backward_forward(xp, g, in_shape, size, stride, offset, in_strides):
    """The input's gradient: the view's gradient summed over each storage location,
    shared evenly by the input elements at that location."""
    o_in, o_out, span, count = _geometry(xp, in_shape, dict(
        size=size, stride=stride, offset=offset, in_strides=in_strides))
    flat = g.reshape(-1)
    if flat.dtype.kind == "c":  # (bincount weighs by real numbers: each part on its own)
        acc = xp.bincount(o_out, weights=flat.real.astype(np.float64), minlength=span) + \
            1j * xp.bincount(o_out, weights=flat.imag.astype(np.float64), minlength=span)
    else:
        acc = xp.bincount(o_out, weights=flat.astype(np.float64), minlength=span)
    out = acc[o_in] / xp.maximum(count[o_in], 1)
    return out.reshape(in_shape).astype(g.dtype, copy=False)


def _as_strided_gather_forward(xp, h, size, stride, offset, in_strides):
    """The transpose of the backward: each view element reads the mean of the input
    elements at its storage location (0 where there are none)."""
    o_in, o_out, span, count = _geometry(xp, h.shape, dict(
        size=size, stride=stride, offset=offset, in_strides=in_strides))
    acc = xp.bincount(o_in, weights=h.reshape(-1).astype(np.float64), minlength=span)
    mean = acc / xp.maximum(count, 1)
    return mean[o_out].reshape(size).astype(h.dtype, copy=False)


def _strided_params(n):
    p = n.params
    return dict(size=p["size"], stride=p["stride"], offset=p["offset"],
                in_strides=p["in_strides"])


_AS_STRIDED = register(
    "as_strided", _as_strided_forward,
    lambda n, g: apply(_AS_STRIDED_BACKWARD, g, in_shape=tuple(n.inputs[0].shape),
                       **_strided_params(n)),
    is_view=True, saves_inputs=False,
    infer=lambda a, size, stride, offset, in_strides: AbstractValue(size, a.dtype))
_AS_STRIDED_BACKWARD = register(
    "as_strided_backward", _as_strided_backward_forward,
    lambda n, g: apply(_AS_STRIDED_GATHER, g, **_strided_params(n)), saves_inputs=False,
    infer=lambda g, in_shape, **p: AbstractValue(in_shape, g.dtype))
_AS_STRIDED_GATHER = register(
    "as_strided_gather", _as_strided_gather_forward,
    lambda n, g: apply(_AS_STRIDED_BACKWARD, g, in_shape=tuple(n.inputs[0].shape),
                       **_strided_params(n)), saves_inputs=False,
    infer=lambda h, size, **p: AbstractValue(size, h.dtype))


def as_strided(input, size, stride, storage_offset: int | None = None):
    """A view of ``input``'s storage with the given sizes and strides (in elements),
    starting ``storage_offset`` elements into the storage (``input``'s own offset by
    default). Writing to the view writes to ``input``; elements may overlap.

    Args:
        size: the view's shape.
        stride: the step in storage elements along each dim (non-negative).
        storage_offset: where the view starts in the storage.

    >>> x = ember.arange(6.0)
    >>> x.as_strided((2, 2), (1, 2), 1)
    tensor([[1., 3.],
            [2., 4.]])
    """
    if registry._trace is not None or getattr(input._data, "_ember_tracer", False):
        raise EmberError("as_strided: ember.jit cannot capture as_strided (it reads the "
                         "memory layout, which the compiled graph decides anew); use view, "
                         "unfold, expand or indexing, or call it outside ember.jit")
    size, stride = check_size_stride("as_strided", size, stride)
    before, total = storage_span(input._data)
    start = before if storage_offset is None else int(storage_offset)
    if start < 0:
        raise EmberError(f"as_strided: Tensor: invalid storage offset {start}")
    need = start + needed_storage(size, stride)
    if need > total:
        item = input.dtype.itemsize
        raise EmberError(f"as_strided: setStorage: sizes {list(size)}, strides {list(stride)},"
                         f" storage offset {start}, and itemsize {item} requiring a storage "
                         f"size of {need * item} are out of bounds for storage of size "
                         f"{total * item}")
    return apply(_AS_STRIDED, input, size=size, stride=stride, offset=start - before,
                 in_strides=tuple(input.stride()))


# unfold ----------------------------------------------------------------------------------
def _windows(n: int, size: int, step: int) -> int:
    return (n - size) // step + 1


def _unfold_forward(xp, a, dim, size, step):
    tricks = xp.lib.stride_tricks
    if a.ndim == 0:
        return tricks.as_strided(a, (size,), (a.itemsize,))
    count = _windows(a.shape[dim], size, step)
    shape = a.shape[:dim] + (count,) + a.shape[dim + 1:] + (size,)
    strides = a.strides[:dim] + (a.strides[dim] * step,) + a.strides[dim + 1:] + \
        (a.strides[dim],)
    return tricks.as_strided(a, shape, strides)


def _unfold_backward_forward(xp, g, shape, dim, size, step):
    """The input's gradient: each window's gradient added back where it was read."""
    out = xp.zeros(shape, g.dtype)
    if len(shape) == 0:
        if size:
            out[...] = g.reshape(size).sum()
        return out
    count = g.shape[dim]
    moved = xp.moveaxis(g, -1, dim + 1)  # window elements next to the window index
    lead = (slice(None),) * dim
    if size <= count:
        for k in range(size):  # element k of every window
            out[lead + (slice(k, k + step * (count - 1) + 1, step),)] += \
                moved[lead + (slice(None), k)]
    else:
        for w in range(count):  # window w, whole
            out[lead + (slice(w * step, w * step + size),)] += moved[lead + (w,)]
    return out


def _unfold_infer(a, dim, size, step):
    if a.ndim == 0:
        return AbstractValue((size,), a.dtype)
    shape = a.shape[:dim] + (_windows(a.shape[dim], size, step),) + a.shape[dim + 1:]
    return AbstractValue(shape + (size,), a.dtype)


_UNFOLD = register(
    "unfold", _unfold_forward,
    lambda n, g: apply(_UNFOLD_BACKWARD, g, shape=tuple(n.inputs[0].shape),
                       **n.params),
    is_view=True, saves_inputs=False, infer=_unfold_infer)
_UNFOLD_BACKWARD = register(
    "unfold_backward", _unfold_backward_forward,
    lambda n, g: apply(_UNFOLD, g, dim=n.params["dim"], size=n.params["size"],
                       step=n.params["step"]),
    saves_inputs=False, infer=lambda g, shape, **p: AbstractValue(shape, g.dtype))


def unfold(input, dimension: int, size: int, step: int):
    """All windows of ``size`` elements along ``dimension``, ``step`` apart, as a view:
    that dim becomes the window count ``(n - size) // step + 1`` and a last dim of
    ``size`` is added. Windows overlap when ``step < size`` (they share memory).

    Args:
        dimension: the dim to slide along.
        size: elements per window.
        step: distance between window starts (positive).

    >>> ember.arange(5.0).unfold(0, 2, 2)
    tensor([[0., 1.],
            [2., 3.]])
    """
    for name, value in (("dimension", dimension), ("size", size), ("step", step)):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise EmberError(f"unfold: {name} must be an int, got {type(value).__name__}")
    dim = wrap_dim(dimension, input.ndim, "unfold")
    length = input.shape[dim] if input.ndim else 1
    if size > length:
        raise EmberIndexError(f"unfold: maximum size for tensor at dimension {dim} is "
                              f"{length} but size is {size}")
    if size < 0:
        raise EmberError(f"unfold: size is {size} but must be >= 0")
    if step <= 0:
        raise EmberError(f"unfold: step is {step} but must be > 0")
    return apply(_UNFOLD, input, dim=dim, size=int(size), step=int(step))
