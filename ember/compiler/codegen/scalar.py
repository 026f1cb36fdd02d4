"""How each fusible registry op computes one element, as a C expression.

The table is shared by every renderer of fused kernels: C and CUDA C spell scalar math the
same way (``expf``, ``a < b ? a : b``), so a CUDA renderer reuses it and only changes the
loops around it. A rule gets the operands' C expressions (plain variable names), their
dtypes, the result's dtype and the op's parameters, and returns the expression, or None
when it cannot express that case (the op then stays a registry op, run by NumPy).

Every rule reproduces the op's NumPy forward element by element: the same operations in
the same order and precision (float32 math stays float32), NaN propagating where NumPy
propagates it. The one exception is float32 ``exp`` (and ``sigmoid``, which uses it): it
calls :data:`PRELUDE`'s ``ember_expf``, a polynomial within 1 ulp of the exact result
(NumPy's own SIMD ``exp`` is within 2) that the C compiler vectorises, where libm's
``expf`` is one call per element, several times slower.
"""
from __future__ import annotations

import math

import numpy as np

# C spelling of each dtype a fused kernel can hold (half types stay in NumPy).
C_TYPES = {"float32": "float", "float64": "double", "int8": "int8_t", "int16": "int16_t",
           "int32": "int32_t", "int64": "int64_t", "uint8": "uint8_t", "bool": "uint8_t"}

_FLOATS = ("float32", "float64")
_NUMBERS = _FLOATS + ("int8", "int16", "int32", "int64", "uint8")


def c_type(dtype) -> str:
    """The C type holding one element of ``dtype``."""
    return C_TYPES[dtype.name]


def literal(value, dtype) -> str:
    """``value`` as an exact C literal of ``dtype`` (hex floats: no decimal rounding)."""
    name = dtype.name
    if name == "bool":
        return "1" if value else "0"
    if name in _FLOATS:
        value = float(value)
        suffix = "f" if name == "float32" else ""
        if math.isnan(value):
            return f"(({c_type(dtype)})NAN)"
        if math.isinf(value):
            return f"(({c_type(dtype)}){'-' if value < 0 else ''}INFINITY)"
        return f"({value.hex()}{suffix})"
    value = int(value)
    if name == "int64":
        # INT64_MIN has no literal of its own; (-x - 1) spells it portably
        return f"((int64_t){value}LL)" if value > -2 ** 63 else "(-9223372036854775807LL - 1)"
    return f"(({c_type(dtype)}){value})"


def expf_source(qualifiers: str, as_int, as_float) -> str:
    """The definition of ``ember_expf`` for a renderer: its function ``qualifiers`` and
    how it spells a float's bits as an int32 (``as_int``) and back (``as_float``). The
    arithmetic is the same everywhere, so every renderer gives the same bits.

    exp(x) in float32, within 1 ulp, as code the compiler vectorises: exp(x) = 2^k exp(r)
    with k = round(x / ln 2), r = x - k ln 2 (ln 2 in two parts), exp(r) by its Taylor
    polynomial (Cephes' coefficients) and 2^k as two exponent fields, so that results
    down to the smallest subnormal round once. The products and sums are fused
    multiply-adds (``fmaf``: one instruction where the CPU has FMA, as on every x86 since
    2013, every ARM64 and every GPU), which makes the reduction exact and the whole
    function about 1.6 times faster than separate products and sums.

    Below -104 the result is 0 by a select, not computed: computing it there (a masked
    softmax's -inf, half of every causal attention row) goes through subnormal
    products, which x86 CPUs finish in microcode (a masked softmax ran twice as slow)."""
    return f"""\
{qualifiers} float ember_expf(float x)
{{
    const float round_big = 0x1.8p23f;  /* t = x / ln 2 + round_big keeps k in its low bits */
    float c = x > 0x1.62e430p6f ? 0x1.62e430p6f : x;  /* above: +inf */
    const float keep = c < -0x1.ap6f ? 0.0f : 1.0f;    /* below: 0 (NaN stays NaN) */
    c = c < -0x1.ap6f ? 0.0f : c;
    const float t = fmaf(c, 0x1.715476p0f, round_big);
    const float k = t - round_big;
    float r = fmaf(-k, 0x1.62e400p-1f, c);
    r = fmaf(-k, 0x1.7f7d1cp-20f, r);
    float p = 0x1.a26762p-13f;
    p = fmaf(p, r, 0x1.6d0f6cp-10f);
    p = fmaf(p, r, 0x1.1112fcp-7f);
    p = fmaf(p, r, 0x1.5554e8p-5f);
    p = fmaf(p, r, 0x1.555556p-3f);
    p = fmaf(p, r, 0x1.000000p-1f);
    p = fmaf(p * r, r, r) + 1.0f;
    const int32_t k_int = {as_int("t")} - 0x4b400000, half = k_int >> 1;
    const float e = p * {as_float("(half + 127) << 23")} * {as_float("(k_int - half + 127) << 23")};
    return e * keep;
}}
"""


def math_source(qualifiers: str, as_int, as_float) -> str:
    """The definitions of ``ember_logf``, ``ember_tanhf`` and ``ember_log1pf`` for a
    renderer (as :func:`expf_source`, whose ``ember_expf`` ``ember_tanhf`` calls).

    log(x) in float32 as code the compiler vectorises: x = 2^e m with m in
    [sqrt(1/2), sqrt(2)) (subnormals scaled by 2^23 first), log(m) = f - f^2/2 + f^3 P(f)
    for f = m - 1 (Cephes' minimax coefficients), and e ln 2 added in two parts.
    Fused multiply-adds as in ``ember_expf``. 0 gives -inf, a negative x NaN, +inf +inf,
    NaN NaN: added to the (finite) polynomial's result, so the loop stays one vector
    stream. Within 1 ulp of the exact result (NumPy's own float32 log: within 3).
    ``ember_log1pf``: log(u) for u = 1 + x times x / (u - 1), within 2 ulp."""
    return f"""\
{qualifiers} float ember_logf(float x)
{{
    const int tiny = x < 0x1p-126f;                  /* subnormal (or not positive) */
    const float s = tiny ? x * 0x1p23f : x;
    const int32_t bits = {as_int("s")};
    int32_t e = ((bits >> 23) & 0xff) - 127 - 23 * tiny;
    float m = {as_float("(bits & 0x007fffff) | 0x3f800000")};  /* [1, 2) */
    const int high = m > 0x1.6a09e6p0f;              /* above sqrt(2): m / 2 */
    m = high ? m * 0.5f : m;
    e += high;
    const float f = m - 1.0f, z = f * f, k = (float)e;
    float p = 0x1.204376p-4f;
    p = fmaf(p, f, -0x1.d7a370p-4f);
    p = fmaf(p, f, 0x1.de4a34p-4f);
    p = fmaf(p, f, -0x1.fcba9ep-4f);
    p = fmaf(p, f, 0x1.23d37ep-3f);
    p = fmaf(p, f, -0x1.555ca0p-3f);
    p = fmaf(p, f, 0x1.999d58p-3f);
    p = fmaf(p, f, -0x1.fffff8p-3f);
    p = fmaf(p, f, 0x1.555554p-2f);
    float y = p * f * z;
    y = fmaf(k, -0x1.bd0106p-13f, y);                /* ln 2, its low part */
    y = fmaf(-0.5f, z, y);
    const float r = fmaf(k, 0x1.63p-1f, f + y);      /* ln 2, its high part */
    /* r is finite for every x: the special values are added to it, not selected
       instead of it (GCC would then move r's computation under a branch, and not
       vectorise the loop) */
    return r + (x > 0.0f ? (x == INFINITY ? INFINITY : 0.0f)
                         : (x == 0.0f ? -INFINITY : NAN));
}}

/* tanh(x) in float32: below |x| = 0.625, x + x^3 P(x^2) (Cephes' coefficients); above,
   1 - 2 / (exp(2|x|) + 1) with x's sign. Both are computed, then one is chosen, so the
   loop stays one vector stream. Within 1 ulp; NaN stays NaN; +-inf gives +-1. */
{qualifiers} float ember_tanhf(float x)
{{
    const float a = fabsf(x), z = x * x;
    float p = -0x1.75e1d4p-8f;
    p = fmaf(p, z, 0x1.52269cp-6f);
    p = fmaf(p, z, -0x1.b83c5ap-5f);
    p = fmaf(p, z, 0x1.110726p-3f);
    p = fmaf(p, z, -0x1.555532p-2f);
    const float small = copysignf(fmaf(p * z, x, x), x);  /* (-0 stays -0) */
    const float large = copysignf(1.0f - 2.0f / (ember_expf(2.0f * a) + 1.0f), x);
    return a < 0.625f ? small : large;               /* (NaN: the large form, NaN) */
}}

/* log(1 + x) in float32: log(u) for u = 1 + x, times x / (u - 1), which corrects the
   rounding of u (exact for tiny x: there u == 1 and the result is x) */
{qualifiers} float ember_log1pf(float x)
{{
    const float u = 1.0f + x, d = u - 1.0f;
    const int tiny = d == 0.0f, big = x == INFINITY;
    /* where u rounds to 1, log(u) is 0 and the result x (added, as in ember_logf, not
       selected); log1p has x's sign, which also gives -0 for -0 */
    const float factor = tiny || big ? 1.0f : x / d;
    return copysignf(fmaf(ember_logf(u), factor, tiny ? x : 0.0f), x);
}}
"""


# float32 functions with PRELUDE's own vectorisable code (libm's is a call per element)
_OWN_FLOAT32 = {"exp": "ember_expf", "log": "ember_logf", "log1p": "ember_log1pf",
                "tanh": "ember_tanhf"}


# C functions a rule may call, defined before every kernel that uses them (once, where
# several kernels share one file: see build.py's units).
PRELUDE = """\
#ifndef EMBER_PRELUDE_INCLUDED
#define EMBER_PRELUDE_INCLUDED
#include <string.h>
static inline int32_t ember_float_bits(float f)
{
    int32_t i;
    memcpy(&i, &f, sizeof i);
    return i;
}
static inline float ember_bits_float(int32_t i)
{
    float f;
    memcpy(&f, &i, sizeof f);
    return f;
}
""" + "".join(source("static inline", lambda v: f"ember_float_bits({v})",
                     lambda v: f"ember_bits_float({v})") for source in (expf_source, math_source)) \
    + "#endif\n"
PRELUDE_NAMES = tuple(_OWN_FLOAT32.values())


def _math(name: str, dtype) -> str:
    return name + "f" if dtype.name == "float32" else name


def _own(name: str, dtype) -> str:
    """The C function computing ``name`` for ``dtype``: PRELUDE's in float32, libm's."""
    return _OWN_FLOAT32[name] if dtype.name == "float32" else name


def _exp(dtype) -> str:
    return _own("exp", dtype)


def _float_unary(fn):
    return lambda a, ins, out, p: f"{_math(fn, out)}({a[0]})" if out.name in _FLOATS else None


def _arith(symbol, kinds=_NUMBERS):
    return lambda a, ins, out, p: f"({a[0]} {symbol} {a[1]})" if out.name in kinds else None


def _compare(symbol):
    return lambda a, ins, out, p: f"({a[0]} {symbol} {a[1]})"


def _max(a, b):
    # NumPy's maximum: NaN in either operand gives NaN (a != a only for NaN)
    return f"(({a} > {b} || {a} != {a}) ? {a} : {b})"


def _min(a, b):
    return f"(({a} < {b} || {a} != {a}) ? {a} : {b})"


def _when(kinds, text):
    return lambda a, ins, out, p: text(a, out) if out.name in kinds else None


def _abs(a, ins, out, p):
    if out.name in _FLOATS:
        return f"{_math('fabs', out)}({a[0]})"
    return f"({a[0]} < 0 ? -{a[0]} : {a[0]})" if out.name in _NUMBERS else None


def _sign(a, ins, out, p):
    x = a[0]
    if out.name in _FLOATS:  # signed zeros pass through; NaN gives 0, as the op's forward
        zero = literal(0, out)
        return (f"({x} > 0 ? {literal(1, out)} : ({x} < 0 ? {literal(-1, out)} : "
                f"({x} == {x} ? {x} : {zero})))")
    return f"(({x} > 0) - ({x} < 0))" if out.name in _NUMBERS and out.is_signed else None


def _rounding(fn):
    def rule(a, ins, out, p):
        if out.name in _FLOATS:
            return f"{_math(fn, out)}({a[0]})"
        return a[0] if out.name in _NUMBERS else None  # integers round to themselves
    return rule


def _round(a, ins, out, p):
    if p.get("decimals", 0) != 0:
        return None
    # rint rounds half to even, as NumPy does
    return _rounding("nearbyint")(a, ins, out, p)


def _pow(a, ins, out, p):
    if out.name not in _FLOATS:
        return None
    return f"{_math('pow', out)}({a[0]}, {a[1]})"


def _cast(a, ins, out, p):
    src, x = ins[0], a[0]
    if out.name == "bool":
        return f"({x} != 0)"
    if src.name in _FLOATS and out.name not in _FLOATS and not out.is_signed:
        return None  # float -> unsigned: NumPy goes through a signed integer first
    if src.name == "bool" and out.name in _FLOATS:
        # through an int: GCC (12) does not vectorise a loop that converts a comparison's
        # byte straight to a float (a ReLU's gradient mask ran one element at a time)
        return f"(({c_type(out)})(int32_t){x})"
    return f"(({c_type(out)}){x})"


def _xlogy(a, ins, out, p):
    if out.name not in _FLOATS:
        return None
    return f"({a[0]} == 0 ? {literal(0, out)} : {a[0]} * {_math('log', out)}({a[1]}))"


def _relu(a, ins, out, p):
    if out.name not in _NUMBERS:
        return None
    return f"({a[0]} < 0 ? {literal(0, out)} : {a[0]})"  # NaN stays NaN, as maximum(x, 0)


def _sigmoid(a, ins, out, p):
    if out.name not in _FLOATS:
        return None
    one = literal(1, out)
    return f"({one} / ({one} + {_exp(out)}(-{a[0]})))"


def _predicate(fn):
    return lambda a, ins, out, p: f"({fn}({a[0]}) != 0)" if ins[0].name in _FLOATS else None


def _logical(op):
    return lambda a, ins, out, p: f"(({a[0]} != 0) {op} ({a[1]} != 0))"


def _clamp(a, ins, out, p):
    if out.name not in _NUMBERS:
        return None
    return _min(_max(a[0], a[1]), a[2])


def _lerp(a, ins, out, p):
    if out.name not in _FLOATS:
        return None
    s, e, w = a  # (as the op's NumPy form: from the nearer end)
    return f"(({w} < 0.5 && {w} > -0.5) ? {s} + {w} * ({e} - {s}) : {e} - ({e} - {s}) * (1 - {w}))"


RULES = {
    "add": _arith("+"),
    "sub": _arith("-"),
    "mul": _arith("*"),
    "div": _arith("/", _FLOATS),
    "neg": _when(_NUMBERS, lambda a, out: f"(-{a[0]})"),
    "abs": _abs,
    "sign": _sign,
    "square": _when(_NUMBERS, lambda a, out: f"({a[0]} * {a[0]})"),
    "reciprocal": _when(_FLOATS, lambda a, out: f"({literal(1, out)} / {a[0]})"),
    "rsqrt": _when(_FLOATS, lambda a, out: f"({literal(1, out)} / {_math('sqrt', out)}({a[0]}))"),
    "relu": _relu,
    "sigmoid": _sigmoid,
    "floor": _rounding("floor"),
    "ceil": _rounding("ceil"),
    "trunc": _rounding("trunc"),
    "round": _round,
    "pow": _pow,
    "atan2": lambda a, ins, out, p: (f"{_math('atan2', out)}({a[0]}, {a[1]})"
                                     if out.name in _FLOATS else None),
    "maximum": _when(_NUMBERS, lambda a, out: _max(a[0], a[1])),
    "minimum": _when(_NUMBERS, lambda a, out: _min(a[0], a[1])),
    "fmax": _when(_FLOATS, lambda a, out: f"{_math('fmax', out)}({a[0]}, {a[1]})"),
    "fmin": _when(_FLOATS, lambda a, out: f"{_math('fmin', out)}({a[0]}, {a[1]})"),
    "clamp": _clamp,
    "lerp": _lerp,
    "xlogy": _xlogy,
    "cast": _cast,
    "where": lambda a, ins, out, p: f"({a[0]} ? {a[1]} : {a[2]})",
    "masked_fill": lambda a, ins, out, p: f"({a[1]} ? {a[2]} : {a[0]})",
    "eq": _compare("=="),
    "ne": _compare("!="),
    "lt": _compare("<"),
    "le": _compare("<="),
    "gt": _compare(">"),
    "ge": _compare(">="),
    "logical_and": _logical("&&"),
    "logical_or": _logical("||"),
    "logical_xor": _logical("!="),
    "logical_not": lambda a, ins, out, p: f"({a[0]} == 0)",
    "isnan": _predicate("isnan"),
    "isinf": _predicate("isinf"),
    "isfinite": _predicate("isfinite"),
}
for _name in ("exp2", "log2", "log10", "expm1", "sqrt", "sin", "cos",
              "tan", "asin", "acos", "atan", "sinh", "cosh", "erf"):
    RULES[_name] = _float_unary(_name)
for _name in _OWN_FLOAT32:
    RULES[_name] = (lambda name: lambda a, ins, out, p: f"{_own(name, out)}({a[0]})"
                    if out.name in _FLOATS else None)(_name)

# Reductions a fused kernel can end a loop over its last dims with: the accumulator's
# start value and its update (NaN-propagating for max and min, as NumPy's).
REDUCTIONS = ("sum", "amax", "amin")


def accumulator_type(op_name: str, out) -> str:
    """The C type a reduction's total accumulates in (float sums: double; the C
    renderer adds float32 values in float over blocks of a few hundred, which
    vectorises, and the blocks' sums in double)."""
    if op_name == "sum":
        return "double" if out.name in _FLOATS else "int64_t"
    return c_type(out)


def accumulator_start(op_name: str, out) -> str | None:
    if op_name == "sum":
        return "0"
    if out.name in _FLOATS:
        return literal(-math.inf if op_name == "amax" else math.inf, out)
    if out.name in _NUMBERS:
        info = np.iinfo(out.np)
        return literal(info.min if op_name == "amax" else info.max, out)
    return None


def accumulate(op_name: str, acc: str, x: str) -> str:
    """The statement adding element ``x`` into accumulator ``acc``. For amax and amin of
    floats, NaN is tracked apart (:func:`tracks_nan`): a plain comparison lets the
    compiler vectorise the loop."""
    if op_name == "sum":
        return f"{acc} += {x};"
    return f"{acc} = {x} {'>' if op_name == 'amax' else '<'} {acc} ? {x} : {acc};"


def tracks_nan(op_name: str, out) -> bool:
    """Whether the reduction keeps a flag of NaN seen, which makes its result NaN (as
    NumPy's amax and amin do)."""
    return op_name != "sum" and out.name in _FLOATS


# How OpenMP names each reduction's operator (``#pragma omp simd reduction(max:acc)``).
REDUCTION_OPERATORS = {"sum": "+", "amax": "max", "amin": "min"}


def expression(op_name: str, args, in_dtypes, out, params) -> str | None:
    """The C expression for one element of ``op_name`` (None when not expressible)."""
    rule = RULES.get(op_name)
    if rule is None or out.name not in C_TYPES or \
            any(d.name not in C_TYPES for d in in_dtypes):
        return None
    return rule(list(args), list(in_dtypes), out, params)


# Dtypes a renderer may hold in memory but computes in float32 (the CUDA renderer):
# every op converts its operands to float, computes as for float32 and rounds its result
# back, as NumPy's float16 loops do.
HALF_TYPES = ("float16", "bfloat16")


def compute_dtype(dtype):
    """The dtype a rule computes ``dtype`` in: float32 for the half types, else itself."""
    if dtype.name in HALF_TYPES:
        from ...dtypes import float32
        return float32
    return dtype


def can_lower(op_name: str, in_dtypes, out, params, half_types: bool = False) -> bool:
    """Whether a fused kernel can compute ``op_name`` for these dtypes and params
    (``half_types``: for a renderer that holds float16 and bfloat16 in float32)."""
    if half_types:
        if any(d.name in HALF_TYPES for d in (out, *in_dtypes)) and \
                op_name in REDUCTIONS and op_name != "sum" and in_dtypes[0] is not out:
            return False
        in_dtypes = [compute_dtype(d) for d in in_dtypes]
        out = compute_dtype(out)
    if op_name in REDUCTIONS:
        if out.name not in C_TYPES or in_dtypes[0].name not in C_TYPES:
            return False
        if op_name != "sum" and (in_dtypes[0] is not out or out.name == "bool"):
            return False
        return accumulator_start(op_name, out) is not None
    names = [f"x{i}" for i in range(len(in_dtypes))]
    return expression(op_name, names, in_dtypes, out, params) is not None


__all__ = ["C_TYPES", "HALF_TYPES", "PRELUDE", "PRELUDE_NAMES", "expf_source", "RULES",
           "REDUCTIONS", "REDUCTION_OPERATORS", "c_type", "compute_dtype", "literal", "expression",
           "can_lower", "accumulator_type", "accumulator_start", "accumulate", "tracks_nan"]
