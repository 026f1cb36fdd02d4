"""The error a bad config file raises: it names the key path, what was found and what
was expected."""
from __future__ import annotations

from ..errors import EmberValueError

__all__ = ["ConfigError"]


class ConfigError(EmberValueError):
    """A config file (or an override) that cannot be used.

    The message starts with the dotted key path of the bad entry
    (``trainer.max_epochs: expected a positive int, got 'ten'``); an unknown key comes
    with the close matches.

    Attributes:
        path: the dotted key path of the bad entry (``""`` for the whole file).
    """

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
