"""``nn.Module``: the base class of layers and models.

A module keeps its parameters, buffers and submodules in three ordered dicts filled by
attribute assignment (``self.weight = Parameter(...)``, ``self.fc = Linear(...)``), so
``parameters()``, ``state_dict()`` and ``repr()`` list them in the order they were
assigned, as PyTorch does.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict, namedtuple
from typing import Any, Callable, Iterator, Mapping

from .. import dtypes as _dt
from ..autograd import grad_mode
from ..errors import EmberError, EmberTypeError
from ..ops import registry as _registry
from ..tensor import Tensor, _to_args
from ..utils.hooks import BackwardHook, RemovableHandle
from .parameter import Parameter

__all__ = ["Module"]


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` returns: the keys it did not find and the keys it did not
    use."""

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(text: str, spaces: int) -> str:
    """Indent every line of ``text`` but the first."""
    first, *rest = text.split("\n")
    if not rest:
        return text
    pad = " " * spaces
    return "\n".join([first] + [pad + line for line in rest])



# Moves whenever any module's training flag or structure (its tensors, submodules)
# changes: a compiled function re-reads its modules' state only when this moved.
STATE_EPOCH = [0]

class Module:
    """Base class of every layer and model.

    Subclasses call ``super().__init__()``, assign parameters and submodules as
    attributes, and define ``forward``; calling the module runs ``forward`` with its
    hooks.

    >>> class Net(ember.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc = ember.nn.Linear(4, 2)
    ...     def forward(self, x):
    ...         return self.fc(x).relu()
    >>> [name for name, _ in Net().named_parameters()]
    ['fc.weight', 'fc.bias']
    """
    training: bool

    def __init__(self, *args, **kwargs) -> None:
        if args or kwargs:
            raise EmberTypeError(f"{type(self).__name__}.__init__() got unexpected arguments "
                                 f"{args!r} {kwargs!r}")
        setattr_ = object.__setattr__
        setattr_(self, "training", True)
        setattr_(self, "_parameters", {})
        setattr_(self, "_buffers", {})
        setattr_(self, "_non_persistent_buffers_set", set())
        setattr_(self, "_modules", {})
        setattr_(self, "_forward_pre_hooks", OrderedDict())
        setattr_(self, "_forward_pre_hooks_with_kwargs", {})
        setattr_(self, "_forward_hooks", OrderedDict())
        setattr_(self, "_forward_hooks_with_kwargs", {})
        setattr_(self, "_forward_hooks_always_called", {})
        setattr_(self, "_backward_hooks", OrderedDict())
        setattr_(self, "_backward_pre_hooks", OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  '"forward" function')

    # Registration -----------------------------------------------------------------------
    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a tensor that is state but not a parameter (BatchNorm's running mean).

        Args:
            name: the attribute name.
            tensor: the buffer (None leaves the slot empty, and out of the state dict).
            persistent: whether it goes into the ``state_dict``.
        """
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_member_name("buffer", name, self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise EmberTypeError(f"cannot assign '{type(tensor).__name__}' object to buffer "
                                 f"'{name}' (ember Tensor or None required)")
        self._buffers[name] = tensor
        self._changed()
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or an empty slot, with None) under ``name``."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_member_name("parameter", name, self._parameters)
        self._changed()
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise EmberTypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                                 f"'{name}' (ember.nn.Parameter or None required)")
        if param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model "
                             f"parameters must be created explicitly. To express '{name}' as "
                             "a function of another Tensor, compute the value in the "
                             "forward() method.")
        self._parameters[name] = param

    def add_module(self, name: str, module: "Module | None") -> None:
        """Add a submodule under ``name`` (it becomes an attribute)."""
        if module is not None and not isinstance(module, Module):
            raise EmberTypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_member_name("module", name, self._modules)
        self._modules[name] = module
        self._changed()

    register_module = add_module

    def _check_member_name(self, kind: str, name, table: dict) -> None:
        if not isinstance(name, str):
            raise EmberTypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain ".", got: {name}')
        if hasattr(self, name) and name not in table:
            raise KeyError(f"attribute '{name}' already exists")

    def get_submodule(self, target: str) -> "Module":
        """The submodule at dotted path ``target`` (``"encoder.layers.0"``)."""
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at dotted path ``target`` (``"fc.weight"``)."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        param = getattr(mod, name)
        if not isinstance(param, Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return param

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at dotted path ``target`` (``"bn.running_mean"``)."""
        module_path, _, name = target.rpartition(".")
        mod = self.get_submodule(module_path)
        if not hasattr(mod, name):
            raise AttributeError(f"{mod._get_name()} has no attribute `{name}`")
        if name not in mod._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return getattr(mod, name)

    def get_extra_state(self) -> Any:
        """State beyond parameters and buffers to put in the state dict; a subclass that
        overrides this (and :meth:`set_extra_state`) gets a ``_extra_state`` entry."""
        raise EmberError("Reached a code path in Module.get_extra_state() that should never "
                         "be called.")

    def set_extra_state(self, state: Any) -> None:
        """Restore what :meth:`get_extra_state` returned."""
        raise EmberError("Reached a code path in Module.set_extra_state() that should never "
                         "be called.")

    def _has_extra_state(self) -> bool:
        return type(self).get_extra_state is not Module.get_extra_state

    # Attributes --------------------------------------------------------------------------
    def __getattr__(self, name: str):
        # Only called when normal lookup fails: parameters, buffers and submodules.
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            members = d.get(table)
            if members is not None and name in members:
                return members[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name, keep="_parameters")
            self.register_parameter(name, value)
            return
        if params is not None and name in params:
            if value is not None:
                raise EmberTypeError(f"cannot assign '{type(value).__name__}' as parameter "
                                     f"'{name}' (ember.nn.Parameter or None expected)")
            self.register_parameter(name, None)
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name, keep="_modules")
            modules[name] = value
            self._changed()
            return
        if modules is not None and name in modules:
            if value is not None:
                raise EmberTypeError(f"cannot assign '{type(value).__name__}' as child module "
                                     f"'{name}' (ember.nn.Module or None expected)")
            modules[name] = None
            self._changed()
            return
        buffers = d.get("_buffers")
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise EmberTypeError(f"cannot assign '{type(value).__name__}' as buffer "
                                     f"'{name}' (ember.Tensor or None expected)")
            buffers[name] = value
            self._changed()
            return
        if name == "training":
            STATE_EPOCH[0] += 1
        object.__setattr__(self, name, value)

    def _changed(self) -> None:
        """Count changes of which tensors and submodules this module holds (compiled
        functions that read it retrace when the count moves)."""
        d = self.__dict__
        d["_structure_version"] = d.get("_structure_version", 0) + 1
        STATE_EPOCH[0] += 1

    def _forget(self, name: str, keep: str) -> None:
        """Remove ``name`` from every place but ``keep`` before it is re-registered."""
        self.__dict__.pop(name, None)
        for table in ("_parameters", "_buffers", "_modules"):
            if table != keep:
                self.__dict__[table].pop(name, None)
        self._non_persistent_buffers_set.discard(name)

    def __delattr__(self, name: str) -> None:
        self._changed()
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        keys = (dir(type(self)) + list(self.__dict__) + list(self._parameters)
                + list(self._modules) + list(self._buffers))
        return sorted(k for k in keys if not k[0].isdigit())

    # Walking the tree --------------------------------------------------------------------
    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, "Module"]]:
        """``(dotted name, module)`` for this module and every submodule, depth first."""
        if memo is None:
            memo = set()
        if id(self) in memo:
            return
        if remove_duplicate:
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self) -> Iterator["Module"]:
        """This module and every submodule, depth first."""
        for _, module in self.named_modules():
            yield module

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        """``(name, module)`` for the immediate submodules."""
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator["Module"]:
        """The immediate submodules."""
        for _, module in self.named_children():
            yield module

    def _named_members(self, table: str, prefix: str, recurse: bool, remove_duplicate: bool):
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                   if recurse else [(prefix, self)])
        seen = set()
        for module_prefix, module in modules:
            for name, value in getattr(module, table).items():
                if value is None or id(value) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """``(dotted name, parameter)``, each shared parameter once (unless
        ``remove_duplicate=False``)."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """The parameters of this module and (with ``recurse``) its submodules."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """``(dotted name, buffer)`` for every buffer, persistent or not."""
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """The buffers of this module and (with ``recurse``) its submodules."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn: Callable[["Module"], None]) -> "Module":
        """Call ``fn`` on every submodule (children first) and then on self; returns self.

        >>> net.apply(lambda m: print(type(m).__name__))
        """
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # Modes and gradients -----------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        """Set training mode (``mode=True``) or evaluation mode here and below."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self) -> "Module":
        """Set evaluation mode (Dropout off, BatchNorm uses running statistics)."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        """Set ``requires_grad`` on every parameter; returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's gradient: to None (default) or to zeros."""
        from ..ops import registry
        trace = registry._trace
        for p in self.parameters():
            if set_to_none and trace is not None:
                trace.clear_grad(p)  # ember.jit: the clearing happens at every call
                continue
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
                continue
            if p.grad.grad_fn is not None:
                p.grad.detach_()
            else:
                p.grad.requires_grad_(False)
            p.grad.zero_()

    # Conversion --------------------------------------------------------------------------
    def _apply(self, fn: Callable[[Tensor], Tensor]) -> "Module":
        """Apply ``fn`` to every parameter, gradient and buffer. Parameters keep their
        identity (their data is replaced), so optimizers built before still hold them."""
        for module in self.children():
            module._apply(fn)
        for p in self._parameters.values():
            if p is None:
                continue
            with grad_mode.no_grad():
                new = fn(p)
            if new is not p:
                p.data = new
            if p.grad is not None:
                with grad_mode.no_grad():
                    g = fn(p.grad)
                if g is not p.grad:
                    p.grad.data = g
        for name, buf in self._buffers.items():
            if buf is not None:
                self._buffers[name] = fn(buf)
        return self

    def to(self, *args, **kwargs) -> "Module":
        """Move and/or cast parameters and buffers: ``to(dtype)``, ``to(device)``,
        ``to(device, dtype)``, ``to(tensor)``. Only floating tensors change dtype.

        >>> net.to(ember.float64)
        """
        device, dtype, _ = _to_args(args, kwargs)
        if dtype is not None and not dtype.is_floating_point:
            raise EmberTypeError(f"nn.Module.to only accepts floating point or complex "
                                 f"dtypes, but got desired dtype={dtype}")

        def convert(t: Tensor) -> Tensor:
            return t.to(device, dtype if t.is_floating_point() else None)
        return self._apply(convert)

    def _cast_floats(self, dtype) -> "Module":
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def float(self) -> "Module":
        """Cast floating parameters and buffers to float32."""
        return self._cast_floats(_dt.float32)

    def double(self) -> "Module":
        """Cast floating parameters and buffers to float64."""
        return self._cast_floats(_dt.float64)

    def half(self) -> "Module":
        """Cast floating parameters and buffers to float16."""
        return self._cast_floats(_dt.float16)

    def bfloat16(self) -> "Module":
        """Cast floating parameters and buffers to bfloat16."""
        return self._cast_floats(_dt.bfloat16)

    def type(self, dst_type) -> "Module":
        """Cast every parameter and buffer to ``dst_type``."""
        return self._apply(lambda t: t.type(dst_type))

    def cpu(self) -> "Module":
        """Move parameters and buffers to the CPU."""
        return self._apply(lambda t: t.cpu())

    def cuda(self, device=None) -> "Module":
        """Move parameters and buffers to a CUDA device."""
        return self._apply(lambda t: t.cuda(device))

    # State dict --------------------------------------------------------------------------
    def state_dict(self, *, destination: dict | None = None, prefix: str = "",
                   keep_vars: bool = False) -> "OrderedDict[str, Tensor]":
        """Parameters and persistent buffers by dotted name, in PyTorch's order (each
        module's own parameters, then its buffers, then its submodules).

        Args:
            destination: a dict to fill (a new OrderedDict by default).
            prefix: prepended to every key.
            keep_vars: keep the parameters themselves instead of detached tensors.
        """
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".",
                                  keep_vars=keep_vars)
        return destination

    def _local_state(self) -> dict:
        """This module's own entries of the state dict (no prefix)."""
        state = {k: v for k, v in self._parameters.items() if v is not None}
        for k, v in self._buffers.items():
            if v is not None and k not in self._non_persistent_buffers_set:
                state[k] = v
        return state

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        for name, value in self._local_state().items():
            destination[prefix + name] = value if keep_vars else value.detach()
        if self._has_extra_state():
            destination[prefix + "_extra_state"] = self.get_extra_state()

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        assign: bool = False) -> _IncompatibleKeys:
        """Copy parameters and buffers from ``state_dict``.

        Everything is checked before anything is copied: on an error (a missing or
        unexpected key with ``strict``, a shape mismatch, a value that is not a tensor)
        the module is left unchanged and an error lists every problem.

        Args:
            state_dict: a mapping from dotted names to tensors.
            strict: the keys must match this module's exactly.
            assign: put the given tensors in place (as parameters where they replace one)
                instead of copying into the existing ones.

        Returns:
            ``(missing_keys, unexpected_keys)``.
        """
        if not isinstance(state_dict, Mapping):
            raise EmberTypeError(f"Expected state_dict to be dict-like, got "
                                 f"{type(state_dict)}.")
        missing, unexpected, errors, plan = [], [], [], []
        self._check_state(dict(state_dict), "", missing, unexpected, errors, plan)
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise EmberError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        with grad_mode.no_grad():
            for module, name, current, value in plan:
                module._load_one(name, current, value, assign)
        return _IncompatibleKeys(missing, unexpected)

    def _check_state(self, state: dict, prefix: str, missing: list, unexpected: list,
                     errors: list, plan: list) -> None:
        """Collect what loading ``state`` into this module (and below) would do or find
        wrong, without changing anything."""
        local = self._local_state()
        for name, current in local.items():
            key = prefix + name
            if key not in state:
                missing.append(key)
                continue
            value = state[key]
            if not isinstance(value, Tensor):
                errors.append(f'While copying the parameter named "{key}", expected '
                              f"ember.Tensor or Tensor-like object from checkpoint but "
                              f"received {type(value)}")
                continue
            if current.ndim == 0 and value.ndim == 1 and value.shape[0] == 1:
                value = value[0]  # old checkpoints kept scalars as shape (1,)
            if value.shape != current.shape:
                errors.append(f"size mismatch for {key}: copying a param with shape "
                              f"{value.shape} from checkpoint, the shape in current model is "
                              f"{current.shape}.")
                continue
            plan.append((self, name, current, value))
        extra_key = prefix + "_extra_state"
        if self._has_extra_state():
            if extra_key in state:
                plan.append((self, "_extra_state", None, state[extra_key]))
            else:
                missing.append(extra_key)
        elif extra_key in state:
            unexpected.append(extra_key)
        for key in state:
            if not key.startswith(prefix) or key == extra_key:
                continue
            head, dot, _ = key[len(prefix):].partition(".")
            if (dot and head not in self._modules) or (not dot and head not in local):
                unexpected.append(key)
        for name, module in self._modules.items():
            if module is not None:
                child = prefix + name + "."
                module._check_state({k: v for k, v in state.items() if k.startswith(child)},
                                    child, missing, unexpected, errors, plan)

    def _load_one(self, name: str, current: Tensor | None, value, assign: bool) -> None:
        if name == "_extra_state" and current is None:
            self.set_extra_state(value)
        elif not assign:
            current.copy_(value)
        elif isinstance(current, Parameter) and not isinstance(value, Parameter):
            setattr(self, name, Parameter(value, requires_grad=current.requires_grad))
        else:
            setattr(self, name, value)

    # Hooks -------------------------------------------------------------------------------
    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """Call ``hook(module, args)`` before ``forward``; a non-None result replaces
        ``args``. With ``with_kwargs=True``: ``hook(module, args, kwargs)`` returning None
        or ``(args, kwargs)``."""
        handle = RemovableHandle(self._forward_pre_hooks,
                                 extra_dict=self._forward_pre_hooks_with_kwargs)
        self._add_hook(self._forward_pre_hooks, handle, hook, prepend)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        return handle

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False,
                              with_kwargs: bool = False,
                              always_call: bool = False) -> RemovableHandle:
        """Call ``hook(module, args, output)`` after ``forward``; a non-None result
        replaces the output. With ``with_kwargs=True``: ``hook(module, args, kwargs,
        output)``. With ``always_call=True`` the hook also runs when forward raises."""
        handle = RemovableHandle(self._forward_hooks,
                                 extra_dict=[self._forward_hooks_with_kwargs,
                                             self._forward_hooks_always_called])
        self._add_hook(self._forward_hooks, handle, hook, prepend)
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        return handle

    def register_full_backward_pre_hook(self, hook: Callable,
                                        prepend: bool = False) -> RemovableHandle:
        """Call ``hook(module, grad_output)`` when the gradients of the module's outputs
        are known; a non-None result replaces ``grad_output``."""
        handle = RemovableHandle(self._backward_pre_hooks)
        self._add_hook(self._backward_pre_hooks, handle, hook, prepend)
        return handle

    def register_full_backward_hook(self, hook: Callable,
                                    prepend: bool = False) -> RemovableHandle:
        """Call ``hook(module, grad_input, grad_output)`` when the gradients of the
        module's tensor inputs are computed; a non-None result replaces ``grad_input``."""
        handle = RemovableHandle(self._backward_hooks)
        self._add_hook(self._backward_hooks, handle, hook, prepend)
        return handle

    @staticmethod
    def _add_hook(table: OrderedDict, handle: RemovableHandle, hook, prepend: bool) -> None:
        table[handle.id] = hook
        if prepend:
            table.move_to_end(handle.id, last=False)

    def __call__(self, *args, **kwargs):
        if _registry._trace is not None:  # ember.jit guards the modules a trace ran
            _registry._trace.modules_called[id(self)] = self
        if not (self._forward_pre_hooks or self._forward_hooks or self._backward_hooks
                or self._backward_pre_hooks):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def _call_with_hooks(self, args: tuple, kwargs: dict):
        for hook_id, hook in list(self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise EmberError("forward pre-hook must return None or a tuple of "
                                         f"(new_args, new_kwargs), but got {result}.")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        bw_hook = None
        if self._backward_hooks or self._backward_pre_hooks:
            bw_hook = BackwardHook(self, list(self._backward_hooks.values()),
                                   list(self._backward_pre_hooks.values()))
            args = bw_hook.setup_input_hook(args)
        called = set()
        try:
            result = self.forward(*args, **kwargs)
            for hook_id, hook in list(self._forward_hooks.items()):
                called.add(hook_id)
                if hook_id in self._forward_hooks_with_kwargs:
                    out = hook(self, args, kwargs, result)
                else:
                    out = hook(self, args, result)
                if out is not None:
                    result = out
        except Exception:
            for hook_id, hook in list(self._forward_hooks.items()):
                if hook_id in self._forward_hooks_always_called and hook_id not in called:
                    try:
                        if hook_id in self._forward_hooks_with_kwargs:
                            hook(self, args, kwargs, None)
                        else:
                            hook(self, args, None)
                    except Exception as exc:
                        warnings.warn(f"forward hook with always_call=True raised an "
                                      f"exception that was ignored: {exc!r}")
            raise
        if bw_hook is not None:
            if not isinstance(result, (Tensor, tuple)):
                warnings.warn("For backward hooks to be called, module output should be a "
                              f"Tensor or a tuple of Tensors but received {type(result)}")
            result = bw_hook.setup_output_hook(result)
        return result

    # Printing ----------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """The module's settings, shown inside its ``repr`` (override in layers)."""
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + _addindent(repr(module), 2)
                       for name, module in self._modules.items()]
        lines = extra_lines + child_lines
        body = ""
        if len(extra_lines) == 1 and not child_lines:
            body = extra_lines[0]
        elif lines:
            body = "\n  " + "\n  ".join(lines) + "\n"
        return f"{self._get_name()}({body})"
