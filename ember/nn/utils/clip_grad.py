"""Gradient clipping: by total norm or by value."""
from __future__ import annotations

import math
from ...autograd import grad_mode
from ...errors import EmberError
from ...ops.creation import tensor as _tensor
from ...ops.shape import stack
from ...tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"]


def _as_list(tensors) -> list:
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def _vector_norm(t: Tensor, norm_type: float) -> Tensor:
    a = t.abs()
    if norm_type == math.inf:
        return a.amax() if a.numel() else a.sum()
    if norm_type == -math.inf:
        return a.amin()
    if norm_type == 0:
        return (a != 0).sum().to(t.dtype)
    if norm_type == 1:
        return a.sum()
    if norm_type == 2:
        return (a * a).sum().sqrt()
    return (a ** norm_type).sum() ** (1.0 / norm_type)


def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach=None) -> Tensor:
    """The ``norm_type``-norm of all ``tensors`` together (as if concatenated).

    ``foreach`` is accepted for compatibility and ignored.
    """
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return _tensor(0.0)
    with grad_mode.no_grad():
        norms = [_vector_norm(t, norm_type) for t in tensors]
        total = _vector_norm(stack([n.to(norms[0].dtype) for n in norms]), norm_type)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise EmberError(f"The total norm of order {norm_type} for gradients from "
                         "`parameters` is non-finite, so it cannot be clipped. To disable "
                         "this error and scale the gradients by the non-finite norm anyway, "
                         "set `error_if_nonfinite=False`")
    return total


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """Scale the gradients of ``parameters`` in place so that their total norm (as if
    concatenated) is at most ``max_norm``; returns the norm before clipping.

    Args:
        parameters: a tensor or an iterable of tensors whose ``.grad`` to clip.
        max_norm: the largest allowed norm.
        norm_type: the p of the p-norm (``inf`` for the largest absolute value).
        error_if_nonfinite: raise if the total norm is nan or inf.
        foreach: accepted for compatibility and ignored.

    >>> total = ember.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    """
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        return _tensor(0.0)
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    with grad_mode.no_grad():
        coef = (float(max_norm) / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.to(g.dtype))
    return total


def clip_grads_with_norm_(parameters, max_norm: float, total_norm, foreach=None) -> None:
    """Scale the gradients of ``parameters`` in place by
    ``min(1, max_norm / (total_norm + 1e-6))``, given their ``total_norm`` (from
    :func:`get_total_norm`, which may be computed over more tensors than these, e.g.
    across pipeline stages). ``clip_grad_norm_`` is ``get_total_norm`` then this.

    Args:
        parameters: a tensor or an iterable of tensors whose ``.grad`` to scale.
        max_norm: the largest allowed norm.
        total_norm: the total norm of the gradients (a tensor or a number).
        foreach: accepted for compatibility and ignored.

    >>> grads = [p.grad for p in model.parameters()]
    >>> norm = ember.nn.utils.get_total_norm(grads)
    >>> ember.nn.utils.clip_grads_with_norm_(model.parameters(), 1.0, norm)
    """
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        return
    if not isinstance(total_norm, Tensor):
        total_norm = _tensor(float(total_norm), dtype=grads[0].dtype)
    with grad_mode.no_grad():
        coef = (float(max_norm) / (total_norm.detach() + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.to(g.dtype))


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp the gradients of ``parameters`` in place to ``[-clip_value, clip_value]``.

    >>> ember.nn.utils.clip_grad_value_(model.parameters(), clip_value=0.5)
    """
    clip_value = float(clip_value)
    with grad_mode.no_grad():
        for p in _as_list(parameters):
            if p.grad is not None:
                p.grad.clamp_(min=-clip_value, max=clip_value)
