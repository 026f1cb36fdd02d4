"""Elementwise ops against PyTorch, NumPy and finite differences."""
import math

import numpy as np
import pytest

import ember
from .optable import ALL, FLOATS, INTS, OpCase, S, generate, nc, needs_torch, rand, torch

T = torch


def unary_samples(low=-2.0, high=2.0):
    def samples(rng, dtype):
        r = lambda shape: rand(rng, shape, dtype, low, high)  # noqa: E731
        return [S(r((3, 4))), S(r(())), S(r((1, 5))), S(r((0, 3))), S(nc(r((4, 3))))]
    return samples


def binary_samples(low=-2.0, high=2.0, low2=None, high2=None, scalar=True):
    low2 = low if low2 is None else low2
    high2 = high if high2 is None else high2

    def samples(rng, dtype):
        a = lambda shape: rand(rng, shape, dtype, low, high)  # noqa: E731
        b = lambda shape: rand(rng, shape, dtype, low2, high2)  # noqa: E731
        return [S(a((3, 4)), b((3, 4))), S(a((2, 3, 4)), b((4,))), S(a(()), b((2, 3))),
                S(a((5, 1)), b((1, 6))), S(a((0, 3)), b((1, 3))), S(nc(a((4, 3))), b((4, 3))),
                S(a((3,)), 1.5)][:None if scalar else -1]
    return samples


def _t(name):
    return None if T is None else getattr(T, name)


def unary(name, low=-2.0, high=2.0, dtypes=FLOATS, np_fn=None, torch_name=None, **kw):
    return OpCase(name, getattr(ember, name), _t(torch_name or name), unary_samples(low, high),
                  np_fn=np_fn, dtypes=dtypes, **kw)


def binary(name, low=-2.0, high=2.0, low2=None, high2=None, dtypes=FLOATS, np_fn=None,
           scalar=True, **kw):
    return OpCase(name, getattr(ember, name), _t(name),
                  binary_samples(low, high, low2, high2, scalar),
                  np_fn=np_fn, dtypes=dtypes, **kw)


NUMERIC = FLOATS + INTS
CASES = [
    binary("add", dtypes=NUMERIC, np_fn=np.add),
    binary("sub", dtypes=NUMERIC, np_fn=np.subtract),
    binary("mul", dtypes=NUMERIC, np_fn=np.multiply),
    binary("div", low2=0.5, high2=2.0, np_fn=np.divide),
    binary("remainder", low2=0.5, high2=2.0, gradgrad=False),
    binary("fmod", low2=0.5, high2=2.0, gradgrad=False),
    binary("pow", low=0.5, high=2.0, np_fn=np.power),
    binary("atan2", low2=0.5, high2=2.0, np_fn=np.arctan2, scalar=False),
    binary("maximum", dtypes=NUMERIC, np_fn=np.maximum, scalar=False),
    binary("minimum", dtypes=NUMERIC, np_fn=np.minimum, scalar=False),
    binary("fmax", scalar=False), binary("fmin", scalar=False),
    binary("xlogy", low2=0.5, high2=2.0),
    OpCase("floor_divide", ember.floor_divide, _t("floor_divide"),
           binary_samples(-5, 5, 1, 4), dtypes=FLOATS[:2] + INTS[:2], grad=False),
    OpCase("div_trunc", lambda a, b: ember.div(a, b, rounding_mode="trunc"),
           None if T is None else (lambda a, b: T.div(a, b, rounding_mode="trunc")),
           binary_samples(-7, 7, 1, 4), dtypes=FLOATS[:2] + INTS[:2], grad=False),
    OpCase("add_alpha", lambda a, b: ember.add(a, b, alpha=2),
           None if T is None else (lambda a, b: T.add(a, b, alpha=2)), binary_samples()),
    unary("neg", dtypes=NUMERIC[:-1], np_fn=np.negative),
    unary("abs", dtypes=NUMERIC[:-1], np_fn=np.abs),
    unary("sign", dtypes=NUMERIC), unary("exp", np_fn=np.exp), unary("exp2"),
    unary("log", 0.1, 3.0, np_fn=np.log), unary("log2", 0.1, 3.0), unary("log10", 0.1, 3.0),
    unary("log1p", -0.5, 2.0), unary("expm1"), unary("sqrt", 0.1, 3.0, np_fn=np.sqrt),
    unary("rsqrt", 0.2, 3.0), unary("square", dtypes=NUMERIC), unary("reciprocal", 0.5, 2.0),
    unary("sin", np_fn=np.sin), unary("cos"), unary("tan", -1.2, 1.2), unary("asin", -0.9, 0.9),
    unary("acos", -0.9, 0.9), unary("atan"), unary("sinh"), unary("cosh"),
    unary("tanh", np_fn=np.tanh), unary("sigmoid", -8, 8), unary("logit", 0.05, 0.95),
    unary("erf", -3, 3, np_fn=np.vectorize(math.erf, otypes=[np.float64])), unary("erfc", -3, 3),
    unary("floor", dtypes=NUMERIC), unary("ceil", dtypes=NUMERIC), unary("trunc", dtypes=NUMERIC),
    unary("round", dtypes=NUMERIC), unary("frac"), unary("relu", np_fn=lambda x: np.maximum(x, 0)),
    OpCase("round_decimals", lambda x: ember.round(x, decimals=2),
           None if T is None else (lambda x: T.round(x, decimals=2)), unary_samples(),
           dtypes=("float64",), grad=False),
    OpCase("logit_eps", lambda x: ember.logit(x, eps=0.2),
           None if T is None else (lambda x: T.logit(x, eps=0.2)), unary_samples(0.01, 0.99)),
    OpCase("clamp", lambda x: ember.clamp(x, -0.5, 0.7),
           None if T is None else (lambda x: T.clamp(x, -0.5, 0.7)), unary_samples(),
           dtypes=FLOATS + ("int64",)),
    OpCase("clamp_min_only", lambda x: ember.clamp(x, min=0.1),
           None if T is None else (lambda x: T.clamp(x, min=0.1)), unary_samples()),
    OpCase("clamp_tensor", lambda x, lo, hi: ember.clamp(x, lo, hi),
           None if T is None else (lambda x, lo, hi: T.clamp(x, lo, hi)),
           lambda rng, d: [S(rand(rng, (3, 4), d), rand(rng, (4,), d, -2, -0.5),
                             rand(rng, (3, 1), d, 0.5, 2))]),
    OpCase("where", lambda c, a, b: ember.where(c, a, b),
           None if T is None else (lambda c, a, b: T.where(c, a, b)),
           lambda rng, d: [S(rand(rng, (3, 4), "bool"), rand(rng, (3, 4), d), rand(rng, (4,), d)),
                           S(rand(rng, (2, 1), "bool"), rand(rng, (), d), rand(rng, (1, 3), d))],
           dtypes=ALL),
    OpCase("lerp", ember.lerp, _t("lerp"),
           lambda rng, d: [S(rand(rng, (3, 4), d), rand(rng, (3, 4), d), rand(rng, (4,), d)),
                           S(rand(rng, (3,), d), rand(rng, (3,), d), 0.3)]),
    OpCase("nan_to_num", ember.nan_to_num, _t("nan_to_num"),
           lambda rng, d: [S(np.array([np.nan, np.inf, -np.inf, 1.5], dtype=np.float64).astype(
               ember.dtypes.as_dtype(d).np)), S(rand(rng, (3,), d))], dtypes=FLOATS),
    OpCase("float_power", ember.float_power, _t("float_power"), binary_samples(0.5, 2.0),
           dtypes=("float32", "float64"), gradgrad=False),
]
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    CASES.append(OpCase(_name, getattr(ember, _name), _t(_name), binary_samples(-2, 2),
                        dtypes=ALL, grad=False))
for _name in ("logical_and", "logical_or", "logical_xor"):
    CASES.append(OpCase(_name, getattr(ember, _name), _t(_name), binary_samples(-1, 2, scalar=False),
                        dtypes=("float32", "int64", "bool"), grad=False))
for _name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    CASES.append(OpCase(_name, getattr(ember, _name), _t(_name),
                        binary_samples(-8, 8, scalar=False), dtypes=INTS + ("bool",), grad=False))
for _name in ("logical_not", "isnan", "isinf", "isfinite", "signbit"):
    CASES.append(OpCase(_name, getattr(ember, _name), _t(_name), unary_samples(), dtypes=ALL
                        if _name != "signbit" else NUMERIC, grad=False))
CASES.append(OpCase("bitwise_not", ember.bitwise_not, _t("bitwise_not"), unary_samples(-8, 8),
                    dtypes=INTS + ("bool",), grad=False))

generate(CASES, globals())


# Type promotion ------------------------------------------------------------------------
PROMOTE_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                  "float32", "float64"]


@needs_torch
@pytest.mark.parametrize("op", ["add", "mul", "div", "maximum", "eq", "pow", "atan2", "sub"])
def test_promotion_matches_torch(op):
    """Tensor-tensor (dimensioned and 0-d) and tensor-scalar promotion, every pair."""
    scalars = [True, 3, 2.5]
    for da in PROMOTE_DTYPES:
        for db in PROMOTE_DTYPES + scalars:
            for a_shape, b_shape in (((2,), (2,)), ((2,), ()), ((), ())):
                a = np.ones(a_shape, dtype=ember.dtypes.as_dtype(da).np)
                if isinstance(db, str):
                    b = np.ones(b_shape, dtype=ember.dtypes.as_dtype(db).np)
                    eb, tb = ember.from_numpy(b), _torch_of(b, db)
                else:
                    eb = tb = db
                ea, ta = ember.from_numpy(a), _torch_of(a, da)
                try:
                    want = getattr(T, op)(ta, tb).dtype
                except TypeError:
                    continue  # torch's signature takes no number here; ember does
                except (RuntimeError, NotImplementedError):
                    with pytest.raises(RuntimeError):
                        getattr(ember, op)(ea, eb)
                    continue
                got = getattr(ember, op)(ea, eb).dtype
                assert got.name == str(want).removeprefix("torch."), (op, da, db, a_shape, b_shape)


def _torch_of(arr, name):
    if name == "bfloat16":
        return T.from_numpy(arr.astype(np.float32)).to(T.bfloat16)
    return T.from_numpy(arr)


def test_promotion_known_values():
    i8 = ember.tensor([1, 2], dtype=ember.int8)
    assert (i8 + 5).dtype is ember.int8
    assert (i8 + 2.5).dtype is ember.float32
    assert (ember.tensor([1, 2], dtype=ember.int32) + ember.tensor(1.0, dtype=ember.float64)).dtype \
        is ember.float64
    assert (ember.ones(2, dtype=ember.float16) + ember.tensor(1.0, dtype=ember.float64)).dtype \
        is ember.float16
    assert ember.promote_types(ember.uint8, ember.int8) is ember.int16
    assert ember.promote_types(ember.float16, ember.bfloat16) is ember.float32
    assert (ember.tensor([True]) + 1).dtype is ember.int64
    assert (ember.tensor([1, 2]) / 2).dtype is ember.float32


def test_erf_float32_accuracy():
    x = np.linspace(-5, 5, 20001).astype(np.float32)
    got = ember.erf(ember.from_numpy(x)).numpy().astype(np.float64)
    want = np.vectorize(math.erf)(x.astype(np.float64))
    assert np.max(np.abs(got - want)) < 5e-7


def test_integer_pow_negative_exponent_is_an_error():
    with pytest.raises(ember.EmberError, match="pow"):
        ember.tensor([2, 3]) ** -1
