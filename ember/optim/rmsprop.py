"""RMSprop: divide the gradient by a running root mean square of recent gradients."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from ..autograd.grad_mode import no_grad
from ..ops.creation import zeros_like
from .optimizer import (Optimizer, check_non_negative, check_unsupported, hyper, option,
                        step_counter)

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    r"""RMSprop (Hinton's lecture 6e; centered form from Graves, 2013).

    Each step, with :math:`g` the gradient (negated when ``maximize``)::

        g = g + weight_decay * p
        v = alpha * v + (1 - alpha) * g * g
        a = alpha * a + (1 - alpha) * g            (centered)
        d = sqrt(v - a * a) + eps   if centered   else   sqrt(v) + eps
        b = momentum * b + g / d;   p = p - lr * b (momentum > 0)
        p = p - lr * g / d                         (otherwise)

    Args:
        params: tensors or parameter groups to optimize.
        lr: learning rate.
        alpha: smoothing constant of the running averages.
        eps: added to the denominator for numerical stability.
        weight_decay: L2 penalty added to the gradient.
        momentum: momentum factor.
        centered: normalise by an estimate of the gradient's variance.
        foreach: accepted for PyTorch compatibility; ember has one implementation.
        maximize: ascend the objective instead of descending it.
        capturable, differentiable: must stay False (not supported).

    State per parameter: ``step``, ``square_avg``, and ``momentum_buffer`` (momentum > 0)
    and ``grad_avg`` (centered).

    >>> opt = ember.optim.RMSprop(model.parameters(), lr=1e-2, momentum=0.9)
    """

    def __init__(self, params: Iterable, lr: float = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0, momentum: float = 0,
                 centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        check_non_negative("RMSprop", group, "lr", "eps", "momentum", "weight_decay",
                           "alpha")
        check_unsupported("RMSprop", group, "capturable", "differentiable")

    def step(self, closure: Callable[[], Any] | None = None):
        """Perform one update; returns the closure's loss if a closure is given."""
        loss = self._evaluate(closure)
        with no_grad():
            for group in self.param_groups:
                lr, alpha, eps = hyper(group), group["alpha"], group["eps"]
                weight_decay = group["weight_decay"]
                momentum = option(self, group, "momentum")
                centered = group["centered"]
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["step"] = step_counter()
                        state["square_avg"] = zeros_like(p)
                        if group["momentum"] > 0:
                            state["momentum_buffer"] = zeros_like(p)
                        if centered:
                            state["grad_avg"] = zeros_like(p)
                    if group["maximize"]:
                        grad = -grad
                    state["step"].add_(1)
                    if weight_decay != 0:
                        grad = grad.add(p, alpha=weight_decay)
                    square_avg = state["square_avg"]
                    square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
                    if centered:
                        grad_avg = state["grad_avg"]
                        grad_avg.lerp_(grad, 1 - alpha)
                        avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
                    else:
                        avg = square_avg.sqrt()
                    avg.add_(eps)
                    if group["momentum"] > 0:
                        buf = state["momentum_buffer"]
                        buf.mul_(momentum).addcdiv_(grad, avg)
                        p.add_(buf, alpha=-lr)
                    else:
                        p.addcdiv_(grad, avg, value=-lr)
        return loss
