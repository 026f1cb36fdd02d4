"""Quantized dtypes, schemes, the scale/zero-point arithmetic, and :class:`QTensor`.

An affine quantizer maps a real ``x`` to the integer ``q = clamp(round(x / scale) +
zero_point, quant_min, quant_max)`` and back to ``(q - zero_point) * scale``. The
arithmetic here is NumPy on float32, written to round exactly as PyTorch's observers do
(``torch.ao.quantization``), so the same data gives the same ``scale`` and ``zero_point``.
"""
from __future__ import annotations

import numpy as np

from ..errors import EmberTypeError, EmberValueError
from ..ops.creation import from_numpy
from ..tensor import Tensor

__all__ = ["QDType", "qint8", "quint8", "qint32", "per_tensor_affine",
           "per_tensor_symmetric", "per_channel_affine", "per_channel_symmetric",
           "QTensor", "quantize_per_tensor"]

_EPS = np.finfo(np.float32).eps


class QDType:
    """A quantized integer type: its name, storage dtype and full range."""

    def __init__(self, name: str, storage, quant_min: int, quant_max: int):
        self.name = name
        self.storage = np.dtype(storage)
        self.quant_min = quant_min
        self.quant_max = quant_max

    def __repr__(self) -> str:
        return f"ember.quant.{self.name}"

    # one object per dtype, so ``dtype is qint8`` holds in deep-copied modules too
    def __copy__(self) -> "QDType":
        return self

    def __deepcopy__(self, memo) -> "QDType":
        return self


qint8 = QDType("qint8", np.int8, -128, 127)
quint8 = QDType("quint8", np.uint8, 0, 255)
qint32 = QDType("qint32", np.int32, -2 ** 31, 2 ** 31 - 1)

per_tensor_affine = "per_tensor_affine"
per_tensor_symmetric = "per_tensor_symmetric"
per_channel_affine = "per_channel_affine"
per_channel_symmetric = "per_channel_symmetric"
_SCHEMES = (per_tensor_affine, per_tensor_symmetric, per_channel_affine,
            per_channel_symmetric)


def check_dtype(owner: str, dtype) -> QDType:
    if dtype not in (qint8, quint8):
        raise EmberTypeError(f"{owner}: dtype must be ember.quant.qint8 or "
                             f"ember.quant.quint8, got {dtype!r}")
    return dtype


def check_scheme(owner: str, qscheme: str, per_channel: bool) -> str:
    allowed = _SCHEMES[2:] if per_channel else _SCHEMES[:2]
    if qscheme not in allowed:
        raise EmberValueError(f"{owner}: qscheme must be one of {allowed}, got {qscheme!r}")
    return qscheme


def quant_range(owner: str, dtype: QDType, reduce_range: bool, quant_min, quant_max):
    """``(quant_min, quant_max, customised)``: the dtype's range, halved by
    ``reduce_range``, or the user's, which must lie inside the dtype's and include 0."""
    if (quant_min is None) != (quant_max is None):
        raise EmberValueError(f"{owner}: give both quant_min and quant_max or neither, got "
                              f"quant_min={quant_min}, quant_max={quant_max}")
    if quant_min is None:
        lo, hi = dtype.quant_min, dtype.quant_max
        if reduce_range:
            lo, hi = (lo // 2, hi // 2)
        return lo, hi, False
    if not dtype.quant_min <= quant_min <= 0 <= quant_max <= dtype.quant_max:
        raise EmberValueError(f"{owner}: need {dtype.quant_min} <= quant_min <= 0 <= "
                              f"quant_max <= {dtype.quant_max} for {dtype.name}, got "
                              f"quant_min={quant_min}, quant_max={quant_max}")
    return int(quant_min), int(quant_max), True


def calculate_qparams(min_val, max_val, quant_min: int, quant_max: int, symmetric: bool,
                      dtype: QDType, customised_range: bool = False):
    """``(scale float32, zero_point int64)`` arrays for observed ``min_val``/``max_val``
    (scalars or per-channel arrays), as PyTorch's observers compute them: the range is
    widened to include 0; symmetric schemes centre it (zero point 0, or the middle of the
    range for quint8); scales never go below float32's epsilon."""
    min_val = np.asarray(min_val, dtype=np.float32)
    max_val = np.asarray(max_val, dtype=np.float32)
    min_neg = np.minimum(min_val, np.float32(0))
    max_pos = np.maximum(max_val, np.float32(0))
    if symmetric:
        bound = np.maximum(-min_neg, max_pos)
        scale = bound / np.float32((quant_max - quant_min) / 2)
        scale = np.maximum(scale, np.float32(_EPS))
        middle = (quant_min + quant_max) // 2 if customised_range else 128
        zero = middle if dtype is quint8 else 0
        zero_point = np.full(scale.shape, zero, dtype=np.int64)
    else:
        scale = (max_pos - min_neg) / np.float32(quant_max - quant_min)
        scale = np.maximum(scale, np.float32(_EPS))
        zero_point = np.float32(quant_min) - np.round(min_neg / scale)
        zero_point = np.clip(zero_point, quant_min, quant_max)
    return np.asarray(scale, dtype=np.float32), np.asarray(zero_point, dtype=np.int64)


def quantize_array(x: np.ndarray, scale, zero_point, quant_min: int, quant_max: int,
                   storage) -> np.ndarray:
    """``clamp(round(x / scale) + zero_point)`` as ``storage`` integers (round half to
    even, as PyTorch's ``quantize_per_tensor``)."""
    q = np.round(np.asarray(x, dtype=np.float32) / np.asarray(scale, dtype=np.float32))
    q += zero_point
    return np.clip(q, quant_min, quant_max).astype(storage)


class QTensor:
    """A per-tensor affine quantized activation: integers, a scale and a zero point.

    Static quantized modules pass these between each other, as PyTorch's quantized
    tensors; :meth:`dequantize` gives the float tensor back.

    >>> q = ember.quant.quantize_per_tensor(ember.tensor([0.0, 0.5, 1.0]), 1 / 255, 0)
    >>> q.int_repr()
    tensor([  0, 127, 255], dtype=ember.uint8)
    """
    __slots__ = ("data", "scale", "zero_point", "dtype")

    def __init__(self, data: np.ndarray, scale: float, zero_point: int,
                 dtype: QDType = quint8):
        self.data = data
        self.scale = float(scale)
        self.zero_point = int(zero_point)
        self.dtype = dtype

    @property
    def shape(self) -> tuple:
        return self.data.shape

    def q_scale(self) -> float:
        return self.scale

    def q_zero_point(self) -> int:
        return self.zero_point

    def int_repr(self) -> Tensor:
        """The stored integers as an ember integer tensor."""
        return from_numpy(self.data.copy())

    def dequantize(self) -> Tensor:
        """``(q - zero_point) * scale`` as a float32 tensor."""
        real = (self.data.astype(np.float32) - np.float32(self.zero_point)) * \
            np.float32(self.scale)
        return from_numpy(real)

    def __repr__(self) -> str:
        return (f"QTensor(shape={self.data.shape}, dtype={self.dtype.name}, "
                f"scale={self.scale:.6g}, zero_point={self.zero_point})")


def quantize_per_tensor(input: Tensor, scale: float, zero_point: int,
                        dtype: QDType = quint8) -> QTensor:
    """Quantize a float tensor with one scale and zero point (PyTorch's
    ``torch.quantize_per_tensor``).

    >>> ember.quant.quantize_per_tensor(ember.tensor([-1.0, 1.0]), 0.01, 128).int_repr()
    tensor([ 28, 228], dtype=ember.uint8)
    """
    check_dtype("quantize_per_tensor", dtype)
    if not isinstance(input, Tensor):
        raise EmberTypeError(f"quantize_per_tensor: expected a float Tensor, got "
                             f"{type(input).__name__}")
    if not scale > 0:
        raise EmberValueError(f"quantize_per_tensor: scale must be positive, got {scale}")
    data = quantize_array(input.detach().numpy(), scale, zero_point, dtype.quant_min,
                          dtype.quant_max, dtype.storage)
    return QTensor(data, scale, zero_point, dtype)
