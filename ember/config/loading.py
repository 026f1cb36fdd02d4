"""Reading config files (YAML through PyYAML, TOML through the standard library) and
applying ``key.path=value`` overrides."""
from __future__ import annotations

import copy
import json
import os
import re
from typing import Any, Iterable, Mapping

from .errors import ConfigError

__all__ = ["read_config_file", "parse_override", "apply_overrides", "set_path",
           "parse_scalar", "check_depth"]

# YAML 1.1 (PyYAML) reads ``1e-3`` as a string: its float pattern wants a dot. Config
# files are full of learning rates written that way, so they are read as numbers here.
_FLOAT = re.compile(r"^[-+]?(?:\d[\d_]*)?(?:\.\d*)?(?:[eE][-+]?\d+)?$")


def _yaml_loader():
    try:
        import yaml
    except ImportError:
        raise ConfigError("", "reading a YAML config needs PyYAML: pip install "
                              "'ember[yaml]' (or pip install pyyaml), or write the config "
                              "as TOML") from None

    class Loader(yaml.SafeLoader):
        """SafeLoader that also reads ``1e-3`` as a float."""

    def scientific(loader, node):
        text = loader.construct_scalar(node)
        try:
            return float(text.replace("_", ""))
        except ValueError:
            return text

    Loader.add_implicit_resolver("tag:yaml.org,2002:float_e", re.compile(
        r"^[-+]?(?:\d[\d_]*)(?:\.\d*)?[eE][-+]?\d+$"), list("-+0123456789"))
    Loader.add_constructor("tag:yaml.org,2002:float_e", scientific)
    return yaml, Loader


def read_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """The raw mapping in a ``.yaml``/``.yml``, ``.toml`` or ``.json`` file (not yet
    checked). A file that cannot be read or parsed raises :class:`ConfigError` naming
    the file (and the line, where the parser gives one)."""
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".yaml", ".yml", ".toml", ".json"):
        raise ConfigError("", f"{path}: a config file must end in .yaml, .yml, .toml or "
                              f".json, got {ext or 'no extension'!r}")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise ConfigError("", f"{path}: cannot read the config file: {exc.strerror}") \
            from None
    if ext == ".toml":
        import tomllib
        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as exc:
            raise ConfigError("", f"{path}: not valid TOML: {exc}") from None
    elif ext == ".json":
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # (RecursionError: nested too deeply)
            raise ConfigError("", f"{path}: not valid JSON: {exc}") from None
    else:
        yaml, loader = _yaml_loader()
        try:
            data = yaml.load(raw.decode("utf-8"), Loader=loader)
        except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as exc:
            raise ConfigError("", f"{path}: not valid YAML: {exc}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("", f"{path}: the config must be a mapping of sections (model:, "
                              f"data:, ...), got a {type(data).__name__}")
    return data


def parse_scalar(text: str) -> Any:
    """An override's value: JSON (``3``, ``1e-3``, ``true``, ``null``, ``[64, 10]``,
    ``"text"``), ``True``/``False``/``None`` in any case, a number like ``.5``, or else
    the text itself as a string."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null", "~"):
        return None
    if _FLOAT.match(text.strip()) and any(c.isdigit() for c in text):
        try:
            return float(text.replace("_", ""))
        except ValueError:
            pass
    return text


def parse_override(text: str) -> tuple[str, Any]:
    """``"trainer.max_epochs=3"`` -> ``("trainer.max_epochs", 3)``."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError("", f"override {text!r}: expected KEY.PATH=VALUE, e.g. "
                              "trainer.max_epochs=3")
    return key, parse_scalar(value)


def set_path(config: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``config[a][b][c] = value`` for ``dotted = "a.b.c"``, making the mappings on
    the way; a number indexes into a list (``model.sizes.1``)."""
    parts = dotted.split(".")
    node: Any = config
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        where = ".".join(parts[:depth]) or "the config"
        if isinstance(node, list):
            if not part.lstrip("-").isdigit() or not -len(node) <= int(part) < len(node):
                raise ConfigError(dotted, f"{where} is a list of {len(node)} items; "
                                          f"{part!r} is not an index into it")
            index = int(part)
            if last:
                node[index] = value
            else:
                node = node[index]
        elif isinstance(node, dict):
            if last:
                node[part] = value
            else:
                if node.get(part) is None:
                    node[part] = {}
                node = node[part]
        else:
            raise ConfigError(dotted, f"{where} is {node!r}, not a mapping or list, so "
                                      f"{part!r} cannot be set inside it")


_MAX_DEPTH = 64  # far more than any config needs; deeper would overflow Python's stack


def check_depth(config: Any) -> None:
    """Raise :class:`ConfigError` if ``config`` nests mappings and lists more than
    ``_MAX_DEPTH`` levels deep (checked without recursion)."""
    stack = [(config, 0, "")]
    while stack:
        node, depth, path = stack.pop()
        if depth > _MAX_DEPTH:
            raise ConfigError(path if len(path) < 60 else path[:57] + "...",
                              f"the config is nested more than {_MAX_DEPTH} levels deep")
        if isinstance(node, Mapping):
            stack.extend((v, depth + 1, f"{path}.{k}" if path else str(k))
                         for k, v in node.items())
        elif isinstance(node, (list, tuple)):
            stack.extend((v, depth + 1, f"{path}[{i}]") for i, v in enumerate(node))


def apply_overrides(config: Mapping[str, Any],
                    overrides: Iterable[str] | Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` with each override applied: ``"key.path=value"`` strings
    (values parsed by :func:`parse_scalar`) or a mapping ``{"key.path": value}``."""
    check_depth(config)
    out = copy.deepcopy(dict(config))
    items = overrides.items() if isinstance(overrides, Mapping) else \
        (parse_override(o) for o in overrides)
    for key, value in items:
        set_path(out, key, value)
    return out
