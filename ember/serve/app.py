"""The ASGI app of ``ember serve``, built with Starlette: routes, limits, metrics,
startup (load, warm up) and shutdown (drain the batcher)."""
from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from typing import Any, Sequence

from ..errors import EmberError
from ..pretrained import InputSpec, declare_inputs, load_pretrained, read_pretrained_config
from .batching import DynamicBatcher
from .errors import ServeError
from .metrics import CONTENT_TYPE, Metrics
from .openapi import openapi_schema
from .routes_generate import generate_endpoint
from .tensors import decode_inputs, encode_outputs

try:
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route
except ImportError as _exc:  # pragma: no cover - the serve extra is missing
    raise ImportError("ember.serve needs Starlette and uvicorn: pip install 'ember[serve]' "
                      "(or pip install starlette uvicorn)") from _exc

__all__ = ["create_app", "ServerState"]

ROUTES = ("/healthz", "/readyz", "/metrics", "/openapi.json", "/v1/model", "/v1/predict",
          "/v1/generate")
LIMITED_ROUTES = ("/v1/predict", "/v1/generate")


class JSONResponse(Response):
    """JSON that keeps non-finite floats (as ``NaN``/``Infinity``, which Python's and
    JavaScript's parsers read) instead of failing on a model that outputs them."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return json.dumps(content, separators=(",", ":")).encode()


def error_response(status: int, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


@dataclass
class ServerState:
    """What the routes share: the model runner, the batcher, the metrics and limits."""

    runner: Any
    batcher: DynamicBatcher
    metrics: Metrics
    model_class: str
    max_body_bytes: int
    max_concurrency: int
    ready: bool = False
    in_flight: int = 0


async def read_json(request: Request, limit: int) -> Any:
    """The request body as JSON: 413 past ``limit`` bytes (counted as they arrive, so a
    body without a Content-Length can't slip past), 400 when it isn't JSON."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ServeError(413, f"the request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks))
    except (ValueError, RecursionError) as exc:
        raise ServeError(400, f"the request body is not valid JSON: {exc}") from None


class LimitsAndMetrics:
    """ASGI middleware: the concurrency limit (503 when saturated), the early size check
    on Content-Length (413), and the request count and latency of every response."""

    def __init__(self, app, state: ServerState) -> None:
        self.app, self.state = app, state

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state, path, method = self.state, scope["path"], scope["method"]
        route = path if path in ROUTES else "unmatched"  # unknown paths: one label
        started, status = time.perf_counter(), 500

        async def send_and_note(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        limited = path in LIMITED_ROUTES
        try:
            refusal = self._refusal(scope) if limited else None
            if refusal is not None:
                await refusal(scope, receive, send_and_note)
                return
            if limited:
                state.in_flight += 1
                state.metrics.set_in_flight(state.in_flight)
            try:
                await self.app(scope, receive, send_and_note)
            finally:
                if limited:
                    state.in_flight -= 1
                    state.metrics.set_in_flight(state.in_flight)
        finally:
            state.metrics.observe_request(route, method, status,
                                          time.perf_counter() - started)

    def _refusal(self, scope) -> JSONResponse | None:
        state = self.state
        if state.in_flight >= state.max_concurrency:
            return error_response(503, f"the server is saturated ({state.max_concurrency} "
                                       f"requests in flight, its max_concurrency); retry "
                                       f"later", headers={"Retry-After": "1"})
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    size = int(value)
                except ValueError:
                    return error_response(400, f"bad Content-Length header {value[:20]!r}")
                if size > state.max_body_bytes:
                    return error_response(413, f"the request body has {size} bytes; the "
                                               f"limit is {state.max_body_bytes}")
        return None


def _routes(state: ServerState) -> list[Route]:
    runner = state.runner

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> JSONResponse:
        if not state.ready:
            return error_response(503, "not ready: the model is loading or warming up, or "
                                       "the server is shutting down")
        return JSONResponse({"status": "ready"})

    async def metrics(request: Request) -> Response:
        return Response(state.metrics.render(), media_type=CONTENT_TYPE)

    schema = openapi_schema(runner.inputs, state.model_class, runner.generates,
                            _version())

    async def openapi(request: Request) -> JSONResponse:
        return JSONResponse(schema)

    async def model_info(request: Request) -> JSONResponse:
        return JSONResponse({"model_class": state.model_class,
                             "inputs": [spec.to_json() for spec in runner.inputs],
                             "generates": runner.generates,
                             "max_batch_size": state.batcher.max_batch_size})

    async def predict(request: Request) -> JSONResponse:
        batch = decode_inputs(await read_json(request, state.max_body_bytes), runner.inputs)
        outputs = await state.batcher.submit(batch)
        return JSONResponse({"outputs": encode_outputs(outputs, batch.unbatched)})

    async def generate(request: Request) -> Response:
        if not runner.generates:
            raise ServeError(404, f"/v1/generate: the served model ({state.model_class}) "
                                  f"does not generate text; use /v1/predict")
        if not state.ready:
            raise ServeError(503, "the server is not ready (starting or shutting down)")
        body = await read_json(request, state.max_body_bytes)
        return await generate_endpoint(body, runner, state.metrics)

    return [Route("/healthz", healthz), Route("/readyz", readyz), Route("/metrics", metrics),
            Route("/openapi.json", openapi), Route("/v1/model", model_info),
            Route("/v1/predict", predict, methods=["POST"]),
            Route("/v1/generate", generate, methods=["POST"])]


def _version() -> str:
    from .. import __version__
    return __version__


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    if exc.status_code == 404:
        message = (f"no route {request.url.path!r}; the routes are "
                   f"{', '.join(ROUTES)}")
    elif exc.status_code == 405:
        allowed = (exc.headers or {}).get("Allow", "")
        message = f"{request.method} is not allowed on {request.url.path}; use {allowed}"
    else:
        message = str(exc.detail)
    return error_response(exc.status_code, message, headers=exc.headers)


async def _serve_error(request: Request, exc: ServeError) -> JSONResponse:
    return error_response(exc.status, exc.message)


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    return error_response(500, f"internal error: {type(exc).__name__}: {exc}")


def create_app(model, *, inputs: Sequence[InputSpec] | None = None, example_inputs=None,
               max_batch_size: int = 32, max_wait_ms: float = 5.0,
               max_body_bytes: int = 8 << 20, max_concurrency: int = 256,
               allow_import: bool = False, warmup: bool = True) -> Starlette:
    """The ASGI app serving a model: run it with uvicorn (``ember serve`` does, or
    ``uvicorn.run(app, host="127.0.0.1")``), or test it with Starlette's TestClient.

    Routes: ``POST /v1/predict`` (JSON tensors in and out, batched dynamically),
    ``POST /v1/generate`` (for ``ember.models.GPT``), ``GET /healthz``, ``/readyz``,
    ``/metrics`` (Prometheus), ``/openapi.json``, ``/v1/model``. Every error is a 4xx or
    5xx with ``{"error": message}``.

    Args:
        model: a model directory (:func:`ember.save_pretrained`) or an ``nn.Module``.
        inputs, example_inputs: the declared inputs of a module passed directly (a
            directory declares its own): :class:`~ember.pretrained.InputSpec` s, or
            example tensors (dim 0 dynamic). Not needed for ``ember.models.GPT``.
        max_batch_size: the most examples in one forward (1: no batching).
        max_wait_ms: how long the first request of a batch waits for others.
        max_body_bytes: larger request bodies get 413.
        max_concurrency: predict and generate requests in flight at once; more get 503.
        allow_import: accept a directory whose model is built by ``import:`` (runs code
            from that module).
        warmup: run one forward at startup; ``/readyz`` says ready after it.

    >>> app = ember.serve.create_app("digits_cnn", max_batch_size=64, max_wait_ms=2)
    """
    for name, value, low in (("max_batch_size", max_batch_size, 1),
                             ("max_body_bytes", max_body_bytes, 1),
                             ("max_concurrency", max_concurrency, 1)):
        if not isinstance(value, int) or value < low:
            raise EmberError(f"create_app: {name} must be an int >= {low}, got {value!r}")
    if isinstance(model, (str, os.PathLike)):
        config = read_pretrained_config(model, allow_import)
        module, specs, model_class = (load_pretrained(model, allow_import), config.inputs,
                                      config.model_class)
    else:
        module, model_class = model, type(model).__name__
        specs = tuple(inputs) if inputs is not None else declare_inputs(model, example_inputs)
    from .runner import ModelRunner
    runner = ModelRunner(module, specs)
    metrics = Metrics()
    batcher = DynamicBatcher(runner.run_batch, None, metrics,
                             max_batch_size if runner.batchable else 1, max_wait_ms)
    state = ServerState(runner, batcher, metrics, model_class, max_body_bytes,
                        max_concurrency)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        import asyncio
        runner.start()
        batcher.executor = runner.executor
        await batcher.start()
        if warmup:
            await asyncio.get_running_loop().run_in_executor(runner.executor, runner.warmup)
        state.ready = True
        try:
            yield
        finally:  # uvicorn has let in-flight requests finish; answer any still queued
            state.ready = False
            await batcher.close()
            runner.stop()

    app = Starlette(routes=_routes(state), lifespan=lifespan,
                    middleware=[Middleware(LimitsAndMetrics, state=state)],
                    exception_handlers={HTTPException: _http_error, ServeError: _serve_error,
                                        Exception: _internal_error})
    app.state.ember = state
    return app
