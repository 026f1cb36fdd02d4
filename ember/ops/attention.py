"""Scaled dot-product attention, as ``torch.nn.functional.scaled_dot_product_attention``.

One fused primitive computes softmax(q @ k^T * scale + mask) @ v and keeps the attention
weights for its VJP. The VJP is one fused backward kernel for an ordinary backward, and
the same formula in ember ops (differentiable again) when a graph of the gradient is
being built. A row whose keys are all masked out gives zeros (and zero gradient), as
PyTorch 2's CPU kernels do, rather than NaN.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..autograd import grad_mode
from ..errors import EmberError, EmberTypeError, ShapeError
from ..tensor import Tensor
from . import attention_kernels, elementwise as ew
from ._xp import gemm, native_half_matmul
from .activation import _upcast  # half precision computes in float32
from .activation_kernels import _is_half
from .linalg import matmul
from .movement import repeat_interleave
from .reduce import sum as _sum
from .registry import AbstractValue, apply, autocast_inputs, register
from .shape import broadcast_shapes

__all__ = ["scaled_dot_product_attention"]

def _swap(a):
    return a.swapaxes(-1, -2)


def _product(xp, a, b):
    """``a @ b`` in float32, the softmax's precision. Where the array module multiplies
    half-precision matrices natively (cuBLAS on tensor cores), half operands multiply
    as they are (``a`` cast to ``b``'s dtype) and the result is widened; else they are
    widened first, as NumPy's half products are slow."""
    if _is_half(b) and native_half_matmul(xp):
        return _upcast(xp.matmul(a.astype(b.dtype, copy=False), b))
    return gemm(xp, _upcast(a), _upcast(b))


# The fused primitive ------------------------------------------------------------------
def _attention_forward(xp, q, k, v, *extra, scale, has_mask, has_dropout,
                       plain_softmax=False, heads_inside=False):
    """(output, attention weights). ``plain_softmax``: the softmax exactly as
    ``F.softmax`` computes it, a row whose every score is -inf giving NaN, not zeros
    (``ember.jit`` fuses such explicit attention into this op). ``heads_inside``: see
    :func:`_specialize`."""
    if xp is np and not has_dropout:
        mask = extra[0] if has_mask else None
        batch = q.shape[:-2]
        if k.shape[:-2] != batch or v.shape[:-2] != batch or \
                (mask is not None and mask.ndim > 2):
            batch = np.broadcast_shapes(*(a.shape[:-2] for a in (q, k, v) + extra))
        found = attention_kernels.forward(q, k, v, mask, scale, batch, plain_softmax,
                                          heads_inside)
        if found is not None:
            return found
    scores = _product(xp, q, _swap(k))
    scores *= scale
    if has_mask:
        scores = scores + _upcast(extra[0])
    shift = xp.max(scores, axis=-1, keepdims=True)
    if not plain_softmax:
        shift = xp.where(xp.isfinite(shift), shift, 0)  # fully masked rows
    weights = xp.exp(scores - shift)
    total = xp.sum(weights, axis=-1, keepdims=True)
    weights /= total if plain_softmax else xp.where(total == 0, 1, total)
    used = weights * _upcast(extra[-1]) if has_dropout else weights
    out = _product(xp, used, v)
    return out.astype(q.dtype, copy=False), weights.astype(q.dtype, copy=False)


def _attention_backward_forward(xp, g, q, k, v, weights, *extra, scale, has_dropout,
                                has_gp, need, heads_inside=False):
    """Gradients (q, k, v, scores) of the attention; those not needed are 0-d zeros.
    ``heads_inside``: see :func:`_specialize`."""
    if xp is np and not has_dropout and not has_gp and not need[3]:
        found = attention_kernels.backward(g, q, k, v, weights, scale, need[:3],
                                           heads_inside)
        if found is not None:
            zero = np.zeros((), dtype=q.dtype)
            return tuple(zero if a is None else a for a in found) + (zero,)
    p = _upcast(weights)
    keep = _upcast(extra[0]) if has_dropout else None
    zero = xp.zeros((), dtype=q.dtype)
    gv = _product(xp, _swap(p * keep if has_dropout else p), g) if need[2] else zero
    dp = _product(xp, g, _swap(v))
    if has_dropout:
        dp *= keep
    if has_gp:
        dp += _upcast(extra[-1])
    ds = p * (dp - xp.sum(dp * p, axis=-1, keepdims=True))
    gq = _product(xp, ds, k) * scale if need[0] else zero
    gk = _product(xp, _swap(ds), q) * scale if need[1] else zero
    gs = ds if need[3] else zero
    return tuple(a.astype(q.dtype, copy=False) for a in (gq, gk, gv, gs))


def _attention_vjp(n, grads):
    g, gp = grads
    inputs = n.saved_inputs()
    q, k, v = inputs[:3]
    params = n.params
    mask = inputs[3] if params["has_mask"] else None
    keep = inputs[-1] if params["has_dropout"] else None
    need = tuple(e is not None for e in n.edges[:3]) + \
        ((mask is not None and n.edges[3] is not None),)
    weights = n.output(1)
    if g is None:
        g = q.new_zeros(tuple(weights.shape[:-1]) + (v.shape[-1],))
    if not grad_mode.is_grad_enabled():
        extra = tuple(t for t in (keep, gp) if t is not None)
        gq, gk, gv, gs = apply(_ATTENTION_BACKWARD, g, q, k, v, weights, *extra,
                               scale=params["scale"], has_dropout=keep is not None,
                               has_gp=gp is not None, need=need)
    else:
        used = weights * keep if keep is not None else weights
        gv = matmul(used.mT, g) if need[2] else None
        dp = matmul(g, v.mT)
        if keep is not None:
            dp = dp * keep
        if gp is not None:
            dp = dp + gp
        gs = weights * (dp - _sum(dp * weights, -1, keepdim=True))
        gq = matmul(gs, k) * params["scale"] if need[0] else None
        gk = matmul(gs.mT, q) * params["scale"] if need[1] else None
    out = [gq if need[0] else None, gk if need[1] else None, gv if need[2] else None]
    if mask is not None:
        out.append(gs if need[3] else None)
    if keep is not None:
        out.append(None)
    return tuple(out)


def _attention_infer(q, k, v, *extra, scale, has_mask, has_dropout, plain_softmax=False):
    shapes = [tuple(q.shape[:-2]), tuple(k.shape[:-2]), tuple(v.shape[:-2])]
    shapes += [tuple(t.shape[:-2]) for t in extra]
    batch = tuple(np.broadcast_shapes(*shapes))
    length, keys = q.shape[-2], k.shape[-2]
    return (AbstractValue(batch + (length, v.shape[-1]), q.dtype),
            AbstractValue(batch + (length, keys), q.dtype))


def _specialize(forward):
    """For ``ember.jit``'s executor: ``forward`` with the results laid out with the heads
    inside the rows (``ember.ops.attention_kernels``), as the usual merge of heads
    (``y.transpose(1, 2).reshape(b, t, d)``) and the concatenated q, k and v gradients
    of a fused projection read them, without a copy. Only where no result leaves the
    graph (``changes_layout``): a user's ``.view`` of one expects PyTorch's layout."""
    def rule(avals, **params):
        if params.get("has_dropout"):
            return None

        def run(xp, *arrays):
            return forward(xp, *arrays, **params, heads_inside=True)
        run.changes_layout = True
        return run
    return rule


_ATTENTION = register("scaled_dot_product_attention", _attention_forward, _attention_vjp,
                      n_outputs=2, saves_outputs=True, broadcasting=True,
                      infer=_attention_infer, specialize=_specialize(_attention_forward))
def _attention_backward_infer(g, q, k, v, weights, *extra, scale, has_dropout, has_gp,
                              need):
    batch = tuple(weights.shape[:-2])
    length, keys = weights.shape[-2:]
    shapes = (batch + (length, q.shape[-1]), batch + (keys, k.shape[-1]),
              batch + (keys, v.shape[-1]), batch + (length, keys))
    return tuple(AbstractValue(shape if wanted else (), q.dtype)
                 for shape, wanted in zip(shapes, need))


_ATTENTION_BACKWARD = register("scaled_dot_product_attention_backward",
                               _attention_backward_forward, n_outputs=4,
                               infer=_attention_backward_infer,
                               specialize=_specialize(_attention_backward_forward))


# The public function ------------------------------------------------------------------
def _check(query, key, value):
    name = "scaled_dot_product_attention"
    for arg, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise EmberTypeError(f"{name}: argument '{arg}' must be a Tensor, not "
                                 f"{type(t).__name__}")
        if t.ndim < 2:
            raise ShapeError(f"{name}: expected {arg} of at least 2 dims (..., L, E), got "
                             f"shape {tuple(t.shape)}")
    if not query.dtype is key.dtype is value.dtype or not query.dtype.is_floating_point:
        raise EmberTypeError(f"{name}: expected query, key and value of the same floating "
                             f"dtype, got {query.dtype.name}, {key.dtype.name} and "
                             f"{value.dtype.name}")
    shapes = f"query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}"
    if query.shape[-1] != key.shape[-1]:
        raise ShapeError(f"{name}: query and key must have the same embedding size (last "
                         f"dim); got {shapes}")
    if key.shape[-2] != value.shape[-2]:
        raise ShapeError(f"{name}: key and value must have the same sequence length (dim "
                         f"-2); got {shapes}")
    return name, shapes


def _grouped(name, query, key, value, shapes):
    """Repeat key/value heads (dim -3) to match the query's, for grouped-query attention."""
    if query.ndim < 3 or key.ndim < 3 or value.ndim < 3:
        raise ShapeError(f"{name}: enable_gqa needs (..., heads, L, E) inputs; got {shapes}")
    hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
    if hk != hv or hq % hk:
        raise ShapeError(f"{name}: with enable_gqa the number of query heads must be a "
                         f"multiple of the key/value heads (which must agree); got {shapes}")
    if hq != hk:
        key = repeat_interleave(key, hq // hk, dim=-3)
        value = repeat_interleave(value, hq // hk, dim=-3)
    return key, value


def _additive_mask(name, attn_mask, query, length, keys):
    if attn_mask.dtype is dt.bool:
        zero = query.new_zeros(())
        return ew.where(attn_mask, zero, zero - math.inf)
    if attn_mask.dtype is not query.dtype:
        raise EmberTypeError(f"{name}: expected attn_mask of dtype bool or {query.dtype.name} "
                             f"(the query's), got {attn_mask.dtype.name}")
    try:
        broadcast_shapes(tuple(attn_mask.shape), (length, keys))
    except EmberError:
        raise ShapeError(f"{name}: attn_mask of shape {tuple(attn_mask.shape)} does not "
                         f"broadcast to the attention weights (..., {length}, {keys})") \
            from None
    return attn_mask


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """softmax(query @ key^T * scale + mask) @ value, for query (..., L, E), key
    (..., S, E) and value (..., S, Ev) (batch dims broadcast).

    Args:
        attn_mask: bool (True = may attend) or float (added to the scores), broadcasting
            to (..., L, S).
        dropout_p: dropout probability on the attention weights (default generator).
        is_causal: mask out keys after the query position (top-left aligned), instead of
            ``attn_mask``.
        scale: defaults to 1 / sqrt(E).
        enable_gqa: repeat the key/value heads (dim -3) to match the query heads.

    >>> q = ember.ones(1, 2, 3, 4)
    >>> F.scaled_dot_product_attention(q, q, q, is_causal=True).shape
    ember.Size([1, 2, 3, 4])
    """
    query, key, value, attn_mask = autocast_inputs("scaled_dot_product_attention", query, key,
                                                   value, attn_mask)
    name, shapes = _check(query, key, value)
    if is_causal and attn_mask is not None:
        raise EmberError(f"{name}: explicit attn_mask should not be set when is_causal=True")
    if not 0.0 <= dropout_p <= 1.0:
        raise EmberError(f"{name}: dropout_p must be between 0 and 1, got {dropout_p}")
    if enable_gqa:
        key, value = _grouped(name, query, key, value, shapes)
    length, keys = query.shape[-2], key.shape[-2]
    try:
        batch = broadcast_shapes(tuple(query.shape[:-2]), tuple(key.shape[:-2]),
                                 tuple(value.shape[:-2]))
    except EmberError:
        raise ShapeError(f"{name}: batch dims do not broadcast; got {shapes}") from None
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1]) if query.shape[-1] else 1.0
    if keys == 0:  # no keys: a sum over none, zeros (differentiable), as in PyTorch
        from .linalg import matmul
        return matmul(matmul(query, key.transpose(-2, -1)), value)
    mask = None
    if is_causal:
        allowed = np.tril(np.ones((length, keys), dtype=bool))
        mask = _additive_mask(name, Tensor._make(query._device.backend.asarray(allowed),
                                                 query.device), query, length, keys)
    elif attn_mask is not None:
        mask = _additive_mask(name, attn_mask, query, length, keys)
    extra = () if mask is None else (mask,)
    if dropout_p > 0:
        from .nn_misc import _keep_mask
        if mask is not None:
            batch = broadcast_shapes(batch, tuple(mask.shape[:-2]))
        extra += (_keep_mask(query, dropout_p, tuple(batch) + (length, keys)),)
    return apply(_ATTENTION, query, key, value, *extra, scale=float(scale),
                 has_mask=mask is not None, has_dropout=dropout_p > 0)[0]
