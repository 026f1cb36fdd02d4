"""Post-training dynamic quantization: int8 weights fixed at conversion, activations
quantized per call from their own range (per tensor, uint8), the products accumulated
exactly in int32 and the result dequantized to float. Nothing to calibrate."""
from __future__ import annotations

import copy
import math

import numpy as np

from ..errors import EmberTypeError, EmberValueError, ShapeError
from ..nn.layers.linear import Linear
from ..nn.layers.rnn import LSTM
from ..nn.module import Module
from ..ops.creation import from_numpy
from ..tensor import Tensor
from .int_gemm import uint8_rows_product
from .qconfig import default_weight_observer
from .qparams import calculate_qparams, qint8, quint8
from .weights import PackedWeight, quantize_weight, register_weight_buffers

__all__ = ["DynamicQuantizedLinear", "DynamicQuantizedLSTM", "quantize_dynamic",
           "quantize_activation"]

_ACTIVATION_ABSMAX = 255
_F32_255, _F32_EPS = np.float32(255), np.float32(np.finfo(np.float32).eps)


def quantize_activation(x: np.ndarray) -> tuple[np.ndarray, float, int]:
    """``(centred integers q - zp as float32, scale, zero_point)``: ``x`` quantized to
    uint8 over its own range (widened to include 0)."""
    q, scale, zero_point = quantize_activation_uint8(x)
    return q.astype(np.float32) - np.float32(zero_point), scale, zero_point


def _uint8_qparams(lo: float, hi: float) -> tuple[float, int]:
    """``calculate_qparams(lo, hi, 0, 255, False, quint8)`` as Python numbers, by the same
    float32 operations on scalars (30 us less per call than through arrays here)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        scale, zero_point = calculate_qparams(lo, hi, 0, 255, False, quint8)
        return float(scale), int(zero_point)
    min_neg, max_pos = np.float32(min(lo, 0.0)), np.float32(max(hi, 0.0))
    scale = max((max_pos - min_neg) / _F32_255, _F32_EPS)
    zero_point = -np.rint(min_neg / scale)
    return float(scale), int(min(max(zero_point, 0), 255))


def quantize_activation_uint8(x: np.ndarray) -> tuple[np.ndarray, float, int]:
    """``(uint8 q, scale, zero_point)``: ``x`` quantized over its own range (widened to
    include 0)."""
    if x.size:
        lo, hi = float(x.min()), float(x.max())
    else:
        lo = hi = 0.0
    scale, zero_point = _uint8_qparams(lo, hi)
    q = np.rint(x / np.float32(scale))
    q += np.float32(zero_point)
    np.maximum(q, 0, out=q)  # (np.clip, in two cheaper calls)
    return np.minimum(q, 255, out=q).astype(np.uint8), scale, zero_point


def dynamic_linear(x: np.ndarray, packed: PackedWeight, weight_scale: np.ndarray,
                   bias: np.ndarray | None) -> np.ndarray:
    """``x (M, K) @ W.T + b`` with ``x`` quantized on the fly and ``W`` int8."""
    q, scale, zero_point = quantize_activation_uint8(x)
    acc = uint8_rows_product(q, zero_point, packed)
    out = acc.astype(np.float32) * (np.float32(scale) * weight_scale)
    if bias is not None:
        out += bias
    return out


class DynamicQuantizedLinear(Module):
    """A Linear with an int8 per-channel weight; float in, float out.

    >>> lin = ember.nn.Linear(64, 32)
    >>> q = ember.quant.DynamicQuantizedLinear.from_float(lin)
    >>> q(ember.randn(8, 64)).shape
    ember.Size([8, 32])
    """

    def __init__(self, in_features: int, out_features: int, q, scale, zero_point, bias):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        register_weight_buffers(self, q, scale, zero_point)
        self.register_buffer("bias", None if bias is None else
                             from_numpy(bias.detach().numpy().astype(np.float32)))
        self._packed = None

    @classmethod
    def from_float(cls, linear: Linear, weight_observer=default_weight_observer):
        q, scale, zp = quantize_weight(linear.weight, weight_observer())
        return cls(linear.in_features, linear.out_features, q, scale, zp, linear.bias)

    def packed(self) -> PackedWeight:
        if self._packed is None:
            self._packed = PackedWeight(self.weight.numpy(), self.weight_zero_point.numpy(),
                                        _ACTIVATION_ABSMAX)
        return self._packed

    def forward(self, input: Tensor) -> Tensor:
        if not isinstance(input, Tensor):
            raise EmberTypeError(f"DynamicQuantizedLinear: expected a Tensor, got "
                                 f"{type(input).__name__}")
        if input.ndim == 0 or input.shape[-1] != self.in_features:
            raise ShapeError(f"DynamicQuantizedLinear: expected input with "
                             f"{self.in_features} features in its last dimension, got shape "
                             f"{tuple(input.shape)}")
        x = input.detach().numpy().astype(np.float32, copy=False)
        bias = None if self.bias is None else self.bias.numpy()
        out = dynamic_linear(x.reshape(-1, self.in_features), self.packed(),
                             self.weight_scale.numpy(), bias)
        return from_numpy(out.reshape(x.shape[:-1] + (self.out_features,)))

    # the packed weight is rebuilt after load_state_dict changes the int8 buffer
    def get_extra_state(self) -> dict:
        return {}

    def set_extra_state(self, state: dict) -> None:
        self._packed = None

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"dtype=qint8, bias={self.bias is not None}")


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * x) + 1.0)


class DynamicQuantizedLSTM(Module):
    """An LSTM whose ``weight_ih``/``weight_hh`` are int8 (per gate row) and whose
    matrix products run on dynamically quantized inputs and hidden states; gates and
    cell state stay float32. Same arguments, inputs and outputs as ``nn.LSTM``
    (``proj_size`` is not supported); inference only.

    >>> lstm = ember.nn.LSTM(8, 16, batch_first=True)
    >>> out, (h, c) = ember.quant.DynamicQuantizedLSTM.from_float(lstm)(ember.randn(2, 5, 8))
    >>> out.shape
    ember.Size([2, 5, 16])
    """

    def __init__(self, lstm: LSTM, weight_observer=default_weight_observer):
        super().__init__()
        if lstm.proj_size:
            raise NotImplementedError("DynamicQuantizedLSTM: proj_size > 0 is not supported")
        self.input_size, self.hidden_size = lstm.input_size, lstm.hidden_size
        self.num_layers, self.bias = lstm.num_layers, lstm.bias
        self.batch_first, self.bidirectional = lstm.batch_first, lstm.bidirectional
        self._names = []
        for names in lstm._all_weights:
            for name in names:
                value = getattr(lstm, name)
                if name.startswith("weight"):
                    q, scale, zp = quantize_weight(value, weight_observer())
                    self.register_buffer(name, from_numpy(q))
                    self.register_buffer(name + "_scale", from_numpy(scale))
                    self.register_buffer(name + "_zero_point", from_numpy(zp))
                else:
                    self.register_buffer(name, from_numpy(
                        value.detach().numpy().astype(np.float32)))
            self._names.append(names)
        self._packed = {}

    @classmethod
    def from_float(cls, lstm: LSTM, weight_observer=default_weight_observer):
        return cls(lstm, weight_observer)

    def get_extra_state(self) -> dict:
        return {}

    def set_extra_state(self, state: dict) -> None:
        self._packed = {}

    def _weight(self, name: str):
        if name not in self._packed:
            self._packed[name] = (PackedWeight(getattr(self, name).numpy(),
                                               getattr(self, name + "_zero_point").numpy(),
                                               _ACTIVATION_ABSMAX),
                                  getattr(self, name + "_scale").numpy())
        return self._packed[name]

    def _direction(self, x: np.ndarray, names: list, h: np.ndarray, c: np.ndarray,
                   reverse: bool):
        steps, batch, _ = x.shape
        w_ih, w_hh = names[0], names[1]
        bias = None
        if self.bias:
            bias = getattr(self, names[2]).numpy() + getattr(self, names[3]).numpy()
        xw = dynamic_linear(x.reshape(steps * batch, -1), *self._weight(w_ih), bias)
        xw = xw.reshape(steps, batch, -1)
        packed_hh, scale_hh = self._weight(w_hh)
        out = np.empty((steps, batch, self.hidden_size), np.float32)
        hs = self.hidden_size
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            gates = xw[t] + dynamic_linear(h, packed_hh, scale_hh, None)
            i, f = _sigmoid(gates[:, :hs]), _sigmoid(gates[:, hs:2 * hs])
            g, o = np.tanh(gates[:, 2 * hs:3 * hs]), _sigmoid(gates[:, 3 * hs:])
            c = f * c + i * g
            h = o * np.tanh(c)
            out[t] = h
        return out, h, c

    def forward(self, input: Tensor, hx=None):
        if not isinstance(input, Tensor) or input.ndim not in (2, 3) or \
                input.shape[-1] != self.input_size:
            shape = tuple(input.shape) if isinstance(input, Tensor) else type(input).__name__
            raise ShapeError(f"DynamicQuantizedLSTM: expected input (L, N, {self.input_size})"
                             f", (N, L, {self.input_size}) with batch_first, or "
                             f"(L, {self.input_size}), got {shape}")
        batched = input.ndim == 3
        x = input.detach().numpy().astype(np.float32)
        if not batched:
            x = x[:, None]
        elif self.batch_first:
            x = x.transpose(1, 0, 2)
        directions = 2 if self.bidirectional else 1
        shape = (self.num_layers * directions, x.shape[1], self.hidden_size)
        if hx is None:
            h0 = c0 = np.zeros(shape, np.float32)
        else:
            h0, c0 = (t.detach().numpy().astype(np.float32) for t in hx)
            if not batched:
                h0, c0 = h0[:, None], c0[:, None]
            if h0.shape != shape or c0.shape != shape:
                raise ShapeError(f"DynamicQuantizedLSTM: expected h_0 and c_0 of shape "
                                 f"{shape}, got {h0.shape} and {c0.shape}")
        h_n, c_n, layer_input = [], [], x
        for layer in range(self.num_layers):
            outputs = []
            for d in range(directions):
                index = layer * directions + d
                out, h, c = self._direction(layer_input, self._names[index], h0[index],
                                            c0[index], reverse=d == 1)
                outputs.append(out)
                h_n.append(h)
                c_n.append(c)
            layer_input = np.concatenate(outputs, axis=2) if directions == 2 else outputs[0]
        output, h_n, c_n = layer_input, np.stack(h_n), np.stack(c_n)
        if not batched:
            output, h_n, c_n = output[:, 0], h_n[:, 0], c_n[:, 0]
        elif self.batch_first:
            output = output.transpose(1, 0, 2)
        return (from_numpy(np.ascontiguousarray(output)),
                (from_numpy(h_n), from_numpy(c_n)))

    def extra_repr(self) -> str:
        return (f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, "
                f"batch_first={self.batch_first}, bidirectional={self.bidirectional}, "
                "dtype=qint8")


_DYNAMIC = {Linear: DynamicQuantizedLinear, LSTM: DynamicQuantizedLSTM}


def quantize_dynamic(model: Module, qconfig_spec=None, dtype=qint8,
                     inplace: bool = False) -> Module:
    """Replace the model's ``nn.Linear`` and ``nn.LSTM`` layers (or those of the types
    in ``qconfig_spec``) by dynamically quantized int8 ones.

    Args:
        model: the float model.
        qconfig_spec: a set of layer types to quantize (default ``{nn.Linear, nn.LSTM}``).
        dtype: the weight dtype; only ``ember.quant.qint8``.
        inplace: change ``model`` itself instead of a copy.

    >>> m = ember.nn.Sequential(ember.nn.Linear(16, 8), ember.nn.ReLU())
    >>> q = ember.quant.quantize_dynamic(m, {ember.nn.Linear}, dtype=ember.quant.qint8)
    >>> type(q[0]).__name__
    'DynamicQuantizedLinear'
    """
    if dtype is not qint8:
        raise EmberTypeError(f"quantize_dynamic: only dtype=ember.quant.qint8 weights are "
                             f"supported, got {dtype!r}")
    types = set(_DYNAMIC) if qconfig_spec is None else set(qconfig_spec)
    unknown = [t for t in types if t not in _DYNAMIC]
    if unknown:
        raise EmberValueError(f"quantize_dynamic: can quantize nn.Linear and nn.LSTM, got "
                              f"{[getattr(t, '__name__', t) for t in unknown]}")
    if not inplace:
        model = copy.deepcopy(model)
    if type(model) in types:
        return _DYNAMIC[type(model)].from_float(model)
    for module in list(model.modules()):
        for name, child in list(module._modules.items()):
            if child is not None and type(child) in types:
                setattr(module, name, _DYNAMIC[type(child)].from_float(child))
    return model
