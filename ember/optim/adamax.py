"""Adamax: Adam with the infinity norm in place of the second moment."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from ..autograd.grad_mode import no_grad
from ..ops.creation import zeros_like
from ..ops.elementwise import maximum
from .optimizer import (Optimizer, check_betas, check_non_negative, check_unsupported,
                        count, hyper, option, step_counter)

__all__ = ["Adamax"]


class Adamax(Optimizer):
    r"""Adamax, the infinity-norm variant of Adam (Kingma & Ba, 2014, section 7).

    Each step ``t``, with :math:`g` the gradient (negated when ``maximize``)::

        g = g + weight_decay * p
        m = beta1 * m + (1 - beta1) * g
        u = max(beta2 * u, |g| + eps)
        p = p - lr / (1 - beta1^t) * m / u

    Args:
        params: tensors or parameter groups to optimize.
        lr: learning rate.
        betas: decay rates of the gradient average and of the infinity norm.
        eps: added to ``|g|`` for numerical stability.
        weight_decay: L2 penalty added to the gradient.
        foreach: accepted for PyTorch compatibility; ember has one implementation.
        maximize: ascend the objective instead of descending it.
        differentiable, capturable: must stay False (not supported).

    State per parameter: ``step``, ``exp_avg`` and ``exp_inf``.

    >>> opt = ember.optim.Adamax(model.parameters(), lr=2e-3)
    """

    def __init__(self, params: Iterable, lr: float = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        check_non_negative("Adamax", group, "lr", "eps", "weight_decay")
        check_betas("Adamax", group["betas"])
        check_unsupported("Adamax", group, "differentiable", "capturable")

    def step(self, closure: Callable[[], Any] | None = None):
        """Perform one update; returns the closure's loss if a closure is given."""
        loss = self._evaluate(closure)
        with no_grad():
            for group in self.param_groups:
                lr, eps, weight_decay = hyper(group), group["eps"], group["weight_decay"]
                beta1, beta2 = option(self, group, "betas")
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["step"] = step_counter()
                        state["exp_avg"] = zeros_like(p)
                        state["exp_inf"] = zeros_like(p)
                    if group["maximize"]:
                        grad = -grad
                    step_t = state["step"]
                    step_t.add_(1)
                    if weight_decay != 0:
                        grad = grad.add(p, alpha=weight_decay)
                    exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
                    exp_avg.lerp_(grad, 1 - beta1)
                    exp_inf.copy_(maximum(exp_inf.mul_(beta2), grad.abs().add_(eps)))
                    clr = lr / (1 - beta1 ** count(step_t))
                    p.addcdiv_(exp_avg, exp_inf, value=-clr)
        return loss
