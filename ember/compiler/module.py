"""``ember.jit(model)``: a Module whose calls run through a compiled forward."""
from __future__ import annotations

from .jit import CompiledFunction


class CompiledModule:
    """Calls ``module(*args)`` through ember.jit (forward pre/post hooks included,
    since the whole call is traced); every other attribute is the module's own, so
    ``compiled.parameters()``, ``.train()``, ``.state_dict()`` work as on the module.

    Outputs that need gradients get one autograd node, so ``loss.backward()`` after a
    compiled forward fills the parameters' ``.grad`` as eager mode does.

    >>> model = ember.jit(ember.nn.Linear(4, 2))
    >>> model(ember.ones(3, 4)).shape
    ember.Size([3, 2])
    """

    def __init__(self, module, **options):
        object.__setattr__(self, "module", module)
        object.__setattr__(self, "compiled", CompiledFunction(_Call(module), **options))

    def __call__(self, *args, **kwargs):
        return self.compiled(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.module, name)

    def __setattr__(self, name, value):
        setattr(self.module, name, value)

    def explain(self) -> str:
        return self.compiled.explain()

    def graph(self):
        return self.compiled.graph()

    def latest(self):
        return self.compiled.latest()

    @property
    def cache(self):
        return self.compiled.cache

    @property
    def retraces(self) -> list:
        return self.compiled.retraces

    def __repr__(self) -> str:
        return f"ember.jit({self.module!r})"


class _Call:
    """``module(*args)`` as a plain function (named for the module's class)."""

    def __init__(self, module):
        self.module = module
        self.__self__ = module  # (as a bound method has: the jit watches its submodules)
        self.__name__ = type(module).__name__
        self.__qualname__ = self.__name__
        self.__doc__ = type(module).__doc__

    def __call__(self, *args, **kwargs):
        return self.module(*args, **kwargs)
