"""Loggers: where the Trainer's logged values go — a CSV file, a JSON-lines file, or
TensorBoard event files (through tensorboardX).

The Trainer calls ``log_hyperparams`` when fit starts, ``log_graph`` once on the first
batch for a logger whose ``wants_graph`` is set, ``log_metrics`` whenever it logs,
``log_model`` after each epoch (histograms) and ``finalize`` when fit ends.
"""
from __future__ import annotations

import csv
import json
import math
import os
import warnings
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

    #: the Trainer calls :meth:`log_graph` (once, on the first batch) while this is True
    wants_graph = False

    def log_hyperparams(self, params: dict[str, Any]) -> None:
        """Record the run's hyperparameters."""

    def log_graph(self, model, example_inputs=None) -> None:
        """Record the graph of ``model``'s forward on ``example_inputs``."""

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
    each epoch (``weights/<name>``, ``grads/<name>``), the hyperparameters with the
    final metrics (TensorBoard's HParams tab) and, with ``log_graph=True``, the model's
    graph as ember.jit's tracer captures it (the Graphs tab; see :meth:`log_graph`).

    Args:
        log_dir: the run's folder (``tensorboard --logdir`` its parent).
        histograms: write weight and gradient histograms.
        log_graph: have the Trainer write the model graph once, when fit starts,
            traced on the first batch's inputs (on ``example_inputs`` where the batch is
            no ``(inputs, targets)`` pair, as with ``training_step``).
        example_inputs: what :meth:`log_graph` calls the model with by default: a
            tensor, or a tuple of positional arguments.

    >>> ember.train.TensorBoardLogger("runs/exp1", log_graph=True)
    """

    def __init__(self, log_dir: str | os.PathLike, histograms: bool = True,
                 log_graph: bool = False, example_inputs=None) -> None:
        try:
            from tensorboardX import SummaryWriter
        except ImportError:
            raise TrainerError("TensorBoardLogger needs tensorboardX: pip install "
                               "tensorboardX") from None
        self.log_dir = os.fspath(log_dir)
        self.histograms = histograms
        self.wants_graph = log_graph
        self.example_inputs = example_inputs
        self.writer = SummaryWriter(logdir=self.log_dir)
        self._hparams: dict[str, Any] | None = None

    def log_hyperparams(self, params: dict[str, Any]) -> None:
        self._hparams = {k: _plain(v) for k, v in params.items() if v is not None}

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        for name, value in metrics.items():
            self.writer.add_scalar(name, value, step)

    def log_graph(self, model, example_inputs=None) -> bool:
        """Write the graph of ``model(*example_inputs)`` (default: the logger's
        ``example_inputs``) for TensorBoard's Graphs tab; returns whether it was written.

        The forward is traced by ember.jit's tracer without gradients and never run:
        no number is computed, no random number drawn, no buffer updated, and the
        model comes back as it was. Each parameter and buffer is a node named by its
        state-dict key (``blocks.0.fc1.weight`` as ``blocks/0/fc1/weight``, so
        TensorBoard boxes it with its module), each op a node inside the module whose
        forward issued it, with its output shapes and dtype. A forward the tracer
        cannot capture (``.item()``, ``if x > 0:``, shapes from values) is skipped with
        a warning; training never fails for it.

        >>> logger.log_graph(model, ember.randn(1, 784))
        """
        self.wants_graph = False  # once per logger, whatever happens
        if example_inputs is None:
            example_inputs = self.example_inputs
        if example_inputs is None:
            warnings.warn("TensorBoardLogger.log_graph: no example inputs (give "
                          "example_inputs=...); the model graph is not written",
                          stacklevel=2)
            return False
        args = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else \
            (example_inputs,)
        from .tb_graph import graph_def, trace_forward
        try:
            graph, scopes = trace_forward(model, args)
            proto = graph_def(graph, model, scopes)
        except Exception as exc:  # noqa: BLE001 - a graph is never worth a failed run
            warnings.warn(f"TensorBoardLogger.log_graph: the graph of "
                          f"{type(model).__name__} could not be traced, so it is not "
                          f"written ({type(exc).__name__}: {exc})", stacklevel=2)
            return False
        from tensorboardX.proto.event_pb2 import Event
        self.writer.file_writer.add_event(Event(graph_def=proto.SerializeToString()))
        self.writer.flush()
        return True

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
