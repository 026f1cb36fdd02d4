"""The Trainer's distributed strategies: ``Trainer(..., strategy="ddp" | "zero1" |
"zero2")``.

- ``"ddp"``: the model is wrapped in :class:`DistributedDataParallel`;
- ``"zero1"``: DDP and a :class:`ZeroRedundancyOptimizer` (stage 1) made from the given
  optimizer's class and groups;
- ``"zero2"``: no DDP; a stage-2 :class:`ZeroRedundancyOptimizer`, which averages the
  gradients itself.

Each rank must read its own shard of the data: give the Trainer a DataLoader with a
:class:`DistributedSampler` (its ``set_epoch`` is called at every epoch). Gradient
accumulation skips the all-reduce on all but the last batch of a step (``no_sync``).
Only rank 0 shows the progress bar, logs and writes the Trainer's checkpoints. With
ZeRO, the Trainer's own checkpoints (which need the whole optimizer state on one rank)
are not written; save with :func:`ember.distributed.checkpoint.save_checkpoint` from
every rank (e.g. in a callback).
"""
from __future__ import annotations

import contextlib
import warnings

from ..train.callbacks import Callback
from .ddp import DistributedDataParallel
from .process_group import DistributedError
from .zero import ZeroRedundancyOptimizer

__all__ = ["Strategy", "STRATEGIES"]

STRATEGIES = ("ddp", "zero1", "zero2")


class _SetSamplerEpoch(Callback):
    """Calls the train loader's ``sampler.set_epoch(epoch)`` at the start of each epoch."""

    def on_epoch_start(self, trainer) -> None:
        sampler = getattr(trainer.train_loader, "sampler", None)
        if callable(getattr(sampler, "set_epoch", None)):
            sampler.set_epoch(trainer.epoch)


class Strategy:
    """Wraps a Trainer's model and optimizer for data parallel training (see the module
    docstring); made by ``Trainer(strategy=...)``."""

    def __init__(self, name: str, group=None) -> None:
        if name not in STRATEGIES:
            raise DistributedError(f"Trainer: unknown strategy {name!r}; expected one of "
                                   f"{', '.join(map(repr, STRATEGIES))} or None")
        from .collectives import group_world, init_process_group, is_initialized
        if group is None and not is_initialized():
            init_process_group("mpi")
        self.name = name
        self.group = group_world() if group is None else group

    @property
    def is_main(self) -> bool:
        return self.group.rank == 0

    def setup(self, trainer) -> None:
        """Wrap ``trainer.model``/``trainer.optimizer``; silence the other ranks."""
        if trainer.compile:
            raise NotImplementedError(f"Trainer: compile=True with strategy={self.name!r} "
                                      "is not supported yet (the gradient all-reduce runs "
                                      "from autograd hooks, outside the compiled graph)")
        if self.name in ("ddp", "zero1") and not isinstance(trainer.model,
                                                            DistributedDataParallel):
            trainer.model = DistributedDataParallel(trainer.model, process_group=self.group)
        self._model = trainer.model if isinstance(trainer.model, DistributedDataParallel) \
            else None
        if self.name in ("zero1", "zero2"):
            trainer.optimizer = self._shard(trainer.optimizer, trainer.scheduler)
        trainer.callbacks.append(_SetSamplerEpoch())
        sampler = getattr(trainer.train_loader, "sampler", None)
        if self.group.size > 1 and trainer.train_loader is not None \
                and not callable(getattr(sampler, "set_epoch", None)):
            warnings.warn(f"Trainer(strategy={self.name!r}): the train loader's sampler is "
                          f"{type(sampler).__name__}, so every rank may read the same "
                          "batches; give the DataLoader a "
                          "sampler=ember.distributed.DistributedSampler(dataset)",
                          stacklevel=3)
        if not self.is_main:
            from ..train.model_checkpoint import ModelCheckpoint
            from ..train.progress import ProgressBar
            trainer.progress = ProgressBar(False)
            trainer.loggers = []
            trainer.callbacks = [c for c in trainer.callbacks
                                 if not isinstance(c, ModelCheckpoint)]
            trainer.checkpoint_dir = None

    def _shard(self, optimizer, scheduler):
        if isinstance(optimizer, ZeroRedundancyOptimizer):
            return optimizer
        if optimizer.state:
            raise DistributedError(f"Trainer(strategy={self.name!r}): the optimizer already "
                                   "has state; give the Trainer a fresh optimizer (ZeRO "
                                   "shards the state from the first step)")
        zero = ZeroRedundancyOptimizer(
            # the same group dicts, so a scheduler's learning rate reaches the shards
            optimizer.param_groups, type(optimizer), process_group=self.group,
            stage=1 if self.name == "zero1" else 2, **optimizer.defaults)
        if scheduler is not None and getattr(scheduler, "optimizer", None) is optimizer:
            scheduler.optimizer = zero
        return zero

    def micro_step(self, last: bool):
        """The context of one batch's forward and backward: no gradient all-reduce
        unless it is the last batch of an optimizer step."""
        if last or self._model is None:
            return contextlib.nullcontext()
        return self._model.no_sync()
