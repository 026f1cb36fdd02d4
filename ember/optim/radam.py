"""RAdam: Adam with a rectified adaptive learning rate (Liu et al., 2019)."""
from __future__ import annotations

import math
from typing import Any, Callable, Iterable

from ..autograd.grad_mode import no_grad
from ..ops.creation import zeros_like
from ..ops.elementwise import where
from ..tensor import Tensor
from .optimizer import (Optimizer, check_betas, check_non_negative, check_unsupported,
                        count, hyper, option, sqrt, step_counter)

__all__ = ["RAdam"]


class RAdam(Optimizer):
    r"""RAdam: Adam whose adaptive step is switched on only once the variance of the
    second-moment estimate is tractable, and rectified by a factor ``r_t``.

    Each step ``t``, with :math:`g` the gradient (negated when ``maximize``)::

        p = p * (1 - lr * weight_decay)   if decoupled_weight_decay
        g = g + weight_decay * p          otherwise
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)
        if rho_t > 5:
            r_t = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
            p = p - lr * r_t * sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + eps)
        else:
            p = p - lr / (1 - beta1^t) * m

    Args:
        params: tensors or parameter groups to optimize.
        lr: learning rate.
        betas: decay rates of the running averages of the gradient and its square.
        eps: added to the denominator for numerical stability.
        weight_decay: weight decay (L2 penalty, or decoupled).
        decoupled_weight_decay: shrink the weights directly, as AdamW does.
        foreach: accepted for PyTorch compatibility; ember has one implementation.
        maximize: ascend the objective instead of descending it.
        capturable, differentiable: must stay False (not supported).

    State per parameter: ``step``, ``exp_avg`` and ``exp_avg_sq``.

    >>> opt = ember.optim.RAdam(model.parameters(), lr=1e-3)
    """

    def __init__(self, params: Iterable, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        check_non_negative("RAdam", group, "lr", "eps", "weight_decay")
        check_betas("RAdam", group["betas"])
        check_unsupported("RAdam", group, "capturable", "differentiable")

    def step(self, closure: Callable[[], Any] | None = None):
        """Perform one update; returns the closure's loss if a closure is given."""
        loss = self._evaluate(closure)
        with no_grad():
            for group in self.param_groups:
                lr, eps, weight_decay = hyper(group), group["eps"], group["weight_decay"]
                beta1, beta2 = option(self, group, "betas")
                rho_inf = 2 / (1 - beta2) - 1
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["step"] = step_counter()
                        state["exp_avg"] = zeros_like(p)
                        state["exp_avg_sq"] = zeros_like(p)
                    if group["maximize"]:
                        grad = -grad
                    step = count(state["step"].add_(1))
                    if weight_decay != 0:
                        if group["decoupled_weight_decay"]:
                            p.mul_(1 - lr * weight_decay)
                        else:
                            grad = grad.add(p, alpha=weight_decay)
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    exp_avg.lerp_(grad, 1 - beta1)
                    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)

                    bias_correction1 = 1 - beta1 ** step
                    bias_correction2 = 1 - beta2 ** step
                    rho_t = rho_inf - 2 * step * beta2 ** step / bias_correction2
                    if isinstance(rho_t, Tensor):  # ember.jit: both branches, chosen per call
                        _traced_update(p, exp_avg, exp_avg_sq, lr, eps, rho_inf, rho_t,
                                       bias_correction1, bias_correction2)
                    elif rho_t > 5.0:
                        rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                                         / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                        scale = lr * rect * math.sqrt(bias_correction2) / bias_correction1
                        p.addcdiv_(exp_avg, exp_avg_sq.sqrt().add_(eps), value=-scale)
                    else:
                        p.add_(exp_avg, alpha=-lr / bias_correction1)
        return loss


def _traced_update(p, exp_avg, exp_avg_sq, lr, eps, rho_inf, rho_t, bias_correction1,
                   bias_correction2) -> None:
    """RAdam's update with ``rho_t > 5`` decided in the graph (``rho_t`` is a traced 0-d
    tensor): the same arithmetic as the eager branches, selected with ``where``."""
    tractable = rho_t > 5.0
    # (the rectification's radicand is negative for some rho_t <= 5: keep it finite)
    radicand = where(tractable, (rho_t - 4) * (rho_t - 2) * rho_inf
                     / ((rho_inf - 4) * (rho_inf - 2) * rho_t), 1.0)
    rect = radicand.sqrt()
    scale = where(tractable, lr * rect * sqrt(bias_correction2) / bias_correction1,
                  lr / bias_correction1)
    # untractable: p - lr / bc1 * m, i.e. the same addcdiv with a denominator of 1
    denom = where(tractable, exp_avg_sq.sqrt().add_(eps), 1.0)
    p.addcdiv_(exp_avg, denom, value=-scale)
