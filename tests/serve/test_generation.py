"""The GPT's KV cache and the decoding loop: cached and uncached agree."""
import numpy as np
import pytest

import ember
from ember.errors import ShapeError
from ember.serve.generation import SamplingOptions, choose_token, generate


def test_forward_cached_matches_forward_in_chunks(gpt_model):
    idx = ember.randint(0, 256, (2, 20))
    with ember.no_grad():
        full = gpt_model(idx).numpy()
        parts, cache = [], None
        for start, end in ((0, 7), (7, 8), (8, 13), (13, 20)):  # prefill, 1 token, chunks
            logits, cache = gpt_model.forward_cached(idx[:, start:end], cache)
            parts.append(logits.numpy())
    np.testing.assert_allclose(np.concatenate(parts, axis=1), full, rtol=1e-4, atol=1e-5)
    assert len(cache) == 2 and tuple(cache[0][0].shape) == (2, 4, 20, 8)


def test_forward_cached_refuses_past_the_context(gpt_model):
    with ember.no_grad():
        _, cache = gpt_model.forward_cached(ember.zeros(1, 40, dtype=ember.int64))
        with pytest.raises(ShapeError, match="exceed the context of 48"):
            gpt_model.forward_cached(ember.zeros(1, 9, dtype=ember.int64), cache)


def test_greedy_cached_equals_uncached(gpt_model):
    prompt = list(b"Hello, ")
    cached = generate(gpt_model, prompt, 30)
    assert cached == generate(gpt_model, prompt, 30, use_cache=False)
    assert len(cached) == 30
    # the reference: argmax of the full forward, one token at a time
    tokens = list(prompt)
    with ember.no_grad():
        for _ in range(5):
            tokens.append(int(gpt_model(ember.tensor([tokens]))[0, -1].argmax()))
    assert cached[:5] == tokens[len(prompt):]


def test_sampling_is_seeded_and_cache_independent(gpt_model):
    kwargs = dict(temperature=0.9, top_k=50, top_p=0.95, seed=7)
    a = generate(gpt_model, [1, 2, 3], 20, **kwargs)
    assert a == generate(gpt_model, [1, 2, 3], 20, **kwargs)
    assert a == generate(gpt_model, [1, 2, 3], 20, use_cache=False, **kwargs)
    assert a != generate(gpt_model, [1, 2, 3], 20, **{**kwargs, "seed": 8})


def test_top_k_and_top_p_cut_the_distribution():
    logits = np.array([5.0, 4.0, 0.0, -1.0, -2.0])
    rng = np.random.default_rng(0)
    top2 = {choose_token(logits, SamplingOptions(1.0, top_k=2), rng) for _ in range(200)}
    assert top2 == {0, 1}
    # p(0) ~ 0.72, so top_p 0.5 keeps token 0 alone
    assert {choose_token(logits, SamplingOptions(1.0, top_p=0.5), rng)
            for _ in range(50)} == {0}
    assert choose_token(logits, SamplingOptions(0.0), rng) == 0


def test_bad_generation_arguments(gpt_model):
    with pytest.raises(ember.EmberValueError, match="context of 48"):
        generate(gpt_model, [1] * 40, 10)
    with pytest.raises(ember.EmberValueError, match=r"\[0, 256\)"):
        generate(gpt_model, [300], 1)
    with pytest.raises(ember.EmberValueError, match="temperature"):
        generate(gpt_model, [1], 1, temperature=-1)
    with pytest.raises(ember.EmberValueError, match="finite"):
        generate(gpt_model, [1], 1, temperature=float("inf"))
    with pytest.raises(ember.EmberValueError, match="seed must be"):
        generate(gpt_model, [1], 1, temperature=1.0, seed=-1)
