"""Reverse-mode automatic differentiation: ``backward``, ``grad``, grad modes,
custom :class:`Function`, and ``gradcheck``/``gradgradcheck``."""
from __future__ import annotations

from ..errors import EmberError
from .function import Function, FunctionCtx
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled,
                        is_inference_mode_enabled, no_grad, set_grad_enabled)
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .graph import Node, _run_post_accumulate_hooks, accumulate_grad, run_backward

__all__ = ["backward", "grad", "Function", "FunctionCtx", "no_grad", "enable_grad",
           "set_grad_enabled", "inference_mode", "is_grad_enabled",
           "is_inference_mode_enabled", "gradcheck", "gradgradcheck", "GradcheckError", "Node"]


def _as_list(x):
    if x is None:
        return None
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


def _root_grads(outputs, grad_outputs, create_graph):
    from ..ops.creation import ones_like
    grads = _as_list(grad_outputs) or [None] * len(outputs)
    if len(grads) != len(outputs):
        raise EmberError(f"grad: got {len(grads)} grad_outputs for {len(outputs)} outputs")
    result = []
    for out, g in zip(outputs, grads):
        if g is None:
            if out.numel() != 1:
                raise EmberError(f"grad can be implicitly created only for scalar outputs; "
                                 f"got an output of shape {tuple(out.shape)}: pass "
                                 "gradient= (or grad_outputs=) of the same shape")
            if out.dtype.is_complex:
                raise EmberError(f"grad can be implicitly created only for real scalar "
                                 f"outputs; got {out.dtype.name}: take .real, .abs() or "
                                 "pass gradient=")
            g = ones_like(out)
        elif tuple(g.shape) != tuple(out.shape):
            raise EmberError(f"Mismatch in shape: grad_output has a shape of "
                             f"{tuple(g.shape)} and output has a shape of {tuple(out.shape)}")
        elif g.device is not out.device:
            raise EmberError(f"backward: invalid gradient at index {len(result)} - expected "
                             f"device {out.device} but got {g.device} (the gradient must be "
                             f"on the output's device)")
        elif not create_graph:
            g = g.detach()
        result.append(g)
    return result


def backward(tensors, grad_tensors=None, retain_graph: bool | None = None,
             create_graph: bool = False, inputs=None) -> None:
    """Accumulate gradients of ``tensors`` into the ``.grad`` of graph leaves.

    Args:
        tensors: tensor(s) to differentiate.
        grad_tensors: the gradient w.r.t. each tensor (None for one-element tensors).
        retain_graph: keep saved tensors for another backward (default: create_graph).
        create_graph: record the backward computation for higher-order gradients.
        inputs: if given, only these leaves get ``.grad``.
    """
    outputs = _as_list(tensors)
    if retain_graph is None:
        retain_graph = create_graph
    grads = _root_grads(outputs, grad_tensors, create_graph)
    if inputs is None:
        run_backward(outputs, grads, retain_graph, create_graph)
        return
    inputs = _as_list(inputs)
    if not inputs:
        raise EmberError("backward: 'inputs' argument to backward() cannot be empty.")
    found = run_backward(outputs, grads, retain_graph, create_graph, inputs=inputs,
                         allow_unused=True)
    for t, g in zip(inputs, found):
        if g is not None:
            accumulate_grad(t, g.clone() if create_graph else g.detach().clone(), create_graph)
            if t._hooks:
                _run_post_accumulate_hooks(t)


def grad(outputs, inputs, grad_outputs=None, retain_graph: bool | None = None,
         create_graph: bool = False, allow_unused: bool | None = None,
         materialize_grads: bool = False):
    """Return the gradients of ``outputs`` with respect to ``inputs`` (no ``.grad`` touched).

    >>> x = ember.tensor(2.0, requires_grad=True)
    >>> (g,) = ember.autograd.grad(x ** 3, x, create_graph=True)   # 3x² = 12
    >>> ember.autograd.grad(g, x)                                   # 6x = 12
    (tensor(12.),)
    """
    outputs = _as_list(outputs)
    inputs = _as_list(inputs)
    for i, t in enumerate(inputs):
        if not t.requires_grad:
            raise EmberError(f"grad: input {i} (shape {tuple(t.shape)}) does not require grad")
    if retain_graph is None:
        retain_graph = create_graph
    if allow_unused is None:
        allow_unused = materialize_grads
    elif materialize_grads and not allow_unused:
        raise ValueError("Expected allow_unused to be True or not passed when "
                         "materialize_grads=True, but got: allow_unused=False.")
    grads = _root_grads(outputs, grad_outputs, create_graph)
    result = run_backward(outputs, grads, retain_graph, create_graph, inputs=inputs,
                          allow_unused=allow_unused)
    if materialize_grads:
        from ..ops.creation import zeros_like
        result = tuple(zeros_like(t) if g is None else g for t, g in zip(inputs, result))
    return result


from . import forward_ad, functional  # noqa: E402,F401  (use the names above)
from .anomaly_mode import (detect_anomaly, is_anomaly_check_nan_enabled,  # noqa: E402,F401
                           is_anomaly_enabled, set_anomaly_enabled, set_detect_anomaly)
__all__ += ["detect_anomaly", "set_detect_anomaly", "forward_ad", "functional"]
