"""Indexing: ``x[...]`` (basic indexing gives a view, advanced a copy) and ``x[...] = v``."""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, EmberIndexError, EmberTypeError, ShapeError
from .registry import apply, register

__all__ = ["getitem", "setitem", "slice_dim", "index_put"]


def normalize_index(index, device):
    """``index`` as a tuple of ints, slices, None, Ellipsis and backend integer or bool
    arrays; and whether it is basic (so the result is a view)."""
    from ..tensor import Tensor
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
    return tuple(out), basic


_INDEX_DTYPES = (dt.int64, dt.int32, dt.uint8, dt.bool)


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


def getitem(input, index):
    """``input[index]``: ints, slices, None, ``...``, integer or bool tensors/lists."""
    idx, basic = normalize_index(index, input.device)
    if input.ndim == 0 and any(isinstance(i, (int, slice)) and not isinstance(i, bool)
                               for i in idx):
        raise EmberIndexError("index: invalid index of a 0-dim tensor. Use `tensor.item()` "
                              "to convert a 0-dim tensor to a number")
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
    idx, _ = normalize_index(indices, input.device)
    values = as_operand("index_put", values, input.device)
    if not isinstance(values, Tensor):
        values = scalar_tensor(values, input.dtype, input.device)
    elif values.dtype is not input.dtype:
        values = values.to(input.dtype)
    return apply(_INDEX_PUT, input, values, index=idx, accumulate=accumulate)


def setitem(input, index, value) -> None:
    """``input[index] = value`` in place (autograd-aware; see ``ember/ops/inplace.py``)."""
    from ._promote import as_operand, scalar_tensor
    from ..tensor import Tensor
    from .inplace import inplace
    idx, _ = normalize_index(index, input.device)
    value = as_operand("setitem", value, input.device)
    if not isinstance(value, Tensor):
        value = scalar_tensor(value, input.dtype, input.device)
    elif value.dtype is not input.dtype:
        value = value.to(input.dtype)

    def direct(arr):
        try:
            arr[idx] = value._data
        except (ValueError, IndexError) as exc:
            raise _setitem_error(input, value, exc) from None

    inplace("setitem", input, lambda x: apply(_INDEX_PUT, x, value, index=idx, accumulate=False),
            others=(value,), direct=direct)


def _setitem_error(input, value, exc):
    if isinstance(exc, IndexError):
        return _bad_index("setitem", input.shape, exc)
    return EmberError(f"setitem: can't assign a value of shape {tuple(value.shape)} to a "
                      f"region of a tensor of shape {tuple(input.shape)}: {exc}")
