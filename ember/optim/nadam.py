"""NAdam: Adam with Nesterov momentum (Dozat, 2016)."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from ..autograd.grad_mode import no_grad
from ..ops.creation import tensor, zeros_like
from ..tensor import Tensor
from .optimizer import (Optimizer, check_betas, check_non_negative, check_unsupported,
                        count, hyper, option, scalar_dtype, step_counter)

__all__ = ["NAdam"]


class NAdam(Optimizer):
    r"""NAdam: Adam whose momentum looks one step ahead, with a momentum schedule.

    Each step ``t``, with :math:`g` the gradient (negated when ``maximize``)::

        p = p * (1 - lr * weight_decay)   if decoupled_weight_decay
        g = g + weight_decay * p          otherwise
        mu_t = beta1 * (1 - 0.5 * 0.96^(t * momentum_decay))
        P_t = mu_1 * ... * mu_t           (state "mu_product")
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        d = sqrt(v / (1 - beta2^t)) + eps
        p = p - lr * (1 - mu_t) / (1 - P_t) * g / d
              - lr * mu_{t+1} / (1 - P_t * mu_{t+1}) * m / d

    Args:
        params: tensors or parameter groups to optimize.
        lr: learning rate.
        betas: decay rates of the running averages of the gradient and its square.
        eps: added to the denominator for numerical stability.
        weight_decay: weight decay (L2 penalty, or decoupled).
        momentum_decay: the momentum schedule's decay ``psi``.
        decoupled_weight_decay: shrink the weights directly, as AdamW does.
        foreach: accepted for PyTorch compatibility; ember has one implementation.
        maximize: ascend the objective instead of descending it.
        capturable, differentiable: must stay False (not supported).

    State per parameter: ``step``, ``mu_product`` (0-d float tensors), ``exp_avg`` and
    ``exp_avg_sq``.

    >>> opt = ember.optim.NAdam(model.parameters(), lr=2e-3)
    """

    def __init__(self, params: Iterable, lr: float = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        check_non_negative("NAdam", group, "lr", "eps", "weight_decay", "momentum_decay")
        check_betas("NAdam", group["betas"])
        check_unsupported("NAdam", group, "capturable", "differentiable")

    def step(self, closure: Callable[[], Any] | None = None):
        """Perform one update; returns the closure's loss if a closure is given."""
        loss = self._evaluate(closure)
        with no_grad():
            for group in self.param_groups:
                lr, eps, weight_decay = hyper(group), group["eps"], group["weight_decay"]
                beta1, beta2 = option(self, group, "betas")
                momentum_decay = group["momentum_decay"]
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["step"] = step_counter()
                        state["mu_product"] = tensor(1.0, dtype=scalar_dtype())
                        state["exp_avg"] = zeros_like(p)
                        state["exp_avg_sq"] = zeros_like(p)
                    if group["maximize"]:
                        grad = -grad
                    step_t, mu_product = state["step"], state["mu_product"]
                    step = count(step_t.add_(1))
                    if weight_decay != 0:
                        if group["decoupled_weight_decay"]:
                            p.mul_(1 - lr * weight_decay)
                        else:
                            grad = grad.add(p, alpha=weight_decay)
                    mu = beta1 * (1.0 - 0.5 * 0.96 ** (step * momentum_decay))
                    mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((step + 1) * momentum_decay))
                    # The product lives in a 0-d tensor of the step dtype (float32 unless
                    # the default dtype is float64), and is read back from it, as PyTorch.
                    # (Traced, mu is a float64 tensor: round it as a Python number would be.)
                    if isinstance(mu, Tensor):
                        mu_product.mul_(mu.to(mu_product.dtype))
                    else:
                        mu_product.mul_(mu)
                    product = count(mu_product)
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    exp_avg.lerp_(grad, 1 - beta1)
                    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                    denom = exp_avg_sq.div(1 - beta2 ** step).sqrt_().add_(eps)
                    p.addcdiv_(grad, denom, value=-lr * (1.0 - mu) / (1.0 - product))
                    p.addcdiv_(exp_avg, denom,
                               value=-lr * mu_next / (1.0 - product * mu_next))
        return loss
