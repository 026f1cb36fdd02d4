"""Loggers: where the Trainer's logged values go — a CSV file, a JSON-lines file, or
TensorBoard event files (through tensorboardX).

The Trainer calls ``log_hyperparams`` when fit starts, ``log_metrics`` whenever it
logs, ``log_model`` after each epoch (histograms) and ``finalize`` when fit ends.
"""
from __future__ import annotations

import csv
import json
import math
import os
from typing import Any

import numpy as np

from .errors import TrainerError

__all__ = ["Logger", "CSVLogger", "JSONLLogger", "TensorBoardLogger"]


def _plain(value):
    """A hyperparameter as a JSON/TensorBoard-friendly value."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


class Logger:
    """Base class of loggers; every method does nothing here."""

    def log_hyperparams(self, params: dict[str, Any]) -> None:
        """Record the run's hyperparameters."""

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        """Record ``metrics`` (name -> number) at ``step``."""

    def log_model(self, model, step: int) -> None:
        """Record the model's state at ``step`` (weights, gradients)."""

    def finalize(self, final_metrics: dict[str, float]) -> None:
        """Flush and close; ``final_metrics`` are the last logged values."""


class CSVLogger(Logger):
    """Write ``metrics.csv`` (a ``step`` column, then one column per logged name, empty
    where a row lacks it) and ``hparams.json`` in ``save_dir``. The file is rewritten
    whole when new names appear, so every row has every column.

    >>> ember.train.CSVLogger("logs/run1")
    """

    def __init__(self, save_dir: str | os.PathLike, flush_every: int = 50) -> None:
        self.save_dir = os.fspath(save_dir)
        os.makedirs(self.save_dir, exist_ok=True)
        self.path = os.path.join(self.save_dir, "metrics.csv")
        self.flush_every = flush_every
        self.rows: list[dict[str, Any]] = []
        self.columns: list[str] = ["step"]
        self._pending = 0

    def log_hyperparams(self, params: dict[str, Any]) -> None:
        with open(os.path.join(self.save_dir, "hparams.json"), "w") as f:
            json.dump({k: _plain(v) for k, v in params.items()}, f, indent=1)

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        self.rows.append({"step": step, **metrics})
        for key in metrics:
            if key not in self.columns:
                self.columns.append(key)
        self._pending += 1
        if self._pending >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        """Write every row to ``metrics.csv``."""
        tmp = self.path + ".tmp"
        with open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.columns, restval="")
            writer.writeheader()
            writer.writerows(self.rows)
        os.replace(tmp, self.path)
        self._pending = 0

    def finalize(self, final_metrics: dict[str, float]) -> None:
        self.flush()


class JSONLLogger(Logger):
    """Append one JSON object per logging call to ``metrics.jsonl`` in ``save_dir``
    (``{"step": 10, "train_loss_step": 0.53}``); hyperparameters as ``{"hparams":
    {...}}``. Non-finite numbers are written as the strings ``"nan"``/``"inf"``.

    >>> ember.train.JSONLLogger("logs/run1")
    """

    def __init__(self, save_dir: str | os.PathLike) -> None:
        self.save_dir = os.fspath(save_dir)
        os.makedirs(self.save_dir, exist_ok=True)
        self.path = os.path.join(self.save_dir, "metrics.jsonl")
        self._file = open(self.path, "a")

    @staticmethod
    def _number(v: float):
        return v if math.isfinite(v) else str(v)

    def _write(self, record: dict) -> None:
        if self._file.closed:
            self._file = open(self.path, "a")
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def log_hyperparams(self, params: dict[str, Any]) -> None:
        self._write({"hparams": {k: _plain(v) for k, v in params.items()}})

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        self._write({"step": step, **{k: self._number(v) for k, v in metrics.items()}})

    def finalize(self, final_metrics: dict[str, float]) -> None:
        self._file.close()


class TensorBoardLogger(Logger):
    """TensorBoard event files through ``tensorboardX`` (``pip install tensorboardX``):
    scalars for every logged value, histograms of each parameter and its gradient after
    each epoch (``weights/<name>``, ``grads/<name>``), and the hyperparameters with the
    final metrics (TensorBoard's HParams tab).

    Args:
        log_dir: the run's folder (``tensorboard --logdir`` its parent).
        histograms: write weight and gradient histograms.

    >>> ember.train.TensorBoardLogger("runs/exp1")
    """

    def __init__(self, log_dir: str | os.PathLike, histograms: bool = True) -> None:
        try:
            from tensorboardX import SummaryWriter
        except ImportError:
            raise TrainerError("TensorBoardLogger needs tensorboardX: pip install "
                               "tensorboardX") from None
        self.log_dir = os.fspath(log_dir)
        self.histograms = histograms
        self.writer = SummaryWriter(logdir=self.log_dir)
        self._hparams: dict[str, Any] | None = None

    def log_hyperparams(self, params: dict[str, Any]) -> None:
        self._hparams = {k: _plain(v) for k, v in params.items() if v is not None}

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        for name, value in metrics.items():
            self.writer.add_scalar(name, value, step)

    def log_model(self, model, step: int) -> None:
        if not self.histograms:
            return
        for name, p in model.named_parameters():
            self.writer.add_histogram(f"weights/{name}", _numpy(p), step)
            if p.grad is not None:
                self.writer.add_histogram(f"grads/{name}", _numpy(p.grad), step)

    def finalize(self, final_metrics: dict[str, float]) -> None:
        if self._hparams is not None:
            from tensorboardX.summary import hparams
            metrics = {k: v for k, v in final_metrics.items() if math.isfinite(v)}
            for summary in hparams(self._hparams, metrics):
                self.writer.file_writer.add_summary(summary)
            self._hparams = None
        self.writer.flush()
        self.writer.close()


def _numpy(t) -> np.ndarray:
    t = t.detach()
    if t.dtype.itemsize < 4:
        t = t.float()
    return t.numpy()
