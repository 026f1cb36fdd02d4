"""``LRScheduler``, the base class of the learning-rate schedulers (see
:mod:`ember.optim.lr_scheduler`)."""
from __future__ import annotations

import functools
import types
import warnings
import weakref
from typing import Any, Callable, Iterable

from ..errors import EmberTypeError
from ..ops import registry
from ..tensor import Tensor
from .optimizer import Optimizer, OptimizerError

EPOCH_DEPRECATED = ("passing an epoch to scheduler.step() is deprecated (as in PyTorch) and "
                     "will be removed; call step() without arguments once per epoch")


def check_optimizer(owner: str, optimizer) -> None:
    if not isinstance(optimizer, Optimizer):
        raise EmberTypeError(f"{owner}: expected an ember.optim.Optimizer, got "
                             f"{type(optimizer).__name__}")


def callable_state(fn) -> dict[str, Any] | None:
    """What a scheduler's state dict keeps of a user function: nothing (``None``) for a
    plain function or lambda, the attribute dict of a callable object (its settings)."""
    if fn is None or isinstance(fn, types.FunctionType) or not hasattr(fn, "__dict__"):
        return None
    return dict(fn.__dict__)


def per_group(owner: str, name: str, optimizer: Optimizer, value) -> list:
    """``value`` for each parameter group: a list of that length, or one value for all."""
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise OptimizerError(f"{owner}: {name} has {len(value)} values, but the optimizer "
                                 f"has {n} parameter groups")
        return list(value)
    return [value] * n


def deferred_while_tracing(step: Callable) -> Callable:
    """Wrap a scheduler's ``step``: called inside a function that ember.jit is tracing,
    it does not run then (a trace runs once) but at every call of the compiled function,
    after its graph (see ``Trace.host_call``), so the next call reads the new rates."""
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        trace = registry._trace
        if trace is None or getattr(self, "_is_initial", False):
            return step(self, *args, **kwargs)
        for value in (*args, *kwargs.values()):
            if isinstance(value, Tensor) and getattr(value._data, "_ember_tracer", False):
                raise _traced_argument_error(self, value)
        if trace.scalars:  # (the call runs after the graph: see _check_schedule_order)
            optimizer = getattr(self, "optimizer", None)
            if isinstance(optimizer, Optimizer):
                optimizer._deferred_schedule = (weakref.ref(trace), type(self).__name__)
        trace.host_call(functools.partial(wrapper, self, *args, **kwargs))
        return None
    wrapper._ember_deferred = True
    return wrapper


def _traced_argument_error(scheduler, value: Tensor):
    from ..compiler.trace import TraceError  # (only on this error path)
    name = type(scheduler).__name__
    return TraceError(
        f"{name}.step() was given a tensor computed inside a function ember.jit is "
        f"tracing ({value.dtype.name}{list(value.shape)}); its value is known only when "
        f"the compiled graph runs, and a scheduler's step is plain Python run before or "
        f"after the graph. Call {name}.step() outside the compiled function, with the "
        f"value it returns (e.g. loss = compiled_step(x, y); scheduler.step(loss)), or "
        f"compile with ember.jit(fn, fallback=True) to run the function eagerly.")


class LRScheduler:
    """Base class of the learning-rate schedulers.

    A subclass implements ``get_lr()``: the new learning rate of each parameter group,
    computed from ``self.last_epoch`` (already advanced) and, for chainable schedules,
    the current ``group["lr"]``. Building a scheduler takes the first step, so the
    optimizer's ``lr`` is the schedule's value at epoch 0 right away.

    Args:
        optimizer: the wrapped optimizer.
        last_epoch: the index of the last epoch when resuming (the groups must then
            hold ``initial_lr``); -1 to start afresh.
    """

    def __init_subclass__(cls, **kwargs) -> None:
        # Every schedule's step is deferred to the compiled call inside ember.jit.
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_ember_deferred", False):
            cls.step = deferred_while_tracing(step)

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        check_optimizer(type(self).__name__, optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   "when resuming an optimizer")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self._get_lr_called_within_step = False
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list[float]:
        """The learning rates of the current epoch; use :meth:`get_last_lr` to read them."""
        raise NotImplementedError(f"{type(self).__name__} does not implement get_lr()")

    def _compute_lr(self) -> list[float]:
        self._get_lr_called_within_step = True
        try:
            return self.get_lr()
        finally:
            self._get_lr_called_within_step = False

    def _warn_outside_step(self) -> None:
        if not self._get_lr_called_within_step:
            warnings.warn("to get the last learning rate computed by the scheduler, use "
                          "get_last_lr()", UserWarning, stacklevel=3)

    def get_last_lr(self) -> list[float]:
        """The learning rate of each parameter group set by the last ``step()``."""
        return self._last_lr

    @deferred_while_tracing
    def step(self, epoch: int | None = None) -> None:
        """Advance the schedule one epoch and write the new learning rates into the
        optimizer. (``epoch`` jumps to that epoch; deprecated, as in PyTorch.)

        Inside a function compiled with ``ember.jit``, the step runs at every call of
        the compiled function, after its graph, as it would eagerly."""
        if self._step_count == 1 and not self.optimizer._opt_called:
            warnings.warn(f"{type(self).__name__}.step() was called before optimizer.step(); "
                          "call optimizer.step() first, or the schedule's first value is "
                          "skipped", UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self._compute_lr()
        else:
            warnings.warn(EPOCH_DEPRECATED, UserWarning, stacklevel=2)
            values = self._jump_to(epoch)
        self._set_lrs(values)

    def _jump_to(self, epoch: int) -> list[float]:
        """The learning rates at ``epoch`` (closed form where the schedule has one)."""
        self.last_epoch = epoch
        closed_form = getattr(self, "_get_closed_form_lr", None)
        return closed_form() if closed_form is not None else self._compute_lr()

    def _set_lrs(self, values: Iterable[float]) -> None:
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        """The scheduler's state: every attribute except the optimizer."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a state from :meth:`state_dict`."""
        self.__dict__.update(state_dict)
