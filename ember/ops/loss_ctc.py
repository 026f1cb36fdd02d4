"""The connectionist temporal classification loss, as ``torch.nn.functional.ctc_loss``.

One primitive computes each sequence's negative log-likelihood by the forward (alpha)
recursion in log space, vectorised over the batch and the extended label positions
(blank, l1, blank, l2, ..., blank), with a loop over time only. When a gradient is
needed, the same call runs the backward (beta) recursion and saves the gradient with
respect to ``log_probs`` as PyTorch defines it: ``exp(lp) - exp(log(sum over the
positions s labelled c of alpha * beta) + nll - lp)``, which is the true gradient plus
``exp(lp)``, a term that a ``log_softmax`` before the loss cancels; zero at frames past
a sequence's input length, and NaN where PyTorch's formula is NaN (an impossible
alignment, a log-probability of -inf). The VJP scales the saved gradient by the
upstream one; like PyTorch, ctc_loss has no second derivative.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes as dt
from ..autograd import grad_mode
from ..errors import EmberIndexError, EmberTypeError, EmberValueError, ShapeError
from ..tensor import Tensor
from .activation_kernels import _upcast
from .elementwise_composite import clamp_min
from .loss import _reduction, _require_float, _require_tensor
from .reduce import mean as _mean, sum as _sum
from .registry import AbstractValue, apply, autocast_inputs, register
from .shape import reshape, unsqueeze

__all__ = ["ctc_loss"]

_NAME = "ctc_loss"


# Inputs as arrays --------------------------------------------------------------------
def _check_length_values(xp, il, tl, steps):
    """PyTorch's checks of the length values (they cannot be checked before the op runs
    under ember.jit, so the forward does them)."""
    for name, lengths in (("input_lengths", il), ("target_lengths", tl)):
        if lengths.size and int(lengths.min()) < 0:
            raise EmberValueError(f"{_NAME}: expected {name} to have value at least 0, but "
                                  f"got value {int(lengths.min())}")
    if il.size and int(il.max()) > steps:
        raise EmberValueError(f"{_NAME}: expected input_lengths to have value at most "
                              f"{steps} (the input length T of log_probs), but got value "
                              f"{int(il.max())}")


def _padded_labels(xp, targets, tl, classes, blank):
    """The targets as an (N, L) int64 array, L the longest target, padded with blank."""
    n = tl.shape[0]
    longest = int(tl.max()) if n else 0
    columns = xp.arange(longest)
    inside = columns[None, :] < tl[:, None]
    targets = targets.astype(np.int64, copy=False)
    if targets.ndim == 2:
        if targets.shape[1] < longest:
            raise ShapeError(f"{_NAME}: padded targets of shape {tuple(targets.shape)} have "
                             f"{targets.shape[1]} columns, but a target length is {longest}")
        labels = targets[:, :longest]
    else:
        total = int(tl.sum())
        if targets.shape[0] != total:
            raise ShapeError(f"{_NAME}: 1-D (concatenated) targets must have sum("
                             f"target_lengths) = {total} elements, got {targets.shape[0]}")
        starts = xp.cumsum(tl) - tl
        where = xp.where(inside, starts[:, None] + columns[None, :], 0)
        labels = targets[where] if total else xp.zeros((n, longest), dtype=np.int64)
    labels = xp.where(inside, labels, blank)
    bad = (labels < 0) | (labels >= classes)
    if bad.any():
        raise EmberIndexError(f"{_NAME}: target label {int(labels[bad][0])} is out of range "
                              f"for log_probs with {classes} classes")
    return labels


def _log_add3(xp, a, b, c):
    """log(exp(a) + exp(b) + exp(c)), -inf where all three are -inf."""
    top = xp.maximum(a, b)
    xp.maximum(top, c, out=top)
    top[top == -np.inf] = 0
    total = xp.exp(a - top)
    total += xp.exp(b - top)
    total += xp.exp(c - top)
    xp.log(total, out=total)
    total += top
    return total


# The recursions ----------------------------------------------------------------------
def _alphas(xp, em, valid, skip):
    """log alpha (T, N, S): the log-probability of the prefixes ending at position s."""
    steps, n, positions = em.shape
    alpha = xp.full(em.shape, -np.inf, dtype=em.dtype)
    start = min(2, positions)
    alpha[0, :, :start] = em[0, :, :start]
    alpha[0] = xp.where(valid, alpha[0], -np.inf)
    one, two = (xp.full((n, positions), -np.inf, dtype=em.dtype) for _ in range(2))
    for t in range(1, steps):
        prev = alpha[t - 1]
        one[:, 1:] = prev[:, :-1]
        two[:, 2:] = prev[:, :-2]
        alpha[t] = xp.where(valid, _log_add3(xp, prev, one, xp.where(skip, two, -np.inf))
                            + em[t], -np.inf)
    return alpha


def _betas(xp, em, valid, skip, il, tl):
    """log beta (T, N, S): the log-probability of the suffixes from position s at frame t
    (both alpha and beta include frame t's emission)."""
    steps, n, positions = em.shape
    pos = xp.arange(positions)[None, :]
    ends = valid & ((pos == 2 * tl[:, None]) | (pos == 2 * tl[:, None] - 1))
    skip_ahead = xp.zeros_like(skip)
    skip_ahead[:, :-2] = skip[:, 2:]            # s -> s + 2 allowed
    beta = xp.full(em.shape, -np.inf, dtype=em.dtype)
    one, two = (xp.full((n, positions), -np.inf, dtype=em.dtype) for _ in range(2))
    last = (il - 1)[:, None]
    for t in range(steps - 1, -1, -1):
        cur = xp.where(ends & (last == t), em[t], -np.inf)
        if t < steps - 1:
            nxt = beta[t + 1]
            one[:, :-1] = nxt[:, 1:]
            two[:, :-2] = nxt[:, 2:]
            rec = _log_add3(xp, nxt, one, xp.where(skip_ahead, two, -np.inf)) + em[t]
            cur = xp.where(valid & (last > t), rec, cur)
        beta[t] = cur
    return beta


def _gradient(xp, lp, em, labels, blank, alpha, beta, nll, il):
    steps, n, classes = lp.shape
    # alpha * beta / y / p per position (alpha and beta both hold y), summed per class:
    # the blanks (the even positions) directly, the labels by a bincount
    frac = alpha + beta
    frac -= em
    frac += nll[None, :, None]
    xp.exp(frac, out=frac)
    grad = xp.exp(lp)
    grad[:, :, blank] -= frac[:, :, 0::2].sum(-1)
    if labels.shape[1]:
        rows = (xp.arange(steps)[:, None, None] * n + xp.arange(n)[None, :, None]) * classes
        index = (rows + labels[None]).ravel()
        sums = xp.bincount(index, weights=frac[:, :, 1::2].ravel(),
                           minlength=steps * n * classes)
        grad -= sums.reshape(lp.shape).astype(grad.dtype, copy=False)
    # PyTorch's form exp(lp) - exp(log(sum) + nll - lp) is NaN here; this one is not
    nan = (lp == -np.inf) | xp.isposinf(nll)[None, :, None]
    grad = xp.where(nan, np.nan, grad)
    active = xp.arange(steps)[:, None] < il[None, :]
    return xp.where(active[:, :, None], grad, 0)


def _ctc_forward(xp, log_probs, targets, input_lengths, target_lengths, *, blank,
                 zero_infinity, with_grad):
    lp = _upcast(log_probs)
    steps, n, classes = lp.shape
    il = input_lengths.astype(np.int64, copy=False)
    tl = target_lengths.astype(np.int64, copy=False)
    _check_length_values(xp, il, tl, steps)
    labels = _padded_labels(xp, targets, tl, classes, blank)
    positions = 2 * labels.shape[1] + 1
    ext = xp.full((n, positions), blank, dtype=np.int64)
    ext[:, 1::2] = labels
    valid = xp.arange(positions)[None, :] < (2 * tl + 1)[:, None]
    skip = xp.zeros((n, positions), dtype=bool)
    skip[:, 2:] = ext[:, 2:] != ext[:, :-2]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        em = xp.take_along_axis(lp, xp.broadcast_to(ext[None], (steps, n, positions)), axis=2)
        alpha = _alphas(xp, em, valid, skip)
        batch = xp.arange(n)
        last = alpha[xp.maximum(il - 1, 0), batch]                        # (N, S)
        end = xp.take_along_axis(last, (2 * tl)[:, None], axis=1)[:, 0]
        before = xp.take_along_axis(last, xp.maximum(2 * tl - 1, 0)[:, None], axis=1)[:, 0]
        likelihood = xp.logaddexp(end, xp.where(tl > 0, before, -np.inf))
        # no frames: only the empty target is possible
        likelihood = xp.where(il == 0, xp.where(tl == 0, 0.0, -np.inf), likelihood)
        nll = -likelihood
        grad = None
        if with_grad:
            beta = _betas(xp, em, valid, skip, il, tl)
            grad = _gradient(xp, lp, em, labels, blank, alpha, beta, nll, il)
    if zero_infinity:
        infinite = xp.isposinf(nll)
        nll = xp.where(infinite, 0.0, nll)
        if grad is not None:
            grad = xp.where(infinite[None, :, None], 0.0, grad)
    out_dtype = log_probs.dtype
    grad = xp.empty((0,), dtype=out_dtype) if grad is None else grad.astype(out_dtype)
    return nll.astype(out_dtype), grad


def _ctc_vjp(node, grads):
    g, gg = grads
    if gg is not None:
        raise NotImplementedError(f"{_NAME}: the second derivative is not implemented (nor "
                                  "in PyTorch)")
    if g is None:
        return None, None, None, None
    saved = node.output(1)
    if saved.ndim != 3:
        raise RuntimeError(f"internal error: {_NAME} was recorded without its gradient")
    return saved * reshape(g, (1, -1, 1)), None, None, None


def _ctc_infer(log_probs, targets, input_lengths, target_lengths, *, blank, zero_infinity,
               with_grad):
    steps, n, classes = log_probs.shape
    grad_shape = (steps, n, classes) if with_grad else (0,)
    return AbstractValue((n,), log_probs.dtype), AbstractValue(grad_shape, log_probs.dtype)


_CTC_LOSS = register("ctc_loss", _ctc_forward, _ctc_vjp, n_outputs=2, saves_inputs=False,
                     saves_outputs=True, infer=_ctc_infer)


# The public function -----------------------------------------------------------------
def _lengths(arg: str, value, n: int, device) -> Tensor:
    """input_lengths or target_lengths as an (N,) int64 tensor."""
    if isinstance(value, Tensor):
        if value.dtype.is_floating_point or value.dtype.is_complex or value.dtype is dt.bool:
            raise EmberTypeError(f"{_NAME}: {arg} must be integral, got dtype "
                                 f"{value.dtype.name}")
        if value.numel() != n:
            raise ShapeError(f"{_NAME}: {arg} must have one entry per batch element "
                             f"(N = {n}), got shape {tuple(value.shape)}")
        return reshape(value, (n,)).to(dt.int64)
    if isinstance(value, (list, tuple)):
        if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                   for v in value):
            raise EmberTypeError(f"{_NAME}: {arg} must be a tensor or a list of ints, got "
                                 f"{value!r}")
        if len(value) != n:
            raise ShapeError(f"{_NAME}: {arg} must have one entry per batch element "
                             f"(N = {n}), got {len(value)}")
        from .creation import tensor
        return tensor([int(v) for v in value], dtype=dt.int64, device=device)
    raise EmberTypeError(f"{_NAME}: {arg} must be a tensor or a list/tuple of ints, got "
                         f"{type(value).__name__}")


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """Connectionist temporal classification loss: the negative log-probability of each
    target sequence summed over all its alignments to the input frames (labels may
    repeat, with ``blank`` between equal neighbours).

    Args:
        log_probs: (T, N, C) or unbatched (T, C) log-probabilities (``log_softmax``
            over C, the classes including blank).
        targets: padded (N, S) class indices, or 1-D: the targets concatenated
            (``sum(target_lengths)`` entries).
        input_lengths: (N,) frames used of each sequence (each at most T); a tensor or
            a list/tuple of ints.
        target_lengths: (N,) length of each target.
        blank: the blank label, in [0, C).
        reduction: ``'none'`` (the (N,) losses), ``'sum'``, or ``'mean'``: each loss
            divided by its target length (at least 1), then the mean over the batch.
        zero_infinity: zero the infinite losses (targets that no alignment of the input
            can produce) and their gradients.

    >>> lp = ember.randn(6, 2, 4).log_softmax(2)
    >>> F.ctc_loss(lp, ember.tensor([[1, 2], [3, 3]]), [6, 5], [2, 2]).shape
    ember.Size([])
    """
    reduction = _reduction(_NAME, None, None, reduction)
    _require_float(_NAME, log_probs)
    _require_tensor(_NAME, "targets", targets)
    (log_probs,) = autocast_inputs(_NAME, log_probs)  # float32 under autocast, as PyTorch
    if log_probs.ndim not in (2, 3):
        raise ShapeError(f"{_NAME}: expected log_probs of shape (T, N, C) or (T, C), got "
                         f"shape {tuple(log_probs.shape)}")
    batched = log_probs.ndim == 3
    lp = log_probs if batched else unsqueeze(log_probs, 1)
    steps, n, classes = lp.shape
    if lp.numel() == 0:
        raise EmberValueError(f"{_NAME}: log_probs must not be empty, got shape "
                              f"{tuple(log_probs.shape)}")
    if not 0 <= blank < classes:
        raise EmberValueError(f"{_NAME}: blank must be in the label range [0, {classes}), "
                              f"got {blank}")
    if targets.dtype is dt.bool or targets.dtype.is_complex:
        raise EmberTypeError(f"{_NAME}: expected integer targets, got dtype "
                             f"{targets.dtype.name}")
    if targets.ndim not in (1, 2) or targets.ndim == 2 and targets.shape[0] != n:
        raise ShapeError(f"{_NAME}: expected targets of shape (N, S) = ({n}, S) or 1-D "
                         f"(concatenated), got shape {tuple(targets.shape)}")
    il = _lengths("input_lengths", input_lengths, n, lp.device)
    tl = _lengths("target_lengths", target_lengths, n, lp.device)
    with_grad = grad_mode.is_grad_enabled() and lp.requires_grad
    nll = apply(_CTC_LOSS, lp, targets, il, tl, blank=int(blank),
                zero_infinity=bool(zero_infinity), with_grad=with_grad)[0]
    if reduction == "mean":
        return _mean(nll / clamp_min(tl.to(nll.dtype), 1))
    if reduction == "sum":
        return _sum(nll)
    return nll if batched else reshape(nll, ())
