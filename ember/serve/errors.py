"""The error a request handler raises: an HTTP status and a message for the client."""
from __future__ import annotations

from ..errors import EmberError

__all__ = ["ServeError"]


class ServeError(EmberError):
    """A request the server refuses or can't answer; the server replies ``status`` with
    ``{"error": message}`` and keeps serving.

    Attributes:
        status: the HTTP status code (400 bad JSON, 413 too large, 422 invalid inputs,
            503 saturated or shutting down, 500 the model failed).
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
