"""The state of one export: ONNX nodes and initializers as they are made, the ONNX name
of every ember value, and helpers the op mappings share (constants, casts, shapes that
follow dynamic axes)."""
from __future__ import annotations

import numpy as np

from .capture import Capture, OnnxExportError

INT64_MAX = np.iinfo(np.int64).max

# ember dtype name -> onnx.TensorProto data type
_ONNX_TYPES = {"float32": 1, "uint8": 2, "int8": 3, "int16": 5, "int32": 6, "int64": 7,
               "bool": 9, "float16": 10, "float64": 11, "bfloat16": 16}


def onnx_type(dtype) -> int:
    """The ``onnx.TensorProto`` type of an ember dtype (or its name)."""
    name = getattr(dtype, "name", dtype)
    if name not in _ONNX_TYPES:
        raise OnnxExportError(f"ember.onnx.export: dtype {name} has no ONNX tensor type; "
                              f"expected one of {', '.join(_ONNX_TYPES)}")
    return _ONNX_TYPES[name]


class Builder:
    """Collects the ONNX graph; an op mapping calls :meth:`node`, :meth:`const`,
    :meth:`name` and the shape helpers."""

    def __init__(self, cap: Capture, opset: int):
        import onnx
        self.onnx = onnx
        self.cap = cap
        self.opset = opset
        self.nodes: list = []
        self.initializers: list = []
        self.names: dict[int, str] = {}     # value id -> ONNX name
        self.missing: dict[int, str] = {}   # value id -> why it has no ONNX value
        self.arg_inputs: list = []          # (Value, ONNX name) of the graph's inputs
        self._count = 0
        self._consts: dict = {}
        self.instr = None                   # the instruction being mapped
        self.scope = ""

    # Names ----------------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def name(self, v) -> str:
        """The ONNX name of ember value ``v``."""
        if v.id not in self.names:
            why = self.missing.get(v.id, "it is not produced by any exported node")
            self.fail(f"reads a value ONNX cannot provide ({why})")
        return self.names[v.id]

    def fail(self, why: str):
        """Raise the export error for the instruction being mapped."""
        ins = self.instr
        op = ins.op.name if ins is not None else "?"
        where = ins.where if ins is not None else "?"
        module = self.scope or "the model's own forward"
        raise OnnxExportError(f"ember.onnx.export: op '{op}' (issued by module '{module}' at "
                              f"{where}): {why}")

    # Nodes and constants ------------------------------------------------------------------
    def node(self, op_type: str, inputs: list, n_out: int = 1, **attrs):
        """Add an ONNX node; returns its output name (a list when ``n_out > 1``)."""
        outs = [self.fresh(op_type.lower()) for _ in range(n_out)]
        prefix = f"{self.scope}/" if self.scope else ""
        self.nodes.append(self.onnx.helper.make_node(
            op_type, [i or "" for i in inputs], outs, name=prefix + self.fresh(op_type),
            **{k: v for k, v in attrs.items() if v is not None}))
        return outs if n_out > 1 else outs[0]

    def initializer(self, name: str, array) -> str:
        array = np.asarray(array)
        if array.dtype == np.dtype("bool") or array.dtype.kind in "iuf":
            tensor = self.onnx.numpy_helper.from_array(np.ascontiguousarray(array), name)
        else:
            raise OnnxExportError(f"ember.onnx.export: cannot store an array of dtype "
                                  f"{array.dtype} ({name}) in an ONNX file")
        self.initializers.append(tensor)
        return name

    def const(self, value, dtype=None) -> str:
        """An initializer holding ``value`` (shared between equal small constants)."""
        array = np.asarray(value, dtype=dtype)
        key = (array.dtype.str, array.shape, array.tobytes()) if array.size <= 16 else None
        if key is not None and key in self._consts:
            return self._consts[key]
        name = self.initializer(self.fresh("const"), array)
        if key is not None:
            self._consts[key] = name
        return name

    def ints(self, values) -> str:
        """A 1-d int64 constant (axes, shapes, slice bounds)."""
        return self.const(np.asarray(list(values), dtype=np.int64))

    def cast(self, name: str, from_dtype, to_dtype) -> str:
        if getattr(from_dtype, "name", from_dtype) == getattr(to_dtype, "name", to_dtype):
            return name
        return self.node("Cast", [name], to=onnx_type(to_dtype))

    def input_as(self, v, dtype) -> str:
        """Value ``v``'s name, cast to ``dtype`` where it differs."""
        return self.cast(self.name(v), v.dtype, dtype)

    # Shapes that follow dynamic axes ------------------------------------------------------
    def params_alt(self, ins) -> dict:
        """The instruction's parameters in the second trace (its own when none ran)."""
        return self.cap.alt_params.get(id(ins), ins.params)

    def dim_source(self, size: int, alt: int, prefer=()) -> str | None:
        """A 1-element int64 tensor holding a dynamic size: read with Shape from a value
        whose dim has ``size`` in the first trace and ``alt`` in the second."""
        candidates = list(prefer) + [v for v, _ in self.arg_inputs]
        for v in candidates:
            alt_shape = self.cap.alt_shape(v)
            for axis, (a, b) in enumerate(zip(v.shape, alt_shape)):
                if a == size and b == alt and a != b and v.id in self.names:
                    return self.node("Shape", [self.names[v.id]], start=axis, end=axis + 1)
        return None

    def shape_tensor(self, dims, alt_dims, prefer=(), unknown: int | None = None) -> str:
        """A 1-d int64 shape: static sizes as numbers, dynamic ones read with Shape from
        ``prefer`` or the graph inputs; a dynamic size found nowhere becomes ``unknown``
        (Reshape's -1, once) or fails."""
        dims, alt_dims = list(dims), list(alt_dims)
        if dims == alt_dims:
            return self.ints(dims)
        parts, used_unknown = [], False
        for a, b in zip(dims, alt_dims):
            if a == b:
                parts.append(self.ints([a]))
                continue
            src = self.dim_source(a, b, prefer)
            if src is None:
                if unknown is None or used_unknown:
                    self.fail(f"needs a size ({a}) that follows a dynamic axis but is no "
                              "single dim of an input; expected sizes that are a dynamic "
                              "axis itself (reshape to (batch, -1) rather than to a "
                              "product of two dynamic axes)")
                used_unknown = True
                src = self.ints([unknown])
            parts.append(src)
        return self.node("Concat", parts, axis=0)
