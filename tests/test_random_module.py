"""ember.random: torch.random's seeding functions and fork_rng."""
import random as std_random

import numpy as np
import pytest

import ember


def test_names_are_the_top_level_ones():
    import ember.random as module
    assert module is ember.random
    for name in ("manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state"):
        assert getattr(ember.random, name) is getattr(ember, name)
    assert std_random.random is not None  # the standard library's module is untouched


def test_seeding_repeats_streams():
    gen = ember.random.manual_seed(123)
    assert isinstance(gen, ember.Generator) and ember.random.initial_seed() == 123
    a = ember.randn(4).numpy()
    ember.random.manual_seed(123)
    assert np.array_equal(ember.randn(4).numpy(), a)
    state = ember.random.get_rng_state()
    b = ember.rand(3).numpy()
    ember.random.set_rng_state(state)
    assert np.array_equal(ember.rand(3).numpy(), b)
    s = ember.random.seed()
    assert isinstance(s, int) and ember.random.initial_seed() == s


def test_fork_rng_restores_the_state():
    ember.manual_seed(7)
    with ember.random.fork_rng():
        inside = ember.rand(5).numpy()
        ember.manual_seed(99)  # even re-seeding inside is undone
        ember.randn(3)
    after = ember.rand(5).numpy()
    assert np.array_equal(after, inside)
    ember.manual_seed(7)
    assert np.array_equal(ember.rand(5).numpy(), after)
    assert ember.random.initial_seed() == 7


def test_fork_rng_restores_on_error_and_can_be_disabled():
    ember.manual_seed(3)
    expected = ember.rand(2).numpy()
    ember.manual_seed(3)
    with pytest.raises(ValueError):
        with ember.random.fork_rng(devices=[]):
            ember.rand(10)
            raise ValueError("inside")
    assert np.array_equal(ember.rand(2).numpy(), expected)
    ember.manual_seed(3)
    with ember.random.fork_rng(enabled=False):
        ember.rand(2)
    assert not np.array_equal(ember.rand(2).numpy(), expected)


def test_matches_torch_semantics():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    with torch.random.fork_rng():
        torch.rand(3)
    t_after = torch.rand(3)
    torch.manual_seed(0)
    assert torch.equal(torch.rand(3), t_after)  # the behaviour mirrored above
    assert set(ember.random.__all__) <= set(dir(torch.random))
