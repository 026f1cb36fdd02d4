"""Grad modes: no_grad, enable_grad, set_grad_enabled, inference_mode (thread-local)."""
from __future__ import annotations

import functools
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
    """Base of the grad-mode context managers; each also works as a decorator."""
    _enabled: bool
    _inference: bool | None = None

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
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(*self._args()):
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


class enable_grad(_Mode):
    """Context manager (and decorator) that turns graph recording back on."""
    _enabled = True


class set_grad_enabled(_Mode):
    """Turn graph recording on or off: a function call, a context manager or decorator."""

    def __init__(self, mode: bool):
        self._enabled = bool(mode)
        self._prev = (_state.enabled, _state.inference)
        _state.enabled = self._enabled

    def __enter__(self):
        return self

    def _args(self):
        return (self._enabled,)

    def __call__(self, fn):
        _state.enabled, _state.inference = self._prev  # undo the eager switch
        return super().__call__(fn)


class inference_mode(_Mode):
    """Like no_grad; tensors made inside are marked as inference tensors."""

    def __init__(self, mode: bool = True):
        self._enabled = not mode
        self._inference = bool(mode)

    def _args(self):
        return (self._inference,)
