"""PyTorch's top-level tensor queries that ember also has as methods: ``ember.is_signed``,
``ember.get_device`` and ``ember.is_inference``.

>>> ember.get_device(ember.ones(2))
-1
"""
from __future__ import annotations

from .errors import EmberTypeError
from .tensor import Tensor

__all__ = ["is_signed", "get_device", "is_inference"]


def _check(op: str, input) -> None:
    if not isinstance(input, Tensor):
        raise EmberTypeError(f"{op}(): argument 'input' (position 1) must be Tensor, not "
                             f"{type(input).__name__}")


def is_signed(input: Tensor) -> bool:
    """Whether ``input``'s dtype is signed (every dtype but ``uint8`` and ``bool``).

    >>> ember.is_signed(ember.tensor([1], dtype=ember.uint8))
    False
    """
    _check("is_signed", input)
    return input.is_signed()


def get_device(input: Tensor) -> int:
    """The index of the GPU ``input`` is on, or -1 for a CPU tensor.

    >>> ember.get_device(ember.zeros(3))
    -1
    """
    _check("get_device", input)
    return input.get_device()


def is_inference(input: Tensor) -> bool:
    """Whether ``input`` is an inference tensor. Always False in ember:
    :class:`ember.inference_mode` turns gradients off but makes ordinary tensors.

    >>> ember.is_inference(ember.zeros(3))
    False
    """
    _check("is_inference", input)
    return input.is_inference()
