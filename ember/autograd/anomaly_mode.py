"""Anomaly detection for the backward pass, as ``torch.autograd.detect_anomaly``.

While it is on, every node recorded on the tape keeps the Python stack of the forward
call that made it, and the engine checks what each node's VJP returns: a gradient with
NaN in it raises (``check_nan``), and any error in a node's backward first warns with
that node's forward traceback, so the op that went wrong is found in the user's code.
While it is off, the tape and the engine do nothing extra (one ``None`` check each).
"""
from __future__ import annotations

import functools
import os
import sys
import traceback
import warnings
import weakref

from ..errors import EmberError
from . import graph

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
           "is_anomaly_check_nan_enabled", "set_anomaly_enabled"]

_enabled = False
_check_nan = True
_forward_stacks: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

# The frames of the recording machinery itself, left out of a forward traceback.
_INTERNAL = {os.path.normcase(os.path.abspath(p)) for p in (
    graph.__file__, __file__, os.path.join(os.path.dirname(graph.__file__), "function.py"),
    os.path.join(os.path.dirname(os.path.dirname(graph.__file__)), "ops", "registry.py"))}


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on."""
    return _enabled


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection raises on NaN gradients."""
    return _check_nan


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Turn anomaly detection on or off (what :class:`detect_anomaly` and
    :class:`set_detect_anomaly` do on entry), as ``torch.set_anomaly_enabled``."""
    global _enabled, _check_nan
    _enabled, _check_nan = bool(enabled), bool(check_nan)
    graph._anomaly = _Hooks if _enabled else None


class _Hooks:
    """What the tape and the engine call while anomaly detection is on."""

    @staticmethod
    def note_forward(node) -> None:
        frames = traceback.StackSummary.extract(traceback.walk_stack(sys._getframe(1)),
                                                lookup_lines=False)
        frames.reverse()
        while frames and os.path.normcase(os.path.abspath(frames[-1].filename)) in _INTERNAL:
            frames.pop()
        _forward_stacks[node] = frames

    @staticmethod
    def call_vjp(node, slot):
        try:
            grads = graph._call_vjp(node, slot)
            if _check_nan:
                for i, g in enumerate(grads):
                    if g is not None and _has_nan(g):
                        raise EmberError(f"Function '{node.name()}' returned nan values in "
                                         f"its {i}th output.")
            return grads
        except Exception:
            _warn_forward_stack(node)
            raise


def _has_nan(g) -> bool:
    data = g._data
    if getattr(data, "_ember_tracer", False) or not g.dtype.is_floating_point:
        return False  # (a value ember.jit is tracing has no numbers yet)
    return bool(g._device.backend.xp.isnan(data).any())


def forward_traceback(node) -> str | None:
    """The formatted stack of the forward call that recorded ``node`` (None when it
    was recorded while anomaly detection was off)."""
    frames = _forward_stacks.get(node)
    return None if frames is None else "".join(frames.format())


def _warn_forward_stack(node) -> None:
    stack = forward_traceback(node)
    if stack is None:
        message = ("No forward pass information available. Enable detect anomaly during "
                   "forward pass for more information.")
    else:
        message = (f"Error detected in {node.name()}. Traceback of forward call that caused "
                   f"the error:\n{stack}")
    warnings.warn(message, UserWarning, stacklevel=2)


class _AnomalyContext:
    """Shared by the two context managers: they restore the previous setting on exit."""

    def _save(self) -> None:
        self.prev, self.prev_check_nan = _enabled, _check_nan

    def __exit__(self, *exc) -> bool:
        set_anomaly_enabled(self.prev, self.prev_check_nan)
        return False


class detect_anomaly(_AnomalyContext):
    """Context manager (and decorator) turning on anomaly detection for the autograd
    engine.

    - Ops run inside it remember where they were called: an error in their backward
      first warns with that forward traceback.
    - With ``check_nan`` (the default), a backward that produces NaN raises
      ``Function 'XBackward0' returned nan values in its 0th output.``

    This slows forward and backward down; use it to debug.

    Example::

        >>> x = ember.tensor([0.0, 1.0], requires_grad=True)
        >>> with ember.autograd.detect_anomaly():
        ...     (x.sqrt() * 0).sum().backward()   # 0 * inf = nan in SqrtBackward0
        Traceback (most recent call last):
        ...
        ember.errors.EmberError: Function 'SqrtBackward0' returned nan values in its 0th output.
    """

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan
        self._save()
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the "
                      "runtime and should only be enabled for debugging.", stacklevel=2)

    def __enter__(self) -> None:
        self._save()
        set_anomaly_enabled(True, self.check_nan)

    def __call__(self, fn):
        """As a decorator: ``fn`` runs with anomaly detection on."""
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                mode = detect_anomaly(self.check_nan)
            with mode:
                return fn(*args, **kwargs)
        return wrapper


class set_detect_anomaly(_AnomalyContext):
    """Turn anomaly detection on or off (``mode``): at once when called, and back to
    the previous setting when used as a context manager that exits.

    Args:
        mode: on (True) or off (False).
        check_nan: raise on NaN gradients while on.

    Example::

        >>> _ = ember.autograd.set_detect_anomaly(True)    # from here on
        >>> with ember.autograd.set_detect_anomaly(False):
        ...     pass                                        # off in here only
        >>> _ = ember.autograd.set_detect_anomaly(False)
    """

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self._save()
        set_anomaly_enabled(mode, check_nan)

    def __enter__(self) -> None:
        pass
