"""Calling a module with other parameters and buffers: ``functional_call`` (as
``torch.func.functional_call`` and the older ``torch.nn.utils.stateless``).

The given tensors are put in the module's place for one call and the module's own are
put back afterwards, also when the call raises. This is how a module becomes a function
of its parameters, for ``ember.func.grad``, meta-learning or ensembling.
"""
from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import Any, Mapping

from ...errors import EmberError, EmberTypeError
from ...tensor import Tensor
from ..module import STATE_EPOCH, Module
from .parametrize import is_parametrized

__all__ = ["functional_call"]

_MISSING = object()


def _tied_names(module: Module) -> dict[str, set]:
    """For every parameter or buffer reachable under several names, name -> all of them."""
    groups: dict[int, set] = {}
    for name, t in [*module.named_parameters(remove_duplicate=False),
                    *module.named_buffers(remove_duplicate=False)]:
        groups.setdefault(id(t), set()).add(name)
    return {name: names for names in groups.values() if len(names) > 1 for name in names}


def _untie(module: Module, tensors: dict) -> dict:
    """``tensors`` with each given tied name's value also under the names tied to it."""
    tied = _tied_names(module)
    given = [name for name in tensors if name in tied]
    out = dict(tensors)
    for name in given:
        values = {id(tensors[other]) for other in tied[name] if other in tensors}
        if len(values) > 1:
            raise ValueError(f"functional_call got multiple values for keys "
                             f"{sorted(tied[name])}, which are tied. Consider using "
                             "tie_weights=False")
        for other in tied[name]:
            out[other] = tensors[name]
    return out


def _swap(root: Module, name: str, value):
    """Put ``value`` (or nothing, for ``_MISSING``) at dotted ``name``; returns what was
    there (``_MISSING`` if nothing). Counts as exactly one change of the owning module's
    structure (compiled functions that read it retrace)."""
    if value is not _MISSING and value is not None and not isinstance(value, Tensor):
        raise EmberTypeError(f"functional_call: the value for '{name}' is a "
                             f"{type(value).__name__}, expected an ember Tensor")
    prefix, _, attr = name.rpartition(".")
    module = root.get_submodule(prefix)
    version = module.__dict__.get("_structure_version", 0)
    old = _swap_member(module, name, attr, value)
    module.__dict__["_structure_version"] = version + 1
    STATE_EPOCH[0] += 1
    return old


def _swap_member(module: Module, name: str, attr: str, value):
    for table in (module._parameters, module._buffers):
        if attr in table:
            old = table[attr]
            if value is _MISSING:
                del table[attr]
            else:
                table[attr] = value
            return old
    if is_parametrized(module, attr):
        # The tensor replaces the parametrization's output (not its original).
        overrides = module.__dict__.setdefault("_parametrize_overrides", {})
        old = overrides.pop(attr, _MISSING)
        if value is not _MISSING:
            overrides[attr] = value
        return old
    old = getattr(module, attr, _MISSING)
    if old is not _MISSING and old is not None and not isinstance(old, Tensor):
        raise EmberTypeError(f"functional_call: attribute `{name}` of "
                             f"{module._get_name()} is a {type(old).__name__}, not a Tensor")
    if value is _MISSING:
        if old is not _MISSING:
            delattr(module, attr)
    else:
        setattr(module, attr, value)
    return old


def _check_keys(module: Module, tensors: Mapping) -> None:
    valid = {name for name, _ in module.named_parameters(remove_duplicate=False)}
    valid |= {name for name, _ in module.named_buffers(remove_duplicate=False)}
    given = set(tensors)
    errors = []
    if given - valid:
        errors.append("Unexpected key(s): {}.".format(
            ", ".join(repr(k) for k in sorted(given - valid))))
    if valid - given:
        errors.append("Missing key(s): {}.".format(
            ", ".join(repr(k) for k in sorted(valid - given))))
    if errors:
        raise EmberError("Error(s) in reparametrizing for {}:\n\t{}".format(
            module._get_name(), "\n\t".join(errors)))


@contextmanager
def _reparametrize_module(module: Module, tensors: dict, tie_weights: bool = False,
                          strict: bool = False):
    """Inside the block, ``module``'s tensors named in ``tensors`` are those; afterwards
    the originals are back and ``tensors`` holds what the module ended with."""
    untied = _untie(module, tensors) if tie_weights else dict(tensors)
    if strict:
        _check_keys(module, untied)
    versions = {id(m): (m, m.__dict__.get("_structure_version", 0)) for m in module.modules()}
    originals: dict = {}
    try:
        for name, value in untied.items():
            originals[name] = _swap(module, name, value)
        yield
    finally:
        current = {}
        for name in reversed(list(originals)):
            current[name] = _swap(module, name, originals[name])
        tensors.update({k: current[k] for k in tensors
                        if k in current and current[k] is not _MISSING})
        _restore_versions(module, versions, originals)


def _restore_versions(root: Module, versions: dict, originals: dict) -> None:
    """Give each module back its structure version when only the swaps changed it: its
    tensors are the same again, so ember.jit's functions that read it need no retrace."""
    swaps: dict = {}
    for name in originals:
        owner = name.rpartition(".")[0]
        swaps[owner] = swaps.get(owner, 0) + 2  # swapped in, swapped back
    for owner, count in swaps.items():
        try:
            m = root.get_submodule(owner)
        except AttributeError:
            continue
        entry = versions.get(id(m))
        if entry is not None and m.__dict__.get("_structure_version", 0) == entry[1] + count:
            m.__dict__["_structure_version"] = entry[1]


def _call(module: Module, tensors: dict, args, kwargs, tie_weights: bool, strict: bool):
    if not isinstance(module, Module):
        raise EmberTypeError(f"functional_call: expected an ember.nn.Module, got "
                             f"{type(module).__name__}")
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _reparametrize_module(module, tensors, tie_weights=tie_weights, strict=strict):
        return module(*args, **(kwargs or {}))


def _func_functional_call(module: Module, parameter_and_buffer_dicts, args: Any = None,
                          kwargs: dict | None = None, *, tie_weights: bool = True,
                          strict: bool = False):
    """``ember.func.functional_call``: call ``module(*args, **kwargs)`` with its parameters and buffers replaced by the
    tensors in ``parameter_and_buffer_dicts`` (by dotted name, as in ``state_dict``);
    the module's own tensors are back afterwards, also if the call raises.

    Args:
        module: the module.
        parameter_and_buffer_dicts: a dict from names to tensors, or a tuple of dicts
            (a name may appear in only one).
        args: the positional arguments (a tuple, or one non-tuple argument).
        kwargs: the keyword arguments.
        tie_weights: a tensor the module holds under several names (tied weights) is
            replaced under all of them when one name is given.
        strict: the names must be exactly the module's parameters and buffers.

    Returns:
        What ``module`` returns. Buffers the module changes in place (BatchNorm's running
        statistics) change in the given tensors; one it reassigns is updated in the
        given dict. For a parametrized tensor, the name ``weight`` replaces the
        parametrized value and ``parametrizations.weight.original`` the original.

    >>> model = ember.nn.Linear(3, 2)
    >>> params = {k: v.detach() * 0 for k, v in model.named_parameters()}
    >>> ember.func.functional_call(model, params, (ember.ones(1, 3),))
    tensor([[0., 0.]])
    """
    if isinstance(parameter_and_buffer_dicts, Mapping):
        tensors = parameter_and_buffer_dicts
    elif isinstance(parameter_and_buffer_dicts, tuple):
        if not all(isinstance(d, Mapping) for d in parameter_and_buffer_dicts):
            raise ValueError("Expected all elements of parameter_and_buffer_dicts to be "
                             "dictionaries")
        keys = [k for d in parameter_and_buffer_dicts for k in d.keys()]
        repeated = sorted({k for k in keys if keys.count(k) > 1})
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of "
                             "functional call is ambiguous")
        tensors = {k: v for d in parameter_and_buffer_dicts for k, v in d.items()}
    else:
        raise ValueError(f"Expected parameter_and_buffer_dicts to be a dict, or a tuple of "
                         f"dicts, but got {type(parameter_and_buffer_dicts)}")
    return _call(module, tensors, args, kwargs, tie_weights, strict)


def functional_call(module: Module, parameters_and_buffers: dict, args: Any = None,
                    kwargs: dict | None = None, *, tie_weights: bool = True,
                    strict: bool = False):
    """Call ``module`` with the tensors of ``parameters_and_buffers`` in place of its own;
    deprecated (a ``FutureWarning``, as PyTorch's) in favour of
    :func:`ember.func.functional_call`, which does the same and also takes a tuple of
    dicts.

    >>> out = ember.nn.utils.stateless.functional_call(model, {"weight": w}, (x,))
    """
    warnings.warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch "
                  "2.0 and will be removed in a future version of PyTorch. Please use "
                  "`torch.func.functional_call` instead which is a drop-in replacement.",
                  FutureWarning, stacklevel=2)
    return _call(module, parameters_and_buffers, args, kwargs, tie_weights, strict)
