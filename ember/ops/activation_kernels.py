"""The pointwise activation kernels: one table row each (forward and first derivative
on the backend's ``xp``, second derivative in ember ops), fused into two primitives per
activation (``gelu`` and ``gelu_backward``) by :func:`_pointwise`. The public functions
are in ``activation.py``.

Half-precision inputs compute in float32 and round once, as PyTorch's CPU kernels do.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import EmberTypeError
from ..tensor import Tensor
from . import activation_decompositions as ad, elementwise as ew
from .elementwise import _sigmoid_forward as _sigmoid, erf_kernel
from .inplace import inplace
from .registry import AbstractValue, apply, register


# Shared machinery --------------------------------------------------------------------
def _is_half(a) -> bool:
    return a.dtype.itemsize == 2 and a.dtype.kind in "fV"


def _upcast(a):
    return a.astype(np.float32) if _is_half(a) else a


def _same_infer(a, *rest, **params):
    return AbstractValue(a.shape, a.dtype)


def _pointwise(name, f, df, d2f, aux=False, into=False, ops=None):
    """Register ``name`` (y = f(x)) and ``name_backward`` (g * f'(x)).

    ``f(xp, x, **params)`` and ``df(xp, x, **params)`` work on arrays (float32 for half
    inputs); ``d2f(x, **params)`` gives f''(x) as an ember tensor, or None where f is
    piecewise linear (no second-order term). With ``aux``, f returns (y, aux) and the
    derivative gets ``df(xp, x, aux, **params)``: a value the forward computed anyway
    (kept as a hidden second output, never exposed, so never modified in place). With
    ``into``, f and df write their results into arrays given after their inputs
    (``f(xp, x, y[, aux], **params)``, ``df(xp, x[, aux], d, **params)``) instead of
    returning them, which spares a copy of each result. ``ops``, optional, is
    ``(f_ops(x, **params), df_ops(x[, aux], **params))``: f (with ``aux``, (y, aux)) and
    f' in ember ops, for ``ember.jit`` to fuse with the ops around them
    (:attr:`~ember.ops.registry.Op.decompose`).
    """
    def forward(xp, a, **params):
        dtypes = (a.dtype, _accumulate(a.dtype)) if aux else (a.dtype,)
        if into:
            def kernel(x, outs):
                f(xp, x, *outs, **params)
        else:
            def kernel(x, outs):
                results = f(xp, x, **params)
                for out, r in zip(outs, results if aux else (results,)):
                    out[...] = r
        out = _by_chunks(xp, kernel, (a,), dtypes)
        return out if aux else out[0]

    def backward_forward(xp, g, a, *kept, **params):
        def kernel(g, x, *kept_outs):
            *kept, (out,) = kept_outs
            if into:
                df(xp, x, *kept, out, **params)
                out *= g
            else:
                d = df(xp, x, *kept, **params)
                xp.multiply(d, g, out=out)
        return _by_chunks(xp, kernel, (g, a) + kept, (g.dtype,))[0]

    def vjp(n, grads):
        kept = (n.output(1),) if aux else ()
        g = grads[0] if aux else grads
        return apply(backward_op, g, n.saved_inputs()[0], *kept, **n.params)

    def backward_vjp(n, gg):
        g, x, *kept = n.saved_inputs()
        dg = apply(backward_op, gg, x, *kept, **n.params) if n.edges[0] else None
        dx = None
        if n.edges[1]:
            second = d2f(x, **n.params)
            dx = None if second is None else gg * g * second
        return (dg, dx) + (None,) * len(kept)

    decompose, backward_decompose = _decompositions(*ops) if ops else (None, None)
    infer = _aux_infer if aux else _same_infer
    op = register(name, forward, vjp, infer=infer, n_outputs=2 if aux else 1,
                  saves_outputs=aux, decompose=decompose)
    backward_op = register(name + "_backward", backward_forward, backward_vjp,
                           infer=_same_infer, decompose=backward_decompose)
    return op


_LOWERED = (dt.float32, dt.float64)  # half precision keeps its primitive (it upcasts)


def _decompositions(f_ops, df_ops):
    """The ``decompose`` rules of an activation and of its backward op."""
    def decompose(x, **params):
        return f_ops(x, **params) if x.dtype in _LOWERED else None

    def backward_decompose(g, x, *kept, **params):
        return df_ops(x, *kept, **params) * g if x.dtype in _LOWERED else None
    return decompose, backward_decompose


def _aux_infer(a, **params):
    acc = dt.float32 if a.dtype.itemsize == 2 else a.dtype
    return AbstractValue(a.shape, a.dtype), AbstractValue(a.shape, acc)


def _accumulate(dtype):
    return np.dtype(np.float32) if dtype.itemsize == 2 and dtype.kind in "fV" else dtype


_CHUNK = 32768  # elements per piece: a kernel's few temporaries stay in the L2 cache


def _by_chunks(xp, kernel, arrays, dtypes):
    """``kernel(*pieces, outs)`` applied to same-shape ``arrays`` (upcast from half
    precision) in cache-sized pieces of the flattened arrays; it writes its results into
    ``outs`` (arrays of a piece's shape, in the pieces' dtype). Returns the results as
    ``dtypes``, in the arrays' shape. Kernels chain many NumPy passes, which run several
    times faster on pieces that stay in the cache."""
    shape = arrays[0].shape
    flat = [_upcast(xp.ascontiguousarray(a)).reshape(-1) for a in arrays]  # 0-d as (1,)
    size = flat[0].size
    compute = flat[0].dtype
    results = [xp.empty(size, dtype=d) for d in dtypes]
    # results in another dtype (half precision) are computed in scratch pieces and cast
    direct = all(r.dtype == compute for r in results)
    step = max(size, 1) if size <= 2 * _CHUNK else _CHUNK
    scratch = None if direct else [xp.empty(step, dtype=compute) for _ in dtypes]
    for start in range(0, size, step):
        stop = min(start + step, size)
        outs = [r[start:stop] for r in results] if direct else \
            [s[:stop - start] for s in scratch]
        kernel(*(a[start:stop] for a in flat), outs)
        if not direct:
            for r, out in zip(results, outs):
                r[start:stop] = out
    return tuple(r.reshape(shape) for r in results)


def _float_input(name: str, input, int_ok: bool = False):
    if not isinstance(input, Tensor):
        raise EmberTypeError(f"{name}(): argument 'input' must be a Tensor, not "
                             f"{type(input).__name__}")
    if input.dtype.is_floating_point or (int_ok and input.dtype is not dt.bool):
        return input
    raise EmberTypeError(f"{name}: not implemented for dtype {input.dtype.name} (expected a "
                         "floating-point tensor)")


def _activate(op, name, input, inplace_: bool = False, int_ok: bool = False, **params):
    x = _float_input(name, input, int_ok)

    def run(t):
        out = apply(op, t, **params)
        return out[0] if op.n_outputs == 2 else out
    return inplace(name + "_", x, run) if inplace_ else run(x)


# The kernels below work in place on fresh buffers and avoid ``where`` with data-dependent
# masks: each NumPy pass costs about as much as an op's whole kernel in PyTorch.
def _softplus(xp, z):
    # max(z, 0) + log1p(exp(-|z|)): log(1 + exp(z)) without overflow
    e = xp.abs(z)
    xp.negative(e, out=e)
    xp.exp(e, out=e)
    xp.log1p(e, out=e)
    e += xp.maximum(z, 0)
    return e


def _erf(xp, x):
    """erf(x) (exact in float64, else ember.erf's float32 approximation)."""
    return erf_kernel(xp, x)


# Pointwise activations: forward, f', f'' ---------------------------------------------
_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_K = math.sqrt(2.0 / math.pi)  # the tanh approximation's constants
_TANH_C = 0.044715


def _gelu_f(xp, x, y, aux, approximate):
    """gelu(x) into ``y`` and into ``aux`` Phi(x) (exact) or the tanh term
    (approximate), which the derivative reuses."""
    if approximate == "tanh":
        t = xp.square(x, out=aux)
        t *= _TANH_C * _TANH_K
        t += _TANH_K
        t *= x
        xp.tanh(t, out=t)
        xp.add(t, 1, out=y)
        y *= x
        y *= 0.5
        return
    _phi(xp, x, aux)
    xp.multiply(aux, x, out=y)


# Phi(x) = (1 + tanh(y)) / 2 with y = atanh(erf(x / sqrt 2)) = x R(x^2): R is smooth and
# grows without bound, so a degree-6 polynomial (a weighted least-squares fit, leading
# coefficient positive) gives Phi within 1e-7 in float32 everywhere, with no clipping.
_PHI_R = tuple(np.float32(c) for c in (
    1.7564210953742974e-09, -1.3227100488650476e-07, 3.9648270531567506e-06,
    -5.5306580794316085e-05, -3.259418739273727e-05, 0.03633308396756028,
    0.7978849415758974))


def _phi(xp, x, out):
    """The standard normal CDF into ``out`` (exact in float64, else within 1e-7)."""
    if x.dtype == np.float64:
        xp.multiply(x, _SQRT_HALF, out=out)
        out[...] = _erf(xp, out)
        out += 1
        out *= 0.5
        return
    with np.errstate(over="ignore"):  # huge |x|: y overflows to +-inf, tanh gives +-1
        u2 = xp.square(x)
        y = xp.multiply(u2, _PHI_R[0], out=out)
        for c in _PHI_R[1:-1]:
            y += c
            y *= u2
        y += _PHI_R[-1]
        y *= x
    xp.tanh(y, out=y)
    y *= np.float32(0.5)
    y += np.float32(0.5)


def _gelu_df(xp, x, aux, d, approximate):
    if approximate == "tanh":
        # 0.5 * (1 + t) + 0.5 * x * (1 - t^2) * k * (1 + 3 c x^2)
        xp.square(x, out=d)
        d *= 3 * _TANH_C * _TANH_K
        d += _TANH_K
        d *= x
        d *= 1 - aux * aux
        d += aux
        d += 1
        d *= 0.5
        return
    xp.square(x, out=d)  # Phi(x) + x * phi(x)
    d *= -0.5
    xp.exp(d, out=d)
    d *= _INV_SQRT_2PI
    d *= x
    d += aux


def _gelu_ops(x, approximate):
    """(gelu(x), aux) in ember ops, as :func:`_gelu_f` computes them; tanh(z) is written
    2 sigmoid(2z) - 1, since generated code has a fast exp but calls libm's slow tanh."""
    if approximate == "tanh":
        t = (x * x * (_TANH_C * _TANH_K) + _TANH_K) * x
        t = ew.sigmoid(t * 2.0) * 2.0 - 1.0
        return (t + 1.0) * x * 0.5, t
    phi = _phi_ops(x)
    return phi * x, phi


def _phi_ops(x):
    """:func:`_phi` in ember ops, with (1 + tanh(y)) / 2 as sigmoid(2y)."""
    if x.dtype is dt.float64:
        return (ew.erf(x * _SQRT_HALF) + 1.0) * 0.5
    u2 = x * x
    y = u2 * _PHI_R[0]
    for c in _PHI_R[1:-1]:
        y = (y + c) * u2
    y = (y + _PHI_R[-1]) * x
    return ew.sigmoid(y * 2.0)


def _gelu_df_ops(x, aux, approximate):
    """:func:`_gelu_df` in ember ops."""
    if approximate == "tanh":
        d = (x * x * (3 * _TANH_C * _TANH_K) + _TANH_K) * x
        return (d * (1.0 - aux * aux) + aux + 1.0) * 0.5
    return ew.exp(x * x * -0.5) * _INV_SQRT_2PI * x + aux


def _gelu_d2f(x, approximate):
    if approximate == "tanh":
        t = ew.tanh(_TANH_K * (x + _TANH_C * x * x * x))
        du = _TANH_K * (1 + 3 * _TANH_C * x * x)
        d2u = 6 * _TANH_K * _TANH_C * x
        return (1 - t * t) * (du + 0.5 * x * (d2u - 2 * t * du * du))
    return _INV_SQRT_2PI * ew.exp(-0.5 * x * x) * (2 - x * x)


def _silu_f(xp, x):
    s = _sigmoid(xp, x)
    s *= x
    return s


def _silu_df(xp, x):
    s = _sigmoid(xp, x)
    d = 1 - s  # s * (1 + x * (1 - s))
    d *= x
    d += 1
    d *= s
    return d


def _silu_d2f(x):
    s = ew.sigmoid(x)
    return s * (1 - s) * (2 + x * (1 - 2 * s))


def _mish_f(xp, x):
    t = _softplus(xp, x)
    xp.tanh(t, out=t)
    t *= x
    return t


def _mish_df(xp, x):
    t = _softplus(xp, x)
    xp.tanh(t, out=t)
    d = t * t  # t + x * sigmoid(x) * (1 - t^2)
    xp.subtract(1, d, out=d)
    d *= _sigmoid(xp, x)
    d *= x
    d += t
    return d


def _mish_d2f(x):
    t = ew.tanh(ew.relu(x) + ew.log1p(ew.exp(-ew.abs(x))))
    s = ew.sigmoid(x)
    sech2 = 1 - t * t
    return s * sech2 * (2 + x * (1 - s - 2 * t * s))


def _softplus_f(xp, x, beta, threshold):
    bx = x * beta
    return xp.where(bx > threshold, x, _softplus(xp, bx) / beta)


def _softplus_df(xp, x, beta, threshold):
    bx = x * beta
    return xp.where(bx > threshold, 1, _sigmoid(xp, bx)).astype(x.dtype, copy=False)


def _softplus_d2f(x, beta, threshold):
    s = ew.sigmoid(x * beta)
    return ew.where(x * beta > threshold, 0.0, beta * s * (1 - s))


def _elu_f(xp, x, alpha, scale, input_scale):
    # max(x, 0) + alpha * expm1(min(x, 0) * input_scale), all times scale
    neg = xp.minimum(x, 0)
    neg *= input_scale
    xp.expm1(neg, out=neg)
    neg *= alpha
    neg += xp.maximum(x, 0)
    if scale != 1:
        neg *= scale
    return neg


def _elu_df(xp, x, alpha, scale, input_scale):
    neg = xp.minimum(x, 0)
    neg *= input_scale
    xp.exp(neg, out=neg)
    neg *= x <= 0
    neg *= alpha * input_scale
    neg += x > 0
    if scale != 1:
        neg *= scale
    return neg


def _elu_d2f(x, alpha, scale, input_scale):
    neg = (scale * alpha * input_scale * input_scale) * ew.exp(ew.minimum(x, 0.0) * input_scale)
    return neg * (x <= 0)


def _leaky_f(xp, x, negative_slope):
    out = xp.minimum(x, 0)
    out *= negative_slope
    out += xp.maximum(x, 0)
    return out


def _leaky_df(xp, x, negative_slope):
    d = (x <= 0).astype(x.dtype)
    d *= negative_slope
    d += x > 0
    return d


def _hardtanh_f(xp, x, min_val, max_val):
    return xp.clip(x, min_val, max_val).astype(x.dtype, copy=False)


def _hardtanh_df(xp, x, min_val, max_val):
    return ((x > min_val) & (x < max_val)).astype(x.dtype)


def _hardsigmoid_f(xp, x):
    out = x + 3
    xp.clip(out, 0, 6, out=out)
    out /= 6
    return out


def _hardsigmoid_df(xp, x):
    d = ((x > -3) & (x < 3)).astype(x.dtype)
    d /= 6
    return d


def _hardswish_f(xp, x):
    out = _hardsigmoid_f(xp, x)
    out *= x
    return out


def _hardswish_df(xp, x):
    # PyTorch's: 0 up to -3, x / 3 + 0.5 strictly between, 1 from 3 on (and at inf)
    d = x / 3
    d += 0.5
    return xp.where(x <= -3, 0, xp.where(x < 3, d, 1)).astype(x.dtype, copy=False)


def _hardswish_d2f(x):
    return ((x > -3) & (x < 3)).to(x.dtype) * (1.0 / 3.0)


def _softsign_f(xp, x):
    d = xp.abs(x)
    d += 1
    return xp.divide(x, d, out=d)


def _softsign_df(xp, x):
    d = xp.abs(x)
    d += 1
    d *= d
    return xp.reciprocal(d, out=d)


def _softsign_d2f(x):
    d = 1 + ew.abs(x)
    return -2 * ew.sign(x) / (d * d * d)


def _tanhshrink_f(xp, x):
    t = xp.tanh(x)
    return xp.subtract(x, t, out=t)


def _tanhshrink_df(xp, x):
    t = xp.tanh(x)
    t *= t
    return t


def _tanhshrink_d2f(x):
    t = ew.tanh(x)
    return 2 * t * (1 - t * t)


def _outside(xp, x, lambd):
    return (x < -lambd) | (x > lambd)


def _hardshrink_f(xp, x, lambd):
    out = x * _outside(xp, x, lambd)
    out += 0.0  # -0.0 (a negative x times False) becomes 0.0
    return out


def _softshrink_f(xp, x, lambd):
    out = xp.maximum(x - lambd, 0)  # max(x - lambd, 0) + min(x + lambd, 0)
    out += xp.minimum(x + lambd, 0)
    return out


def _shrink_df(xp, x, lambd):
    return _outside(xp, x, lambd).astype(x.dtype)


def _threshold_f(xp, x, threshold, value):
    # PyTorch's test is x <= threshold, so NaN passes through
    return xp.where(x <= threshold, xp.asarray(value).astype(x.dtype), x)


def _threshold_df(xp, x, threshold, value):
    return (~(x <= threshold)).astype(x.dtype)


def _logsigmoid_f(xp, x):
    out = _softplus(xp, -x)  # log(sigmoid(x)) = -softplus(-x)
    return xp.negative(out, out=out)


def _logsigmoid_d2f(x):
    s = ew.sigmoid(x)
    return -s * (1 - s)


def _linear_piece(x, **params):
    return None

_GELU = _pointwise("gelu", _gelu_f, _gelu_df, _gelu_d2f, aux=True, into=True,
                   ops=(_gelu_ops, _gelu_df_ops))
_SILU = _pointwise("silu", _silu_f, _silu_df, _silu_d2f, ops=(ad.silu_ops, ad.silu_df_ops))
_MISH = _pointwise("mish", _mish_f, _mish_df, _mish_d2f, ops=(ad.mish_ops, ad.mish_df_ops))
_SOFTPLUS = _pointwise("softplus", _softplus_f, _softplus_df, _softplus_d2f,
                       ops=(ad.softplus_ops, ad.softplus_df_ops))
_ELU = _pointwise("elu", _elu_f, _elu_df, _elu_d2f, ops=(ad.elu_ops, ad.elu_df_ops))
_LEAKY_RELU = _pointwise("leaky_relu", _leaky_f, _leaky_df, _linear_piece,
                         ops=(ad.leaky_relu_ops, ad.leaky_relu_df_ops))
_HARDTANH = _pointwise("hardtanh", _hardtanh_f, _hardtanh_df, _linear_piece,
                       ops=(ad.hardtanh_ops, ad.hardtanh_df_ops))
_HARDSIGMOID = _pointwise("hardsigmoid", _hardsigmoid_f, _hardsigmoid_df, _linear_piece,
                          ops=(ad.hardsigmoid_ops, ad.hardsigmoid_df_ops))
_HARDSWISH = _pointwise("hardswish", _hardswish_f, _hardswish_df, _hardswish_d2f,
                        ops=(ad.hardswish_ops, ad.hardswish_df_ops))
_SOFTSIGN = _pointwise("softsign", _softsign_f, _softsign_df, _softsign_d2f)
_TANHSHRINK = _pointwise("tanhshrink", _tanhshrink_f, _tanhshrink_df, _tanhshrink_d2f)
_HARDSHRINK = _pointwise("hardshrink", _hardshrink_f, _shrink_df, _linear_piece)
_SOFTSHRINK = _pointwise("softshrink", _softshrink_f, _shrink_df, _linear_piece)
_THRESHOLD = _pointwise("threshold", _threshold_f, _threshold_df, _linear_piece)
_LOGSIGMOID = _pointwise("log_sigmoid", _logsigmoid_f, lambda xp, x: _sigmoid(xp, -x),
                         _logsigmoid_d2f)

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


