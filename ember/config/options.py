"""Options passed on to a class (an optimizer, a scheduler, a pruner), checked against
its signature: unknown names get the close matches, required ones must be there, and
each value must fit the parameter's annotation."""
from __future__ import annotations

import inspect
from typing import Any, Iterable, Mapping

from .errors import ConfigError
from .fields import bad_value, join, unknown_key

__all__ = ["check_options"]

# Parameters whose values are Python objects (functions, other schedulers) cannot come
# from a config file.
_OBJECT_WORDS = ("Callable", "Optimizer", "LRScheduler", "Sampler", "Pruner", "Generator")


def _split(text: str, sep: str) -> list[str]:
    """``text`` split at the ``sep`` characters outside brackets."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == sep and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts]


def _kinds(annotation: str) -> set[str]:
    """The outer type names of an annotation's text: ``"float | list[float]"`` ->
    ``{"float", "list"}``, ``"Optional[int]"`` -> ``{"int", "None"}``."""
    kinds: set[str] = set()
    for part in _split(annotation, "|"):
        base, _, inner = part.partition("[")
        base = base.split(".")[-1]
        if base in ("Optional", "Union"):
            kinds |= _kinds(inner[:-1].replace(",", "|"))
            kinds |= {"None"} if base == "Optional" else set()
        else:
            kinds.add(base)
    return kinds


_ACCEPTED = ((type(None), {"None", "NoneType"}), (bool, {"bool"}), (int, {"int", "float"}),
             (float, {"float"}), (str, {"str", "Literal"}),
             ((list, tuple), {"list", "tuple", "Iterable", "Sequence"}),
             (Mapping, {"dict", "Mapping"}))


_SEQUENCES = ("list", "tuple", "Iterable", "Sequence")


def _items_fit(annotation: str, value: list | tuple) -> bool:
    """Whether the items of ``value`` fit the item types the annotation names
    (``tuple[float, float]``, ``Iterable[int]``); True where it names none."""
    inners = []
    for part in _split(annotation, "|"):
        base, _, inner = part.partition("[")
        if base.split(".")[-1] in _SEQUENCES and inner.endswith("]"):
            inners.append([t for t in _split(inner[:-1], ",") if t != "..."])
    if not inners:
        return True
    return any(items and all(_accepts(items[min(i, len(items) - 1)], v)
                             for i, v in enumerate(value)) for items in inners)


def _accepts(annotation: str, value: Any) -> bool:
    """Whether ``value`` (as a config format gives it) fits the annotation text."""
    kinds = _kinds(annotation)
    if "Any" in kinds:
        return True
    for types, names in _ACCEPTED:
        if isinstance(value, types):
            if not kinds & names:
                return False
            return not isinstance(value, (list, tuple)) or _items_fit(annotation, value)
    return False


def _annotation_text(param: inspect.Parameter) -> str:
    ann = param.annotation
    if ann is inspect.Parameter.empty:
        if param.default is inspect.Parameter.empty or param.default is None:
            return "Any"
        return type(param.default).__name__
    return ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann))


def check_options(path: str, options: Mapping[str, Any], target,
                  skip: Iterable[str] = ()) -> dict[str, Any]:
    """Check ``options`` for ``target(**options)`` (with the ``skip`` parameters given
    by ember, e.g. ``params``, ``optimizer``); returns them with lists turned into
    tuples where the parameter is a tuple (``betas``)."""
    skip = set(skip)
    params = {name: p for name, p in inspect.signature(target).parameters.items()
              if name not in skip and name != "self"
              and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    owner = getattr(target, "__name__", str(target))
    for key in options:
        if key not in params:
            raise unknown_key(path, key, params)
    out = {}
    for name, param in params.items():
        text = _annotation_text(param)
        takes_object = any(w in text for w in _OBJECT_WORDS)
        if name not in options:
            if param.default is inspect.Parameter.empty:
                if takes_object:
                    raise ConfigError(path, f"{owner} needs {name}= (a Python object), "
                                            "which a config file cannot give")
                raise ConfigError(join(path, name), f"missing required key ({owner} needs "
                                                    f"{name}: {text})")
            continue
        value = options[name]
        if not _accepts(text, value):
            raise bad_value(join(path, name), f"{text} (the {name} of {owner})", value)
        if isinstance(value, list) and "tuple" in text and "list" not in text:
            value = tuple(value)
        out[name] = value
    return out
