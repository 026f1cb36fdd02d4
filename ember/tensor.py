"""The Tensor: a backend array plus dtype, device, and its place on the autograd tape.

Math methods (``x.sum()``, ``x + y``, ``x.view(...)``) are the functions of
``ember.ops``, attached in ``ember/ops/methods.py``; this file holds what a tensor *is*.
"""
from __future__ import annotations

import numpy as np

from . import dtypes as _dt
from .autograd import grad_mode
from .autograd.graph import RemovableHandle, run_backward
from .backends import CPU, Device, device as _device, placement
from .errors import EmberError, EmberTypeError

_ndarray = np.ndarray
_BY_NP = _dt._BY_NP


#: set by ember.jit while it traces: called with each tensor whose values Python reads
#: (``item``, ``tolist``, ``numpy``, ``bool``), so that the compiled function retraces
#: when such a tensor is later written (its values were baked into the graph)
_value_read_hook = None


def set_value_read_hook(fn) -> None:
    """Install (or, with None, remove) :data:`_value_read_hook`."""
    global _value_read_hook
    _value_read_hook = fn


class Tensor:
    """A multi-dimensional array with autograd.

    Make tensors with :func:`ember.tensor`, :func:`ember.zeros`, :func:`ember.randn`,
    etc. A tensor that ``requires_grad`` records the ops applied to it, and
    ``loss.backward()`` fills the ``.grad`` of the leaves.

    >>> x = ember.tensor([1.0, 2.0], requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad
    tensor([2., 4.])
    """
    __slots__ = ("_data", "_dtype", "_device", "_requires_grad", "_node", "_out_index",
                 "grad", "_version", "_base", "_view_src", "_view_version", "_hooks",
                 "_retains_grad", "__weakref__")
    __array_priority__ = 1000  # so ndarray + Tensor defers to Tensor.__radd__

    def __init__(self, *args, **kwargs):
        raise TypeError("ember.Tensor is not constructed directly; use ember.tensor(data), "
                        "ember.empty(shape) or ember.zeros(shape)")

    @classmethod
    def _make(cls, data, device=CPU, requires_grad: bool = False) -> "Tensor":
        """Wrap a backend array (no copy)."""
        if data.__class__ is not _ndarray and not getattr(data, "_ember_tracer", False):
            data = device.backend.asarray(data)
        t = object.__new__(cls)
        t._data = data
        try:
            t._dtype = _BY_NP[data.dtype]
        except KeyError:
            raise EmberTypeError(f"ember: unsupported dtype {data.dtype}; expected one of "
                                 f"{', '.join(d.name for d in _dt.ALL)}") from None
        t._device = device
        t._requires_grad = requires_grad
        t._node = None
        t._out_index = 0
        t.grad = None
        t._version = [0]
        t._base = None
        t._view_src = None
        t._view_version = 0
        t._hooks = None
        t._retains_grad = False
        return t

    # What it is ------------------------------------------------------------------------
    @property
    def dtype(self) -> _dt.DType:
        return self._dtype

    @property
    def device(self):
        return self._device

    @property
    def shape(self) -> tuple:
        return Size(self._data.shape)

    def size(self, dim: int | None = None):
        """The shape (a tuple), or its length along ``dim``."""
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_wrap_dim(dim, self._data.ndim, "size")]

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    ndimension = dim

    def numel(self) -> int:
        return self._data.size

    nelement = numel

    def element_size(self) -> int:
        return self._dtype.itemsize

    def stride(self, dim: int | None = None):
        """Strides in elements, as PyTorch reports them."""
        strides = tuple(s // self._data.itemsize for s in self._data.strides)
        return strides if dim is None else strides[_wrap_dim(dim, self.ndim, "stride")]

    def is_contiguous(self, memory_format=None) -> bool:
        """Whether the elements lie densely in ``memory_format``'s order (row-major by
        default; ``ember.channels_last``: channels innermost)."""
        from .memory_format import axis_order, is_laid_out
        order = axis_order(memory_format, self.ndim, "is_contiguous")
        if order is None:
            return bool(self._data.flags.c_contiguous)
        return is_laid_out(self._data, order)

    def data_ptr(self) -> int:
        """The address of the first element (a GPU address for a tensor on a GPU)."""
        return self._device.backend.data_ptr(self._data)

    def is_floating_point(self) -> bool:
        return self._dtype.is_floating_point

    def is_complex(self) -> bool:
        return self._dtype.is_complex

    @property
    def is_cuda(self) -> bool:
        return self._device.type == "cuda"

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    @property
    def grad_fn(self):
        if self._base is not None and self._requires_grad:
            self._refresh_view_node()
        return self._node

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Mark a leaf tensor as needing a gradient (in place); returns self."""
        if self._node is not None:
            if not requires_grad:
                raise EmberError("you can only change requires_grad flags of leaf variables. "
                                 "If you want to use a computed variable in a subgraph that "
                                 "doesn't require differentiation use var_no_grad = var.detach().")
            return self
        if requires_grad and not self._dtype.differentiable:
            raise EmberTypeError(f"only Tensors of floating point and complex dtype can "
                                 f"require gradients, got dtype {self._dtype.name}")
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def _version_value(self) -> int:
        return self._version[0]

    @property
    def data(self) -> "Tensor":
        """A tensor sharing storage with this one, outside the graph; unlike
        :meth:`detach`, its in-place changes are not seen by autograd's checks."""
        t = self.detach()
        t._version = [self._version[0]]
        return t

    @data.setter
    def data(self, value: "Tensor") -> None:
        self._data = value._data
        self._dtype = value._dtype
        self._device = value._device

    @property
    def T(self) -> "Tensor":
        if self.ndim > 2:
            return self.permute(*range(self.ndim - 1, -1, -1))
        return self.t()

    @property
    def mT(self) -> "Tensor":
        """The last two dims swapped (matrices or batches of matrices)."""
        if self.ndim < 2:
            raise EmberError(f"mT: only supported on matrices or batches of matrices, got a "
                             f"{self.ndim}-D tensor")
        return self.transpose(-2, -1)

    # Autograd --------------------------------------------------------------------------
    def backward(self, gradient: "Tensor | None" = None, retain_graph: bool | None = None,
                 create_graph: bool = False, inputs=None) -> None:
        """Accumulate the gradient of this tensor into the ``.grad`` of the leaves.

        Args:
            gradient: d(something)/d(self); may be omitted for a one-element tensor.
            retain_graph: keep the saved tensors so backward can run again
                (defaults to ``create_graph``).
            create_graph: record the backward pass, for gradients of gradients.
            inputs: accumulate only into these tensors' ``.grad``.
        """
        from .autograd import backward
        backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def detach(self) -> "Tensor":
        """A tensor sharing storage (and version counter) with this one, with no grad."""
        t = Tensor._make(self._data, self._device)
        t._version = self._version
        return t

    def detach_(self) -> "Tensor":
        self._node = None
        self._requires_grad = False
        return self

    def register_hook(self, hook) -> RemovableHandle:
        """Call ``hook(grad)`` when this tensor's gradient is computed; a non-None
        return value replaces the gradient."""
        if not self._requires_grad:
            raise EmberError("cannot register a hook on a tensor that doesn't require gradient")
        if self._node is None:
            if self._hooks is None:
                self._hooks = []
            return RemovableHandle(self._hooks, hook)
        return self.grad_fn.register_prehook(self._out_index, hook)

    def retain_grad(self) -> None:
        """Fill ``.grad`` for this non-leaf tensor too during backward."""
        if not self._requires_grad:
            raise EmberError("can't retain_grad on Tensor that has requires_grad=False")
        if self._node is None or self._retains_grad:
            return
        self._retains_grad = True
        import weakref
        ref = weakref.ref(self)  # the node must not keep its output alive

        def keep(grad):
            t = ref()
            if t is not None:
                g = grad if grad_mode.is_grad_enabled() else grad.detach()
                t.grad = g.clone() if t.grad is None else t.grad + g
        self.grad_fn.register_retain_hook(self._out_index, keep)

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def _refresh_view_node(self) -> None:
        """Re-derive a view's graph node after its base was changed in place."""
        base = self._base
        if self._view_version == self._version[0]:
            return
        if getattr(base._data, "_ember_tracer", False):
            self._refresh_traced_view()
            return
        if not base._requires_grad:
            self._view_version = self._version[0]
            return
        from .ops.inplace import replay_view
        fresh = replay_view(self, base)
        self._node, self._out_index = fresh._node, fresh._out_index
        self._requires_grad = fresh._requires_grad
        self._view_version = self._version[0]

    def _refresh_traced_view(self) -> None:
        """While ``ember.jit`` traces, a view's value is re-derived from its base's
        current value (the base was rebound, not written, by an in-place op)."""
        from .ops import registry
        from .ops.inplace import replay_view
        if registry._trace is not None:
            registry._trace.value_of(self)  # lifted, so that tracing ends by restoring it
        with grad_mode.set_grad_enabled(grad_mode.is_grad_enabled() and
                                        self._base._requires_grad):
            fresh = replay_view(self, self._base)
        self._data = fresh._data
        if self._base._requires_grad:
            self._node, self._out_index = fresh._node, fresh._out_index
            self._requires_grad = fresh._requires_grad
        self._view_version = self._version[0]

    # Conversion ------------------------------------------------------------------------
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The data as a NumPy array sharing memory (CPU tensors without grad)."""
        if self._requires_grad and not force:
            raise EmberError("Can't call numpy() on Tensor that requires grad. "
                             "Use tensor.detach().numpy() instead.")
        if _value_read_hook is not None:
            _value_read_hook(self)
        return self._device.backend.to_numpy(self._data)

    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self._data.size != 1:
            raise EmberError(f"item: a Tensor with {self._data.size} elements cannot be "
                             "converted to Scalar")
        if _value_read_hook is not None:
            _value_read_hook(self)
        return self._data.reshape(()).item()

    def tolist(self):
        """The data as (nested) Python lists of numbers."""
        if _value_read_hook is not None:
            _value_read_hook(self)
        return self._device.backend.to_numpy(self._data).tolist()

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy()
        if dtype is not None and arr.dtype != dtype:
            if copy is False:
                raise ValueError(f"__array__: can't give a {self._dtype.name} tensor as "
                                 f"{np.dtype(dtype)} without a copy (copy=False)")
            return arr.astype(dtype)
        return arr.copy() if copy else arr

    def __array_wrap__(self, array, context=None, return_scalar=False):
        # NumPy ufuncs applied to a tensor give a tensor back, as with PyTorch.
        if return_scalar or array.dtype not in _BY_NP:
            return array[()] if return_scalar else array
        return Tensor._make(array, self._device)

    def __dlpack__(self, *args, **kwargs):
        if self._requires_grad:
            raise EmberError("__dlpack__: can't export a Tensor that requires grad; call "
                             ".detach() first")
        if self._dtype is _dt.bfloat16:
            raise EmberTypeError("__dlpack__: bfloat16 tensors can't be exported (NumPy, "
                                 "ember's CPU storage, has no DLPack code for bfloat16); "
                                 "convert with .float() first")
        return self._data.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise EmberError(f"bool: Boolean value of Tensor with {self._data.size} values is "
                             "ambiguous; use .any() or .all()")
        if _value_read_hook is not None:
            _value_read_hook(self)
        return bool(self._data.reshape(()))

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self._dtype.is_floating_point or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted "
                            "to an index")
        return int(self.item())

    def __complex__(self) -> complex:
        return complex(self.item())

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        if getattr(self._data, "_ember_tracer", False):  # inside ember.jit: no values yet
            grad = ", requires_grad=True" if self._requires_grad else ""
            return f"tensor(<traced>, shape={list(self._data.shape)}, " \
                   f"dtype=ember.{self._dtype.name}{grad})"
        from ._printing import tensor_repr
        return tensor_repr(self)

    def __format__(self, spec: str) -> str:
        # As PyTorch: a 0-d tensor formats as its Python number, others as repr.
        if self._data.ndim == 0:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    def __reduce_ex__(self, protocol):
        raise TypeError("ember tensors are not picklable by design: save them with "
                        "ember.save (safetensors) instead")

    def __deepcopy__(self, memo):
        t = self.detach().clone()
        t._requires_grad = self._requires_grad
        if self.grad is not None:
            t.grad = self.grad.detach().clone()
        memo[id(self)] = t
        return t

    # Devices and dtypes ----------------------------------------------------------------
    def to(self, *args, **kwargs) -> "Tensor":
        """Convert dtype and/or device: ``x.to(ember.float64)``, ``x.to("cpu")``,
        ``x.to(other)``, ``x.to("cpu", ember.float16)``, ``x.to(dtype=..., copy=True)``.

        Returns self when nothing changes and ``copy`` is False; differentiable otherwise.
        """
        dev, dtype, copy = _to_args(args, kwargs)
        out = self
        if dev is not None and dev is not self._device:
            try:
                dev = placement(dev)  # 'cuda' is the current GPU: 'cuda:0' by default
            except EmberError as exc:
                raise EmberError(f"to: {exc}") from None
        if dev is not None and dev is not self._device:
            from .ops.creation import to_device
            out = to_device(out, dev)
        if dtype is not None and dtype is not out._dtype:
            from .ops.elementwise import cast
            if out._dtype.is_complex and not _dt.as_dtype(dtype).is_complex:
                import warnings
                from .ops.complex_support import real
                warnings.warn("Casting complex values to real discards the imaginary part",
                              UserWarning, stacklevel=2)
                out = real(out)
            if dtype is not out._dtype:
                out = cast(out, dtype)
        if copy and out is self:
            out = self.clone()
        fmt = kwargs.get("memory_format")
        if fmt is not None and fmt is not _preserve_format():
            out = out.contiguous(memory_format=fmt)
        return out

    def type(self, dtype=None, non_blocking: bool = False):
        """The type name (``"ember.FloatTensor"``) without arguments; else this tensor as
        ``dtype`` (a dtype or a type name such as ``"ember.DoubleTensor"``)."""
        if dtype is None:
            return f"ember.{_TYPE_NAMES[self._dtype.name]}"
        if isinstance(dtype, str):
            name = dtype.removeprefix("torch.").removeprefix("ember.")
            if name in _DTYPE_OF_TYPE_NAME:
                dtype = _dt.as_dtype(_DTYPE_OF_TYPE_NAME[name])
        elif isinstance(dtype, type) and isinstance(getattr(dtype, "dtype", None), _dt.DType):
            dtype = dtype.dtype  # a legacy class such as ember.DoubleTensor
        return self.to(dtype)

    def cpu(self) -> "Tensor":
        """This tensor on the CPU (self when it is there already)."""
        return self.to("cpu")

    def cuda(self, device=None) -> "Tensor":
        """This tensor on a CUDA device: the current GPU, or ``device`` (an index,
        ``"cuda:1"`` or a device); raises where CUDA is unavailable."""
        if device is None:
            return self.to("cuda")
        return self.to(_device(device) if isinstance(device, (str, Device)) else
                       _device("cuda", device))

    def float(self, memory_format=None) -> "Tensor":
        """``self.to(ember.float32)``."""
        return self.to(_dt.float32)

    def double(self, memory_format=None) -> "Tensor":
        """``self.to(ember.float64)``."""
        return self.to(_dt.float64)

    def half(self, memory_format=None) -> "Tensor":
        """``self.to(ember.float16)``."""
        return self.to(_dt.float16)

    def bfloat16(self, memory_format=None) -> "Tensor":
        """``self.to(ember.bfloat16)``."""
        return self.to(_dt.bfloat16)

    def int(self, memory_format=None) -> "Tensor":
        """``self.to(ember.int32)``."""
        return self.to(_dt.int32)

    def long(self, memory_format=None) -> "Tensor":
        """``self.to(ember.int64)``."""
        return self.to(_dt.int64)

    def short(self, memory_format=None) -> "Tensor":
        """``self.to(ember.int16)``."""
        return self.to(_dt.int16)

    def char(self, memory_format=None) -> "Tensor":
        """``self.to(ember.int8)``."""
        return self.to(_dt.int8)

    def byte(self, memory_format=None) -> "Tensor":
        """``self.to(ember.uint8)``."""
        return self.to(_dt.uint8)

    def bool(self, memory_format=None) -> "Tensor":
        """``self.to(ember.bool)``."""
        return self.to(_dt.bool)


_TYPE_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
               "bfloat16": "BFloat16Tensor", "int64": "LongTensor", "int32": "IntTensor",
               "int16": "ShortTensor", "int8": "CharTensor", "uint8": "ByteTensor",
               "bool": "BoolTensor"}


_DTYPE_OF_TYPE_NAME = {v: k for k, v in _TYPE_NAMES.items()}


def _preserve_format():
    from .memory_format import preserve_format
    return preserve_format


def _to_args(args: tuple, kwargs: dict):
    """``(device, dtype, copy)`` from the call forms ``to(dtype, non_blocking, copy)``,
    ``to(device, dtype, non_blocking, copy)`` and ``to(other, non_blocking, copy)``."""
    unknown = set(kwargs) - {"device", "dtype", "non_blocking", "copy", "memory_format"}
    if unknown:
        raise EmberTypeError(f"to: unexpected keyword arguments {sorted(unknown)}")
    dev, dtype = kwargs.get("device"), kwargs.get("dtype")
    rest = list(args)
    if rest and isinstance(rest[0], Tensor):
        other = rest.pop(0)
        dev, dtype = other._device, other._dtype
    elif rest and not isinstance(rest[0], (str, bool)) and _is_dtype_like(rest[0]):
        dtype = rest.pop(0)
    elif rest and not isinstance(rest[0], bool):
        dev = rest.pop(0)
        if rest and not isinstance(rest[0], bool):
            dtype = rest.pop(0)
    if len(rest) > 2 or not all(isinstance(f, bool) for f in rest):
        raise EmberTypeError(f"to: invalid arguments {args!r}; expected to(dtype), "
                             "to(device, dtype) or to(other), then non_blocking and copy flags")
    copy = kwargs.get("copy", rest[1] if len(rest) == 2 else False)
    return (None if dev is None else _device(dev),
            None if dtype is None else _dt.as_dtype(dtype, "to"), bool(copy))


def _is_dtype_like(a) -> bool:
    try:
        _dt.as_dtype(a)
        return True
    except TypeError:
        return False


class Size(tuple):
    """A tensor's shape: a tuple, printed as ``ember.Size([2, 3])``.

    >>> ember.zeros(2, 3).shape[1:]
    ember.Size([3])
    """

    def __repr__(self) -> str:
        return f"ember.Size({list(self)})"

    def __getitem__(self, index):
        out = tuple.__getitem__(self, index)
        return Size(out) if isinstance(index, slice) else out

    def __add__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(self, other))

    def __mul__(self, n):
        return Size(tuple.__mul__(self, n))

    __rmul__ = __mul__

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n


def _wrap_dim(dim: int, ndim: int, op: str) -> int:
    from .errors import EmberIndexError
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise EmberIndexError(f"{op}: Dimension out of range (expected to be in range of "
                              f"[{-n}, {n - 1}], but got {dim})")
    return dim % n


def is_tensor(obj) -> bool:
    """True when ``obj`` is an ember Tensor."""
    return isinstance(obj, Tensor)


def numel(input: Tensor) -> int:
    """The number of elements of ``input``."""
    return input.numel()


def is_floating_point(input: Tensor) -> bool:
    """True when ``input`` has a floating dtype."""
    return input.dtype.is_floating_point
