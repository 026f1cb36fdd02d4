"""Flatten and Unflatten: reshape a range of dimensions."""
from __future__ import annotations

from ...errors import EmberTypeError
from ...tensor import Tensor
from ..module import Module

__all__ = ["Flatten", "Unflatten"]


class Flatten(Module):
    """Flatten dimensions ``start_dim`` to ``end_dim`` into one (by default everything
    but the batch dimension).

    >>> ember.nn.Flatten()(ember.zeros(32, 1, 5, 5)).shape
    ember.Size([32, 25])
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Expand dimension ``dim`` into the shape ``unflattened_size``.

    >>> ember.nn.Unflatten(1, (2, 5, 5))(ember.zeros(2, 50)).shape
    ember.Size([2, 2, 5, 5])
    """

    def __init__(self, dim: int, unflattened_size: tuple):
        super().__init__()
        if not isinstance(dim, int):
            raise EmberTypeError("invalid argument type for dim parameter (ember has no named "
                                 "dimensions; give an int)")
        if not isinstance(unflattened_size, (tuple, list)):
            raise EmberTypeError(f"unflattened_size must be a tuple of ints, but found type "
                                 f"{type(unflattened_size).__name__}")
        for i, s in enumerate(unflattened_size):
            if not isinstance(s, int):
                raise EmberTypeError(f"unflattened_size must be tuple of ints, but found "
                                     f"element of type {type(s).__name__} at pos {i}")
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input: Tensor) -> Tensor:
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
