"""``Trainer``: the training loop — epochs and steps, evaluation, gradient accumulation
and clipping, schedulers, metrics, callbacks, logging, mixed precision, ``ember.jit``,
and checkpoints that resume bit for bit.

Where a run stands is ``(epoch, batch)``: the epoch and how many of its batches were
consumed. A checkpoint holds that position, every random state now and at the start of
the epoch, and the model, optimizer, scheduler and scaler. Resuming mid-epoch restores
the loader's own position (``train_loader.load_state_dict``) when it has one, and
otherwise replays the epoch's order from the epoch-start random states and skips the
consumed batches; then the current random states are put back. So the resumed run
sees the same batches and draws the same random numbers as the uninterrupted one.
"""
from __future__ import annotations

import math
import os
import random
from contextlib import nullcontext
from typing import Any, Callable, Iterable

import numpy as np

from ..autograd import grad_mode
from ..nn.module import Module
from ..nn.utils.clip_grad import clip_grad_norm_, clip_grad_value_
from ..ops.random import manual_seed
from ..tensor import Tensor
from .arguments import (batch_size, check_duck, check_positive, loader_length,
                        named_metrics)
from .callbacks import Callback
from .checkpoint import (checkpoint_name, latest_checkpoint, read_checkpoint,
                         write_checkpoint)
from .devices import batch_to, model_device
from .errors import NonFiniteLossError, TrainerError
from .history import History
from .interrupts import DeferredInterrupt
from .loggers import Logger
from .progress import ProgressBar
from .resume import build_checkpoint, restore_checkpoint
from .rng_state import capture_rng, loader_generators, restore_rng

__all__ = ["Trainer"]

_END = object()


class Trainer:
    """Train ``model`` with ``optimizer`` on ``train_loader``; evaluate, log, checkpoint.

    The model may live on any device (``model.to("cuda")``): each batch's tensors are
    moved to the device of its parameters.

    Args:
        model: the module to train.
        optimizer: an ``ember.optim`` optimizer over the model's parameters.
        loss_fn: ``loss_fn(model(inputs), targets)`` for batches ``(inputs, targets)``
            (e.g. ``ember.nn.functional.cross_entropy``).
        training_step: instead of ``loss_fn``, ``training_step(model, batch)`` returning
            the loss, or a dict ``{"loss": ..., "output": ..., "target": ...}`` (output
            and target feed the metrics). Also used for validation when there is no
            ``loss_fn``.
        train_loader: the training batches (an ``ember.data.DataLoader`` or any
            iterable); may also be given to :meth:`fit`.
        val_loader: the validation batches.
        max_epochs: stop after this many epochs.
        max_steps: stop after this many optimizer steps (with ``max_epochs``,
            whichever comes first; with neither, one epoch).
        eval_every_n_steps: validate every N optimizer steps.
        eval_every_n_epochs: validate after every N-th epoch (None: never at epoch end).
        grad_accumulation_steps: batches whose gradients are summed per optimizer step
            (each loss divided by N, so N batches of B equal one batch of N*B for a mean
            loss); an epoch's leftover batches make a last, shorter step.
        grad_clip_norm: clip the total gradient norm to this (``clip_grad_norm_``).
        grad_clip_value: clamp each gradient to ``[-v, v]`` (``clip_grad_value_``).
        scheduler: a learning-rate scheduler of ``optimizer``.
        scheduler_interval: step it after every optimizer ``"step"`` or every
            ``"epoch"``. A ``ReduceLROnPlateau`` is stepped with the value logged under
            ``scheduler_monitor``.
        scheduler_monitor: the logged name a ``ReduceLROnPlateau`` reads.
        metrics: a :class:`~ember.train.metrics.Metric`, a list of them, or a dict
            ``{name: metric}``; computed over the whole epoch for training (logged
            ``train_<name>``) and over the whole split for validation (``val_<name>``).
        callbacks: :class:`Callback` objects, called in order.
        loggers: :class:`~ember.train.loggers.Logger` objects.
        log_every_n_steps: log the step's loss (``train_loss_step``) every N steps.
        grad_scaler: an ``ember.amp.GradScaler`` (anything with ``scale``,
            ``unscale_``, ``step``, ``update``): a NaN/inf loss then skips the step
            instead of stopping training.
        autocast_dtype: run forward and loss under ``ember.amp.autocast(dtype=...)``,
            for the model's device type.
        compile: run each optimizer step (forward, backward, clipping, optimizer step)
            as one ``ember.jit`` graph.
        checkpoint_dir: where emergency checkpoints (and, by default,
            :class:`ModelCheckpoint`'s) are written.
        resume_from: a checkpoint path, or ``"latest"`` for the latest one in
            ``checkpoint_dir``; loaded when :meth:`fit` starts.
        progress_bar: show a progress bar (tqdm, or plain lines without it).
        seed: seed ember's default generator, Python's ``random`` and NumPy's global
            generator now.
        hparams: hyperparameters to record in the loggers (with the Trainer's own).
        strategy: ``"ddp"``, ``"zero1"`` or ``"zero2"`` to train data parallel under
            ``mpiexec`` (see :mod:`ember.distributed.strategy`; the train loader needs
            a ``DistributedSampler``); only rank 0 logs and checkpoints.

    Attributes:
        global_step: optimizer steps done.
        epoch: the current epoch (0-based).
        history: a :class:`~ember.train.History` of every logged value.
        logged: the latest value of each logged name.
        should_stop: set True (e.g. by a callback) to stop after the current step.
        last_loss: the loss of the last optimizer step (the mean over its batches).

    >>> trainer = ember.train.Trainer(model, opt, F.cross_entropy, train_loader=train,
    ...                               val_loader=val, max_epochs=5,
    ...                               metrics=[ember.train.metrics.Accuracy()])
    >>> history = trainer.fit()
    >>> trainer.evaluate(val)["val_accuracy"]
    """

    def __init__(self, model: Module, optimizer, loss_fn: Callable | None = None,
                 training_step: Callable | None = None, train_loader: Iterable | None = None,
                 val_loader: Iterable | None = None, *, max_epochs: int | None = None,
                 max_steps: int | None = None, eval_every_n_steps: int | None = None,
                 eval_every_n_epochs: int | None = 1, grad_accumulation_steps: int = 1,
                 grad_clip_norm: float | None = None, grad_clip_value: float | None = None,
                 scheduler=None, scheduler_interval: str = "step",
                 scheduler_monitor: str = "val_loss", metrics=None,
                 callbacks: Iterable[Callback] = (), loggers: Iterable[Logger] = (),
                 log_every_n_steps: int = 50, grad_scaler=None, autocast_dtype=None,
                 compile: bool = False, checkpoint_dir: str | os.PathLike | None = None,
                 resume_from: str | os.PathLike | None = None, progress_bar: bool = True,
                 seed: int | None = None, hparams: dict[str, Any] | None = None,
                 strategy: str | None = None) -> None:
        if not isinstance(model, Module):
            raise TrainerError(f"Trainer: model must be an ember.nn.Module, got "
                               f"{type(model).__name__}")
        check_duck("optimizer", optimizer, "step", "zero_grad", "state_dict",
                    "load_state_dict")
        if loss_fn is None and training_step is None:
            raise TrainerError("Trainer: give loss_fn (called as loss_fn(model(inputs), "
                               "targets)) or training_step (called as "
                               "training_step(model, batch))")
        if loss_fn is not None and training_step is not None:
            raise TrainerError("Trainer: give loss_fn or training_step, not both")
        for name in ("max_epochs", "max_steps", "eval_every_n_steps", "eval_every_n_epochs"):
            check_positive(name, locals()[name])
        check_positive("grad_accumulation_steps", grad_accumulation_steps, allow_none=False)
        check_positive("log_every_n_steps", log_every_n_steps, allow_none=False)
        for name, value in (("grad_clip_norm", grad_clip_norm),
                            ("grad_clip_value", grad_clip_value)):
            if value is not None and not value > 0:
                raise TrainerError(f"Trainer: {name} must be > 0 or None, got {value!r}")
        if scheduler_interval not in ("step", "epoch"):
            raise TrainerError(f"Trainer: scheduler_interval must be 'step' or 'epoch', got "
                               f"{scheduler_interval!r}")
        if scheduler is not None:
            check_duck("scheduler", scheduler, "step", "state_dict", "load_state_dict")
        if grad_scaler is not None:
            check_duck("grad_scaler", grad_scaler, "scale", "unscale_", "step", "update",
                        "state_dict", "load_state_dict")
            if compile:
                raise TrainerError("Trainer: compile=True with a grad_scaler is not "
                                   "supported (the scaler's skip-on-inf is a data-dependent "
                                   "branch a static graph cannot hold); use one or the other")
        self._needs_closure = type(optimizer).__name__ == "LBFGS"
        if self._needs_closure and (compile or grad_scaler is not None
                                    or grad_accumulation_steps > 1):
            raise TrainerError("Trainer: LBFGS evaluates the loss again inside its step (a "
                               "closure); use it with compile=False, no grad_scaler and "
                               "grad_accumulation_steps=1")
        callbacks, loggers = list(callbacks), list(loggers)
        for cb in callbacks:
            if not isinstance(cb, Callback):
                raise TrainerError(f"Trainer: callbacks must be ember.train.Callback "
                                   f"objects, got {type(cb).__name__}")
        for lg in loggers:
            if not isinstance(lg, Logger):
                raise TrainerError(f"Trainer: loggers must be ember.train.loggers.Logger "
                                   f"objects, got {type(lg).__name__}")
        if resume_from == "latest" and checkpoint_dir is None:
            raise TrainerError("Trainer: resume_from='latest' needs checkpoint_dir= (the "
                               "folder to look in)")
        if max_epochs is None and max_steps is None:
            max_epochs = 1
        self.model, self.optimizer = model, optimizer
        self.loss_fn, self.training_step = loss_fn, training_step
        self.train_loader, self.val_loader = train_loader, val_loader
        self.max_epochs, self.max_steps = max_epochs, max_steps
        self.eval_every_n_steps, self.eval_every_n_epochs = eval_every_n_steps, \
            eval_every_n_epochs
        self.grad_accumulation_steps = grad_accumulation_steps
        self.grad_clip_norm, self.grad_clip_value = grad_clip_norm, grad_clip_value
        self.scheduler, self.scheduler_interval = scheduler, scheduler_interval
        self.scheduler_monitor = scheduler_monitor
        self.metrics = named_metrics(metrics)
        self.train_metrics = {k: m.clone() for k, m in self.metrics.items()}
        self.callbacks, self.loggers = callbacks, loggers
        self.log_every_n_steps = log_every_n_steps
        self.grad_scaler, self.autocast_dtype = grad_scaler, autocast_dtype
        self.compile = compile
        self.checkpoint_dir = None if checkpoint_dir is None else os.fspath(checkpoint_dir)
        self.resume_from = resume_from
        self.hparams = dict(hparams or {})
        self.progress = ProgressBar(progress_bar)
        self.seed = seed
        if seed is not None:
            manual_seed(seed)
            random.seed(seed)
            np.random.seed(seed % 2 ** 32)

        self.global_step = 0
        self.epoch = 0
        self.batch_in_epoch = 0  # batches of the current epoch consumed
        self.history = History()
        self.logged: dict[str, float] = {}
        self.should_stop = False
        self.last_loss = math.nan
        self.skipped_steps = 0  # steps a grad scaler skipped (inf/nan gradients)
        self._epoch_done = False  # the epoch's end (validation, scheduler) has run
        self._epoch_loss = [0.0, 0]  # sum and count of the epoch's step losses
        self._epoch_start_rng = None
        self._step_start = None  # (rng, batch_in_epoch) when the current step began
        self._in_step = False
        self._resume: dict | None = None
        self._compiled: dict[str, Any] = {}
        self._interrupts: DeferredInterrupt | None = None
        self.strategy = None
        if strategy is not None:
            from ..distributed.strategy import Strategy
            self.strategy = Strategy(strategy)
            self.strategy.setup(self)

    # Public API ------------------------------------------------------------------------
    def fit(self, train_loader: Iterable | None = None,
            val_loader: Iterable | None = None) -> History:
        """Train until ``max_epochs`` or ``max_steps`` (or a callback's stop), resuming
        first from ``resume_from`` if given; returns :attr:`history`.

        If training raises (``KeyboardInterrupt`` included), callbacks'
        ``on_exception`` run and an emergency checkpoint is written to
        ``checkpoint_dir`` before the exception propagates. A first Ctrl-C is held until
        the running step finishes, so that checkpoint resumes exactly.
        """
        if train_loader is not None:
            self.train_loader = train_loader
        if val_loader is not None:
            self.val_loader = val_loader
        if self.train_loader is None:
            raise TrainerError("Trainer.fit: no train_loader; pass one to Trainer(...) or "
                               "fit(...)")
        self.should_stop = False
        if self.resume_from is not None:
            path = latest_checkpoint(self.checkpoint_dir) if self.resume_from == "latest" \
                else self.resume_from
            self.resume_from = None
            self.load_checkpoint(path)
        self._log_hyperparams()
        try:
            with DeferredInterrupt() as self._interrupts:
                self._call("on_train_start")
                if self._resume is not None and self._resume["batch"] == 0:
                    # callbacks above may draw: the epoch starts from the saved states
                    restore_rng(self._resume.pop("rng"), self._generators())
                self._fit_loop()
                self._call("on_train_end")
        except BaseException as exc:
            self._on_failure(exc)
            raise
        finally:
            self._interrupts = None
            self.progress.close()
            for lg in self.loggers:
                lg.finalize(self.logged)
        return self.history

    def evaluate(self, loader: Iterable | None = None, prefix: str = "val") -> dict[str, float]:
        """The mean loss (weighted by batch size) and the metrics over ``loader``
        (default: the ``val_loader``), in eval mode without gradients; returns
        ``{f"{prefix}_loss": ..., f"{prefix}_<metric>": ...}``. During :meth:`fit` the
        values are also logged."""
        loader = self.val_loader if loader is None else loader
        if loader is None:
            raise TrainerError("Trainer.evaluate: no loader; pass one or give val_loader")
        metrics = {k: m.clone() for k, m in self.metrics.items()}
        was_training = self.model.training
        self.model.eval()
        total, count, fed = 0.0, 0, False
        try:
            with grad_mode.no_grad(), self._autocast():
                for batch in loader:
                    loss, output, target = self._forward(batch)
                    n = batch_size(batch)
                    total += self._loss_value(loss) * n
                    count += n
                    if output is not None and target is not None:
                        fed = True
                        for m in metrics.values():
                            m.update(output, target)
        finally:
            self.model.train(was_training)
        if count == 0:
            raise TrainerError("Trainer.evaluate: the loader gave no batches")
        out = {f"{prefix}_loss": total / count}
        if fed:
            out.update((f"{prefix}_{name}", m.compute()) for name, m in metrics.items())
        return out

    def predict(self, loader: Iterable) -> Tensor | list:
        """The model's outputs over ``loader`` in eval mode without gradients: batches
        ``(inputs, targets)`` or ``inputs``; the outputs joined along dim 0 (a list of
        per-batch outputs when they are not tensors of matching shapes)."""
        from ..ops.shape import cat
        was_training = self.model.training
        self.model.eval()
        outputs = []
        try:
            with grad_mode.no_grad(), self._autocast():
                for batch in loader:
                    inputs = batch[0] if isinstance(batch, (list, tuple)) else batch
                    outputs.append(self.model(batch_to(inputs, model_device(self.model))))
        finally:
            self.model.train(was_training)
        if outputs and all(isinstance(o, Tensor) and o.ndim > 0 for o in outputs) and \
                len({tuple(o.shape[1:]) for o in outputs}) == 1:
            return cat(outputs)
        return outputs

    def log(self, values: dict[str, float], step: int | None = None) -> None:
        """Record ``values`` (name -> number) at ``step`` (default: the global step):
        in :attr:`logged`, the :attr:`history` and every logger."""
        step = self.global_step if step is None else step
        values = {k: float(v) for k, v in values.items()}
        self.logged.update(values)
        self.history.append(values, step, self.epoch)
        for lg in self.loggers:
            lg.log_metrics(values, step)

    def position(self) -> tuple[int, int]:
        """``(epoch, batch)``: where training would continue (the next epoch, batch 0,
        once an epoch's end has run)."""
        if self._epoch_done:
            return self.epoch + 1, 0
        return self.epoch, self.batch_in_epoch

    # Checkpoints -----------------------------------------------------------------------
    def checkpoint(self) -> dict[str, Any]:
        """The full training state as a dict for :func:`ember.save` (see
        :mod:`ember.train.checkpoint`)."""
        return self._checkpoint(emergency=False)

    def save_checkpoint(self, path: str | os.PathLike) -> str:
        """Write :meth:`checkpoint` to ``path`` atomically; returns the path."""
        return write_checkpoint(self._checkpoint(emergency=False), path)

    def load_checkpoint(self, path: str | os.PathLike) -> None:
        """Restore everything from a checkpoint; the next :meth:`fit` continues exactly
        where the saved run stood."""
        state = read_checkpoint(path)
        restore_checkpoint(self, state, path)
        self._call("on_load_checkpoint", state)

    def _checkpoint(self, emergency: bool) -> dict[str, Any]:
        state = build_checkpoint(self, emergency)
        self._call("on_save_checkpoint", state)
        return state

    def _on_failure(self, exc: BaseException) -> None:
        for cb in self.callbacks:
            try:
                cb.on_exception(self, exc)
            except Exception as inner:  # the original error is the one to report
                exc.add_note(f"(ember.train: {type(cb).__name__}.on_exception raised "
                             f"{inner!r})")
        dirpath = self.checkpoint_dir or next(
            (cb.dirpath for cb in self.callbacks if getattr(cb, "dirpath", None)), None)
        if dirpath is None:
            return
        epoch, _ = self.position()
        path = os.path.join(dirpath, checkpoint_name(epoch, self.global_step, "emergency-"))
        try:
            write_checkpoint(self._checkpoint(emergency=True), path)
            exc.add_note(f"ember.train: emergency checkpoint written to {path}")
        except Exception as inner:
            exc.add_note(f"ember.train: writing the emergency checkpoint to {path} failed: "
                         f"{inner!r}")
        finally:
            self._in_step = False

    # The loop --------------------------------------------------------------------------
    def _generators(self):
        return loader_generators(self.train_loader)

    def _call(self, hook: str, *args) -> None:
        for cb in self.callbacks:
            getattr(cb, hook)(self, *args)

    def _finished(self) -> bool:
        return (self.should_stop
                or (self.max_steps is not None and self.global_step >= self.max_steps)
                or (self.max_epochs is not None and self.epoch >= self.max_epochs))

    def _fit_loop(self) -> None:
        n_batches = loader_length(self.train_loader)
        while not self._finished():
            self._call("on_epoch_start")
            batches = self._epoch_iterator()
            total = None if n_batches is None else -(-n_batches // self.grad_accumulation_steps)
            done = self.batch_in_epoch // self.grad_accumulation_steps
            self.progress.start_epoch(self.epoch, total, done)
            exhausted = self._train_epoch(batches, n_batches)
            if not exhausted:
                return  # stopped mid-epoch (max_steps or should_stop)
            self._end_epoch()

    def _epoch_iterator(self):
        resume, self._resume = self._resume, None
        gens = self._generators()
        if resume is None or resume["batch"] == 0:
            for m in self.train_metrics.values():
                m.reset()
            self._epoch_loss = [0.0, 0]
            self._epoch_start_rng = capture_rng(gens)
            return iter(self.train_loader)
        loader = self.train_loader
        if resume["loader"] is not None and callable(getattr(loader, "load_state_dict", None)):
            loader.load_state_dict(resume["loader"])
            batches = iter(loader)
        else:  # replay the epoch's order and skip what was consumed
            restore_rng(resume["epoch_start_rng"], gens)
            batches = iter(loader)
            for i in range(resume["batch"]):
                if next(batches, _END) is _END:
                    raise TrainerError(f"Trainer: the checkpoint stands at batch "
                                       f"{resume['batch']} of epoch {self.epoch}, but the "
                                       f"train loader gives only {i} batches; resume with "
                                       "the same data")
        restore_rng(resume["rng"], gens)
        self._epoch_start_rng = resume["epoch_start_rng"]
        return batches

    def _train_epoch(self, batches, n_batches: int | None) -> bool:
        """Run optimizer steps until the epoch ends (True) or training must stop
        (False)."""
        accum = self.grad_accumulation_steps
        gens = self._generators()
        while True:
            if n_batches is not None and self.batch_in_epoch >= n_batches:
                return True
            if self._finished():
                return False
            self._interrupts.check()
            self._step_start = (capture_rng(gens), self.batch_in_epoch)
            batch = next(batches, _END)
            if batch is _END:
                return True
            for lg in self.loggers:
                if lg.wants_graph:  # once, traced on the first batch's inputs
                    pair = self.training_step is None and isinstance(batch, (list, tuple)) \
                        and len(batch) == 2
                    lg.log_graph(self.model, (batch[0],) if pair else None)
            self._in_step = True
            self._call("on_step_start")
            losses, samples, exhausted, micro = [], 0, False, 0
            while True:
                self.batch_in_epoch += 1
                samples += batch_size(batch)
                last = micro == accum - 1 or (n_batches is not None
                                              and self.batch_in_epoch >= n_batches)
                with self.strategy.micro_step(last) if self.strategy else nullcontext():
                    losses.append(self._micro_step(batch, micro == 0))
                if last:
                    break
                micro += 1
                batch = next(batches, _END)
                if batch is _END:
                    exhausted = True
                    break
            if not self.compile:
                self._optimizer_step()
            elif accum > 1:
                self._compiled_fn("apply", self._traced_apply)()
            self._in_step = False
            self.global_step += 1
            self.last_loss = sum(losses) / len(losses)
            self._epoch_loss[0] += self.last_loss
            self._epoch_loss[1] += 1
            if self.scheduler is not None and self.scheduler_interval == "step":
                self._step_scheduler()
            if self.global_step % self.log_every_n_steps == 0:
                self.log({"train_loss_step": self.last_loss})
            self.progress.update(samples, {"loss": self.last_loss})
            self._call("on_step_end")
            if self.eval_every_n_steps and self.global_step % self.eval_every_n_steps == 0:
                self._validate()
            if exhausted:
                return True

    def _micro_step(self, batch, first: bool) -> float:
        """Forward and backward of one batch (compiled with one batch a step: the
        optimizer step too); returns its loss."""
        if self.compile:
            return self._compiled_micro_step(batch, first)
        if first:
            self.optimizer.zero_grad()
        if self._needs_closure:
            self._closure_batch = batch
        with self._autocast():
            loss, output, target = self._forward(batch)
        value = self._loss_value(loss)
        if not math.isfinite(value) and self.grad_scaler is None:
            raise self._non_finite(value)
        if self.grad_accumulation_steps > 1:
            loss = loss / self.grad_accumulation_steps
        if self.grad_scaler is not None:
            loss = self.grad_scaler.scale(loss)
        loss.backward()
        self._update_train_metrics(output, target)
        return value

    def _optimizer_step(self) -> None:
        scaler = self.grad_scaler
        if scaler is not None and (self.grad_clip_norm or self.grad_clip_value):
            scaler.unscale_(self.optimizer)
        self._clip()
        if self._needs_closure:
            self.optimizer.step(self._reevaluate)
            return
        if scaler is None:
            self.optimizer.step()
            return
        before = scaler.get_scale() if callable(getattr(scaler, "get_scale", None)) else None
        scaler.step(self.optimizer)
        scaler.update()
        if before is not None and scaler.get_scale() < before:
            self.skipped_steps += 1  # the scale backs off exactly when a step is skipped

    def _reevaluate(self):
        """LBFGS's closure: the loss of the step's batch again, with its gradients."""
        self.optimizer.zero_grad()
        with self._autocast():
            loss = self._forward(self._closure_batch)[0]
        loss.backward()
        self._clip()
        return loss

    def _clip(self) -> None:
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        if self.grad_clip_value is not None:
            clip_grad_value_(params, self.grad_clip_value)
        if self.grad_clip_norm is not None:
            clip_grad_norm_(params, self.grad_clip_norm)

    def _compiled_fn(self, kind: str, fn: Callable):
        compiled = self._compiled.get(kind)
        if compiled is None:
            from ..compiler import jit
            compiled = self._compiled[kind] = jit(fn)
        return compiled

    def _compiled_micro_step(self, batch, first: bool) -> float:
        fused = self.grad_accumulation_steps == 1  # the whole step is one graph
        fn = self._compiled_fn("step" if fused else "backward", self._traced_step)
        loss, output, target = fn(batch_to(batch, model_device(self.model)), first, fused)
        value = self._loss_value(loss)
        if not math.isfinite(value):
            raise self._non_finite(value, applied=fused)
        self._update_train_metrics(output, target)
        return value

    def _traced_step(self, batch, first: bool, apply: bool):
        if first:
            self.optimizer.zero_grad()
        with self._autocast():
            loss, output, target = self._forward(batch)
        self._check_scalar(loss)
        scaled = loss / self.grad_accumulation_steps if self.grad_accumulation_steps > 1 \
            else loss
        scaled.backward()
        if apply:
            self._traced_apply()
        keep = bool(self.train_metrics)
        return (loss.detach(), output.detach() if keep and output is not None else None,
                target if keep else None)

    def _traced_apply(self) -> None:
        self._clip()
        self.optimizer.step()

    def _step_scheduler(self) -> None:
        if type(self.scheduler).__name__ == "ReduceLROnPlateau":
            if self.scheduler_monitor not in self.logged:
                raise TrainerError(f"Trainer: ReduceLROnPlateau needs "
                                   f"scheduler_monitor={self.scheduler_monitor!r}, which "
                                   f"was not logged; logged: {sorted(self.logged)}")
            self.scheduler.step(self.logged[self.scheduler_monitor])
        else:
            self.scheduler.step()

    def _end_epoch(self) -> None:
        values = {}
        if self._epoch_loss[1]:
            values["train_loss"] = self._epoch_loss[0] / self._epoch_loss[1]
        for name, m in self.train_metrics.items():
            try:
                values[f"train_{name}"] = m.compute()
            except TrainerError:  # no outputs reached the metric (training_step)
                pass
        if values:
            self.log(values)
        if (self.val_loader is not None and self.eval_every_n_epochs
                and (self.epoch + 1) % self.eval_every_n_epochs == 0):
            self._validate()
        if self.scheduler is not None and self.scheduler_interval == "epoch":
            self._step_scheduler()
        for lg in self.loggers:
            lg.log_model(self.model, self.global_step)
        self._epoch_done = True
        self.progress.summary({k: v for k, v in self.logged.items()
                               if k.startswith(("train_", "val_")) and k != "train_loss_step"})
        self._call("on_epoch_end")
        self.epoch += 1
        self.batch_in_epoch = 0
        self._epoch_done = False
        self._epoch_start_rng = None  # (the next epoch's iterator is not made yet)

    def _validate(self) -> None:
        if self.val_loader is None:
            return
        self._call("on_validation_start")
        self.log(self.evaluate(self.val_loader))
        self._call("on_validation_end")

    # One batch -------------------------------------------------------------------------
    def _autocast(self):
        if self.autocast_dtype is None:
            return nullcontext()
        try:
            from .. import amp
        except ImportError:
            raise TrainerError("Trainer: autocast_dtype needs ember.amp, which this ember "
                               "does not have") from None
        return amp.autocast(model_device(self.model).type, dtype=self.autocast_dtype)

    def _forward(self, batch):
        """``(loss, output, target)`` of one batch (output/target None when unknown)."""
        batch = batch_to(batch, model_device(self.model))
        if self.training_step is not None:
            result = self.training_step(self.model, batch)
            if isinstance(result, dict):
                if "loss" not in result:
                    raise TrainerError(f"Trainer: training_step returned a dict without "
                                       f"'loss' (keys {sorted(result)})")
                loss, output, target = result["loss"], result.get("output"), \
                    result.get("target")
            else:
                loss, output, target = result, None, None
            self._check_scalar(loss)
            return loss, output, target
        if not (isinstance(batch, (list, tuple)) and len(batch) == 2):
            what = f"a {type(batch).__name__}" + (f" of length {len(batch)}"
                                                  if isinstance(batch, (list, tuple)) else "")
            raise TrainerError(f"Trainer: with loss_fn, each batch must be a pair (inputs, "
                               f"targets), got {what}; pass training_step=fn(model, batch) "
                               "for other batches")
        inputs, target = batch
        output = self.model(inputs)
        loss = self.loss_fn(output, target)
        self._check_scalar(loss)
        return loss, output, target

    def _check_scalar(self, loss) -> None:
        source = "training_step" if self.training_step is not None else "loss_fn"
        if not isinstance(loss, Tensor):
            raise TrainerError(f"Trainer: {source} must return a scalar ember.Tensor (the "
                               f"loss), got {type(loss).__name__}")
        if loss.ndim != 0:
            raise TrainerError(f"Trainer: {source} returned a loss of shape "
                               f"{tuple(loss.shape)}; expected a scalar (shape ()) — reduce "
                               "it, e.g. with .mean() or reduction='mean'")
        if not loss.dtype.is_floating_point:
            raise TrainerError(f"Trainer: {source} returned a loss of dtype "
                               f"{loss.dtype.name}; expected a floating-point scalar")

    @staticmethod
    def _loss_value(loss: Tensor) -> float:
        return float(loss.detach().item())

    def _update_train_metrics(self, output, target) -> None:
        if output is None or target is None:
            return
        for m in self.train_metrics.values():
            m.update(output.detach(), target)

    def _non_finite(self, value: float, applied: bool = False) -> NonFiniteLossError:
        where = (f"at step {self.global_step} (epoch {self.epoch}, batch "
                 f"{self.batch_in_epoch - 1} of the epoch)")
        note = (" The compiled step had already applied this step's update."
                if applied else " The step was not applied.")
        return NonFiniteLossError(
            f"Trainer: the loss is {value} {where}; training stopped.{note} Lower the "
            "learning rate, clip gradients (grad_clip_norm=...), check the data, or pass "
            "a grad_scaler to skip such steps", self.global_step, self.epoch,
            self.batch_in_epoch - 1)

    def _log_hyperparams(self) -> None:
        if not self.loggers:
            return
        params = {"optimizer": type(self.optimizer).__name__,
                  "lr": float(self.optimizer.param_groups[0]["lr"]),
                  "max_epochs": self.max_epochs, "max_steps": self.max_steps,
                  "grad_accumulation_steps": self.grad_accumulation_steps,
                  "grad_clip_norm": self.grad_clip_norm, "compile": self.compile,
                  "batch_size": getattr(self.train_loader, "batch_size", None),
                  **self.hparams}
        for lg in self.loggers:
            lg.log_hyperparams(params)

    def __repr__(self) -> str:
        return (f"Trainer(model={type(self.model).__name__}, optimizer="
                f"{type(self.optimizer).__name__}, epoch={self.epoch}, "
                f"global_step={self.global_step})")
