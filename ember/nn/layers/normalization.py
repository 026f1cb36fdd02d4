"""Normalisation layers: BatchNorm1d/2d/3d, InstanceNorm1d/2d/3d, LayerNorm, GroupNorm,
RMSNorm, LocalResponseNorm."""
from __future__ import annotations

import numbers
import warnings

from ... import dtypes
from ...ops.creation import empty, ones, tensor, zeros
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d",
           "InstanceNorm3d", "LayerNorm", "GroupNorm", "RMSNorm", "LocalResponseNorm"]


class _NormBase(Module):
    """Per-channel affine parameters and running statistics (BatchNorm, InstanceNorm)."""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None,
                 dtype=None, *, bias: bool = True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        self.register_parameter("weight", None)
        self.register_parameter("bias", None)
        if affine:
            self.weight = Parameter(empty(num_features, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(empty(num_features, device=device, dtype=dtype))
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, device=device,
                                                       dtype=dtype))
            self.register_buffer("running_var", ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=dtypes.int64,
                                                               device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        """Running mean 0, running variance 1, no batches seen."""
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    _ranks: tuple = ()

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim not in self._ranks:
            ranks = " or ".join(f"{r}D" for r in self._ranks)
            raise ValueError(f"{type(self).__name__}: expected {ranks} input (got "
                             f"{input.ndim}D input of shape {tuple(input.shape)})")

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative average of every batch seen
                factor = 1.0 / float(self.num_batches_tracked)
        use_batch_stats = self.training or (self.running_mean is None
                                            and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if keep else None,
                            self.running_var if keep else None, self.weight, self.bias,
                            use_batch_stats, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalisation over (N, C) or (N, C, L) inputs: each channel is normalised
    with the batch's mean and (biased) variance in training, with the running
    statistics in evaluation, then scaled and shifted by ``weight`` and ``bias``.

    Args:
        num_features: C.
        eps: added to the variance.
        momentum: the running statistics move this fraction towards the batch's (None:
            a cumulative average over all batches); the running variance is unbiased.
        affine: learn ``weight`` (init 1) and ``bias`` (init 0).
        track_running_stats: keep ``running_mean``, ``running_var`` and
            ``num_batches_tracked`` buffers (else batch statistics are used in
            evaluation too).

    >>> ember.nn.BatchNorm1d(100)(ember.randn(20, 100)).shape
    ember.Size([20, 100])
    """
    _ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation over (N, C, H, W) inputs; arguments as :class:`BatchNorm1d`.

    >>> ember.nn.BatchNorm2d(16, momentum=None)(ember.randn(4, 16, 8, 8)).shape
    ember.Size([4, 16, 8, 8])
    """
    _ranks = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalisation over (N, C, D, H, W) inputs; arguments as
    :class:`BatchNorm1d`."""
    _ranks = (5,)


class _InstanceNorm(_NormBase):
    _unbatched_rank = 0

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None,
                 dtype=None, *, bias: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def forward(self, input: Tensor) -> Tensor:
        n = self._unbatched_rank
        if input.ndim not in (n, n + 1):
            raise ValueError(f"{type(self).__name__}: expected {n}D or {n + 1}D input (got "
                             f"{input.ndim}D input of shape {tuple(input.shape)})")
        feature_dim = input.ndim - n
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match "
                                 f"num_features ({self.num_features}), but got: "
                                 f"{input.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. "
                          "You can silence this warning by not passing in num_features, "
                          "which is not used because affine=False", stacklevel=2)
        unbatched = input.ndim == n
        if unbatched:
            input = input.unsqueeze(0)
        out = F.instance_norm(input, self.running_mean, self.running_var, self.weight,
                              self.bias, self.training or not self.track_running_stats,
                              0.0 if self.momentum is None else self.momentum, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation over (N, C, L) or (C, L) inputs: each sample's channel is
    normalised over its length. ``affine`` and ``track_running_stats`` default to False.

    >>> ember.nn.InstanceNorm1d(100, affine=True)(ember.randn(20, 100, 40)).shape
    ember.Size([20, 100, 40])
    """
    _unbatched_rank = 2


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation over (N, C, H, W) or (C, H, W) inputs (per sample and
    channel, over the pixels).

    >>> ember.nn.InstanceNorm2d(3)(ember.randn(2, 3, 8, 8)).shape
    ember.Size([2, 3, 8, 8])
    """
    _unbatched_rank = 3


class InstanceNorm3d(_InstanceNorm):
    """Instance normalisation over (N, C, D, H, W) or (C, D, H, W) inputs."""
    _unbatched_rank = 4


def _as_shape(normalized_shape) -> tuple:
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(normalized_shape)


class LayerNorm(Module):
    """Normalise over the last ``len(normalized_shape)`` dimensions, then scale and shift
    elementwise (``weight`` init 1, ``bias`` init 0).

    >>> ember.nn.LayerNorm(10)(ember.randn(20, 5, 10)).shape
    ember.Size([20, 5, 10])
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _as_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(self.normalized_shape, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(empty(self.normalized_shape, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class GroupNorm(Module):
    """Normalise each sample over groups of channels (and all positions), then scale and
    shift per channel.

    >>> ember.nn.GroupNorm(3, 6)(ember.randn(20, 6, 10, 10)).shape
    ember.Size([20, 6, 10, 10])
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device=None, dtype=None, *, bias: bool = True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        self.register_parameter("weight", None)
        self.register_parameter("bias", None)
        if affine:
            self.weight = Parameter(empty(num_channels, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(empty(num_channels, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}, bias={self.bias is not None}")


class RMSNorm(Module):
    """Divide by the root mean square over the last ``len(normalized_shape)`` dimensions
    (plus ``eps``; None means the dtype's machine epsilon), then scale elementwise.

    >>> ember.nn.RMSNorm([5, 10])(ember.randn(20, 5, 10)).shape
    ember.Size([20, 5, 10])
    """

    def __init__(self, normalized_shape, eps: float | None = None,
                 elementwise_affine: bool = True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _as_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class LocalResponseNorm(Module):
    """Normalise each channel by the activity of its ``size`` neighbouring channels."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input: Tensor) -> Tensor:
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
