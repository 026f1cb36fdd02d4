"""Dropout, embeddings, one-hot, distances and pixel shuffles, as in
``torch.nn.functional`` (linear maps: :mod:`ember.ops.linear`, re-exported here).

``embedding`` is a fused primitive; dropout multiplies by a pre-scaled
random mask drawn from the default generator (so its gradient is zero where an element
was dropped and 1/(1-p) elsewhere).
"""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from .. import dtypes as dt
from ..autograd import grad_mode
from ..errors import (EmberError, EmberIndexError, EmberTypeError, EmberValueError,
                      ShapeError)
from ..tensor import Tensor
from . import elementwise as ew
from .activation import _upcast  # half precision computes in float32
from .elementwise_composite import clamp_min
from .reduce import norm as _norm, sum as _sum
from .index_kernels import add_rows
from .linear import _require_tensor, bilinear, linear  # noqa: F401  (re-exported)
from .registry import AbstractValue, apply, register
from .selection import index_add, scatter_reduce
from .shape import broadcast_shapes, expand, permute, reshape, unsqueeze, wrap_dim

__all__ = ["linear", "bilinear", "dropout", "dropout1d", "dropout2d", "dropout3d",
           "alpha_dropout", "feature_alpha_dropout", "embedding", "embedding_bag",
           "one_hot", "cosine_similarity", "pairwise_distance", "pdist", "pixel_shuffle",
           "pixel_unshuffle", "channel_shuffle"]

# dropout ----------------------------------------------------------------------------------------
def _check_p(name, p):
    if not 0.0 <= p <= 1.0:
        raise EmberValueError(f"{name}: dropout probability has to be between 0 and 1, but "
                              f"got {p}")


def _keep_mask(x, p, shape):
    """A tensor of ``shape``: 1 / (1 - p) with probability 1 - p, else 0 (x's dtype)."""
    from .random import draw
    np_dtype = x.dtype.np
    if p == 1:
        arr = np.zeros(shape, dtype=np_dtype)
    else:
        scale = np.dtype(np_dtype).type(1.0 / (1.0 - p))  # a scalar: fine with any xp

        def make(rng):
            keep = rng.random(shape, dtype=np.float32) >= p
            return keep.astype(np_dtype) * scale
        arr = draw(None, shape, np_dtype, make, x.device)
    if not getattr(arr, "_ember_tracer", False):
        arr = x._device.backend.asarray(arr)
    return Tensor._make(arr, x.device)


def _masked(x, mask, inplace):
    return x.mul_(mask) if inplace else x * mask


def dropout(input: Tensor, p: float = 0.5, training: bool = True,
            inplace: bool = False) -> Tensor:
    """In training, zero each element with probability ``p`` (drawn from the default
    generator) and scale the rest by 1 / (1 - p); otherwise return ``input``.

    >>> F.dropout(ember.ones(4), p=0.5, training=False)
    tensor([1., 1., 1., 1.])
    """
    _check_p("dropout", p)
    _require_tensor("dropout", "input", input)
    if not training:
        return input
    if p == 0:
        return input if inplace else input.clone()
    return _masked(input, _keep_mask(input, p, tuple(input.shape)), inplace)


def _feature_dropout(name, input, p, training, inplace, batched_ndim):
    """Zero whole channels: the mask is (N, C, 1, ...) (or (C, 1, ...) unbatched)."""
    _check_p(name, p)
    _require_tensor(name, "input", input)
    if not training or p == 0:
        return input if not training or inplace else input.clone()
    lead = 2 if input.ndim == batched_ndim else 1
    shape = tuple(input.shape[:lead]) + (1,) * (input.ndim - lead)
    return _masked(input, _keep_mask(input, p, shape), inplace)


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of an (N, C, L) or (C, L) input with probability ``p``.

    >>> F.dropout1d(ember.ones(2, 3, 4), training=False).shape
    ember.Size([2, 3, 4])
    """
    if input.ndim not in (2, 3):
        raise ShapeError(f"dropout1d: expected a 2D (C, L) or 3D (N, C, L) input, got shape "
                         f"{tuple(input.shape)}")
    return _feature_dropout("dropout1d", input, p, training, inplace, 3)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of an (N, C, H, W) or (C, H, W) input with probability ``p``.
    (A 3-D input is taken as (N, C, L), as PyTorch does, with a warning.)

    >>> F.dropout2d(ember.ones(2, 3, 4, 4), training=False).shape
    ember.Size([2, 3, 4, 4])
    """
    batched = 4
    if input.ndim == 3:
        warnings.warn("dropout2d: received a 3D input and assuming channel-wise 1D dropout "
                      "is desired: the input is taken as (N, C, L). Use dropout1d for that, "
                      "or a 4D input for 2D dropout.", stacklevel=2)
        batched = 3
    elif input.ndim != 4:
        warnings.warn(f"dropout2d: received a {input.ndim}-D input, which is deprecated; "
                      "expected (N, C, H, W) or (C, H, W)", stacklevel=2)
        batched = input.ndim
    return _feature_dropout("dropout2d", input, p, training, inplace, batched)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of an (N, C, D, H, W) or (C, D, H, W) input with probability
    ``p``.

    >>> F.dropout3d(ember.ones(1, 2, 2, 2, 2), training=False).shape
    ember.Size([1, 2, 2, 2, 2])
    """
    if input.ndim not in (4, 5):
        raise ShapeError(f"dropout3d: expected a 4D (C, D, H, W) or 5D (N, C, D, H, W) input, "
                         f"got shape {tuple(input.shape)}")
    return _feature_dropout("dropout3d", input, p, training, inplace, 5)


_SELU_ALPHA_PRIME = 1.7580993408473766  # -scale * alpha of SELU: where dropped units go


def _alpha_dropout(name, input, p, training, inplace, mask_shape):
    _check_p(name, p)
    if not training or p == 0:
        return input
    if p == 1:
        return input.mul_(0) if inplace else input * 0
    a = 1.0 / math.sqrt((_SELU_ALPHA_PRIME ** 2 * p + 1) * (1 - p))
    keep = _keep_mask(input, p, mask_shape) * (1 - p)  # 0/1
    # kept: a * x + c; dropped: a * (-alpha') + c, with c = a * alpha' * p
    scale = keep * a
    shift = (keep - 1) * (_SELU_ALPHA_PRIME * a) + _SELU_ALPHA_PRIME * a * p
    if inplace:
        return input.mul_(scale).add_(shift)
    return input * scale + shift


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                  inplace: bool = False) -> Tensor:
    """Dropout that keeps the mean and variance of SELU activations: dropped elements are
    set to SELU's negative saturation value and the result is affinely rescaled.

    >>> F.alpha_dropout(ember.ones(3), 0.5).shape
    ember.Size([3])
    """
    return _alpha_dropout("alpha_dropout", input, p, training, inplace, tuple(input.shape))


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                          inplace: bool = False) -> Tensor:
    """Alpha dropout of whole channels (dim 1) of an (N, C, ...) input.

    >>> F.feature_alpha_dropout(ember.ones(2, 3, 4), 0.5).shape
    ember.Size([2, 3, 4])
    """
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    return _alpha_dropout("feature_alpha_dropout", input, p, training, inplace, shape)


# embedding ---------------------------------------------------------------------------------------
def _embedding_forward(xp, w, idx):
    num = w.shape[0]
    if idx.size and ((idx < 0) | (idx >= num)).any():  # (one read on a GPU, not two)
        bad = idx[(idx < 0) | (idx >= num)].flat[0]
        raise EmberIndexError(f"embedding: index {int(bad)} is out of range for {num} "
                              f"embeddings (weight of shape {tuple(w.shape)})")
    return xp.take(w, idx, axis=0)


def _grad_scale(xp, idx, num, padding_idx, scale_grad_by_freq, dtype):
    """Per-index factor of the weight gradient: 0 at padding_idx, 1/count with
    ``scale_grad_by_freq``, else 1 (None when all are 1)."""
    if padding_idx is None and not scale_grad_by_freq:
        return None
    factor = xp.ones(idx.shape, dtype=dtype)
    if scale_grad_by_freq:
        counts = xp.bincount(idx.reshape(-1), minlength=num)
        factor = factor / counts[idx]
    if padding_idx is not None:
        factor = factor * (idx != padding_idx)
    return factor.astype(dtype, copy=False)


def _embedding_backward_forward(xp, g, idx, num, padding_idx, scale_grad_by_freq):
    d = g.shape[-1]
    rows = _upcast(g).reshape(-1, d)
    factor = _grad_scale(xp, idx, num, padding_idx, scale_grad_by_freq, rows.dtype)
    if factor is not None:
        rows = rows * factor.reshape(-1, 1)
    out = xp.zeros((num, d), dtype=rows.dtype)
    flat = idx.reshape(-1)
    if xp is np and add_rows(out, flat, rows):  # one C loop (ops/index_kernels.py)
        return out.astype(g.dtype, copy=False)
    if flat.size:  # rows grouped by index, each group summed by one reduceat
        order = xp.argsort(flat, kind="stable")
        ordered = flat[order]
        starts = xp.flatnonzero(xp.concatenate(([True], ordered[1:] != ordered[:-1])))
        out[ordered[starts]] = xp.add.reduceat(rows[order], starts, axis=0)
    return out.astype(g.dtype, copy=False)


def _embedding_backward_vjp(n, gg):
    idx = n.saved_inputs()[1]
    p = n.params
    rows = apply(_EMBEDDING, gg, idx, padding_idx=None, scale_grad_by_freq=False)
    if p["padding_idx"] is None and not p["scale_grad_by_freq"]:
        return rows, None
    factor = apply(_EMBEDDING_GRAD_SCALE, idx, num=p["num"], padding_idx=p["padding_idx"],
                   scale_grad_by_freq=p["scale_grad_by_freq"], dtype=gg.dtype)
    return rows * unsqueeze(factor, -1), None


def _embedding_vjp(n, g):
    idx = n.saved_inputs()[1]
    return apply(_EMBEDDING_BACKWARD, g, idx, num=n.inputs[0].shape[0], **n.params), None


_EMBEDDING = register(
    "embedding", lambda xp, w, idx, **params: _embedding_forward(xp, w, idx), _embedding_vjp,
    saves_inputs=(1,),
    infer=lambda w, idx, **params: AbstractValue(tuple(idx.shape) + tuple(w.shape[1:]),
                                                 w.dtype))
_EMBEDDING_BACKWARD = register(
    "embedding_dense_backward", _embedding_backward_forward, _embedding_backward_vjp,
    saves_inputs=(1,),
    infer=lambda g, idx, num, **params: AbstractValue((num, g.shape[-1]), g.dtype))
_EMBEDDING_GRAD_SCALE = register(
    "embedding_grad_scale",
    lambda xp, idx, num, padding_idx, scale_grad_by_freq, dtype:
    _grad_scale(xp, idx, num, padding_idx, scale_grad_by_freq, dtype.np),
    infer=lambda idx, dtype, **params: AbstractValue(idx.shape, dtype))


def _check_indices(name, input):
    _require_tensor(name, "input", input)
    if input.dtype not in (dt.int64, dt.int32):
        raise EmberTypeError(f"{name}: expected indices of dtype int64 or int32, got "
                             f"{input.dtype.name} (shape {tuple(input.shape)})")


def _padding_idx(name, padding_idx, num):
    if padding_idx is None:
        return None
    if not -num <= padding_idx < num:
        raise EmberIndexError(f"{name}: padding_idx must be within the number of embeddings "
                              f"({num}), got {padding_idx}")
    return padding_idx % num


def _renorm_rows(weight, idx, max_norm, norm_type):
    """Rescale, in place, the rows of ``weight`` used by ``idx`` whose norm exceeds
    ``max_norm`` to that norm."""
    rows = np.unique(np.asarray(idx.numpy()).reshape(-1))
    if rows.size == 0:
        return
    with grad_mode.no_grad():
        sel = Tensor._make(weight._device.backend.asarray(rows), weight.device)
        chosen = weight[sel]
        norms = _norm(chosen, norm_type, 1, keepdim=True)
        scale = ew.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        weight[sel] = chosen * scale


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight`` (num_embeddings, dim) picked by the integer ``input``; the
    result has shape input.shape + (dim,). The ``padding_idx`` row gets no gradient;
    with ``max_norm``, the rows used are first renormalised in place.

    >>> F.embedding(ember.tensor([1, 0]), ember.tensor([[0.0, 1.0], [2.0, 3.0]]))
    tensor([[2., 3.],
            [0., 1.]])
    """
    _check_indices("embedding", input)
    _require_tensor("embedding", "weight", weight)
    if weight.ndim != 2:
        raise ShapeError(f"embedding: expected a 2-D weight (num_embeddings, embedding_dim), "
                         f"got shape {tuple(weight.shape)}")
    if sparse:
        raise NotImplementedError("embedding: sparse=True is not supported (ember has no "
                                  "sparse tensors); use sparse=False")
    padding_idx = _padding_idx("embedding", padding_idx, weight.shape[0])
    if max_norm is not None:
        _renorm_rows(weight, input, max_norm, norm_type)
    return apply(_EMBEDDING, weight, input, padding_idx=padding_idx,
                 scale_grad_by_freq=bool(scale_grad_by_freq))


def _bags(input, offsets, include_last_offset):
    """(flat indices, bag id per index, number of bags) for embedding_bag's input."""
    if input.ndim == 2:
        if offsets is not None:
            raise EmberError(f"embedding_bag: offsets must be None when input is 2-D (got "
                             f"input of shape {tuple(input.shape)})")
        b, length = input.shape
        ids = np.repeat(np.arange(b), length)
        return reshape(input, (-1,)), ids, b
    if input.ndim != 1:
        raise ShapeError(f"embedding_bag: expected a 1-D or 2-D input, got shape "
                         f"{tuple(input.shape)}")
    if offsets is None or offsets.ndim != 1:
        raise EmberError("embedding_bag: a 1-D input needs 1-D offsets (the start of each "
                         f"bag), got {None if offsets is None else tuple(offsets.shape)}")
    starts = np.asarray(offsets.numpy()).astype(np.int64)
    if include_last_offset:
        starts = starts[:-1]
    n = input.shape[0]
    if starts.size and (starts[0] != 0 or (np.diff(starts) < 0).any() or starts[-1] > n):
        raise EmberError(f"embedding_bag: offsets must start at 0, be non-decreasing and "
                         f"not exceed the input length {n}, got {starts.tolist()}")
    ids = np.searchsorted(starts, np.arange(n), side="right") - 1
    return input, ids, starts.size


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None,
                  max_norm: float | None = None, norm_type: float = 2,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None,
                  include_last_offset: bool = False, padding_idx: int | None = None) -> Tensor:
    """Sums, means or maxima of bags of embeddings, without building the intermediate
    embeddings per bag. ``input`` is (B, L) (B bags of L indices) or 1-D with ``offsets``
    giving where each bag starts. Indices equal to ``padding_idx`` are left out; empty
    bags give zeros.

    >>> w = ember.tensor([[1.0, 1.0], [3.0, 5.0]])
    >>> F.embedding_bag(ember.tensor([[0, 1]]), w)
    tensor([[2., 3.]])
    """
    name = "embedding_bag"
    _check_indices(name, input)
    if mode not in ("sum", "mean", "max"):
        raise EmberValueError(f"{name}: mode has to be one of sum, mean or max, got "
                              f"{mode!r}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise EmberError(f"{name}: per_sample_weights was not None; per_sample_weights is "
                             f"only supported for mode='sum' (got mode='{mode}')")
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ShapeError(f"{name}: per_sample_weights of shape "
                             f"{tuple(per_sample_weights.shape)} must have input's shape "
                             f"{tuple(input.shape)}")
    flat, ids, bags = _bags(input, offsets, include_last_offset)
    num, dim = weight.shape
    padding_idx = _padding_idx(name, padding_idx, num)
    rows = embedding(flat, weight, None, max_norm, norm_type, scale_grad_by_freq, sparse)
    keep = None if padding_idx is None else np.asarray(flat.numpy()) != padding_idx
    device = weight._device.backend
    out = weight.new_zeros(bags, dim)
    if mode == "max":
        where = np.arange(ids.size) if keep is None else np.nonzero(keep)[0]
        picked = rows[Tensor._make(device.asarray(where), weight.device)]
        index = Tensor._make(device.asarray(np.repeat(ids[where], dim).reshape(-1, dim)),
                             weight.device)
        return scatter_reduce(out, 0, index, picked, "amax", include_self=False)
    if per_sample_weights is not None:
        rows = rows * unsqueeze(reshape(per_sample_weights, (-1,)), 1)
    if keep is not None:
        rows = rows * Tensor._make(device.asarray(keep[:, None].astype(weight.dtype.np)),
                                   weight.device)
    total = index_add(out, 0, Tensor._make(device.asarray(ids), weight.device), rows)
    if mode == "sum":
        return total
    counts = np.bincount(ids[keep] if keep is not None else ids, minlength=bags)
    divisor = np.maximum(counts, 1).astype(weight.dtype.np)[:, None]
    return total / Tensor._make(device.asarray(divisor), weight.device)


# one_hot --------------------------------------------------------------------------------------
def _one_hot(xp, a, num_classes):
    return (a[..., None] == xp.arange(num_classes)).astype(np.int64)


def _one_hot_infer(a, num_classes):
    return AbstractValue(tuple(a.shape) + (num_classes,), dt.int64)


_ONE_HOT = register("one_hot", _one_hot, infer=_one_hot_infer)


def _one_hot_checked(xp, a, num_classes):
    # (the checks run with the op, so a compiled graph makes them at every call too)
    if a.size:
        low, high = int(a.min()), int(a.max())
        if low < 0:
            raise EmberError(f"one_hot: class values must be non-negative, got {low}")
        if high >= num_classes:
            raise EmberError(f"one_hot: class values must be smaller than num_classes "
                             f"({num_classes}), got {high}")
    return _one_hot(xp, a, num_classes)


# F.one_hot's op: one_hot with its range checks (the losses' backward use the plain one)
_ONE_HOT_CHECKED = register("one_hot_checked", _one_hot_checked, infer=_one_hot_infer)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding of the class indices ``tensor``: shape tensor.shape +
    (num_classes,). ``num_classes=-1`` means the largest value plus one.

    >>> F.one_hot(ember.tensor([0, 2]))
    tensor([[1, 0, 0],
            [0, 0, 1]])
    """
    _require_tensor("one_hot", "tensor", tensor)
    if tensor.dtype is not dt.int64:
        raise EmberTypeError(f"one_hot: is only applicable to index tensors of dtype int64, "
                             f"got {tensor.dtype.name}")
    data = tensor._data
    if num_classes == -1:
        if tensor.numel() == 0:
            raise EmberError("one_hot: can not infer the total number of classes from an "
                             "empty tensor; pass num_classes")
        num_classes = int(data.max()) + 1
    if not isinstance(num_classes, numbers.Integral) or num_classes < 0:
        raise EmberError(f"one_hot: num_classes should be -1 or a non-negative int, got "
                         f"{num_classes!r}")
    return apply(_ONE_HOT_CHECKED, tensor, num_classes=int(num_classes))


# Distances -------------------------------------------------------------------------------------
def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Cosine of the angle between x1 and x2 along ``dim`` (broadcasting):
    sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps)) (the clamp does not stop the
    norm's gradient, as in PyTorch).

    >>> F.cosine_similarity(ember.tensor([[1.0, 0.0]]), ember.tensor([[1.0, 1.0]]))
    tensor([0.7071])
    """
    try:
        shape = broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    except EmberError:
        raise ShapeError(f"cosine_similarity: shapes {tuple(x1.shape)} and "
                         f"{tuple(x2.shape)} cannot be broadcast together") from None
    a, b = expand(x1, shape), expand(x2, shape)
    d = wrap_dim(dim, len(shape), "cosine_similarity")
    return _sum((a / _clamped_norm(a, d, eps, shape)) * (b / _clamped_norm(b, d, eps, shape)),
                d)


def _clamped_norm(x, dim, eps, shape):
    """||x|| along dim, raised to eps where smaller; as in PyTorch the clamp changes the
    value only, the gradient is the norm's."""
    n = _norm(x, 2, dim, keepdim=True)
    with grad_mode.no_grad():
        lift = clamp_min(n, eps) - n
    return expand(n + lift, shape)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """||x1 - x2 + eps||_p along the last dim (broadcasting).

    >>> F.pairwise_distance(ember.tensor([[0.0, 0.0]]), ember.tensor([[3.0, 4.0]]))
    tensor([5.0000])
    """
    if x1.ndim == 0 and x2.ndim == 0:
        raise ShapeError("pairwise_distance: expected inputs with at least one dim, got two "
                         "0-d tensors")
    return _norm(x1 - x2 + eps, p, -1, keepdim=keepdim)


def pdist(input: Tensor, p: float = 2) -> Tensor:
    """p-norm distances between every pair of rows of an (N, M) input, i < j, in
    row-major order (N * (N - 1) / 2 values).

    >>> F.pdist(ember.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]]))
    tensor([5.0000, 1.0000, 4.2426])
    """
    if input.ndim != 2:
        raise ShapeError(f"pdist: expected a 2-D input (N, M), got shape {tuple(input.shape)}")
    if p < 0:
        raise EmberError(f"pdist: only supports non-negative p values, got {p}")
    i, j = np.triu_indices(input.shape[0], 1)
    device = input._device.backend
    left = input[Tensor._make(device.asarray(i), input.device)]
    right = input[Tensor._make(device.asarray(j), input.device)]
    return _norm(left - right, p, 1)


# Pixel shuffle ----------------------------------------------------------------------------------
def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """Rearrange (*, C * r^2, H, W) into (*, C, H * r, W * r), r = upscale_factor.

    >>> F.pixel_shuffle(ember.ones(1, 4, 2, 3), 2).shape
    ember.Size([1, 1, 4, 6])
    """
    r = upscale_factor
    if input.ndim < 3 or r <= 0 or input.shape[-3] % (r * r):
        raise ShapeError(f"pixel_shuffle: expected an input (*, C * {r}^2, H, W) whose "
                         f"channel dim is divisible by the square of upscale_factor, got "
                         f"shape {tuple(input.shape)}")
    *lead, c, h, w = input.shape
    n = len(lead)
    x = reshape(input, (*lead, c // (r * r), r, r, h, w))
    x = permute(x, (*range(n), n, n + 3, n + 1, n + 4, n + 2))
    return reshape(x, (*lead, c // (r * r), h * r, w * r))


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """Rearrange (*, C, H * r, W * r) into (*, C * r^2, H, W), r = downscale_factor.

    >>> F.pixel_unshuffle(ember.ones(1, 1, 4, 6), 2).shape
    ember.Size([1, 4, 2, 3])
    """
    r = downscale_factor
    if input.ndim < 3 or r <= 0 or input.shape[-2] % r or input.shape[-1] % r:
        raise ShapeError(f"pixel_unshuffle: expected an input (*, C, H, W) whose height and "
                         f"width are divisible by downscale_factor={r}, got shape "
                         f"{tuple(input.shape)}")
    *lead, c, h, w = input.shape
    n = len(lead)
    x = reshape(input, (*lead, c, h // r, r, w // r, r))
    x = permute(x, (*range(n), n, n + 2, n + 4, n + 1, n + 3))
    return reshape(x, (*lead, c * r * r, h // r, w // r))


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Interleave the channels of ``groups`` groups (ShuffleNet): (N, C, *) with channel
    ``g * (C / groups) + i`` moved to ``i * groups + g``.

    >>> F.channel_shuffle(ember.arange(4.0).reshape(1, 4, 1), 2).flatten()
    tensor([0., 2., 1., 3.])
    """
    if not isinstance(groups, numbers.Integral) or groups <= 0:
        raise EmberError(f"channel_shuffle: groups must be a positive int, got {groups!r}")
    if input.ndim < 3 or input.shape[1] % groups:
        raise ShapeError(f"channel_shuffle: expected an input (N, C, *) with C divisible by "
                         f"groups={groups}, got shape {tuple(input.shape)}")
    n, c, *rest = input.shape
    x = reshape(input, (n, groups, c // groups, *rest))
    return reshape(x.transpose(1, 2), (n, c, *rest))
