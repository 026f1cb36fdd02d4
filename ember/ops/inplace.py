"""In-place ops with autograd.

An in-place op is computed out of place and written back into the tensor's storage;
the tensor then takes the result's place in the graph. When the tensor is a view, its
base's graph is updated too (``view_scatter``), and other views of that base re-derive
their graph node lazily (``Tensor._refresh_view_node``), as PyTorch does. Every write
bumps the version counter shared by a base and its views, which is what catches a
tensor saved for backward and then modified.
"""
from __future__ import annotations

from ..autograd import grad_mode
from ..errors import EmberError
from . import registry
from .registry import apply, register


def _view_chain(view):
    """The (op, params) steps that make ``view`` from its base."""
    chain = []
    t = view
    while t._base is not None:
        parent, op, params = t._view_src
        chain.append((op, params))
        t = parent
    chain.reverse()
    return chain


def replay_view(view, base):
    """``view``'s view ops applied to ``base`` (a graph-connected view of base)."""
    from .inplace_shape import check_replayable
    check_replayable(view)  # (its chain may predate an in-place shape change: t_, ...)
    t = base
    for op, params in _view_chain(view):
        t = apply(op, t, **params)
    return t


def _view_scatter_forward(xp, base, src, chain):
    out = base.copy()
    region = out
    for op, params in chain:
        region = op.forward(xp, region, **params)
    region[...] = src
    return out


def _view_scatter_vjp(n, g):
    chain = n.params["chain"]
    gb = gs = None
    if n.edges[0]:
        gb = apply(_VIEW_SCATTER, g, g.new_zeros(n.inputs[1].shape), chain=chain)
    if n.edges[1]:
        gs = g
        for op, params in chain:
            gs = apply(op, gs, **params)
    return gb, gs


_VIEW_SCATTER = register("view_scatter", _view_scatter_forward, _view_scatter_vjp,
                         saves_inputs=False)


def _alias(t):
    """A new tensor object standing for ``t``'s current value and graph position."""
    from ..tensor import Tensor
    a = Tensor._make(t._data, t._device)
    a._requires_grad, a._node, a._out_index = t._requires_grad, t._node, t._out_index
    return a


def _check_leaf(name, target):
    if target._requires_grad and target._node is None and target._base is None:
        raise EmberError(f"{name}: a leaf Variable that requires grad is being used in an "
                         "in-place operation. Wrap the update in `with ember.no_grad():` "
                         "or operate on a clone.")
    base = target._base
    if base is not None and base._requires_grad and base._node is None:
        raise EmberError(f"{name}: a view of a leaf Variable that requires grad is being used "
                         "in an in-place operation.")


def _check_overlap(name, target):
    """PyTorch refuses to write into a tensor whose elements share memory (an expanded
    view); NumPy marks such views read-only, so only those need the look at strides."""
    arr = target._data
    if getattr(getattr(arr, "flags", None), "writeable", True):
        return
    if any(st == 0 and n > 1 for st, n in zip(arr.strides, arr.shape)):
        raise EmberError(f"{name}: more than one element of the written-to tensor (shape "
                         f"{list(target.shape)}, an expanded view) refers to a single memory "
                         "location; clone() the tensor before the in-place operation")


def _check_result(name, target, out):
    if out._data.shape != target._data.shape:
        raise EmberError(f"{name}: output with shape {list(target.shape)} doesn't match the "
                         f"broadcast shape {list(out.shape)}")
    if out._dtype._category > target._dtype._category:
        raise EmberError(f"{name}: result type {out._dtype.name} can't be cast to the "
                         f"desired output type {target._dtype.name}")


def inplace(name: str, target, compute, others=(), direct=None):
    """Make ``target`` hold ``compute(target)``, in its own storage; returns target.

    Args:
        compute: the op as a function of the tensor, written with out-of-place ops.
        others: the other tensor inputs (to know whether a graph is needed).
        direct: optionally, a faster ``direct(array)`` that writes the result into the
            array itself; used when no gradient is involved.
    """
    _check_overlap(name, target)
    recording = grad_mode._state.enabled
    if recording:
        if target._base is not None:
            target._refresh_view_node()
        _check_leaf(name, target)
        recording = target._requires_grad or any(
            getattr(o, "_requires_grad", False) for o in others)
    tracing = registry._trace is not None
    if not recording:
        if direct is not None and not tracing:
            direct(target._data)
        else:
            with grad_mode.no_grad():
                out = compute(target)
                _check_result(name, target, out)
                _write(target, out, tracing)
        target._version[0] += 1
        return target

    old = _alias(target)
    out = compute(old)
    _check_result(name, target, out)
    if out._dtype is not target._dtype:
        out = out.to(target._dtype)
    if not tracing:
        old._data = old._data.copy()  # the graph may have saved the old value
    _write(target, out, tracing)
    target._version[0] += 1
    previous = (target._node, target._out_index)
    target._node, target._out_index = out._node, out._out_index
    target._requires_grad = out._requires_grad
    if target._retains_grad:
        _move_retain_hook(previous, target)
    if target._base is not None:
        update_view_base(target)
    return target


def _write(target, out, tracing: bool) -> None:
    """Put ``out``'s value in ``target``: into its storage eagerly; while tracing, by
    making the tensor (and its base, for a view) stand for the new value."""
    if not tracing:
        target._data[...] = out._data
        return
    if out._dtype is not target._dtype:
        out = out.to(target._dtype)
    registry._trace.value_of(target)  # lift a tensor from outside before it is rebound
    target._data = out._data
    base = target._base
    if base is not None:
        registry._trace.value_of(base)  # lifted, so that tracing ends by restoring it
        with grad_mode.no_grad():
            new_base = apply(_VIEW_SCATTER, _alias(base), _alias(target),
                             chain=_view_chain(target))
        base._data = new_base._data


def _move_retain_hook(previous, target) -> None:
    """``retain_grad`` follows the tensor to its new place in the graph."""
    node, index = previous
    keep = node.retain_hooks.pop(index, None) if node is not None and node.retain_hooks \
        else None
    if keep is not None and target._node is not None:
        target._node.register_retain_hook(target._out_index, keep)


def update_view_base(view) -> None:
    """After ``view`` was written in place and given its new graph node, make its base's
    graph say so: base = base with the view's region replaced (``view_scatter``)."""
    base = view._base
    # Aliases, not the tensors: the base's node must not hold the view (a cycle).
    new_base = apply(_VIEW_SCATTER, _alias(base), _alias(view), chain=_view_chain(view))
    base._node, base._out_index = new_base._node, new_base._out_index
    base._requires_grad = new_base._requires_grad
    view._view_version = view._version[0]
