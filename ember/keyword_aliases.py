"""PyTorch's NumPy-style keyword names: every function and method that takes ``dim`` also
takes ``axis``, and ``keepdims`` stands for ``keepdim`` (``x.sum(axis=0, keepdims=True)``).

:func:`install` wraps the ``ember.*`` functions and the ``Tensor`` methods whose
signatures have ``dim`` or ``keepdim``; a call without those names pays one dict test.
"""
from __future__ import annotations

import functools
import inspect

from .errors import EmberTypeError

_ALIASES = {"axis": "dim", "keepdims": "keepdim"}


def _renamed(name: str, kwargs: dict) -> dict:
    out = dict(kwargs)
    for alias, real in _ALIASES.items():
        if alias in out:
            if real in out:
                raise EmberTypeError(f"{name}() got both {real!r} and its alias {alias!r}")
            out[real] = out.pop(alias)
    return out


def _takes_dim(fn) -> bool:
    code = fn.__code__  # (the argument names; faster than inspect.signature at import)
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    return "dim" in names or "keepdim" in names


def with_aliases(fn):
    """``fn`` taking ``axis``/``keepdims`` for ``dim``/``keepdim`` too."""
    name = fn.__name__

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if kwargs and ("axis" in kwargs or "keepdims" in kwargs):
            kwargs = _renamed(name, kwargs)
        return fn(*args, **kwargs)
    call._keyword_aliases = True
    return call


def _wrappable(fn) -> bool:
    return (inspect.isfunction(fn) and not getattr(fn, "_keyword_aliases", False)
            and _takes_dim(fn))


def install(namespace: dict, tensor_cls) -> None:
    """Wrap the functions of ``namespace`` (a module's globals) and the methods of
    ``tensor_cls`` that take ``dim``; a function found under several names is wrapped
    once, so that ``ember.concat is ember.cat`` stays true."""
    wrapped: dict = {}

    def wrap(fn):
        if id(fn) not in wrapped:
            wrapped[id(fn)] = with_aliases(fn)
        return wrapped[id(fn)]
    for name, fn in list(namespace.items()):
        if not name.startswith("_") and _wrappable(fn):
            namespace[name] = wrap(fn)
    for name, fn in list(vars(tensor_cls).items()):
        if not name.startswith("__") and _wrappable(fn):
            setattr(tensor_cls, name, wrap(fn))
