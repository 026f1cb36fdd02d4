"""Parameters to one flat vector and back."""
from __future__ import annotations

from typing import Iterable

from ...errors import EmberError, EmberTypeError
from ...ops.shape import cat
from ...tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _check_device(param: Tensor, device):
    if device is not None and param.device != device:
        raise EmberTypeError(f"Found two parameters on different devices, this is currently "
                             f"not supported: {device} and {param.device}")
    return param.device


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """All ``parameters`` flattened and concatenated into one vector (differentiable).

    >>> ember.nn.utils.parameters_to_vector(ember.nn.Linear(3, 2).parameters()).shape
    ember.Size([8])
    """
    device = None
    flat = []
    for p in parameters:
        device = _check_device(p, device)
        flat.append(p.reshape(-1))
    if not flat:
        raise EmberError("parameters_to_vector: got no parameters")
    return cat(flat)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Set the ``parameters`` to consecutive slices of ``vec`` (the inverse of
    :func:`parameters_to_vector`); each parameter's data becomes a view of ``vec``."""
    if not isinstance(vec, Tensor):
        raise EmberTypeError(f"expected ember.Tensor, but got: {type(vec).__name__}")
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if vec.ndim != 1 or vec.numel() != total:
        raise EmberError(f"vector_to_parameters: vec has shape {tuple(vec.shape)}, but the "
                         f"parameters hold {total} values (expected shape ({total},))")
    device = None
    start = 0
    for p in params:
        device = _check_device(p, device)
        n = p.numel()
        p.data = vec[start:start + n].view(tuple(p.shape)).data
        start += n
