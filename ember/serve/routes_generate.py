"""``POST /v1/generate``: the request's checks, and the tokens as one JSON reply or as
server-sent events (one ``data:`` event per token, then a final one with ``done``)."""
from __future__ import annotations

import asyncio
import codecs
import json
from typing import Any, AsyncIterator

from ..errors import EmberValueError
from .errors import ServeError
from .generation import SamplingOptions, TokenGenerator
from .metrics import Metrics

__all__ = ["generate_endpoint", "GENERATE_KEYS"]

GENERATE_KEYS = ("prompt", "max_new_tokens", "temperature", "top_k", "top_p", "seed",
                 "stream")


def _number(body: dict, key: str, kinds: tuple, default):
    value = body.get(key, default)
    if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
        expected = "an integer" if kinds == (int,) else "a number"
        raise ServeError(422, f"{key!r} must be {expected} or null, got {value!r:.40}")
    return value


def _prompt(body: dict, vocab_size: int) -> tuple[list[int], bool]:
    """The prompt's token ids and whether it was text (bytes as tokens)."""
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        if vocab_size < 256:
            raise ServeError(422, f"a text prompt is encoded as bytes (token ids 0..255); "
                                  f"this model's vocab has {vocab_size} tokens: send token "
                                  f"ids")
        return list(prompt.encode("utf-8")), True
    if isinstance(prompt, list) and all(type(t) is int for t in prompt):
        return prompt, False
    raise ServeError(422, f"'prompt' must be a list of token ids or a string, got "
                          f"{json.dumps(prompt)[:60]}")


def _generator(body: Any, model) -> tuple[TokenGenerator, bool, bool]:
    if not isinstance(body, dict):
        raise ServeError(422, f"the body must be an object with 'prompt' and the options "
                              f"{list(GENERATE_KEYS[1:])}, got {type(body).__name__}")
    unknown = sorted(set(body) - set(GENERATE_KEYS))
    if unknown:
        raise ServeError(422, f"unknown keys {unknown}; expected {list(GENERATE_KEYS)}")
    prompt, is_text = _prompt(body, model.vocab_size)
    room = model.context - len(prompt)
    max_new = _number(body, "max_new_tokens", (int,), min(32, max(room, 0)))
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ServeError(422, f"'stream' must be true or false, got {stream!r:.40}")
    top_k = _number(body, "top_k", (int,), None)
    try:
        options = SamplingOptions(
            temperature=float(_number(body, "temperature", (int, float), 0.0) or 0.0),
            top_k=top_k or None,  # 0 means no cut, as in most servers
            top_p=_number(body, "top_p", (int, float), None),
            seed=_number(body, "seed", (int,), None))
        return TokenGenerator(model, prompt, max_new or 0, options), stream, is_text
    except EmberValueError as exc:
        raise ServeError(422, str(exc)) from None


async def generate_endpoint(body: Any, runner, metrics: Metrics):
    """The reply to a generate request (each step runs on the model's thread)."""
    from starlette.responses import StreamingResponse

    from .app import JSONResponse
    generator, stream, is_text = _generator(body, runner.model)
    loop = asyncio.get_running_loop()
    text_out = runner.model.vocab_size <= 256

    async def step() -> int | None:
        token = await loop.run_in_executor(runner.executor, generator.step)
        if token is not None:
            metrics.add_tokens(1)
        return token

    if not stream:
        tokens = []
        while (token := await step()) is not None:
            tokens.append(token)
        reply: dict[str, Any] = {"tokens": tokens}
        if text_out:
            reply["text"] = bytes(tokens).decode("utf-8", errors="replace")
        return JSONResponse(reply)

    async def events() -> AsyncIterator[bytes]:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        tokens = []
        while (token := await step()) is not None:
            tokens.append(token)
            event: dict[str, Any] = {"token": token}
            if text_out:
                event["text"] = decoder.decode(bytes([token]))
            yield f"data: {json.dumps(event)}\n\n".encode()
        final: dict[str, Any] = {"done": True, "tokens": tokens}
        if text_out:
            final["text"] = bytes(tokens).decode("utf-8", errors="replace")
        yield f"data: {json.dumps(final)}\n\n".encode()

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})
