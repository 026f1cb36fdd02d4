"""``repr(tensor)`` in PyTorch's style: ``tensor([1., 2.], requires_grad=True)``."""
from __future__ import annotations

import numpy as np

from . import dtypes as dt

_OPTIONS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80,
            "sci_mode": None}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None) -> None:
    """Set how tensors print (as ``torch.set_printoptions``)."""
    if profile == "default":
        _OPTIONS.update(precision=4, threshold=1000, edgeitems=3, linewidth=80)
    elif profile == "short":
        _OPTIONS.update(precision=2, threshold=1000, edgeitems=2, linewidth=80)
    elif profile == "full":
        _OPTIONS.update(precision=4, threshold=2 ** 63 - 1, edgeitems=3, linewidth=80)
    for key, value in (("precision", precision), ("threshold", threshold),
                       ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            _OPTIONS[key] = value
    _OPTIONS["sci_mode"] = sci_mode


def _float_formatter(values: np.ndarray):
    finite = values[np.isfinite(values)]
    prec = _OPTIONS["precision"]
    if finite.size == 0:
        return lambda v: _special(v) or f"{v:.0f}."
    absv = np.abs(finite)
    nonzero = absv[absv > 0]
    ratio_big = bool(nonzero.size) and (nonzero.max() / nonzero.min() > 1000.0
                                        or nonzero.max() > 1e8)
    sci = _OPTIONS["sci_mode"]
    if np.all(finite == np.round(finite)):
        if sci is None:
            sci = ratio_big
        fmt = (lambda v: _special(v) or f"{v:.{prec}e}") if sci else \
            (lambda v: _special(v) or f"{v:.0f}.")
    else:
        if sci is None:
            sci = ratio_big or (bool(nonzero.size) and nonzero.min() < 1e-4)
        fmt = (lambda v: _special(v) or f"{v:.{prec}e}") if sci else \
            (lambda v: _special(v) or f"{v:.{prec}f}")
    return fmt


def _special(v) -> str | None:
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return None


def _format_array(arr: np.ndarray, indent: int, summarize: bool) -> str:
    if arr.dtype == np.bool_:
        fmt = lambda v: "True" if v else "False"  # noqa: E731
        flat = arr.reshape(-1)
    elif arr.dtype.kind == "f":
        flat = arr.reshape(-1)
        fmt = _float_formatter(_summary_values(arr, summarize))
    else:
        flat = arr.reshape(-1)
        fmt = str
    width = max((len(fmt(v)) for v in _summary_values(arr, summarize).reshape(-1)), default=1)
    return _nested(arr, fmt, width, indent, summarize)


def _summary_values(arr, summarize):
    if not summarize or arr.ndim == 0:
        return arr.astype(np.float64) if arr.dtype.kind == "f" else arr
    e = _OPTIONS["edgeitems"]
    parts = []
    def walk(a):
        if a.ndim == 0:
            parts.append(a)
            return
        idx = list(range(a.shape[0]))
        if a.shape[0] > 2 * e:
            idx = idx[:e] + idx[-e:]
        for i in idx:
            walk(a[i])
    walk(arr)
    out = np.array([p for p in parts], dtype=arr.dtype)
    return out.astype(np.float64) if arr.dtype.kind == "f" else out


def _nested(arr, fmt, width, indent, summarize) -> str:
    if arr.ndim == 0:
        return fmt(arr.item() if arr.dtype.kind != "f" else float(arr)).rjust(width)
    e = _OPTIONS["edgeitems"]
    n = arr.shape[0]
    elide = summarize and n > 2 * e
    idx = list(range(e)) + [None] + list(range(n - e, n)) if elide else list(range(n))
    if arr.ndim == 1:
        items = ["..." if i is None else fmt(arr[i].item() if arr.dtype.kind != "f"
                                             else float(arr[i])).rjust(width) for i in idx]
        per_line = max(1, (_OPTIONS["linewidth"] - indent) // (width + 2))
        lines = [", ".join(items[k:k + per_line]) for k in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    sep = "," + "\n" * (arr.ndim - 1) + " " * (indent + 1)
    items = ["..." if i is None else _nested(arr[i], fmt, width, indent + 1, summarize)
             for i in idx]
    return "[" + sep.join(items) + "]"


def tensor_repr(t) -> str:
    arr = np.asarray(t._device.backend.to_numpy(t._data))
    if arr.dtype.kind == "V" or (dt.bfloat16.np is not None and arr.dtype == dt.bfloat16.np):
        arr = arr.astype(np.float32)
    prefix = "tensor("
    summarize = arr.size > _OPTIONS["threshold"]
    if arr.size == 0 and arr.ndim == 1:
        body = "[]"
    elif arr.size == 0:
        body = "[]"
    else:
        body = _format_array(arr, len(prefix), summarize)
    suffix = []
    if arr.size == 0 and arr.ndim != 1:
        suffix.append(f"size={tuple(t.shape)}")
    if t._device.type != "cpu":
        suffix.append(f"device='{t._device}'")
    default_types = (dt.get_default_dtype(), dt.int64, dt.bool)
    if t.dtype not in default_types:
        suffix.append(f"dtype=ember.{t.dtype.name}")
    if t.grad_fn is not None:
        suffix.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        suffix.append("requires_grad=True")
    return prefix + body + "".join(", " + s for s in suffix) + ")"
