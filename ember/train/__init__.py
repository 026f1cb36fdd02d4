"""``ember.train``: the training loop and what surrounds it — :class:`Trainer`,
callbacks (:class:`EarlyStopping`, :class:`ModelCheckpoint`,
:class:`LearningRateMonitor`), metrics over whole splits (``ember.train.metrics``),
loggers (CSV, JSON lines, TensorBoard), exact-resume checkpoints and
:func:`plot_history`.

>>> trainer = ember.train.Trainer(model, opt, ember.nn.functional.cross_entropy,
...                               train_loader=train, val_loader=val, max_epochs=3)
>>> trainer.fit()
"""
from . import metrics
from .callbacks import Callback, EarlyStopping, LearningRateMonitor
from .checkpoint import find_checkpoints, latest_checkpoint, read_checkpoint
from .errors import NonFiniteLossError, TrainerError
from .history import History
from .loggers import CSVLogger, JSONLLogger, Logger, TensorBoardLogger
from .model_checkpoint import ModelCheckpoint
from .plotting import plot_history
from .trainer import Trainer

__all__ = ["Trainer", "Callback", "EarlyStopping", "ModelCheckpoint", "LearningRateMonitor",
           "Logger", "CSVLogger", "JSONLLogger", "TensorBoardLogger", "History",
           "plot_history", "metrics", "TrainerError", "NonFiniteLossError",
           "find_checkpoints", "latest_checkpoint", "read_checkpoint"]
