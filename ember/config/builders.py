"""Building a run from a checked config: the model, the data loaders, the optimizer,
the scheduler and the Trainer; :func:`train` runs it."""
from __future__ import annotations

import importlib
import inspect
import random
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np

from .. import nn
from ..data import DataLoader, Dataset, random_split
from ..data.datasets import Digits
from ..nn import functional as F
from ..ops.creation import from_numpy
from ..ops.random import Generator, manual_seed
from ..tensor import Tensor
from ..train import (CSVLogger, EarlyStopping, JSONLLogger, ModelCheckpoint, TensorBoardLogger,
                     Trainer, metrics as M)
from .errors import ConfigError
from .models import cnn, gpt, mlp
from .schema import OPTIMIZERS, SCHEDULERS

__all__ = ["Run", "build", "build_model", "build_data", "build_optimizer",
           "build_scheduler", "train", "import_object", "ByteWindows"]

_MODELS = {"mlp": mlp, "cnn": cnn, "gpt": gpt}


@dataclass
class Run:
    """Everything a config builds, ready to :meth:`~ember.train.Trainer.fit`."""

    config: dict[str, Any]
    model: nn.Module
    optimizer: Any
    scheduler: Any
    train_loader: DataLoader
    val_loader: DataLoader | None
    trainer: Trainer


def import_object(path: str, target: str):
    """The object named by ``target`` (``"package.module:function"``); ``path`` is the
    config key it came from, for errors."""
    module_name, _, attr = target.partition(":")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(path, f"cannot import module {module_name!r} (from {target!r}): "
                                f"{exc}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(path, f"module {module_name!r} has no attribute {attr!r} (from "
                                    f"{target!r})")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ConfigError(path, f"{target!r} is a {type(obj).__name__}, not a function")
    return obj


def _call_builder(path: str, target: str, options: Mapping[str, Any]):
    """``target(**options)`` for the section at ``path``, after checking that the
    function takes those options (an error naming ``path.options`` if not)."""
    builder = import_object(f"{path}.import", target)
    try:
        inspect.signature(builder).bind(**options)
    except TypeError as exc:
        raise ConfigError(f"{path}.options", f"{target!r} cannot take these options: "
                                             f"{exc}") from None
    except ValueError:  # no signature to check (a builtin): let the call decide
        pass
    return builder(**options)


def build_model(config: Mapping[str, Any]) -> nn.Module:
    """The model of a checked ``model`` section."""
    section = dict(config)
    if "import" in section:
        model = _call_builder("model", section["import"], section["options"])
        if not isinstance(model, nn.Module):
            raise ConfigError("model.import", f"{section['import']!r} returned a "
                                              f"{type(model).__name__}; expected an "
                                              "ember.nn.Module")
        return model
    name = section.pop("name")
    return _MODELS[name](**section)


class ByteWindows(Dataset):
    """Windows of a byte string for next-byte prediction: item ``i`` is ``(x, y)``, two
    int64 tensors of ``context`` bytes, ``y`` shifted one byte after ``x``."""

    def __init__(self, data: np.ndarray, context: int, stride: int) -> None:
        self.data, self.context, self.stride = data, context, stride
        self.count = max(0, (len(data) - context - 1) // stride + 1)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        if not 0 <= index < self.count:
            raise IndexError(f"ByteWindows: index {index} out of range for {self.count} "
                             "windows")
        start = index * self.stride
        window = self.data[start:start + self.context + 1].astype(np.int64)
        return from_numpy(window[:-1].copy()), from_numpy(window[1:].copy())


def _text_splits(section: Mapping[str, Any]) -> tuple[Dataset, Dataset]:
    try:
        with open(section["path"], "rb") as f:
            data = np.frombuffer(f.read(), dtype=np.uint8)
    except OSError as exc:
        raise ConfigError("data.path", f"cannot read {section['path']!r}: {exc.strerror}") \
            from None
    context = section["context"]
    stride = section["stride"] or context
    cut = int(len(data) * (1 - section["val_split"]))
    train, val = ByteWindows(data[:cut], context, stride), ByteWindows(data[cut:], context,
                                                                       stride)
    if len(train) == 0 or len(val) == 0:
        raise ConfigError("data.path", f"{section['path']!r} has {len(data)} bytes: too few "
                                       f"for windows of {context} bytes in both the train "
                                       f"and the validation part (val_split "
                                       f"{section['val_split']})")
    return train, val


def _datasets(section: Mapping[str, Any], seed: int | None):
    """``(train, val)`` datasets; val may be None."""
    if "import" in section:
        made = _call_builder("data", section["import"], section["options"])
        if isinstance(made, Mapping) and "train" in made:
            train, val = made["train"], made.get("val")
        elif isinstance(made, (tuple, list)) and len(made) == 2:
            train, val = made
        else:
            train, val = made, None
    elif section["name"] == "text":
        return _text_splits(section)
    else:
        train = Digits(train=True, test_fraction=section["test_fraction"])
        val = None if section["val_split"] else Digits(train=False,
                                                       test_fraction=section["test_fraction"])
    if not hasattr(train, "__getitem__") and not hasattr(train, "__iter__"):
        raise ConfigError("data.import", f"{section['import']!r} returned a "
                                         f"{type(train).__name__}; expected a Dataset, a "
                                         "(train, val) pair or {'train': ..., 'val': ...}")
    if section["val_split"]:
        gen = Generator().manual_seed(seed) if seed is not None else None
        n_val = max(1, round(len(train) * section["val_split"]))
        train, val = random_split(train, [len(train) - n_val, n_val], generator=gen)
    return train, val


def build_data(section: Mapping[str, Any], seed: int | None = None
               ) -> tuple[DataLoader, DataLoader | None]:
    """The train and validation loaders of a checked ``data`` section; the shuffle
    order comes from a generator seeded with ``seed``."""
    train, val = _datasets(section, seed)
    gen = Generator().manual_seed(seed) if seed is not None else None
    train_loader = DataLoader(train, batch_size=section["batch_size"],
                              shuffle=section["shuffle"], num_workers=section["num_workers"],
                              drop_last=section["drop_last"], generator=gen)
    val_loader = None if val is None else DataLoader(
        val, batch_size=section["val_batch_size"] or section["batch_size"],
        num_workers=section["num_workers"])
    return train_loader, val_loader


def build_optimizer(section: Mapping[str, Any], model: nn.Module):
    """The optimizer of a checked ``optimizer`` section over ``model``'s parameters."""
    options = {k: v for k, v in section.items() if k != "name"}
    return OPTIMIZERS[section["name"]](model.parameters(), **options)


def build_scheduler(section: Mapping[str, Any] | None, optimizer):
    """The scheduler of a checked ``scheduler`` section (None when there is none)."""
    if section is None:
        return None
    options = {k: v for k, v in section.items() if k not in ("name", "interval", "monitor")}
    return SCHEDULERS[section["name"]](optimizer, **options)


def token_cross_entropy(output: Tensor, target: Tensor) -> Tensor:
    """Cross-entropy of ``(B, T, V)`` logits against ``(B, T)`` tokens, over all
    positions."""
    return F.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))


def _loss(name: str):
    return token_cross_entropy if name == "token_cross_entropy" else getattr(F, name)


def _metric(name: str) -> M.Metric:
    if name.startswith("top") and name.endswith("_accuracy"):
        return M.TopKAccuracy(int(name[3:-len("_accuracy")]))
    return {"accuracy": M.Accuracy, "precision": M.Precision, "recall": M.Recall,
            "f1": M.F1Score, "mse": M.MeanSquaredError, "mae": M.MeanAbsoluteError,
            "perplexity": M.Perplexity}[name]()


def _hparams(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config's scalar settings as ``{"optimizer.lr": 0.003, ...}`` for loggers."""
    out = {}
    for section in ("model", "data", "optimizer", "scheduler"):
        for key, value in (config.get(section) or {}).items():
            if isinstance(value, (bool, int, float, str)):
                out[f"{section}.{key}"] = value
            elif isinstance(value, (list, tuple)):
                out[f"{section}.{key}"] = str(list(value))
    return out


def _seed_everything(seed: int) -> None:
    manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2 ** 32)


def build(config: Mapping[str, Any], callbacks: Iterable = (),
          resume_from: str | None = None, progress_bar: bool | None = None) -> Run:
    """Build every object of a checked config (see :func:`~ember.config.load_config`).

    Args:
        config: a config returned by ``load_config`` / ``validate_config``.
        callbacks: extra Trainer callbacks (e.g. ``ember.tune.PruningCallback``).
        resume_from: a checkpoint path or ``"latest"``; overrides
            ``trainer.resume_from``.
        progress_bar: overrides ``trainer.progress_bar``.
    """
    t = config["trainer"]
    if t["seed"] is not None:
        _seed_everything(t["seed"])  # before the model, so its initial weights repeat
    train_loader, val_loader = build_data(config["data"], t["seed"])
    model = build_model(config["model"])
    optimizer = build_optimizer(config["optimizer"], model)
    scheduler = build_scheduler(config["scheduler"], optimizer)
    cbs = []
    if t["early_stopping"] is not None:
        cbs.append(EarlyStopping(**t["early_stopping"]))
    if t["checkpoint"] is not None:
        cbs.append(ModelCheckpoint(**t["checkpoint"]))
    cbs.extend(callbacks)
    make_logger = {"csv": CSVLogger, "jsonl": JSONLLogger, "tensorboard": TensorBoardLogger}
    loggers = [make_logger[name](t["log_dir"]) for name in t["loggers"]]
    resume = resume_from if resume_from is not None else t["resume_from"]
    if resume == "latest" and t["checkpoint_dir"] is None:
        raise ConfigError("trainer.checkpoint_dir", "missing required key: resuming from "
                                                    "'latest' looks for checkpoints there")
    sched = config["scheduler"] or {}
    trainer = Trainer(
        model, optimizer, _loss(t["loss"]), train_loader=train_loader, val_loader=val_loader,
        max_epochs=t["max_epochs"], max_steps=t["max_steps"],
        eval_every_n_steps=t["eval_every_n_steps"],
        eval_every_n_epochs=t["eval_every_n_epochs"],
        grad_accumulation_steps=t["grad_accumulation_steps"],
        grad_clip_norm=t["grad_clip_norm"], grad_clip_value=t["grad_clip_value"],
        scheduler=scheduler, scheduler_interval=sched.get("interval", "step"),
        scheduler_monitor=sched.get("monitor", "val_loss"),
        metrics={name: _metric(name) for name in t["metrics"]} or None, callbacks=cbs,
        loggers=loggers, log_every_n_steps=t["log_every_n_steps"],
        autocast_dtype=t["autocast_dtype"], compile=t["compile"],
        checkpoint_dir=t["checkpoint_dir"], resume_from=resume,
        progress_bar=t["progress_bar"] if progress_bar is None else progress_bar,
        hparams=_hparams(config))
    return Run(dict(config), model, optimizer, scheduler, train_loader, val_loader, trainer)


def train(config: Mapping[str, Any], callbacks: Iterable = (), resume_from: str | None = None,
          progress_bar: bool | None = None) -> tuple[Run, dict[str, float]]:
    """Build the run of a checked config and fit it; returns the run and its final
    metrics: the last epoch's ``train_*`` values and a fresh evaluation of the
    validation split (``val_loss``, ``val_<metric>``)."""
    run = build(config, callbacks, resume_from, progress_bar)
    run.trainer.fit()
    final = {k: v for k, v in run.trainer.logged.items()
             if k.startswith("train_") and k != "train_loss_step"}
    if run.val_loader is not None:
        final.update(run.trainer.evaluate())
    return run, final
