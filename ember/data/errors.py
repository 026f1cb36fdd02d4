"""The error ``ember.data`` raises for a bad argument."""
from __future__ import annotations

from ..errors import EmberValueError


class DataError(EmberValueError):
    """A bad value given to a dataset, sampler or DataLoader (lengths that don't add up,
    a non-positive batch size, options that exclude each other).

    A ``ValueError`` as well, since PyTorch raises ``ValueError`` in the same places.
    """
