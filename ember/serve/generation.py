"""Text generation for ``ember.models.GPT``: greedy decoding (temperature 0) or sampling
with temperature, top-k and top-p, one token per step, with a KV cache
(:meth:`ember.models.GPT.forward_cached`) so each step computes only the new position."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from ..autograd import no_grad
from ..errors import EmberValueError
from ..ops.creation import tensor

__all__ = ["SamplingOptions", "TokenGenerator", "generate", "choose_token"]


@dataclass(frozen=True)
class SamplingOptions:
    """How the next token is chosen: ``temperature`` 0 is greedy (argmax); otherwise the
    logits are divided by it, cut to the ``top_k`` most likely tokens and to the
    smallest set whose probability reaches ``top_p`` (None: no cut), and sampled with
    a generator seeded by ``seed`` (None: fresh entropy)."""

    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.temperature < float("inf"):
            raise EmberValueError(f"generate: temperature must be a finite number >= 0, "
                                  f"got {self.temperature}")
        if self.seed is not None and self.seed < 0:
            raise EmberValueError(f"generate: seed must be an int >= 0 or None, got "
                                  f"{self.seed}")
        if self.top_k is not None and self.top_k < 1:
            raise EmberValueError(f"generate: top_k must be >= 1 or None, got {self.top_k}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise EmberValueError(f"generate: top_p must be in (0, 1] or None, got "
                                  f"{self.top_p}")


def choose_token(logits: np.ndarray, options: SamplingOptions,
                 rng: np.random.Generator) -> int:
    """The next token from one position's ``logits`` (``(vocab,)``)."""
    logits = logits.astype(np.float64)
    if options.temperature == 0:
        return int(np.argmax(logits))
    logits = logits / options.temperature
    if options.top_k is not None and options.top_k < logits.size:
        kth = np.partition(logits, -options.top_k)[-options.top_k]
        logits = np.where(logits < kth, -np.inf, logits)
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    if options.top_p is not None and options.top_p < 1:
        order = np.argsort(-probs, kind="stable")
        cumulative = np.cumsum(probs[order])
        keep = order[: int(np.searchsorted(cumulative, options.top_p)) + 1]
        kept = np.zeros_like(probs)
        kept[keep] = probs[keep]
        probs = kept / kept.sum()
    return int(rng.choice(probs.size, p=probs))


class TokenGenerator:
    """Generates tokens after ``prompt`` one :meth:`step` at a time (so a server can run
    each step on its model thread and stream it).

    Args:
        model: an ``ember.models.GPT`` (anything with ``forward_cached`` and
            ``context``).
        prompt: token ids, at least one.
        max_new_tokens: how many tokens to generate; ``len(prompt) + max_new_tokens``
            must fit the model's context.
        options: see :class:`SamplingOptions`.
        use_cache: decode incrementally with the KV cache (False: run the whole
            sequence at every step; the same tokens, slower).
    """

    def __init__(self, model, prompt: Sequence[int], max_new_tokens: int,
                 options: SamplingOptions = SamplingOptions(), use_cache: bool = True) -> None:
        prompt = [int(t) for t in prompt]
        vocab = model.vocab_size
        if not prompt:
            raise EmberValueError("generate: the prompt is empty; give at least one token")
        if any(not 0 <= t < vocab for t in prompt):
            raise EmberValueError(f"generate: prompt tokens must be in [0, {vocab}), got "
                                  f"{[t for t in prompt if not 0 <= t < vocab][:5]}")
        if max_new_tokens < 0 or len(prompt) + max_new_tokens > model.context:
            raise EmberValueError(
                f"generate: the prompt ({len(prompt)} tokens) plus max_new_tokens "
                f"({max_new_tokens}) must fit the model's context of {model.context} "
                f"tokens")
        self.model, self.options, self.use_cache = model, options, use_cache
        self.tokens = list(prompt)
        self.remaining = max_new_tokens
        self.rng = np.random.default_rng(options.seed)
        self._cache = None
        self._fed = 0  # tokens whose keys and values the cache holds

    def step(self) -> int | None:
        """Generate and return the next token (None when done)."""
        if self.remaining <= 0:
            return None
        with no_grad():
            if self.use_cache:
                new = tensor([self.tokens[self._fed:]])
                logits, self._cache = self.model.forward_cached(new, self._cache)
                self._fed = len(self.tokens)
            else:
                logits = self.model(tensor([self.tokens]))
            last = logits[0, -1].numpy()
        token = choose_token(last, self.options, self.rng)
        self.tokens.append(token)
        self.remaining -= 1
        return token

    def __iter__(self) -> Iterator[int]:
        while (token := self.step()) is not None:
            yield token


def generate(model, prompt: Sequence[int], max_new_tokens: int, temperature: float = 0.0,
             top_k: int | None = None, top_p: float | None = None, seed: int | None = None,
             use_cache: bool = True) -> list[int]:
    """The ``max_new_tokens`` tokens ``model`` generates after ``prompt``.

    >>> model = ember.models.GPT(vocab_size=256).eval()
    >>> generate(model, list(b"Hello"), max_new_tokens=8)           # greedy
    >>> generate(model, list(b"Hello"), 8, temperature=0.8, top_k=40, seed=0)
    """
    options = SamplingOptions(temperature, top_k, top_p, seed)
    return list(TokenGenerator(model, prompt, max_new_tokens, options, use_cache))
