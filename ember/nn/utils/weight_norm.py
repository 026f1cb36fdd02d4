"""The older, hook-based weight normalisation (``torch.nn.utils.weight_norm``): the
weight is recomputed from ``weight_g`` and ``weight_v`` by a forward pre-hook. New code
should use :func:`ember.nn.utils.parametrizations.weight_norm`."""
from __future__ import annotations

import warnings
from typing import Any, TypeVar

from ...tensor import Tensor
from ..layers.lazy import is_lazy
from ..module import Module
from ..parameter import Parameter
from .parametrizations import _norm_except_dim

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm"]

T_module = TypeVar("T_module", bound=Module)


class WeightNorm:
    """The forward pre-hook that sets ``module.<name> = g * v / ||v||``."""

    def __init__(self, name: str, dim: int | None):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module: Module) -> Tensor:
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return v * (g / _norm_except_dim(v, self.dim))

    @staticmethod
    def apply(module: Module, name: str, dim: int | None) -> "WeightNorm":
        warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                      "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning,
                      stacklevel=3)
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same "
                                   f"parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        if is_lazy(weight):
            raise ValueError("The module passed to `WeightNorm` can't have uninitialized "
                             "parameters. Make sure to run the dummy forward before applying "
                             "weight normalization")
        delattr(module, name)
        module.register_parameter(name + "_g",
                                  Parameter(_norm_except_dim(weight.detach(), fn.dim)))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Module) -> None:
        weight = self.compute_weight(module)
        delattr(module, self.name)
        delattr(module, self.name + "_g")
        delattr(module, self.name + "_v")
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: T_module, name: str = "weight", dim: int | None = 0) -> T_module:
    """Split ``module.<name>`` into a magnitude ``<name>_g`` (the norm over every dim but
    ``dim``; the whole tensor's norm for ``dim=None``) and a direction ``<name>_v``,
    both parameters; a forward pre-hook sets ``module.<name> = g * v / ||v||`` before each
    forward. Deprecated (a ``FutureWarning``, as PyTorch's) in favour of
    :func:`ember.nn.utils.parametrizations.weight_norm`, which also works under
    ``ember.jit`` (this hook stores the weight on the module, which a compiled function
    may not do: it raises).

    Args:
        module: the module.
        name: the weight's name.
        dim: the dim that keeps its own norms.

    Returns:
        ``module``.

    >>> m = ember.nn.utils.weight_norm(ember.nn.Linear(20, 40), name="weight")
    >>> m.weight_g.shape, m.weight_v.shape
    (ember.Size([40, 1]), ember.Size([40, 20]))
    """
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: T_module, name: str = "weight") -> T_module:
    """Undo :func:`weight_norm`: ``module.<name>`` becomes a parameter again, holding the
    current ``g * v / ||v||``.

    >>> m = ember.nn.utils.remove_weight_norm(ember.nn.utils.weight_norm(ember.nn.Linear(2, 3)))
    """
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
