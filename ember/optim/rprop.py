"""Rprop: resilient backpropagation, steps that follow only the sign of the gradient."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from ..autograd.grad_mode import no_grad
from ..ops.creation import full_like, zeros_like
from ..ops.elementwise import where
from .optimizer import Optimizer, OptimizerError, check_unsupported, step_counter

__all__ = ["Rprop"]


class Rprop(Optimizer):
    r"""Rprop (Riedmiller & Braun, 1993).

    Every coordinate has its own step size, which grows by ``etaplus`` while the
    gradient keeps its sign and shrinks by ``etaminus`` when the sign flips; the
    parameter moves by that step against the sign of the gradient. Each step, with
    :math:`g` the gradient (negated when ``maximize``) and :math:`g_{prev}` the previous
    step's (stored as ``prev``)::

        f = etaplus   where g * g_prev > 0
        f = etaminus  where g * g_prev < 0   (and g is taken as 0 there)
        f = 1         where g * g_prev == 0
        step_size = clamp(step_size * f, *step_sizes)
        p = p - sign(g) * step_size
        g_prev = g

    The step sizes start at ``lr``; the learning rate is read only then, so a
    scheduler's later changes to it have no effect (as in PyTorch).

    Args:
        params: tensors or parameter groups to optimize.
        lr: the initial step size.
        etas: ``(etaminus, etaplus)``, the factors that shrink and grow a step size;
            ``0 < etaminus < 1 < etaplus``.
        step_sizes: ``(min, max)``, the bounds of the step sizes.
        maximize: ascend the objective instead of descending it.
        foreach: accepted for PyTorch compatibility; ember has one implementation.
        capturable, differentiable: must stay False (not supported; ember.jit compiles
            the step without them).

    State per parameter: ``step`` (0-d float tensor), ``prev`` and ``step_size``.

    >>> opt = ember.optim.Rprop(model.parameters(), lr=0.01)
    >>> opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
    """

    def __init__(self, params: Iterable, lr: float = 1e-2,
                 etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *,
                 capturable: bool = False, foreach: bool | None = None,
                 maximize: bool = False, differentiable: bool = False) -> None:
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
                        maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        if not 0.0 <= group["lr"]:
            raise OptimizerError(f"Rprop: Invalid learning rate: {group['lr']}")
        etas, step_sizes = group["etas"], group["step_sizes"]
        if len(etas) != 2:
            raise OptimizerError(f"Rprop: etas must be a pair (etaminus, etaplus), got "
                                 f"{etas!r}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise OptimizerError(f"Rprop: Invalid eta values: {etas[0]}, {etas[1]} "
                                 "(expected 0 < etaminus < 1 < etaplus)")
        if len(step_sizes) != 2:
            raise OptimizerError("Rprop: step_sizes must be a pair (min, max), got "
                                 f"{step_sizes!r}")
        check_unsupported("Rprop", group, "capturable", "differentiable")

    def step(self, closure: Callable[[], Any] | None = None):
        """Perform one update; returns the closure's loss if a closure is given."""
        loss = self._evaluate(closure)
        with no_grad():
            for group in self.param_groups:
                etaminus, etaplus = group["etas"]
                step_size_min, step_size_max = group["step_sizes"]
                for p in group["params"]:
                    grad = p.grad
                    if grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["step"] = step_counter()
                        state["prev"] = zeros_like(p)
                        state["step_size"] = full_like(grad, group["lr"])
                    if group["maximize"]:
                        grad = -grad
                    state["step"].add_(1)
                    prev, step_size = state["prev"], state["step_size"]
                    sign = grad.mul(prev).sign()
                    # (a NaN product keeps its NaN factor, as PyTorch's masked writes do)
                    factor = where(sign > 0, etaplus,
                                   where(sign < 0, etaminus, where(sign == 0, 1.0, sign)))
                    step_size.mul_(factor).clamp_(step_size_min, step_size_max)
                    # after a sign change the coordinate rests for one step
                    grad = where(sign < 0, 0.0, grad)
                    p.addcmul_(grad.sign(), step_size, value=-1)
                    prev.copy_(grad)
        return loss
