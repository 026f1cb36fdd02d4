"""``skip_init``: build a module without initialising its parameters."""
from __future__ import annotations

import inspect

from ...errors import EmberError
from ...ops.random import get_rng_state, set_rng_state
from ..module import Module

__all__ = ["skip_init"]

_RESET_METHODS = ("reset_parameters", "_reset_parameters")


def skip_init(module_cls: type, *args, **kwargs) -> Module:
    """Build ``module_cls(*args, **kwargs)`` without initialising its parameters: their
    values are whatever the allocation held, for a module whose weights are about to be
    loaded or set by hand. The global random state is left as it was.

    The class must take a ``device`` argument, as PyTorch requires. Parameters that the
    layer fills in ``reset_parameters`` (every ember layer does) are skipped outright.

    >>> m = ember.nn.utils.skip_init(ember.nn.Linear, 5, 1)
    >>> m.weight.shape
    ember.Size([1, 5])
    """
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise EmberError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise EmberError("Module must support a 'device' arg to skip initialization")
    module = module_cls.__new__(module_cls)
    # Instance attributes shadow the class's initialisers while __init__ runs.
    for name in _RESET_METHODS:
        object.__setattr__(module, name, _skip)
    state = get_rng_state()
    try:
        module.__init__(*args, **kwargs)
    finally:
        set_rng_state(state)
        for name in _RESET_METHODS:
            module.__dict__.pop(name, None)
    return module


def _skip(*args, **kwargs) -> None:
    return None
