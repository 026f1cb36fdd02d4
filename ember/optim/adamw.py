"""AdamW: Adam with decoupled weight decay (Loshchilov & Hutter, 2017)."""
from __future__ import annotations

from typing import Iterable

from .adam import Adam

__all__ = ["AdamW"]


class AdamW(Adam):
    r"""Adam with decoupled weight decay: each step first shrinks the weights,
    ``p = p * (1 - lr * weight_decay)``, then takes the Adam step on the plain gradient
    (see :class:`Adam` for the update, the arguments and the state).

    It is :class:`Adam` with ``decoupled_weight_decay=True`` and a default
    ``weight_decay`` of 0.01, so there is one implementation of the update.

    >>> opt = ember.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    """

    def __init__(self, params: Iterable, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None,
                 capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
