"""Structured pruning made real: attention heads by norm, and :func:`shrink`, which cuts
pruned output channels out of Linear/Conv2d layers (and the matching inputs out of the
next layer) so the model really gets smaller.
"""
from __future__ import annotations

import numpy as np

from ..autograd import grad_mode
from ..errors import EmberValueError
from ..nn import (ELU, GELU, Conv2d, Dropout, Flatten, Hardtanh, Identity, LeakyReLU, Linear,
                  MaxPool2d, Module, Parameter, ReLU, ReLU6, Sequential, SiLU, Sigmoid, Tanh)
from ..ops.creation import tensor as _tensor
from .methods import _count, _current, _norms, _smallest, custom_from_mask, pruned_parameters
from .methods import remove

__all__ = ["prune_attention_heads", "shrink"]

# Modules between two layers through which a channel that is constant stays constant
# (and keeps its index): activations act on each value, max pooling of a constant map is
# the constant, dropout is the identity in eval mode.
_ELEMENTWISE = (ReLU, ReLU6, GELU, Tanh, Sigmoid, SiLU, ELU, LeakyReLU, Hardtanh, Identity,
                Dropout)
_PASS_THROUGH = _ELEMENTWISE + (MaxPool2d,)


def prune_attention_heads(block: Module, amount=0.25, n=2, num_heads: int | None = None,
                          qkv: str = "qkv", proj: str = "proj") -> list[int]:
    """Prune whole attention heads of a block with a fused ``qkv`` Linear
    (``(3 * d, d)``: the q, k and v rows of each head) and an output ``proj`` Linear
    (``(d, d)``), such as ``ember.models.gpt.Block``.

    A head's importance is the ``n``-norm of its q, k and v rows of ``qkv.weight``
    together with its columns of ``proj.weight``; the ``amount`` least important heads
    have those rows (and their ``qkv.bias`` entries) and columns masked, so they add
    nothing to the block's output.

    Args:
        block: the module holding ``qkv`` and ``proj``.
        amount: a share in [0, 1] of the heads, or an int count.
        n: the norm (1, 2, ...).
        num_heads: defaults to ``block.n_heads``.

    Returns:
        the indices of the pruned heads.

    >>> prune.prune_attention_heads(gpt.blocks[0], amount=0.5)
    [1, 3]
    """
    heads = num_heads if num_heads is not None else getattr(block, "n_heads", None)
    if heads is None:
        raise EmberValueError("prune_attention_heads: give num_heads= (the block has no "
                              "n_heads attribute)")
    q, p = getattr(block, qkv, None), getattr(block, proj, None)
    if not isinstance(q, Linear) or not isinstance(p, Linear):
        raise EmberValueError(f"prune_attention_heads: expected Linear layers {qkv!r} and "
                              f"{proj!r} on {type(block).__name__}")
    d = p.in_features
    if q.out_features != 3 * d or d % heads:
        raise EmberValueError(f"prune_attention_heads: {qkv} has {q.out_features} outputs "
                              f"and {proj} {d} inputs; expected 3 * {d} and {d} divisible by "
                              f"num_heads={heads}")
    hd = d // heads
    q_w, q_mask = _current(q, "weight")
    p_w, p_mask = _current(p, "weight")
    rows = [np.r_[h * hd:(h + 1) * hd, d + h * hd:d + (h + 1) * hd,
                  2 * d + h * hd:2 * d + (h + 1) * hd] for h in range(heads)]
    cols = [np.arange(h * hd, (h + 1) * hd) for h in range(heads)]
    stacked = np.stack([np.concatenate([(q_w * q_mask)[rows[h]].ravel(),
                                        (p_w * p_mask)[:, cols[h]].ravel()])
                        for h in range(heads)])
    norms = _norms(stacked, n, 0)
    alive = np.array([p_mask[:, cols[h]].any() for h in range(heads)])
    k = _count("prune_attention_heads", amount, heads)
    drop = sorted(int(h) for h in _smallest(norms, alive, max(0, k - int((~alive).sum()))))
    row_mask = np.ones(3 * d)
    col_mask = np.ones((d, d))
    for h in drop:
        row_mask[rows[h]] = 0
        col_mask[:, cols[h]] = 0
    custom_from_mask(q, "weight", np.broadcast_to(row_mask[:, None], q_w.shape))
    if q.bias is not None or "bias_orig" in q._parameters:
        custom_from_mask(q, "bias", row_mask)
    custom_from_mask(p, "weight", col_mask)
    return drop


def _dead_outputs(layer: Module) -> np.ndarray:
    """Output channels whose every weight is zero (masked or not)."""
    weight, mask = _current(layer, "weight")
    effective = (weight * mask).reshape(weight.shape[0], -1)
    return ~effective.any(axis=1)


def _bias_values(layer: Module) -> np.ndarray:
    if layer.bias is None:
        return np.zeros(layer.weight.shape[0])
    bias, mask = _current(layer, "bias")
    return (bias * mask).astype(np.float64)


def _make_permanent(layer: Module) -> None:
    for name in pruned_parameters(layer):
        remove(layer, name)


def _slice_param(layer: Module, name: str, index, axis: int) -> None:
    param = layer._parameters[name]
    values = np.take(param.detach().numpy(), index, axis=axis)
    new = Parameter(_tensor(np.ascontiguousarray(values), device=param.device),
                    requires_grad=param.requires_grad)
    setattr(layer, name, new)


def _constant_through(chain: list[Module], values: np.ndarray) -> np.ndarray:
    """What constant per-channel ``values`` become after the elementwise modules of
    ``chain`` (max pooling and flattening keep a constant channel constant)."""
    out = _tensor(values)
    with grad_mode.no_grad():
        for module in chain:
            if isinstance(module, _ELEMENTWISE) and not isinstance(module, Dropout):
                out = module(out)
    return out.numpy().astype(np.float64)


def _shrink_pair(layer: Module, chain: list[Module], nxt: Module) -> int:
    """Remove ``layer``'s dead output channels and ``nxt``'s matching inputs; returns
    how many channels went."""
    dead = _dead_outputs(layer)
    if not dead.any() or dead.all():
        return 0
    # A dead channel still outputs act(bias): a constant the next layer sees; fold it
    # into the next bias (exact for a Linear, and for a Conv2d without padding).
    constants = _constant_through(chain, _bias_values(layer)[dead])
    flatten = any(isinstance(m, Flatten) for m in chain)
    channels = layer.weight.shape[0]
    if isinstance(nxt, Linear):
        spatial = nxt.in_features // channels if flatten else 1
        if spatial * channels != nxt.in_features:
            return 0
    elif isinstance(nxt, Conv2d):
        if flatten or nxt.groups != 1:
            return 0
        pad = nxt.padding
        padded = pad == "same" or (pad != "valid" and bool(np.any(np.atleast_1d(pad))))
        if padded and np.any(constants != 0):
            return 0  # zero padding would make the constant vary at the borders
    else:
        return 0
    keep = np.flatnonzero(~dead)
    next_w, next_mask = _current(nxt, "weight")
    next_w = (next_w * next_mask).astype(np.float64)
    if isinstance(nxt, Linear):
        per_channel = next_w.reshape(next_w.shape[0], channels, spatial)
        fold = (per_channel[:, dead, :].sum(axis=2) * constants).sum(axis=1)
        in_index = (keep[:, None] * spatial + np.arange(spatial)).ravel()
    else:
        fold = (next_w[:, dead].sum(axis=(2, 3)) * constants).sum(axis=1)
        in_index = keep
    if np.any(fold != 0) and nxt.bias is None:
        return 0
    _make_permanent(layer)
    _make_permanent(nxt)
    if np.any(fold != 0):
        with grad_mode.no_grad():
            nxt.bias.add_(_tensor(fold.astype(nxt.bias.detach().numpy().dtype)))
    _slice_param(layer, "weight", keep, 0)
    if layer.bias is not None:
        _slice_param(layer, "bias", keep, 0)
    _slice_param(nxt, "weight", in_index, 1)
    if isinstance(layer, Linear):
        layer.out_features = len(keep)
    else:
        layer.out_channels = len(keep)
    if isinstance(nxt, Linear):
        nxt.in_features = len(in_index)
    else:
        nxt.in_channels = len(keep)
    return int(dead.sum())


def shrink(model: Module) -> dict[str, int]:
    """Cut pruned output channels (all-zero rows of the weight, e.g. after
    :func:`ln_structured` with ``dim=0``) out of the Linear and Conv2d layers of every
    ``nn.Sequential`` in ``model``, with the matching input columns of the next Linear or
    Conv2d. A removed channel's constant output (its activated bias) is folded into the
    next layer's bias, so the model computes the same function with fewer parameters.

    The layers between two shrunk layers may be activations, Dropout, Identity,
    MaxPool2d and Flatten; a channel is left in place where that is not exact (a
    Conv2d with zero padding after a dead channel with a non-zero constant). Shrunk
    layers have their pruning made permanent. Build the optimizer after shrinking.

    Returns:
        ``{layer name: output channels removed}``.

    >>> prune.ln_structured(net[0], "weight", amount=0.5, dim=0)
    >>> prune.shrink(net)
    {'0': 64}
    """
    removed = {}
    for prefix, seq in model.named_modules():
        if not isinstance(seq, Sequential):
            continue
        items = list(seq._modules.items())
        for i, (name, layer) in enumerate(items):
            if not isinstance(layer, (Linear, Conv2d)):
                continue
            if isinstance(layer, Conv2d) and layer.groups != 1:
                continue
            chain, nxt = [], None
            for _, module in items[i + 1:]:
                if isinstance(module, (Linear, Conv2d)):
                    nxt = module
                    break
                if not isinstance(module, _PASS_THROUGH + (Flatten,)):
                    break
                chain.append(module)
            if nxt is None:
                continue
            count = _shrink_pair(layer, chain, nxt)
            if count:
                removed[f"{prefix}.{name}" if prefix else name] = count
    return removed
