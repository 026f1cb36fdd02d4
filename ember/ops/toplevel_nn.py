"""PyTorch's top-level forms of a few nn ops: ``ember.channel_shuffle`` (and
``native_channel_shuffle``), ``ember.ctc_loss`` (integer ``reduction``, as
``torch.ctc_loss``), ``ember.nonzero_static`` and ``ember.embedding_renorm_``.

>>> ember.nonzero_static(ember.tensor([0, 3, 0, 5]), size=3)
tensor([[ 1],
        [ 3],
        [-1]])
"""
from __future__ import annotations

import builtins
import numbers

from .. import dtypes as dt
from ..autograd import grad_mode
from ..errors import EmberError, EmberTypeError, ShapeError
from ..tensor import Tensor
from .creation import full
from .loss_ctc import ctc_loss as _ctc_loss
from .nn_misc import _renorm_rows, channel_shuffle
from .shape import cat
from .take import nonzero

__all__ = ["channel_shuffle", "native_channel_shuffle", "ctc_loss", "nonzero_static",
           "embedding_renorm_"]

_REDUCTIONS = {1: "mean", 2: "sum"}  # at::Reduction: 0 none, 1 mean, 2 sum


def native_channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """The same as :func:`ember.channel_shuffle` (PyTorch's native form of it).

    >>> ember.nn.functional.native_channel_shuffle(ember.arange(4.0).reshape(1, 4, 1), 2)
    tensor([[[0.],
             [2.],
             [1.],
             [3.]]])
    """
    return channel_shuffle(input, groups)


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths,
             blank: int = 0, reduction: int = 0, zero_infinity: bool = False) -> Tensor:
    """Connectionist temporal classification loss with ``torch.ctc_loss``'s signature:
    ``reduction`` is an int, 0 (none: the (N,) losses), 1 (mean of the losses each divided
    by its target length) or 2 (sum). See :func:`ember.nn.functional.ctc_loss` for the
    arguments, which takes ``reduction`` as a string.

    Like ``torch.ctc_loss``, the default gives the unreduced losses (PyTorch's binding
    documents ``Mean`` but returns them unreduced), and any int other than 1 or 2 means
    none.

    >>> lp = ember.randn(5, 2, 4).log_softmax(2)
    >>> ember.ctc_loss(lp, ember.tensor([[1, 2], [1, 1]]), [5, 5], [2, 2]).shape
    ember.Size([2])
    """
    if not isinstance(reduction, numbers.Integral) or isinstance(reduction, builtins.bool):
        raise EmberTypeError(f"ctc_loss(): argument 'reduction' must be int (0 none, 1 mean, "
                             f"2 sum), not {type(reduction).__name__}; "
                             f"ember.nn.functional.ctc_loss takes the string form")
    return _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=blank,
                     reduction=_REDUCTIONS.get(int(reduction), "none"),
                     zero_infinity=zero_infinity)


def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:
    """The positions of the non-zero elements as :func:`ember.nonzero`, but always
    ``size`` rows: truncated when there are more, padded with ``fill_value`` rows when
    fewer. Shape ``(size, input.ndim)``, int64. Not differentiable (an index).

    Args:
        input: any tensor.
        size: the number of rows (a non-negative int).
        fill_value: the value of the padding rows (default -1).

    >>> ember.nonzero_static(ember.tensor([[1, 0], [3, 2]]), size=2)
    tensor([[0, 0],
            [1, 0]])
    """
    if not isinstance(input, Tensor):
        raise EmberTypeError(f"nonzero_static(): argument 'input' must be Tensor, not "
                             f"{type(input).__name__}")
    if not isinstance(size, numbers.Integral) or isinstance(size, builtins.bool):
        raise EmberTypeError(f"nonzero_static(): argument 'size' must be int, not "
                             f"{type(size).__name__}")
    if size < 0:
        raise EmberError(f"nonzero_static: 'size' must be a non-negative integer, got {size}")
    if not isinstance(fill_value, numbers.Integral):
        raise EmberTypeError(f"nonzero_static(): argument 'fill_value' must be int, not "
                             f"{type(fill_value).__name__}")
    found = nonzero(input)
    count = found.shape[0]
    if count >= size:
        return found[:size]
    pad = full((size - count, found.shape[1]), int(fill_value), dtype=dt.int64,
               device=input.device)
    return cat([found, pad], 0)


def embedding_renorm_(weight: Tensor, indices: Tensor, max_norm: float,
                      norm_type: float) -> Tensor:
    """Rescale in place the rows of ``weight`` named in ``indices`` whose ``norm_type``-norm
    exceeds ``max_norm``, to norm ``max_norm`` (scale ``max_norm / (norm + 1e-7)``), as
    ``F.embedding(..., max_norm=...)`` does before looking rows up. Returns ``weight``.

    Not differentiable (as in PyTorch): on a weight that requires grad, call it under
    :class:`ember.no_grad`.

    Args:
        weight: (num_embeddings, embedding_dim).
        indices: int64 or int32 tensor of row indices (any shape; repeats count once).
        max_norm: the largest norm a row keeps.
        norm_type: the p of the p-norm (``float('inf')`` for the max-abs norm).

    >>> w = ember.tensor([[3.0, 4.0], [0.3, 0.4]])
    >>> ember.embedding_renorm_(w, ember.tensor([0, 1]), 1.0, 2.0)
    tensor([[0.6000, 0.8000],
            [0.3000, 0.4000]])
    """
    if not isinstance(weight, Tensor) or not isinstance(indices, Tensor):
        raise EmberTypeError(f"embedding_renorm_: expected tensors weight and indices, got "
                             f"{type(weight).__name__} and {type(indices).__name__}")
    if weight.ndim != 2:
        raise ShapeError(f"embedding_renorm_: expected a 2-D weight (num_embeddings, "
                         f"embedding_dim), got shape {tuple(weight.shape)}")
    if indices.dtype not in (dt.int64, dt.int32):
        raise EmberTypeError(f"embedding_renorm_: expected indices of dtype int64 or int32, "
                             f"got ember.{indices.dtype.name}")
    if weight.requires_grad and grad_mode.is_grad_enabled():
        raise EmberError("embedding_renorm_: the derivative for embedding_renorm_ is not "
                         "implemented, and the weight requires grad; call it under "
                         "ember.no_grad()")
    _renorm_rows(weight, indices, max_norm, norm_type)
    return weight
