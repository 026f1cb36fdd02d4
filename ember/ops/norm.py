"""Normalisation: batch, layer, group, instance and RMS norm, L_p normalize, LRN.

Layer, batch, group, instance and RMS norm share one fused primitive family: normalise
over ``axes`` with the mean and 1/std computed once (the op's extra outputs), then an
optional broadcast affine. The VJP runs one fused backward kernel for an ordinary
backward; when a graph of the gradient is being built (``create_graph=True``), it uses
the same formula written in ember ops, so higher-order gradients work.

Half-precision inputs normalise in float32 and round once, as PyTorch's CPU kernels do.
"""
from __future__ import annotations

import math
import numbers

import ml_dtypes
import numpy as np

from .. import dtypes as dt
from ..autograd import grad_mode
from ..errors import EmberError, EmberValueError, ShapeError
from ..tensor import Tensor
from . import elementwise as ew
from ._xp import blas_reductions
from .activation import _upcast  # half precision computes in float32
from .creation import zeros
from .elementwise_composite import clamp_min
from .movement import pad
from . import norm_kernels
from .reduce import mean as _mean, norm as _norm, sum as _sum
from .registry import AbstractValue, apply, register
from .scan import cumsum
from .shape import expand, reshape

__all__ = ["batch_norm", "layer_norm", "group_norm", "instance_norm", "rms_norm",
           "normalize", "local_response_norm"]


def _rows(a, axes):
    """``a`` as a 2-D (rows, n) view when ``axes`` are its trailing dims and it is
    contiguous, else None. Reductions over the rows are then BLAS products, several
    times faster than NumPy's sums along short rows."""
    k = len(axes)
    if a.size and axes == tuple(range(a.ndim - k, a.ndim)) and a.flags.c_contiguous:
        return a.reshape(-1, math.prod(a.shape[a.ndim - k:]))
    return None


def _mean_of(xp, a, axes, b=None):
    """The mean of ``a`` (or of a * b, same shape) over ``axes``, keeping them."""
    rows = _rows(a, axes) if blas_reductions(xp) else None
    if rows is None or (b is not None and not b.flags.c_contiguous):
        return xp.mean(a if b is None else a * b, axis=axes, keepdims=True)
    n = rows.shape[1]
    if b is None:
        out = rows @ xp.full(n, 1.0 / n, dtype=rows.dtype)
    else:
        out = xp.einsum("ij,ij->i", rows, b.reshape(rows.shape))
        out /= n
    return out.reshape(tuple(1 if i in axes else s for i, s in enumerate(a.shape)))


def _reduce_to(xp, a, shape, b=None):
    """Sum ``a`` (or a * b, same shape) down to ``shape`` (which broadcasts to a.shape)."""
    lead = a.ndim - len(shape)
    if lead and tuple(a.shape[lead:]) == tuple(shape) and blas_reductions(xp):
        rows = _rows(a, tuple(range(lead, a.ndim)))  # a sum over the leading dims
        if rows is not None and (b is None or b.flags.c_contiguous):
            if b is None:
                return (xp.ones(rows.shape[0], dtype=rows.dtype) @ rows).reshape(shape)
            return xp.einsum("ij,ij->j", rows, b.reshape(rows.shape)).reshape(shape)
    if b is not None:
        a = a * b
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and a.shape[lead + i] != 1)
    out = xp.sum(a, axis=axes, keepdims=True) if axes else a
    return out.reshape(shape)


# The fused primitive ------------------------------------------------------------------
def _normalize_forward(xp, x, *affine, axes, eps, center, has_weight, has_bias):
    """(y, mean, rstd): y = (x - mean) * rstd [* weight] [+ bias]."""
    a = _upcast(x)
    if center:
        mean = _mean_of(xp, a, axes)
        y = a - mean
        var = _mean_of(xp, y, axes, y)
    else:  # RMS norm: no centring
        var = _mean_of(xp, a, axes, a)
        mean = xp.zeros_like(var)
        y = a.copy()
    rstd = 1 / xp.sqrt(var + eps)
    y *= rstd
    if has_weight:
        y *= _upcast(affine[0])
    if has_bias:
        y += _upcast(affine[-1])
    return y.astype(x.dtype, copy=False), mean, rstd


def _normalize_backward_forward(xp, g, x, mean, rstd, *weight, axes, center, param_shape,
                                need):
    """Gradients (x, weight, bias) of the normalisation; those not needed are 0-d."""
    if xp is np:  # over trailing dims (layer and RMS norm): one C pass over the rows
        done = norm_kernels.normalize_backward(g, x, mean, rstd, weight[0] if weight else None,
                                               axes, center, param_shape, need)
        if done is not None:
            return done
    # With d = x - mean, gyr = g * weight * rstd and means over ``axes``:
    # dx = gyr - rstd * mean(gy) - d * rstd^2 * mean(gyr * d) (as rstd * (gy - mean(gy)
    # - xhat * mean(gy * xhat)), with rstd folded into the inputs: fewer passes)
    g32 = xp.ascontiguousarray(_upcast(g))
    d = _upcast(x) - mean
    gr = g32 * rstd
    zero = xp.zeros((), dtype=x.dtype)
    gw = _reduce_to(xp, gr, param_shape, d).astype(x.dtype) if need[1] else zero
    gb = _reduce_to(xp, g32, param_shape).astype(x.dtype) if need[2] else zero
    gx = zero
    if need[0]:
        gyr = gr * _upcast(weight[0]) if weight else gr
        k = _mean_of(xp, gyr, axes, d)
        k *= rstd
        k *= rstd
        d *= k
        if center:
            d += _mean_of(xp, gyr, axes)
        gx = xp.subtract(gyr, d, out=gyr).astype(x.dtype, copy=False)
    return gx, gw, gb


def _normalize_vjp(n, grads):
    g = grads[0]
    params = n.params
    inputs = n.saved_inputs()
    x = inputs[0]
    weight = inputs[1] if params["has_weight"] else None
    need = (n.edges[0] is not None, params["has_weight"] and n.edges[1] is not None,
            params["has_bias"] and n.edges[-1] is not None)
    if grad_mode.is_grad_enabled():
        gx, gw, gb = _normalize_grads_composite(g, x, weight, params, need)
    else:
        extra = (weight,) if weight is not None else ()
        param_shape = tuple(inputs[-1].shape) if params["has_weight"] or params["has_bias"] \
            else ()
        gx, gw, gb = apply(_NORMALIZE_BACKWARD, g, x, n.output(1), n.output(2), *extra,
                           axes=params["axes"], center=params["center"],
                           param_shape=param_shape, need=need)
    out = [gx if need[0] else None]
    if params["has_weight"]:
        out.append(gw if need[1] else None)
    if params["has_bias"]:
        out.append(gb if need[2] else None)
    return tuple(out)


def _normalize_grads_composite(g, x, weight, params, need):
    """The same gradients in ember ops (differentiable again)."""
    axes = params["axes"]
    d = x - _mean(x, axes, keepdim=True) if params["center"] else x
    rstd = ew.rsqrt(_mean(d * d, axes, keepdim=True) + params["eps"])
    xhat = d * rstd
    gx = None
    if need[0]:
        gy = g * weight if weight is not None else g
        inner = gy - xhat * _mean(gy * xhat, axes, keepdim=True)
        if params["center"]:
            inner = inner - _mean(gy, axes, keepdim=True)
        gx = inner * rstd
    # full-shape gradients; the engine sums them down to the parameters' shapes
    return gx, (g * xhat if need[1] else None), (g if need[2] else None)


# The normalisation and its backward in ember ops, for ember.jit to fuse
# (Op.decompose): where the statistics are over the trailing dims and the affine
# parameters are of their shape (layer and RMS norm), each row's mean and variance are
# reductions in a generated kernel's inner loop.
def _fusible(x, axes, param_shapes) -> bool:
    trailing = tuple(x.shape[x.ndim - len(axes):])
    return x.numel() > 0 and x.dtype in (dt.float32, dt.float64) and \
        axes == tuple(range(x.ndim - len(axes), x.ndim)) and \
        all(tuple(shape) == trailing for shape in param_shapes)


def _normalize_ops(x, *affine, axes, eps, center, has_weight, has_bias):
    if not _fusible(x, axes, [a.shape for a in affine]):
        return None
    n = math.prod(x.shape[a] for a in axes)
    if center:
        mean = _sum(x, axes, keepdim=True) / n
        d = x - mean
    else:
        mean, d = zeros(_stat_shape(x, axes), dtype=x.dtype), x
    rstd = ew.rsqrt(_sum(d * d, axes, keepdim=True) / n + eps)
    y = d * rstd
    if has_weight:
        y = y * affine[0]
    if has_bias:
        y = y + affine[-1]
    return y, mean, rstd


def _normalize_backward_ops(g, x, mean, rstd, *weight, axes, center, param_shape, need):
    if not _fusible(x, axes, [param_shape] if param_shape else []):
        return None
    n = math.prod(x.shape[a] for a in axes)
    lead = tuple(range(x.ndim - len(axes)))
    gx = gw = gb = zeros((), dtype=x.dtype)
    # the parameters' gradients sum over rows (not a fusible reduction): computed from
    # values of their own, so that the kernel for gx stays open to what follows it
    if need[1]:
        gw = _sum_rows(g * rstd * (x - mean), lead)
    if need[2]:
        gb = _sum_rows(g, lead)
    if need[0]:
        d = x - mean
        gyr = g * rstd * weight[0] if weight else g * rstd
        k = _sum(gyr * d, axes, keepdim=True) / n * rstd * rstd
        gx = d * k
        if center:
            gx = gx + _sum(gyr, axes, keepdim=True) / n
        gx = gyr - gx
    return gx, gw, gb


def _sum_rows(t, lead):
    return _sum(t, lead) if lead else t


def _stat_shape(x, axes):
    return tuple(1 if i in axes else s for i, s in enumerate(x.shape))


def _normalize_infer(x, *affine, axes, eps, center, has_weight, has_bias):
    stat = tuple(1 if i in axes else s for i, s in enumerate(x.shape))
    acc = dt.float32 if x.dtype.itemsize == 2 else x.dtype
    return AbstractValue(x.shape, x.dtype), AbstractValue(stat, acc), AbstractValue(stat, acc)


def _register_norm(name):
    return register(name, _normalize_forward, _normalize_vjp, n_outputs=3,
                    saves_outputs=True, broadcasting=True, infer=_normalize_infer,
                    decompose=_normalize_ops)


_LAYER_NORM = _register_norm("native_layer_norm")
_BATCH_NORM = _register_norm("native_batch_norm")
_GROUP_NORM = _register_norm("native_group_norm")
_RMS_NORM = _register_norm("rms_norm")
_NORMALIZE_BACKWARD = register("normalize_backward", _normalize_backward_forward, n_outputs=3,
                               decompose=_normalize_backward_ops,
                               whole_in_c=norm_kernels.applies)


def _normalize(op, x, weight, bias, axes, eps, center=True):
    """Run the fused normalisation; returns (y, mean, rstd) with keepdims statistics."""
    affine = tuple(t for t in (weight, bias) if t is not None)
    return apply(op, x, *affine, axes=axes, eps=float(eps), center=center,
                 has_weight=weight is not None, has_bias=bias is not None)


# Checks --------------------------------------------------------------------------------
def _require_float(op, input):
    if not isinstance(input, Tensor):
        raise EmberError(f"{op}: expected a Tensor input, got {type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise EmberError(f"{op}: expected a floating-point input, got dtype "
                         f"{input.dtype.name}")


def _check_param(op, name, t, shape, input):
    if t is not None and tuple(t.shape) != tuple(shape):
        raise ShapeError(f"{op}: expected {name} of shape {tuple(shape)} for input of shape "
                         f"{tuple(input.shape)}, got {tuple(t.shape)}")


def _as_input_dtype(t, x):
    return t if t is None or t.dtype is x.dtype else ew.cast(t, x.dtype)


def _channel_view(t, ndim):
    """A per-channel (C,) tensor shaped (C, 1, ...) to broadcast against dims 1.. of an
    ``ndim``-dim input."""
    return None if t is None else reshape(t, (t.shape[0],) + (1,) * (ndim - 2))


# Layer norm / RMS norm ------------------------------------------------------------------
def _normalized_axes(op, input, normalized_shape):
    shape = (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) \
        else tuple(normalized_shape)
    k = len(shape)
    if k == 0 or k > input.ndim or tuple(input.shape[input.ndim - k:]) != shape:
        raise ShapeError(f"{op}: given normalized_shape={list(shape)}, expected input with "
                         f"shape [*, {', '.join(map(str, shape))}], but got input of size "
                         f"{list(input.shape)}")
    return shape, tuple(range(input.ndim - k, input.ndim))


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise over the trailing ``normalized_shape`` dims to zero mean and unit
    variance (biased), then scale by ``weight`` and shift by ``bias`` (both of
    ``normalized_shape``).

    >>> F.layer_norm(ember.tensor([[1.0, 3.0]]), (2,))
    tensor([[-1.0000,  1.0000]])
    """
    _require_float("layer_norm", input)
    shape, axes = _normalized_axes("layer_norm", input, normalized_shape)
    _check_param("layer_norm", "weight", weight, shape, input)
    _check_param("layer_norm", "bias", bias, shape, input)
    return _normalize(_LAYER_NORM, input, _as_input_dtype(weight, input),
                      _as_input_dtype(bias, input), axes, eps)[0]


def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """x / sqrt(mean(x^2) + eps) over the trailing ``normalized_shape`` dims, times
    ``weight``. ``eps`` None means the machine epsilon of the input's dtype.

    >>> F.rms_norm(ember.tensor([[3.0, 4.0]]), (2,))
    tensor([[0.8485, 1.1314]])
    """
    _require_float("rms_norm", input)
    shape, axes = _normalized_axes("rms_norm", input, normalized_shape)
    _check_param("rms_norm", "weight", weight, shape, input)
    if eps is None:
        eps = float(ml_dtypes.finfo(input.dtype.np).eps)
    return _normalize(_RMS_NORM, input, _as_input_dtype(weight, input), None, axes, eps,
                      center=False)[0]


# Batch norm / instance norm -------------------------------------------------------------
def _check_channels(op, input, **params):
    if input.ndim < 2:
        raise ShapeError(f"{op}: expected an input of at least 2 dims (N, C, ...), got shape "
                         f"{tuple(input.shape)}")
    c = input.shape[1]
    for name, t in params.items():
        _check_param(op, name, t, (c,), input)


def _update_running(running, value, momentum):
    """running <- (1 - momentum) * running + momentum * value, in place, untracked."""
    with grad_mode.no_grad():
        running.mul_(1 - momentum).add_(value.to(running.dtype), alpha=momentum)


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel (dim 1) over the batch and spatial dims.

    In training, uses the batch's mean and biased variance and updates ``running_mean``
    and ``running_var`` in place (with the unbiased variance):
    ``running = (1 - momentum) * running + momentum * batch_stat``. Otherwise uses the
    running statistics.

    >>> F.batch_norm(ember.tensor([[1.0], [3.0]]), None, None, training=True)
    tensor([[-1.0000],
            [ 1.0000]])
    """
    _require_float("batch_norm", input)
    _check_channels("batch_norm", input, running_mean=running_mean, running_var=running_var,
                    weight=weight, bias=bias)
    if not training:
        if running_mean is None or running_var is None:
            raise EmberError("batch_norm: running_mean and running_var must be defined in "
                             "evaluation mode (training=False)")
        return _normalize_with_stats(input, running_mean, running_var, weight, bias, eps)
    c = input.shape[1]
    count = input.numel() // c if c else 0
    if input.numel() == 0:  # an empty batch: an empty result, the running stats unchanged
        return _empty_affine(input, weight, bias)
    if count <= 1:
        raise EmberValueError(f"batch_norm: expected more than 1 value per channel when "
                              f"training, got input of shape {tuple(input.shape)}")
    axes = (0,) + tuple(range(2, input.ndim))
    y, mean, rstd = _normalize(_BATCH_NORM, input,
                               _channel_view(_as_input_dtype(weight, input), input.ndim),
                               _channel_view(_as_input_dtype(bias, input), input.ndim),
                               axes, eps)
    if running_mean is not None or running_var is not None:
        _update_stats(running_mean, running_var, mean, rstd, eps, count, momentum, (c,))
    return y


def _empty_affine(input, weight, bias):
    """``input`` (empty) times weight plus bias by channel: an empty result through which
    weight and bias get zero gradients, as PyTorch's do."""
    y = input.clone()
    if weight is not None:
        y = y * _channel_view(_as_input_dtype(weight, input), input.ndim)
    if bias is not None:
        y = y + _channel_view(_as_input_dtype(bias, input), input.ndim)
    return y


def _update_stats(running_mean, running_var, mean, rstd, eps, count, momentum, shape):
    """Fold batch statistics (keepdims mean, 1/std) into the running ones."""
    with grad_mode.no_grad():
        if running_mean is not None:
            _update_running(running_mean, reshape(mean, shape), momentum)
        if running_var is not None:
            var = (1 / (rstd * rstd) - eps) * (count / (count - 1))
            _update_running(running_var, reshape(var, shape), momentum)


def _normalize_with_stats(input, mean, var, weight, bias, eps):
    """(x - mean) / sqrt(var + eps) * weight + bias with given per-channel statistics."""
    scale = ew.rsqrt(var + eps)
    if weight is not None:
        scale = scale * weight
    shift = -mean * scale
    if bias is not None:
        shift = shift + bias
    scale = _channel_view(_as_input_dtype(scale, input), input.ndim)
    shift = _channel_view(_as_input_dtype(shift, input), input.ndim)
    return input * scale + shift


def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel of each sample over its spatial dims (input (N, C, ...)).
    With ``use_input_stats``, the running statistics (if given) are updated with the
    batch average of the per-instance statistics; otherwise they are used instead.

    >>> F.instance_norm(ember.tensor([[[1.0, 3.0]]]))
    tensor([[[-1.0000,  1.0000]]])
    """
    _require_float("instance_norm", input)
    _check_channels("instance_norm", input, running_mean=running_mean,
                    running_var=running_var, weight=weight, bias=bias)
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise EmberError("instance_norm: expected running_mean and running_var to be "
                             "defined when use_input_stats is False")
        return _normalize_with_stats(input, running_mean, running_var, weight, bias, eps)
    count = math.prod(input.shape[2:])
    if count <= 1:
        raise EmberValueError(f"instance_norm: expected more than 1 spatial element when "
                              f"training, got input of shape {tuple(input.shape)}")
    axes = tuple(range(2, input.ndim))
    y, mean, rstd = _normalize(_BATCH_NORM, input,
                               _channel_view(_as_input_dtype(weight, input), input.ndim),
                               _channel_view(_as_input_dtype(bias, input), input.ndim),
                               axes, eps)
    if running_mean is not None or running_var is not None:
        n, c = input.shape[:2]
        with grad_mode.no_grad():
            var = (1 / (rstd * rstd) - eps) * (count / (count - 1))
            if running_mean is not None:
                _update_running(running_mean, _mean(reshape(mean, (n, c)), 0), momentum)
            if running_var is not None:
                _update_running(running_var, _mean(reshape(var, (n, c)), 0), momentum)
    return y


# Group norm ------------------------------------------------------------------------------
def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Split the channels (dim 1) into ``num_groups`` groups and normalise each group of
    each sample over its channels and spatial dims; then a per-channel affine.

    >>> F.group_norm(ember.tensor([[1.0, 3.0]]), 1)
    tensor([[-1.0000,  1.0000]])
    """
    _require_float("group_norm", input)
    _check_channels("group_norm", input, weight=weight, bias=bias)
    n, c = input.shape[:2]
    if num_groups <= 0 or c % num_groups:
        raise ShapeError(f"group_norm: expected number of channels in input to be divisible "
                         f"by num_groups, but got input of shape {list(input.shape)} and "
                         f"num_groups={num_groups}")
    spatial = math.prod(input.shape[2:])
    per_group = c // num_groups
    # (N, G, C/G, S): the per-channel affine broadcasts as (G, C/G, 1)
    x = reshape(input, (n, num_groups, per_group, spatial))
    grouped = [None if t is None else reshape(_as_input_dtype(t, input),
                                              (num_groups, per_group, 1))
               for t in (weight, bias)]
    y = _normalize(_GROUP_NORM, x, grouped[0], grouped[1], (2, 3), eps)[0]
    return reshape(y, tuple(input.shape))


# normalize / local response norm --------------------------------------------------------
def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out: Tensor | None = None) -> Tensor:
    """x / max(||x||_p, eps) along ``dim``.

    >>> F.normalize(ember.tensor([[3.0, 4.0]]))
    tensor([[0.6000, 0.8000]])
    """
    _require_float("normalize", input)
    denom = expand(clamp_min(_norm(input, p, dim, keepdim=True), eps), tuple(input.shape))
    result = input / denom
    if out is not None:
        return out.copy_(result)
    return result


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> Tensor:
    """Local response normalisation across channels (dim 1):
    x / (k + alpha / size * sum of x^2 over ``size`` neighbouring channels) ** beta.

    >>> F.local_response_norm(ember.ones(1, 3, 2), 2).shape
    ember.Size([1, 3, 2])
    """
    _require_float("local_response_norm", input)
    if input.ndim < 3:
        raise ShapeError(f"local_response_norm: expected 3D or higher dimensionality input "
                         f"(got {input.ndim} dimensions, shape {tuple(input.shape)})")
    if input.numel() == 0:
        return input.clone()
    # window sums along the channels as differences of a running sum, padded so that
    # channel i sums channels i - size//2 .. i + (size - 1)//2
    pads = [0, 0] * (input.ndim - 2) + [size // 2 + 1, (size - 1) // 2]
    running = cumsum(pad(input * input, pads), 1)
    c = input.shape[1]
    window = running[:, size:size + c] - running[:, :c]
    div = ew.pow(window * (alpha / size) + k, beta)
    return input / div
