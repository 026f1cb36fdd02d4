"""Upsample: resize by a scale factor or to a size (``F.interpolate`` as a module)."""
from __future__ import annotations

from ...tensor import Tensor
from .. import functional as F
from ..module import Module

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"]


class Upsample(Module):
    """Resize (N, C, *spatial) inputs to ``size`` or by ``scale_factor``.

    Args:
        size: the output's spatial size.
        scale_factor: the multiplier of the spatial size (one, or one per dimension).
        mode: ``"nearest"``, ``"linear"``, ``"bilinear"``, ...
        align_corners: for the linear modes, map the corner pixels onto each other.
        recompute_scale_factor: compute the scale from the output size actually used.

    >>> ember.nn.Upsample(scale_factor=2, mode="bilinear")(ember.randn(1, 1, 3, 3)).shape
    ember.Size([1, 1, 6, 6])
    """

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest",
                 align_corners: bool | None = None, recompute_scale_factor: bool | None = None):
        super().__init__()
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour upsampling of (N, C, H, W) inputs."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear upsampling of (N, C, H, W) inputs with ``align_corners=True``."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
