"""``ember.nn.utils.prune``: ``torch.nn.utils.prune``'s API and masks.

Pruning ``module.weight`` moves the parameter (the same object) to
``module.weight_orig``, adds a buffer ``module.weight_mask`` and registers the pruning
method as a forward pre-hook that sets the plain attribute
``module.weight = weight_mask * weight_orig`` before every forward. The state dict then
holds ``weight_orig`` and ``weight_mask``, as PyTorch's does, and the masks are
PyTorch's for the same weights, ties included (see :mod:`.prune_topk`). Pruning a
pruned tensor again chains the methods in a :class:`PruningContainer`, which applies
each new one to the entries (or channels) still unpruned.

ember's own ``ember.prune`` adds sparsity reports, shrinking and a training callback
on the same reparametrisation.

Under ``ember.jit`` the pre-hook is traced with the forward, so a compiled pruned module
gives what the eager one gives; the attribute ``module.weight`` keeps the value of the
last eager computation (``weight_orig`` and ``weight_mask`` are the state).

>>> layer = ember.nn.Linear(4, 3)
>>> prune.l1_unstructured(layer, name="weight", amount=0.5)
>>> sorted(layer.state_dict())
['bias', 'weight_mask', 'weight_orig']
>>> int((layer.weight == 0).sum())
6
"""
from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

import numpy as np

from ...autograd import grad_mode
from ...errors import EmberIndexError, EmberTypeError, EmberValueError
from ...ops import registry
from ...ops.creation import ones_like, tensor as _tensor
from ...ops.random import rand, rand_like
from ...ops.shape import cat
from ...tensor import Tensor
from .prune_topk import topk_indices

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured",
           "L1Unstructured", "RandomStructured", "LnStructured", "CustomFromMask",
           "identity", "random_unstructured", "l1_unstructured", "random_structured",
           "ln_structured", "global_unstructured", "custom_from_mask", "remove", "is_pruned"]


def _host(t: Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def _like(array: np.ndarray, t: Tensor) -> Tensor:
    """``array`` as a tensor with ``t``'s dtype and device."""
    return _tensor(array, dtype=t.dtype, device=t.device)


class BasePruningMethod(ABC):
    """The base of every pruning method: subclasses set ``PRUNING_TYPE``
    (``"unstructured"``, ``"structured"`` (with a ``dim``) or ``"global"``) and
    implement :meth:`compute_mask`; :meth:`apply` installs one on a module.

    >>> class Threshold(prune.BasePruningMethod):
    ...     PRUNING_TYPE = "unstructured"
    ...     def compute_mask(self, t, default_mask):
    ...         return default_mask * (t.abs() > 0.1)
    >>> Threshold.apply(layer, "weight")
    """
    _tensor_name: str

    def __call__(self, module, inputs) -> None:
        """The forward pre-hook: recompute ``module.<name>`` from its original and mask."""
        weight = self.apply_mask(module)
        if registry._trace is None:
            setattr(module, self._tensor_name, weight)
        else:
            _hold_while_traced(module, self._tensor_name, weight)

    @abstractmethod
    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The new mask for tensor ``t`` (the importance scores), given the mask it
        already has (``default_mask``, all ones at first): same shape as ``t``."""

    def apply_mask(self, module) -> Tensor:
        """``<name>_mask * <name>_orig`` of ``module``: the pruned tensor."""
        if getattr(self, "_tensor_name", None) is None:
            raise EmberValueError(f"Module {module} has to be pruned")
        orig = getattr(module, self._tensor_name + "_orig")
        mask = getattr(module, self._tensor_name + "_mask")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name: str, *args, importance_scores: Tensor | None = None,
              **kwargs) -> "BasePruningMethod":
        """Prune ``module.<name>`` with a new ``cls(*args, **kwargs)``, chained after
        any method already pruning it; returns the method installed as the hook.

        Args:
            module: the module holding the tensor.
            name: the parameter's name.
            importance_scores: rank the entries by these (same shape) instead of the
                parameter's values.
        """
        old, keys = None, []
        for key, hook in module._forward_pre_hooks.items():
            if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
                old = hook
                keys.append(key)
        if len(keys) > 1:
            raise EmberValueError(f"Avoid adding multiple pruning hooks to the same tensor "
                                  f"{name} of module {module}. Use a PruningContainer.")
        for key in keys:
            del module._forward_pre_hooks[key]
        method = cls(*args, **kwargs)
        method._tensor_name = name
        if isinstance(old, PruningContainer):
            old.add_pruning_method(method)
            method = old
        elif old is not None:
            method = PruningContainer(old, method)
        orig = getattr(module, name)
        if importance_scores is None:
            importance_scores = orig
        elif tuple(importance_scores.shape) != tuple(orig.shape):
            raise EmberValueError(f"importance_scores should have the same shape as "
                                  f"parameter {name} of {module}: got "
                                  f"{tuple(importance_scores.shape)}, expected "
                                  f"{tuple(orig.shape)}")
        if old is None:
            module.register_parameter(name + "_orig", orig)
            default_mask = ones_like(orig).detach()
            del module._parameters[name]
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        try:
            mask = method.compute_mask(importance_scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            if old is None:  # back to a plain parameter
                orig = module._parameters.pop(name + "_orig")
                module.__dict__.pop(name, None)
                module.register_parameter(name, orig)
            else:  # the earlier pruning stays as it was
                if method is old:
                    old._pruning_methods = old._pruning_methods[:-1]
                module.register_forward_pre_hook(old)
            raise
        return method

    def prune(self, t: Tensor, default_mask: Tensor | None = None,
              importance_scores: Tensor | None = None) -> Tensor:
        """``t`` times the mask this method computes for it (``t`` is not changed)."""
        if importance_scores is None:
            importance_scores = t
        elif tuple(importance_scores.shape) != tuple(t.shape):
            raise EmberValueError("importance_scores should have the same shape as tensor t")
        if default_mask is None:
            default_mask = ones_like(t)
        return t * self.compute_mask(importance_scores, default_mask=default_mask)

    def remove(self, module) -> None:
        """Make the pruning permanent: ``<name>`` becomes a parameter again (the
        ``<name>_orig`` object, now holding the pruned values); ``<name>_orig`` and
        ``<name>_mask`` go. (The hook itself is dropped by :func:`remove`.)"""
        if getattr(self, "_tensor_name", None) is None:
            raise EmberValueError(f"Module {module} has to be pruned before pruning can be "
                                  "removed")
        name = self._tensor_name
        weight = self.apply_mask(module)
        if name in module.__dict__:
            delattr(module, name)
        orig = module._parameters[name + "_orig"]
        orig.data = weight.data
        del module._parameters[name + "_orig"]
        del module._buffers[name + "_mask"]
        setattr(module, name, orig)


def _hold_while_traced(module, name: str, weight: Tensor) -> None:
    """While ``ember.jit`` traces: give ``module.<name>`` the traced value for this
    forward only, then put back what it held (a traced tensor must not outlive the
    trace)."""
    missing = object()
    before = module.__dict__.get(name, missing)
    object.__setattr__(module, name, weight)

    def put_back(mod, args, output):
        handle.remove()
        if before is missing:
            mod.__dict__.pop(name, None)
        else:
            object.__setattr__(mod, name, before)

    handle = module.register_forward_hook(put_back, always_call=True)


class PruningContainer(BasePruningMethod):
    """The methods pruning one tensor, in the order they were applied; its mask is the
    last one's, computed on the entries (or channels) the earlier ones left.

    Args:
        *args: pruning methods acting on the same tensor name.
    """

    def __init__(self, *args):
        self._pruning_methods: tuple = ()
        if args:
            self._tensor_name = args[0]._tensor_name
        for method in args:
            self.add_pruning_method(method)

    def add_pruning_method(self, method) -> None:
        """Append ``method`` (it must prune the same tensor name)."""
        if method is None:
            return
        if not isinstance(method, BasePruningMethod):
            raise EmberTypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if self._tensor_name != method._tensor_name:
            raise EmberValueError(f"Can only add pruning methods acting on the parameter "
                                  f"named '{self._tensor_name}' to PruningContainer {self}. "
                                  f"Found '{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The last method's mask, computed on the part of ``t`` still unpruned:
        entries with mask 1 (unstructured), channels along ``dim`` with any nonzero
        mask (structured), or all of ``t`` (global), and written back into a copy of
        ``default_mask``."""
        method = self._pruning_methods[-1]
        kind = getattr(method, "PRUNING_TYPE", None)
        with grad_mode.no_grad():
            new_mask = default_mask.to(dtype=t.dtype).clone()
            if kind == "unstructured":
                slc = default_mask == 1
            elif kind == "structured":
                if not hasattr(method, "dim"):
                    raise EmberValueError("Pruning methods of PRUNING_TYPE 'structured' need "
                                          "to have the attribute `dim` defined.")
                ndim = t.dim()
                dim = method.dim + ndim if method.dim < 0 else method.dim
                if not 0 <= dim < ndim:
                    raise EmberIndexError(f"Index is out of bounds for tensor with dimensions "
                                          f"{ndim}")
                keep = default_mask.sum(dim=[d for d in range(ndim) if d != dim]) != 0
                slc = tuple(keep if d == dim else slice(None) for d in range(ndim))
            elif kind == "global":
                slc = tuple(slice(None) for _ in range(t.dim()))
            else:
                raise EmberValueError(f"Unrecognized PRUNING_TYPE {kind}")
            partial = method.compute_mask(t[slc], default_mask=default_mask[slc])
            new_mask[slc] = partial.to(dtype=new_mask.dtype)
        return new_mask


class Identity(BasePruningMethod):
    """Prunes nothing: the reparametrisation with the mask unchanged (all ones)."""
    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return default_mask

    @classmethod
    def apply(cls, module, name: str) -> "Identity":
        """Reparametrise ``module.<name>`` with an all-ones mask."""
        return super().apply(module, name)


def _validate_amount_init(amount) -> None:
    if not isinstance(amount, numbers.Real):
        raise EmberTypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
            not isinstance(amount, numbers.Integral) and not 0.0 <= float(amount) <= 1.0):
        raise EmberValueError(f"amount={amount} should either be a float in the range [0, 1] "
                              f"or a non-negative integer")


def _count(amount, size: int) -> int:
    """How many of ``size`` entries or channels ``amount`` asks to prune (a share is
    rounded as Python's ``round``: half to even)."""
    count = int(amount) if isinstance(amount, numbers.Integral) else int(round(amount * size))
    if isinstance(amount, numbers.Integral) and count > size:
        raise EmberValueError(f"amount={amount} should be smaller than the number of "
                              f"parameters to prune={size}")
    return count


def _check_structured(t: Tensor, dim: int) -> None:
    if t.dim() <= 1:
        raise EmberValueError(f"Structured pruning can only be applied to multidimensional "
                              f"tensors. Found tensor of shape {tuple(t.shape)} with "
                              f"{t.dim()} dims")
    if not -t.dim() <= dim < t.dim():
        raise EmberIndexError(f"Invalid index {dim} for tensor of size {tuple(t.shape)}")


def _zero_at(default_mask: Tensor, flat_indices: np.ndarray) -> Tensor:
    mask = _host(default_mask).copy()
    mask.reshape(-1)[flat_indices] = 0
    return _like(mask, default_mask)


def _channel_mask(t: Tensor, dim: int, channels: np.ndarray, default_mask: Tensor) -> Tensor:
    """Ones on the given channels along ``dim`` (t's dtype), times ``default_mask``."""
    mask = np.zeros(tuple(t.shape), dtype=np.float64)
    index = [slice(None)] * t.dim()
    index[dim] = channels
    mask[tuple(index)] = 1
    return _like(mask, t) * default_mask.to(dtype=t.dtype)


class RandomUnstructured(BasePruningMethod):
    """Prune ``amount`` entries chosen at random (ember's generator).

    Args:
        amount: a share in [0, 1] of the entries, or an int count.
    """
    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        k = _count(self.amount, t.numel())
        if k == 0:
            return default_mask.clone()
        scores = _host(rand_like(t))
        return _zero_at(default_mask, topk_indices(scores.ravel(), k, largest=True))

    @classmethod
    def apply(cls, module, name: str, amount) -> "RandomUnstructured":
        """Prune ``amount`` random entries of ``module.<name>``."""
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Prune the ``amount`` entries of smallest absolute value (of the importance
    scores).

    Args:
        amount: a share in [0, 1] of the entries, or an int count.
    """
    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        k = _count(self.amount, t.numel())
        if k == 0:
            return default_mask.clone()
        scores = np.abs(_host(t)).ravel()
        return _zero_at(default_mask, topk_indices(scores, k, largest=False))

    @classmethod
    def apply(cls, module, name: str, amount, importance_scores=None) -> "L1Unstructured":
        """Prune the ``amount`` smallest-magnitude entries of ``module.<name>``."""
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class RandomStructured(BasePruningMethod):
    """Prune ``amount`` whole channels along ``dim``, chosen at random.

    Args:
        amount: a share in [0, 1] of the channels, or an int count.
        dim: the dimension whose slices are channels (default -1).
    """
    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim: int = -1):
        _validate_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        _check_structured(t, self.dim)
        size = t.shape[self.dim]
        k = _count(self.amount, size)
        if k == 0:
            return default_mask
        prob = _host(rand(size))
        threshold = np.sort(prob)[k - 1]  # (torch.kthvalue)
        return _channel_mask(t, self.dim % t.dim(), np.flatnonzero(prob > threshold),
                             default_mask)

    @classmethod
    def apply(cls, module, name: str, amount, dim: int = -1) -> "RandomStructured":
        """Prune ``amount`` random channels along ``dim`` of ``module.<name>``."""
        return super().apply(module, name, amount=amount, dim=dim)


def _norms(values: np.ndarray, n, dim: int) -> np.ndarray:
    """``torch.norm(values, p=n, dim=<every dim but dim>)`` (in float64)."""
    moved = np.moveaxis(values.astype(np.float64), dim, 0)
    flat = np.abs(moved.reshape(moved.shape[0], -1))
    if n == "nuc":
        if moved.ndim != 3:
            raise EmberValueError(f"ln_structured: n='nuc' needs a 3-d tensor (a matrix per "
                                  f"channel), got {values.ndim} dims")
        return np.linalg.svd(moved, compute_uv=False).sum(axis=1)
    if n == "fro" or n == 2:
        return np.sqrt((flat * flat).sum(axis=1))
    if not isinstance(n, numbers.Real) or isinstance(n, bool):
        raise EmberValueError(f"ln_structured: n must be a number, 'fro' or 'nuc', got {n!r}")
    if n == np.inf:
        return flat.max(axis=1, initial=0.0)
    if n == -np.inf:
        return flat.min(axis=1, initial=np.inf)
    if n == 0:
        return (flat != 0).sum(axis=1).astype(np.float64)
    with np.errstate(divide="ignore"):
        return (flat ** n).sum(axis=1) ** (1.0 / n)


class LnStructured(BasePruningMethod):
    """Prune the ``amount`` channels along ``dim`` with the smallest ``n``-norm (the
    channels with the largest norms are kept).

    Args:
        amount: a share in [0, 1] of the channels, or an int count.
        n: the norm: an int or float (``float("inf")``, ``-float("inf")``), ``"fro"``
            (the 2-norm of each channel; PyTorch accepts it for matrices only) or
            ``"nuc"`` (3-d tensors: the nuclear norm of each channel's matrix).
        dim: the dimension whose slices are channels (default -1).
    """
    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim: int = -1):
        _validate_amount_init(amount)
        self.amount = amount
        self.n = n
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        _check_structured(t, self.dim)
        size = t.shape[self.dim]
        k = _count(self.amount, size)
        dim = self.dim % t.dim()
        # (rounded to t's dtype, as PyTorch computes the norms in it)
        norms = _norms(_host(t), self.n, dim).astype(_host(t).dtype)
        keep = topk_indices(norms, size - k, largest=True)
        if k == 0:
            return default_mask
        return _channel_mask(t, dim, keep, default_mask)

    @classmethod
    def apply(cls, module, name: str, amount, n, dim: int,
              importance_scores=None) -> "LnStructured":
        """Prune the ``amount`` channels of smallest ``n``-norm along ``dim``."""
        return super().apply(module, name, amount=amount, n=n, dim=dim,
                             importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prune with a given mask (multiplied into the current one).

    Args:
        mask: 0s and 1s, the tensor's shape.
    """
    PRUNING_TYPE = "global"

    def __init__(self, mask: Tensor):
        self.mask = mask

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise EmberValueError(f"custom_from_mask: mask of shape {tuple(self.mask.shape)} "
                                  f"for a tensor of shape {tuple(default_mask.shape)}")
        return default_mask * self.mask.to(dtype=default_mask.dtype, device=default_mask.device)

    @classmethod
    def apply(cls, module, name: str, mask) -> "CustomFromMask":
        """Prune ``module.<name>`` where ``mask`` is 0."""
        return super().apply(module, name, mask=mask)


# The functions ---------------------------------------------------------------------------
def identity(module, name: str):
    """Reparametrise ``module.<name>`` without pruning anything (an all-ones mask);
    returns ``module``.

    >>> prune.identity(ember.nn.Linear(2, 3), "bias").bias_mask
    tensor([1., 1., 1.])
    """
    Identity.apply(module, name)
    return module


def random_unstructured(module, name: str, amount):
    """Prune ``amount`` entries of ``module.<name>`` chosen at random; returns
    ``module``.

    Args:
        module: the module.
        name: the parameter (``"weight"``, ``"bias"``).
        amount: a share in [0, 1] of the (still unpruned) entries, or an int count.

    >>> prune.random_unstructured(layer, name="weight", amount=0.3)
    """
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name: str, amount, importance_scores=None):
    """Prune the ``amount`` entries of ``module.<name>`` with the smallest absolute
    value (ties broken as ``torch.topk`` breaks them); returns ``module``.

    Args:
        module: the module.
        name: the parameter.
        amount: a share in [0, 1] of the (still unpruned) entries, or an int count.
        importance_scores: rank by ``|importance_scores|`` (the parameter's shape)
            instead of the parameter's values.

    >>> m = prune.l1_unstructured(ember.nn.Linear(4, 2), name="weight", amount=0.25)
    >>> int((m.weight_mask == 0).sum())
    2
    """
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name: str, amount, dim: int):
    """Prune ``amount`` whole channels along ``dim`` of ``module.<name>``, chosen at
    random; returns ``module``.

    >>> prune.random_structured(conv, "weight", amount=0.5, dim=0)
    """
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name: str, amount, n, dim: int, importance_scores=None):
    """Prune the ``amount`` channels along ``dim`` of ``module.<name>`` with the
    smallest ``n``-norm; returns ``module``.

    Args:
        module: the module.
        name: the parameter.
        amount: a share in [0, 1] of the (still unpruned) channels, or an int count.
        n: the norm (1, 2, ``float("inf")``, ``"fro"``, ...).
        dim: the channel dimension (0: output channels of Linear and Conv).
        importance_scores: compute the norms of these instead.

    >>> prune.ln_structured(conv, "weight", amount=0.25, n=2, dim=0)
    """
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs) -> None:
    """Prune several tensors together: ``pruning_method`` (an unstructured method class,
    built with ``**kwargs``) ranks all their still unpruned entries at once, and each
    tensor gets its part of the mask.

    Args:
        parameters: ``(module, name)`` pairs.
        pruning_method: ``prune.L1Unstructured``, ``prune.RandomUnstructured`` or
            your own unstructured method.
        importance_scores: ``{(module, name): tensor}`` to rank by instead.
        **kwargs: the method's arguments (``amount=``).

    >>> prune.global_unstructured([(net[0], "weight"), (net[2], "weight")],
    ...                           pruning_method=prune.L1Unstructured, amount=0.5)
    """
    if not isinstance(parameters, Iterable):
        raise EmberTypeError("global_unstructured(): parameters is not an Iterable")
    parameters = list(parameters)
    importance_scores = {} if importance_scores is None else importance_scores
    if not isinstance(importance_scores, dict):
        raise EmberTypeError("global_unstructured(): importance_scores must be of type dict")
    if not parameters:
        raise EmberValueError("global_unstructured(): no parameters given; pass "
                              "(module, name) pairs")
    with grad_mode.no_grad():
        scores = cat([importance_scores.get((m, name), getattr(m, name)).reshape(-1)
                      for m, name in parameters])
        masks = cat([(getattr(m, name + "_mask") if hasattr(m, name + "_mask")
                      else ones_like(getattr(m, name))).reshape(-1) for m, name in parameters])
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise EmberTypeError(f'Only "unstructured" PRUNING_TYPE supported for the '
                             f'`pruning_method`. Found method {pruning_method} of type '
                             f'{method.PRUNING_TYPE}')
    container.add_pruning_method(method)
    final = container.compute_mask(scores, masks)
    start = 0
    for module, name in parameters:
        param = getattr(module, name)
        size = param.numel()
        custom_from_mask(module, name, mask=final[start:start + size].reshape(param.shape))
        start += size


def custom_from_mask(module, name: str, mask):
    """Prune ``module.<name>`` where ``mask`` (its shape) is 0; returns ``module``.

    >>> prune.custom_from_mask(layer, "bias", mask=ember.tensor([0.0, 1.0, 1.0]))
    """
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module, name: str):
    """Make the pruning of ``module.<name>`` permanent: it becomes a parameter holding
    the pruned values, and ``<name>_orig``, ``<name>_mask`` and the hook go; returns
    ``module``.

    >>> prune.remove(layer, "weight")
    """
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            module._forward_pre_hooks_with_kwargs.pop(key, None)
            return module
    raise EmberValueError(f"Parameter '{name}' of module {module} has to be pruned before "
                          f"pruning can be removed")


def is_pruned(module) -> bool:
    """Whether ``module`` or any of its submodules is pruned (has a pruning hook).

    >>> prune.is_pruned(net)
    False
    """
    for _, sub in module.named_modules():
        for hook in sub._forward_pre_hooks.values():
            if isinstance(hook, BasePruningMethod):
                return True
    return False
