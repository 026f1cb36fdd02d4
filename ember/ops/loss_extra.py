"""Functional odds and ends of ``torch.nn.functional``, written with ember ops (their
gradients follow from the primitives): ``gumbel_softmax``,
``triplet_margin_with_distance_loss`` and the deprecated aliases of ``interpolate``
(``upsample``, ``upsample_nearest``, ``upsample_bilinear``)."""
from __future__ import annotations

import warnings
from typing import Callable

import numpy as np

from ..errors import EmberValueError, ShapeError
from ..tensor import Tensor
from . import elementwise as ew
from .activation import softmax
from .creation import zeros_like
from .elementwise_composite import clamp_min
from .interpolate import interpolate
from .loss import _REDUCTIONS, _reduce, _require_float
from .reduce import argmax
from .selection import scatter

__all__ = ["gumbel_softmax", "triplet_margin_with_distance_loss", "upsample",
           "upsample_nearest", "upsample_bilinear"]


# gumbel_softmax ----------------------------------------------------------------------
def _gumbel_noise(logits: Tensor) -> Tensor:
    """-log(E), E ~ Exponential(1), of logits' shape, from the default generator (as a
    graph instruction under ember.jit, so compiled runs draw as eager ones do)."""
    from .random import draw
    shape, np_dtype = tuple(logits.shape), logits.dtype.np
    draw_dtype = np.float64 if np_dtype == np.float64 else np.float32

    def make(rng):
        return rng.exponential(1.0, shape).astype(draw_dtype).astype(np_dtype)
    arr = draw(None, shape, np_dtype, make, logits.device)
    if not getattr(arr, "_ember_tracer", False):
        arr = logits.device.backend.asarray(arr)
    return -ew.log(Tensor._make(arr, logits.device))


def gumbel_softmax(logits: Tensor, tau: float = 1, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1) -> Tensor:
    """A sample of the Gumbel-softmax (concrete) distribution: ``softmax((logits + g) /
    tau, dim)`` with ``g`` standard Gumbel noise drawn from the default generator.

    Args:
        logits: (..., num_features) unnormalised log-probabilities.
        tau: the temperature (> 0); small values give samples close to one-hot.
        hard: return the one-hot vector of each sample's largest entry, differentiated
            as the soft sample (straight-through: ``y_hard - y_soft.detach() + y_soft``).
        eps: deprecated and unused (a warning where it is changed), as in PyTorch.
        dim: the dim of the categories.

    >>> y = F.gumbel_softmax(ember.randn(4, 6), tau=0.5, hard=True)
    >>> y.sum(-1)
    tensor([1., 1., 1., 1.])
    """
    _require_float("gumbel_softmax", logits)
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    y_soft = softmax((logits + _gumbel_noise(logits)) / tau, dim)
    if not hard:
        return y_soft
    index = argmax(y_soft, dim, keepdim=True)
    y_hard = scatter(zeros_like(y_soft), dim, index, value=1.0)
    return y_hard - y_soft.detach() + y_soft


# triplet_margin_with_distance_loss ---------------------------------------------------
def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor,
                                      *, distance_function: Callable | None = None,
                                      margin: float = 1.0, swap: bool = False,
                                      reduction: str = "mean") -> Tensor:
    """``max(d(a, p) - d(a, n) + margin, 0)`` with any distance function ``d`` (by default
    :func:`pairwise_distance`, the Euclidean distance along the last dim); with
    ``swap``, ``d(a, n)`` is replaced by ``min(d(a, n), d(p, n))``.

    Args:
        anchor, positive, negative: tensors with the same number of dims, (N, D) or (D,)
            for the default distance.
        distance_function: ``d(x, y)`` returning a tensor of distances (non-negative).
        margin: a positive number.
        reduction: ``'none'``, ``'mean'`` or ``'sum'``.

    >>> F.triplet_margin_with_distance_loss(ember.zeros(1, 2), ember.zeros(1, 2),
    ...                                     ember.ones(1, 2), margin=2.0)
    tensor(0.5858)
    """
    name = "triplet_margin_with_distance_loss"
    if reduction not in _REDUCTIONS:
        raise EmberValueError(f"{name}: {reduction!r} is not a valid value for reduction "
                              f"(expected one of {', '.join(map(repr, _REDUCTIONS))})")
    if margin <= 0:
        raise EmberValueError(f"{name}: margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise ShapeError(f"{name}: the anchor, positive, and negative tensors are expected to "
                         f"have the same number of dimensions, but got: anchor "
                         f"{anchor.ndim}D, positive {positive.ndim}D, and negative "
                         f"{negative.ndim}D inputs")
    if distance_function is None:
        from .nn_misc import pairwise_distance
        distance_function = pairwise_distance
    d_pos = distance_function(anchor, positive)
    d_neg = distance_function(anchor, negative)
    if swap:
        d_neg = ew.minimum(d_neg, distance_function(positive, negative))
    return _reduce(clamp_min(margin + d_pos - d_neg, 0), reduction)


# Deprecated aliases of interpolate ---------------------------------------------------
def upsample(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
             align_corners: bool | None = None) -> Tensor:
    """Deprecated: :func:`interpolate` (same arguments, with a warning).

    >>> F.upsample(ember.ones(1, 1, 2), scale_factor=2).shape
    ember.Size([1, 1, 4])
    """
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` "
                  "instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: ``interpolate(input, size, scale_factor, mode='nearest')``.

    >>> F.upsample_nearest(ember.ones(1, 1, 2, 2), scale_factor=2).shape
    ember.Size([1, 1, 4, 4])
    """
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: ``interpolate(input, size, scale_factor, mode='bilinear',
    align_corners=True)`` (note: corners aligned, unlike interpolate's default).

    >>> F.upsample_bilinear(ember.tensor([[[[0.0, 1.0]]]]), size=(1, 3))
    tensor([[[[0.0000, 0.5000, 1.0000]]]])
    """
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use "
                  "`nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
