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

import warnings

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError
from ..tensor import Tensor
from . import elementwise as ew
from .reduce import amax, sum as _sum
from ._xp import asynchronous, blas_reductions, max_keepdims
from .registry import apply, autocast_inputs, register
from .shape import chunk, reshape, wrap_dim

__all__ = ["softmax", "log_softmax", "softmin", "gelu", "silu", "mish", "relu", "relu_",
           "relu6", "leaky_relu", "leaky_relu_", "elu", "elu_", "selu", "selu_", "celu",
           "celu_", "softplus", "softsign", "hardswish", "hardsigmoid", "hardtanh",
           "hardtanh_", "hardshrink", "softshrink", "tanhshrink", "threshold", "threshold_",
           "logsigmoid", "sigmoid", "tanh", "glu", "prelu", "rrelu", "rrelu_"]


from .activation_kernels import (
    _ELU, _GELU, _HARDSHRINK, _HARDSIGMOID, _HARDSWISH, _HARDTANH, _LEAKY_RELU, _LOGSIGMOID,
    _MISH, _SELU_ALPHA, _SELU_SCALE, _SILU, _SOFTPLUS, _SOFTSHRINK, _SOFTSIGN,
    _TANHSHRINK, _THRESHOLD, _activate, _float_input, _same_infer, _upcast)


# Softmax and log-softmax --------------------------------------------------------------
def _row_sum(xp, a, dim):
    """``a.sum(dim, keepdims=True)``; over the last dim of a C-contiguous array as a
    product with a ones vector (BLAS), several times faster than NumPy's reduction over
    many short rows."""
    if a.ndim and dim in (-1, a.ndim - 1) and a.flags.c_contiguous and blas_reductions(xp):
        return xp.matmul(a, xp.ones((a.shape[-1], 1), a.dtype))
    return xp.sum(a, axis=dim, keepdims=True)


def _row_dot(xp, a, b, dim):
    """``(a * b).sum(dim, keepdims=True)`` without the product's temporary where both are
    C-contiguous and ``dim`` is the last dim."""
    if a.ndim and dim in (-1, a.ndim - 1) and a.flags.c_contiguous and b.flags.c_contiguous \
            and blas_reductions(xp):
        return xp.einsum("...i,...i->...", a, b)[..., None]
    return _row_sum(xp, a * b, dim)


# Softmax subtracts a shift c from x before exp so that nothing overflows; the textbook
# c is each row's max. One c for the whole tensor (its max) is as good where no row's
# max lies far below it, so that no row's sum of exp(x - c) comes near underflow; it
# saves a slow max over many short rows and turns a broadcast subtraction into a
# scalar one. Where some row does fall that far (or x holds inf or nan), the row maxima
# are used after all.
_MIN_ROW_SUM = float(np.exp(-20.0))


def _shifted(xp, x, dim, keep=True):
    """(x - c, the sums of exp(x - c) along ``dim``, c, exp(x - c)): c (a scalar or the
    row maxima, kept dims) keeps exp from overflowing. Without ``keep``, exp is taken
    in place and the first result is the last."""
    if x.size and dim in (-1, x.ndim - 1) and x.flags.c_contiguous and not asynchronous(xp):
        top = x.max()
        if xp.isfinite(top):
            z = x - top
            e = xp.exp(z) if keep else xp.exp(z, out=z)
            s = _row_sum(xp, e, dim)
            if s.min() >= _MIN_ROW_SUM:
                return z, s, top, e
    shift = max_keepdims(xp, x, dim)
    z = x - shift
    e = xp.exp(z) if keep else xp.exp(z, out=z)
    return z, _row_sum(xp, e, dim), shift, e


def _softmax_forward(xp, a, dim):
    _, s, _, e = _shifted(xp, _upcast(a), dim, keep=False)
    e /= s
    return e.astype(a.dtype, copy=False)


def _log_softmax_forward(xp, a, dim):
    z, s, _, _ = _shifted(xp, _upcast(a), dim)
    z -= xp.log(s)
    return z.astype(a.dtype, copy=False)


def _softmax_backward_forward(xp, g, y, dim):
    # d/dx: y * (g - sum(g * y))
    g32, y32 = _upcast(g), _upcast(y)
    out = g32 - _row_dot(xp, g32, y32, dim)
    out *= y32
    return out.astype(g.dtype, copy=False)


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
    out *= _row_sum(xp, g32, dim)
    xp.subtract(g32, out, out=out)
    return out.astype(g.dtype, copy=False)


def _log_softmax_backward_vjp(n, gg):
    g, y = n.saved_inputs()
    dim = n.params["dim"]
    p = ew.exp(y)
    dg = gg - _sum(gg * p, dim, keepdim=True) if n.edges[0] else None
    dy = -gg * p * _sum(g, dim, keepdim=True) if n.edges[1] else None
    return dg, dy


# The same four in ember ops, for ember.jit to fuse (Op.decompose): over the last dim
# only, where the reductions are a generated kernel's inner loop; shifted by the row
# maxima (a kernel reads each row's max in its first pass).
def _over_last_dim(x, dim) -> bool:
    return dim == x.ndim - 1 and x.dtype in (dt.float32, dt.float64)


def _softmax_ops(x, dim):
    if not _over_last_dim(x, dim):
        return None
    e = ew.exp(x - amax(x, dim, keepdim=True))
    return e / _sum(e, dim, keepdim=True)


def _softmax_backward_ops(g, y, dim):
    return (g - _sum(g * y, dim, keepdim=True)) * y if _over_last_dim(g, dim) else None


def _log_softmax_ops(x, dim):
    if not _over_last_dim(x, dim):
        return None
    z = x - amax(x, dim, keepdim=True)
    return z - ew.log(_sum(ew.exp(z), dim, keepdim=True))


def _log_softmax_backward_ops(g, y, dim):
    if not _over_last_dim(g, dim):
        return None
    return g - ew.exp(y) * _sum(g, dim, keepdim=True)


_SOFTMAX = register("softmax", _softmax_forward,
                    lambda n, g: apply(_SOFTMAX_BACKWARD, g, n.output(0), dim=n.params["dim"]),
                    saves_inputs=False, saves_outputs=True, infer=_same_infer,
                    decompose=_softmax_ops)
_SOFTMAX_BACKWARD = register("softmax_backward", _softmax_backward_forward,
                             _softmax_backward_vjp, infer=_same_infer,
                             decompose=_softmax_backward_ops)
_LOG_SOFTMAX = register(
    "log_softmax", _log_softmax_forward,
    lambda n, g: apply(_LOG_SOFTMAX_BACKWARD, g, n.output(0), dim=n.params["dim"]),
    saves_inputs=False, saves_outputs=True, infer=_same_infer, decompose=_log_softmax_ops)
_LOG_SOFTMAX_BACKWARD = register("log_softmax_backward", _log_softmax_backward_forward,
                                 _log_softmax_backward_vjp, infer=_same_infer,
                                 decompose=_log_softmax_backward_ops)


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
    input, weight = autocast_inputs("prelu", input, weight)
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
    from .random import _rng
    rng = _rng(None, x.device)
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
