"""Quantizing a float weight with a per-channel (or per-tensor) observer, and the
packed form the integer kernels read."""
from __future__ import annotations

import functools

import numpy as np

from ..nn.module import Module
from ..ops.creation import from_numpy
from ..tensor import Tensor
from . import int8_gemm
from .int_gemm import exact_float32_terms, exact_float_dtype
from .qparams import quantize_array

__all__ = ["quantize_weight", "register_weight_buffers", "PackedWeight"]


def quantize_weight(weight: Tensor, observer: Module) -> tuple[np.ndarray, np.ndarray,
                                                                np.ndarray]:
    """``(int8 weight, float32 scale (C,), int32 zero_point (C,))`` for ``weight``
    (out channels first), with the qparams ``observer`` computes from it. A per-tensor
    observer's single scale is repeated per channel, so every kernel is per-channel."""
    w = weight.detach().numpy().astype(np.float32, copy=False)
    if hasattr(observer, "activation_post_process") and observer.observer_enabled:
        observer(weight.detach())  # a FakeQuantize: refresh from the final weight
    elif not hasattr(observer, "activation_post_process"):
        observer(weight.detach())
    scale, zero_point = observer.qparams_arrays()
    channels = w.shape[0]
    scale = np.broadcast_to(np.asarray(scale, np.float32).reshape(-1), (channels,)).copy()
    zero_point = np.broadcast_to(np.asarray(zero_point).reshape(-1), (channels,))
    shape = (channels,) + (1,) * (w.ndim - 1)
    q = quantize_array(w, scale.reshape(shape), zero_point.reshape(shape),
                       observer.quant_min, observer.quant_max, np.int8)
    return q, scale, zero_point.astype(np.int32)


def register_weight_buffers(module: Module, q: np.ndarray, scale: np.ndarray,
                            zero_point: np.ndarray) -> None:
    """The quantized weight's state: ``weight`` (int8), ``weight_scale`` (float32, per
    output channel) and ``weight_zero_point`` (int8, per output channel: a zero point
    lies in the weight's own range)."""
    module.register_buffer("weight", from_numpy(np.ascontiguousarray(q, dtype=np.int8)))
    module.register_buffer("weight_scale", from_numpy(scale.astype(np.float32)))
    module.register_buffer("weight_zero_point", from_numpy(zero_point.astype(np.int8)))


class PackedWeight:
    """An int8 weight ``(C, K)`` laid out for exact GEMM: ``(q - zero_point)`` transposed
    to ``(K, C)`` in the float type that keeps the products exact for activations up
    to ``activation_absmax`` (``matrix``; ``row_major``, ``(C, K)``; ``rows32``, ``(C, K)``
    in float32, for products split into exact chunks of ``float32_terms`` terms), each
    built at its first use and kept until the weight changes."""

    def __init__(self, q: np.ndarray, zero_point: np.ndarray, activation_absmax: int):
        centred = q.reshape(q.shape[0], -1).astype(np.int32) - zero_point.reshape(-1, 1)
        self.k = centred.shape[1]
        self.absmax = int(np.abs(centred).max()) if centred.size else 0
        self.dtype = exact_float_dtype(self.k, activation_absmax, max(self.absmax, 1))
        self.float32_terms = exact_float32_terms(activation_absmax, max(self.absmax, 1))
        self.activation_absmax = activation_absmax
        self._q, self._zero_point = q, zero_point

    def _centred(self) -> np.ndarray:
        return self._q.reshape(self._q.shape[0], -1).astype(np.int32) - \
            self._zero_point.reshape(-1, 1)

    @functools.cached_property
    def matrix(self) -> np.ndarray:
        return np.ascontiguousarray(self._centred().T.astype(self.dtype))

    @functools.cached_property
    def row_major(self) -> np.ndarray:
        return np.ascontiguousarray(self._centred().astype(self.dtype))

    @functools.cached_property
    def rows32(self) -> np.ndarray:
        if self.dtype == np.float32:
            return self.row_major
        return np.ascontiguousarray(self._centred().astype(np.float32))

    @functools.cached_property
    def int8(self):
        """The same weight packed for the int8 kernel, built at its first use (Conv2d
        never asks); None where that kernel does not run here."""
        if not int8_gemm.available() or self._q.dtype != np.int8:
            return None
        return int8_gemm.PackedInt8Weight(self._q.reshape(self._q.shape[0], -1),
                                          self._zero_point)
