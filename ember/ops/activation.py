"""Activation functions and softmax, as in ``torch.nn.functional``.

Pointwise activations are fused primitives built from one table row each: the forward
(NumPy-style, on the backend's ``xp``), the first derivative (``xp``) and the second
derivative (ember ops). Each registers two ops, ``gelu`` and ``gelu_backward``
(``g * f'(x)``); the backward op's own VJP uses the second derivative, so gradients of
any order work while a first-order backward stays one fused kernel. Softmax and
log-softmax follow the same pattern with their own backward ops.

Half-precision inputs compute in float32 and round once, as PyTorch's CPU kernels do.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, EmberTypeError
from ..tensor import Tensor
from . import elementwise as ew
from .elementwise import _sigmoid_forward as _sigmoid, erf_kernel
from .inplace import inplace
from .reduce import sum as _sum
from .registry import AbstractValue, apply, register
from .shape import chunk, reshape, wrap_dim

__all__ = ["softmax", "log_softmax", "softmin", "gelu", "silu", "mish", "relu", "relu_",
           "relu6", "leaky_relu", "leaky_relu_", "elu", "elu_", "selu", "selu_", "celu",
           "celu_", "softplus", "softsign", "hardswish", "hardsigmoid", "hardtanh",
           "hardtanh_", "hardshrink", "softshrink", "tanhshrink", "threshold", "threshold_",
           "logsigmoid", "sigmoid", "tanh", "glu", "prelu", "rrelu", "rrelu_"]


# Shared machinery --------------------------------------------------------------------
def _is_half(a) -> bool:
    return a.dtype.itemsize == 2 and a.dtype.kind in "fV"


def _upcast(a):
    return a.astype(np.float32) if _is_half(a) else a


def _same_infer(a, *rest, **params):
    return AbstractValue(a.shape, a.dtype)


def _pointwise(name, f, df, d2f, aux=False):
    """Register ``name`` (y = f(x)) and ``name_backward`` (g * f'(x)).

    ``f(xp, x, **params)`` and ``df(xp, x, **params)`` work on arrays (float32 for half
    inputs); ``d2f(x, **params)`` gives f''(x) as an ember tensor, or None where f is
    piecewise linear (no second-order term). With ``aux``, f returns (y, aux) and the
    derivative gets ``df(xp, x, aux, **params)``: a value the forward computed anyway
    (kept as a hidden second output, never exposed, so never modified in place).
    """
    def forward(xp, a, **params):
        dtypes = (a.dtype, _accumulate(a.dtype)) if aux else (a.dtype,)
        out = _by_chunks(xp, lambda x: f(xp, x, **params), (a,), dtypes)
        return out if aux else out[0]

    def backward_forward(xp, g, a, *kept, **params):
        def kernel(g, x, *kept):
            d = df(xp, x, *kept, **params)
            d *= g
            return d
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

    infer = _aux_infer if aux else _same_infer
    op = register(name, forward, vjp, infer=infer, n_outputs=2 if aux else 1,
                  saves_outputs=aux)
    backward_op = register(name + "_backward", backward_forward, backward_vjp,
                           infer=_same_infer)
    return op


def _aux_infer(a, **params):
    acc = dt.float32 if a.dtype.itemsize == 2 else a.dtype
    return AbstractValue(a.shape, a.dtype), AbstractValue(a.shape, acc)


def _accumulate(dtype):
    return np.dtype(np.float32) if dtype.itemsize == 2 and dtype.kind in "fV" else dtype


_CHUNK = 32768  # elements per piece: a kernel's few temporaries stay in the L2 cache


def _by_chunks(xp, kernel, arrays, dtypes):
    """``kernel`` (same-shape arrays -> array or tuple of arrays) applied to ``arrays``
    (upcast from half precision), in cache-sized pieces of the flattened arrays; returns
    the results cast to ``dtypes``, in the arrays' shape. Kernels chain many NumPy
    passes, which run several times faster on pieces that stay in the cache."""
    shape = arrays[0].shape
    flat = [_upcast(xp.ascontiguousarray(a)).reshape(-1) for a in arrays]  # 0-d as (1,)
    size = flat[0].size
    if size <= 2 * _CHUNK:
        results = kernel(*flat)
        results = results if isinstance(results, tuple) else (results,)
        return tuple(r.astype(d, copy=False).reshape(shape) for r, d in zip(results, dtypes))
    outs = [xp.empty(size, dtype=d) for d in dtypes]
    for start in range(0, size, _CHUNK):
        piece = kernel(*(a[start:start + _CHUNK] for a in flat))
        for out, part in zip(outs, piece if isinstance(piece, tuple) else (piece,)):
            out[start:start + _CHUNK] = part
    return tuple(out.reshape(shape) for out in outs)


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


# Softmax and log-softmax --------------------------------------------------------------
def _row_sum(xp, a, dim):
    """``a.sum(dim, keepdims=True)``; over the last dim of a C-contiguous array as a
    product with a ones vector (BLAS), several times faster than NumPy's reduction over
    many short rows."""
    if a.ndim and dim in (-1, a.ndim - 1) and a.flags.c_contiguous:
        return xp.matmul(a, xp.ones((a.shape[-1], 1), a.dtype))
    return xp.sum(a, axis=dim, keepdims=True)


def _softmax_forward(xp, a, dim):
    x = _upcast(a)
    e = x - xp.max(x, axis=dim, keepdims=True, initial=-np.inf)
    xp.exp(e, out=e)
    e /= _row_sum(xp, e, dim)
    return e.astype(a.dtype, copy=False)


def _log_softmax_forward(xp, a, dim):
    x = _upcast(a)
    z = x - xp.max(x, axis=dim, keepdims=True, initial=-np.inf)
    z -= xp.log(_row_sum(xp, xp.exp(z), dim))
    return z.astype(a.dtype, copy=False)


def _softmax_backward_forward(xp, g, y, dim):
    # d/dx: y * (g - sum(g * y))
    g32, y32 = _upcast(g), _upcast(y)
    gy = g32 * y32
    xp.subtract(g32, _row_sum(xp, gy, dim), out=gy)
    gy *= y32
    return gy.astype(g.dtype, copy=False)


def _softmax_backward_vjp(n, gg):
    g, y = n.saved_inputs()
    dim = n.params["dim"]
    dg = apply(_SOFTMAX_BACKWARD, gg, y, dim=dim) if n.edges[0] else None
    dy = None
    if n.edges[1]:
        s = _sum(g * y, dim, keepdim=True)
        dy = gg * (g - s) - g * _sum(gg * y, dim, keepdim=True)
    return dg, dy


def _log_softmax_backward_forward(xp, g, y, dim):
    # d/dx: g - exp(y) * sum(g)
    g32 = _upcast(g)
    out = xp.exp(_upcast(y))
    out *= xp.sum(g32, axis=dim, keepdims=True)
    xp.subtract(g32, out, out=out)
    return out.astype(g.dtype, copy=False)


def _log_softmax_backward_vjp(n, gg):
    g, y = n.saved_inputs()
    dim = n.params["dim"]
    p = ew.exp(y)
    dg = gg - _sum(gg * p, dim, keepdim=True) if n.edges[0] else None
    dy = -gg * p * _sum(g, dim, keepdim=True) if n.edges[1] else None
    return dg, dy


_SOFTMAX = register("softmax", _softmax_forward,
                    lambda n, g: apply(_SOFTMAX_BACKWARD, g, n.output(0), dim=n.params["dim"]),
                    saves_inputs=False, saves_outputs=True, infer=_same_infer)
_SOFTMAX_BACKWARD = register("softmax_backward", _softmax_backward_forward,
                             _softmax_backward_vjp, infer=_same_infer)
_LOG_SOFTMAX = register(
    "log_softmax", _log_softmax_forward,
    lambda n, g: apply(_LOG_SOFTMAX_BACKWARD, g, n.output(0), dim=n.params["dim"]),
    saves_inputs=False, saves_outputs=True, infer=_same_infer)
_LOG_SOFTMAX_BACKWARD = register("log_softmax_backward", _log_softmax_backward_forward,
                                 _log_softmax_backward_vjp, infer=_same_infer)


def _softmax_dim(name: str, ndim: int, stacklevel: int) -> int:
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the "
                  "call to include dim=X as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def _softmax_like(op, name, input, dim, stacklevel, dtype):
    if dtype is not None:
        input = ew.cast(input, dt.as_dtype(dtype))
    x = _float_input(name, input)
    if dim is None:
        dim = _softmax_dim(name, x.ndim, stacklevel + 1)
    d = wrap_dim(dim, max(x.ndim, 1), name)
    if x.ndim == 0:
        return reshape(apply(op, reshape(x, (1,)), dim=0), ())
    return apply(op, x, dim=d)


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype=None) -> Tensor:
    """exp(x) / sum(exp(x)) along ``dim``, computed without overflow. With ``dtype``,
    the input is cast to it first.

    >>> F.softmax(ember.tensor([1.0, 2.0, 3.0]), dim=0)
    tensor([0.0900, 0.2447, 0.6652])
    """
    return _softmax_like(_SOFTMAX, "softmax", input, dim, _stacklevel, dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
                dtype=None) -> Tensor:
    """log(softmax(x)) along ``dim``, computed as x - logsumexp(x) (stable).

    >>> F.log_softmax(ember.tensor([0.0, 0.0]), dim=0)
    tensor([-0.6931, -0.6931])
    """
    return _softmax_like(_LOG_SOFTMAX, "log_softmax", input, dim, _stacklevel, dtype)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype=None) -> Tensor:
    """softmax(-x) along ``dim``.

    >>> F.softmin(ember.tensor([1.0, 2.0]), dim=0)
    tensor([0.7311, 0.2689])
    """
    if dtype is not None:
        input = ew.cast(input, dt.as_dtype(dtype))
    return _softmax_like(_SOFTMAX, "softmin", ew.neg(_float_input("softmin", input)), dim,
                         _stacklevel, None)


# Pointwise activations: forward, f', f'' ---------------------------------------------
_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_K = math.sqrt(2.0 / math.pi)  # the tanh approximation's constants
_TANH_C = 0.044715


def _gelu_f(xp, x, approximate):
    """(gelu(x), aux): aux is Phi(x) (exact) or the tanh term (approximate), which the
    derivative reuses."""
    if approximate == "tanh":
        t = x * x
        t *= _TANH_C * _TANH_K
        t += _TANH_K
        t *= x
        xp.tanh(t, out=t)
        y = t + 1
        y *= x
        y *= 0.5
        return y, t
    t = _phi(xp, x)
    return t * x, t


# Phi(x) = (1 + tanh(y)) / 2 with y = atanh(erf(x / sqrt 2)) = x R(x^2): R is smooth and
# grows without bound, so a degree-6 polynomial (a weighted least-squares fit, leading
# coefficient positive) gives Phi within 1e-7 in float32 everywhere, with no clipping.
_PHI_R = tuple(np.float32(c) for c in (
    1.7564210953742974e-09, -1.3227100488650476e-07, 3.9648270531567506e-06,
    -5.5306580794316085e-05, -3.259418739273727e-05, 0.03633308396756028,
    0.7978849415758974))


def _phi(xp, x):
    """The standard normal CDF (exact in float64, else within 1e-7)."""
    if x.dtype == np.float64:
        t = _erf(xp, x * _SQRT_HALF)
        t += 1
        t *= 0.5
        return t
    with np.errstate(over="ignore"):  # huge |x|: y overflows to +-inf, tanh gives +-1
        u2 = x * x
        y = u2 * _PHI_R[0]
        for c in _PHI_R[1:-1]:
            y += c
            y *= u2
        y += _PHI_R[-1]
        y *= x
    xp.tanh(y, out=y)
    y *= np.float32(0.5)
    y += np.float32(0.5)
    return y


def _gelu_df(xp, x, aux, approximate):
    if approximate == "tanh":
        # 0.5 * (1 + t) + 0.5 * x * (1 - t^2) * k * (1 + 3 c x^2)
        d = x * x
        d *= 3 * _TANH_C * _TANH_K
        d += _TANH_K
        d *= x
        d *= 1 - aux * aux
        d += aux
        d += 1
        d *= 0.5
        return d
    d = x * x  # Phi(x) + x * phi(x)
    d *= -0.5
    xp.exp(d, out=d)
    d *= _INV_SQRT_2PI
    d *= x
    d += aux
    return d


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
    # 0 below -3, x / 3 + 0.5 on [-3, 3], 1 above 3
    d = x / 3
    d += 0.5
    d *= (x >= -3) & (x <= 3)
    d += x > 3
    return d


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
    return xp.where(x > threshold, x, xp.asarray(value).astype(x.dtype))


def _threshold_df(xp, x, threshold, value):
    return (x > threshold).astype(x.dtype)


def _logsigmoid_f(xp, x):
    out = _softplus(xp, -x)  # log(sigmoid(x)) = -softplus(-x)
    return xp.negative(out, out=out)


def _logsigmoid_d2f(x):
    s = ew.sigmoid(x)
    return -s * (1 - s)


def _linear_piece(x, **params):
    return None

_GELU = _pointwise("gelu", _gelu_f, _gelu_df, _gelu_d2f, aux=True)
_SILU = _pointwise("silu", _silu_f, _silu_df, _silu_d2f)
_MISH = _pointwise("mish", _mish_f, _mish_df, _mish_d2f)
_SOFTPLUS = _pointwise("softplus", _softplus_f, _softplus_df, _softplus_d2f)
_ELU = _pointwise("elu", _elu_f, _elu_df, _elu_d2f)
_LEAKY_RELU = _pointwise("leaky_relu", _leaky_f, _leaky_df, _linear_piece)
_HARDTANH = _pointwise("hardtanh", _hardtanh_f, _hardtanh_df, _linear_piece)
_HARDSIGMOID = _pointwise("hardsigmoid", _hardsigmoid_f, _hardsigmoid_df, _linear_piece)
_HARDSWISH = _pointwise("hardswish", _hardswish_f, _hardswish_df, _hardswish_d2f)
_SOFTSIGN = _pointwise("softsign", _softsign_f, _softsign_df, _softsign_d2f)
_TANHSHRINK = _pointwise("tanhshrink", _tanhshrink_f, _tanhshrink_df, _tanhshrink_d2f)
_HARDSHRINK = _pointwise("hardshrink", _hardshrink_f, _shrink_df, _linear_piece)
_SOFTSHRINK = _pointwise("softshrink", _softshrink_f, _shrink_df, _linear_piece)
_THRESHOLD = _pointwise("threshold", _threshold_f, _threshold_df, _linear_piece)
_LOGSIGMOID = _pointwise("log_sigmoid", _logsigmoid_f, lambda xp, x: _sigmoid(xp, -x),
                         _logsigmoid_d2f)

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


# Public functions --------------------------------------------------------------------
def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit: x * Phi(x) with the normal CDF Phi
    (``approximate='none'``; to 1e-7 in float32) or with the tanh approximation
    (``approximate='tanh'``).

    >>> F.gelu(ember.tensor([-1.0, 0.0, 1.0]))
    tensor([-0.1587,  0.0000,  0.8413])
    """
    if approximate not in ("none", "tanh"):
        raise EmberError(f"gelu: approximate argument must be either none or tanh, got "
                         f"{approximate!r}")
    return _activate(_GELU, "gelu", input, approximate=approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x) (also called swish).

    >>> F.silu(ember.tensor([0.0, 1.0]))
    tensor([0.0000, 0.7311])
    """
    return _activate(_SILU, "silu", input, inplace)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * tanh(softplus(x)).

    >>> F.mish(ember.tensor([1.0]))
    tensor([0.8651])
    """
    return _activate(_MISH, "mish", input, inplace)


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0).

    >>> F.relu(ember.tensor([-1.0, 2.0]))
    tensor([0., 2.])
    """
    if inplace:
        return input.relu_()
    return ew.relu(input)


def relu_(input: Tensor) -> Tensor:
    """In-place :func:`relu`."""
    return relu(input, inplace=True)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """x clamped to [min_val, max_val]; the gradient is 1 strictly inside, else 0.

    >>> F.hardtanh(ember.tensor([-2.0, 0.5, 2.0]))
    tensor([-1.0000,  0.5000,  1.0000])
    """
    if min_val > max_val:
        raise EmberError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val "
                         f"({max_val})")
    return _activate(_HARDTANH, "hardtanh", input, inplace, int_ok=True, min_val=min_val,
                     max_val=max_val)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """In-place :func:`hardtanh`."""
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(x, 0), 6).

    >>> F.relu6(ember.tensor([-1.0, 3.0, 8.0]))
    tensor([0., 3., 6.])
    """
    return hardtanh(input, 0.0, 6.0, inplace)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x where x > 0, else negative_slope * x.

    >>> F.leaky_relu(ember.tensor([-1.0, 2.0]), 0.1)
    tensor([-0.1000,  2.0000])
    """
    return _activate(_LEAKY_RELU, "leaky_relu", input, inplace, negative_slope=negative_slope)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """In-place :func:`leaky_relu`."""
    return leaky_relu(input, negative_slope, inplace=True)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x where x > 0, else alpha * (exp(x) - 1).

    >>> F.elu(ember.tensor([-1.0, 1.0]))
    tensor([-0.6321,  1.0000])
    """
    return _activate(_ELU, "elu", input, inplace, alpha=alpha, scale=1.0, input_scale=1.0)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place :func:`elu`."""
    return elu(input, alpha, inplace=True)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale * elu(x, alpha) with the self-normalising constants (alpha ~ 1.6733,
    scale ~ 1.0507).

    >>> F.selu(ember.tensor([1.0]))
    tensor([1.0507])
    """
    return _activate(_ELU, "selu", input, inplace, alpha=_SELU_ALPHA, scale=_SELU_SCALE,
                     input_scale=1.0)


def selu_(input: Tensor) -> Tensor:
    """In-place :func:`selu`."""
    return selu(input, inplace=True)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).

    >>> F.celu(ember.tensor([-1.0]), alpha=2.0)
    tensor([-0.7869])
    """
    if alpha == 0:
        raise EmberError("celu: ZeroDivisionError, alpha must not be 0")
    return _activate(_ELU, "celu", input, inplace, alpha=alpha, scale=1.0,
                     input_scale=1.0 / alpha)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place :func:`celu`."""
    return celu(input, alpha, inplace=True)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta * x)) / beta; linear (x) where beta * x > threshold.

    >>> F.softplus(ember.tensor([0.0]))
    tensor([0.6931])
    """
    return _activate(_SOFTPLUS, "softplus", input, beta=beta, threshold=threshold)


def softsign(input: Tensor) -> Tensor:
    """x / (1 + |x|). Integer inputs give the default float dtype.

    >>> F.softsign(ember.tensor([1.0]))
    tensor([0.5000])
    """
    return _activate(_SOFTSIGN, "softsign", _to_float(input))


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """relu6(x + 3) / 6.

    >>> F.hardsigmoid(ember.tensor([0.0]))
    tensor([0.5000])
    """
    return _activate(_HARDSIGMOID, "hardsigmoid", input, inplace)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """x * relu6(x + 3) / 6.

    >>> F.hardswish(ember.tensor([1.0]))
    tensor([0.6667])
    """
    return _activate(_HARDSWISH, "hardswish", input, inplace)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x where |x| > lambd, else 0.

    >>> F.hardshrink(ember.tensor([0.3, 0.7]))
    tensor([0.0000, 0.7000])
    """
    return _activate(_HARDSHRINK, "hardshrink", input, lambd=lambd)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """x - lambd where x > lambd, x + lambd where x < -lambd, else 0.

    >>> F.softshrink(ember.tensor([0.3, 0.7]))
    tensor([0.0000, 0.2000])
    """
    if lambd < 0:
        raise EmberError(f"softshrink: lambda must be greater or equal to 0, but found to be "
                         f"{lambd}")
    return _activate(_SOFTSHRINK, "softshrink", input, lambd=lambd)


def tanhshrink(input: Tensor) -> Tensor:
    """x - tanh(x). Integer inputs give the default float dtype.

    >>> F.tanhshrink(ember.tensor([1.0]))
    tensor([0.2384])
    """
    return _activate(_TANHSHRINK, "tanhshrink", _to_float(input))


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """x where x > threshold, else value.

    >>> F.threshold(ember.tensor([0.5, 2.0]), 1.0, -1.0)
    tensor([-1.,  2.])
    """
    return _activate(_THRESHOLD, "threshold", input, inplace, int_ok=True,
                     threshold=threshold, value=value)


_threshold = threshold  # the argument name shadows the function in threshold_


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """In-place :func:`threshold`."""
    return _threshold(input, threshold, value, inplace=True)


def logsigmoid(input: Tensor) -> Tensor:
    """log(sigmoid(x)), computed without overflow.

    >>> F.logsigmoid(ember.tensor([0.0]))
    tensor([-0.6931])
    """
    return _activate(_LOGSIGMOID, "logsigmoid", input)


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + exp(-x)).

    >>> F.sigmoid(ember.tensor([0.0]))
    tensor([0.5000])
    """
    return ew.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent.

    >>> F.tanh(ember.tensor([0.0]))
    tensor([0.])
    """
    return ew.tanh(input)


def _to_float(input):
    if isinstance(input, Tensor) and not input.dtype.is_floating_point:
        return ew.cast(input, dt.get_default_dtype())
    return input


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """Gated linear unit: a * sigmoid(b), where a and b are the two halves of ``input``
    along ``dim``.

    >>> F.glu(ember.tensor([1.0, 0.0]))
    tensor([0.5000])
    """
    x = _float_input("glu", input)
    if x.ndim == 0:
        raise EmberError("glu: does not support scalars because halving size must be even")
    d = wrap_dim(dim, x.ndim, "glu")
    if x.shape[d] % 2:
        raise EmberError(f"glu: halving dimension must be even, but dimension {d} is size "
                         f"{x.shape[d]} (input shape {tuple(x.shape)})")
    a, b = chunk(x, 2, d)
    return a * ew.sigmoid(b)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """x where x > 0, else weight * x, with one learned weight per channel (dim 1) or a
    single shared one.

    >>> F.prelu(ember.tensor([[-1.0, 2.0]]), ember.tensor([0.25]))
    tensor([[-0.2500,  2.0000]])
    """
    x = _float_input("prelu", input)
    channels = x.shape[1] if x.ndim >= 2 else 1
    if weight.numel() not in (1, channels):
        raise EmberError(f"prelu: mismatch of parameter numbers and input channel size: "
                         f"weight of shape {tuple(weight.shape)} has {weight.numel()} "
                         f"parameters, input of shape {tuple(x.shape)} has {channels} "
                         "channels")
    if weight.numel() == 1:
        w = reshape(weight, ())
    else:
        w = reshape(weight, (channels,) + (1,) * (x.ndim - 2))
    return ew.where(x > 0, x, w * x)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
          training: bool = False, inplace: bool = False) -> Tensor:
    """Randomised leaky ReLU: in training, each non-positive element is scaled by a slope
    drawn uniformly from [lower, upper] (from the default generator); in evaluation the
    slope is (lower + upper) / 2.

    >>> F.rrelu(ember.tensor([-1.0, 1.0]))
    tensor([-0.2292,  1.0000])
    """
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    x = _float_input("rrelu", input)
    from .random import default_generator
    rng = default_generator()._rng
    slopes = rng.uniform(lower, upper, tuple(x.shape)).astype(x.dtype.np)
    data = x._device.backend.asarray(slopes)
    noise = ew.where(x > 0, 1.0, Tensor._make(data, x.device))
    if inplace:
        return x.mul_(noise)
    return x * noise


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
           training: bool = False) -> Tensor:
    """In-place :func:`rrelu`."""
    return rrelu(input, lower, upper, training, inplace=True)


# Tensor methods, as in PyTorch -------------------------------------------------------
def _softmax_method(self, dim: int, dtype=None) -> Tensor:
    """Softmax along ``dim`` (see :func:`ember.nn.functional.softmax`)."""
    return softmax(self, dim, dtype=dtype)


def _log_softmax_method(self, dim: int, dtype=None) -> Tensor:
    """Log-softmax along ``dim`` (see :func:`ember.nn.functional.log_softmax`)."""
    return log_softmax(self, dim, dtype=dtype)


Tensor.softmax = _softmax_method
Tensor.log_softmax = _log_softmax_method
