"""Loss functions, as in ``torch.nn.functional``.

``cross_entropy`` with class indices is one fused primitive (log-softmax and the
negative log-likelihood in one pass, with label smoothing, class weights and
``ignore_index``); its VJP is one fused kernel for an ordinary backward and the same
formula in ember ops when a graph of the gradient is being built. ``nll_loss`` and
``binary_cross_entropy`` are primitives too; the other losses are written with ember ops
(the pointwise Huber and smooth-L1 terms reuse the fused activation machinery).
Divergences and margin losses are in ``loss_margin.py``.
"""
from __future__ import annotations

import warnings

import numpy as np

from .. import dtypes as dt
from ..autograd import grad_mode
from ..errors import EmberError, EmberIndexError, EmberTypeError, EmberValueError, ShapeError
from ..tensor import Tensor
from . import elementwise as ew
from .activation import _shifted, log_softmax, logsigmoid, softmax
from .activation_kernels import _pointwise, _upcast
from .creation import arange
from .elementwise_composite import clamp_min
from .logical import eq
from .reduce import mean as _mean, sum as _sum
from .loss_kernels import row_statistics
from .registry import AbstractValue, apply, autocast_inputs, register
from .shape import expand, movedim, reshape, unsqueeze

__all__ = ["cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss",
           "huber_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits"]

_REDUCTIONS = ("none", "mean", "sum")


# Reduction -----------------------------------------------------------------------------
def _reduction(name, size_average, reduce, reduction, allowed=_REDUCTIONS) -> str:
    """The reduction string, from the legacy ``size_average``/``reduce`` flags if given."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "none" if not reduce else "mean" if size_average else "sum"
        warnings.warn(f"{name}: size_average and reduce args will be deprecated, please use "
                      f"reduction='{reduction}' instead.", stacklevel=3)
    if reduction not in allowed:
        raise EmberValueError(f"{name}: {reduction!r} is not a valid value for reduction "
                              f"(expected one of {', '.join(map(repr, allowed))})")
    return reduction


def _reduce(loss, reduction):
    if reduction == "mean":
        return _mean(loss)
    if reduction == "sum":
        return _sum(loss)
    return loss


def _require_tensor(name, arg, value):
    if not isinstance(value, Tensor):
        raise EmberTypeError(f"{name}: argument '{arg}' must be a Tensor, not "
                             f"{type(value).__name__}")


def _require_float(name, input):
    _require_tensor(name, "input", input)
    if not input.dtype.is_floating_point:
        raise EmberTypeError(f"{name}: expected a floating-point input, got dtype "
                             f"{input.dtype.name}")


# Class-index targets ----------------------------------------------------------------------
def _class_dim(name, input, target):
    """Check an (N, C, d1, ...) or (C,) input against its class-index target."""
    if input.ndim == 0:
        raise ShapeError(f"{name}: expected an input of 1 or more dims (C,), (N, C) or "
                         f"(N, C, d1, ...), got a 0-d tensor")
    if target.dtype not in (dt.int64, dt.uint8):
        raise EmberTypeError(
            f"{name}: expected class-index targets of dtype int64 (or uint8) with shape "
            f"{_target_shape(input)}, or class probabilities of input's shape "
            f"{tuple(input.shape)}; got target of dtype {target.dtype.name} and shape "
            f"{tuple(target.shape)}")
    cdim = 1 if input.ndim >= 2 else 0
    want = _target_shape(input)
    if tuple(target.shape) != want:
        if input.ndim >= 2 and target.ndim >= 1 and target.shape[0] != input.shape[0]:
            raise EmberValueError(
                f"{name}: expected input batch_size ({input.shape[0]}) to match target "
                f"batch_size ({target.shape[0]}) (input of shape {tuple(input.shape)}, "
                f"target of shape {tuple(target.shape)})")
        raise ShapeError(f"{name}: expected target of shape {want} for input of shape "
                         f"{tuple(input.shape)}, got {tuple(target.shape)}")
    return cdim


def _target_shape(input):
    return tuple(input.shape[:1]) + tuple(input.shape[2:]) if input.ndim >= 2 else ()


def _check_weight(name, weight, input, cdim):
    if weight is None:
        return None
    c = input.shape[cdim]
    if tuple(weight.shape) != (c,):
        raise ShapeError(f"{name}: expected weight to be a 1-D tensor of size {c} (the "
                         f"number of classes), got shape {tuple(weight.shape)}")
    return weight if weight.dtype is input.dtype else ew.cast(weight, input.dtype)


def _targets(xp, t, weight, classes, ignore_index, name, dtype):
    """(safe targets, valid mask, per-sample weight w[t] masked by valid) as arrays."""
    valid = t != ignore_index
    safe = xp.where(valid, t, 0).astype(np.int64)
    bad = (safe < 0) | (safe >= classes)
    if bad.any():
        raise EmberIndexError(f"{name}: target {int(safe[bad].flat[0])} is out of bounds "
                              f"for {classes} classes")
    per_sample = weight[safe] if weight is not None else xp.ones(safe.shape, dtype=dtype)
    return safe, valid, per_sample * valid


def _picked(xp, a, safe, cdim):
    return xp.take_along_axis(a, xp.expand_dims(safe, cdim), axis=cdim).squeeze(cdim)


def _nonzero(xp, denom):
    """The mean's denominator, 1 where it is 0: with every target ignored the loss is
    NaN (0/0) but PyTorch's gradient is 0, as every term of it is weighted by 0."""
    return xp.where(denom == 0, 1, denom)


def _nonzero_t(denom):
    return ew.where(denom == 0, 1.0, denom)


def _reduce_weighted(xp, loss, per_sample, reduction):
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.sum() / per_sample.sum()
    return loss


# cross_entropy: the fused primitive --------------------------------------------------
def _ce_forward(xp, x, t, *weight, cdim, ignore_index, reduction, label_smoothing):
    a = _upcast(x)
    w = _upcast(weight[0]) if weight else None
    classes = a.shape[cdim]
    safe, valid, per_sample = _targets(xp, t, w, classes, ignore_index, "cross_entropy",
                                       a.dtype)
    # (N, C) logits: one C pass for the rows' lse, target logits and sums
    rows = row_statistics(a, safe, bool(label_smoothing) and w is None) \
        if xp is np and cdim == 1 else None
    if rows is None:
        _, lse, shift, _ = _shifted(xp, a, cdim, keep=False)
        xp.log(lse, out=lse)
        lse += shift
        picked, sums = _picked(xp, a, safe, cdim), None
    else:
        lse, picked, sums = rows
    lse_n = lse.squeeze(cdim)
    loss = (lse_n - picked) * per_sample
    if label_smoothing:
        # sum over classes of w_c * (lse - x_c)
        if w is None:
            smooth = classes * lse_n - (xp.sum(a, axis=cdim) if sums is None else sums)
        else:
            wv = w.reshape((classes,) + (1,) * (a.ndim - cdim - 1))
            smooth = lse_n * w.sum() - xp.sum(a * wv, axis=cdim)
        loss = (1 - label_smoothing) * loss + (label_smoothing / classes) * smooth * valid
    out = _reduce_weighted(xp, loss, per_sample, reduction)
    return xp.asarray(out).astype(x.dtype), lse


def _ce_backward_forward(xp, g, x, t, lse, *weight, cdim, ignore_index, reduction,
                         label_smoothing):
    a = _upcast(x)
    w = _upcast(weight[0]) if weight else None
    classes = a.shape[cdim]
    safe, valid, per_sample = _targets(xp, t, w, classes, ignore_index, "cross_entropy",
                                       a.dtype)
    coef = _upcast(g)
    if reduction == "mean":
        coef = coef / _nonzero(xp, per_sample.sum())
    coef = coef * xp.ones(safe.shape, dtype=a.dtype) if coef.ndim == 0 else coef
    eps = label_smoothing
    hard = (1 - eps) * per_sample                     # weight of the target class
    scale = hard
    if eps:
        total = classes if w is None else w.sum()
        scale = hard + (eps / classes) * total * valid
    grad = a - lse
    xp.exp(grad, out=grad)
    grad *= xp.expand_dims(scale * coef, cdim)
    if eps:
        wv = 1 if w is None else w.reshape((classes,) + (1,) * (a.ndim - cdim - 1))
        grad -= xp.expand_dims((eps / classes) * valid * coef, cdim) * wv
    idx = xp.expand_dims(safe, cdim)
    at_target = xp.take_along_axis(grad, idx, axis=cdim)
    xp.put_along_axis(grad, idx, at_target - xp.expand_dims(hard * coef, cdim), axis=cdim)
    return grad.astype(x.dtype, copy=False)


def _ce_vjp(n, grads):
    g = grads[0]
    inputs = n.saved_inputs()
    x, t = inputs[0], inputs[1]
    weight = inputs[2] if len(inputs) > 2 else None
    p = n.params
    if not grad_mode.is_grad_enabled():
        extra = (weight,) if weight is not None else ()
        gx = apply(_CE_BACKWARD, g, x, t, n.output(1), *extra, **p)
        return (gx, None) + ((None,) if weight is not None else ())
    # the same gradient in ember ops, differentiable again
    cdim, eps = p["cdim"], p["label_smoothing"]
    classes = x.shape[cdim]
    hard, valid, denom, onehot = _target_terms(x, t, weight, p["ignore_index"], cdim)
    coef = g / _nonzero_t(denom) if p["reduction"] == "mean" else g
    if coef.ndim == 0:
        coef = expand(coef, tuple(hard.shape))
    hard = hard * (1 - eps)
    scale = hard
    if eps:
        total = classes if weight is None else _sum(weight)
        scale = hard + valid * total * (eps / classes)
    grad = softmax(x, cdim) * unsqueeze(scale * coef, cdim) - onehot * unsqueeze(hard * coef,
                                                                                cdim)
    if eps:
        smooth = unsqueeze(valid * coef * (eps / classes), cdim)
        if weight is not None:
            smooth = smooth * reshape(weight, (classes,) + (1,) * (x.ndim - cdim - 1))
        grad = grad - smooth
    return (grad, None) + ((None,) if weight is not None else ())


def _target_terms(x, t, weight, ignore_index, cdim):
    """Ember tensors (per-sample weight, valid mask, mean denominator, one-hot target).
    The targets are in range (the forward checked them): the one-hot op is applied
    without ``one_hot``'s checks, which read the values and so cannot be traced."""
    from .nn_misc import _ONE_HOT
    from .take import take
    valid_mask = t != ignore_index
    safe = ew.where(valid_mask, t, 0).to(dt.int64)
    valid = valid_mask.to(x.dtype)
    per_sample = valid if weight is None else take(weight, safe) * valid
    onehot = movedim(apply(_ONE_HOT, safe, num_classes=x.shape[cdim]), -1, cdim).to(x.dtype)
    return per_sample, valid, _sum(per_sample), onehot


def _ce_backward_ops(g, x, t, lse, *weight, cdim, ignore_index, reduction,
                     label_smoothing):
    """:func:`_ce_backward_forward` in ember ops, for ember.jit to fuse (Op.decompose):
    (N, C) logits without class weights. The forward checked the targets."""
    if weight or x.ndim != 2 or x.numel() == 0 or t.dtype is not dt.int64 or \
            x.dtype not in (dt.float32, dt.float64):
        return None
    classes = x.shape[1]
    # every per-row value first (one kernel), then the (N, C) ones (a second)
    valid = t != ignore_index
    safe = ew.where(valid, t, 0)
    per_sample = valid.to(x.dtype)
    coef = g / _nonzero_t(_sum(per_sample)) if reduction == "mean" else g
    eps = label_smoothing
    hard = per_sample * (1 - eps)
    scale = hard + per_sample * float(eps) if eps else hard  # eps / C, for each of C classes
    scaled, target_term = scale * coef, hard * coef
    smooth = per_sample * (eps / classes) * coef if eps else None
    grad = ew.exp(x - lse) * unsqueeze(scaled, 1)
    if eps:
        grad = grad - unsqueeze(smooth, 1)
    is_target = eq(arange(classes), unsqueeze(safe, 1))
    return ew.where(is_target, grad - unsqueeze(target_term, 1), grad)


def _ce_infer(x, t, *weight, cdim, ignore_index, reduction, label_smoothing):
    shape = tuple(t.shape) if reduction == "none" else ()
    stat = tuple(1 if i == cdim else s for i, s in enumerate(x.shape))
    acc = dt.float32 if x.dtype.itemsize == 2 else x.dtype
    return AbstractValue(shape, x.dtype), AbstractValue(stat, acc)


_CROSS_ENTROPY = register("cross_entropy_loss", _ce_forward, _ce_vjp, n_outputs=2,
                          saves_outputs=True, infer=_ce_infer)
_CE_BACKWARD = register("cross_entropy_loss_backward", _ce_backward_forward,
                       decompose=_ce_backward_ops)


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  size_average: bool | None = None, ignore_index: int = -100,
                  reduce: bool | None = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy between the logits ``input`` ((C,), (N, C) or (N, C, d1, ...);
    classes along dim 1) and ``target``: class indices (int64, shape without the class
    dim) or class probabilities (float, input's shape).

    ``weight`` rescales each class; targets equal to ``ignore_index`` contribute
    nothing; ``label_smoothing`` mixes the target with the uniform distribution. With
    ``reduction='mean'`` and class indices, the sum is divided by the total weight of
    the non-ignored targets.

    >>> F.cross_entropy(ember.tensor([[2.0, 0.0]]), ember.tensor([0]))
    tensor(0.1269)
    """
    name = "cross_entropy"
    reduction = _reduction(name, size_average, reduce, reduction)
    input, target, weight = autocast_inputs("cross_entropy_loss", input, target, weight)
    _require_float(name, input)
    _require_tensor(name, "target", target)
    if not 0.0 <= label_smoothing <= 1.0:
        raise EmberError(f"{name}: label_smoothing must be between 0.0 and 1.0, got "
                         f"{label_smoothing}")
    if target.dtype.is_floating_point and tuple(target.shape) == tuple(input.shape) \
            and input.ndim >= 1:
        return _cross_entropy_probs(input, target, weight, reduction, label_smoothing)
    cdim = _class_dim(name, input, target)
    weight = _check_weight(name, weight, input, cdim)
    x, t = (reshape(input, (1, -1)), reshape(target, (1,))) if input.ndim == 1 \
        else (input, target)
    extra = (weight,) if weight is not None else ()
    loss = apply(_CROSS_ENTROPY, x, t, *extra, cdim=1, ignore_index=int(ignore_index),
                 reduction=reduction, label_smoothing=float(label_smoothing))[0]
    return reshape(loss, ()) if input.ndim == 1 and reduction == "none" else loss


def _cross_entropy_probs(input, target, weight, reduction, label_smoothing):
    cdim = 1 if input.ndim >= 2 else 0
    classes = input.shape[cdim]
    weight = _check_weight("cross_entropy", weight, input, cdim)
    if label_smoothing:
        target = target * (1 - label_smoothing) + label_smoothing / classes
    terms = log_softmax(input, cdim) * target
    if weight is not None:
        terms = terms * reshape(weight, (classes,) + (1,) * (input.ndim - cdim - 1))
    loss = -_sum(terms, cdim)
    if reduction == "mean":
        return _sum(loss) / (input.numel() // classes if classes else 0)
    return _reduce(loss, reduction)


# nll_loss ------------------------------------------------------------------------------
def _nll_forward(xp, x, t, *weight, ignore_index, reduction):
    a = _upcast(x)
    w = _upcast(weight[0]) if weight else None
    safe, valid, per_sample = _targets(xp, t, w, a.shape[1], ignore_index, "nll_loss",
                                       a.dtype)
    loss = -_picked(xp, a, safe, 1) * per_sample
    return xp.asarray(_reduce_weighted(xp, loss, per_sample, reduction)).astype(x.dtype)


def _nll_vjp(n, g):
    inputs = n.saved_inputs()
    x, t = inputs[0], inputs[1]
    weight = inputs[2] if len(inputs) > 2 else None
    per_sample, _, denom, onehot = _target_terms(x, t, weight, n.params["ignore_index"], 1)
    coef = g / _nonzero_t(denom) if n.params["reduction"] == "mean" else g
    gx = onehot * unsqueeze(-coef * per_sample, 1)
    return (gx, None) + ((None,) if weight is not None else ())


def _nll_infer(x, t, *weight, ignore_index, reduction):
    return AbstractValue(tuple(t.shape) if reduction == "none" else (), x.dtype)


_NLL_LOSS = register("nll_loss", _nll_forward, _nll_vjp, infer=_nll_infer)


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             size_average: bool | None = None, ignore_index: int = -100,
             reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of class-index ``target`` under log-probabilities
    ``input`` ((C,), (N, C) or (N, C, d1, ...)): -weight[t] * input[t], with PyTorch's
    weighted mean and ``ignore_index``.

    >>> F.nll_loss(ember.tensor([[-0.5, -1.0]]), ember.tensor([1]))
    tensor(1.)
    """
    name = "nll_loss"
    reduction = _reduction(name, size_average, reduce, reduction)
    _require_float(name, input)
    _require_tensor(name, "target", target)
    cdim = _class_dim(name, input, target)
    weight = _check_weight(name, weight, input, cdim)
    x, t = (reshape(input, (1, -1)), reshape(target, (1,))) if input.ndim == 1 \
        else (input, target)
    extra = (weight,) if weight is not None else ()
    loss = apply(_NLL_LOSS, x, t, *extra, ignore_index=int(ignore_index), reduction=reduction)
    return reshape(loss, ()) if input.ndim == 1 and reduction == "none" else loss


# Regression losses ---------------------------------------------------------------------
def _difference(name, input, target):
    _require_tensor(name, "input", input)
    _require_tensor(name, "target", target)
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(f"{name}: using a target size ({tuple(target.shape)}) that is different "
                      f"to the input size ({tuple(input.shape)}). This will likely lead to "
                      "incorrect results due to broadcasting. Please ensure they have the "
                      "same size.", stacklevel=3)
    return input - target


def _weighted(name, loss, weight, reduction, input, by_weight=True):
    """Reduce ``loss * weight``; the mean divides by the total weight (``by_weight``, as
    PyTorch's mse_loss and l1_loss do) or by the number of elements (its huber_loss)."""
    if weight is None:
        return _reduce(loss, reduction)
    if tuple(weight.shape) != tuple(input.shape):
        raise EmberValueError(f"{name}: weights and input must have the same size, got "
                              f"weight of shape {tuple(weight.shape)} and input of shape "
                              f"{tuple(input.shape)}")
    if reduction == "mean" and by_weight:
        return _sum(loss * weight) / _sum(weight)
    return _reduce(loss * weight, reduction)


def mse_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
             reduce: bool | None = None, reduction: str = "mean",
             weight: Tensor | None = None) -> Tensor:
    """Squared error (input - target)^2, optionally weighted per element (the weighted
    mean divides by the total weight).

    >>> F.mse_loss(ember.tensor([1.0, 2.0]), ember.tensor([0.0, 0.0]))
    tensor(2.5000)
    """
    reduction = _reduction("mse_loss", size_average, reduce, reduction)
    input, target, weight = autocast_inputs("mse_loss", input, target, weight)
    d = _difference("mse_loss", input, target)
    return _weighted("mse_loss", d * d, weight, reduction, input)


def l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
            reduce: bool | None = None, reduction: str = "mean",
            weight: Tensor | None = None) -> Tensor:
    """Absolute error |input - target|, optionally weighted per element (the weighted
    mean divides by the total weight).

    >>> F.l1_loss(ember.tensor([1.0, -3.0]), ember.tensor([0.0, 0.0]))
    tensor(2.)
    """
    reduction = _reduction("l1_loss", size_average, reduce, reduction)
    input, target, weight = autocast_inputs("l1_loss", input, target, weight)
    d = _difference("l1_loss", input, target)
    return _weighted("l1_loss", ew.abs(d), weight, reduction, input)


def _smooth_l1_f(xp, d, beta):
    ad = xp.abs(d)
    return xp.where(ad < beta, 0.5 * d * d / beta, ad - 0.5 * beta)


def _smooth_l1_df(xp, d, beta):
    return xp.where(xp.abs(d) < beta, d / beta, xp.sign(d)).astype(d.dtype, copy=False)


def _smooth_l1_d2f(d, beta):
    return ew.where(ew.abs(d) < beta, 1.0 / beta, 0.0)


def _huber_f(xp, d, delta):
    ad = xp.abs(d)
    return xp.where(ad < delta, 0.5 * d * d, delta * (ad - 0.5 * delta))


def _huber_df(xp, d, delta):
    return xp.clip(d, -delta, delta).astype(d.dtype, copy=False)


def _huber_d2f(d, delta):
    return ew.where(ew.abs(d) < delta, 1.0, 0.0)


_SMOOTH_L1 = _pointwise("smooth_l1", _smooth_l1_f, _smooth_l1_df, _smooth_l1_d2f)
_HUBER = _pointwise("huber", _huber_f, _huber_df, _huber_d2f)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average: bool | None = None,
                   reduce: bool | None = None, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """0.5 * d^2 / beta where |d| < beta, else |d| - 0.5 * beta (d = input - target);
    beta = 0 gives the L1 loss.

    >>> F.smooth_l1_loss(ember.tensor([0.5, 3.0]), ember.tensor([0.0, 0.0]))
    tensor(1.3125)
    """
    reduction = _reduction("smooth_l1_loss", size_average, reduce, reduction)
    if beta < 0:
        raise EmberError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    d = _difference("smooth_l1_loss", input, target)
    loss = ew.abs(d) if beta == 0 else apply(_SMOOTH_L1, _float_diff(d), beta=float(beta))
    return _reduce(loss, reduction)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """0.5 * d^2 where |d| < delta, else delta * (|d| - 0.5 * delta) (d = input - target).

    >>> F.huber_loss(ember.tensor([0.5, 3.0]), ember.tensor([0.0, 0.0]))
    tensor(1.3125)
    """
    reduction = _reduction("huber_loss", None, None, reduction)
    if delta <= 0:
        raise EmberError(f"huber_loss: delta must be positive, got {delta}")
    d = _difference("huber_loss", input, target)
    loss = apply(_HUBER, _float_diff(d), delta=float(delta))
    return _weighted("huber_loss", loss, weight, reduction, input, by_weight=False)


def _float_diff(d):
    if not d.dtype.is_floating_point:
        raise EmberTypeError(f"expected floating-point input and target, got {d.dtype.name}")
    return d


# Binary cross-entropy --------------------------------------------------------------------
def _clamped_logs(xp, a):
    return xp.maximum(xp.log(a), -100), xp.maximum(xp.log1p(-a), -100)


def _bce_forward(xp, x, t, *weight):
    a = _upcast(x)
    if ((a < 0) | (a > 1)).any():
        raise EmberError("binary_cross_entropy: all elements of input should be between 0 "
                         "and 1")
    log_x, log_1mx = _clamped_logs(xp, a)
    tt = _upcast(t)
    loss = -(tt * log_x + (1 - tt) * log_1mx)
    if weight:
        loss *= _upcast(weight[0])
    return loss.astype(x.dtype, copy=False)


_BCE_EPS = float(np.float32(1e-12))  # PyTorch's clamp of x * (1 - x), a float32 constant


def _bce_vjp(n, g):
    inputs = n.saved_inputs()
    x, t = inputs[0], inputs[1]
    w = inputs[2] if len(inputs) > 2 else None
    gw_ = g if w is None else g * w
    gx = gt = gw = None
    if n.edges[0]:
        gx = gw_ * (x - t) / clamp_min(x * (1 - x), _BCE_EPS)
    if n.edges[1]:
        gt = gw_ * (ew.log1p(-x) - ew.log(x))  # unclamped, as PyTorch: inf at 0 and 1
    if w is not None and n.edges[2]:
        gw = g * apply(_BCE, x, t)
    return (gx, gt) + ((gw,) if w is not None else ())


_BCE = register("binary_cross_entropy", _bce_forward, _bce_vjp,
                infer=lambda x, t, *w: AbstractValue(x.shape, x.dtype))


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    """-(t * log(x) + (1 - t) * log(1 - x)) for probabilities ``input``; each log is
    clamped at -100 so that the loss stays finite.

    >>> F.binary_cross_entropy(ember.tensor([0.5]), ember.tensor([1.0]))
    tensor(0.6931)
    """
    name = "binary_cross_entropy"
    reduction = _reduction(name, size_average, reduce, reduction)
    _require_float(name, input)
    _require_tensor(name, "target", target)
    if tuple(target.shape) != tuple(input.shape):
        raise EmberValueError(f"{name}: using a target size ({tuple(target.shape)}) that is "
                              f"different to the input size ({tuple(input.shape)}) is not "
                              "supported; please ensure they have the same size")
    args = [input, target if target.dtype is input.dtype else ew.cast(target, input.dtype)]
    if weight is not None:
        w = weight if weight.dtype is input.dtype else ew.cast(weight, input.dtype)
        args.append(expand(w, tuple(input.shape)))
    return _reduce(apply(_BCE, *args), reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     weight: Tensor | None = None,
                                     size_average: bool | None = None,
                                     reduce: bool | None = None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Binary cross-entropy of sigmoid(input), computed stably from the logits:
    (1 - t) * x - (1 + (pos_weight - 1) * t) * log(sigmoid(x)).

    >>> F.binary_cross_entropy_with_logits(ember.tensor([0.0]), ember.tensor([1.0]))
    tensor(0.6931)
    """
    name = "binary_cross_entropy_with_logits"
    reduction = _reduction(name, size_average, reduce, reduction)
    input, target, weight, pos_weight = autocast_inputs(name, input, target, weight, pos_weight)
    _require_float(name, input)
    _require_tensor(name, "target", target)
    if tuple(target.shape) != tuple(input.shape):
        raise EmberValueError(f"{name}: target size ({tuple(target.shape)}) must be the same "
                              f"as input size ({tuple(input.shape)})")
    log_sig = logsigmoid(input)
    if pos_weight is None:
        loss = (1 - target) * input - log_sig
    else:
        loss = (1 - target) * input - ((pos_weight - 1) * target + 1) * log_sig
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)
