"""Activation checkpointing: run part of a model without keeping its intermediate values,
and compute them again during backward.

``checkpoint(fn, *args)`` runs ``fn`` once, keeps only its tensor arguments (and the
parameters it used), and drops everything else it computed; when the gradient reaches
its outputs, ``fn`` runs again with gradients on and the gradients flow from there. The
results and gradients are those of ``fn(*args)``; the peak memory of a model whose blocks
are checkpointed is that of one block's intermediates instead of all of them.
"""
from __future__ import annotations

from typing import Any, Callable

from ..autograd import grad as _grad
from ..autograd import grad_mode
from ..autograd.function import Function
from ..autograd.graph import reachable_leaves
from ..errors import EmberError
from ..ops import registry
from ..ops.random import get_rng_state, set_rng_state
from ..tensor import Tensor

__all__ = ["checkpoint", "checkpoint_sequential"]


def _flatten(x, out: list):
    """The tensors of a (nested) output, in order; returns a rebuild spec."""
    if isinstance(x, Tensor):
        out.append(x)
        return None
    if isinstance(x, (tuple, list)):
        return (type(x), [_flatten(v, out) for v in x])
    return ("const", x)


def _rebuild(spec, tensors):
    if spec is None:
        return next(tensors)
    kind, items = spec
    if kind == "const":
        return items
    return kind(_rebuild(s, tensors) for s in items)


def _leaves_used(outputs: list, own: set) -> list:
    """Leaf tensors that need a gradient and that ``outputs`` were computed from, other
    than the tensors in ``own`` (the function's arguments): the parameters it used."""
    return [t for t in reachable_leaves(outputs) if id(t) not in own]


def _detached_like(t: Tensor) -> Tensor:
    """``t`` out of the graph, still marked as needing a gradient when it did (so the
    checkpoint node knows which outputs are differentiable)."""
    d = t.detach()
    d._requires_grad = t._requires_grad
    return d


class _Plan:
    """What the recomputation needs besides the saved tensors."""

    def __init__(self, function, args_spec, kwargs, n_args, rng_state, out_spec, outputs):
        self.function = function
        self.args_spec = args_spec
        self.kwargs = kwargs
        self.n_args = n_args
        self.rng_state = rng_state
        self.out_spec = out_spec
        self.outputs = outputs
        self.draws = None  # under ember.jit: the values the forward's random ops drew


class _Recompute(Function):
    """The checkpointed region as one graph node: inputs are the function's tensor
    arguments and the parameters it used; outputs are its tensor outputs."""

    @staticmethod
    def forward(ctx, plan: _Plan, *tensors):
        ctx.plan = plan
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(*tensors)
        outputs = plan.outputs
        plan.outputs = None  # the node must not keep them alive
        ctx.mark_non_differentiable(*[o for o in outputs if not o.requires_grad])
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *grads):
        plan = ctx.plan
        saved = ctx.saved_tensors
        args = [t.detach().requires_grad_(t.requires_grad) for t in saved[:plan.n_args]]
        leaves = list(saved[plan.n_args:])
        current = None
        if plan.rng_state is not None:
            current = get_rng_state()
            set_rng_state(plan.rng_state)
        trace = registry._trace
        if trace is not None:  # ember.jit: keep the recomputation apart from the forward
            outer, trace.region = trace.region, object()
            # the graph's random ops draw when it runs, not now: reuse the forward's
            outer_replay = trace.replay
            trace.replay = None if plan.draws is None else iter(plan.draws)
        try:
            with grad_mode.enable_grad():
                out = plan.function(*_rebuild(plan.args_spec, iter(args)), **plan.kwargs)
        finally:
            if current is not None:
                set_rng_state(current)
            if trace is not None:
                trace.region, trace.replay = outer, outer_replay
        outs = []
        _flatten(out, outs)
        roots, root_grads = [], []
        for o, g in zip(outs, grads):
            if g is not None and o._requires_grad:
                roots.append(o)
                root_grads.append(g)
        targets = [a for a in args if a._requires_grad] + leaves
        found = iter(())
        if roots and targets:
            found = iter(_grad(roots, targets, root_grads, retain_graph=True,
                               create_graph=grad_mode.is_grad_enabled(), allow_unused=True))
        arg_grads = [next(found) if a._requires_grad else None for a in args]
        return (None, *arg_grads, *found)


def checkpoint(function: Callable, *args, use_reentrant: bool | None = None,
               preserve_rng_state: bool = True, **kwargs) -> Any:
    """Run ``function(*args, **kwargs)`` without keeping its intermediate values; they
    are computed again when the gradient gets there.

    Gradients reach the tensor arguments and the parameters (leaf tensors) the function
    uses, through ``backward()`` and ``ember.autograd.grad`` alike.

    Args:
        function: what to run; it should compute the same thing when run again.
        args: its arguments (tensors, or nested tuples and lists of them, or anything).
        use_reentrant: accepted for compatibility; both variants give the same results
            here (ember always recomputes inside the graph, PyTorch's non-reentrant way).
        preserve_rng_state: replay the random numbers of the first run (so dropout draws
            the same mask when recomputed).
        kwargs: keyword arguments for ``function`` (not differentiated).

    >>> y = ember.utils.checkpoint(block, x)
    >>> y.sum().backward()     # block runs again here
    """
    if not grad_mode.is_grad_enabled():
        return function(*args, **kwargs)
    tensors: list = []
    args_spec = _flatten(list(args), tensors)
    detached = [t.detach().requires_grad_(t._requires_grad) if t.dtype.is_floating_point
                else t for t in tensors]
    rng_state = get_rng_state() if preserve_rng_state else None
    trace = registry._trace
    draws = outer_log = None
    if trace is not None and preserve_rng_state:
        outer_log, trace.draw_log = trace.draw_log, []
    try:
        out = function(*_rebuild(args_spec, iter(detached)), **kwargs)
    finally:
        if trace is not None and preserve_rng_state:
            draws, trace.draw_log = trace.draw_log, outer_log
            if outer_log is not None:
                outer_log.extend(draws)
    outs: list = []
    out_spec = _flatten(out, outs)
    leaves = _leaves_used(outs, {id(t) for t in detached})
    if not leaves and not any(t._requires_grad for t in tensors):
        return out  # nothing to differentiate: keep the result as it is
    plan = _Plan(function, args_spec, kwargs, len(tensors), rng_state, out_spec,
                 [_detached_like(o) for o in outs])
    plan.draws = draws
    del out
    results = _Recompute.apply(plan, *tensors, *leaves)
    return _rebuild(out_spec, iter(results))


def checkpoint_sequential(functions, segments: int, input, use_reentrant: bool | None = None,
                          preserve_rng_state: bool = True):
    """Run a Sequential (or a list of modules) in ``segments`` chunks, each but the last
    checkpointed (the last one's values are needed for the gradient at once).

    >>> y = ember.utils.checkpoint.checkpoint_sequential(model, 2, x)
    """
    if not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    if segments < 1:
        raise EmberError(f"checkpoint_sequential: segments must be at least 1, got {segments}")
    size = max(len(functions) // segments, 1)

    def run(start, end):
        def chunk(x):
            for f in functions[start:end]:
                x = f(x)
            return x
        return chunk

    start = 0
    for _ in range(segments - 1):
        if start + size >= len(functions):
            break
        input = checkpoint(run(start, start + size), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve_rng_state)
        start += size
    return run(start, len(functions))(input)
