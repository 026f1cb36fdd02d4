"""Static quantized modules: they take and return :class:`QTensor` activations and
compute in integers: uint8 activations times int8 weights, accumulated exactly in int32
(:mod:`ember.quant.int_gemm`), plus an int32 bias, then requantized to the output's
scale and zero point (one float multiplier per output channel, as FBGEMM does).

Each keeps what an exporter needs as plain state: ``weight`` (int8), ``weight_scale``
and ``weight_zero_point`` (per output channel), ``bias`` (float32), and the output's
``scale`` and ``zero_point``; the input's come with the input :class:`QTensor`.
"""
from __future__ import annotations

import numpy as np

from ..errors import EmberTypeError, ShapeError
from ..nn.module import Module
from ..ops.conv import geometry, grid_to_output, im2col
from ..ops.conv_forward import conv2d_forward
from ..ops.creation import from_numpy
from ..tensor import Tensor
from .int_gemm import int_matmul, uint8_rows_product
from .qparams import QTensor, quantize_array, quint8
from .requantize_kernel import requantize_into
from .weights import PackedWeight, quantize_weight, register_weight_buffers

__all__ = ["Quantize", "DeQuantize", "QuantizedLinear", "QuantizedLinearReLU",
           "QuantizedConv2d", "QuantizedConvReLU2d", "QuantizedPassThrough"]

_ACTIVATION_ABSMAX = 255  # a uint8 activation minus its zero point lies in [-255, 255]


def _check_qtensor(owner: str, x) -> QTensor:
    if not isinstance(x, QTensor):
        raise EmberTypeError(f"{owner}: expected a quantized activation (QTensor), got "
                             f"{type(x).__name__}; put a QuantStub before the quantized "
                             "layers (or let prepare() wrap the model in QuantWrapper)")
    return x


def _output_qparams(module: Module) -> tuple[float, int]:
    scale, zero_point = module.activation_post_process.qparams_arrays()
    return float(scale), int(zero_point)


class Quantize(Module):
    """Float tensor in, :class:`QTensor` out, with fixed ``scale`` and ``zero_point``
    (what a calibrated :class:`QuantStub` becomes)."""

    def __init__(self, scale: float, zero_point: int, dtype=quint8):
        super().__init__()
        self.scale, self.zero_point, self.dtype = float(scale), int(zero_point), dtype

    def forward(self, x: Tensor) -> QTensor:
        if not isinstance(x, Tensor):
            raise EmberTypeError(f"Quantize: expected a float Tensor, got {type(x).__name__}")
        q = quantize_array(x.detach().numpy(), self.scale, self.zero_point,
                           self.dtype.quant_min, self.dtype.quant_max, self.dtype.storage)
        return QTensor(q, self.scale, self.zero_point, self.dtype)

    @classmethod
    def from_float(cls, stub: Module) -> "Quantize":
        return cls(*_output_qparams(stub))

    def get_extra_state(self) -> dict:
        return {"scale": self.scale, "zero_point": self.zero_point}

    def set_extra_state(self, state: dict) -> None:
        self.scale, self.zero_point = float(state["scale"]), int(state["zero_point"])

    def extra_repr(self) -> str:
        return f"scale={self.scale:.6g}, zero_point={self.zero_point}, dtype={self.dtype.name}"


class DeQuantize(Module):
    """:class:`QTensor` in, float32 tensor out."""

    def forward(self, x: QTensor) -> Tensor:
        return _check_qtensor("DeQuantize", x).dequantize()


class _QuantizedWeighted(Module):
    """What quantized Linear and Conv2d share: weight buffers, the output qparams, the
    int32 bias, requantization."""
    relu = False

    def _init_weights(self, q, scale, zero_point, bias, out_scale, out_zero_point):
        register_weight_buffers(self, q, scale, zero_point)
        self.register_buffer("bias", None if bias is None else
                             from_numpy(bias.detach().numpy().astype(np.float32)))
        self.scale, self.zero_point = float(out_scale), int(out_zero_point)
        self._packed = None

    def packed(self) -> PackedWeight:
        """The weight laid out for exact GEMM (rebuilt after a state-dict load)."""
        if self._packed is None:
            self._packed = PackedWeight(self.weight.numpy(), self.weight_zero_point.numpy(),
                                        _ACTIVATION_ABSMAX)
        return self._packed

    def bias_int32(self, input_scale: float) -> np.ndarray | None:
        """The bias on the accumulator's scale ``input_scale * weight_scale``."""
        if self.bias is None:
            return None
        acc_scale = np.float64(input_scale) * self.weight_scale.numpy().astype(np.float64)
        return np.rint(self.bias.numpy() / acc_scale).astype(np.int32)

    def requantize(self, acc: np.ndarray, input_scale: float, axis: int) -> QTensor:
        """int32 accumulator (+ bias) to the uint8 output; ReLU (when fused) is the
        lower clamp at the zero point."""
        shape = [1] * acc.ndim
        shape[axis] = -1
        bias = self.bias_int32(input_scale)
        multiplier = (np.float64(input_scale) * self.weight_scale.numpy() / self.scale)
        low = self.zero_point if self.relu else 0
        done = requantize_into(acc, bias, multiplier.astype(np.float32), self.zero_point,
                               low, axis % acc.ndim)
        if done is not False:  # (one C pass)
            return QTensor(done, self.scale, self.zero_point)
        if bias is not None:
            acc = acc + bias.reshape(shape)
        scaled = acc.astype(np.float32) * multiplier.astype(np.float32).reshape(shape)
        out = np.rint(scaled) + np.float32(self.zero_point)
        return QTensor(np.clip(out, low, 255).astype(np.uint8), self.scale, self.zero_point)

    def get_extra_state(self) -> dict:
        return {"scale": self.scale, "zero_point": self.zero_point}

    def set_extra_state(self, state: dict) -> None:
        self.scale, self.zero_point = float(state["scale"]), int(state["zero_point"])
        self._packed = None  # the weight buffer was just loaded

    def _centred_input(self, x: QTensor, dtype) -> np.ndarray:
        return x.data.astype(dtype) - dtype.type(x.zero_point)


class QuantizedLinear(_QuantizedWeighted):
    """``y = x @ weight.T + bias`` on quantized activations, in integers.

    Built by :func:`ember.quant.convert` from a calibrated ``nn.Linear``; input and
    output are :class:`QTensor` (uint8), ``weight`` is int8 per output channel.
    """

    def __init__(self, in_features: int, out_features: int, q, scale, zero_point, bias,
                 out_scale: float, out_zero_point: int):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self._init_weights(q, scale, zero_point, bias, out_scale, out_zero_point)

    @classmethod
    def from_float(cls, module: Module) -> "QuantizedLinear":
        """From a prepared (observed or QAT) Linear; its ``qconfig`` gives the weight
        observer unless it carries its own ``weight_fake_quant``."""
        linear = module[0] if isinstance(module, _FUSED_TYPES) else module
        observer = getattr(linear, "weight_fake_quant", None) or module.qconfig.weight()
        q, scale, zp = quantize_weight(linear.weight, observer)
        return cls(linear.in_features, linear.out_features, q, scale, zp, linear.bias,
                   *_output_qparams(module))

    def accumulate(self, x: QTensor) -> np.ndarray:
        """The int32 accumulator ``sum_k (x_q - x_zp) * (w_q - w_zp)``, shape
        ``(*, out_features)``, before bias and requantization."""
        _check_qtensor(type(self).__name__, x)
        if x.shape[-1:] != (self.in_features,):
            raise ShapeError(f"{type(self).__name__}: expected input with {self.in_features} "
                             f"features in its last dimension, got shape {x.shape}")
        packed = self.packed()
        rows = x.data.reshape(-1, self.in_features)
        acc = uint8_rows_product(rows, x.zero_point, packed)
        return acc.reshape(x.shape[:-1] + (self.out_features,))

    def forward(self, x: QTensor) -> QTensor:
        acc = self.accumulate(x)
        return self.requantize(acc, x.scale, acc.ndim - 1)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"scale={self.scale:.6g}, zero_point={self.zero_point}")


class QuantizedLinearReLU(QuantizedLinear):
    """:class:`QuantizedLinear` with a fused ReLU."""
    relu = True


class QuantizedConv2d(_QuantizedWeighted):
    """2-D convolution on quantized activations, in integers: the centred uint8 input
    and the centred int8 weight, carried in the float type whose sums stay exact
    (:mod:`ember.quant.int_gemm`), go through the float convolution's C loop (one group;
    :func:`ember.ops.conv_forward.conv2d_forward`), else ember's im2col and one exact
    GEMM per group.

    Built by :func:`ember.quant.convert` from a calibrated ``nn.Conv2d`` (zero padding
    only).
    """

    def __init__(self, conv: Module, q, scale, zero_point, bias, out_scale: float,
                 out_zero_point: int):
        super().__init__()
        if conv.padding_mode != "zeros":
            raise NotImplementedError(f"QuantizedConv2d: padding_mode={conv.padding_mode!r} "
                                      "is not supported (only 'zeros')")
        self.in_channels, self.out_channels = conv.in_channels, conv.out_channels
        self.kernel_size, self.stride = tuple(conv.kernel_size), tuple(conv.stride)
        self.dilation, self.groups = tuple(conv.dilation), conv.groups
        self.padding = conv.padding
        amounts = conv._reversed_padding_repeated_twice  # (w_lo, w_hi, h_lo, h_hi)
        self._pads = ((amounts[2], amounts[3]), (amounts[0], amounts[1]))
        self._init_weights(q, scale, zero_point, bias, out_scale, out_zero_point)

    @classmethod
    def from_float(cls, module: Module) -> "QuantizedConv2d":
        conv = module[0] if isinstance(module, _FUSED_TYPES) else module
        observer = getattr(conv, "weight_fake_quant", None) or module.qconfig.weight()
        q, scale, zp = quantize_weight(conv.weight, observer)
        return cls(conv, q, scale, zp, conv.bias, *_output_qparams(module))

    def accumulate(self, x: QTensor) -> np.ndarray:
        """The int32 accumulator, shape ``(N, out_channels, H_out, W_out)``."""
        _check_qtensor(type(self).__name__, x)
        if len(x.shape) != 4 or x.shape[1] != self.in_channels:
            raise ShapeError(f"{type(self).__name__}: expected input (N, {self.in_channels}, "
                             f"H, W), got shape {x.shape}")
        n, c, h, w = x.shape
        out = tuple((s + lo + hi - d * (k - 1) - 1) // st + 1 for s, (lo, hi), d, k, st in
                    zip((h, w), self._pads, self.dilation, self.kernel_size, self.stride))
        if min(out) <= 0:
            raise ShapeError(f"{type(self).__name__}: input {x.shape} is smaller than the "
                             f"kernel {self.kernel_size}")
        packed = self.packed()
        centred = self._centred_input(x, packed.dtype)
        if self.groups == 1:  # the float convolution's C loop: exact, as int_matmul is
            acc = conv2d_forward(centred, packed.row_major.reshape(
                (self.out_channels, c) + self.kernel_size), None, self.stride,
                tuple(lo for lo, _ in self._pads), self.dilation, out)
            if acc is not None:
                return acc.astype(np.int32)
        geo = geometry(n, c, self.out_channels, self.groups, (h, w), self.kernel_size,
                       self.stride, self.dilation, self._pads, out)
        cols = im2col(np, centred, geo)
        weight = packed.row_major.reshape(self.groups, self.out_channels // self.groups,
                                          packed.k)
        acc = int_matmul(weight, cols)
        if geo.wide:
            return grid_to_output(np, acc.reshape(self.out_channels, n * geo.grid_len), geo)
        return acc.reshape((n, self.out_channels) + out)

    def forward(self, x: QTensor) -> QTensor:
        return self.requantize(self.accumulate(x), x.scale, 1)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}, scale={self.scale:.6g}, "
                f"zero_point={self.zero_point}")


class QuantizedConvReLU2d(QuantizedConv2d):
    """:class:`QuantizedConv2d` with a fused ReLU."""
    relu = True


class QuantizedPassThrough(Module):
    """Runs a float module that commutes with the affine map ``q -> (q - zp) * scale``
    (max-pooling, flattening, ReLU, dropout in eval; average pooling up to rounding) on
    the centred integers and keeps the input's scale and zero point: no float values
    are formed. A float input goes to the module unchanged."""

    def __init__(self, module: Module):
        super().__init__()
        self.module = module

    def forward(self, x):
        if not isinstance(x, QTensor):
            return self.module(x)
        if isinstance(self.module, _ORDER_ONLY) and not getattr(self.module, "return_indices",
                                                               False):
            # the module picks or moves values only: it commutes with the shift by the
            # zero point too, so it runs on the stored integers as they are
            y = self.module(from_numpy(x.data.astype(np.float32))).numpy()
            return QTensor(y.astype(x.dtype.storage), x.scale, x.zero_point, x.dtype)
        centred = from_numpy(x.data.astype(np.float32) - np.float32(x.zero_point))
        y = self.module(centred).numpy()
        q = np.clip(np.rint(y) + x.zero_point, x.dtype.quant_min, x.dtype.quant_max)
        return QTensor(q.astype(x.dtype.storage), x.scale, x.zero_point, x.dtype)


from ..nn import (AdaptiveMaxPool1d, AdaptiveMaxPool2d, Flatten, Identity,  # noqa: E402
                  MaxPool1d, MaxPool2d, MaxPool3d, Unflatten)
from .fused import ConvReLU2d, LinearReLU  # noqa: E402  (fused imports nothing from here)

# Modules that only pick or move values (a window's largest, a reshape)
_ORDER_ONLY = (MaxPool1d, MaxPool2d, MaxPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d,
               Flatten, Unflatten, Identity)

_FUSED_TYPES = (LinearReLU, ConvReLU2d)
