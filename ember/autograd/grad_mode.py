"""Grad modes: no_grad, enable_grad, set_grad_enabled, inference_mode (thread-local)."""
from __future__ import annotations

import functools
import inspect
import threading


class _GradState(threading.local):
    enabled = True
    inference = False


_state = _GradState()


def is_grad_enabled() -> bool:
    """True when ops record the graph for backward."""
    return _state.enabled


def is_inference_mode_enabled() -> bool:
    return _state.inference


class _Mode:
    """Base of the grad-mode context managers; each also works as a decorator, with or
    without parentheses (``@ember.no_grad()`` or ``@ember.no_grad``)."""
    _enabled: bool
    _inference: bool | None = None

    def __new__(cls, *args):
        if len(args) == 1 and callable(args[0]) and not isinstance(args[0], bool):
            return cls()(args[0])  # used as a bare decorator
        return super().__new__(cls)

    def __enter__(self):
        self._prev = (_state.enabled, _state.inference)
        _state.enabled = self._enabled
        if self._inference is not None:
            _state.inference = self._inference
        return self

    def __exit__(self, *exc):
        _state.enabled, _state.inference = self._prev
        return False

    def __call__(self, fn):
        make = functools.partial(self.__class__, *self._args())
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def generator(*args, **kwargs):
                # The mode holds while the generator body runs, not while its caller does.
                gen = fn(*args, **kwargs)
                try:
                    with make():
                        value = next(gen)
                    while True:
                        try:
                            sent = yield value
                        except BaseException as exc:
                            with make():
                                value = gen.throw(exc)
                        else:
                            with make():
                                value = gen.send(sent)
                except StopIteration as stop:
                    return stop.value
            return generator

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with make():
                return fn(*args, **kwargs)
        return wrapper

    def _args(self):
        return ()


class no_grad(_Mode):
    """Context manager (and decorator) in which ops record no graph.

    >>> with ember.no_grad():
    ...     y = x * 2          # y.requires_grad is False
    """
    _enabled = False

    def __init__(self, fn=None):
        pass


class enable_grad(_Mode):
    """Context manager (and decorator) that turns graph recording back on, e.g. inside
    a ``no_grad`` block.

    >>> with ember.no_grad(), ember.enable_grad():
    ...     y = x * 2          # y.requires_grad is True
    """
    _enabled = True

    def __init__(self, fn=None):
        pass


class set_grad_enabled(_Mode):
    """Turn graph recording on or off: a plain call (``ember.set_grad_enabled(False)``),
    a context manager, or a decorator.

    >>> with ember.set_grad_enabled(False):
    ...     y = x * 2          # y.requires_grad is False
    """

    def __new__(cls, mode: bool):
        return object.__new__(cls)

    def __init__(self, mode: bool):
        self._enabled = bool(mode)
        self._prev = (_state.enabled, _state.inference)
        _state.enabled = self._enabled  # a plain call switches at once

    def __enter__(self):
        return self

    def _args(self):
        return (self._enabled,)

    def __call__(self, fn):
        _state.enabled, _state.inference = self._prev  # undo the eager switch
        return super().__call__(fn)


class inference_mode(_Mode):
    """Like no_grad, for code that will never need gradients (``mode=False`` turns it
    off inside an inference block).

    >>> with ember.inference_mode():
    ...     y = model(x)
    """

    def __init__(self, mode: bool = True):
        self._enabled = not mode
        self._inference = bool(mode)

    def _args(self):
        return (self._inference,)
