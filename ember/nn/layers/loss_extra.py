"""The CTC loss as a module (:class:`CTCLoss`)."""
from __future__ import annotations

from ...tensor import Tensor
from .. import functional as F
from .loss import _Loss

__all__ = ["CTCLoss"]


class CTCLoss(_Loss):
    """Connectionist temporal classification loss
    (:func:`ember.nn.functional.ctc_loss`): the negative log-probability of each target
    sequence over all its alignments to the input frames.

    Args:
        blank: the blank label.
        reduction: ``'none'``, ``'sum'`` or ``'mean'`` (each loss divided by its target
            length, then the mean over the batch).
        zero_infinity: zero infinite losses (impossible alignments) and their gradients.

    Shape: ``log_probs`` (T, N, C) or (T, C); ``targets`` (N, S) padded or 1-D
    concatenated; ``input_lengths`` and ``target_lengths`` (N,) tensors or lists.

    >>> lp = ember.randn(6, 2, 4).log_softmax(2)
    >>> ember.nn.CTCLoss()(lp, ember.tensor([[1, 2], [3, 3]]), [6, 5], [2, 2]).shape
    ember.Size([])
    """

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        super().__init__(reduction=reduction)
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs: Tensor, targets: Tensor, input_lengths,
                target_lengths) -> Tensor:
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                          self.reduction, self.zero_infinity)
