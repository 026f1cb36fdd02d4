"""Stochastic gradient descent, with momentum, Nesterov momentum and weight decay."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from ..autograd.grad_mode import no_grad
from ..ops.creation import zeros_like
from .optimizer import (Optimizer, OptimizerError, check_non_negative, check_unsupported,
                        hyper, option)

__all__ = ["SGD"]


class SGD(Optimizer):
    r"""Stochastic gradient descent (optionally with momentum).

    Each step, with :math:`g` the gradient (negated when ``maximize``)::

        g = g + weight_decay * p
        b = g                                         (first step)
        b = momentum * b + (1 - dampening) * g        (later steps)
        g = g + momentum * b   if nesterov   else   b (when momentum != 0)
        p = p - lr * g

    Args:
        params: tensors or parameter groups to optimize.
        lr: learning rate.
        momentum: momentum factor.
        dampening: dampening of the momentum.
        weight_decay: L2 penalty added to the gradient.
        nesterov: use Nesterov momentum (needs momentum > 0 and no dampening).
        maximize: ascend the objective instead of descending it.
        foreach: accepted for PyTorch compatibility; ember has one implementation.
        differentiable, fused: must stay False/None (not supported).

    State: ``momentum_buffer`` per parameter when momentum != 0.

    >>> opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    >>> opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
    """

    def __init__(self, params: Iterable, lr: float = 1e-3, momentum: float = 0,
                 dampening: float = 0, weight_decay: float = 0, nesterov: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        check_non_negative("SGD", group, "lr", "momentum", "weight_decay")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise OptimizerError("SGD: Nesterov momentum requires a momentum and zero "
                                 f"dampening, got momentum={group['momentum']} and "
                                 f"dampening={group['dampening']}")
        check_unsupported("SGD", group, "differentiable", "fused")

    def step(self, closure: Callable[[], Any] | None = None):
        """Perform one update; returns the closure's loss if a closure is given."""
        loss = self._evaluate(closure)
        with no_grad():
            for group in self.param_groups:
                lr, dampening = hyper(group), group["dampening"]
                momentum = option(self, group, "momentum")
                weight_decay, nesterov = group["weight_decay"], group["nesterov"]
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    if group["maximize"]:
                        grad = -grad
                    if weight_decay != 0:
                        grad = grad.add(p, alpha=weight_decay)
                    if group["momentum"] != 0:
                        state = self.state[p]
                        buf = state.get("momentum_buffer")
                        if buf is None:  # (made from zeros so that ember.jit sees state)
                            buf = state["momentum_buffer"] = zeros_like(p).copy_(grad)
                        else:
                            buf.mul_(momentum).add_(grad, alpha=1 - dampening)
                        grad = grad.add(buf, alpha=momentum) if nesterov else buf
                    p.add_(grad, alpha=-lr)
        return loss
