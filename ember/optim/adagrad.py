"""Adagrad: per-coordinate learning rates from the sum of squared gradients."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from ..autograd.grad_mode import no_grad
from ..ops.creation import full_like
from .optimizer import (Optimizer, check_non_negative, check_unsupported, count, hyper,
                        step_counter)

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    r"""Adagrad (Duchi et al., 2011).

    Each step ``t``, with :math:`g` the gradient (negated when ``maximize``)::

        g = g + weight_decay * p
        s = s + g * g
        p = p - lr / (1 + (t - 1) * lr_decay) * g / (sqrt(s) + eps)

    Args:
        params: tensors or parameter groups to optimize.
        lr: learning rate.
        lr_decay: learning-rate decay per step.
        weight_decay: L2 penalty added to the gradient.
        initial_accumulator_value: starting value of the sum ``s``.
        eps: added to the denominator for numerical stability.
        foreach: accepted for PyTorch compatibility; ember has one implementation.
        maximize: ascend the objective instead of descending it.
        differentiable, fused: must stay False/None (not supported).

    State per parameter, made when the optimizer is built (as PyTorch does): ``step`` and
    ``sum``.

    >>> opt = ember.optim.Adagrad(model.parameters(), lr=1e-2)
    """

    def __init__(self, params: Iterable, lr: float = 1e-2, lr_decay: float = 0,
                 weight_decay: float = 0, initial_accumulator_value: float = 0,
                 eps: float = 1e-10, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group)

    def _init_state(self, p, group: dict[str, Any]) -> None:
        state = self.state[p]
        state["step"] = step_counter()
        state["sum"] = full_like(p, group["initial_accumulator_value"])

    def _check_group(self, group: dict[str, Any]) -> None:
        check_non_negative("Adagrad", group, "lr", "lr_decay", "weight_decay",
                           "initial_accumulator_value", "eps")
        check_unsupported("Adagrad", group, "differentiable", "fused")

    def step(self, closure: Callable[[], Any] | None = None):
        """Perform one update; returns the closure's loss if a closure is given."""
        loss = self._evaluate(closure)
        with no_grad():
            for group in self.param_groups:
                lr, lr_decay, eps = hyper(group), group["lr_decay"], group["eps"]
                weight_decay = group["weight_decay"]
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    state = self.state[p]
                    if not state:  # a parameter added with add_param_group
                        self._init_state(p, group)
                    step = count(state["step"].add_(1))
                    if group["maximize"]:
                        grad = -grad
                    if weight_decay != 0:
                        grad = grad.add(p, alpha=weight_decay)
                    clr = lr / (1 + (step - 1) * lr_decay)
                    state_sum = state["sum"]
                    state_sum.addcmul_(grad, grad, value=1)
                    p.addcdiv_(grad, state_sum.sqrt().add_(eps), value=-clr)
        return loss
