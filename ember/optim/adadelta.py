"""Adadelta: steps scaled by running averages of squared gradients and of squared
updates, so no learning rate needs tuning (Zeiler, 2012)."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from ..autograd.grad_mode import no_grad
from ..ops.creation import zeros_like
from .optimizer import (Optimizer, OptimizerError, check_non_negative, check_unsupported,
                        hyper, step_counter)

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    r"""Adadelta.

    Each step, with :math:`g` the gradient (negated when ``maximize``)::

        g = g + weight_decay * p
        v = rho * v + (1 - rho) * g * g
        d = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho * u + (1 - rho) * d * d
        p = p - lr * d

    Args:
        params: tensors or parameter groups to optimize.
        lr: coefficient scaling the update.
        rho: decay rate of the running averages.
        eps: added inside the square roots for numerical stability.
        weight_decay: L2 penalty added to the gradient.
        foreach: accepted for PyTorch compatibility; ember has one implementation.
        maximize: ascend the objective instead of descending it.
        capturable, differentiable: must stay False (not supported).

    State per parameter: ``step``, ``square_avg`` and ``acc_delta``.

    >>> opt = ember.optim.Adadelta(model.parameters())
    """

    def __init__(self, params: Iterable, lr: float = 1.0, rho: float = 0.9,
                 eps: float = 1e-6, weight_decay: float = 0, foreach: bool | None = None, *,
                 capturable: bool = False, maximize: bool = False,
                 differentiable: bool = False) -> None:
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                        maximize=maximize, capturable=capturable, foreach=foreach,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        check_non_negative("Adadelta", group, "lr", "eps", "weight_decay")
        if not 0.0 <= group["rho"] <= 1.0:
            raise OptimizerError(f"Adadelta: invalid rho {group['rho']!r}; expected "
                                 "0 <= rho <= 1")
        check_unsupported("Adadelta", group, "capturable", "differentiable")

    def step(self, closure: Callable[[], Any] | None = None):
        """Perform one update; returns the closure's loss if a closure is given."""
        loss = self._evaluate(closure)
        with no_grad():
            for group in self.param_groups:
                lr, rho, eps = hyper(group), group["rho"], group["eps"]
                weight_decay = group["weight_decay"]
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["step"] = step_counter()
                        state["square_avg"] = zeros_like(p)
                        state["acc_delta"] = zeros_like(p)
                    state["step"].add_(1)
                    if group["maximize"]:
                        grad = -grad
                    if weight_decay != 0:
                        grad = grad.add(p, alpha=weight_decay)
                    square_avg, acc_delta = state["square_avg"], state["acc_delta"]
                    square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
                    std = square_avg.add(eps).sqrt_()
                    delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
                    acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
                    p.add_(delta, alpha=-lr)
        return loss
