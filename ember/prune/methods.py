"""Masked reparametrisation, as ``torch.nn.utils.prune`` does it.

Pruning ``module.weight`` moves the parameter (the same object, so an optimizer built
before still holds it) to ``module.weight_orig``, adds a buffer ``module.weight_mask``
of 0s and 1s, and registers a forward pre-hook that sets the plain attribute
``module.weight = weight_orig * weight_mask`` before every forward. The gradient of the
pruned entries is zero and the product is recomputed after every optimizer step, so
pruned weights stay exactly 0 however the optimizer moves ``weight_orig``.

Pruning the same parameter again combines masks: an unstructured ``amount`` is a share
of the weights still unpruned (so two rounds of 0.5 leave 25%), a structured one a share
of the channels along ``dim`` still unpruned (an int amount: a count of them).
"""
from __future__ import annotations

import numbers
from typing import Iterable, Sequence

import numpy as np

from ..autograd import grad_mode
from ..errors import EmberTypeError, EmberValueError
from ..nn import Module
from ..nn.utils.prune import _hold_while_traced
from ..nn.utils.prune_topk import topk_indices
from ..ops import registry
from ..tensor import Tensor
from ..ops.creation import tensor as _tensor

__all__ = ["l1_unstructured", "global_unstructured", "ln_structured", "custom_from_mask",
           "identity", "remove", "is_pruned", "pruned_parameters"]


class PruningHook:
    """The forward pre-hook of one pruned parameter: recomputes
    ``module.<name> = <name>_orig * <name>_mask``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.handle = None

    def apply(self, module: Module) -> None:
        orig = getattr(module, self.name + "_orig")
        mask = getattr(module, self.name + "_mask")
        if registry._trace is None:
            object.__setattr__(module, self.name, orig * mask)
        else:  # (ember.jit: the traced product for this forward only, then the old value)
            _hold_while_traced(module, self.name, orig * mask)

    def __call__(self, module: Module, args) -> None:
        self.apply(module)


def _hook_of(module: Module, name: str) -> PruningHook | None:
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, PruningHook) and hook.name == name:
            return hook
    return None


def _check_param(owner: str, module: Module, name: str) -> None:
    if not isinstance(module, Module):
        raise EmberTypeError(f"prune.{owner}: expected an ember.nn.Module, got "
                             f"{type(module).__name__}")
    if _hook_of(module, name) is not None:
        return
    param = module._parameters.get(name)
    if param is None:
        names = [n for n, p in module._parameters.items() if p is not None]
        raise EmberValueError(f"prune.{owner}: {type(module).__name__} has no parameter "
                              f"{name!r}; its parameters are {names}")


def _current(module: Module, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``(original values, current mask)`` as NumPy arrays (the mask all ones if the
    parameter is not pruned yet)."""
    if _hook_of(module, name) is not None:
        orig = getattr(module, name + "_orig").detach().numpy()
        mask = getattr(module, name + "_mask").numpy()
        return orig, mask
    orig = module._parameters[name].detach().numpy()
    return orig, np.ones_like(orig)


def _count(owner: str, amount, size: int) -> int:
    """How many of ``size`` units ``amount`` (a share in [0, 1] or a count) asks for."""
    if isinstance(amount, bool) or not isinstance(amount, numbers.Real):
        raise EmberTypeError(f"prune.{owner}: amount must be a float in [0, 1] or an int "
                             f"count, got {amount!r}")
    if isinstance(amount, numbers.Integral):
        if amount < 0 or amount > size:
            raise EmberValueError(f"prune.{owner}: amount={amount} units to prune, but there "
                                  f"are {size}")
        return int(amount)
    if not 0.0 <= amount <= 1.0:
        raise EmberValueError(f"prune.{owner}: amount must be in [0, 1] as a share, got "
                              f"{amount}")
    return int(round(amount * size))


def apply_mask(module: Module, name: str, mask: np.ndarray) -> Module:
    """Install (or replace) the mask of ``module.<name>``; the hook and the
    ``<name>_orig`` / ``<name>_mask`` members are created the first time."""
    hook = _hook_of(module, name)
    if hook is None:
        param = module._parameters[name]
        del module._parameters[name]
        module.register_parameter(name + "_orig", param)
        module.register_buffer(name + "_mask", _tensor(mask.astype(
            param.detach().numpy().dtype), device=param.device))
        hook = PruningHook(name)
        hook.handle = module.register_forward_pre_hook(hook)
    else:
        buf = getattr(module, name + "_mask")
        setattr(module, name + "_mask", _tensor(mask.astype(buf.numpy().dtype),
                                                device=buf.device))
    hook.apply(module)
    return module


def custom_from_mask(module: Module, name: str, mask) -> Module:
    """Prune ``module.<name>`` with a given 0/1 ``mask`` (a tensor or array of its
    shape), combined with any mask it already has.

    >>> prune.custom_from_mask(layer, "bias", ember.tensor([0.0, 1.0, 1.0]))
    """
    _check_param("custom_from_mask", module, name)
    orig, current = _current(module, name)
    given = mask.detach().numpy() if isinstance(mask, Tensor) else np.asarray(mask)
    if given.shape != orig.shape:
        raise EmberValueError(f"prune.custom_from_mask: mask of shape {given.shape} for "
                              f"{name!r} of shape {orig.shape}")
    return apply_mask(module, name, current * (given != 0))


def identity(module: Module, name: str = "weight") -> Module:
    """Reparametrise ``module.<name>`` with an all-ones mask (nothing pruned yet)."""
    _check_param("identity", module, name)
    _, current = _current(module, name)
    return apply_mask(module, name, current)


def _smallest(scores: np.ndarray, alive: np.ndarray, k: int) -> np.ndarray:
    """Flat indices of the ``k`` smallest ``scores`` among the ``alive`` entries."""
    candidates = np.flatnonzero(alive)
    # (the entries torch.topk picks, ties included, so masks equal torch.nn.utils.prune's)
    return candidates[topk_indices(scores.ravel()[candidates], k, largest=False)]


def l1_unstructured(module: Module, name: str = "weight", amount=0.2,
                    importance_scores: Tensor | None = None) -> Module:
    """Zero the ``amount`` smallest-magnitude entries of ``module.<name>``.

    Args:
        module: the layer.
        name: the parameter (``"weight"``, ``"bias"``, ...).
        amount: a share in [0, 1] of the still unpruned entries, or an int count.
        importance_scores: rank by these instead of ``|weight|`` (same shape).

    >>> layer = ember.nn.Linear(64, 32)
    >>> prune.l1_unstructured(layer, "weight", amount=0.8)
    >>> float((layer.weight == 0).float().mean())
    0.8
    """
    _check_param("l1_unstructured", module, name)
    orig, mask = _current(module, name)
    scores = np.abs(orig if importance_scores is None else
                    importance_scores.detach().numpy())
    alive = mask != 0
    k = _count("l1_unstructured", amount, int(alive.sum()))
    new = mask.copy().ravel()
    new[_smallest(scores, alive, k)] = 0
    return apply_mask(module, name, new.reshape(mask.shape))


def global_unstructured(parameters: Iterable[tuple[Module, str]], amount=0.2,
                        importance_scores: dict | None = None) -> None:
    """Zero the ``amount`` smallest-magnitude entries over several parameters taken
    together (so layers with smaller weights lose more).

    Args:
        parameters: ``(module, name)`` pairs.
        amount: a share in [0, 1] of all their still unpruned entries, or an int count.
        importance_scores: ``{(module, name): tensor}`` to rank by instead of ``|w|``.

    >>> prune.global_unstructured([(net[0], "weight"), (net[2], "weight")], amount=0.8)
    """
    pairs = list(parameters)
    if not pairs:
        raise EmberValueError("prune.global_unstructured: no parameters given; pass "
                              "(module, name) pairs")
    scores, masks = [], []
    for module, name in pairs:
        _check_param("global_unstructured", module, name)
        orig, mask = _current(module, name)
        given = (importance_scores or {}).get((module, name))
        scores.append(np.abs(orig if given is None else given.detach().numpy()).ravel())
        masks.append(mask.ravel())
    all_scores, all_masks = np.concatenate(scores), np.concatenate(masks)
    alive = all_masks != 0
    k = _count("global_unstructured", amount, int(alive.sum()))
    new = all_masks.copy()
    new[_smallest(all_scores, alive, k)] = 0
    start = 0
    for (module, name), mask in zip(pairs, masks):
        shape = _current(module, name)[1].shape
        apply_mask(module, name, new[start:start + mask.size].reshape(shape))
        start += mask.size


def _norms(values: np.ndarray, n, dim: int) -> np.ndarray:
    """The ``n``-norm of each slice of ``values`` along ``dim``."""
    moved = np.moveaxis(values, dim, 0).reshape(values.shape[dim], -1)
    if n == "fro":
        n = 2
    return np.linalg.norm(moved.astype(np.float64), ord=n, axis=1)


def ln_structured(module: Module, name: str = "weight", amount=0.2, n=2, dim: int = 0,
                  importance_scores: Tensor | None = None) -> Module:
    """Zero whole slices of ``module.<name>`` along ``dim`` (``dim=0``: output channels
    of a Linear or Conv) with the smallest ``n``-norm.

    Args:
        amount: a share in [0, 1] of the channels along ``dim`` not yet pruned, or
            an int count of them (as ``torch.nn.utils.prune``).
        n: the norm: 1, 2, ``"fro"``, ``float("inf")`` or ``-float("inf")``.
        dim: the dimension whose slices are pruned.

    >>> prune.ln_structured(conv, "weight", amount=0.5, n=2, dim=0)
    """
    _check_param("ln_structured", module, name)
    orig, mask = _current(module, name)
    if not -orig.ndim <= dim < orig.ndim:
        raise EmberValueError(f"prune.ln_structured: dim={dim} out of range for {name!r} "
                              f"of shape {orig.shape}")
    dim %= orig.ndim
    if n not in (1, 2, "fro", np.inf, -np.inf) and not isinstance(n, numbers.Integral):
        raise EmberValueError(f"prune.ln_structured: n must be an int, 'fro' or +-inf, got "
                              f"{n!r}")
    size = orig.shape[dim]
    values = orig if importance_scores is None else importance_scores.detach().numpy()
    norms = _norms(values, n, dim)
    alive_channels = np.moveaxis(mask, dim, 0).reshape(size, -1).any(axis=1)
    # As torch's PruningContainer: the amount counts the channels still unpruned.
    k = _count("ln_structured", amount, int(alive_channels.sum()))
    # torch keeps the topk largest norms (which, with ties, is not dropping the smallest)
    candidates = np.flatnonzero(alive_channels)
    keep = candidates[topk_indices(norms[candidates], len(candidates) - k, largest=True)]
    channel_mask = np.zeros(size, dtype=mask.dtype)
    channel_mask[keep] = 1
    shape = [1] * orig.ndim
    shape[dim] = size
    return apply_mask(module, name, mask * channel_mask.reshape(shape))


def remove(module: Module, name: str = "weight") -> Module:
    """Make the pruning of ``module.<name>`` permanent: ``<name>`` becomes a plain
    parameter holding ``orig * mask``; ``<name>_orig``, ``<name>_mask`` and the hook go.

    >>> prune.remove(layer, "weight")
    """
    hook = _hook_of(module, name)
    if hook is None:
        raise EmberValueError(f"prune.remove: parameter {name!r} of {type(module).__name__} "
                              f"is not pruned (pruned: {pruned_parameters(module)})")
    orig = module._parameters[name + "_orig"]
    mask = module._buffers[name + "_mask"]
    hook.handle.remove()
    with grad_mode.no_grad():
        orig.mul_(mask)
    del module._parameters[name + "_orig"]
    del module._buffers[name + "_mask"]
    module.__dict__.pop(name, None)
    module.register_parameter(name, orig)
    return module


def pruned_parameters(module: Module) -> list[str]:
    """The names of ``module``'s own parameters that are pruned."""
    return [hook.name for hook in module._forward_pre_hooks.values()
            if isinstance(hook, PruningHook)]


def is_pruned(module: Module) -> bool:
    """Whether ``module`` or any submodule has a pruned parameter."""
    return any(pruned_parameters(m) for m in module.modules())


def prunable_parameters(model: Module, types: Sequence[type] | None = None,
                        name: str = "weight") -> list[tuple[Module, str]]:
    """``(module, name)`` for the ``name`` parameter of every Linear and Conv layer of
    ``model`` (or of ``types``): what global pruning usually covers."""
    from ..nn import Conv1d, Conv2d, Conv3d, Linear
    types = tuple(types or (Linear, Conv1d, Conv2d, Conv3d))
    return [(m, name) for m in model.modules()
            if isinstance(m, types) and (name in m._parameters or _hook_of(m, name))]
