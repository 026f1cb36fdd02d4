"""Multi-class and multi-label hinge losses, as in ``torch.nn.functional``, written with
ember ops (their gradients follow from the primitives)."""
from __future__ import annotations

from ..errors import EmberError, ShapeError
from ..tensor import Tensor  # noqa: F401  (annotations)
from . import elementwise as ew, logical as lg
from .loss import _reduce, _reduction
from .reduce import any as _any, sum as _sum
from .scan import cumprod
from .selection import gather
from .shape import unsqueeze

__all__ = ["multi_margin_loss", "multilabel_margin_loss"]


def _as_batch(name, input, target):
    if input.ndim not in (1, 2) or input.ndim == 2 and input.shape[1] == 0:
        raise ShapeError(f"{name}: Expected non-empty vector or matrix with optional 0-dim "
                         f"batch size, but got: {tuple(input.shape)}")
    return (unsqueeze(input, 0), unsqueeze(target, 0), True) if input.ndim == 1 else \
        (input, target, False)


def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0,
                      weight: Tensor | None = None, size_average: bool | None = None,
                      reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Multi-class hinge loss over (N, C) scores and (N,) class indices: the mean over
    classes ``i != y`` of ``max(0, margin - x[y] + x[i]) ** p`` (``p`` is 1 or 2),
    each term scaled by ``weight[y]``.

    >>> F.multi_margin_loss(ember.tensor([[0.1, 0.2, 0.4, 0.8]]), ember.tensor([3]))
    tensor(0.3250)
    """
    name = "multi_margin_loss"
    reduction = _reduction(name, size_average, reduce, reduction)
    if p not in (1, 2):
        raise EmberError(f"{name}: only p == 1 and p == 2 supported, got {p}")
    x, y, single = _as_batch(name, input, target)
    if tuple(y.shape) != (x.shape[0],):
        raise ShapeError(f"{name}: inconsistent target size: {tuple(target.shape)} for input "
                         f"of size: {tuple(input.shape)}")
    from .creation import arange
    classes = x.shape[1]
    picked = gather(x, 1, unsqueeze(y, 1))
    z = ew.clamp(margin - picked + x, min=0.0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * unsqueeze(gather(weight, 0, y), 1)
    other = lg.ne(unsqueeze(y, 1), unsqueeze(arange(classes, device=x.device), 0))
    loss = _sum(ew.where(other, z, 0.0), 1) / classes
    return _reduce(loss[0] if single else loss, reduction)


def multilabel_margin_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
                           reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Multi-label hinge loss: ``target`` (int64, ``input``'s shape) lists each sample's
    classes, ended by the first -1; the loss sums ``max(0, 1 - (x[j] - x[i]))`` over its
    classes ``j`` and the other classes ``i``, divided by the number of classes.

    >>> F.multilabel_margin_loss(ember.tensor([[0.1, 0.2, 0.4, 0.8]]),
    ...                          ember.tensor([[3, 0, -1, 1]]))
    tensor(0.8500)
    """
    name = "multilabel_margin_loss"
    reduction = _reduction(name, size_average, reduce, reduction)
    x, t, single = _as_batch(name, input, target)
    if tuple(t.shape) != tuple(x.shape):
        raise ShapeError(f"{name}: inconsistent target size: {tuple(target.shape)} for input "
                         f"of size: {tuple(input.shape)}")
    from .creation import arange
    classes = x.shape[1]
    valid = lg.ne(cumprod(lg.ge(t, 0), 1), 0)                      # before the first -1
    index = ew.where(valid, t, 0)
    member = lg.eq(unsqueeze(index, 2), arange(classes, device=x.device)) & unsqueeze(valid, 2)
    is_target = _any(member, 1)                                      # (N, C)
    x_target = gather(x, 1, index)                                   # (N, J)
    hinge = ew.clamp(1.0 - unsqueeze(x_target, 2) + unsqueeze(x, 1), min=0.0)  # (N, J, C)
    keep = unsqueeze(valid, 2) & unsqueeze(lg.logical_not(is_target), 1)
    loss = _sum(ew.where(keep, hinge, 0.0), (1, 2)) / classes
    return _reduce(loss[0] if single else loss, reduction)
