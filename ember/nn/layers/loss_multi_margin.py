"""The multi-class and multi-label hinge losses as modules."""
from __future__ import annotations

from ...tensor import Tensor
from .. import functional as F
from .loss import _Loss, _WeightedLoss

__all__ = ["MultiMarginLoss", "MultiLabelMarginLoss"]


class MultiMarginLoss(_WeightedLoss):
    """Multi-class hinge loss over (N, C) scores and (N,) class indices
    (:func:`ember.nn.functional.multi_margin_loss`).

    >>> ember.nn.MultiMarginLoss()(ember.tensor([[0.1, 0.2, 0.4, 0.8]]), ember.tensor([3]))
    tensor(0.3250)
    """

    def __init__(self, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                 size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        self.p, self.margin = p, margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin,
                                   weight=self.weight, reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """Multi-label hinge loss; targets list class indices ended by -1
    (:func:`ember.nn.functional.multilabel_margin_loss`)."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)
