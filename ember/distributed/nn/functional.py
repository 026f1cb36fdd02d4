"""Collectives that autograd differentiates: each returns new tensors (its inputs are
never modified) and its backward is the matching collective.

Two families, for two ways of reading a tensor that lives on several ranks:

- ``all_reduce``, ``all_gather``, ``all_gather_tensor``, ``reduce_scatter``,
  ``reduce_scatter_tensor``, ``broadcast``, ``reduce`` and ``all_to_all`` treat every
  rank's tensor as its own variable and the loss as the *sum* of every rank's loss (as
  ``torch.distributed.nn.functional`` does): the backward of an all-gather is a
  reduce-scatter of the gradients, the backward of a broadcast a reduce to ``src``.
- The Megatron-LM helpers ``copy_to_group``, ``reduce_from_group``,
  ``scatter_to_group`` and ``gather_from_group`` read a tensor that is *replicated*
  across the group (every rank holds the same value and computes the same loss) as one
  variable: ``copy_to_group`` is the identity forward and an all-reduce backward (each
  rank's branch adds its part of the gradient), ``reduce_from_group`` the reverse pair,
  and ``gather_from_group`` gives back only this rank's slice of the (replicated)
  gradient.

Every backward is written with these same functions, so gradients of gradients work.

>>> import ember.distributed.nn.functional as dF
>>> y = dF.all_reduce(x)            # sum over the group; x.grad gets the summed grads
>>> parts = dF.all_gather(x)        # a tuple, one tensor per rank
"""
from __future__ import annotations

from ...autograd.function import Function
from ...ops.creation import zeros_like
from ...ops.shape import cat, stack
from ...tensor import Tensor
from .. import collectives as dist
from ..collectives import ReduceOp
from ..process_group import REDUCE_OPS, DistributedError, ProcessGroup

__all__ = ["all_reduce", "all_gather", "all_gather_tensor", "reduce_scatter",
           "reduce_scatter_tensor", "broadcast", "reduce", "all_to_all", "copy_to_group",
           "reduce_from_group", "scatter_to_group", "gather_from_group"]


def _group(group: ProcessGroup | None) -> ProcessGroup:
    return dist._group(group)


def _op_name(name: str, op) -> str:
    op = getattr(op, "value", op)
    if op not in REDUCE_OPS:
        raise DistributedError(f"{name}: unknown reduce op {op!r}; expected ReduceOp.SUM, "
                               "AVG, MAX, MIN or PRODUCT")
    return op


def _fresh(tensor: Tensor) -> Tensor:
    """A contiguous copy to run an in-place collective on."""
    return tensor.detach().clone().contiguous()


def _check(name: str, tensor) -> None:
    if not isinstance(tensor, Tensor):
        raise DistributedError(f"{name}: expected an ember Tensor, got {type(tensor).__name__}")


# Per-rank variables ---------------------------------------------------------------------
class _AllReduce(Function):
    @staticmethod
    def forward(ctx, op, group, tensor):
        ctx.op, ctx.group = op, group
        out = _fresh(tensor)
        dist.all_reduce(out, op, group)
        if op not in (ReduceOp.SUM, ReduceOp.AVG):
            ctx.save_for_backward(tensor, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        op, group = ctx.op, ctx.group
        if op in (ReduceOp.SUM, ReduceOp.AVG):
            return None, None, _AllReduce.apply(op, group, grad)
        x, out = ctx.saved_tensors
        total = _AllReduce.apply(ReduceOp.SUM, group, grad)
        if op == ReduceOp.PRODUCT:
            # d(prod_i x_i)/dx_r is the product of the other ranks' values (exact at 0).
            everyone = stack(list(_AllGather.apply(group, x)))
            r = _group(group).rank
            others = cat([everyone[:r], everyone[r + 1:]])
            return None, None, total * others.prod(0)
        # max/min: the ranks holding the extreme share its gradient equally.
        hits = (x == out).to(grad.dtype)
        count = _fresh(hits)
        dist.all_reduce(count, ReduceOp.SUM, group)
        return None, None, total * hits / count


class _AllGather(Function):
    @staticmethod
    def forward(ctx, group, tensor):
        ctx.group = group
        outs = [zeros_like(tensor) for _ in range(_group(group).size)]
        dist.all_gather(outs, tensor.contiguous(), group)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        return None, _ReduceScatter.apply(ReduceOp.SUM, ctx.group, *grads)


class _ReduceScatter(Function):
    @staticmethod
    def forward(ctx, op, group, *inputs):
        ctx.op, ctx.group = op, group
        out = zeros_like(inputs[0])
        dist.reduce_scatter(out, [t.contiguous() for t in inputs], op, group)
        return out

    @staticmethod
    def backward(ctx, grad):
        parts = _AllGather.apply(ctx.group, grad)
        if ctx.op == ReduceOp.AVG:
            n = _group(ctx.group).size
            parts = tuple(p / n for p in parts)
        return (None, None) + tuple(parts)


class _Broadcast(Function):
    @staticmethod
    def forward(ctx, src, group, tensor):
        ctx.src, ctx.group = src, group
        out = _fresh(tensor)
        dist.broadcast(out, src, group)
        return out

    @staticmethod
    def backward(ctx, grad):
        # Only src's value reaches the outputs; reduce gives zeros on the other ranks.
        return None, None, _Reduce.apply(ctx.src, ReduceOp.SUM, ctx.group, grad)


class _Reduce(Function):
    @staticmethod
    def forward(ctx, dst, op, group, tensor):
        ctx.dst, ctx.group = dst, group
        out = _fresh(tensor)
        dist.reduce(out, dst, op, group)
        if dist.get_rank() != dst:
            out.zero_()
        return out

    @staticmethod
    def backward(ctx, grad):
        return None, None, None, _Broadcast.apply(ctx.dst, ctx.group, grad)


class _AllToAll(Function):
    @staticmethod
    def forward(ctx, group, *inputs):
        ctx.group = group
        outs = [zeros_like(inputs[0]) for _ in inputs]
        dist.all_to_all(outs, [t.contiguous() for t in inputs], group)
        return tuple(outs)

    @staticmethod
    def backward(ctx, *grads):
        # The exchange is its own transpose: what went from i to j comes back from j to i.
        return (None,) + tuple(_AllToAll.apply(ctx.group, *grads))


def all_reduce(tensor: Tensor, op=ReduceOp.SUM, group: ProcessGroup | None = None) -> Tensor:
    """The reduction of ``tensor`` over the group, as a new tensor on every rank.

    Backward: the gradients of every rank summed (``SUM``), averaged (``AVG``), routed to
    the ranks holding the extreme (``MAX``/``MIN``, ties share it), or times the product
    of the other ranks' values (``PRODUCT``).

    >>> y = dF.all_reduce(x)    # x.grad after y.sum().backward(): the world size
    """
    _check("all_reduce", tensor)
    return _AllReduce.apply(_op_name("all_reduce", op), group, tensor)


def all_gather(tensor: Tensor, group: ProcessGroup | None = None) -> tuple:
    """Every rank's ``tensor`` (same shape and dtype everywhere), as a tuple indexed by
    group rank. Backward: each rank's input gets the sum over ranks of the gradient of
    its entry (a reduce-scatter).

    >>> parts = dF.all_gather(ember.ones(2) * dist.get_rank())
    """
    _check("all_gather", tensor)
    return _AllGather.apply(group, tensor)


def all_gather_tensor(tensor: Tensor, dim: int = 0,
                      group: ProcessGroup | None = None) -> Tensor:
    """Every rank's ``tensor`` concatenated along ``dim`` in group-rank order (what
    ``all_gather_into_tensor`` does for ``dim=0``). Backward: this rank's slice of the
    gradient summed over ranks.

    >>> dF.all_gather_tensor(ember.ones(2, 3), dim=1).shape   # on 2 ranks
    ember.Size([2, 6])
    """
    return cat(list(all_gather(tensor, group)), dim)


def reduce_scatter(input_list, op=ReduceOp.SUM, group: ProcessGroup | None = None) -> Tensor:
    """``input_list`` (one tensor per rank) reduced element-wise over the group; rank
    ``i`` gets entry ``i``. Backward: entry ``i`` of every rank gets rank ``i``'s
    gradient (an all-gather). Unlike ``torch.distributed.nn.functional.reduce_scatter``
    it takes no output tensor: the result is new.
    """
    g = _group(group)
    input_list = list(input_list)
    if len(input_list) != g.size:
        raise DistributedError(f"reduce_scatter: input_list has {len(input_list)} tensors; "
                               f"expected one per rank ({g.size})")
    for t in input_list:
        _check("reduce_scatter", t)
    op = _op_name("reduce_scatter", op)
    if op not in (ReduceOp.SUM, ReduceOp.AVG):
        raise DistributedError(f"reduce_scatter: the differentiable version supports "
                               f"ReduceOp.SUM and AVG, got {op!r}")
    return _ReduceScatter.apply(op, group, *input_list)


def reduce_scatter_tensor(tensor: Tensor, dim: int = 0, op=ReduceOp.SUM,
                          group: ProcessGroup | None = None) -> Tensor:
    """``tensor`` reduced over the group and split into equal blocks along ``dim``;
    rank ``i`` gets block ``i``. The size of ``dim`` must divide by the group size.

    >>> dF.reduce_scatter_tensor(ember.ones(4, 3)).shape      # on 2 ranks
    ember.Size([2, 3])
    """
    _check("reduce_scatter_tensor", tensor)
    n = _group(group).size
    if tensor.ndim == 0 or tensor.shape[dim] % n:
        raise DistributedError(f"reduce_scatter_tensor: a tensor of shape "
                               f"{tuple(tensor.shape)} does not split into {n} equal blocks "
                               f"along dim {dim}")
    return reduce_scatter(tensor.chunk(n, dim), op, group)


def broadcast(tensor: Tensor, src: int, group: ProcessGroup | None = None) -> Tensor:
    """Rank ``src``'s ``tensor`` on every rank (``src`` is a global rank). Backward: the
    gradients of every rank summed into ``src``'s input; the other ranks' inputs get
    zeros.
    """
    _check("broadcast", tensor)
    return _Broadcast.apply(src, group, tensor)


def reduce(tensor: Tensor, dst: int, op=ReduceOp.SUM,
           group: ProcessGroup | None = None) -> Tensor:
    """The sum of every rank's ``tensor`` on rank ``dst`` (a global rank); zeros on the
    other ranks. Backward: ``dst``'s gradient, broadcast to every rank's input.
    """
    _check("reduce", tensor)
    op = _op_name("reduce", op)
    if op != ReduceOp.SUM:
        raise DistributedError(f"reduce: the differentiable version supports ReduceOp.SUM, "
                               f"got {op!r}")
    return _Reduce.apply(dst, op, group, tensor)


def all_to_all(input_list, group: ProcessGroup | None = None) -> tuple:
    """Entry ``j`` of rank ``i``'s ``input_list`` becomes entry ``i`` of rank ``j``'s
    result (all entries of one shape and dtype). Backward: the same exchange of the
    gradients, in reverse.
    """
    g = _group(group)
    input_list = list(input_list)
    if len(input_list) != g.size:
        raise DistributedError(f"all_to_all: input_list has {len(input_list)} tensors; "
                               f"expected one per rank ({g.size})")
    for t in input_list:
        _check("all_to_all", t)
    return _AllToAll.apply(group, *input_list)


# Replicated variables (Megatron-LM) -----------------------------------------------------
class _CopyToGroup(Function):
    @staticmethod
    def forward(ctx, group, tensor):
        ctx.group = group
        return tensor

    @staticmethod
    def backward(ctx, grad):
        return None, _ReduceFromGroup.apply(ctx.group, grad)


class _ReduceFromGroup(Function):
    @staticmethod
    def forward(ctx, group, tensor):
        ctx.group = group
        out = _fresh(tensor)
        dist.all_reduce(out, ReduceOp.SUM, group)
        return out

    @staticmethod
    def backward(ctx, grad):
        return None, _CopyToGroup.apply(ctx.group, grad)


def _last_dim_split(name: str, tensor: Tensor, group) -> tuple:
    g = _group(group)
    if tensor.ndim == 0 or tensor.shape[-1] % g.size:
        raise DistributedError(f"{name}: the last dimension of a tensor of shape "
                               f"{tuple(tensor.shape)} does not split into {g.size} equal "
                               "parts (one per rank of the group)")
    return g.rank, tensor.shape[-1] // g.size


class _ScatterToGroup(Function):
    @staticmethod
    def forward(ctx, group, tensor):
        ctx.group = group
        r, width = _last_dim_split("scatter_to_group", tensor, group)
        return tensor[..., r * width:(r + 1) * width].contiguous()

    @staticmethod
    def backward(ctx, grad):
        return None, _GatherFromGroup.apply(ctx.group, grad)


class _GatherFromGroup(Function):
    @staticmethod
    def forward(ctx, group, tensor):
        ctx.group = group
        return cat(list(_AllGather.apply(group, tensor)), -1)

    @staticmethod
    def backward(ctx, grad):
        return None, _ScatterToGroup.apply(ctx.group, grad)


def copy_to_group(tensor: Tensor, group: ProcessGroup | None = None) -> Tensor:
    """The identity forward; backward all-reduces the gradient (sum). Put it where a
    replicated tensor enters per-rank branches (the input of a column-parallel layer).
    """
    _check("copy_to_group", tensor)
    return _CopyToGroup.apply(group, tensor)


def reduce_from_group(tensor: Tensor, group: ProcessGroup | None = None) -> Tensor:
    """The sum over the group forward; backward passes the gradient through unchanged
    (it is replicated). Put it where per-rank partial sums become one replicated tensor
    (the output of a row-parallel layer).
    """
    _check("reduce_from_group", tensor)
    return _ReduceFromGroup.apply(group, tensor)


def scatter_to_group(tensor: Tensor, group: ProcessGroup | None = None) -> Tensor:
    """This rank's equal slice of a replicated tensor along its last dimension;
    backward all-gathers the slices' gradients into the full one.

    >>> dF.scatter_to_group(ember.arange(4.0)).tolist()    # rank 1 of 2
    [2.0, 3.0]
    """
    _check("scatter_to_group", tensor)
    return _ScatterToGroup.apply(group, tensor)


def gather_from_group(tensor: Tensor, group: ProcessGroup | None = None) -> Tensor:
    """Every rank's slice concatenated along the last dimension (a replicated result);
    backward keeps this rank's slice of the replicated gradient.
    """
    _check("gather_from_group", tensor)
    return _GatherFromGroup.apply(group, tensor)
