"""Test helpers, as ``torch.testing``: :func:`assert_close` and :func:`make_tensor`.

``assert_close`` compares tensors (and numbers, and sequences and mappings of them)
with PyTorch's default tolerances per dtype and its mismatch messages::

    Tensor-likes are not close!

    Mismatched elements: 1 / 3 (33.3%)
    Greatest absolute difference: 0.5 at index (1,) (up to 1e-05 allowed)
    Greatest relative difference: 0.20000000298023224 at index (1,) (up to 1.3e-06 allowed)
"""
from __future__ import annotations

import collections.abc
import math
import numbers
import warnings
from typing import Any, Callable

import numpy as np

from . import dtypes as dt
from .errors import EmberTypeError, EmberValueError

__all__ = ["assert_close", "make_tensor"]

# (rtol, atol) by dtype; every other dtype (integers, bool) compares exactly
_DTYPE_PRECISIONS = {
    dt.float16: (1e-3, 1e-5),
    dt.bfloat16: (1.6e-2, 1e-5),
    dt.float32: (1.3e-6, 1e-5),
    dt.float64: (1e-7, 1e-7),
    dt.complex64: (1.3e-6, 1e-5),
    dt.complex128: (1e-7, 1e-7),
    "complex128": (1e-7, 1e-7),  # (a Python complex number's)
}


class _Mismatch(Exception):
    """A failed comparison: the exception type to raise, its message, and where in the
    inputs it happened."""

    def __init__(self, kind: type, message: str, path: tuple = ()):
        super().__init__(message)
        self.kind, self.message, self.path = kind, message, path

    def to_error(self, msg) -> Exception:
        if isinstance(msg, str):
            return self.kind(msg)
        text = self.message
        if self.path:
            text += "\n\nThe failure occurred for item " + "".join(f"[{k!r}]" for k in self.path)
        return self.kind(msg(text) if msg else text)


def _tolerances(*dtypes, rtol, atol) -> tuple[float, float]:
    if rtol is not None:
        return rtol, atol
    pairs = [_DTYPE_PRECISIONS.get(d, (0.0, 0.0)) for d in dtypes]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


def _mismatch_message(kind: str, extra: str, abs_diff, abs_idx, atol, rel_diff, rel_idx,
                      rtol) -> str:
    equality = rtol == 0 and atol == 0

    def line(what, diff, idx, tol):
        text = f"{what.title()} difference: {diff}" if idx is None else \
            f"Greatest {what} difference: {diff} at index {idx}"
        return text + ("" if equality else f" (up to {tol} allowed)")

    return (f"{kind} are not {'equal' if equality else 'close'}!\n\n{extra}\n"
            + line("absolute", abs_diff, abs_idx, atol) + "\n"
            + line("relative", rel_diff, rel_idx, rtol))


# Values ------------------------------------------------------------------------------
def _is_close(a: np.ndarray, e: np.ndarray, rtol: float, atol: float, equal_nan: bool,
              floating: bool):
    """Elementwise ``|a - e| <= atol + rtol * |e|`` (equal values, infinities included,
    always match; NaNs match each other with ``equal_nan``), in the arrays' dtype."""
    if not floating or (rtol == 0 and atol == 0):
        close = a == e
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            close = (a == e) | (np.isfinite(a) & np.isfinite(e) &
                                (np.abs(a - e) <= atol + rtol * np.abs(e)))
    if equal_nan and floating:
        close = close | (np.isnan(a) & np.isnan(e))
    return close


def _compare_arrays(a: np.ndarray, e: np.ndarray, rtol, atol, equal_nan,
                    floating: bool) -> None:
    matches = _is_close(a, e, rtol, atol, equal_nan, floating)
    if matches.all():
        return
    if a.ndim == 0:
        raise _Mismatch(AssertionError, _scalar_message(_python(a, floating),
                                                        _python(e, floating), rtol, atol))
    n, bad = matches.size, int(matches.size - matches.sum())
    extra = f"Mismatched elements: {bad} / {n} ({bad / n:.1%})"
    flat_a, flat_e, flat_m = a.reshape(-1), e.reshape(-1), matches.reshape(-1)
    if not floating:
        flat_a, flat_e = flat_a.astype(np.int64), flat_e.astype(np.int64)
    with np.errstate(all="ignore"):
        abs_diff = np.abs(flat_a - flat_e)
        abs_diff[flat_m] = 0
        # (an integer difference over an integer is a float32 ratio, as in PyTorch)
        num, den = (abs_diff, np.abs(flat_e)) if floating else \
            (abs_diff.astype(np.float32), np.abs(flat_e).astype(np.float32))
        rel_diff = num / den
    rel_diff[flat_m] = 0
    i_abs, i_rel = int(np.argmax(abs_diff)), int(np.argmax(rel_diff))
    max_abs = float(abs_diff[i_abs]) if floating else int(abs_diff[i_abs])
    raise _Mismatch(AssertionError, _mismatch_message(
        "Tensor-likes", extra, max_abs, _unravel(i_abs, a.shape), atol,
        float(rel_diff[i_rel]), _unravel(i_rel, a.shape), rtol))


def _python(x: np.ndarray, floating: bool):
    """The value of a 0-d array as a Python bool, int, float or complex."""
    if floating:
        return complex(x) if x.dtype.kind == "c" else float(x)
    return bool(x) if x.dtype.kind == "b" else int(x)


def _unravel(flat: int, shape: tuple) -> tuple:
    return tuple(int(i) for i in np.unravel_index(flat, shape))


def _scalar_message(actual, expected, rtol, atol) -> str:
    abs_diff = abs(actual - expected)
    rel_diff = float("inf") if expected == 0 else abs_diff / abs(expected)
    return _mismatch_message("Scalars", f"Expected {expected} but got {actual}.", abs_diff,
                             None, atol, rel_diff, None, rtol)


# Pairs of inputs ---------------------------------------------------------------------
def _number_dtype(x):
    if isinstance(x, np.generic):
        return dt.as_dtype(x.dtype)
    if isinstance(x, int):
        return dt.int64
    return dt.float64 if isinstance(x, float) else "complex128"


def _compare_numbers(actual, expected, rtol, atol, equal_nan, check_dtype) -> None:
    if check_dtype and _number_dtype(actual) != _number_dtype(expected):
        raise _Mismatch(AssertionError, f"The (d)types do not match: {type(actual)} != "
                                        f"{type(expected)}.")
    rtol, atol = _tolerances(_number_dtype(actual), _number_dtype(expected), rtol=rtol,
                             atol=atol)
    if actual == expected or (equal_nan and actual != actual and expected != expected):
        return
    if isinstance(actual, complex) or isinstance(expected, complex):
        close = abs(actual - expected) <= atol + rtol * abs(expected)
    else:
        close = math.isfinite(actual) and math.isfinite(expected) and \
            abs(actual - expected) <= atol + rtol * abs(expected)
    if not close:
        raise _Mismatch(AssertionError, _scalar_message(actual, expected, rtol, atol))


def _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype,
                     check_stride) -> None:
    def attribute(name, a, e):
        raise _Mismatch(AssertionError, f"The values for attribute '{name}' do not match: "
                                        f"{a} != {e}.")
    if actual.shape != expected.shape:
        attribute("shape", actual.shape, expected.shape)
    if check_device and actual.device != expected.device:
        attribute("device", actual.device, expected.device)
    if check_dtype and actual.dtype is not expected.dtype:
        attribute("dtype", actual.dtype, expected.dtype)
    if check_stride and actual.stride() != expected.stride():
        attribute("stride()", actual.stride(), expected.stride())
    rtol, atol = _tolerances(actual.dtype, expected.dtype, rtol=rtol, atol=atol)
    a = np.asarray(actual.detach().cpu().numpy())
    e = np.asarray(expected.detach().cpu().numpy())
    common = actual.dtype
    if actual.dtype is not expected.dtype:
        common = dt.promote_types(actual.dtype, expected.dtype)
        a, e = a.astype(common.np), e.astype(common.np)
    _compare_arrays(a, e, rtol, atol, equal_nan, common.differentiable)


def _is_number(x) -> bool:
    return isinstance(x, (numbers.Number, np.number)) and not isinstance(x, (bool, np.bool_))


def _compare(actual, expected, path: tuple, options: dict) -> None:
    from .tensor import Tensor
    try:
        if actual is None or expected is None:
            if actual is not expected:
                raise _Mismatch(AssertionError, f"None mismatch: {actual} is not {expected}")
        elif isinstance(actual, (bool, np.bool_)) and isinstance(expected, (bool, np.bool_)):
            if bool(actual) != bool(expected):
                raise _Mismatch(AssertionError, f"Booleans mismatch: {actual} is not {expected}")
        elif isinstance(actual, (bool, np.bool_)) or isinstance(expected, (bool, np.bool_)):
            if options["check_dtype"]:
                raise _Mismatch(AssertionError, f"The (d)types do not match: {type(actual)} "
                                                f"!= {type(expected)}.")
            _compare_numbers(int(actual), int(expected), options["rtol"], options["atol"],
                             options["equal_nan"], False)
        elif _is_number(actual) and _is_number(expected):
            _compare_numbers(actual, expected, options["rtol"], options["atol"],
                             options["equal_nan"], options["check_dtype"])
        elif isinstance(actual, Tensor) and isinstance(expected, Tensor):
            _compare_tensors(actual, expected, **options)
        elif isinstance(actual, np.ndarray) and isinstance(expected, np.ndarray):
            import ember
            _compare_tensors(ember.tensor(actual), ember.tensor(expected), **options)
        elif _is_sequence(actual) and _is_sequence(expected):
            if len(actual) != len(expected):
                raise _Mismatch(AssertionError, f"The length of the sequences mismatch: "
                                                f"{len(actual)} != {len(expected)}")
            for i, (a, e) in enumerate(zip(actual, expected)):
                _compare(a, e, path + (i,), options)
        elif isinstance(actual, collections.abc.Mapping) and \
                isinstance(expected, collections.abc.Mapping):
            _compare_mappings(actual, expected, path, options)
        else:
            raise _Mismatch(EmberTypeError, f"No comparison pair was able to handle inputs of "
                                            f"type {type(actual)} and {type(expected)}.")
    except _Mismatch as failure:
        if not failure.path:
            failure.path = path
        raise


def _is_sequence(x) -> bool:
    return isinstance(x, collections.abc.Sequence) and not isinstance(x, (str, bytes))


def _compare_mappings(actual, expected, path, options) -> None:
    if set(actual) != set(expected):
        lines = ["The keys of the mappings do not match:"]
        missing = sorted(set(expected) - set(actual), key=repr)
        extra = sorted(set(actual) - set(expected), key=repr)
        if missing:
            lines.append(f"Missing keys in the actual mapping: {missing}")
        if extra:
            lines.append(f"Additional keys in the actual mapping: {extra}")
        raise _Mismatch(AssertionError, "\n".join(lines))
    for key in expected:
        _compare(actual[key], expected[key], path + (key,), options)


def assert_close(actual: Any, expected: Any, *, allow_subclasses: bool = True,
                 rtol: float | None = None, atol: float | None = None,
                 equal_nan: bool = False, check_device: bool = True,
                 check_dtype: bool = True, check_layout: bool = True,
                 check_stride: bool = False, msg: str | Callable[[str], str] | None = None
                 ) -> None:
    """Assert that ``actual`` and ``expected`` are close, as ``torch.testing.assert_close``.

    Tensors must agree in shape (and in device, dtype and strides when checked); then
    each element must satisfy ``|actual - expected| <= atol + rtol * |expected|`` (equal
    values, infinities included, always do). Python numbers compare the same way;
    sequences and mappings compare item by item. Default tolerances, by dtype (the
    looser of the two inputs'):

    =========== ========== ==========
    dtype       ``rtol``   ``atol``
    =========== ========== ==========
    float16     1e-3       1e-5
    bfloat16    1.6e-2     1e-5
    float32     1.3e-6     1e-5
    float64     1e-7       1e-7
    other       0.0        0.0
    =========== ========== ==========

    Args:
        actual, expected: tensors, NumPy arrays, numbers, or (nested) sequences and
            mappings of them.
        rtol, atol: relative and absolute tolerances; give both or neither.
        equal_nan: NaNs compare equal.
        check_device, check_dtype, check_stride: also require equal devices, dtypes
            (otherwise both are promoted to a common dtype), strides.
        allow_subclasses, check_layout: accepted for PyTorch compatibility.
        msg: a message replacing the generated one, or a callable that gets the
            generated one and returns the message.

    Raises:
        AssertionError: with PyTorch's message (mismatched elements, greatest absolute
            and relative differences and where they are).

    Example::

        >>> ember.testing.assert_close(ember.tensor([1.0, 2.0]), ember.tensor([1.0, 2.0 + 1e-7]))
        >>> ember.testing.assert_close(ember.tensor([1.0, 2.0]), ember.tensor([1.0, 2.5]))
        Traceback (most recent call last):
        ...
        AssertionError: Tensor-likes are not close!
        ...
    """
    if (rtol is None) != (atol is None):
        missing = "rtol" if rtol is None else "atol"
        raise EmberValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, "
                              f"but got no {missing}.")
    options = {"rtol": rtol, "atol": atol, "equal_nan": equal_nan,
               "check_device": check_device, "check_dtype": check_dtype,
               "check_stride": check_stride}
    try:
        _compare(actual, expected, (), options)
    except _Mismatch as failure:
        raise failure.to_error(msg) from None


# make_tensor ---------------------------------------------------------------------------
def _finfo(dtype):
    if dtype is dt.bfloat16:  # (NumPy's finfo does not know ml_dtypes' bfloat16)
        import ml_dtypes
        return ml_dtypes.finfo(dtype.np)
    return np.finfo(dtype.np)


def _value_range(dtype) -> tuple[float, float]:
    """[lowest, highest) a random draw of ``dtype`` may cover."""
    if dtype is dt.bool:
        return 0, 2
    if dtype.is_floating_point:
        info = _finfo(dtype)
        return float(info.min), float(info.max)
    info = np.iinfo(dtype.np)
    return int(info.min), int(info.max) + (0 if dtype is dt.int64 else 1)


def _low_high(low, high, dtype) -> tuple:
    if dtype is dt.bool:
        default = (0, 2)
    elif dtype.is_floating_point:
        default = (-9, 9)
    else:
        default = (-9, 10)
    low = default[0] if low is None else low
    high = default[1] if high is None else high
    if any(isinstance(v, float) and math.isnan(v) for v in (low, high)):
        raise EmberValueError(f"`low` and `high` cannot be NaN, but got low={low} and "
                              f"high={high}")
    lowest, highest = _value_range(dtype)
    if low == high and dtype.is_floating_point:
        warnings.warn("Passing `low==high` to `make_tensor` for floating types is deprecated "
                      "in PyTorch; use `ember.full(...)` instead.", FutureWarning, stacklevel=3)
    elif low >= high:
        raise EmberValueError(f"`low` must be less than `high`, but got {low} >= {high}")
    elif high < lowest or low >= highest:
        raise EmberValueError(f"The value interval specified by `low` and `high` is [{low}, "
                              f"{high}), but {dtype} only supports [{lowest}, {highest})")
    low, high = min(max(low, lowest), highest), min(max(high, lowest), highest)
    if not dtype.is_floating_point:
        return math.ceil(low), math.ceil(high)
    return low, high


def make_tensor(*shape, dtype, device=None, low: float | None = None,
                high: float | None = None, requires_grad: bool = False,
                noncontiguous: bool = False, exclude_zero: bool = False,
                memory_format=None):
    """A tensor of ``shape`` filled with values drawn uniformly from ``[low, high)``, as
    ``torch.testing.make_tensor``.

    Default ranges: bool ``[0, 2)``, unsigned integers ``[0, 10)``, signed integers
    ``[-9, 10)``, floats ``[-9, 9)``; ``low`` and ``high`` are clamped to what ``dtype``
    can hold (integers round up).

    Args:
        shape: ints, or one sequence of ints.
        dtype: the dtype (required).
        device: where the tensor lives (the CPU by default; PyTorch requires it).
        low, high: the range of values.
        requires_grad: make a leaf that requires grad (floating dtypes only).
        noncontiguous: return a non-contiguous view (when there are 2+ elements).
        exclude_zero: replace zeros by 1 (bool and integers) or the dtype's smallest
            normal number (floats).
        memory_format: the memory format (not with ``noncontiguous``).

    Example::

        >>> ember.testing.make_tensor(2, 3, dtype=ember.float32, low=-1, high=1).shape
        ember.Size([2, 3])
    """
    from .ops.creation import empty
    from .ops.random import randint
    if len(shape) == 1 and isinstance(shape[0], collections.abc.Sequence):
        shape = shape[0]
    shape = tuple(shape)
    dtype = dt.as_dtype(dtype)
    if noncontiguous and memory_format is not None:
        raise EmberValueError(f"The parameters `noncontiguous` and `memory_format` are "
                              f"mutually exclusive, but got noncontiguous={noncontiguous} and "
                              f"memory_format={memory_format}")
    if requires_grad and not dtype.is_floating_point:
        raise EmberValueError(f"`requires_grad=True` is not supported for boolean and "
                              f"integral dtypes, but got dtype={dtype}")
    noncontiguous = noncontiguous and math.prod(shape) > 1
    if noncontiguous:
        shape = shape[:-1] + (2 * shape[-1],)
    low, high = _low_high(low, high, dtype)
    if dtype.is_floating_point:
        result = empty(shape, dtype=dtype, device=device)
        if high - low >= float(_finfo(dtype).max):
            result.uniform_(low / 2, high / 2).mul_(2)
        else:
            result.uniform_(low, high)
    elif dtype is dt.bool:
        result = randint(low, high, shape, dtype=dt.int64, device=device).to(dt.bool)
    else:
        result = randint(low, high, shape, dtype=dtype, device=device)
    if noncontiguous:
        result = result[..., 1::2]
    elif memory_format is not None:
        result = result.clone(memory_format=memory_format)
    if exclude_zero:
        fill = float(_finfo(dtype).tiny) if dtype.is_floating_point else 1
        result.masked_fill_(result == 0, fill)
    if requires_grad:
        result.requires_grad_(True)
    return result
