"""ASGD: averaged stochastic gradient descent (Polyak-Ruppert averaging)."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from ..autograd.grad_mode import no_grad
from ..ops import registry
from ..ops.creation import tensor, zeros_like
from ..ops.elementwise import where
from ..tensor import Tensor
from .optimizer import (Optimizer, OptimizerError, check_unsupported, count, hyper,
                        scalar_dtype, step_counter)

__all__ = ["ASGD"]


class ASGD(Optimizer):
    r"""Averaged SGD (Polyak & Juditsky, 1992), with PyTorch's step-size schedule.

    SGD with a decaying step size ``eta`` and a weight-decay-like shrink ``lambd``,
    which also keeps ``ax``, a running average of the parameters taken from step
    ``t0`` on (the averaged weights are the result to evaluate with). Each step ``t``,
    with :math:`g` the gradient (negated when ``maximize``)::

        g = g + weight_decay * p
        p = p * (1 - lambd * eta) - eta * g
        ax = ax + mu * (p - ax)                  (ax = p while mu == 1)
        eta = lr / (1 + lambd * lr * t) ^ alpha
        mu = 1 / max(1, t - t0)

    ``eta`` and ``mu`` are 0-d tensors of the ``step`` dtype (float32 unless the default
    dtype is float64), so their values are rounded to it, as in PyTorch.

    Args:
        params: tensors or parameter groups to optimize.
        lr: learning rate.
        lambd: decay term.
        alpha: power of the step-size decay.
        t0: the step at which averaging starts.
        weight_decay: L2 penalty added to the gradient.
        foreach: accepted for PyTorch compatibility; ember has one implementation.
        maximize: ascend the objective instead of descending it.
        capturable, differentiable: must stay False (not supported; ember.jit compiles
            the step without them).

    State per parameter: ``step``, ``eta``, ``mu`` (0-d float tensors) and ``ax``.

    >>> opt = ember.optim.ASGD(model.parameters(), lr=0.01, t0=100)
    >>> averaged = [opt.state[p]["ax"] for p in model.parameters()]
    """

    def __init__(self, params: Iterable, lr: float = 1e-2, lambd: float = 1e-4,
                 alpha: float = 0.75, t0: float = 1e6, weight_decay: float = 0,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        if not 0.0 <= group["lr"]:
            raise OptimizerError(f"ASGD: Invalid learning rate: {group['lr']}")
        if not 0.0 <= group["weight_decay"]:
            raise OptimizerError(f"ASGD: Invalid weight_decay value: {group['weight_decay']}")
        check_unsupported("ASGD", group, "capturable", "differentiable")

    def step(self, closure: Callable[[], Any] | None = None):
        """Perform one update; returns the closure's loss if a closure is given."""
        loss = self._evaluate(closure)
        eager = registry._trace is None
        with no_grad():
            for group in self.param_groups:
                lr, lambd, alpha = hyper(group), group["lambd"], group["alpha"]
                t0, weight_decay = group["t0"], group["weight_decay"]
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["step"] = step_counter()
                        state["eta"] = tensor(float(group["lr"]), dtype=scalar_dtype())
                        state["mu"] = tensor(1.0, dtype=scalar_dtype())
                        state["ax"] = zeros_like(p)
                    if group["maximize"]:
                        grad = -grad
                    step_t, eta, mu, ax = state["step"], state["eta"], state["mu"], state["ax"]
                    step_t.add_(1)
                    if weight_decay != 0:
                        grad = grad.add(p, alpha=weight_decay)
                    eta_value = count(eta)
                    p.mul_(1 - lambd * eta_value)
                    p.add_(grad, alpha=-eta_value)
                    mu_value = count(mu)
                    if not eager:  # (the eager branch below, without reading mu)
                        ax.copy_(where(mu_value == 1, p, ax + p.sub(ax).mul_(mu_value)))
                    elif mu_value != 1:
                        ax.add_(p.sub(ax).mul_(mu_value))
                    else:
                        ax.copy_(p)
                    step = count(step_t)
                    _store(eta, lr / ((1 + lambd * lr * step) ** alpha))
                    _store(mu, 1 / _at_least_one(step - t0))
        return loss

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """As :meth:`Optimizer.load_state_dict`; ``eta`` and ``mu`` keep the dtype of
        the ``step`` counter (PyTorch casts them to the parameter's dtype, so its
        resumed runs drift from uninterrupted ones; ember's continue identically)."""
        super().load_state_dict(state_dict)
        for state in self.state.values():
            step = state.get("step") if isinstance(state, dict) else None
            if not isinstance(step, Tensor):
                continue
            for key in ("eta", "mu"):
                if isinstance(state.get(key), Tensor):
                    state[key] = state[key].to(dtype=step.dtype)


def _store(target: Tensor, value) -> None:
    """Write a number (eagerly) or a traced 0-d tensor into a 0-d state tensor."""
    if isinstance(value, Tensor):
        target.copy_(value)
    else:
        target.fill_(value)


def _at_least_one(x):
    """``max(1, x)`` of a number or of a traced 0-d tensor."""
    return x.clamp(min=1) if isinstance(x, Tensor) else max(1, x)
