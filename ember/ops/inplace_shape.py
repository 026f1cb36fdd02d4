"""Methods that change a tensor's own shape and strides in place: ``t_``,
``transpose_`` (``swapaxes_``, ``swapdims_``), ``squeeze_``, ``unsqueeze_``, ``resize_``,
``resize_as_``; and the strided constructors ``new_empty_strided`` and ``new``.

An in-place view op makes the tensor the view of itself: its array becomes the view's
and, when it needs a gradient, its graph node the view op's. A view stays a view of its
base (its recorded chain of view ops gains the new one), so later in-place writes to it
still reach the base's graph. As PyTorch, these bump the version counter and refuse a
leaf that requires grad (or a view of one) while grad mode is on.

One limit: a view records how it was made from its base as view ops, so a view taken
of a tensor *before* that tensor's in-place shape change cannot re-derive its history
afterwards (which it must when the base requires grad, or while ``ember.jit`` traces);
that raises a clear error, where PyTorch, which records views by storage offsets and
strides, carries on. Its values stay right: it shares the memory.
"""
from __future__ import annotations

import numbers
import weakref

import numpy as np

from ..autograd import grad_mode
from ..errors import EmberError, EmberTypeError, ShapeError
from ..tensor import Size, Tensor
from . import creation, registry, shape as sh
from .inplace import _check_leaf, _move_retain_hook
from .strided import (_AS_STRIDED, _storage_view, check_size_stride, needed_storage,
                      storage_span)

__all__ = ["t_", "transpose_", "swapaxes_", "swapdims_", "squeeze_", "unsqueeze_",
           "resize_", "resize_as_", "new_empty_strided", "new"]


# Tensors whose shape an in-place view op changed: id -> (weak reference, the version
# after the change). A view made before that version cannot be replayed through them.
_reshaped: dict = {}


def _note_reshaped(t) -> None:
    key = id(t)
    _reshaped[key] = (weakref.ref(t, lambda _, key=key: _reshaped.pop(key, None)),
                      t._version[0])


def check_replayable(view) -> None:
    """Raise if ``view`` was made before a tensor it derives from changed shape in place
    (its recorded view ops expect the old shape)."""
    if not _reshaped:
        return
    t = view
    while t._base is not None:
        t = t._view_src[0]
        entry = _reshaped.get(id(t))
        if entry is not None and entry[0]() is t and view._view_version < entry[1]:
            raise EmberError(
                f"a view of shape {list(view.shape)} was taken before a tensor it comes "
                f"from changed its shape in place (t_, transpose_, squeeze_, resize_, ...); "
                f"ember cannot re-derive its autograd history from the new shape. Take the "
                f"view again after the in-place shape change")


def _shadow(t):
    """A tensor standing for ``t`` as it is now: its array, graph place and view chain."""
    s = Tensor._make(t._data, t._device)
    s._requires_grad, s._node, s._out_index = t._requires_grad, t._node, t._out_index
    s._version = t._version
    s._base, s._view_src, s._view_version = t._base, t._view_src, t._view_version
    return s


def _view_in_place(name: str, self, make):
    """Make ``self`` the view ``make(self)`` of itself; returns self."""
    if grad_mode._state.enabled:
        if self._base is not None:
            self._refresh_view_node()
        _check_leaf(name, self)
    trace = registry._trace
    if trace is not None:
        trace.value_of(self)
        if id(self) in trace.lifted:  # its memory outlives the graph, in its old shape
            raise EmberError(f"{name}: ember.jit cannot change the shape of a tensor from "
                             f"outside the compiled function in place; apply {name} to a "
                             f"tensor made inside it, or use the out-of-place op")
    new = make(_shadow(self))
    self._data = new._data
    if new._node is not None:
        previous = (self._node, self._out_index)
        self._node, self._out_index = new._node, new._out_index
        if self._retains_grad:
            _move_retain_hook(previous, self)
    if self._base is not None:
        self._view_src = new._view_src
    self._version[0] += 1
    self._view_version = self._version[0]
    _note_reshaped(self)
    return self


def t_(self):
    """In-place version of :meth:`t`: this tensor (at most 2-D) becomes its transpose.

    >>> x = ember.zeros(2, 3)
    >>> x.t_().shape
    ember.Size([3, 2])
    """
    if self.ndim > 2:
        raise ShapeError(f"t_: t_() expects a tensor with <= 2 dimensions, but self is "
                         f"{self.ndim}D")
    return _view_in_place("t_", self, sh.t)


def transpose_(self, dim0: int, dim1: int):
    """In-place version of :meth:`transpose`: swap dims ``dim0`` and ``dim1`` of this
    tensor.

    >>> ember.zeros(1, 2, 3).transpose_(0, 2).shape
    ember.Size([3, 2, 1])
    """
    return _view_in_place("transpose_", self, lambda x: sh.transpose(x, dim0, dim1))


def swapaxes_(self, axis0: int, axis1: int):
    """In-place version of :meth:`swapaxes` (:meth:`transpose_`)."""
    return _view_in_place("swapaxes_", self, lambda x: sh.transpose(x, axis0, axis1))


def swapdims_(self, dim0: int, dim1: int):
    """In-place version of :meth:`swapdims` (:meth:`transpose_`)."""
    return _view_in_place("swapdims_", self, lambda x: sh.transpose(x, dim0, dim1))


def squeeze_(self, dim=None):
    """In-place version of :meth:`squeeze`: drop this tensor's size-1 dims (all, or
    those in ``dim``).

    >>> ember.zeros(2, 1, 3).squeeze_().shape
    ember.Size([2, 3])
    """
    return _view_in_place("squeeze_", self, lambda x: sh.squeeze(x, dim))


def unsqueeze_(self, dim: int):
    """In-place version of :meth:`unsqueeze`: insert a size-1 dim at ``dim``.

    >>> ember.zeros(2, 3).unsqueeze_(0).shape
    ember.Size([1, 2, 3])
    """
    return _view_in_place("unsqueeze_", self, lambda x: sh.unsqueeze(x, dim))


# resize_ ---------------------------------------------------------------------------------
def _contiguous_strides(shape: tuple) -> tuple:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def resize_(self, *sizes, memory_format=None):
    """Give this tensor the shape ``sizes``, in place, row-major over its storage from
    its storage offset: its first elements in memory order are kept, and new ones are
    uninitialized. Where the storage is too small, the tensor gets new memory of its
    own (with the old storage's contents copied). A tensor that requires grad (or a
    view of one) cannot be resized.

    >>> x = ember.arange(6.0)
    >>> x.resize_(2, 2)
    tensor([[0., 1.],
            [2., 3.]])
    """
    shape = sh.size_args(sizes, "resize_")
    if any(n < 0 for n in shape):
        raise ShapeError(f"resize_: Trying to create tensor with negative dimension: "
                         f"{list(shape)}")
    if self._requires_grad or (self._base is not None and self._base._requires_grad):
        raise EmberError("resize_: cannot resize variables that require grad")
    if registry._trace is not None or getattr(self._data, "_ember_tracer", False):
        raise EmberError("resize_: ember.jit cannot capture resize_ (it works on the memory "
                         "layout, which the compiled graph decides anew)")
    if shape == tuple(self._data.shape):
        return self
    xp = self._device.backend.xp
    before, total = storage_span(self._data)
    strides = _contiguous_strides(shape)
    if before + needed_storage(shape, strides) <= total:
        self._data = _storage_view(xp, self._data, before, shape, strides)
        if self._base is not None:  # still a view: now by offset and strides
            base = self._base
            base_before = storage_span(base._data)[0]
            self._view_src = (base, _AS_STRIDED, dict(
                size=shape, stride=strides, offset=before - base_before,
                in_strides=tuple(base.stride())))
    else:
        data = xp.empty(shape, self._data.dtype)
        kept = min(total - before, data.size)
        if kept:
            old = _storage_view(xp, self._data, before, (kept,), (1,))
            data.reshape(-1)[:kept] = old
        self._data = data
        if self._base is not None:  # memory of its own: no longer a view
            self._base = self._view_src = None
            self._version = [self._version[0]]
    self._version[0] += 1
    self._view_version = self._version[0]
    _note_reshaped(self)
    return self


def resize_as_(self, the_template, memory_format=None):
    """:meth:`resize_` to ``the_template``'s shape."""
    if not isinstance(the_template, Tensor):
        raise EmberTypeError(f"resize_as_: expected a Tensor, got "
                             f"{type(the_template).__name__}")
    return resize_(self, tuple(the_template.shape))


# new_empty_strided / new -----------------------------------------------------------------
def new_empty_strided(self, size, stride, *, dtype=None, device=None,
                      requires_grad: bool = False, layout=None, pin_memory: bool = False):
    """An uninitialized tensor with the given sizes and strides (in elements), of this
    tensor's dtype and device unless given.

    >>> ember.zeros(1).new_empty_strided((2, 3), (1, 2)).stride()
    (1, 2)
    """
    size, stride = check_size_stride("new_empty_strided", size, stride)
    dtype = dtype or self.dtype
    dev = self.device if device is None else creation._dev(device, "new_empty_strided")
    storage = creation.empty(max(needed_storage(size, stride), 1), dtype=dtype, device=dev)
    xp = dev.backend.xp
    data = xp.lib.stride_tricks.as_strided(storage._data, size,
                                           tuple(s * storage._data.itemsize for s in stride))
    out = Tensor._make(data, dev)
    return out.requires_grad_(requires_grad) if requires_grad else out


def new(self, *args, device=None):
    """PyTorch's legacy constructor: ``x.new()`` (empty, 1-d), ``x.new(2, 3)`` or
    ``x.new(ember.Size([2, 3]))`` (uninitialized, of that shape), ``x.new(data)`` (a
    list, tuple or array, as a tensor), or ``x.new(other)`` (``other`` itself, sharing
    memory; its dtype must be this tensor's). The result has this tensor's dtype and
    device (or ``device``). Prefer :meth:`new_empty` and :meth:`new_tensor`.

    >>> ember.zeros(1).new([1, 2])
    tensor([1., 2.])
    """
    dev = self.device if device is None else creation._dev(device, "new")
    if not args:
        return creation.empty(0, dtype=self.dtype, device=dev)
    if len(args) == 1 and not _is_int(args[0]):
        data = args[0]
        if isinstance(data, Tensor):
            if data.dtype is not self.dtype:
                raise EmberTypeError(f"new: expected a tensor of dtype {self.dtype.name} "
                                     f"(this tensor's), got {data.dtype.name}")
            return data.detach()
        if isinstance(data, Size):
            return creation.empty(*data, dtype=self.dtype, device=dev)
        if isinstance(data, (list, tuple, np.ndarray)):
            return creation.tensor(data, dtype=self.dtype, device=dev)
        raise EmberTypeError(f"new: data must be a sequence (got {type(data).__name__})")
    if not all(_is_int(a) for a in args):
        raise EmberTypeError(f"new: expected sizes as ints, got {args!r}")
    return creation.empty(*args, dtype=self.dtype, device=dev)


def _is_int(a) -> bool:
    return isinstance(a, numbers.Integral) and not isinstance(a, bool)
