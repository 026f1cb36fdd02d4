"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict."""
from __future__ import annotations

import operator
from collections import OrderedDict
from itertools import islice
from typing import Any, Iterable, Iterator, Mapping

from ..errors import EmberError, EmberTypeError
from ..tensor import Tensor
from .module import Module, _addindent
from .parameter import Parameter

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


def _abs_index(idx, size: int) -> int:
    idx = operator.index(idx)
    if not -size <= idx < size:
        raise IndexError(f"index {idx} is out of range")
    return idx % size if size else idx


def _renumber(module: Module) -> None:
    """Keys ``"0", "1", ...`` again after a deletion."""
    values = list(module._modules.values())
    module._modules.clear()
    module._modules.update((str(i), m) for i, m in enumerate(values))


class Sequential(Module):
    """Modules run one after the other; the output of each is the input of the next.

    Built from modules (named ``"0"``, ``"1"``, ...) or from an OrderedDict of named
    modules. Indexing with a slice gives a Sequential of that part.

    >>> net = ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.ReLU(), ember.nn.Linear(8, 2))
    >>> net(ember.randn(3, 4)).shape
    ember.Size([3, 2])
    """

    def __init__(self, *args: Module):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        i = _abs_index(idx, len(self))
        return next(islice(iter(self._modules.values()), i, None))

    def __setitem__(self, idx, module: Module) -> None:
        key = list(self._modules)[_abs_index(idx, len(self))]
        setattr(self, key, module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules)
        if isinstance(idx, slice):
            for key in keys[idx]:
                delattr(self, key)
        else:
            delattr(self, keys[_abs_index(idx, len(self))])
        _renumber(self)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __add__(self, other: "Sequential") -> "Sequential":
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given.")
        out = Sequential()
        for module in list(self) + list(other):
            out.append(module)
        return out

    def __iadd__(self, other: "Sequential") -> "Sequential":
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given.")
        for module in list(other):
            self.append(module)
        return self

    def __mul__(self, other: int) -> "Sequential":
        if not isinstance(other, int) or other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for Sequential")
        out = Sequential()
        for _ in range(other):
            for module in self:
                out.append(module)
        return out

    __rmul__ = __mul__

    def append(self, module: Module) -> "Sequential":
        """Add ``module`` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index: int, module: Module) -> "Sequential":
        """Insert ``module`` before position ``index``; returns self."""
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        for i in range(n, index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module
        self._changed()
        return self

    def extend(self, sequential: Iterable[Module]) -> "Sequential":
        """Append every module of ``sequential``; returns self."""
        for module in sequential:
            self.append(module)
        return self

    def pop(self, key) -> Module:
        """Remove and return the module at index ``key``."""
        module = self[key]
        del self[key]
        return module

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input


class ModuleList(Module):
    """A list of modules, registered as submodules ``"0"``, ``"1"``, ...

    >>> layers = ember.nn.ModuleList([ember.nn.Linear(4, 4) for _ in range(3)])
    >>> len(list(layers.parameters()))
    6
    """

    def __init__(self, modules: Iterable[Module] | None = None):
        super().__init__()
        if modules is not None:
            self += modules

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_abs_index(idx, len(self)))]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, str(_abs_index(idx, len(self))), module)

    def __delitem__(self, idx) -> None:
        if isinstance(idx, slice):
            for key in list(self._modules)[idx]:
                delattr(self, key)
        else:
            delattr(self, str(_abs_index(idx, len(self))))
        _renumber(self)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self, modules: Iterable[Module]) -> "ModuleList":
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> "ModuleList":
        out = ModuleList()
        for module in list(self) + list(other):
            out.append(module)
        return out

    def insert(self, index: int, module: Module) -> None:
        """Insert ``module`` before position ``index``."""
        for i in range(len(self._modules), index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module
        self._changed()

    def append(self, module: Module) -> "ModuleList":
        """Add ``module`` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def pop(self, key) -> Module:
        """Remove and return the module at index ``key``."""
        module = self[key]
        del self[key]
        return module

    def extend(self, modules: Iterable[Module]) -> "ModuleList":
        """Append every module of ``modules``; returns self."""
        if not hasattr(modules, "__iter__"):
            raise EmberTypeError("ModuleList.extend should be called with an iterable, but "
                                 f"got {type(modules).__name__}")
        offset = len(self)
        for i, module in enumerate(modules):
            self.add_module(str(offset + i), module)
        return self

    def __repr__(self) -> str:
        # Runs of identical submodules print once, as "(0-2): 3 x Linear(...)".
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        runs = []  # [first index, last index, repr]
        for i, r in enumerate(reprs):
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = []
        for first, last, r in runs:
            head = f"({first})" if first == last else f"({first}-{last}): {last - first + 1} x"
            line = f"{head}: {r}" if first == last else f"{head} {r}"
            lines.append(_addindent(line, 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """A dict of modules, registered as submodules under their keys (insertion order).

    >>> heads = ember.nn.ModuleDict({"cls": ember.nn.Linear(8, 10), "box": ember.nn.Linear(8, 4)})
    >>> list(heads.keys())
    ['cls', 'box']
    """

    def __init__(self, modules: Mapping[str, Module] | None = None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]
        self._changed()

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def clear(self) -> None:
        """Remove every module."""
        self._modules.clear()
        self._changed()

    def pop(self, key: str) -> Module:
        """Remove and return the module under ``key``."""
        module = self[key]
        del self[key]
        return module

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules) -> None:
        """Add modules from a mapping or from an iterable of ``(key, module)`` pairs."""
        if isinstance(modules, (Mapping, ModuleDict)):
            for key, module in modules.items():
                self[key] = module
            return
        if not hasattr(modules, "__iter__"):
            raise EmberTypeError("ModuleDict.update should be called with an iterable of "
                                 f"key/value pairs, but got {type(modules).__name__}")
        for j, pair in enumerate(modules):
            if not hasattr(pair, "__iter__") or isinstance(pair, (str, Module)):
                raise EmberTypeError(f"ModuleDict update sequence element #{j} should be "
                                     f"Iterable; is {type(pair).__name__}")
            pair = tuple(pair)
            if len(pair) != 2:
                raise ValueError(f"ModuleDict update sequence element #{j} has length "
                                 f"{len(pair)}; 2 is required")
            self[pair[0]] = pair[1]


def _param_line(key, value, type_name: bool = False) -> str:
    """One line of ParameterList's (``dtype``) or ParameterDict's (``type_name``) repr."""
    if isinstance(value, Tensor):
        size = "x".join(str(s) for s in value.shape)
        device = f" ({value.device})" if value.device.type != "cpu" else ""
        kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
        what = value.type() if type_name else value.dtype
        return f"  ({key}): {kind} containing: [{what} of size {size}{device}]"
    return f"  ({key}): Object of type: {type(value).__name__}"


class ParameterList(Module):
    """A list of parameters, registered as ``"0"``, ``"1"``, ... Plain tensors given to
    it become parameters.

    >>> ps = ember.nn.ParameterList([ember.nn.Parameter(ember.zeros(2)) for _ in range(3)])
    >>> len(list(ps.parameters()))
    3
    """

    def __init__(self, values: Iterable[Any] | None = None):
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            out = type(self)()
            for i in range(*idx.indices(len(self))):
                out.append(self[i])
            return out
        return getattr(self, str(_abs_index(idx, len(self))))

    def __setitem__(self, idx: int, param) -> None:
        idx = _abs_index(idx, len(self))
        if isinstance(param, Tensor) and not isinstance(param, Parameter):
            param = Parameter(param)
        setattr(self, str(idx), param)

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(len(self)))

    def __iadd__(self, parameters: Iterable[Any]) -> "ParameterList":
        return self.extend(parameters)

    def append(self, value) -> "ParameterList":
        """Add ``value`` at the end; returns self."""
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values: Iterable[Any]) -> "ParameterList":
        """Append every element of ``values``; returns self."""
        if not hasattr(values, "__iter__") or isinstance(values, Tensor):
            raise EmberTypeError("ParameterList.extend should be called with an iterable, "
                                 f"but got {type(values).__name__}")
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        return "\n".join(_param_line(k, p) for k, p in enumerate(self))

    def __call__(self, *args, **kwargs):
        raise EmberError("ParameterList should not be called.")


class ParameterDict(Module):
    """A dict of parameters under their keys (insertion order). Plain tensors given to it
    become parameters.

    >>> pd = ember.nn.ParameterDict({"scale": ember.nn.Parameter(ember.ones(3))})
    >>> list(pd.keys())
    ['scale']
    """

    def __init__(self, parameters: Any = None):
        super().__init__()
        self._keys: dict[str, None] = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str):
        return getattr(self, key)

    def __setitem__(self, key: str, value) -> None:
        if not isinstance(key, str):
            raise EmberTypeError(f"ParameterDict keys must be strings, got "
                                 f"{type(key).__name__}")
        self._keys[key] = None
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, key, value)

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def __or__(self, other: "ParameterDict") -> "ParameterDict":
        out = self.copy()
        out.update(other)
        return out

    def copy(self) -> "ParameterDict":
        """A new ParameterDict holding the same parameters."""
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def clear(self) -> None:
        """Remove every entry."""
        for key in list(self._keys):
            del self[key]

    def pop(self, key: str):
        """Remove and return the entry under ``key``."""
        value = self[key]
        del self[key]
        return value

    def get(self, key: str, default=None):
        return self[key] if key in self else default

    def setdefault(self, key: str, default=None):
        """The entry under ``key``, after setting it to ``default`` if absent."""
        if key not in self:
            self[key] = default
        return self[key]

    def keys(self):
        return self._keys.keys()

    def items(self):
        return [(k, self[k]) for k in self._keys]

    def values(self):
        return [self[k] for k in self._keys]

    def update(self, parameters) -> None:
        """Add entries from a mapping or an iterable of ``(key, value)`` pairs."""
        if isinstance(parameters, (Mapping, ParameterDict)):
            items = parameters.items()
            if not isinstance(parameters, (OrderedDict, ParameterDict)):
                items = sorted(items)  # as PyTorch: a plain mapping is taken in key order
            for key, value in items:
                self[key] = value
            return
        if not hasattr(parameters, "__iter__"):
            raise EmberTypeError("ParametersDict.update should be called with an iterable "
                                 f"of key/value pairs, but got {type(parameters).__name__}")
        for j, pair in enumerate(parameters):
            pair = tuple(pair)
            if len(pair) != 2:
                raise ValueError(f"ParameterDict update sequence element #{j} has length "
                                 f"{len(pair)}; 2 is required")
            self[pair[0]] = pair[1]

    def extra_repr(self) -> str:
        return "\n".join(_param_line(k, p, type_name=True) for k, p in self.items())

    def __call__(self, *args, **kwargs):
        raise EmberError("ParameterDict should not be called.")
