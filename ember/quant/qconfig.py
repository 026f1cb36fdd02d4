"""QConfig: which observers (or fake quantizers) a prepared module gets for its output
activation and for its weight, and the default configurations."""
from __future__ import annotations

from functools import partial
from typing import Callable, NamedTuple

from .fake_quantize import FakeQuantize, MovingAverageMinMaxObserver
from .observer import MinMaxObserver, PerChannelMinMaxObserver, PercentileObserver
from .qparams import per_channel_symmetric, per_tensor_affine, qint8, quint8

__all__ = ["QConfig", "default_qconfig", "percentile_qconfig", "default_qat_qconfig",
           "learnable_qat_qconfig", "default_dynamic_qconfig", "default_weight_observer"]


class QConfig(NamedTuple):
    """Factories (called once per module) for the activation and weight observers.

    >>> from functools import partial
    >>> q = ember.quant.QConfig(activation=ember.quant.MinMaxObserver,
    ...                         weight=partial(ember.quant.PerChannelMinMaxObserver,
    ...                                        dtype=ember.quant.qint8))
    """
    activation: Callable
    weight: Callable


# Weights: per output channel, symmetric, in [-127, 127] so that the int8 products stay
# symmetric (no -128 * -128) and the exact-GEMM bounds are as wide as they can be.
default_weight_observer = partial(PerChannelMinMaxObserver, ch_axis=0, dtype=qint8,
                                  qscheme=per_channel_symmetric, quant_min=-127,
                                  quant_max=127)

# Activations: uint8 with 7 bits used (reduce_range), as PyTorch's x86 default: x86 int8
# kernels without VNNI (ONNX Runtime's QDQ fusion on AVX2) add pairs of uint8 x int8
# products in int16, which overflows with 8-bit activations and 8-bit weights.
default_qconfig = QConfig(activation=partial(MinMaxObserver, dtype=quint8,
                                             qscheme=per_tensor_affine, reduce_range=True),
                          weight=default_weight_observer)

percentile_qconfig = QConfig(activation=partial(PercentileObserver, percentile=99.99,
                                                dtype=quint8, reduce_range=True),
                             weight=default_weight_observer)

default_qat_qconfig = QConfig(
    activation=partial(FakeQuantize, observer=MovingAverageMinMaxObserver, dtype=quint8,
                       reduce_range=True),
    weight=partial(FakeQuantize, observer=PerChannelMinMaxObserver, ch_axis=0, dtype=qint8,
                   qscheme=per_channel_symmetric, quant_min=-127, quant_max=127))

learnable_qat_qconfig = QConfig(
    activation=partial(FakeQuantize, observer=MovingAverageMinMaxObserver, dtype=quint8,
                       reduce_range=True, learnable=True),
    weight=partial(FakeQuantize, observer=PerChannelMinMaxObserver, ch_axis=0, dtype=qint8,
                   qscheme=per_channel_symmetric, quant_min=-127, quant_max=127,
                   learnable=True))

default_dynamic_qconfig = QConfig(activation=None, weight=default_weight_observer)
