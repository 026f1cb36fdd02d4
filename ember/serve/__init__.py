"""``ember.serve``: serve a model over HTTP — a Starlette app (:func:`create_app`) run by
uvicorn (:func:`serve`, ``ember serve MODEL_DIR``), with dynamic batching, Prometheus
metrics, limits, graceful shutdown and text generation for ``ember.models.GPT``. See
docs/serve.md.

Text generation itself (:func:`generate`, the KV-cached decoding loop) needs no web
libraries; :func:`create_app` and :func:`serve` need the ``serve`` extra (starlette,
uvicorn).

>>> app = ember.serve.create_app("digits_cnn")
>>> ember.serve.serve("digits_cnn", port=8000)               # blocks; Ctrl-C stops it
"""
from __future__ import annotations

from .errors import ServeError
from .generation import SamplingOptions, TokenGenerator, generate
from .metrics import Metrics

__all__ = ["create_app", "serve", "ServeError", "generate", "TokenGenerator",
           "SamplingOptions", "Metrics"]


def __getattr__(name: str):
    # Starlette and uvicorn are imported only when the server is asked for.
    if name == "create_app":
        from .app import create_app
        return create_app
    if name == "serve":
        from .server import serve
        return serve
    raise AttributeError(f"module 'ember.serve' has no attribute {name!r}")
