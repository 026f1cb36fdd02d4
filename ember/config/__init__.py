"""``ember.config``: config files for ``ember train`` and ``ember tune`` — reading YAML
and TOML, checking every key (errors name the key path and the close matches), applying
``key.path=value`` overrides, and building the model, data, optimizer, scheduler and
Trainer they describe. The schema is documented in docs/cli.md.

>>> cfg = ember.config.load_config("examples/digits_mlp.yaml",
...                                overrides=["trainer.max_epochs=3"])
>>> run, final = ember.config.train(cfg)
>>> final["val_accuracy"]
"""
from __future__ import annotations

import os
from typing import Any, Iterable, Mapping

from .builders import Run, build, build_data, build_model, import_object, train
from .errors import ConfigError
from .loading import apply_overrides, parse_override, read_config_file
from .schema import validate_config

__all__ = ["ConfigError", "load_config", "validate_config", "read_config_file",
           "apply_overrides", "parse_override", "build", "build_model", "build_data",
           "train", "import_object", "Run"]


def load_config(source: str | os.PathLike | Mapping[str, Any],
                overrides: Iterable[str] | Mapping[str, Any] = ()) -> dict[str, Any]:
    """Read (a path) or take (a mapping) a config, apply ``overrides``
    (``"trainer.max_epochs=3"`` strings or a ``{"key.path": value}`` mapping) and check
    it; returns the normalised config (see :func:`validate_config`)."""
    raw = dict(source) if isinstance(source, Mapping) else read_config_file(source)
    return validate_config(apply_overrides(raw, overrides))
