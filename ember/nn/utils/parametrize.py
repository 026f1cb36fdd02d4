"""Parametrizations: a module's parameter (or buffer) computed from other tensors at every
access, as ``torch.nn.utils.parametrize``.

:func:`register_parametrization` moves ``module.weight`` into
``module.parametrizations.weight.original`` and gives the module's class a ``weight``
property that runs the parametrization on it. The class is swapped for a subclass made
for this module (``ParametrizedLinear``), so reading ``module.weight`` needs nothing of
``Module.__getattr__`` and costs unparametrized modules nothing.
"""
from __future__ import annotations

import collections.abc
from contextlib import contextmanager
from copy import deepcopy
from typing import Sequence

from ...autograd import grad_mode
from ...errors import EmberError
from ...ops import registry as _registry
from ...tensor import Tensor
from ..containers import ModuleDict, ModuleList
from ..module import Module
from ..parameter import Parameter

__all__ = ["cached", "ParametrizationList", "register_parametrization", "is_parametrized",
           "remove_parametrizations", "type_before_parametrizations",
           "transfer_parametrizations_and_params"]

_cache_enabled = 0
_cache: dict = {}


@contextmanager
def cached():
    """Compute each parametrized tensor once inside the block and reuse it (a weight used
    several times in one forward, like an RNN's recurrent kernel). The values are dropped
    when the outermost ``cached()`` block ends.

    >>> with ember.nn.utils.parametrize.cached():
    ...     out = model(x)
    """
    global _cache, _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache = {}


def _register_parameter_or_buffer(module: Module, name: str, value: Tensor) -> None:
    if isinstance(value, Parameter):
        module.register_parameter(name, value)
    else:
        module.register_buffer(name, value)


def _set_in_place(dest: Tensor, src: Tensor) -> None:
    """Make ``dest`` hold ``src``'s values while keeping its identity (so optimizers that
    hold ``dest`` keep working), as PyTorch's ``Tensor.set_``."""
    dest.data = src.detach()


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, and the tensor(s) they start from.

    ``module.parametrizations[name]`` is one of these after
    :func:`register_parametrization`. The original tensor is kept as ``original``, or as
    ``original0``, ``original1``, ... when the first parametrization's ``right_inverse``
    returns several tensors. Made by :func:`register_parametrization`; not meant to be
    built by hand.

    Args:
        modules: the parametrizations, applied in order.
        original: the parameter or buffer being parametrized.
        unsafe: allow the parametrizations to change the tensor's shape and dtype.
    """

    def __init__(self, modules: Sequence[Module], original: Tensor, unsafe: bool = False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        original_shape, original_dtype = original.shape, original.dtype
        with grad_mode.no_grad():
            new = original
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, (Tensor, collections.abc.Sequence)):
            raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors "
                             f"(list, tuple...). Got {type(new).__name__}")
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if new.dtype != original.dtype:
                raise ValueError("When `right_inverse` outputs one tensor, it may not change "
                                 f"the dtype.\noriginal.dtype: {original.dtype}\n"
                                 f"right_inverse(original).dtype: {new.dtype}")
            if new.device != original.device:
                raise ValueError("When `right_inverse` outputs one tensor, it may not change "
                                 f"the device.\noriginal.device: {original.device}\n"
                                 f"right_inverse(original).device: {new.device}")
            with grad_mode.no_grad():
                _set_in_place(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, value in enumerate(new):
                if not isinstance(value, Tensor):
                    raise ValueError("'right_inverse' must return a Tensor or a Sequence of "
                                     f"tensors (list, tuple...). Got element {i} of the "
                                     f"sequence with type {type(value).__name__}.")
                if isinstance(original, Parameter):
                    value = Parameter(value, original.requires_grad)
                value.requires_grad_(original.requires_grad)
                _register_parameter_or_buffer(self, f"original{i}", value)
        if not self.unsafe:
            Z = self()
            if not isinstance(Z, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got "
                                 f"{type(Z).__name__}.")
            if Z.dtype != original_dtype:
                raise ValueError("Registering a parametrization may not change the dtype of "
                                 "the tensor, unless `unsafe` flag is enabled.\n"
                                 f"unparametrized dtype: {original_dtype}\n"
                                 f"parametrized dtype: {Z.dtype}")
            if Z.shape != original_shape:
                raise ValueError("Registering a parametrization may not change the shape of "
                                 "the tensor, unless `unsafe` flag is enabled.\n"
                                 f"unparametrized shape: {original_shape}\n"
                                 f"parametrized shape: {Z.shape}")

    def right_inverse(self, value: Tensor) -> None:
        """Store ``value`` as the parametrized tensor: run the ``right_inverse`` of every
        parametrization, last registered first, and put the result in ``original`` (or
        ``original0``, ``original1``, ...), keeping those tensors' identity."""
        with grad_mode.no_grad():
            for module in reversed(list(self)):
                if not hasattr(module, "right_inverse"):
                    raise EmberError(f"parametrization {type(module).__name__} does not "
                                     "implement right_inverse.")
                value = module.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got "
                                     f"{type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(f"The tensor returned by `right_inverse` has dtype "
                                     f"{value.dtype} while `original` has dtype "
                                     f"{self.original.dtype}")
                _set_in_place(self.original, value)
                return
            if not isinstance(value, collections.abc.Sequence):
                raise ValueError("'right_inverse' must return a sequence of tensors. Got "
                                 f"{type(value).__name__}.")
            if len(value) != self.ntensors:
                raise ValueError("'right_inverse' must return a sequence of tensors of length "
                                 f"{self.ntensors}. Got a sequence of length {len(value)}.")
            for i, tensor in enumerate(value):
                original_i = getattr(self, f"original{i}")
                if not isinstance(tensor, Tensor):
                    raise ValueError("'right_inverse' must return a sequence of tensors. Got "
                                     f"element {i} of type {type(tensor).__name__}.")
                if original_i.dtype != tensor.dtype:
                    raise ValueError(f"Tensor {i} returned by `right_inverse` has dtype "
                                     f"{tensor.dtype} while `original{i}` has dtype "
                                     f"{original_i.dtype}")
                _set_in_place(original_i, tensor)

    def forward(self) -> Tensor:
        modules = iter(self._modules.values())
        first = next(modules)
        if self.is_tensor:
            x = first(self.original)
        else:
            x = first(*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in modules:
            x = module(x)
        return x


# The class swap ------------------------------------------------------------------------------
def _parametrized_deepcopy(self, memo):
    replica = memo.get(id(self))
    if replica is not None:
        return replica
    replica = self.__new__(type(self))
    memo[id(self)] = replica
    replica.__dict__ = deepcopy(self.__dict__, memo)
    return replica


def _parametrized_getstate(self):
    raise EmberError("Serialization of parametrized modules is only supported through "
                     "state_dict() (ember.save(module.state_dict(), path)).")


def _parametrized_check_state(self, state, prefix, *args):
    # Load-time key renames (weight_norm reads old ``weight_g``/``weight_v`` checkpoints).
    for hook in self.__dict__.get("_parametrize_load_hooks", ()):
        hook(state, prefix)
    type(self).__bases__[0]._check_state(self, state, prefix, *args)


def _inject_new_class(module: Module) -> None:
    cls = type(module)
    namespace = {"__getstate__": _parametrized_getstate,
                 "_check_state": _parametrized_check_state}
    if not hasattr(cls, "__deepcopy__"):
        namespace["__deepcopy__"] = _parametrized_deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), namespace)


def _inject_property(module: Module, tensor_name: str) -> None:
    if hasattr(module, tensor_name):
        raise AssertionError(f"Module already has an attribute named '{tensor_name}'")

    def get_parametrized(self) -> Tensor:
        overrides = self.__dict__.get("_parametrize_overrides")
        if overrides and tensor_name in overrides:  # functional_call replaced it
            return overrides[tensor_name]
        parametrization = self._modules["parametrizations"][tensor_name]
        if not _cache_enabled:
            return parametrization()
        if _registry._trace is not None:
            raise EmberError("Cannot trace a model while caching parametrizations: call "
                             "the compiled function outside parametrize.cached().")
        key = (id(self), tensor_name)
        tensor = _cache.get(key)
        if tensor is None:
            tensor = _cache[key] = parametrization()
        return tensor

    def set_original(self, value: Tensor) -> None:
        self._modules["parametrizations"][tensor_name].right_inverse(value)

    setattr(type(module), tensor_name, property(get_parametrized, set_original))


# Public API ----------------------------------------------------------------------------------
def _check_same_kind(what: str, tensor_name: str, Y: Tensor, X, unsafe_hint: str) -> None:
    if not isinstance(X, Tensor):
        raise ValueError(f"{what} must return a tensor. Got {type(X).__name__}.")
    if X.dtype != Y.dtype:
        raise ValueError(f"{what} may not change the dtype of module.{tensor_name}, unless "
                         f"the `unsafe` flag is enabled.\nmodule.{tensor_name}.dtype: "
                         f"{Y.dtype}\n{unsafe_hint}.dtype: {X.dtype}")
    if X.shape != Y.shape:
        raise ValueError(f"{what} may not change the shape of module.{tensor_name}, unless "
                         f"the `unsafe` flag is enabled.\nmodule.{tensor_name}.shape: "
                         f"{Y.shape}\n{unsafe_hint}.shape: {X.shape}")


def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *,
                             unsafe: bool = False) -> Module:
    """Make ``module.<tensor_name>`` the output of ``parametrization`` applied to the
    original tensor, recomputed at every access (and differentiated through).

    The original moves to ``module.parametrizations[tensor_name].original`` (state-dict
    key ``parametrizations.<tensor_name>.original``). If ``parametrization`` has a
    ``right_inverse(X)``, it initialises the original so that the parametrized value
    starts as the old tensor, and assigning ``module.<tensor_name> = X`` goes through it;
    if it returns a sequence of tensors they are kept as ``original0``, ``original1``,
    ... and ``forward`` takes them all. Registering again on the same name chains the
    parametrizations (applied in registration order).

    Args:
        module: the module holding the parameter or buffer.
        tensor_name: its name.
        parametrization: a module whose ``forward`` maps the original(s) to the tensor.
        unsafe: allow the parametrization to change the shape or dtype (not checked).

    Returns:
        ``module``, whose class is now ``Parametrized<Class>``.

    >>> class Symmetric(ember.nn.Module):
    ...     def forward(self, X):
    ...         return X.triu() + X.triu(1).mT
    >>> m = ember.nn.Linear(3, 3)
    >>> _ = ember.nn.utils.parametrize.register_parametrization(m, "weight", Symmetric())
    >>> bool((m.weight == m.weight.T).all())
    True
    """
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            Y = getattr(module, tensor_name)
            X = parametrization(Y)
            _check_same_kind("Registering a parametrization", tensor_name, Y, X,
                             f"parametrization(module.{tensor_name})")
            if hasattr(parametrization, "right_inverse"):
                try:
                    Z = parametrization.right_inverse(X)
                except NotImplementedError:
                    pass
                else:
                    _check_same_kind("parametrization.right_inverse", tensor_name, Y, Z,
                                     "right_inverse(X)")
        plist = module.parametrizations[tensor_name]
        plist.append(parametrization)
        plist.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        if original is None:
            raise ValueError(f"Module '{module._get_name()}' has its '{tensor_name}' set to "
                             "None: there is nothing to parametrize")
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = plist
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a "
                         f"parametrized element with name '{tensor_name}'")
    module._changed()
    return module


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has any parametrization (or one on ``tensor_name``).

    >>> ember.nn.utils.parametrize.is_parametrized(ember.nn.Linear(2, 2))
    False
    """
    parametrizations = module._modules.get("parametrizations")
    if not isinstance(parametrizations, ModuleDict):
        return False
    if tensor_name is None:
        return len(parametrizations) > 0
    return tensor_name in parametrizations


def remove_parametrizations(module: Module, tensor_name: str,
                            leave_parametrized: bool = True) -> Module:
    """Remove the parametrizations on ``module.<tensor_name>``, leaving a plain parameter
    (or buffer) again.

    Args:
        module: the parametrized module.
        tensor_name: the parametrized tensor's name.
        leave_parametrized: keep the current parametrized value (True) or the original
            tensor (False; impossible when the original is several tensors). With one
            original tensor, the restored parameter is that same object (optimizers that
            hold it keep working).

    >>> m = ember.nn.utils.parametrizations.orthogonal(ember.nn.Linear(3, 3))
    >>> m = ember.nn.utils.parametrize.remove_parametrizations(m, "weight")
    >>> type(m).__name__
    'Linear'
    """
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with grad_mode.no_grad():
                t = getattr(module, tensor_name)
                _set_in_place(original, t)
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a "
                             "tensor that is parametrized in terms of a sequence of tensors.")
        t = getattr(module, tensor_name)
        original = Parameter(t.detach()) if t.requires_grad else t.detach()
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__dict__.pop("_parametrize_load_hooks", None)
        module.__class__ = type(module).__bases__[0]
    module._changed()
    return module


def type_before_parametrizations(module: Module) -> type:
    """The class ``module`` had before it was parametrized (its class if it is not)."""
    if is_parametrized(module):
        return type(module).__bases__[0]
    return type(module)


def transfer_parametrizations_and_params(from_module: Module, to_module: Module,
                                         tensor_name: str | None = None) -> Module:
    """Register on ``to_module`` the parametrizations of ``from_module`` (all, or those
    of ``tensor_name``) and copy their original tensors across (the same tensor objects).

    Returns ``to_module``.
    """
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name).detach()))
        source = from_module.parametrizations[name]
        for parametrization in source:
            register_parametrization(to_module, name, parametrization)
        target = to_module.parametrizations[name]
        if hasattr(source, "original"):
            target.original = source.original
        else:
            i = 0
            while hasattr(source, f"original{i}"):
                setattr(target, f"original{i}", getattr(source, f"original{i}"))
                i += 1
    return to_module
