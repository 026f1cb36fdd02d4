"""PyTorch's ``native_*`` top-level ops: the normalizations that also return their
statistics (``native_layer_norm``, ``native_batch_norm``, ``native_group_norm``),
``native_dropout`` with its mask, and ``native_norm``.

Each is composed from ember ops, so gradients (to every output) and ``ember.jit``
tracing come for free.
"""
from __future__ import annotations

import numbers

from . import dtypes, linalg, ops
from .autograd import no_grad
from .ops import norm as _norm
from .errors import EmberTypeError, EmberValueError, ShapeError
from .tensor import Tensor

__all__ = ["native_layer_norm", "native_batch_norm", "native_group_norm",
           "native_dropout", "native_norm"]


def _check_tensor(op: str, what: str, value, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, Tensor):
        raise EmberTypeError(f"{op}: expected {what} to be a Tensor"
                             + (" or None" if optional else "")
                             + f", got {type(value).__name__}")


def _check_vector(op: str, what: str, value, size: int) -> None:
    _check_tensor(op, what, value, optional=True)
    if value is not None and value.numel() != size:
        raise ShapeError(f"{op}: expected {what} with {size} elements, got shape "
                         f"{tuple(value.shape)}")


def _normalize(x, dims, eps):
    """(x - mean) * rstd over ``dims`` (kept), and mean and rstd (biased variance)."""
    mean = x.mean(dims, keepdim=True)
    centered = x - mean
    var = (centered * centered).mean(dims, keepdim=True)
    rstd = (var + eps).rsqrt()
    return centered * rstd, mean, rstd


def native_layer_norm(input: Tensor, normalized_shape, weight: Tensor | None,
                      bias: Tensor | None, eps: float) -> tuple:
    """Layer normalization over the last ``len(normalized_shape)`` dims, as
    ``torch.native_layer_norm``; returns ``(output, mean, rstd)``.

    Args:
        input: (*, *normalized_shape).
        normalized_shape: the trailing shape to normalize over.
        weight, bias: tensors of ``normalized_shape``, or None.
        eps: added to the (biased) variance.

    ``mean`` and ``rstd`` (``1 / sqrt(var + eps)``) have the shape of ``input`` with the
    normalized dims set to 1; as in PyTorch, only ``output`` carries a gradient.

    >>> out, mean, rstd = ember.native_layer_norm(ember.randn(4, 3, 5), [3, 5], None,
    ...                                           None, 1e-5)
    >>> mean.shape
    ember.Size([4, 1, 1])
    """
    op = "native_layer_norm"
    _check_tensor(op, "input", input)
    shape = (int(normalized_shape),) if isinstance(normalized_shape, numbers.Integral) \
        else tuple(int(s) for s in normalized_shape)
    k = len(shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise ShapeError(f"{op}: Given normalized_shape={list(shape)}, expected input with "
                         f"shape [*, {', '.join(map(str, shape))}], but got input of size "
                         f"{list(input.shape)}")
    for what, t in (("weight", weight), ("bias", bias)):
        _check_tensor(op, what, t, optional=True)
        if t is not None and tuple(t.shape) != shape:
            raise ShapeError(f"{op}: expected {what} of shape {shape}, got "
                             f"{tuple(t.shape)}")
    if not input.dtype.is_floating_point:
        raise EmberTypeError(f"{op}: expected a floating-point input, got dtype "
                             f"{input.dtype.name}")
    # ember's fused normalization primitive (the one F.layer_norm runs)
    out, mean, rstd = _norm._normalize(_norm._LAYER_NORM, input,
                                       _norm._as_input_dtype(weight, input),
                                       _norm._as_input_dtype(bias, input),
                                       tuple(range(input.ndim - k, input.ndim)), eps)
    # as in PyTorch the statistics carry no grad, and have the input's dtype
    return out, mean.detach().to(input.dtype), rstd.detach().to(input.dtype)


def _channel_view(t, ndim: int):
    """A (C,) tensor shaped (1, C, 1, ...) to broadcast against an (N, C, *) input."""
    return t.reshape((1, -1) + (1,) * (ndim - 2))


def native_batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None,
                      running_mean: Tensor | None, running_var: Tensor | None,
                      training: bool, momentum: float, eps: float) -> tuple:
    """Batch normalization over every dim but the channel dim 1, as
    ``torch.native_batch_norm``; returns ``(output, save_mean, save_invstd)``.

    Args:
        input: (N, C, *).
        weight, bias: (C,) or None.
        running_mean, running_var: (C,) or None. In training they are updated in place:
            ``running = (1 - momentum) * running + momentum * batch_stat`` (the unbiased
            variance for ``running_var``); in evaluation they normalize the input.
        training: use the batch's statistics (and update the running ones).
        momentum, eps: as above; ``eps`` is added to the variance.

    In training ``save_mean`` is the batch mean (C,) and ``save_invstd`` is
    ``1 / sqrt(biased_var + eps)`` (C,); in evaluation both are empty (0,) tensors.
    As in PyTorch, only ``output`` carries a gradient.

    >>> rm, rv = ember.zeros(3), ember.ones(3)
    >>> out, m, invstd = ember.native_batch_norm(ember.randn(8, 3), None, None, rm, rv,
    ...                                          True, 0.1, 1e-5)
    >>> m.shape
    ember.Size([3])
    """
    op = "native_batch_norm"
    _check_tensor(op, "input", input)
    if input.ndim < 2:
        raise ShapeError(f"{op}: expected input of at least 2 dims (N, C, *), got shape "
                         f"{tuple(input.shape)}")
    channels = input.shape[1]
    for what, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var)):
        _check_vector(op, what, t, channels)
    view = lambda t: _channel_view(t, input.ndim)  # noqa: E731
    dims = (0,) + tuple(range(2, input.ndim))
    if training:
        count = input.numel() // max(channels, 1)
        if input.numel() == 0:
            raise EmberValueError(f"{op}: input tensor must have at least one element when "
                                  f"training, but got input of shape {tuple(input.shape)}")
        if count <= 1:
            raise EmberValueError(f"{op}: expected more than 1 value per channel when "
                                  f"training, got input of shape {tuple(input.shape)}")
        if not input.dtype.is_floating_point:
            raise EmberTypeError(f"{op}: expected a floating-point input, got dtype "
                                 f"{input.dtype.name}")
        out, mean, invstd = _norm._normalize(
            _norm._BATCH_NORM, input,
            _norm._channel_view(_norm._as_input_dtype(weight, input), input.ndim),
            _norm._channel_view(_norm._as_input_dtype(bias, input), input.ndim), dims, eps)
        # as in PyTorch, the saved statistics carry no gradient (the output does)
        save_mean = mean.reshape(channels).detach().to(input.dtype)
        save_invstd = invstd.reshape(channels).detach().to(input.dtype)
        with no_grad():
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(save_mean * momentum)
            if running_var is not None:
                var = input.detach().var(dims, unbiased=True)
                running_var.mul_(1 - momentum).add_(var * momentum)
    else:
        if running_mean is None or running_var is None:
            raise EmberValueError(f"{op}: running_mean and running_var must be given when "
                                  f"training=False (got "
                                  f"{'None' if running_mean is None else 'a tensor'} and "
                                  f"{'None' if running_var is None else 'a tensor'})")
        out = (input - view(running_mean)) * view(running_var + eps).rsqrt()
        save_mean = ops.creation.empty((0,), dtype=input.dtype, device=input.device)
        save_invstd = ops.creation.empty((0,), dtype=input.dtype, device=input.device)
        if weight is not None:
            out = out * view(weight)
        if bias is not None:
            out = out + view(bias)
    return out, save_mean, save_invstd


def native_group_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, N: int,
                      C: int, HxW: int, group: int, eps: float) -> tuple:
    """Group normalization, as ``torch.native_group_norm``; returns
    ``(output, mean, rstd)`` with ``mean`` and ``rstd`` of shape (N, group); all three
    carry gradients, as in PyTorch.

    Args:
        input: (N, C, *) with ``N * C * HxW`` elements.
        weight, bias: (C,) or None.
        N, C, HxW: the batch size, the channels and the size of the rest of the input.
        group: the number of groups, which must divide ``C``.
        eps: added to each group's (biased) variance.

    >>> out, mean, rstd = ember.native_group_norm(ember.randn(2, 6, 5), None, None, 2, 6,
    ...                                           5, 3, 1e-5)
    >>> rstd.shape
    ember.Size([2, 3])
    """
    op = "native_group_norm"
    _check_tensor(op, "input", input)
    N, C, HxW, group = int(N), int(C), int(HxW), int(group)
    if input.numel() != N * C * HxW or input.ndim < 2 or input.shape[0] != N \
            or input.shape[1] != C:
        raise ShapeError(f"{op}: expected input of shape (N={N}, C={C}, *) with N * C * HxW "
                         f"= {N * C * HxW} elements, got shape {tuple(input.shape)}")
    if group <= 0 or C % group:
        raise ShapeError(f"{op}: Expected number of channels in input to be divisible by "
                         f"num_groups, but got input of shape {list(input.shape)} and "
                         f"num_groups={group}")
    for what, t in (("weight", weight), ("bias", bias)):
        _check_vector(op, what, t, C)
    grouped = input.reshape(N, group, -1)
    out, mean, rstd = _normalize(grouped, (2,), eps)
    out = out.reshape(input.shape)
    view = lambda t: _channel_view(t, input.ndim)  # noqa: E731
    if weight is not None:
        out = out * view(weight)
    if bias is not None:
        out = out + view(bias)
    return out, mean.reshape(N, group), rstd.reshape(N, group)


def native_dropout(input: Tensor, p: float, train: bool | None) -> tuple:
    """Dropout that also returns its mask, as ``torch.native_dropout``: returns
    ``(output, mask)``, ``mask`` a bool tensor of the input's shape (True where kept) and
    ``output = input * mask / (1 - p)``. With ``train=False`` the output is a copy of
    the input and the mask all True; ``train=None`` counts as training.

    >>> out, mask = ember.native_dropout(ember.ones(4), 0.5, True)
    >>> mask.dtype
    ember.bool
    """
    op = "native_dropout"
    _check_tensor(op, "input", input)
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise EmberValueError(f"{op}: dropout probability has to be between 0 and 1, but "
                              f"got p={p}")
    if train is False:
        return input.clone(), ops.creation.ones(input.shape, dtype=dtypes.bool,
                                                device=input.device)
    if p == 1.0:
        mask = ops.creation.zeros(input.shape, dtype=dtypes.bool, device=input.device)
    else:
        mask = ops.random.rand_like(input) >= p
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    return input * mask * scale, mask


def native_norm(input: Tensor, p=2, dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """The ``p``-norm of ``input``, as ``torch.native_norm``: ``native_norm(input, p=2)``
    over all elements, and ``native_norm(input, p, dim, keepdim, dtype)`` over ``dim``
    (``p=None`` is 2; ``dtype`` converts the input first). PyTorch runs it on sparse
    tensors only; ember runs it on dense ones, with ``linalg.vector_norm``'s values.

    >>> ember.native_norm(ember.tensor([3.0, 4.0]))
    tensor(5.)
    """
    op = "native_norm"
    _check_tensor(op, "input", input)
    if not input.dtype.is_floating_point and dtype is None:
        raise EmberTypeError(f"{op}: expected a floating-point input, got dtype "
                             f"{input.dtype.name}")
    if dim is not None and not isinstance(dim, numbers.Integral):
        dim = tuple(int(d) for d in dim) or None
    return linalg.vector_norm(input, 2 if p is None else p, dim=dim, keepdim=keepdim,
                              dtype=dtype)
