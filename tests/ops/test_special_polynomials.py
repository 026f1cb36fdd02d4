"""ember.special's orthogonal polynomials (Chebyshev T/U/V/W and their shifted forms,
Hermite H/He, Laguerre L, Legendre P) against PyTorch, and against exact values."""
import math

import numpy as np
import pytest

import ember
from .optable import needs_torch, torch

special = ember.special
NAMES = ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
         "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
         "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
         "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
         "laguerre_polynomial_l", "legendre_polynomial_p")
DEGREES = np.array([-3.0, -0.5, 0.0, 0.7, 1.0, 2.0, 3.0, 5.0, 6.0, 7.0, 8.0, 9.0, 12.0, 20.0,
                    33.9, 50.0, 100.0, math.nan, math.inf, -math.inf, 1e19, -1e19])


def _arguments(name):
    rng = np.random.default_rng(len(name))
    x = np.concatenate([rng.uniform(-1.5, 1.5, 60), rng.uniform(-0.1, 1.1, 30),
                        [-1.0, 1.0, 0.0, -0.0, 0.5, -0.5, 2.0, -2.0, 1e3, -1e3, math.inf,
                         -math.inf, 1e-300]])
    return x


def _scale(values):
    """Per degree (row): the largest finite |value| over the arguments, so values near
    a polynomial's zeros are held to the accuracy of the recurrence (n eps times the
    polynomial's size), not to a relative accuracy no method has there."""
    finite = np.where(np.isfinite(values), np.abs(values), 0.0)
    return np.maximum(finite.max(axis=1, keepdims=True), 1.0)


@needs_torch
@pytest.mark.parametrize("name", NAMES)
def test_float64_values_match_torch(name):
    X, N = np.meshgrid(_arguments(name), DEGREES)
    got = getattr(special, name)(ember.tensor(X), ember.tensor(N)).numpy()
    want = getattr(torch.special, name)(torch.tensor(X), torch.tensor(N)).numpy()
    assert np.array_equal(np.isnan(got), np.isnan(want)), name
    assert np.array_equal(np.isposinf(got), np.isposinf(want)), name
    assert np.array_equal(np.isneginf(got), np.isneginf(want)), name
    finite = np.isfinite(want)
    err = np.abs(got - want) / _scale(want)
    assert err[finite].max() < 1e-13, (name, X[finite][np.argmax(err[finite])],
                                       N[finite][np.argmax(err[finite])])
    zero = (N <= -1) | ~np.isfinite(N) | (np.abs(N) >= 2.0 ** 63)  # no valid degree
    assert np.array_equal(got[zero], np.zeros_like(got[zero]))


@needs_torch
@pytest.mark.parametrize("name", NAMES)
def test_float32_and_mixed_arguments_follow_torch(name):
    x = _arguments(name)[:90].astype(np.float32)
    n = np.arange(0, 12, dtype=np.float32)[:, None]
    got = getattr(special, name)(ember.tensor(x), ember.tensor(n))
    want = getattr(torch.special, name)(torch.tensor(x), torch.tensor(n))
    assert got.dtype is ember.float32 and tuple(got.shape) == (12, 90)
    w = want.numpy().astype(np.float64)
    assert (np.abs(got.numpy() - w) / _scale(w)).max() < 2e-6, name
    # numbers and integer tensors, as PyTorch promotes them
    for args in ((ember.tensor([0.3, 0.6]), 4), (0.3, ember.tensor([2, 5])),
                 (ember.tensor([1, 2]), ember.tensor([3])),
                 (ember.tensor([0.3], dtype=ember.float32),
                  ember.tensor([4.0], dtype=ember.float64))):
        targs = [torch.tensor(a.numpy()) if isinstance(a, ember.Tensor) else a for a in args]
        e = getattr(special, name)(*args)
        t = getattr(torch.special, name)(*targs)
        assert e.dtype.name == str(t.dtype).removeprefix("torch."), (name, args)
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6, err_msg=name)


@needs_torch
@pytest.mark.parametrize("name", NAMES)
def test_no_gradient_as_in_torch(name):
    x = ember.tensor([0.25, 0.5], requires_grad=True)
    n = ember.tensor([3.0, 4.0], requires_grad=True)
    out = getattr(special, name)(x, n)
    tout = getattr(torch.special, name)(torch.tensor([0.25, 0.5], requires_grad=True),
                                        torch.tensor([3.0, 4.0], requires_grad=True))
    assert out.requires_grad is tout.requires_grad is False


def test_exact_values():
    x = ember.tensor([0.3, -0.7, 2.0], dtype=ember.float64)
    v = x.numpy()
    cases = {
        "chebyshev_polynomial_t": 4 * v ** 3 - 3 * v,
        "chebyshev_polynomial_u": 8 * v ** 3 - 4 * v,
        "chebyshev_polynomial_v": 8 * v ** 3 - 4 * v ** 2 - 4 * v + 1,
        "chebyshev_polynomial_w": 8 * v ** 3 + 4 * v ** 2 - 4 * v - 1,
        "hermite_polynomial_h": 8 * v ** 3 - 12 * v,
        "hermite_polynomial_he": v ** 3 - 3 * v,
        "laguerre_polynomial_l": (-v ** 3 + 9 * v ** 2 - 18 * v + 6) / 6,
        "legendre_polynomial_p": (5 * v ** 3 - 3 * v) / 2,
    }
    for name, want in cases.items():
        np.testing.assert_allclose(getattr(special, name)(x, 3).numpy(), want, rtol=1e-14,
                                   err_msg=name)
        shifted = "shifted_" + name
        if hasattr(special, shifted):
            np.testing.assert_allclose(getattr(special, shifted)((x + 1) / 2, 3).numpy(), want,
                                       rtol=1e-13, err_msg=shifted)
    # large degrees: the closed forms (no recurrence of 10^10 steps)
    big = special.chebyshev_polynomial_t(ember.tensor([0.5, 1.0, -1.0], dtype=ember.float64),
                                         1e10 + 1)
    np.testing.assert_allclose(big.numpy(), [math.cos((1e10 + 1) * math.acos(0.5)), 1, -1])
    assert special.chebyshev_polynomial_u(ember.tensor([1.0001], dtype=ember.float64),
                                          1e6).item() == math.inf


def test_nan_argument_gives_nan():
    for name in NAMES:
        out = getattr(special, name)(ember.tensor([math.nan, 0.25]), ember.tensor([5.0, 5.0]))
        assert math.isnan(out[0].item()) and not math.isnan(out[1].item()), name


def test_shapes_and_errors():
    out = special.legendre_polynomial_p(ember.ones(2, 1, 3), ember.tensor([[1.0], [2.0]]))
    assert tuple(out.shape) == (2, 2, 3)
    assert tuple(special.hermite_polynomial_h(ember.zeros(0, 3), 2).shape) == (0, 3)
    view = ember.tensor(np.linspace(-1, 1, 12).reshape(3, 4)).t()
    np.testing.assert_allclose(special.chebyshev_polynomial_t(view, 2).numpy(),
                               2 * view.numpy() ** 2 - 1, rtol=1e-6)
    with pytest.raises(ember.EmberTypeError, match="special.laguerre_polynomial_l"):
        special.laguerre_polynomial_l(0.5, 3)
    with pytest.raises(ember.ShapeError):
        special.hermite_polynomial_he(ember.ones(3), ember.ones(4))
    with pytest.raises(ember.EmberValueError, match="legendre_polynomial_p.*steps"):
        special.legendre_polynomial_p(ember.tensor([0.5]), 1e7)


def test_compiled_matches_eager():
    x = ember.tensor(np.linspace(-1.2, 1.2, 8))

    def fn(v):
        return sum(getattr(special, name)(v, 6) for name in NAMES)

    np.testing.assert_allclose(ember.jit(fn)(x).numpy(), fn(x).numpy(), rtol=1e-6)
