"""``repr(tensor)`` in PyTorch's style: ``tensor([1., 2.], requires_grad=True)``.

The rules, as PyTorch prints:

- Integers and bools print as Python prints them, right-aligned to the widest value.
- Floats are judged on their finite non-zero values: when all are whole numbers they print
  as ``3.``; otherwise with ``precision`` decimals. Scientific notation is used when the
  largest is over 1e8 or more than 1000 times the smallest, or (for non-whole values) the
  smallest is under 1e-4. ``nan``/``inf`` are padded to the width, never counted in it.
- Tensors with more than ``threshold`` elements show only ``edgeitems`` at each end of
  every dimension, with ``...`` between; the width is judged on what is shown.
- Rows wrap at ``linewidth``; nested dimensions are separated by one blank line per
  extra dimension; the suffixes (dtype, grad_fn, ...) wrap onto a new line too.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np

from . import dtypes as dt

_DEFAULTS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80,
             "sci_mode": None}
_PROFILES = {
    "default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
    "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
    "full": dict(precision=4, threshold=math.inf, edgeitems=3, linewidth=80),
}
_OPTIONS = dict(_DEFAULTS)


def set_printoptions(precision: int | None = None, threshold: float | None = None,
                     edgeitems: int | None = None, linewidth: int | None = None,
                     profile: str | None = None, sci_mode: bool | None = None) -> None:
    """Set how tensors print (as ``torch.set_printoptions``).

    Args:
        precision: digits after the decimal point (default 4).
        threshold: more elements than this are summarised with ``...`` (default 1000).
        edgeitems: items shown at each end of a summarised dimension (default 3).
        linewidth: characters per line before wrapping (default 80).
        profile: ``"default"``, ``"short"`` or ``"full"``; the other arguments override it.
        sci_mode: force (True) or forbid (False) scientific notation; None decides per
            tensor.

    >>> ember.set_printoptions(precision=2)
    """
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: unknown profile {profile!r}; expected one "
                             f"of {sorted(_PROFILES)}")
        _OPTIONS.update(_PROFILES[profile])
    for key, value in (("precision", precision), ("threshold", threshold),
                       ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            _OPTIONS[key] = value
    _OPTIONS["sci_mode"] = sci_mode


def get_printoptions() -> dict:
    """The current print options, as a dict of :func:`set_printoptions`'s arguments."""
    return dict(_OPTIONS)


@contextlib.contextmanager
def printoptions(**kwargs):
    """Use :func:`set_printoptions`'s ``kwargs`` inside a ``with`` block only."""
    saved = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        _OPTIONS.update(saved)


class _ValueFormat:
    """How every element of one tensor prints: one notation and one width for all."""

    def __init__(self, shown: np.ndarray):
        self.floating = shown.dtype.kind == "f"
        self.whole = True
        self.sci = False
        self.width = 1
        flat = shown.reshape(-1)
        if not self.floating:
            self.width = max((len(str(v)) for v in flat.tolist()), default=1)
        else:
            self._judge_floats(flat.astype(np.float64))

    def _judge_floats(self, flat: np.ndarray) -> None:
        judged = flat[np.isfinite(flat) & (flat != 0)]
        if judged.size == 0:
            return
        mags = np.abs(judged)
        lo, hi = mags.min(), mags.max()
        prec = _OPTIONS["precision"]
        self.whole = bool(np.all(judged == np.ceil(judged)))
        self.sci = hi / lo > 1000.0 or hi > 1.0e8 or (not self.whole and lo < 1.0e-4)
        if _OPTIONS["sci_mode"] is not None:
            self.sci = _OPTIONS["sci_mode"]
        if self.sci:
            texts = [f"{v:.{prec}e}" for v in judged.tolist()]
        elif self.whole:
            texts = [f"{v:.0f}." for v in judged.tolist()]
        else:
            texts = [f"{v:.{prec}f}" for v in judged.tolist()]
        self.width = max(len(t) for t in texts)

    def __call__(self, value) -> str:
        if not self.floating:
            text = str(value)
        elif self.sci:
            text = f"{value:.{_OPTIONS['precision']}e}"
        elif self.whole:
            text = f"{value:.0f}" + ("" if math.isnan(value) or math.isinf(value) else ".")
        else:
            text = f"{value:.{_OPTIONS['precision']}f}"
        return text.rjust(self.width)


class _ComplexFormat:
    """Complex elements as PyTorch prints them: the real parts in one format and width,
    the imaginary parts in theirs, then ``j`` (``1.+2.0000j``)."""

    def __init__(self, shown: np.ndarray):
        self.real, self.imag = _ValueFormat(shown.real), _ValueFormat(shown.imag)
        self.width = self.real.width + self.imag.width + 1  # (and "j": as PyTorch counts)

    def __call__(self, value) -> str:
        value = complex(value)
        imag = self.imag(value.imag).lstrip() + "j"
        return self.real(value.real) + (imag if imag[0] in "+-" else "+" + imag)


def _edge_rows(n: int) -> list[int] | None:
    """The indices a summarised dimension of length ``n`` shows, or None for all."""
    e = _OPTIONS["edgeitems"]
    if n > 2 * e:
        return list(range(e)) + list(range(n - e, n))
    return None


def _shown_values(arr: np.ndarray) -> np.ndarray:
    """The elements a summarised print shows (what the width is judged on)."""
    if arr.ndim == 0:
        return arr
    rows = _edge_rows(arr.shape[0])
    if arr.ndim == 1:
        return arr if rows is None else arr[rows]
    if _OPTIONS["edgeitems"] == 0:
        return arr[:0]
    picked = range(arr.shape[0]) if rows is None else rows
    return np.stack([_shown_values(arr[i]) for i in picked])


def _vector(arr: np.ndarray, fmt: _ValueFormat, indent: int, summarize: bool) -> str:
    values = arr.tolist()
    rows = _edge_rows(len(values)) if summarize else None
    if summarize and _OPTIONS["edgeitems"] == 0:
        items = ["..."]
    elif rows is not None:
        e = _OPTIONS["edgeitems"]
        items = [fmt(v) for v in values[:e]] + [" ..."] + [fmt(v) for v in values[-e:]]
    else:
        items = [fmt(v) for v in values]
    per_line = max(1, (_OPTIONS["linewidth"] - indent) // (fmt.width + 2))
    lines = [", ".join(items[k:k + per_line]) for k in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(arr: np.ndarray, fmt: _ValueFormat, indent: int, summarize: bool) -> str:
    if arr.ndim == 0:
        return fmt(arr.item())
    if arr.ndim == 1:
        return _vector(arr, fmt, indent, summarize)
    rows = _edge_rows(arr.shape[0]) if summarize else None
    if rows is None:
        parts = [_nested(a, fmt, indent + 1, summarize) for a in arr]
    else:
        e = _OPTIONS["edgeitems"]
        parts = ([_nested(arr[i], fmt, indent + 1, summarize) for i in rows[:e]] + ["..."] +
                 [_nested(arr[i], fmt, indent + 1, summarize) for i in rows[e:]])
    sep = "," + "\n" * (arr.ndim - 1) + " " * (indent + 1)
    return "[" + sep.join(parts) + "]"


def _body(arr: np.ndarray, indent: int) -> str:
    if arr.dtype.kind not in "biufc":  # bfloat16 (ml_dtypes) prints through float32
        arr = arr.astype(np.float32)
    elif arr.dtype == np.float16:
        arr = arr.astype(np.float32)
    summarize = arr.size > _OPTIONS["threshold"]
    shown = _shown_values(arr) if summarize else arr
    fmt = _ComplexFormat(shown) if arr.dtype.kind == "c" else _ValueFormat(shown)
    return _nested(arr, fmt, indent, summarize)


def _join_suffixes(text: str, suffixes: list[str], indent: int) -> str:
    # A suffix that would pass the line width starts a new line, indented to the data.
    line_len = len(text) - text.rfind("\n") + 1
    out = [text]
    for s in suffixes:
        if line_len + len(s) + 2 > _OPTIONS["linewidth"]:
            out.append(",\n" + " " * indent + s)
            line_len = indent + len(s)
        else:
            out.append(", " + s)
            line_len += len(s) + 2
    return "".join(out) + ")"


def tensor_repr(t) -> str:
    """``repr(t)``: the values, then the suffixes PyTorch shows (device, dtype, grad)."""
    prefix = "tensor("
    indent = len(prefix)
    arr = np.asarray(t._device.backend.to_numpy(t._data))
    suffixes = []
    if t._device.type != "cpu":
        suffixes.append(f"device='{t._device}'")
    if arr.size == 0:
        body = "[]"
        if arr.ndim != 1:
            suffixes.append(f"size={tuple(arr.shape)}")
        if t.dtype is not dt.get_default_dtype():
            suffixes.append(f"dtype={t.dtype!r}")
    else:
        if _OPTIONS["edgeitems"] == 0:
            suffixes.append(f"size={tuple(arr.shape)}")
        if t.dtype not in (dt.get_default_dtype(), dt.get_default_dtype().to_complex(),
                           dt.int64, dt.bool):
            suffixes.append(f"dtype={t.dtype!r}")
        body = _body(arr, indent)
    grad_fn = t.grad_fn
    if grad_fn is not None:
        suffixes.append(f"grad_fn=<{grad_fn.name()}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _join_suffixes(prefix + body, suffixes, indent)
