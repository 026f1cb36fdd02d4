"""JSON tensors in and out of ``/v1/predict``, checked against the declared inputs.

A tensor is ``{"data": [...], "shape": [...], "dtype": "float32"}`` (``shape`` and
``dtype`` optional: the data's nesting and the declared dtype) or a plain nested list.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .. import dtypes as dt
from ..pretrained import InputSpec
from ..tensor import Tensor
from .errors import ServeError

__all__ = ["Batch", "decode_inputs", "encode_outputs", "outputs_by_name"]

_TENSOR_KEYS = {"data", "shape", "dtype"}


@dataclass
class Batch:
    """A request's inputs as arrays (in the declared order), the rows along dim 0, and
    whether the client sent one example without the batch dim (its outputs then lose
    theirs)."""

    arrays: dict[str, np.ndarray]
    rows: int
    unbatched: bool

    def key(self) -> tuple:
        """Requests with equal keys can be concatenated along dim 0."""
        return tuple((name, a.shape[1:], a.dtype.str) for name, a in self.arrays.items())


def _shape_text(shape: Sequence[int | None]) -> str:
    return "[" + ", ".join("null" if n is None else str(n) for n in shape) + "]"


def _to_array(name: str, value: Any, spec: InputSpec) -> np.ndarray:
    shape = None
    if isinstance(value, Mapping):
        extra = set(value) - _TENSOR_KEYS
        if extra or "data" not in value:
            raise ServeError(422, f"input {name!r}: a tensor is {{\"data\": [...], "
                                  f"\"shape\": [...], \"dtype\": \"{spec.dtype}\"}}; got "
                                  f"keys {sorted(value)}")
        given = value.get("dtype", spec.dtype)
        if given != spec.dtype:
            raise ServeError(422, f"input {name!r}: expected dtype {spec.dtype}, got "
                                  f"{str(given)[:40]!r}")
        shape = value.get("shape")
        if shape is not None and (not isinstance(shape, list) or not all(
                type(n) is int and n >= 0 for n in shape)):
            raise ServeError(422, f"input {name!r}: shape must be a list of sizes (ints "
                                  f">= 0), got {str(shape)[:80]}")
        value = value["data"]
    if not isinstance(value, (list, int, float)):  # (bools are ints; checked below)
        raise ServeError(422, f"input {name!r}: data must be a (nested) list of numbers, "
                              f"got {type(value).__name__}")
    try:
        raw = np.array(value)
    except ValueError:
        raise ServeError(422, f"input {name!r}: the nested lists are ragged (rows of "
                              f"different lengths); expected shape "
                              f"{_shape_text(spec.shape)}") from None
    kind = raw.dtype.kind
    target = dt.as_dtype(spec.dtype)
    if kind not in "biuf" or (kind == "f" and not target.is_floating_point) or (
            kind == "b" and spec.dtype != "bool") or (
            spec.dtype == "bool" and kind != "b"):
        got = {"f": "float", "i": "int", "u": "int", "b": "bool"}.get(kind, "non-number")
        raise ServeError(422, f"input {name!r}: expected dtype {spec.dtype}, got {got} "
                              f"values")
    if kind in "iu" and not target.is_floating_point and raw.size:
        info = np.iinfo(target.np)
        if raw.min() < info.min or raw.max() > info.max:
            raise ServeError(422, f"input {name!r}: values out of the {spec.dtype} range")
    array = raw.astype(target.np)
    if shape is not None:
        if math.prod(shape) != array.size:  # (exact: np.prod overflows int64)
            raise ServeError(422, f"input {name!r}: shape {_shape_text(shape)} needs "
                                  f"{math.prod(shape)} values, data has {array.size}")
        array = array.reshape(shape)
    return array


def _check_shape(name: str, array: np.ndarray, spec: InputSpec) -> bool:
    """Raises on a shape that doesn't fit ``spec``; True when the array is one example
    without the (dynamic) batch dim."""
    declared = spec.shape
    unbatched = (array.ndim == len(declared) - 1 and len(declared) > 0
                 and declared[0] is None)
    fits = declared[1:] if unbatched else declared
    if array.ndim != len(fits) or any(d is not None and d != n
                                      for d, n in zip(fits, array.shape)):
        raise ServeError(422, f"input {name!r}: expected shape {_shape_text(declared)} "
                              f"(null: any size), got {_shape_text(array.shape)}")
    return unbatched


def decode_inputs(body: Any, specs: Sequence[InputSpec]) -> Batch:
    """The inputs of a predict request body, checked against ``specs`` (422 with a
    message naming the input, the expected and the given on a mismatch)."""
    names = [spec.name for spec in specs]
    if isinstance(body, list):
        if len(specs) != 1:
            raise ServeError(422, f"a plain list is the input of a single-input model; "
                                  f"this one takes {names}: send "
                                  f"{{\"inputs\": {{name: tensor}}}}")
        given = {names[0]: body}
    elif isinstance(body, Mapping) and set(body) == {"inputs"} and isinstance(
            body["inputs"], Mapping):
        given = body["inputs"]
    else:
        raise ServeError(422, f"the body must be {{\"inputs\": {{name: tensor}}}} (the "
                              f"inputs: {names}) or a nested list for a single-input "
                              f"model; got {type(body).__name__}"
                              + (f" with keys {sorted(body)[:8]}"
                                 if isinstance(body, Mapping) else ""))
    missing = [n for n in names if n not in given]
    unknown = [str(n)[:40] for n in given if n not in names]
    if missing or unknown:
        raise ServeError(422, f"the model takes inputs {names}; missing {missing}, "
                              f"unknown {unknown}")
    arrays, flags = {}, set()
    for spec in specs:
        array = _to_array(spec.name, given[spec.name], spec)
        flags.add(_check_shape(spec.name, array, spec))
        arrays[spec.name] = array
    if len(flags) > 1:
        raise ServeError(422, "some inputs have the batch dim and others don't; send all "
                              "with it or all without")
    unbatched = flags.pop()
    if unbatched:
        arrays = {n: a[None] for n, a in arrays.items()}
    batched = all(spec.shape and spec.shape[0] is None for spec in specs)
    rows = {a.shape[0] for a in arrays.values()} if batched else {1}
    if len(rows) > 1:
        raise ServeError(422, f"the inputs have different batch sizes "
                              f"{ {n: a.shape[0] for n, a in arrays.items()} }")
    return Batch(arrays, rows.pop(), unbatched)


def outputs_by_name(result: Any) -> dict[str, np.ndarray]:
    """A model's result (a tensor, a tuple/list or a dict of tensors) as named arrays:
    ``output``, or ``output_0``, ..., or the dict's keys."""
    if isinstance(result, Tensor):
        items = {"output": result}
    elif isinstance(result, (tuple, list)):
        items = {f"output_{i}": r for i, r in enumerate(result)}
    elif isinstance(result, Mapping):
        items = {str(k): v for k, v in result.items()}
    else:
        raise ServeError(500, f"the model returned a {type(result).__name__}; a served "
                              f"model returns a tensor, a tuple or a dict of tensors")
    bad = [k for k, v in items.items() if not isinstance(v, Tensor)]
    if bad:
        raise ServeError(500, f"the model's outputs {bad} are not tensors")
    return {k: v.detach().cpu().numpy() for k, v in items.items()}


def encode_outputs(outputs: Mapping[str, np.ndarray], unbatched: bool) -> dict[str, Any]:
    """JSON tensors ``{name: {"data", "shape", "dtype"}}``."""
    out = {}
    for name, array in outputs.items():
        if unbatched:
            array = array[0]
        dtype = dt.as_dtype(array.dtype).name
        out[name] = {"data": array.tolist(), "shape": list(array.shape), "dtype": dtype}
    return out
