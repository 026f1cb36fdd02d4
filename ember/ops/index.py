"""Indexing: ``x[...]`` (basic indexing gives a view, advanced a copy) and ``x[...] = v``."""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, EmberIndexError, EmberTypeError, ShapeError
from . import registry
from .registry import apply, register

__all__ = ["getitem", "setitem", "slice_dim", "index_put"]


def normalize_index(index, device, ndim=None):
    """``index`` as a tuple of ints, slices, None, Ellipsis and backend integer or bool
    arrays; and whether it is basic (so the result is a view). Given the indexed
    tensor's ``ndim``, several ``...`` are expanded as PyTorch does."""
    from ..tensor import Tensor
    if _sequence_as_tuple(index):
        index = tuple(index)
    if not isinstance(index, tuple):
        index = (index,)
    out = []
    basic = True
    for item in index:
        if item is None or item is Ellipsis or isinstance(item, slice):
            if isinstance(item, slice):
                item = slice(_int_or_none(item.start), _int_or_none(item.stop),
                             _int_or_none(item.step))
                if item.step is not None and item.step <= 0:
                    raise EmberError("index: slice step must be greater than zero")
            out.append(item)
        elif isinstance(item, (bool, np.bool_)):
            out.append(bool(item))
            basic = False
        elif isinstance(item, numbers.Integral):
            out.append(int(item))
        elif isinstance(item, Tensor):
            if item.dtype not in _INDEX_DTYPES:
                raise _index_dtype_error(item.dtype)
            if item.dtype is dt.uint8:  # a byte tensor is a mask, as in PyTorch
                out.append(item._data.astype(bool))
                basic = False
            elif item.ndim == 0 and item.dtype is not dt.bool:
                out.append(int(item.item()))
            else:
                out.append(item._data)
                basic = False
        elif isinstance(item, (list, np.ndarray)):
            arr = np.asarray(item)
            if arr.dtype.kind not in "iub" and arr.size:
                raise _index_dtype_error(arr.dtype)
            out.append(device.backend.asarray(arr.astype(np.int64) if arr.dtype.kind != "b"
                                              and arr.size == 0 else arr))
            basic = False
        else:
            raise EmberTypeError(f"index: unsupported index of type {type(item).__name__}; "
                                 "use ints, slices, None, ..., or integer/bool tensors")
    if ndim is not None and sum(i is Ellipsis for i in out) > 1:
        out = _expand_ellipses(out, ndim)
    return tuple(out), basic


def _expand_ellipses(idx, ndim):
    """PyTorch allows several ``...``: each skips the dims the other items leave, so
    ``x[..., ...]`` is ``x[...]`` and ``x[..., 0, ...]`` indexes the last dim; an item
    after a ``...`` that skipped past the last dim is out of range."""
    free = ndim - sum(_consumed(i) for i in idx)
    out, pos = [], 0
    for item in idx:
        if item is Ellipsis:
            out.extend([slice(None)] * max(min(free, ndim - pos), 0))
            pos += free
            continue
        if pos > ndim or pos + _consumed(item) > ndim:
            raise EmberIndexError(f"index: too many indices for tensor of dimension {ndim}: "
                                  f"each '...' stands for {free} dims here")
        out.append(item)
        pos += _consumed(item)
    return out


_INDEX_DTYPES = (dt.int64, dt.int32, dt.uint8, dt.bool)


def _sequence_as_tuple(index) -> bool:
    """PyTorch (like old NumPy) reads ``x[[[0, 1], [1, 2]]]`` as ``x[[0, 1], [1, 2]]``: a
    short list holding sequences, slices, None or ``...`` is a tuple of indices."""
    from ..tensor import Tensor
    return (isinstance(index, list) and len(index) < 32 and any(
        i is None or i is Ellipsis or isinstance(i, (list, tuple, slice, Tensor, np.ndarray))
        for i in index))


def _consumed(item) -> int:
    """How many dims of the indexed tensor one normalized index item uses."""
    if item is None or item is Ellipsis or isinstance(item, bool):
        return 0
    if hasattr(item, "dtype") and item.dtype == bool:
        return item.ndim
    return 1


def split_int_index(idx, shape, op):
    """PyTorch applies integer indices before advanced ones, so ``x[0, :, [0, 4]]`` has
    shape ``(4, 2)`` where NumPy gives ``(2, 4)``. For an advanced index holding ints,
    ``(pre, rest)`` with ``x[pre][rest]`` giving PyTorch's result (``pre`` is basic: the
    ints, a view); None when NumPy's single step already agrees. Integer indices are
    checked against ``shape`` here, so errors name the dims of the tensor indexed."""
    if not any(type(i) is int for i in idx):
        return None
    pre, rest = [], []
    dim = 0
    for item in idx:
        if item is Ellipsis:
            dim = len(shape) - sum(_consumed(i) for i in idx[idx.index(item) + 1:])
        elif dim < len(shape) and (type(item) is int or (hasattr(item, "dtype") and
                                                         item.dtype != bool and item.size)):
            low, high = (item, item) if type(item) is int else (int(item.min()), int(item.max()))
            for v in (low, high):
                if not -shape[dim] <= v < shape[dim]:
                    raise EmberIndexError(f"{op}: index {v} is out of bounds for dimension "
                                          f"{dim} with size {shape[dim]} (tensor of shape "
                                          f"{tuple(shape)})")
        dim += _consumed(item)
        if type(item) is int:
            pre.append(item)
            continue
        rest.append(item)
        if item is Ellipsis:
            pre.append(Ellipsis)
        elif isinstance(item, slice):
            pre.append(slice(None))
        else:
            pre.extend([slice(None)] * _consumed(item))
    return tuple(pre), tuple(rest)


def _index_dtype_error(dtype):
    name = getattr(dtype, "name", str(dtype))
    return EmberIndexError(f"index: tensors used as indices must be long, int, byte or bool "
                           f"tensors, got {name}")


def _int_or_none(v):
    return None if v is None else int(v)


def _getitem(a, index):
    try:
        return a[index]
    except IndexError as exc:
        raise _bad_index("index", a.shape, exc) from None


def _index_forward(xp, a, index):
    out = _getitem(a, index)
    # a basic index (the gradient of an index_backward) gives a view: "index" copies
    return out.copy() if xp.may_share_memory(out, a) else out


def _index_view_forward(xp, a, index):
    # ints alone would give a NumPy scalar; a trailing ... keeps the result a 0-d view
    if not any(i is Ellipsis for i in index):
        index = index + (Ellipsis,)
    return _getitem(a, index)


def _bad_index(op, shape, exc):
    """NumPy's IndexError, said in PyTorch's words, with the op and the tensor's shape."""
    text = str(exc).replace("axis", "dimension").replace("array", "tensor")
    return EmberIndexError(f"{op}: {text} (tensor of shape {tuple(shape)})")


def _index_vjp(n, g):
    return apply(_INDEX_BACKWARD, g, shape=n.inputs[0].shape, index=n.params["index"],
                 accumulate=n.op is _INDEX)


def _index_backward_forward(xp, g, shape, index, accumulate):
    out = xp.zeros(shape, g.dtype)
    if accumulate:
        xp.add.at(out, index, g)
    else:
        out[index] = g
    return out


_INDEX_VIEW = register("index_view", _index_view_forward, _index_vjp, is_view=True,
                       saves_inputs=False, grad_index=lambda n: n.params["index"])
_INDEX = register("index", _index_forward, _index_vjp, saves_inputs=False)
_INDEX_BACKWARD = register("index_backward", _index_backward_forward,
                           lambda n, g: apply(_INDEX, g, index=n.params["index"]),
                           saves_inputs=False)


def _traced_integer_tensors(index) -> bool:
    """Whether ``index`` holds integer tensors ember.jit is tracing (values not known)."""
    if registry._trace is None:  # (eagerly: no cost beyond this test)
        return False
    from ..tensor import Tensor
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, Tensor) and getattr(i._data, "_ember_tracer", False) and
               i.dtype in (dt.int64, dt.int32) and i.ndim for i in items)


def _rebuild(spec, arrays):
    """The index tuple: ``spec``'s items, each ("tensor", k) replaced by ``arrays[k]``."""
    return tuple(arrays[i[1]] if isinstance(i, tuple) else i for i in spec)


def _indexed(a, spec, arrays, op):
    """(the array the advanced part of the index applies to, that part): ``a`` and the
    whole index, or, in PyTorch's order for ints mixed with tensors, the view ``a`` takes
    at the ints and the rest (see :func:`split_int_index`)."""
    idx = _rebuild(spec, arrays)
    split = split_int_index(idx, a.shape, op)
    return (a, idx) if split is None else (a[split[0]], split[1])


def _index_tensors_forward(xp, a, *arrays, spec):
    return _getitem(*_indexed(a, spec, arrays, "index"))


def _index_tensors_backward_forward(xp, g, *arrays, shape, spec):
    out = xp.zeros(shape, g.dtype)
    xp.add.at(*_indexed(out, spec, arrays, "index"), g)
    return out


_INDEX_TENSORS = register(
    "index_tensors", _index_tensors_forward,
    lambda n, g: (apply(_INDEX_TENSORS_BACKWARD, g, *n.inputs[1:], shape=n.inputs[0].shape,
                        spec=n.params["spec"]),) + (None,) * (len(n.inputs) - 1))
_INDEX_TENSORS_BACKWARD = register(
    "index_tensors_backward", _index_tensors_backward_forward,
    lambda n, g: (apply(_INDEX_TENSORS, g, *n.inputs[1:], spec=n.params["spec"]),) +
    (None,) * (len(n.inputs) - 1))


def _index_put_tensors_forward(xp, a, v, *arrays, spec):
    out = a.copy()
    target, idx = _indexed(out, spec, arrays, "setitem")
    try:
        target[idx] = v
    except (ValueError, IndexError) as exc:
        raise _setitem_error(a, v, exc) from None
    return out


def _index_put_tensors_vjp(n, g):
    from .reduce import sum_to
    value, indices, spec = n.inputs[1], n.inputs[2:], n.params["spec"]
    ga = apply(_INDEX_PUT_TENSORS, g, g.new_zeros(()), *indices, spec=spec)
    gv = sum_to(apply(_INDEX_TENSORS, g, *indices, spec=spec), tuple(value.shape))
    return (ga, gv) + (None,) * len(indices)


_INDEX_PUT_TENSORS = register("index_put_tensors", _index_put_tensors_forward,
                              _index_put_tensors_vjp)


def _traced_spec(input, index) -> tuple:
    """(the index tensors ember.jit is tracing, the index with each of them replaced by
    ("tensor", k)): what the ``*_tensors`` ops take."""
    from ..tensor import Tensor
    items = index if isinstance(index, tuple) else (index,)
    tensors, spec = [], []
    for item in items:
        if isinstance(item, Tensor) and getattr(item._data, "_ember_tracer", False):
            if item.dtype not in (dt.int64, dt.int32) or not item.ndim:
                raise EmberTypeError(
                    "index: ember.jit can capture integer tensors (1 or more dims) as "
                    f"indices, not a traced {item.dtype.name} tensor of shape "
                    f"{tuple(item.shape)}; index outside the compiled function, or use "
                    "masked_fill/where for a mask")
            spec.append(("tensor", len(tensors)))
            tensors.append(item)
        else:
            normalized, _ = normalize_index((item,), input.device)
            spec.extend(normalized)
    return tensors, tuple(spec)


def _getitem_traced(input, index):
    """``input[index]`` with integer tensors that ember.jit is tracing: they go into the
    graph as inputs of one op (eagerly they are read as arrays: :func:`normalize_index`)."""
    tensors, spec = _traced_spec(input, index)
    return apply(_INDEX_TENSORS, input, *tensors, spec=spec)


def getitem(input, index):
    """``input[index]``: ints, slices, None, ``...``, integer or bool tensors/lists."""
    if _traced_integer_tensors(index):
        return _getitem_traced(input, index)
    idx, basic = normalize_index(index, input.device, input.ndim)
    if input.ndim == 0 and any(isinstance(i, (int, slice)) and not isinstance(i, bool)
                               for i in idx):
        raise EmberIndexError("index: invalid index of a 0-dim tensor. Use `tensor.item()` "
                              "to convert a 0-dim tensor to a number")
    split = None if basic else split_int_index(idx, input.shape, "index")
    if split is not None:
        return apply(_INDEX, apply(_INDEX_VIEW, input, index=split[0]), index=split[1])
    return apply(_INDEX_VIEW if basic else _INDEX, input, index=idx)


def slice_dim(input, dim: int, start: int, stop: int):
    """The view ``input[..., start:stop, ...]`` along ``dim``."""
    return apply(_INDEX_VIEW, input, index=(slice(None),) * dim + (slice(start, stop),))


def _index_put_forward(xp, a, v, index, accumulate):
    out = a.copy()
    try:
        if accumulate:
            xp.add.at(out, index, v)
        else:
            out[index] = v
    except IndexError as exc:
        raise _bad_index("index_put", a.shape, exc) from None
    except ValueError as exc:
        raise ShapeError(f"index_put: can't assign a value of shape {v.shape} to the indexed "
                         f"region of a tensor of shape {a.shape}: {exc}") from None
    return out


def _index_put_vjp(n, g):
    index, accumulate = n.params["index"], n.params["accumulate"]
    ga = gv = None
    if n.edges[0]:
        ga = g if accumulate else index_put(g, index, g.new_zeros(()), False)
    if n.edges[1]:
        region = apply(_INDEX, g, index=index)
        from .reduce import sum_to
        gv = sum_to(region, n.inputs[1].shape)
    return ga, gv


_INDEX_PUT = register("index_put", _index_put_forward, _index_put_vjp, saves_inputs=False)


def index_put(input, indices, values, accumulate: bool = False):
    """A copy of ``input`` with ``input[indices] = values`` (or ``+=`` with accumulate)."""
    from ._promote import as_operand, scalar_tensor
    from ..tensor import Tensor
    idx, _ = normalize_index(indices, input.device, input.ndim)
    values = as_operand("index_put", values, input.device)
    if not isinstance(values, Tensor):
        values = scalar_tensor(values, input.dtype, input.device)
    elif values.dtype is not input.dtype:  # (as PyTorch: no silent cast)
        raise EmberTypeError(f"index_put: Index put requires the source and destination "
                             f"dtypes match, got {input.dtype.name} for the destination "
                             f"and {values.dtype.name} for the source.")
    return _index_put(input, values, idx, accumulate)


def _index_put(input, values, idx, accumulate, op="index_put"):
    split = split_int_index(idx, input.shape, op) if any(hasattr(i, "dtype") for i in idx) \
        else None
    if split is not None:  # PyTorch's order: the ints first (see split_int_index)
        pre, rest = split
        inner = apply(_INDEX_PUT, apply(_INDEX_VIEW, input, index=pre), values, index=rest,
                      accumulate=accumulate)
        return apply(_INDEX_PUT, input, inner, index=pre, accumulate=False)
    return apply(_INDEX_PUT, input, values, index=idx, accumulate=accumulate)


def setitem(input, index, value) -> None:
    """``input[index] = value`` in place (autograd-aware; see ``ember/ops/inplace.py``)."""
    from ._promote import as_operand, scalar_tensor
    from ..tensor import Tensor
    from .inplace import inplace
    traced = _traced_integer_tensors(index)
    if not traced:
        idx, _ = normalize_index(index, input.device, input.ndim)
    value = as_operand("setitem", value, input.device)
    if not isinstance(value, Tensor):
        value = scalar_tensor(value, input.dtype, input.device)
    elif value.dtype is not input.dtype:
        value = value.to(input.dtype)
    if traced:  # integer index tensors ember.jit is tracing: inputs of one op
        tensors, spec = _traced_spec(input, index)
        inplace("setitem", input,
                lambda x: apply(_INDEX_PUT_TENSORS, x, value, *tensors, spec=spec),
                others=(value,))
        return

    advanced = any(hasattr(i, "dtype") for i in idx)

    def direct(arr):
        split = split_int_index(idx, arr.shape, "setitem") if advanced else None
        try:
            if split is not None:
                arr[split[0]][split[1]] = value._data
            else:
                arr[idx] = value._data
        except (ValueError, IndexError) as exc:
            raise _setitem_error(input, value, exc) from None

    inplace("setitem", input, lambda x: _index_put(x, value, idx, False),
            others=(value,), direct=direct)


def _setitem_error(input, value, exc):
    if isinstance(exc, IndexError):
        return _bad_index("setitem", input.shape, exc)
    return EmberError(f"setitem: can't assign a value of shape {tuple(value.shape)} to a "
                      f"region of a tensor of shape {tuple(input.shape)}: {exc}")
