"""Adam: adaptive moment estimation (with the AMSGrad variant and decoupled weight
decay, which makes it AdamW)."""
from __future__ import annotations

import math
from typing import Any, Callable, Iterable

import numpy as np

from ..autograd.grad_mode import no_grad
from ..ops import registry
from ..ops.creation import zeros_like
from ..ops.elementwise import maximum
from .optimizer import (Optimizer, check_betas, check_non_negative, check_unsupported,
                        count, hyper, option, sqrt, step_counter)

__all__ = ["Adam"]


class Adam(Optimizer):
    r"""Adam (Kingma & Ba, 2014).

    Each step ``t``, with :math:`g` the gradient (negated when ``maximize``)::

        p = p * (1 - lr * weight_decay)   if decoupled_weight_decay (AdamW)
        g = g + weight_decay * p          otherwise
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        v_max = max(v_max, v)             (amsgrad; used in place of v below)
        p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)

    Args:
        params: tensors or parameter groups to optimize.
        lr: learning rate.
        betas: decay rates of the running averages of the gradient and its square.
        eps: added to the denominator for numerical stability.
        weight_decay: L2 penalty (decoupled from the gradient when
            ``decoupled_weight_decay``).
        amsgrad: use the running maximum of the second moment (AMSGrad).
        maximize: ascend the objective instead of descending it.
        decoupled_weight_decay: shrink the weights directly, as AdamW does.
        foreach: accepted for PyTorch compatibility; ember has one implementation.
        capturable, differentiable, fused: must stay False/None (not supported).

    State per parameter: ``step`` (0-d float tensor), ``exp_avg``, ``exp_avg_sq`` and,
    with amsgrad, ``max_exp_avg_sq``.

    >>> opt = ember.optim.Adam(model.parameters(), lr=1e-3)
    """

    def __init__(self, params: Iterable, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None, decoupled_weight_decay: bool = False) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        check_non_negative(self._name, group, "lr", "eps", "weight_decay")
        check_betas(self._name, group["betas"])
        check_unsupported(self._name, group, "capturable", "differentiable", "fused")

    def step(self, closure: Callable[[], Any] | None = None):
        """Perform one update; returns the closure's loss if a closure is given."""
        loss = self._evaluate(closure)
        eager = registry._trace is None
        with no_grad():
            for group in self.param_groups:
                lr, eps, weight_decay = hyper(group), group["eps"], group["weight_decay"]
                beta1, beta2 = option(self, group, "betas")
                amsgrad = group["amsgrad"]
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["step"] = step_counter()
                        state["exp_avg"] = zeros_like(p)
                        state["exp_avg_sq"] = zeros_like(p)
                        if amsgrad:
                            state["max_exp_avg_sq"] = zeros_like(p)
                    if eager and _plain(p, grad, state):
                        _update_arrays(p, grad, state, group, lr, beta1, beta2)
                        continue
                    if group["maximize"]:
                        grad = -grad
                    step_t = state["step"]
                    step_t.add_(1)
                    if weight_decay != 0:
                        if group["decoupled_weight_decay"]:
                            p.mul_(1 - lr * weight_decay)
                        else:
                            grad = grad.add(p, alpha=weight_decay)
                    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                    exp_avg.lerp_(grad, 1 - beta1)
                    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)

                    step = count(step_t)
                    step_size = lr / (1 - beta1 ** step)
                    bias_correction2_sqrt = sqrt(1 - beta2 ** step)
                    if amsgrad:
                        max_sq = state["max_exp_avg_sq"]
                        max_sq.copy_(maximum(max_sq, exp_avg_sq))
                        second = max_sq
                    else:
                        second = exp_avg_sq
                    denom = second.sqrt().div_(bias_correction2_sqrt).add_(eps)
                    p.addcdiv_(exp_avg, denom, value=-step_size)
        return loss


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _plain(p, grad, state) -> bool:
    """Whether the update can run on the arrays directly: float32/float64 NumPy arrays
    of one dtype, shape and device (what the in-place methods' fast paths would take
    anyway)."""
    data = p._data
    if data.__class__ is not np.ndarray or data.dtype not in _FLOATS:
        return False
    for t in (grad, *state.values()):
        a = t._data
        if a.__class__ is not np.ndarray or t is state["step"]:
            continue
        if a.dtype != data.dtype or a.shape != data.shape or t._device is not p._device:
            return False
    g = grad._data
    return g.__class__ is np.ndarray and g.dtype == data.dtype and g.shape == data.shape


def _update_arrays(p, grad, state, group, lr, beta1, beta2) -> None:
    """One eager Adam step on ``p``'s arrays: the NumPy calls the in-place methods of
    :meth:`Adam.step` make, in the same order (the same values bit for bit), without an
    op dispatch each."""
    data, g = p._data, grad._data
    if group["maximize"]:
        g = np.negative(g)
    step_t = state["step"]
    np.add(step_t._data, 1, out=step_t._data, casting="unsafe")
    weight_decay = group["weight_decay"]
    if weight_decay != 0:
        if group["decoupled_weight_decay"]:
            np.multiply(data, 1 - lr * weight_decay, out=data, casting="unsafe")
        else:
            g = g + np.multiply(data, weight_decay)
    m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
    t = np.asarray(np.subtract(g, m))             # m.lerp_(g, 1 - beta1); 0-d: scalar
    np.multiply(t, 1 - beta1, out=t)
    np.add(m, t, out=m)
    np.multiply(v, beta2, out=v)                  # v.mul_(beta2).addcmul_(g, g, 1 - beta2)
    np.multiply(g, g, out=t)
    np.multiply(t, 1 - beta2, out=t)
    np.add(v, t, out=v)
    step = step_t._data.item()
    step_size = lr / (1 - beta1 ** step)
    second = v
    if group["amsgrad"]:
        second = state["max_exp_avg_sq"]._data
        np.maximum(second, v, out=second)
    denom = np.sqrt(second, out=t)
    np.true_divide(denom, math.sqrt(1 - beta2 ** step), out=denom)
    np.add(denom, group["eps"], out=denom)
    np.true_divide(m, denom, out=denom)           # p.addcdiv_(m, denom, -step_size)
    np.multiply(denom, -step_size, out=denom)
    np.add(data, denom, out=data)
    for t in (p, *state.values()):  # as each in-place method would
        t._version[0] += 1
