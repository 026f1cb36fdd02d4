"""Int8 quantization: observers, dynamic and static post-training quantization,
quantization-aware training, and the integer kernels the quantized layers run on.

>>> model = ember.nn.Sequential(ember.nn.Linear(8, 16), ember.nn.ReLU(),
...                             ember.nn.Linear(16, 4))
>>> prepared = ember.quant.prepare(model)                 # observers in
>>> _ = prepared(ember.randn(64, 8))                      # calibrate
>>> quantized = ember.quant.convert(prepared)             # int8 layers out
>>> quantized(ember.randn(2, 8)).shape
ember.Size([2, 4])
"""
from .qparams import (QDType, QTensor, per_channel_affine, per_channel_symmetric,
                      per_tensor_affine, per_tensor_symmetric, qint8, qint32,
                      quantize_per_tensor, quint8)
from .observer import MinMaxObserver, ObserverBase, PerChannelMinMaxObserver, PercentileObserver
from .fake_quantize import FakeQuantize, MovingAverageMinMaxObserver, fake_quantize
from .qconfig import (QConfig, default_dynamic_qconfig, default_qat_qconfig, default_qconfig,
                      default_weight_observer, learnable_qat_qconfig, percentile_qconfig)
from .int_gemm import int_matmul
from .stubs import DeQuantStub, QuantStub, QuantWrapper
from .fused import ConvReLU2d, LinearReLU, fuse_modules, fuse_relu
from .quantized import (DeQuantize, Quantize, QuantizedConv2d, QuantizedConvReLU2d,
                        QuantizedLinear, QuantizedLinearReLU, QuantizedPassThrough)
from .qat import QATConv2d, QATConvReLU2d, QATLinear, QATLinearReLU
from .dynamic import DynamicQuantizedLinear, DynamicQuantizedLSTM, quantize_dynamic
from .convert import calibrate, convert, prepare, prepare_qat
from .report import evaluate_accuracy, quantized_size_bytes, report
from .export import export_onnx
