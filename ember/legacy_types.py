"""PyTorch's legacy typed tensor classes (``ember.FloatTensor``, ``ember.LongTensor``, ...)
and ``ember.set_default_tensor_type``.

Calling one builds a CPU tensor of its dtype, from sizes or from data; ``isinstance``
against one is True exactly for a CPU tensor of that dtype. They are not subclasses of
:class:`ember.Tensor`: every ember tensor is a plain ``Tensor``.

>>> ember.FloatTensor(2, 3).shape
ember.Size([2, 3])
>>> isinstance(ember.LongTensor([1, 2]), ember.LongTensor)
True
"""
from __future__ import annotations

import builtins
import warnings

import numpy as np

from . import dtypes as dt
from .errors import EmberTypeError
from .ops import creation
from .tensor import Size, Tensor

__all__ = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
           "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor",
           "set_default_tensor_type"]


class _TensorType(type):
    """The metaclass of the legacy classes: ``isinstance`` compares dtype and device."""

    def __instancecheck__(cls, obj) -> bool:
        return (isinstance(obj, Tensor) and obj.dtype is cls.dtype
                and obj.device.type == "cpu")

    def __subclasscheck__(cls, sub) -> bool:
        return sub is cls

    def __repr__(cls) -> str:
        return f"<class 'ember.{cls.__name__}'>"

    def __call__(cls, *args, device=None):
        return _construct(cls, args, device)


def _construct(cls, args: tuple, device):
    name = cls.__name__
    if device is not None and str(device).split(":")[0] != "cpu":
        raise EmberTypeError(f"{name}: legacy constructor expects device type cpu, got "
                             f"{device!r}")
    if not args:
        return creation.zeros(0, dtype=cls.dtype)
    if len(args) == 1:
        arg = args[0]
        if isinstance(arg, Tensor):
            if arg.dtype is not cls.dtype:
                raise EmberTypeError(f"{name}: expected a tensor of dtype ember."
                                     f"{cls.dtype.name}, got ember.{arg.dtype.name}")
            return arg.view(arg.shape)  # an alias, as PyTorch's legacy constructor
        if isinstance(arg, Size):
            return _zeros(name, tuple(arg), cls.dtype)
        if isinstance(arg, (list, tuple, np.ndarray)):
            return creation.tensor(arg, dtype=cls.dtype)
    if all(isinstance(a, builtins.int) and not isinstance(a, builtins.bool) for a in args):
        return _zeros(name, args, cls.dtype)
    got = ", ".join(type(a).__name__ for a in args)
    raise EmberTypeError(f"{name}: expected sizes (ints or an ember.Size), a sequence of "
                         f"data or a tensor, got ({got})")


def _zeros(name: str, sizes: tuple, dtype) -> Tensor:
    for s in sizes:
        if s < 0:
            raise EmberTypeError(f"{name}: negative dimension {s} in sizes {list(sizes)}")
    # PyTorch leaves the values uninitialised; ember gives zeros
    return creation.zeros(*sizes, dtype=dtype)


def _legacy_class(name: str, dtype: dt.DType, doc_example: str):
    doc = (f"A CPU tensor of dtype ``ember.{dtype.name}`` (PyTorch's ``torch.{name}``).\n\n"
           f"``{name}(*sizes)`` gives a tensor of that shape (zeros; PyTorch leaves it "
           f"uninitialised), ``{name}(data)`` a copy of a sequence or array in this dtype, "
           f"``{name}(tensor)`` an alias of a tensor of this dtype and ``{name}()`` an "
           f"empty one. ``isinstance(t, ember.{name})`` is True for a CPU tensor of this "
           f"dtype.\n\n{doc_example}")
    return _TensorType(name, (), {"dtype": dtype, "is_cuda": False, "is_sparse": False,
                                  "__doc__": doc, "__module__": "ember"})


FloatTensor = _legacy_class("FloatTensor", dt.float32,
                            ">>> ember.FloatTensor(2, 3).dtype\nember.float32")
DoubleTensor = _legacy_class("DoubleTensor", dt.float64,
                             ">>> ember.DoubleTensor([1, 2]).dtype\nember.float64")
HalfTensor = _legacy_class("HalfTensor", dt.float16,
                           ">>> ember.HalfTensor(2).dtype\nember.float16")
BFloat16Tensor = _legacy_class("BFloat16Tensor", dt.bfloat16,
                               ">>> ember.BFloat16Tensor(2).dtype\nember.bfloat16")
LongTensor = _legacy_class("LongTensor", dt.int64,
                           ">>> ember.LongTensor([1, 2])\ntensor([1, 2])")
IntTensor = _legacy_class("IntTensor", dt.int32,
                          ">>> ember.IntTensor([1, 2]).dtype\nember.int32")
ShortTensor = _legacy_class("ShortTensor", dt.int16,
                            ">>> ember.ShortTensor([1, 2]).dtype\nember.int16")
CharTensor = _legacy_class("CharTensor", dt.int8,
                           ">>> ember.CharTensor([1, 2]).dtype\nember.int8")
ByteTensor = _legacy_class("ByteTensor", dt.uint8,
                           ">>> ember.ByteTensor([1, 2]).dtype\nember.uint8")
BoolTensor = _legacy_class("BoolTensor", dt.bool,
                           ">>> ember.BoolTensor([0, 2])\ntensor([False,  True])")

_BY_NAME = {c.__name__: c for c in (FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor,
                                    LongTensor, IntTensor, ShortTensor, CharTensor,
                                    ByteTensor, BoolTensor)}


def set_default_tensor_type(t) -> None:
    """Set the default floating dtype from a legacy tensor type (deprecated in PyTorch
    2.1, as here: use :func:`ember.set_default_dtype`).

    Args:
        t: a floating legacy class (``ember.DoubleTensor``) or its name
            (``"torch.DoubleTensor"``, ``"ember.DoubleTensor"``).

    >>> ember.set_default_tensor_type(ember.DoubleTensor)
    >>> ember.tensor([1.0]).dtype
    ember.float64
    >>> ember.set_default_tensor_type("torch.FloatTensor")
    """
    warnings.warn("ember.set_default_tensor_type() is deprecated (as torch's since PyTorch "
                  "2.1); use ember.set_default_dtype() instead", UserWarning, stacklevel=2)
    if isinstance(t, str):
        parts = t.split(".")
        if len(parts) == 3 and parts[1] == "cuda":
            raise EmberTypeError(f"set_default_tensor_type: type {t} not available: ember "
                                 f"sets the default type for CPU tensors only")
        cls = _BY_NAME.get(parts[-1]) if len(parts) <= 2 and (
            len(parts) == 1 or parts[0] in ("torch", "ember")) else None
        if cls is None:
            raise EmberTypeError(f"set_default_tensor_type: invalid type string {t!r}; "
                                 f"expected e.g. 'torch.FloatTensor'")
    elif isinstance(t, _TensorType):
        cls = t
    else:
        raise EmberTypeError(f"set_default_tensor_type: invalid type object {t!r}; expected "
                             f"a legacy tensor type such as ember.DoubleTensor")
    if not cls.dtype.is_floating_point:
        raise EmberTypeError(f"set_default_tensor_type: only floating-point types are "
                             f"supported as the default type, got ember.{cls.__name__}")
    dt.set_default_dtype(cls.dtype)
