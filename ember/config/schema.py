"""The config schema: the sections of a config file, their keys, and
:func:`validate_config`, which checks a raw mapping and fills in the defaults."""
from __future__ import annotations

import re
from typing import Any, Mapping

from .. import optim
from ..optim import lr_scheduler
from .errors import ConfigError
from .fields import (Anything, Bool, Check, Choice, Field, Float, Int, ListOf, Mapping_,
                     Nullable, Str, bad_value, check_fields, join, suggestion)
from .loading import apply_overrides
from .models import ACTIVATIONS
from .options import check_options

__all__ = ["validate_config", "OPTIMIZERS", "SCHEDULERS", "LOSSES", "METRICS",
           "SAMPLERS", "PRUNERS", "MODEL_FIELDS", "DATA_FIELDS", "TRAINER_FIELDS",
           "TUNE_FIELDS"]


class Section(Check):
    """A nested mapping with its own fields."""

    expected = "a mapping (key: value entries)"

    def __init__(self, fields: Mapping[str, Field]) -> None:
        self.fields = fields

    def __call__(self, path: str, value: Any) -> Any:
        return check_fields(path, value, self.fields)


class ImportTarget(Check):
    """``"package.module:function"``."""

    expected = "'package.module:function'"
    _PATTERN = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")

    def __call__(self, path: str, value: Any) -> Any:
        if not isinstance(value, str) or not self._PATTERN.match(value):
            raise bad_value(path, self.expected, value)
        return value


class MetricName(Check):
    """A metric the Trainer can compute: accuracy, top<k>_accuracy, precision, recall,
    f1, mse, mae, perplexity."""

    expected = "one of " + ", ".join(repr(m) for m in (
        "accuracy", "top<k>_accuracy", "precision", "recall", "f1", "mse", "mae",
        "perplexity"))

    def __call__(self, path: str, value: Any) -> Any:
        if isinstance(value, str) and (value in METRICS or re.fullmatch(
                r"top[1-9]\d*_accuracy", value)):
            return value
        raise ConfigError(path, f"expected {self.expected}, got {value!r}"
                                f"{suggestion(value, METRICS)}")


class NamedSpec(Check):
    """A name from ``choices`` or a mapping ``{name: ..., option: value, ...}``
    (the options are checked when the object is built); returns the mapping."""

    def __init__(self, choices) -> None:
        self.choice = Choice(choices)
        self.expected = f"{self.choice.expected}, or a mapping with name: and options"

    def __call__(self, path: str, value: Any) -> Any:
        if isinstance(value, str):
            return {"name": self.choice(join(path, "name"), value)}
        if not isinstance(value, Mapping):
            raise bad_value(path, self.expected, value)
        if "name" not in value:
            raise ConfigError(join(path, "name"), f"missing required key (expected "
                                                  f"{self.choice.expected})")
        return {**value, "name": self.choice(join(path, "name"), value["name"])}


OPTIMIZERS = {name.lower(): getattr(optim, name) for name in optim.__all__
              if name not in ("Optimizer", "OptimizerError", "lr_scheduler")}
# Schedulers that take Python objects (functions, other schedulers) are left out.
SCHEDULERS = {name: getattr(lr_scheduler, name) for name in lr_scheduler.__all__
              if name not in ("LRScheduler", "LambdaLR", "MultiplicativeLR", "SequentialLR",
                              "ChainedScheduler")}
LOSSES = ("cross_entropy", "token_cross_entropy", "nll_loss", "mse_loss", "l1_loss",
          "smooth_l1_loss", "huber_loss", "binary_cross_entropy_with_logits")
METRICS = ("accuracy", "precision", "recall", "f1", "mse", "mae", "perplexity")
SAMPLERS = ("tpe", "random", "cmaes", "qmc", "gp")
PRUNERS = ("median", "percentile", "successive_halving", "hyperband", "threshold", "none")

_ACTIVATION = Field(Choice(ACTIVATIONS), "relu")
_DROPOUT = Field(Float(0.0, 1.0, high_open=True), 0.0)
_IMPORT_FIELDS = {"import": Field(ImportTarget()), "options": Field(Mapping_(), {})}

MODEL_FIELDS: dict[str, dict[str, Field]] = {
    "mlp": {"sizes": Field(ListOf(Int(1), min_len=2,
                                  expected="a list of at least 2 positive ints")),
            "activation": _ACTIVATION, "dropout": _DROPOUT, "flatten": Field(Bool(), True)},
    "cnn": {"in_channels": Field(Int(1), 1), "image_size": Field(Int(1), 28),
            "num_classes": Field(Int(1), 10),
            "channels": Field(ListOf(Int(1), min_len=1, expected="a list of positive ints"),
                              [32, 64]),
            "hidden": Field(Int(1), 128), "kernel_size": Field(Int(1), 3),
            "padding": Field(Int(0), 0), "activation": _ACTIVATION, "dropout": _DROPOUT},
    "gpt": {"vocab_size": Field(Int(1), 256), "context": Field(Int(1), 64),
            "d_model": Field(Int(1), 128), "n_heads": Field(Int(1), 4),
            "n_layers": Field(Int(1), 2), "mlp_ratio": Field(Int(1), 4)},
}

_LOADER_FIELDS = {
    "batch_size": Field(Int(1), 64),
    "val_batch_size": Field(Nullable(Int(1)), None),
    "num_workers": Field(Int(0), 0),
    "shuffle": Field(Bool(), True),
    "drop_last": Field(Bool(), False),
    "val_split": Field(Nullable(Float(0.0, 1.0, low_open=True, high_open=True)), None),
}
DATA_FIELDS: dict[str, dict[str, Field]] = {
    "digits": {**_LOADER_FIELDS, "test_fraction": Field(Float(0.0, 1.0), 0.2)},
    "text": {**_LOADER_FIELDS, "path": Field(Str()), "context": Field(Int(1), 64),
             "stride": Field(Nullable(Int(1)), None),
             "val_split": Field(Float(0.0, 1.0, low_open=True, high_open=True), 0.1)},
}

_POSITIVE = Nullable(Int(1))
TRAINER_FIELDS: dict[str, Field] = {
    "max_epochs": Field(_POSITIVE, None), "max_steps": Field(_POSITIVE, None),
    "eval_every_n_steps": Field(_POSITIVE, None), "eval_every_n_epochs": Field(_POSITIVE, 1),
    "grad_accumulation_steps": Field(Int(1), 1),
    "grad_clip_norm": Field(Nullable(Float(0.0, low_open=True)), None),
    "grad_clip_value": Field(Nullable(Float(0.0, low_open=True)), None),
    "log_every_n_steps": Field(Int(1), 50),
    "checkpoint_dir": Field(Nullable(Str()), None),
    "resume_from": Field(Nullable(Str()), None),
    "compile": Field(Bool(), False),
    "seed": Field(Nullable(Int(0)), 0),
    "progress_bar": Field(Bool(), True),
    "autocast_dtype": Field(Nullable(Choice(["bfloat16", "float16"])), None),
    "loss": Field(Choice(LOSSES), "cross_entropy"),
    "metrics": Field(ListOf(MetricName(), expected="a list of metric names ("
                            + MetricName.expected + ")"), []),
    "early_stopping": Field(Nullable(Section({
        "monitor": Field(Str(), "val_loss"), "mode": Field(Choice(["min", "max"]), "min"),
        "patience": Field(Int(0), 3), "min_delta": Field(Float(0.0), 0.0)})), None),
    "checkpoint": Field(Nullable(Section({
        "every_n_steps": Field(_POSITIVE, None), "every_n_epochs": Field(_POSITIVE, None),
        "keep_last_k": Field(_POSITIVE, None), "monitor": Field(Nullable(Str()), None),
        "mode": Field(Choice(["min", "max"]), "min"),
        "save_best": Field(Bool(), False)})), None),
    "loggers": Field(ListOf(Choice(["csv", "jsonl", "tensorboard"]),
                            expected="a list of 'csv', 'jsonl', 'tensorboard'"), []),
    "log_dir": Field(Nullable(Str()), None),
}

TUNE_FIELDS: dict[str, Field] = {
    "n_trials": Field(Int(1), 10),
    "direction": Field(Choice(["minimize", "maximize"]), "minimize"),
    "metric": Field(Str(), "val_loss"),
    "space": Field(Mapping_()),
    "sampler": Field(NamedSpec(SAMPLERS), {"name": "tpe"}),
    "pruner": Field(Nullable(NamedSpec(PRUNERS)), None),
    "seed": Field(Nullable(Int(0)), None),
    "timeout": Field(Nullable(Float(0.0, low_open=True)), None),
    "storage": Field(Nullable(Str()), None),
    "study_name": Field(Nullable(Str()), None),
}

TOP_FIELDS: dict[str, Field] = {
    "model": Field(Anything()), "data": Field(Anything()), "optimizer": Field(Anything()),
    "scheduler": Field(Anything(), None), "trainer": Field(Anything(), {}),
    "tune": Field(Anything(), None),
}


def _by_name(path: str, section: Any, fields: Mapping[str, Mapping[str, Field]],
             what: str) -> dict[str, Any]:
    """A section chosen by ``name:`` among ``fields``, or ``import:`` a user builder."""
    if not isinstance(section, Mapping):
        raise bad_value(path, "a mapping (key: value entries)", section)
    if "import" in section:
        if "name" in section:
            raise ConfigError(path, "give name: (a built-in " + what + ") or import: (your "
                                    "own builder), not both")
        extra = {k: f for k, f in _LOADER_FIELDS.items()} if what == "dataset" else {}
        return check_fields(path, section, {**_IMPORT_FIELDS, **extra})
    if "name" not in section:
        raise ConfigError(join(path, "name"), f"missing required key (expected one of "
                                              f"{', '.join(repr(n) for n in fields)}, or "
                                              "give import: 'package.module:function')")
    name = Choice(fields)(join(path, "name"), section["name"])
    rest = {k: v for k, v in section.items() if k != "name"}
    return {"name": name, **check_fields(path, rest, fields[name])}


def _optimizer(section: Any) -> dict[str, Any]:
    path = "optimizer"
    if not isinstance(section, Mapping):
        raise bad_value(path, "a mapping (key: value entries)", section)
    if "name" not in section:
        raise ConfigError("optimizer.name", f"missing required key (expected one of "
                                            f"{', '.join(repr(n) for n in OPTIMIZERS)})")
    name = section["name"]
    name = Choice(OPTIMIZERS)(join(path, "name"), name.lower() if isinstance(name, str)
                              else name)
    options = {k: v for k, v in section.items() if k != "name"}
    return {"name": name, **check_options(path, options, OPTIMIZERS[name], skip=("params",))}


def _normalise_scheduler_name(name: Any) -> Any:
    if not isinstance(name, str):
        return name
    key = name.replace("_", "").lower()
    return next((n for n in SCHEDULERS if n.lower() == key), name)


def _scheduler(section: Any) -> dict[str, Any] | None:
    path = "scheduler"
    if section is None:
        return None
    if not isinstance(section, Mapping):
        raise bad_value(path, "a mapping (key: value entries) or null", section)
    if "name" not in section:
        raise ConfigError("scheduler.name", f"missing required key (expected one of "
                                            f"{', '.join(repr(n) for n in SCHEDULERS)})")
    name = Choice(SCHEDULERS)(join(path, "name"), _normalise_scheduler_name(section["name"]))
    own = {"interval": Field(Choice(["step", "epoch"]), "epoch"),
           "monitor": Field(Str(), "val_loss")}
    options = {k: v for k, v in section.items() if k not in own and k != "name"}
    return {"name": name, **check_fields(path, {k: section[k] for k in own if k in section},
                                         own),
            **check_options(path, options, SCHEDULERS[name], skip=("optimizer",))}


def _trainer(section: Any) -> dict[str, Any]:
    out = check_fields("trainer", section, TRAINER_FIELDS)
    if out["loggers"] and out["log_dir"] is None:
        raise ConfigError("trainer.log_dir", f"missing required key: the loggers "
                                             f"{out['loggers']} need a folder to write to")
    if out["resume_from"] == "latest" and out["checkpoint_dir"] is None:
        raise ConfigError("trainer.checkpoint_dir", "missing required key: resume_from "
                                                    "'latest' looks for checkpoints there")
    return out


def _tune(section: Any, config: Mapping[str, Any]) -> dict[str, Any] | None:
    if section is None:
        return None
    from ..tune.errors import TuneError
    from ..tune.space import SearchSpace
    out = check_fields("tune", section, TUNE_FIELDS)
    try:
        space = SearchSpace(out["space"], path="tune.space")
    except TuneError as exc:
        raise ConfigError("", str(exc)) from None
    out["space"] = space.to_dict()
    # Each searched key must be a key the config accepts, with values it accepts.
    base = {k: v for k, v in config.items() if k != "tune"}
    for name, param in space.params.items():
        for value in param.bounds():
            try:
                validate_config(apply_overrides(base, {name: value}))
            except ConfigError as exc:
                raise ConfigError(f'tune.space["{name}"]', f"searching {name} = {value!r} "
                                                           f"gives a bad config: {exc}") \
                    from None
    return out


def validate_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Check a raw config mapping (as read from a file) and return it normalised: every
    section present, every default filled in, names in their canonical spelling.

    Raises :class:`ConfigError` naming the key path of the first problem: an unknown
    key (with the close matches), a missing required key, a value of the wrong type or
    out of range.

    >>> cfg = validate_config({"model": {"name": "mlp", "sizes": [64, 10]},
    ...                        "data": {"name": "digits"}, "optimizer": {"name": "adam"}})
    >>> cfg["trainer"]["max_epochs"], cfg["data"]["batch_size"]
    (None, 64)
    """
    top = check_fields("", config, TOP_FIELDS)
    return {
        "model": _by_name("model", top["model"], MODEL_FIELDS, "model"),
        "data": _by_name("data", top["data"], DATA_FIELDS, "dataset"),
        "optimizer": _optimizer(top["optimizer"]),
        "scheduler": _scheduler(top["scheduler"]),
        "trainer": _trainer(top["trainer"] if top["trainer"] is not None else {}),
        "tune": _tune(top["tune"], config),
    }
