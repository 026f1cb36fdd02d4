"""Making tensors: from data, filled, ranges; and moving them between devices.
(Random tensors are in ``random.py``.)"""
from __future__ import annotations

import math
import numbers
import operator

import numpy as np

from .. import dtypes as dt
from ..backends import CPU, placement
from ..autograd import grad_mode
from ..autograd.graph import Node, edge_of
from ..errors import EmberError, EmberTypeError
from ..tensor import Tensor
from .registry import register

__all__ = ["tensor", "as_tensor", "asarray", "from_numpy", "from_dlpack", "zeros", "ones",
           "full", "empty", "zeros_like", "ones_like", "full_like", "empty_like", "arange",
           "linspace", "logspace", "eye", "scalar_tensor"]


def _dev(device, name: str | None = None):
    """The device for a ``device=`` argument (the CPU by default); ``name`` prefixes the
    error where the device is unavailable."""
    if device is None:
        return CPU
    try:
        return placement(device)
    except EmberError as exc:
        if name is None:
            raise
        raise EmberError(f"{name}: {exc}") from None


def _dtype(name: str, dtype, default: dt.DType | None = None) -> dt.DType:
    if dtype is None:
        return dt.get_default_dtype() if default is None else default
    return dt.as_dtype(dtype, name)


def _check_grad_dtype(name: str, dtype: dt.DType, requires_grad: bool) -> None:
    if requires_grad and not dtype.differentiable:
        raise EmberTypeError(f"{name}: only Tensors of floating point and complex dtype can "
                             f"require gradients, got dtype {dtype.name}")


def _new(name: str, arr, dtype: dt.DType, device, requires_grad: bool):
    """A leaf tensor of ``dtype`` on ``device`` holding the host array ``arr``."""
    _check_grad_dtype(name, dtype, requires_grad)
    dev = _dev(device, name)
    if getattr(arr, "_ember_tracer", False):  # a random draw ember.jit is recording
        t = Tensor._make(arr, dev)
    else:
        if arr.dtype != dtype.np:
            arr = arr.astype(dtype.np)
        t = Tensor._make(dev.backend.asarray(arr), dev)
    if requires_grad:
        t.requires_grad_(True)
    return t


# From data ------------------------------------------------------------------------------
def _np_dtype(name: str, np_dtype) -> dt.DType:
    found = dt._BY_NP.get(np_dtype)
    if found is not None:
        return found
    if np_dtype.kind in "iu":  # uint16/32/64: values kept, in ember's widest integer
        return dt.int64
    raise EmberTypeError(f"{name}: can't convert NumPy data of dtype {np_dtype} to a tensor; "
                         f"supported dtypes are {', '.join(d.name for d in dt.ALL + dt.COMPLEX)}")


def _infer_dtype(name: str, data) -> dt.DType:
    """PyTorch's inference: bools give bool, ints int64, floats the default dtype; arrays,
    NumPy scalars and tensors keep theirs; a sequence promotes over its elements."""
    if isinstance(data, Tensor):
        return data.dtype
    if isinstance(data, (np.ndarray, np.generic)):
        return _np_dtype(name, data.dtype)
    if isinstance(data, float):
        return dt.get_default_dtype()
    if isinstance(data, bool):
        return dt.bool
    if isinstance(data, numbers.Integral):
        return dt.int64
    if isinstance(data, numbers.Real):
        return dt.get_default_dtype()
    if isinstance(data, numbers.Complex):
        return dt.get_default_dtype().to_complex()
    if isinstance(data, range):
        return dt.int64
    if isinstance(data, (list, tuple)):
        kinds = set(map(type, data))
        if kinds and kinds <= {bool, int, float}:  # the common case, without recursion
            return (dt.get_default_dtype() if float in kinds else
                    dt.int64 if int in kinds else dt.bool)
        out = None
        for x in data:
            d = _infer_dtype(name, x)
            out = d if out is None else dt.promote_types(out, d)
        return dt.get_default_dtype() if out is None else out
    if isinstance(data, (str, bytes)):
        raise EmberTypeError(f"{name}: can't make a tensor from the string {data!r}; "
                             "expected numbers")
    raise EmberTypeError(f"{name}: could not infer the dtype of {type(data).__name__}; "
                         "expected a number, a (nested) sequence of numbers, an array or "
                         "a tensor")


def _nested_shape(data) -> tuple:
    if isinstance(data, (list, tuple, range)):
        return (len(data),) + (_nested_shape(data[0]) if len(data) else ())
    return tuple(np.shape(data))


def _ragged_error(name: str, data, dim: int = 0) -> EmberError | None:
    """The error describing where nested ``data`` is ragged (None where it is not)."""
    if not isinstance(data, (list, tuple, range)) or not len(data):
        return None
    first = _nested_shape(data[0])
    for i, x in enumerate(data):
        shape = _nested_shape(x)
        if shape != first:
            return EmberError(f"{name}: expected a sequence of equal-length sequences, but at "
                              f"dim {dim} element 0 has shape {first} and element {i} has "
                              f"shape {shape}")
    for x in data:
        err = _ragged_error(name, x, dim + 1)
        if err is not None:
            return err
    return None


def _unwrap_tensors(data):
    if isinstance(data, Tensor):
        return data._device.backend.to_numpy(data._data)
    if isinstance(data, (list, tuple)):
        return [_unwrap_tensors(x) for x in data]
    return data


_PLAIN_DATA = (list, tuple, float, int, bool, np.ndarray, np.generic, range, str, bytes)


def _has_tensor(data) -> bool:
    kinds = set(map(type, data))
    if kinds <= {bool, int, float}:
        return False
    return any(isinstance(x, Tensor) or isinstance(x, (list, tuple)) and _has_tensor(x)
               for x in data)


def _host_data(name: str, data):
    """``data`` with foreign arrays (torch, CuPy...) turned into NumPy arrays."""
    if isinstance(data, Tensor):
        return data._device.backend.to_numpy(data._data)
    if isinstance(data, _PLAIN_DATA) or isinstance(data, numbers.Number):
        return data
    try:
        if hasattr(data, "__dlpack__"):
            return np.from_dlpack(data)
        if hasattr(data, "__array__"):
            return np.asarray(data)
    except (BufferError, TypeError, RuntimeError, ValueError) as exc:
        raise EmberTypeError(f"{name}: can't read {type(data).__name__} data: {exc}") from None
    return data


def _to_numpy(name: str, data, dtype: dt.DType) -> np.ndarray:
    """``data`` (already host data) as a new NumPy array of ``dtype``."""
    if isinstance(data, np.ndarray):
        return np.array(data, dtype=dtype.np, copy=True)
    if isinstance(data, (list, tuple)) and _has_tensor(data):
        data = _unwrap_tensors(data)
    try:
        with np.errstate(over="ignore"):  # 1e40 as float32 is inf, as in PyTorch
            return np.array(data, dtype=dtype.np)
    except OverflowError:
        raise EmberError(f"{name}: a value in the data is out of range for "
                         f"{dtype.name}") from None
    except (ValueError, TypeError) as exc:
        err = _ragged_error(name, data)
        raise (err or EmberError(f"{name}: can't convert the data to {dtype.name}: "
                                 f"{exc}")) from None


def tensor(data, *, dtype=None, device=None, requires_grad: bool = False):
    """A new tensor holding a copy of ``data`` (a number, nested sequence, array or tensor).

    The dtype, when not given, follows PyTorch: Python floats give the default dtype,
    ints ``int64``, bools ``bool``; NumPy arrays and tensors keep theirs.

    >>> ember.tensor([[1, 2], [3, 4]])
    tensor([[1, 2],
            [3, 4]])
    """
    data = _host_data("tensor", data)
    dtype = _infer_dtype("tensor", data) if dtype is None else dt.as_dtype(dtype, "tensor")
    return _new("tensor", _to_numpy("tensor", data, dtype), dtype, device, requires_grad)


def asarray(obj, *, dtype=None, device=None, copy: bool | None = None,
            requires_grad: bool | None = None):
    """``obj`` as a tensor, sharing memory with it when it can.

    Tensors, NumPy arrays and DLPack objects are shared unless ``copy=True`` or another
    dtype or device is asked for; ``copy=False`` raises where sharing is impossible.
    ``requires_grad=None`` keeps a tensor's flag.

    >>> a = np.zeros(3, dtype=np.float32)
    >>> ember.asarray(a)[0] = 1.0  # a[0] is now 1.0
    """
    want_dtype = None if dtype is None else dt.as_dtype(dtype, "asarray")
    want_dev = None if device is None else placement(device)
    if not isinstance(obj, Tensor):
        host = _host_data("asarray", obj)
        if isinstance(host, (np.ndarray, np.generic)) and host.dtype in dt._BY_NP:
            obj = Tensor._make(np.asarray(host), CPU)
        elif copy is False:
            raise EmberError(f"asarray: can't share memory with {type(obj).__name__} data "
                             "(copy=False); only tensors, NumPy arrays of an ember dtype and "
                             "DLPack objects can be shared")
        else:
            out = tensor(host, dtype=want_dtype, device=want_dev)
            _check_grad_dtype("asarray", out.dtype, bool(requires_grad))
            return out.requires_grad_(bool(requires_grad))
    same = (want_dtype in (None, obj.dtype)) and (want_dev in (None, obj.device))
    if copy is False and not same:
        raise EmberError(f"asarray: can't share memory of a {obj.dtype.name} tensor on "
                         f"{obj.device} as {(want_dtype or obj.dtype).name} on "
                         f"{want_dev or obj.device} (copy=False)")
    out = obj if same and not copy else obj.to(dtype=want_dtype, device=want_dev,
                                               copy=bool(copy))
    if requires_grad is False and out.requires_grad:
        out = out.detach()
    elif requires_grad and not out.requires_grad:
        _check_grad_dtype("asarray", out.dtype, True)
        out.requires_grad_(True)
    return out


def as_tensor(data, dtype=None, device=None):
    """Like :func:`tensor` but shares memory with ``data`` (a tensor or NumPy array) when
    the dtype and device already match; a tensor keeps its autograd history.

    >>> a = np.array([1, 2, 3])
    >>> ember.as_tensor(a)[0] = -1  # a[0] is now -1
    """
    return asarray(data, dtype=dtype, device=device)


def from_numpy(ndarray: np.ndarray):
    """A tensor sharing memory with ``ndarray`` (changes to one show in the other).

    >>> a = np.arange(3.0)
    >>> ember.from_numpy(a)
    tensor([0., 1., 2.], dtype=ember.float64)
    """
    if not isinstance(ndarray, np.ndarray):
        raise EmberTypeError(f"from_numpy: expected np.ndarray, got {type(ndarray).__name__}")
    if ndarray.dtype not in dt._BY_NP:
        raise EmberTypeError(f"from_numpy: can't share NumPy data of dtype {ndarray.dtype}; "
                             f"supported dtypes are {', '.join(d.name for d in dt.ALL)}")
    return Tensor._make(ndarray, CPU)


def from_dlpack(ext_tensor):
    """A tensor sharing memory with any CPU object that implements ``__dlpack__``
    (a torch tensor, a NumPy array, a JAX array...).

    >>> ember.from_dlpack(torch.arange(3))
    tensor([0, 1, 2])
    """
    if isinstance(ext_tensor, Tensor):
        return ext_tensor
    try:
        arr = np.from_dlpack(ext_tensor)
    except (AttributeError, BufferError, TypeError, RuntimeError, ValueError) as exc:
        raise EmberTypeError(f"from_dlpack: can't import {type(ext_tensor).__name__} through "
                             f"DLPack: {exc}") from None
    if arr.dtype not in dt._BY_NP:
        raise EmberTypeError(f"from_dlpack: unsupported dtype {arr.dtype}")
    return Tensor._make(arr, CPU)


# Filled ---------------------------------------------------------------------------------
def _size(size: tuple, name: str, named=None) -> tuple:
    """The shape from ``f(2, 3)``, ``f((2, 3))``, ``f([2, 3])``, ``f(ember.Size(...))`` or
    ``f(size=(2, 3))`` (``named``: the size given by name, or None)."""
    if named is not None:
        if size:
            raise EmberTypeError(f"{name}: got the size both as arguments {size} and as "
                                 f"size={named!r}")
        size = (named,)
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    dims = []
    for s in size:
        try:
            if isinstance(s, bool):
                raise TypeError
            dims.append(operator.index(s))
        except TypeError:
            raise EmberTypeError(f"{name}: size must be a tuple of ints, got "
                                 f"{tuple(size)!r}") from None
    for d in dims:
        if d < 0:
            raise EmberError(f"{name}: negative dimension {d} in size {tuple(dims)}; "
                             "sizes must be non-negative")
    return tuple(dims)


def _filled(name: str, fill, size, dtype, device, requires_grad, named=None):
    dtype = _dtype(name, dtype)
    _check_grad_dtype(name, dtype, requires_grad)
    dev = _dev(device, name)
    backend = dev.backend
    with backend.activate():
        arr = fill(backend.xp, _size(size, name, named), dtype.np)
    return Tensor._make(arr, dev).requires_grad_(requires_grad)


def zeros(*sizes, size=None, dtype=None, device=None, requires_grad: bool = False):
    """A tensor of zeros; ``size`` as ints or one tuple.

    >>> ember.zeros(2, 3).shape
    ember.Size([2, 3])
    """
    return _filled("zeros", lambda xp, s, d: xp.zeros(s, d), sizes, dtype, device,
                   requires_grad, size)


def ones(*sizes, size=None, dtype=None, device=None, requires_grad: bool = False):
    """A tensor of ones; ``size`` as ints or one tuple.

    >>> ember.ones(2)
    tensor([1., 1.])
    """
    return _filled("ones", lambda xp, s, d: xp.ones(s, d), sizes, dtype, device,
                   requires_grad, size)


def empty(*sizes, size=None, dtype=None, device=None, requires_grad: bool = False,
          memory_format=None):
    """A tensor with uninitialised values; ``size`` as ints or one tuple.

    >>> ember.empty(2, 3).shape
    ember.Size([2, 3])
    """
    return _filled("empty", lambda xp, s, d: xp.empty(s, d), sizes, dtype, device,
                   requires_grad, size)


def full(size, fill_value, *, dtype=None, device=None, requires_grad: bool = False):
    """A tensor filled with ``fill_value``; its dtype follows the value when not given
    (bool, int64, or the default float dtype).

    >>> ember.full((2,), 7)
    tensor([7, 7])
    """
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    if dtype is None:
        dtype = dt.scalar_dtype(fill_value)
    return _filled("full", lambda xp, s, d: xp.full(s, fill_value, d), (size,), dtype, device,
                   requires_grad)


def zeros_like(input, *, dtype=None, device=None, requires_grad: bool = False,
               memory_format=None):
    """Zeros with ``input``'s shape, and its dtype and device unless given.

    >>> ember.zeros_like(ember.ones(2, dtype=ember.int32))
    tensor([0, 0], dtype=ember.int32)
    """
    return zeros(input.shape, dtype=dtype or input.dtype, device=device or input.device,
                 requires_grad=requires_grad)


def ones_like(input, *, dtype=None, device=None, requires_grad: bool = False,
              memory_format=None):
    """Ones with ``input``'s shape, and its dtype and device unless given.

    >>> ember.ones_like(ember.zeros(2))
    tensor([1., 1.])
    """
    return ones(input.shape, dtype=dtype or input.dtype, device=device or input.device,
                requires_grad=requires_grad)


def empty_like(input, *, dtype=None, device=None, requires_grad: bool = False,
               memory_format=None):
    """Uninitialised values with ``input``'s shape, and its dtype and device unless given.

    >>> ember.empty_like(ember.zeros(2, 3)).shape
    ember.Size([2, 3])
    """
    return empty(input.shape, dtype=dtype or input.dtype, device=device or input.device,
                 requires_grad=requires_grad)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad: bool = False,
              memory_format=None):
    """``fill_value`` with ``input``'s shape, and its dtype and device unless given.

    >>> ember.full_like(ember.zeros(2), 7)
    tensor([7., 7.])
    """
    return full(input.shape, fill_value, dtype=dtype or input.dtype,
                device=device or input.device, requires_grad=requires_grad)


def scalar_tensor(s, *, dtype=None, device=None, requires_grad: bool = False):
    """A 0-d tensor of ``s``, of the default float dtype unless given.

    >>> ember.scalar_tensor(3)
    tensor(3.)
    """
    return tensor(s, dtype=_dtype("scalar_tensor", dtype), device=device,
                  requires_grad=requires_grad)


# Ranges ---------------------------------------------------------------------------------
def _number(name: str, v):
    if isinstance(v, Tensor):
        if v.numel() != 1:
            raise EmberError(f"{name}: expected a number or a one-element tensor, got a "
                             f"tensor of shape {tuple(v.shape)}")
        return v.item()
    if isinstance(v, np.generic):
        return v.item()
    if not isinstance(v, numbers.Real):
        raise EmberTypeError(f"{name}: expected a number, got {type(v).__name__}")
    return v


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad: bool = False):
    """Values from ``start`` up to (not including) ``end``, ``step`` apart.

    The dtype is int64 when all of start, end and step are integers, else the default
    float dtype. The length is ``ceil((end - start) / step)``, as in PyTorch.

    >>> ember.arange(5)
    tensor([0, 1, 2, 3, 4])
    >>> ember.arange(1, 2.5, 0.5)
    tensor([1.0000, 1.5000, 2.0000])
    """
    if end is None:
        start, end = 0, start
    start, end, step = (_number("arange", v) for v in (start, end, step))
    if dtype is None:
        ints = all(isinstance(v, numbers.Integral) for v in (start, end, step))
        dtype = dt.int64 if ints else dt.get_default_dtype()
    dtype = dt.as_dtype(dtype, "arange")
    if dtype is dt.bool:
        raise EmberTypeError("arange: dtype bool is not supported")
    if dtype is dt.int64:
        # int64 ranges work on the bounds truncated to integers, as PyTorch's does.
        start, end, step = int(start), int(end), int(step)
    if step == 0:
        raise EmberError(f"arange: step must be nonzero (start={start}, end={end})")
    if (end - start) * step < 0:
        raise EmberError(f"arange: upper bound and lower bound inconsistent with step sign "
                         f"(start={start}, end={end}, step={step})")
    if dtype is dt.int64:
        n = -((start - end) // step)
    else:
        n = math.ceil((float(end) - float(start)) / float(step))
    if dtype.is_floating_point:
        arr = float(start) + np.arange(n, dtype=np.float64) * float(step)
    else:
        arr = int(start) + np.arange(n, dtype=np.int64) * int(step)
    return _new("arange", arr, dtype, device, requires_grad)


def _steps(name: str, steps) -> int:
    try:
        steps = operator.index(steps)
    except TypeError:
        raise EmberTypeError(f"{name}: steps must be an int, got "
                             f"{type(steps).__name__}") from None
    if steps < 0:
        raise EmberError(f"{name}: number of steps must be non-negative, got {steps}")
    return steps


def _even_points(start: float, end: float, steps: int) -> np.ndarray:
    # Counted from both ends, so the last point is exactly ``end``.
    if steps == 1:
        return np.array([start], dtype=np.float64)
    step = (end - start) / (steps - 1)
    i = np.arange(steps, dtype=np.float64)
    return np.where(i < steps // 2, start + step * i, end - step * (steps - 1 - i))


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad: bool = False):
    """``steps`` values evenly spaced from ``start`` to ``end`` inclusive.

    >>> ember.linspace(0, 1, 5)
    tensor([0.0000, 0.2500, 0.5000, 0.7500, 1.0000])
    """
    start, end = _number("linspace", start), _number("linspace", end)
    steps = _steps("linspace", steps)
    dtype = _dtype("linspace", dtype)
    if dtype is dt.bool:
        raise EmberTypeError("linspace: dtype bool is not supported")
    if not dtype.is_floating_point:
        start, end = int(start), int(end)
    arr = _even_points(float(start), float(end), steps)
    return _new("linspace", arr, dtype, device, requires_grad)


def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None,
             requires_grad: bool = False):
    """``base ** linspace(start, end, steps)``.

    >>> ember.logspace(0, 2, 3)
    tensor([  1.,  10., 100.])
    """
    start, end = _number("logspace", start), _number("logspace", end)
    steps = _steps("logspace", steps)
    dtype = _dtype("logspace", dtype)
    if dtype is dt.bool:
        raise EmberTypeError("logspace: dtype bool is not supported")
    if not dtype.is_floating_point:
        start, end = int(start), int(end)
    arr = np.power(float(_number("logspace", base)), _even_points(float(start), float(end),
                                                                 steps))
    return _new("logspace", arr, dtype, device, requires_grad)


def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad: bool = False):
    """The n×m identity matrix (m defaults to n).

    >>> ember.eye(2)
    tensor([[1., 0.],
            [0., 1.]])
    """
    for name, v in (("n", n), ("m", n if m is None else m)):
        if operator.index(v) < 0:
            raise EmberError(f"eye: {name} must be greater or equal to 0, got {v}")
    dtype = _dtype("eye", dtype)
    return _new("eye", np.eye(n, n if m is None else m, dtype=dtype.np), dtype, device,
                requires_grad)


# Moving between devices -----------------------------------------------------------------
def _to_device_forward(xp, a, source, device):
    """A copy of ``a`` (an array of ``source``'s backend) on ``device``: made by the
    target backend from ``a`` itself where both share an array module (GPU to GPU),
    else through a host NumPy array."""
    src, dst = source.backend, device.backend
    if dst.xp is not src.xp:
        a = src.to_numpy(a)
    out = dst.asarray(a)
    return out.copy() if out is a else out  # another device never shares memory


_TO_DEVICE = register("to_device", _to_device_forward,
                      lambda n, g: (to_device(g, n.inputs[0].device),), saves_inputs=False)


def to_device(input, device):
    """``input`` copied to ``device`` (differentiable)."""
    arr = _to_device_forward(None, input._data, input._device, device)
    out = Tensor._make(arr, device)
    if grad_mode.is_grad_enabled() and input._requires_grad:
        node = Node(_TO_DEVICE, (input,), (edge_of(input),), {"device": device})
        out._node, out._requires_grad = node, True
    return out
