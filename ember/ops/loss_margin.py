"""Divergence and margin losses, as in ``torch.nn.functional``, written with ember ops
(their gradients follow from the primitives)."""
from __future__ import annotations

import math
import warnings

from ..errors import EmberValueError, ShapeError
from ..tensor import Tensor
from . import elementwise as ew
from .activation import logsigmoid
from .elementwise_composite import clamp_min
from .loss import _REDUCTIONS, _reduce, _reduction
from .registry import AbstractValue, apply, autocast_inputs, register
from .reduce import sum as _sum
from .shape import unsqueeze

__all__ = ["kl_div", "cosine_embedding_loss", "margin_ranking_loss", "hinge_embedding_loss",
           "soft_margin_loss", "triplet_margin_loss", "poisson_nll_loss", "gaussian_nll_loss",
           "multilabel_soft_margin_loss"]


def kl_div(input: Tensor, target: Tensor, size_average: bool | None = None,
           reduce: bool | None = None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """Kullback-Leibler divergence with log-probabilities ``input``:
    target * (log(target) - input) (``log_target``: target is given as log-probabilities).
    ``reduction='batchmean'`` divides the sum by the batch size (the mathematically
    correct KL); ``'mean'`` divides by the number of elements.

    >>> p = ember.tensor([0.25, 0.75])
    >>> F.kl_div(p.log(), p, reduction="batchmean")
    tensor(0.)
    """
    input, target = autocast_inputs("kl_div", input, target)
    name = "kl_div"
    reduction = _reduction(name, size_average, reduce, reduction,
                           _REDUCTIONS + ("batchmean",))
    if reduction == "mean":
        warnings.warn("kl_div: reduction 'mean' divides the total loss by both the batch "
                      "size and the support size. 'batchmean' divides only by the batch "
                      "size, and aligns with the KL div math definition.", stacklevel=2)
    if log_target:
        loss = ew.exp(target) * (target - input)
    else:
        loss = ew.xlogy(target, target) - target * input
    if reduction == "batchmean":
        total = _sum(loss)
        return total / input.shape[0] if input.ndim else total
    return _reduce(loss, reduction)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0,
                          size_average: bool | None = None, reduce: bool | None = None,
                          reduction: str = "mean") -> Tensor:
    """1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1
    (cosine along dim 1 of (N, D) inputs, or of (D,) inputs).

    >>> F.cosine_embedding_loss(ember.tensor([[1.0, 0.0]]), ember.tensor([[0.0, 1.0]]),
    ...                         ember.tensor([1]))
    tensor(1.)
    """
    input1, input2, target = autocast_inputs("cosine_embedding_loss", input1, input2, target)
    name = "cosine_embedding_loss"
    reduction = _reduction(name, size_average, reduce, reduction)
    if input1.ndim not in (1, 2) or tuple(input1.shape) != tuple(input2.shape) or \
            target.ndim != input1.ndim - 1 or \
            (target.ndim and target.shape[0] != input1.shape[0]):
        raise ShapeError(f"{name}: expected inputs of the same shape (N, D) or (D,) and a "
                         f"target of shape (N,) or (), got shapes {tuple(input1.shape)}, "
                         f"{tuple(input2.shape)} and {tuple(target.shape)}")
    dim = input1.ndim - 1
    tiny = 1e-12
    dot = _sum(input1 * input2, dim)
    sq1 = _sum(input1 * input1, dim) + tiny
    sq2 = _sum(input2 * input2, dim) + tiny
    cos = dot / ew.sqrt(sq1 * sq2)
    loss = ew.where(target == 1, 1 - cos, 0.0) + \
        ew.where(target == -1, clamp_min(cos - margin, 0.0), 0.0)
    return _reduce(loss, reduction)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0,
                        size_average: bool | None = None, reduce: bool | None = None,
                        reduction: str = "mean") -> Tensor:
    """max(0, -target * (input1 - input2) + margin), target in {1, -1}.

    >>> F.margin_ranking_loss(ember.tensor([1.0]), ember.tensor([2.0]), ember.tensor([1.0]))
    tensor(1.)
    """
    input1, input2, target = autocast_inputs("margin_ranking_loss", input1, input2, target)
    name = "margin_ranking_loss"
    reduction = _reduction(name, size_average, reduce, reduction)
    if not input1.ndim == input2.ndim == target.ndim:
        raise ShapeError(f"{name}: all input tensors should have the same number of "
                         f"dimensions, got shapes {tuple(input1.shape)}, "
                         f"{tuple(input2.shape)} and {tuple(target.shape)}")
    return _reduce(clamp_min(-target * (input1 - input2) + margin, 0.0), reduction)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    """x where target is 1, max(0, margin - x) where target is -1.

    >>> F.hinge_embedding_loss(ember.tensor([0.3, 2.0]), ember.tensor([-1.0, 1.0]))
    tensor(1.3500)
    """
    input, target = autocast_inputs("hinge_embedding_loss", input, target)
    reduction = _reduction("hinge_embedding_loss", size_average, reduce, reduction)
    loss = ew.where(target != 1, clamp_min(margin - input, 0.0), 0.0) + \
        ew.where(target != -1, input, 0.0)
    return _reduce(loss, reduction)


def soft_margin_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
                     reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """log(1 + exp(-target * input)), target in {1, -1}.

    >>> F.soft_margin_loss(ember.tensor([0.0]), ember.tensor([1.0]))
    tensor(0.6931)
    """
    input, target = autocast_inputs("soft_margin_loss", input, target)
    reduction = _reduction("soft_margin_loss", size_average, reduce, reduction)
    return _reduce(-logsigmoid(target * input), reduction)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor,
                        margin: float = 1.0, p: float = 2, eps: float = 1e-6,
                        swap: bool = False, size_average: bool | None = None,
                        reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """max(d(a, p) - d(a, n) + margin, 0) with d the pairwise p-norm distance; with
    ``swap``, d(a, n) is replaced by min(d(a, n), d(p, n)).

    >>> F.triplet_margin_loss(ember.zeros(1, 2), ember.zeros(1, 2), ember.ones(1, 2))
    tensor(0.)
    """
    anchor, positive, negative = autocast_inputs("triplet_margin_loss", anchor, positive, negative)
    from .nn_misc import pairwise_distance
    name = "triplet_margin_loss"
    reduction = _reduction(name, size_average, reduce, reduction)
    if not anchor.ndim == positive.ndim == negative.ndim or anchor.ndim not in (1, 2):
        raise ShapeError(f"{name}: expected anchor, positive and negative to be 1-D or 2-D "
                         f"with the same number of dims, got shapes {tuple(anchor.shape)}, "
                         f"{tuple(positive.shape)} and {tuple(negative.shape)}")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = ew.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce(clamp_min(margin + d_pos - d_neg, 0.0), reduction)


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False,
                     size_average: bool | None = None, eps: float = 1e-8,
                     reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Poisson negative log-likelihood: exp(x) - t * x (``log_input``) or
    x - t * log(x + eps); ``full`` adds Stirling's approximation of log(t!) where t > 1.

    >>> F.poisson_nll_loss(ember.tensor([0.0]), ember.tensor([1.0]))
    tensor(1.)
    """
    input, target = autocast_inputs("poisson_nll_loss", input, target)
    reduction = _reduction("poisson_nll_loss", size_average, reduce, reduction)
    if log_input:
        loss = ew.exp(input) - target * input
    else:
        loss = input - target * ew.log(input + eps)
    if full:
        stirling = target * ew.log(target) - target + 0.5 * ew.log(2 * math.pi * target)
        loss = loss + ew.where(target > 1, stirling, 0.0)
    return _reduce(loss, reduction)


def _var_gap(xp, var, eps):
    # (the check runs with the op, so a compiled graph makes it at every call too)
    if var.size and bool((var < 0).any()):
        raise EmberValueError("gaussian_nll_loss: var has negative entry/entries")
    return xp.maximum(var, var.dtype.type(eps)) - var


# what clamping var at eps adds to it (no gradient: the clamp does not stop var's)
_VAR_GAP = register("gaussian_nll_var_gap", _var_gap, saves_inputs=False,
                    infer=lambda var, eps: AbstractValue(var.shape, var.dtype))


def gaussian_nll_loss(input: Tensor, target: Tensor, var, full: bool = False,
                      eps: float = 1e-6, reduction: str = "mean") -> Tensor:
    """Gaussian negative log-likelihood 0.5 * (log(var) + (input - target)^2 / var),
    with var clamped below at ``eps`` (the clamp does not stop its gradient). ``var``
    has input's shape, or one dim less, or a last dim of 1; a float is a shared var.

    >>> F.gaussian_nll_loss(ember.tensor([1.0]), ember.tensor([1.0]), ember.tensor([1.0]))
    tensor(0.)
    """
    name = "gaussian_nll_loss"
    reduction = _reduction(name, None, None, reduction)
    if not isinstance(var, Tensor):
        var = ew.mul(input.new_ones(tuple(input.shape)), float(var)).detach()
    shape, vshape = tuple(input.shape), tuple(var.shape)
    if vshape != shape:
        if shape[:-1] == vshape:
            var = unsqueeze(var, -1)
        elif not (shape[:-1] == vshape[:-1] and vshape[-1:] == (1,)):
            raise EmberValueError(f"{name}: var is of incorrect size: got {vshape} for input "
                                  f"of shape {shape}")
    var = var + apply(_VAR_GAP, var.detach(), eps=float(eps))
    loss = 0.5 * (ew.log(var) + (input - target) * (input - target) / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                size_average: bool | None = None, reduce: bool | None = None,
                                reduction: str = "mean") -> Tensor:
    """Multi-label one-versus-all logistic loss, averaged over the C classes (last dim):
    -(t * log(sigmoid(x)) + (1 - t) * log(sigmoid(-x))).

    >>> F.multilabel_soft_margin_loss(ember.tensor([[0.0, 0.0]]), ember.tensor([[1.0, 0.0]]))
    tensor(0.6931)
    """
    reduction = _reduction("multilabel_soft_margin_loss", size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    classes = input.shape[-1] if input.ndim else 1
    return _reduce(_sum(loss, -1) / classes if input.ndim else loss, reduction)
