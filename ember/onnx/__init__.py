"""ONNX export: ``ember.onnx.export(model, example_inputs, path, ...)`` writes a model's
forward as an ONNX file (the ``onnx`` package is needed), ``ember.onnx.verify`` runs it
in ONNX Runtime against ember. See docs/onnx.md.

``import ember`` works without ``onnx`` installed; the package is imported when an
export runs.
"""
from .capture import OnnxExportError
from .export import export
from .mapping import supported_ops
from .verify import OnnxMismatchError, verify

__all__ = ["export", "verify", "supported_ops", "OnnxExportError", "OnnxMismatchError"]
