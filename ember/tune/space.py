"""Search spaces written as data — ``{"lr": {"type": "float", "low": 1e-4, "high":
1e-1, "log": true}}`` — for config files and Python alike; each parameter is suggested
through Optuna's ``trial.suggest_float`` / ``suggest_int`` / ``suggest_categorical``."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from .errors import TuneError

__all__ = ["SearchSpace", "FloatParam", "IntParam", "CategoricalParam", "suggest"]

_TYPES = ("float", "int", "categorical")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value)


@dataclass(frozen=True)
class FloatParam:
    """A float in ``[low, high]``, sampled on a log scale when ``log``, on a grid of
    ``step`` when given."""

    low: float
    high: float
    log: bool = False
    step: float | None = None

    def suggest(self, trial, name: str) -> float:
        return trial.suggest_float(name, self.low, self.high, log=self.log, step=self.step)

    def bounds(self) -> list[float]:
        return [self.low, self.high]

    def to_dict(self) -> dict[str, Any]:
        return {"type": "float", "low": self.low, "high": self.high, "log": self.log,
                "step": self.step}


@dataclass(frozen=True)
class IntParam:
    """An int in ``[low, high]``, every ``step``-th, on a log scale when ``log``."""

    low: int
    high: int
    log: bool = False
    step: int = 1

    def suggest(self, trial, name: str) -> int:
        return trial.suggest_int(name, self.low, self.high, log=self.log, step=self.step)

    def bounds(self) -> list[int]:
        return [self.low, self.high]

    def to_dict(self) -> dict[str, Any]:
        return {"type": "int", "low": self.low, "high": self.high, "log": self.log,
                "step": self.step}


@dataclass(frozen=True)
class CategoricalParam:
    """One of ``choices`` (None, bools, numbers or strings, as Optuna stores them)."""

    choices: tuple

    def suggest(self, trial, name: str) -> Any:
        return trial.suggest_categorical(name, list(self.choices))

    def bounds(self) -> list[Any]:
        return list(self.choices)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "categorical", "choices": list(self.choices)}


def _where(path: str, name: str, key: str | None = None) -> str:
    return f"{path}[{name!r}]" + (f".{key}" if key else "")


def _parse(path: str, name: str, spec: Any):
    if isinstance(spec, (FloatParam, IntParam, CategoricalParam)):
        return spec
    if isinstance(spec, (list, tuple)):  # shorthand: a list of choices
        spec = {"type": "categorical", "choices": list(spec)}
    if not isinstance(spec, Mapping):
        raise TuneError(f"{_where(path, name)}: expected a mapping like {{type: float, low: "
                        f"1e-4, high: 0.1}} or a list of choices, got {spec!r}")
    kind = spec.get("type")
    if kind not in _TYPES:
        raise TuneError(f"{_where(path, name, 'type')}: expected one of 'float', 'int', "
                        f"'categorical', got {kind!r}")
    allowed = {"float": ("type", "low", "high", "log", "step"),
               "int": ("type", "low", "high", "log", "step"),
               "categorical": ("type", "choices")}[kind]
    for key in spec:
        if key not in allowed:
            raise TuneError(f"{_where(path, name, key)}: unknown key for a {kind} parameter "
                            f"(known keys: {', '.join(allowed)})")
    if kind == "categorical":
        choices = spec.get("choices")
        if not isinstance(choices, (list, tuple)) or not choices or not all(
                c is None or isinstance(c, (bool, int, float, str)) for c in choices):
            raise TuneError(f"{_where(path, name, 'choices')}: expected a non-empty list of "
                            f"null, bool, number or string values, got {choices!r}")
        return CategoricalParam(tuple(choices))
    check = (lambda v: isinstance(v, int) and not isinstance(v, bool)) if kind == "int" \
        else _number
    noun = "an int" if kind == "int" else "a number"
    for key in ("low", "high"):
        if key not in spec:
            raise TuneError(f"{_where(path, name, key)}: missing required key (expected "
                            f"{noun})")
        if not check(spec[key]):
            raise TuneError(f"{_where(path, name, key)}: expected {noun}, got {spec[key]!r}")
    low, high = spec["low"], spec["high"]
    if low > high:
        raise TuneError(f"{_where(path, name, 'high')}: expected a value >= low ({low}), "
                        f"got {high!r}")
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise TuneError(f"{_where(path, name, 'log')}: expected a bool, got {log!r}")
    if log and low <= 0:
        raise TuneError(f"{_where(path, name, 'low')}: a log-scale range needs low > 0, "
                        f"got {low!r}")
    step = spec.get("step")
    if step is not None and (not check(step) or step <= 0):
        raise TuneError(f"{_where(path, name, 'step')}: expected {noun} > 0, got {step!r}")
    if kind == "int":
        if log and step not in (None, 1):
            raise TuneError(f"{_where(path, name, 'step')}: Optuna cannot combine log=true "
                            f"with step {step} for an int; drop one")
        return IntParam(low, high, log, 1 if step is None else step)
    if log and step is not None:
        raise TuneError(f"{_where(path, name, 'step')}: Optuna cannot combine log=true with "
                        "a step for a float; drop one")
    return FloatParam(float(low), float(high), log, None if step is None else float(step))


class SearchSpace:
    """Named hyperparameters and their ranges, described as data.

    Each entry maps a name to ``{"type": "float", "low": ..., "high": ..., "log":
    false, "step": null}``, ``{"type": "int", "low": ..., "high": ..., "step": 1,
    "log": false}``, ``{"type": "categorical", "choices": [...]}``, or a plain list of
    choices. In a config file the names are dotted key paths of the config
    (``optimizer.lr``, ``model.sizes.1``).

    Args:
        spec: the mapping above.
        path: where the spec came from, for error messages (``"tune.space"``).

    >>> space = ember.tune.SearchSpace({"lr": {"type": "float", "low": 1e-4,
    ...                                        "high": 1e-1, "log": True},
    ...                                 "act": ["relu", "gelu"]})
    >>> def objective(trial):
    ...     params = space.suggest(trial)           # {"lr": ..., "act": ...}
    ...     width = trial.suggest_int("width", 16, 128)   # plain Optuna works beside it
    ...     return train(params["lr"], params["act"], width)
    """

    def __init__(self, spec: Mapping[str, Any], path: str = "space") -> None:
        if not isinstance(spec, Mapping) or not spec:
            raise TuneError(f"{path}: expected a non-empty mapping of parameter names to "
                            f"ranges, got {spec!r}")
        for name in spec:
            if not isinstance(name, str) or not name:
                raise TuneError(f"{path}: parameter names must be non-empty strings, got "
                                f"{name!r}")
        self.params = {name: _parse(path, name, s) for name, s in spec.items()}

    def suggest(self, trial) -> dict[str, Any]:
        """Ask ``trial`` (an ``optuna.Trial``) for a value of every parameter; returns
        ``{name: value}``."""
        return {name: p.suggest(trial, name) for name, p in self.params.items()}

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """The spec in its full form (every key spelled out)."""
        return {name: p.to_dict() for name, p in self.params.items()}

    def __len__(self) -> int:
        return len(self.params)

    def __iter__(self):
        return iter(self.params)

    def __repr__(self) -> str:
        return f"SearchSpace({self.to_dict()})"


def suggest(trial, spec: Mapping[str, Any] | SearchSpace) -> dict[str, Any]:
    """``SearchSpace(spec).suggest(trial)``: the values ``trial`` picks for ``spec``."""
    space = spec if isinstance(spec, SearchSpace) else SearchSpace(spec)
    return space.suggest(trial)
