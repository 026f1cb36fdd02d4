"""Stochastic weight averaging and EMA: :class:`AveragedModel` (a running average of a
model's weights), :class:`SWALR` (anneal the learning rate to a constant for the
averaging phase) and :func:`update_bn` (recompute BatchNorm statistics for the
averaged weights), with PyTorch's names, formulas and state dicts.

>>> swa_model = AveragedModel(model)
>>> swa_scheduler = SWALR(optimizer, swa_lr=0.05)
>>> for epoch in range(100):
...     train_one_epoch(model, optimizer)
...     if epoch >= 75:
...         swa_model.update_parameters(model); swa_scheduler.step()
>>> update_bn(train_loader, swa_model)
"""
from __future__ import annotations

import copy
import itertools
import math
from typing import Any, Callable, Iterable

from .. import dtypes
from ..autograd.grad_mode import no_grad
from ..errors import EmberValueError
from ..nn.layers.normalization import _BatchNorm
from ..nn.module import Module
from ..ops import registry
from ..ops.creation import tensor
from ..ops.elementwise import lerp
from ..tensor import Tensor
from ._lr_base import LRScheduler, check_optimizer
from .optimizer import Optimizer, OptimizerError

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn",
           "get_swa_multi_avg_fn", "get_ema_avg_fn", "get_swa_avg_fn"]


def _check_decay(owner: str, decay: float) -> None:
    if decay < 0.0 or decay > 1.0:
        raise EmberValueError(f"{owner}: Invalid decay value {decay} provided. Please "
                              "provide a value in [0,1] range.")


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable:
    """An ``AveragedModel`` ``multi_avg_fn`` for an exponential moving average: each
    averaged tensor becomes ``decay * averaged + (1 - decay) * current``, in place.

    Args:
        decay: the weight of the old average, in [0, 1].

    >>> ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))
    """
    _check_decay("get_ema_multi_avg_fn", decay)

    def ema_update(ema_param_list, current_param_list, _num_averaged) -> None:
        with no_grad():
            if ema_param_list[0].is_floating_point():
                for p_ema, p_model in zip(ema_param_list, current_param_list):
                    p_ema.copy_(lerp(p_ema, p_model, 1 - decay))
            else:
                for p_ema, p_model in zip(ema_param_list, current_param_list):
                    p_ema.copy_(p_ema * decay + p_model * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn() -> Callable:
    """An ``AveragedModel`` ``multi_avg_fn`` for the equal-weight average of every model
    seen: ``averaged += (current - averaged) / (num_averaged + 1)``, in place.

    >>> swa = AveragedModel(model, multi_avg_fn=get_swa_multi_avg_fn())
    """
    def swa_update(averaged_param_list, current_param_list, num_averaged) -> None:
        with no_grad():
            if averaged_param_list[0].is_floating_point():
                weight = 1 / (num_averaged + 1)
                for p_avg, p_model in zip(averaged_param_list, current_param_list):
                    p_avg.copy_(lerp(p_avg, p_model, weight))
                return
            for p_avg, p_model in zip(averaged_param_list, current_param_list):
                diff = p_model - p_avg
                if isinstance(num_averaged, Tensor):
                    p_avg.addcdiv_(diff, num_averaged + 1)
                else:
                    p_avg.add_(diff, alpha=1.0 / (num_averaged + 1))
    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable:
    """An ``AveragedModel`` ``avg_fn`` for an exponential moving average of one tensor:
    returns ``decay * averaged + (1 - decay) * current``.

    >>> ema = AveragedModel(model, avg_fn=get_ema_avg_fn(0.99))
    """
    _check_decay("get_ema_avg_fn", decay)

    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        with no_grad():
            return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn() -> Callable:
    """An ``AveragedModel`` ``avg_fn`` for the equal-weight average of one tensor:
    returns ``averaged + (current - averaged) / (num_averaged + 1)``."""
    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        with no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` whose weights are a running average of ``model``'s, for
    stochastic weight averaging (SWA, Izmailov et al., 2018) or an exponential moving
    average (EMA).

    The first :meth:`update_parameters` copies the model's weights; each later one
    folds them into the average with ``multi_avg_fn`` (a function of lists of tensors,
    updating in place), or ``avg_fn`` (one tensor at a time, returning the new value),
    or, with neither, the equal-weight average. Calling the averaged model runs the
    copy.

    Args:
        model: the model to average.
        device: where to keep the copy (default: where the model is).
        avg_fn: ``avg_fn(averaged, current, num_averaged) -> new averaged``.
        multi_avg_fn: ``multi_avg_fn(averaged_list, current_list, num_averaged)``,
            in place (called once per device and dtype).
        use_buffers: average the buffers too (BatchNorm statistics); otherwise they
            are copied from the model at every update.

    State dict: the model's keys under ``module.``, and ``n_averaged`` (an int64
    0-d tensor counting the updates).

    >>> ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))
    >>> for x, y in loader:
    ...     train_step(x, y); ema.update_parameters(model)
    >>> ema(x_test)
    """

    def __init__(self, model: Module, device=None, avg_fn: Callable | None = None,
                 multi_avg_fn: Callable | None = None, use_buffers: bool = False) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise EmberValueError("AveragedModel: Only one of avg_fn and multi_avg_fn "
                                  "should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=dtypes.int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        """Run the averaged copy of the model."""
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        """Fold ``model``'s current weights into the average (the first call copies
        them). Not inside ``ember.jit``: call it after the compiled training step."""
        if registry._trace is not None:
            from ..compiler.trace import TraceError  # (only on this error path)
            raise TraceError("ember.jit: AveragedModel.update_parameters cannot be "
                             "compiled: whether it copies or averages depends on "
                             "n_averaged's value. Call it outside the compiled function "
                             "(after the compiled training step), or use ember.jit(fn, "
                             "fallback=True) to run the function eagerly.")
        if self.use_buffers:
            averaged = itertools.chain(self.module.parameters(), self.module.buffers())
            current = itertools.chain(model.parameters(), model.buffers())
        else:
            averaged, current = self.parameters(), model.parameters()
        with no_grad():
            first = bool(self.n_averaged == 0)
            pairs = []
            for p_avg, p_model in zip(averaged, current):
                p_avg = p_avg.detach()
                p_model = p_model.detach().to(p_avg.device)
                pairs.append((p_avg, p_model))
                if first:
                    p_avg.copy_(p_model)
            if self.n_averaged > 0:
                self._average(pairs)
            if not self.use_buffers:  # the buffers follow the model
                for b_avg, b_model in zip(self.module.buffers(), model.buffers()):
                    b_avg.detach().copy_(b_model.detach().to(b_avg.device))
            self.n_averaged += 1

    def _average(self, pairs: list) -> None:
        if self.avg_fn is not None and self.multi_avg_fn is None:
            for p_avg, p_model in pairs:
                n = self.n_averaged.to(p_avg.device)
                p_avg.copy_(self.avg_fn(p_avg, p_model, n))
            return
        # one call per (device, dtype), in the order the tensors first appear
        groups: dict = {}
        for p_avg, p_model in pairs:
            averaged, current = groups.setdefault((str(p_avg.device), p_avg.dtype), ([], []))
            averaged.append(p_avg)
            current.append(p_model)
        for averaged, current in groups.values():
            n = self.n_averaged.to(averaged[0].device)
            if self.multi_avg_fn is not None:
                self.multi_avg_fn(averaged, current, n)
            else:
                swa = get_swa_avg_fn()
                for p_avg, p_model in zip(averaged, current):
                    p_avg.copy_(swa(p_avg, p_model, n))


def update_bn(loader: Iterable, model: Module, device=None) -> None:
    """Recompute the running statistics of ``model``'s BatchNorm layers with one pass
    over ``loader`` (an exact average over its batches), as the averaged weights of
    SWA need. Does nothing for a model without BatchNorm.

    Args:
        loader: batches: tensors, or lists/tuples whose first item is the input.
        model: the model (e.g. an :class:`AveragedModel`).
        device: where to move each input first (default: leave it).

    >>> update_bn(train_loader, swa_model)
    """
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None  # a cumulative average over the pass
    try:
        with no_grad():
            for batch in loader:
                if isinstance(batch, (list, tuple)):
                    batch = batch[0]
                if device is not None:
                    batch = batch.to(device)
                model(batch)
    finally:
        for module, momentum in momenta.items():
            module.momentum = momentum
        model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each parameter group's learning rate from its current value to
    ``swa_lr`` over ``anneal_epochs`` steps, then hold it there (the constant rate of
    stochastic weight averaging).

    Each step, with ``t = min(1, step / max(1, anneal_epochs))`` and ``a(t)`` the
    annealing curve (``"cos"``: ``(1 - cos(pi t)) / 2``; ``"linear"``: ``t``), the rate is
    ``swa_lr * a(t) + lr0 * (1 - a(t))``, where ``lr0`` is recovered from the current
    rate, so SWALR can take over from another schedule.

    Args:
        optimizer: the wrapped optimizer.
        swa_lr: the final learning rate, for all groups or one per group.
        anneal_epochs: steps of the annealing phase (0: jump at once).
        anneal_strategy: ``"cos"`` or ``"linear"``.
        last_epoch: the index of the last epoch when resuming.

    >>> scheduler = SWALR(optimizer, swa_lr=0.05, anneal_epochs=5, anneal_strategy="linear")
    """

    def __init__(self, optimizer: Optimizer, swa_lr: float | list[float],
                 anneal_epochs: int = 10, anneal_strategy: str = "cos",
                 last_epoch: int = -1) -> None:
        check_optimizer("SWALR", optimizer)
        n = len(optimizer.param_groups)
        if isinstance(swa_lr, (list, tuple)):
            if len(swa_lr) != n:
                raise OptimizerError(f"SWALR: swa_lr must have the same length as "
                                     f"optimizer.param_groups. swa_lr has {len(swa_lr)} "
                                     f"values, param_groups has {n}.")
            swa_lrs = list(swa_lr)
        else:
            swa_lrs = [swa_lr] * n
        for value, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = value.clone() if isinstance(value, Tensor) else value
        if anneal_strategy not in ("cos", "linear"):
            raise OptimizerError("SWALR: anneal_strategy must be one of 'cos' or 'linear', "
                                 f"instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise OptimizerError(f"SWALR: anneal_epochs must be equal or greater than 0, "
                                 f"got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t: float) -> float:
        return t

    @staticmethod
    def _cosine_anneal(t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        """The rate annealing started from, given the rate ``lr`` at weight ``alpha``."""
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def _set_anneal_func(self, anneal_strategy: str) -> None:
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else \
            self._linear_anneal

    def get_lr(self) -> list[float]:
        self._warn_outside_step()
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        span = max(1, self.anneal_epochs)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / span)))
        start_lrs = [self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha)
                     for group in self.optimizer.param_groups]
        alpha = self.anneal_func(max(0, min(1, step / span)))
        return [group["swa_lr"] * alpha + lr * (1 - alpha)
                for group, lr in zip(self.optimizer.param_groups, start_lrs)]

    def state_dict(self) -> dict[str, Any]:
        """The scheduler's state: every attribute except the optimizer and the annealing
        function (kept as its name, ``_anneal_strategy``)."""
        return {k: v for k, v in self.__dict__.items()
                if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a state from :meth:`state_dict`."""
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
