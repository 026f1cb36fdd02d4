"""``export_onnx``: a static int8 model (from :func:`~ember.quant.convert`) as an ONNX
file in QDQ form, through :func:`ember.onnx.export` (see :mod:`ember.onnx.map_quant`)."""
from __future__ import annotations

from typing import Sequence

from ..errors import EmberTypeError
from ..nn.module import Module
from .dynamic import DynamicQuantizedLinear, DynamicQuantizedLSTM
from .quantized import Quantize

__all__ = ["export_onnx"]


def export_onnx(model: Module, example_inputs, path, input_names: Sequence[str] = ("input",),
                output_names: Sequence[str] = ("output",), dynamic_batch: bool = True,
                opset_version: int | None = None) -> str:
    """Write a static int8 quantized model as ONNX in QDQ form, which ONNX Runtime fuses
    into integer kernels (QLinearConv, QGemm/MatMulInteger).

    Each quantized activation becomes a ``QuantizeLinear`` (uint8, per tensor) followed
    by ``DequantizeLinear`` where it is read; each weight an int8 initializer read through
    ``DequantizeLinear`` with per-channel scales (axis 0); each bias an int32 initializer
    at scale ``s_x·s_w[c]``. ``ember.onnx.export`` does the same for any model holding
    quantized modules; this adds the defaults a one-input classifier wants.

    Args:
        model: the output of :func:`ember.quant.convert` (it starts with ``Quantize``).
        example_inputs: a float tensor (or a tuple of the forward's arguments).
        path: the ``.onnx`` file to write.
        input_names, output_names: names of the graph's inputs and outputs.
        dynamic_batch: make axis 0 of every named input and output dynamic.
        opset_version: default the newest opset whose QuantizeLinear/DequantizeLinear the
            installed ONNX Runtime implements.

    Returns:
        ``path``.

    Example::

        >>> prepared = ember.quant.prepare(ember.nn.Sequential(ember.nn.Linear(8, 4)))
        >>> _ = ember.quant.calibrate(prepared, [ember.randn(32, 8)])
        >>> qmodel = ember.quant.convert(prepared)
        >>> ember.quant.export_onnx(qmodel, ember.randn(2, 8), "q.onnx")
        'q.onnx'
    """
    from .. import onnx as ember_onnx
    kinds = [m for m in model.modules()] if isinstance(model, Module) else []
    dynamic = [type(m).__name__ for m in kinds
               if isinstance(m, (DynamicQuantizedLinear, DynamicQuantizedLSTM))]
    if dynamic:
        raise NotImplementedError(f"export_onnx: dynamically quantized layers ({dynamic[0]}) "
                                  "do not export yet; export the float model with "
                                  "ember.onnx.export and quantize it with ONNX Runtime's "
                                  "quantize_dynamic, or quantize statically")
    if not any(isinstance(m, Quantize) for m in kinds):
        raise EmberTypeError("export_onnx: expected a static quantized model (the output "
                             "of ember.quant.convert, which starts with Quantize); for a "
                             "float model use ember.onnx.export")
    axes = {name: {0: "batch"} for name in list(input_names) + list(output_names)} \
        if dynamic_batch else None
    return ember_onnx.export(model, example_inputs, path, input_names=input_names,
                             output_names=output_names, dynamic_axes=axes,
                             opset_version=opset_version)
