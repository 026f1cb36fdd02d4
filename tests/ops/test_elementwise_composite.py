"""Composite elementwise ops and the in-place method variants, against PyTorch."""
import numpy as np
import pytest

import ember
from .optable import FLOATS, OpCase, S, generate, needs_torch, rand, torch
from .test_elementwise import binary_samples, unary_samples

T = torch


def _t(name):
    return None if T is None else getattr(T, name)


def _three(rng, d):
    return [S(rand(rng, (3, 4), d), rand(rng, (3, 4), d), rand(rng, (4,), d, 0.5, 2)),
            S(rand(rng, (), d), rand(rng, (2, 1), d), rand(rng, (1, 3), d, 0.5, 2))]


CASES = [
    OpCase("addcmul", lambda a, b, c: ember.addcmul(a, b, c, value=0.5),
           None if T is None else (lambda a, b, c: T.addcmul(a, b, c, value=0.5)), _three),
    OpCase("addcdiv", lambda a, b, c: ember.addcdiv(a, b, c, value=-2),
           None if T is None else (lambda a, b, c: T.addcdiv(a, b, c, value=-2)), _three),
    OpCase("clamp_min", lambda x: ember.clamp_min(x, 0.3),
           None if T is None else (lambda x: T.clamp_min(x, 0.3)), unary_samples()),
    OpCase("clamp_max", lambda x: ember.clamp_max(x, 0.3),
           None if T is None else (lambda x: T.clamp_max(x, 0.3)), unary_samples()),
    OpCase("hypot", ember.hypot, _t("hypot"), binary_samples(scalar=False), dtypes=FLOATS[:2]),
    OpCase("logaddexp", ember.logaddexp, _t("logaddexp"), binary_samples(scalar=False)),
    OpCase("logaddexp2", ember.logaddexp2, _t("logaddexp2"), binary_samples(scalar=False)),
    OpCase("deg2rad", ember.deg2rad, _t("deg2rad"), unary_samples(-400, 400)),
    OpCase("rad2deg", ember.rad2deg, _t("rad2deg"), unary_samples()),
    OpCase("copysign", ember.copysign, _t("copysign"), binary_samples(), gradgrad=False),
    OpCase("heaviside", ember.heaviside, _t("heaviside"),
           lambda rng, d: [S(np.array([-1.0, 0.0, 2.0, 0.0]).astype(rand(rng, (), d).dtype),
                             rand(rng, (4,), d))], grad=False),
    OpCase("sinc", ember.sinc, _t("sinc"), unary_samples()),
    OpCase("asinh", ember.asinh, _t("asinh"), unary_samples(-5, 5)),
    OpCase("acosh", ember.acosh, _t("acosh"), unary_samples(1.1, 5)),
    OpCase("atanh", ember.atanh, _t("atanh"), unary_samples(-0.9, 0.9)),
]
generate(CASES, globals())


def test_inverse_hyperbolics_are_accurate_at_the_extremes():
    x = ember.tensor([1e-10, -1e-10, 1e30, -1e30])
    np.testing.assert_allclose(ember.asinh(x).numpy(), np.arcsinh(x.numpy().astype(np.float64)),
                               rtol=1e-6)


# In-place variants: x.name_(*args) writes name(x, *args) into x -------------------------
INPLACE = [("add_", (2.0,)), ("sub_", (0.5,)), ("mul_", (3.0,)), ("div_", (2.0,)),
           ("pow_", (2.0,)), ("clamp_", (-0.5, 0.5)), ("neg_", ()), ("abs_", ()),
           ("exp_", ()), ("sqrt_", ()), ("sigmoid_", ()), ("tanh_", ()), ("relu_", ()),
           ("floor_", ()), ("round_", ()), ("atan2_", ("other",)), ("hypot_", ("other",)),
           ("addcmul_", ("other", "other")), ("addcdiv_", ("other", "other")),
           ("lerp_", ("other", 0.25)), ("clamp_min_", (0.2,)), ("clamp_max_", (0.2,)),
           ("eq_", ("other",)), ("lt_", (0.5,)), ("logical_not_", ()), ("cumsum_", (0,)),
           ("tril_", ()), ("triu_", (1,)), ("copysign_", (-1.0,)), ("xlogy_", ("other",)),
           ("fill_", (1.5,)), ("zero_", ())]


@needs_torch
@pytest.mark.parametrize("name,args", INPLACE, ids=[n for n, _ in INPLACE])
def test_inplace_variant_matches_torch(name, args):
    rng = np.random.default_rng(0)
    base = rng.uniform(0.1, 2.0, (3, 3)).astype(np.float32)
    other = rng.uniform(0.1, 2.0, (3, 3)).astype(np.float32)
    x = ember.tensor(base)
    t = torch.tensor(base)
    alias = x[0]  # a view: the write must reach it
    ember_args = [ember.tensor(other) if a == "other" else a for a in args]
    torch_args = [torch.tensor(other) if a == "other" else a for a in args]
    result = getattr(x, name)(*ember_args)
    getattr(t, name)(*torch_args)
    assert result is x
    np.testing.assert_allclose(x.numpy(), t.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(alias.numpy(), t.numpy()[0], rtol=1e-6, atol=1e-6)
    assert x._version[0] == 1
