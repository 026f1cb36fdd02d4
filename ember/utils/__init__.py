"""``ember.utils``: activation checkpointing and module hooks.

``ember.utils.checkpoint`` is both the module and the function:
``ember.utils.checkpoint(fn, x)`` and ``ember.utils.checkpoint.checkpoint(fn, x)`` do the
same thing.
"""
import types as _types

from . import checkpoint, hooks  # noqa: F401


class _CallableModule(_types.ModuleType):
    """A module that, called, calls its function of the same name."""

    def __call__(self, *args, **kwargs):
        return self.checkpoint(*args, **kwargs)


checkpoint.__class__ = _CallableModule
