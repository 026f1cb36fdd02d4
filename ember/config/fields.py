"""Checks for one config value each, and the helpers that name a bad key.

A check is a callable ``check(path, value) -> value`` that returns the value (converted
where a config format is looser than Python: an int where a float is expected, a list
where a tuple is) or raises :class:`ConfigError` naming ``path``. Its ``expected``
attribute says in words what it accepts, for messages.
"""
from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from .errors import ConfigError

__all__ = ["Field", "Check", "Int", "Float", "Bool", "Str", "Choice", "ListOf", "Mapping_",
           "Nullable", "Anything", "join", "bad_value", "suggestion", "unknown_key",
           "check_fields"]


def join(path: str, key: str | int) -> str:
    """``path.key`` (just ``key`` at the top level)."""
    return f"{path}.{key}" if path else str(key)


def bad_value(path: str, expected: str, value: Any) -> ConfigError:
    return ConfigError(path, f"expected {expected}, got {value!r}")


def close_matches(word: str, known: Iterable[str]) -> list[str]:
    return difflib.get_close_matches(str(word), [str(k) for k in known], n=3, cutoff=0.6)


def suggestion(word: Any, known: Iterable[str]) -> str:
    """`` (did you mean 'adam' or 'adamw'?)``, or nothing when no name is close."""
    matches = close_matches(word, known) if isinstance(word, str) else []
    return f" (did you mean {' or '.join(repr(m) for m in matches)}?)" if matches else ""


def unknown_key(path: str, key: str, known: Iterable[str]) -> ConfigError:
    """``trainer.max_epoch: unknown key; did you mean 'max_epochs'? (known keys: ...)``"""
    known = sorted(known)
    matches = close_matches(key, known)
    hint = f"did you mean {' or '.join(repr(m) for m in matches)}? " if matches else ""
    return ConfigError(join(path, key), f"unknown key; {hint}(known keys: "
                                        f"{', '.join(known) or 'none'})")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Check:
    """Base of the value checks: ``check(path, value)`` returns the (converted) value."""

    expected = "a value"

    def __call__(self, path: str, value: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define __call__")


class Anything(Check):
    """Any value (a free-form option passed on as it is)."""

    expected = "any value"

    def __call__(self, path: str, value: Any) -> Any:
        return value


class Int(Check):
    """An int (not a bool) ``>= low`` when ``low`` is given."""

    def __init__(self, low: int | None = None) -> None:
        self.low = low
        self.expected = {None: "an int", 1: "a positive int", 0: "an int >= 0"}.get(
            low, f"an int >= {low}")

    def __call__(self, path: str, value: Any) -> Any:
        if not _is_int(value) or (self.low is not None and value < self.low):
            raise bad_value(path, self.expected, value)
        return value


class Float(Check):
    """A number, returned as a float, within the given bounds."""

    def __init__(self, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False) -> None:
        self.low, self.high, self.low_open, self.high_open = low, high, low_open, high_open
        if low is not None and high is not None:
            self.expected = (f"a number in {'(' if low_open else '['}{low}, {high}"
                             f"{')' if high_open else ']'}")
        elif low is not None:
            self.expected = f"a number {'>' if low_open else '>='} {low}"
        elif high is not None:
            self.expected = f"a number {'<' if high_open else '<='} {high}"
        else:
            self.expected = "a number"

    def __call__(self, path: str, value: Any) -> Any:
        if not _is_number(value):
            raise bad_value(path, self.expected, value)
        v = float(value)
        if math.isnan(v):
            raise bad_value(path, self.expected, value)
        if self.low is not None and (v < self.low or (self.low_open and v == self.low)):
            raise bad_value(path, self.expected, value)
        if self.high is not None and (v > self.high or (self.high_open and v == self.high)):
            raise bad_value(path, self.expected, value)
        return v


class Bool(Check):
    """``true`` or ``false``."""

    expected = "a bool (true or false)"

    def __call__(self, path: str, value: Any) -> Any:
        if not isinstance(value, bool):
            raise bad_value(path, self.expected, value)
        return value


class Str(Check):
    """A string (non-empty)."""

    expected = "a non-empty string"

    def __call__(self, path: str, value: Any) -> Any:
        if not isinstance(value, str) or not value:
            raise bad_value(path, self.expected, value)
        return value


class Choice(Check):
    """One of a fixed set of strings; a near miss gets a suggestion."""

    def __init__(self, choices: Iterable[str]) -> None:
        self.choices = list(choices)
        self.expected = "one of " + ", ".join(repr(c) for c in self.choices)

    def __call__(self, path: str, value: Any) -> Any:
        if value in self.choices:
            return value
        raise ConfigError(path, f"expected {self.expected}, got {value!r}"
                                f"{suggestion(value, self.choices)}")


class ListOf(Check):
    """A list whose items pass ``item``; ``min_len``/``length`` bound its length."""

    def __init__(self, item: Check, min_len: int = 0, length: int | None = None,
                 as_tuple: bool = False, expected: str | None = None) -> None:
        self.item, self.min_len, self.length, self.as_tuple = item, min_len, length, as_tuple
        size = (f" of {length}" if length is not None
                else f" of at least {min_len}" if min_len else "")
        self.expected = expected or f"a list{size}, each {item.expected}"

    def __call__(self, path: str, value: Any) -> Any:
        if not isinstance(value, (list, tuple)) or len(value) < self.min_len or (
                self.length is not None and len(value) != self.length):
            raise bad_value(path, self.expected, value)
        items = [self.item(f"{path}[{i}]", v) for i, v in enumerate(value)]
        return tuple(items) if self.as_tuple else items


class Mapping_(Check):
    """A mapping with string keys, passed on as a plain dict."""

    expected = "a mapping (key: value entries)"

    def __call__(self, path: str, value: Any) -> Any:
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise bad_value(path, self.expected, value)
        return dict(value)


class Nullable(Check):
    """``inner`` or null (None)."""

    def __init__(self, inner: Check) -> None:
        self.inner = inner
        self.expected = f"{inner.expected} or null"

    def __call__(self, path: str, value: Any) -> Any:
        return None if value is None else self.inner(path, value)


_REQUIRED = object()


@dataclass(frozen=True)
class Field:
    """One key of a section: its check, and its default (none: the key is required)."""

    check: Check | Callable[[str, Any], Any]
    default: Any = _REQUIRED
    doc: str = ""

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED


def check_fields(path: str, data: Any, fields: Mapping[str, Field],
                 allow: Iterable[str] = ()) -> dict[str, Any]:
    """Check the mapping ``data`` against ``fields``: every key known, every required
    key present, every value passing its check; returns a new dict with the defaults
    filled in. Keys in ``allow`` pass through unchecked (the caller checks them)."""
    if not isinstance(data, Mapping):
        raise bad_value(path, "a mapping (key: value entries)", data)
    allow = set(allow)
    known = set(fields) | allow
    for key in data:
        if key not in known:
            raise unknown_key(path, key, known)
    out: dict[str, Any] = {}
    for key, field in fields.items():
        if key in data:
            out[key] = field.check(join(path, key), data[key])
        elif field.required:
            expected = getattr(field.check, "expected", "a value")
            raise ConfigError(join(path, key), f"missing required key (expected {expected})")
        else:
            out[key] = field.default
    for key in allow:
        if key in data:
            out[key] = data[key]
    return out
