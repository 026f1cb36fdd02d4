"""Adafactor: Adam-like steps whose second moment of a matrix is kept as a row and a
column factor, so the optimizer state is sublinear in the parameter's size."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from ..autograd.grad_mode import no_grad
from ..errors import EmberTypeError
from ..ops.creation import tensor, zeros, zeros_like
from ..ops.elementwise import finfo, maximum, minimum
from ..tensor import Tensor
from .optimizer import Optimizer, OptimizerError, count, hyper, step_counter

__all__ = ["Adafactor"]


class Adafactor(Optimizer):
    r"""Adafactor (Shazeer & Stern, 2018), as PyTorch defines it.

    Each step ``t``, with :math:`G` the gradient (negated when ``maximize``)::

        beta2_t = 1 - t ^ beta2_decay
        rho_t = min(lr, 1 / sqrt(t))
        alpha_t = max(eps2, RMS(p)) * rho_t
        p = p * (1 - lr * weight_decay)
        if G has 2 or more dims (factored over the last two):
            R = beta2_t * R + (1 - beta2_t) * mean(G * G, dim=-1)      (state "row_var")
            C = beta2_t * C + (1 - beta2_t) * mean(G * G, dim=-2)      (state "col_var")
            V = R @ C / max(mean(R, dim=-2), eps1)
        else:
            V = beta2_t * V + (1 - beta2_t) * G * G                    (state "variance")
        U = G / max(sqrt(V), eps1)
        p = p - alpha_t * U / max(1, RMS(U) / d)

    As in PyTorch, ``lr`` caps the relative step size ``rho_t`` and scales the
    (decoupled) weight decay, and ``eps1`` guards the variance estimate and the
    update rather than the factors.

    Args:
        params: tensors or parameter groups to optimize.
        lr: the maximum relative step size, and the weight decay's coefficient.
        beta2_decay: the exponent of the second moment's decay schedule (<= 0).
        eps: ``(eps1, eps2)``: ``eps1`` guards the denominator (None: the machine
            epsilon of the parameter's dtype), ``eps2`` the parameter scale.
        d: the clipping threshold of the update's RMS (>= 1).
        weight_decay: decoupled weight decay.
        foreach: accepted for PyTorch compatibility; ember has one implementation.
        maximize: ascend the objective instead of descending it.

    State per parameter: ``step`` (0-d float tensor) and either ``row_var`` and
    ``col_var`` (shapes ``(..., n, 1)`` and ``(..., 1, m)`` for a ``(..., n, m)``
    parameter) or ``variance`` (vectors and scalars).

    >>> opt = ember.optim.Adafactor(model.parameters(), lr=1e-2)
    """

    def __init__(self, params: Iterable, lr: float = 1e-2, beta2_decay: float = -0.8,
                 eps: tuple[float | None, float] = (None, 1e-3), d: float = 1.0,
                 weight_decay: float = 0.0, *, foreach: bool | None = None,
                 maximize: bool = False) -> None:
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d,
                        weight_decay=weight_decay, foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        lr, beta2_decay, eps = group["lr"], group["beta2_decay"], group["eps"]
        if not 0.0 <= lr:
            raise OptimizerError(f"Adafactor: Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise OptimizerError(f"Adafactor: beta2_decay should be <= 0 but is: "
                                 f"{beta2_decay}")
        if len(eps) != 2:
            raise OptimizerError(f"Adafactor: eps must be a pair (eps1, eps2), got {eps!r}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise OptimizerError(f"Adafactor: epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise OptimizerError(f"Adafactor: epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= group["d"]:
            raise OptimizerError(f"Adafactor: Clipping threshold d should be >= 1 but is: "
                                 f"{group['d']}")
        if not 0.0 <= group["weight_decay"]:
            raise OptimizerError(f"Adafactor: weight_decay should be >= 0 but is: "
                                 f"{group['weight_decay']}")

    def step(self, closure: Callable[[], Any] | None = None):
        """Perform one update; returns the closure's loss if a closure is given."""
        loss = self._evaluate(closure)
        with no_grad():
            for group in self.param_groups:
                lr, beta2_decay, d = hyper(group), group["beta2_decay"], group["d"]
                weight_decay = group["weight_decay"]
                eps1, eps2 = group["eps"]
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        _init_state(state, grad)
                    if group["maximize"]:
                        grad = -grad
                    if eps1 is None:  # (from the group's first parameter, as PyTorch)
                        eps1 = float(finfo(p.dtype.np).eps)
                    step_t = state["step"]
                    step_t.add_(1)
                    step = count(step_t)
                    beta2_weight = step ** beta2_decay  # 1 - beta2_t
                    rho = _min(lr, 1 / step ** 0.5)
                    alpha = _max(eps2, count(p.norm(2)) / p.numel() ** 0.5) * rho
                    if weight_decay != 0:
                        p.mul_(1 - lr * weight_decay)
                    if grad.dim() > 1:
                        row_var, col_var = state["row_var"], state["col_var"]
                        # mean(g * g) over a dim, as the square of the norm (PyTorch's way)
                        row_mean = grad.norm(dim=-1, keepdim=True).square_() \
                            .div_(grad.shape[-1])
                        row_var.lerp_(row_mean, beta2_weight)
                        col_mean = grad.norm(dim=-2, keepdim=True).square_() \
                            .div_(grad.shape[-2])
                        col_var.lerp_(col_mean, beta2_weight)
                        var_estimate = row_var @ col_var
                        var_estimate.div_(row_var.mean(dim=-2, keepdim=True).clamp_(min=eps1))
                    else:
                        variance = state["variance"]
                        variance.lerp_(grad * grad, beta2_weight)
                        var_estimate = variance.clone()
                    update = var_estimate.clamp_(min=eps1 * eps1).rsqrt_()
                    update.mul_(grad)
                    denom = _max(1.0, count(update.norm(2)) / (update.numel() ** 0.5 * d))
                    p.add_(update, alpha=-alpha / denom)
        return loss


def _init_state(state: dict, grad: Tensor) -> None:
    if grad.is_complex():
        raise EmberTypeError("Adafactor does not support complex parameters")
    state["step"] = step_counter()
    if grad.dim() > 1:
        shape = tuple(grad.shape)
        state["row_var"] = zeros(shape[:-1] + (1,), dtype=grad.dtype, device=grad.device)
        state["col_var"] = zeros(shape[:-2] + (1, shape[-1]), dtype=grad.dtype,
                                 device=grad.device)
    else:
        state["variance"] = zeros_like(grad)


def _max(a, b):
    """Python's ``max(a, b)`` of numbers; the elementwise maximum once one of them is
    a traced 0-d tensor (under ember.jit)."""
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return maximum(_as_tensor(a, b), _as_tensor(b, a))
    return max(a, b)


def _min(a, b):
    """Python's ``min(a, b)`` of numbers, or the elementwise minimum of tensors."""
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return minimum(_as_tensor(a, b), _as_tensor(b, a))
    return min(a, b)


def _as_tensor(x, like: Tensor):
    return x if isinstance(x, Tensor) else tensor(float(x), dtype=like.dtype)
