"""More pooling layers: power-average (LP) pooling, 3-D adaptive max pooling, max
unpooling and fractional max pooling."""
from __future__ import annotations

from ...errors import EmberValueError
from ...tensor import Tensor
from .. import functional as F
from ..module import Module
from .pooling import _AdaptiveMaxPool

__all__ = ["LPPool1d", "LPPool2d", "LPPool3d", "AdaptiveMaxPool3d", "MaxUnpool1d",
           "MaxUnpool2d", "MaxUnpool3d", "FractionalMaxPool2d", "FractionalMaxPool3d"]


def _ntuple(value, d: int) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * d


class _LPPoolNd(Module):
    _pool = ""

    def __init__(self, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, self._pool)(input, float(self.norm_type), self.kernel_size,
                                      self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """Power-average pooling of (N, C, L) or (C, L) inputs: ``(sum x ** p) ** (1 / p)``
    over each window (``p = inf``: the largest magnitude).

    Args:
        norm_type: the power ``p``.
        kernel_size: the window size.
        stride: the window step (defaults to ``kernel_size``).
        ceil_mode: round the output size up instead of down.

    >>> ember.nn.LPPool1d(2, 3, stride=2)(ember.randn(20, 16, 50)).shape
    ember.Size([20, 16, 24])
    """
    _pool = "lp_pool1d"


class LPPool2d(_LPPoolNd):
    """Power-average pooling of (N, C, H, W) or (C, H, W) inputs; arguments as
    :class:`LPPool1d`, as ints or pairs.

    >>> ember.nn.LPPool2d(1.5, (3, 2), stride=(2, 1))(ember.randn(1, 3, 9, 8)).shape
    ember.Size([1, 3, 4, 7])
    """
    _pool = "lp_pool2d"


class LPPool3d(_LPPoolNd):
    """Power-average pooling of (N, C, D, H, W) or (C, D, H, W) inputs; arguments as
    :class:`LPPool1d`, as ints or triples.

    >>> ember.nn.LPPool3d(2, 2)(ember.randn(1, 3, 4, 4, 4)).shape
    ember.Size([1, 3, 2, 2, 2])
    """
    _pool = "lp_pool3d"


class AdaptiveMaxPool3d(_AdaptiveMaxPool):
    """Max pooling of (N, C, D, H, W) or (C, D, H, W) inputs to ``output_size`` (an int or
    a triple whose None entries keep the input's size); with ``return_indices`` also the
    flat index of each maximum in its input volume.

    >>> ember.nn.AdaptiveMaxPool3d((2, None, 3))(ember.randn(1, 4, 5, 6, 7)).shape
    ember.Size([1, 4, 2, 6, 3])
    """
    _pool = "adaptive_max_pool3d"


class _MaxUnpoolNd(Module):
    _pool = ""
    _d = 0

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = _ntuple(kernel_size, self._d)
        self.stride = _ntuple(stride if stride is not None else kernel_size, self._d)
        self.padding = _ntuple(padding, self._d)

    def forward(self, input: Tensor, indices: Tensor, output_size=None) -> Tensor:
        return getattr(F, self._pool)(input, indices, self.kernel_size, self.stride,
                                      self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """The partial inverse of :class:`MaxPool1d`: zeros, with each input value at the
    index that max pooling returned for it. ``forward(input, indices, output_size=None)``;
    ``output_size`` resolves the pooled tensor's size where pooling rounded down.

    Args:
        kernel_size, stride (default ``kernel_size``), padding: those of the pooling.

    >>> pool, unpool = ember.nn.MaxPool1d(2, return_indices=True), ember.nn.MaxUnpool1d(2)
    >>> unpool(*pool(ember.tensor([[[1., 2., 3., 4., 5., 6., 7., 8.]]])))
    tensor([[[0., 2., 0., 4., 0., 6., 0., 8.]]])
    """
    _pool, _d = "max_unpool1d", 1


class MaxUnpool2d(_MaxUnpoolNd):
    """The partial inverse of :class:`MaxPool2d` over (N, C, H, W) or (C, H, W) inputs;
    see :class:`MaxUnpool1d`.

    >>> pool, unpool = ember.nn.MaxPool2d(2, return_indices=True), ember.nn.MaxUnpool2d(2)
    >>> x = ember.randn(1, 1, 5, 5)
    >>> unpool(*pool(x), output_size=x.size()).shape
    ember.Size([1, 1, 5, 5])
    """
    _pool, _d = "max_unpool2d", 2


class MaxUnpool3d(_MaxUnpoolNd):
    """The partial inverse of :class:`MaxPool3d` over (N, C, D, H, W) or (C, D, H, W)
    inputs; see :class:`MaxUnpool1d`.

    >>> pool, unpool = ember.nn.MaxPool3d(2, return_indices=True), ember.nn.MaxUnpool3d(2)
    >>> unpool(*pool(ember.randn(1, 2, 4, 4, 4))).shape
    ember.Size([1, 2, 4, 4, 4])
    """
    _pool, _d = "max_unpool3d", 3


class _FractionalMaxPoolNd(Module):
    _pool = ""
    _d = 0

    def __init__(self, kernel_size, output_size=None, output_ratio=None,
                 return_indices: bool = False, _random_samples=None):
        super().__init__()
        name = type(self).__name__
        kernels = _ntuple(kernel_size, self._d)
        if not all(isinstance(k, int) and k > 0 for k in kernels):
            raise EmberValueError(f"{name}: kernel_size must be greater than 0, but got "
                                  f"{kernel_size}")
        self.kernel_size = kernels
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = None if output_size is None else _ntuple(output_size, self._d)
        self.output_ratio = None if output_ratio is None else _ntuple(output_ratio, self._d)
        if output_size is None and output_ratio is None:
            raise EmberValueError(f"{name} requires specifying either an output size, or a "
                                  "pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise EmberValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise EmberValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input: Tensor):
        return getattr(F, self._pool)(input, self.kernel_size, self.output_size,
                                      self.output_ratio, self.return_indices,
                                      _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Fractional max pooling of (N, C, H, W) or (C, H, W) inputs: the max over
    ``kernel_size`` windows at pseudo-random steps, to a given output size; see
    :func:`ember.nn.functional.fractional_max_pool2d`.

    Args:
        kernel_size: the window size, an int or a pair.
        output_size: the output's size, an int or a pair; or
        output_ratio: the output's size as a fraction of the input's, in (0, 1).
        return_indices: also return the indices (for :class:`MaxUnpool2d`).
        _random_samples: fixed ``(N, C, 2)`` samples (a buffer); new ones each call
            when None.

    >>> ember.nn.FractionalMaxPool2d(3, output_ratio=0.5)(ember.randn(2, 4, 20, 16)).shape
    ember.Size([2, 4, 10, 8])
    """
    _pool, _d = "fractional_max_pool2d", 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """Fractional max pooling of (N, C, D, H, W) or (C, D, H, W) inputs; see
    :class:`FractionalMaxPool2d` (``_random_samples`` is ``(N, C, 3)``).

    >>> ember.nn.FractionalMaxPool3d(2, output_size=(4, 5, 6))(ember.randn(1, 2, 9, 9, 9)).shape
    ember.Size([1, 2, 4, 5, 6])
    """
    _pool, _d = "fractional_max_pool3d", 3
