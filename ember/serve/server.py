"""Running the app with uvicorn: :func:`serve` (what ``ember serve`` calls)."""
from __future__ import annotations

from typing import Any

__all__ = ["serve"]


def serve(model, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info",
          graceful_timeout: float | None = 30.0, **app_options: Any) -> None:
    """Serve ``model`` (a model directory, an ``nn.Module`` or an app from
    :func:`~ember.serve.create_app`) with uvicorn until
    SIGINT/SIGTERM; then stop accepting connections, let the requests in flight finish
    (at most ``graceful_timeout`` seconds), answer what the batcher still holds, and exit.

    Args:
        host: the address to bind; loopback unless told otherwise (``0.0.0.0`` exposes
            the model to the network).
        port: the TCP port.
        app_options: passed to :func:`ember.serve.create_app` (``max_batch_size``,
            ``max_wait_ms``, ...).

    >>> ember.serve.serve("digits_cnn", port=8000)
    """
    try:
        import uvicorn
    except ImportError as exc:
        raise ImportError("ember serve needs uvicorn: pip install 'ember[serve]' (or pip "
                          "install starlette uvicorn)") from exc
    from starlette.applications import Starlette

    from .app import create_app
    app = model if isinstance(model, Starlette) else create_app(model, **app_options)
    timeout = None if graceful_timeout is None else int(graceful_timeout)
    uvicorn.run(app, host=host, port=port, log_level=log_level, lifespan="on",
                timeout_graceful_shutdown=timeout)
