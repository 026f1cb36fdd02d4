"""Ctrl-C during training: the first SIGINT is held until the current step is done (so
the emergency checkpoint holds a consistent state that resumes exactly); a second one
interrupts at once."""
from __future__ import annotations

import signal
import threading

__all__ = ["DeferredInterrupt"]


class DeferredInterrupt:
    """While active (``with``), the first SIGINT sets :attr:`requested` instead of
    raising; :meth:`check` raises ``KeyboardInterrupt`` at a step boundary. Outside the
    main thread, or when SIGINT has a custom handler, it changes nothing."""

    def __init__(self) -> None:
        self.requested = False
        self._previous = None

    def __enter__(self) -> "DeferredInterrupt":
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.requested:  # a second Ctrl-C: the user does not want to wait
            raise KeyboardInterrupt
        self.requested = True

    def check(self) -> None:
        """Raise the held ``KeyboardInterrupt``, if any."""
        if self.requested:
            self.requested = False
            raise KeyboardInterrupt("training interrupted (SIGINT) at a step boundary")

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
