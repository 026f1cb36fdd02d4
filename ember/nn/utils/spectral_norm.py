"""The older, hook-based spectral normalisation (``torch.nn.utils.spectral_norm``): the
parameter ``weight_orig`` and the power-iteration buffers ``weight_u`` and ``weight_v``;
a forward pre-hook sets ``module.weight = weight_orig / sigma``. New code should use
:func:`ember.nn.utils.parametrizations.spectral_norm`."""
from __future__ import annotations

from typing import Any, TypeVar

from ...autograd import grad_mode
from ...ops.linalg import matmul
from ...tensor import Tensor
from .. import functional as F
from ..layers.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from ..layers.lazy import is_lazy
from ..module import Module
from ..parameter import Parameter

__all__ = ["SpectralNorm", "spectral_norm", "remove_spectral_norm"]

T_module = TypeVar("T_module", bound=Module)


class SpectralNorm:
    """The forward pre-hook that sets ``module.<name>`` to ``<name>_orig`` divided by its
    estimated largest singular value."""

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12):
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name = name
        self.dim = dim
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        """``weight`` as a matrix whose rows run along ``dim``."""
        if self.dim != 0:
            weight = weight.permute(self.dim, *[d for d in range(weight.ndim) if d != self.dim])
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module: Module, do_power_iteration: bool) -> Tensor:
        """``<name>_orig / sigma``, after updating ``u`` and ``v`` in place when asked."""
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with grad_mode.no_grad():
                mat = weight_mat.detach()
                for _ in range(self.n_power_iterations):
                    v.copy_(F.normalize(matmul(mat.mT, u), dim=0, eps=self.eps))
                    u.copy_(F.normalize(matmul(mat, v), dim=0, eps=self.eps))
            # Clones: a later forward's in-place update must not change this graph.
            u, v = u.clone(), v.clone()
        sigma = (u * matmul(weight_mat, v)).sum()
        return weight / sigma

    def remove(self, module: Module) -> None:
        with grad_mode.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self.name,
                self.compute_weight(module, do_power_iteration=module.training))

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int,
              eps: float) -> "SpectralNorm":
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same "
                                   f"parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters.get(name)
        if weight is None:
            raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
        if is_lazy(weight):
            raise ValueError("The module passed to `SpectralNorm` can't have uninitialized "
                             "parameters. Make sure to run the dummy forward before applying "
                             "spectral normalization")
        with grad_mode.no_grad():
            h, w = fn.reshape_weight_to_matrix(weight.detach()).shape
            u = F.normalize(weight.new_empty((h,)).normal_(0, 1), dim=0, eps=fn.eps)
            v = F.normalize(weight.new_empty((w,)).normal_(0, 1), dim=0, eps=fn.eps)
        delattr(module, fn.name)
        module.register_parameter(fn.name + "_orig", weight)
        setattr(module, fn.name, weight.detach())
        module.register_buffer(fn.name + "_u", u)
        module.register_buffer(fn.name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(module: T_module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> T_module:
    """Divide ``module.<name>`` by its largest singular value, estimated by power
    iteration, before each forward: the parameter becomes ``<name>_orig`` and the
    singular-vector estimates the buffers ``<name>_u`` and ``<name>_v`` (random at first;
    each training forward runs ``n_power_iterations`` steps and updates them in place).
    PyTorch's old format; :func:`ember.nn.utils.parametrizations.spectral_norm` is the
    current one, and the one that works under ``ember.jit`` (this hook stores the weight
    on the module, which a compiled function may not do: it raises).

    Args:
        module: the module.
        name: the weight's name.
        n_power_iterations: power-iteration steps per training forward.
        eps: added for numerical stability when normalising.
        dim: the output dim (0, or 1 for ``ConvTranspose``, by default).

    Returns:
        ``module``.

    >>> m = ember.nn.utils.spectral_norm(ember.nn.Linear(20, 40))
    >>> m.weight_u.shape
    ember.Size([40])
    """
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d,
                                       ConvTranspose3d)) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: T_module, name: str = "weight") -> T_module:
    """Undo :func:`spectral_norm`: ``module.<name>`` becomes a parameter again, holding
    the current normalised weight (no further power iteration).

    >>> m = ember.nn.utils.remove_spectral_norm(ember.nn.utils.spectral_norm(ember.nn.Linear(2, 3)))
    """
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
