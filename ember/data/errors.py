"""The errors ``ember.data`` raises: bad arguments, and failed worker processes."""
from __future__ import annotations

from ..errors import EmberError, EmberValueError


class DataError(EmberValueError):
    """A bad value given to a dataset, sampler or DataLoader (lengths that don't add up,
    a non-positive batch size, options that exclude each other).

    A ``ValueError`` as well, since PyTorch raises ``ValueError`` in the same places.
    """


class WorkerError(EmberError):
    """A DataLoader worker process failed: its dataset code raised (the message holds
    the worker's traceback), it died (killed, segfault), or it sent nothing within
    ``timeout`` seconds. A ``RuntimeError``, as PyTorch raises there."""
