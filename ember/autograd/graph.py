"""The tape: a :class:`Node` per differentiable op call, and the backward engine.

A node holds its op, the input tensors (for the VJP and for the shapes and dtypes of
their gradients), its parameters, and an edge per input to the node that produced it
(or to the leaf tensor itself). Edges only point from outputs towards inputs and
outputs are not stored on their node (only their arrays, when the VJP needs them), so
a graph is freed by reference counting as soon as its last output is dropped.
"""
from __future__ import annotations

from ..errors import EmberError
from . import grad_mode


class Node:
    """One recorded op call; shown to users as ``tensor.grad_fn``."""
    __slots__ = ("op", "inputs", "edges", "params", "out_data", "versions", "pre_hooks",
                 "released", "__weakref__")

    def __init__(self, op, inputs, edges, params, out_data=None):
        self.op = op
        self.inputs = inputs
        self.edges = edges
        self.params = params
        self.out_data = out_data
        # Saved-tensor versions, checked when the VJP reads an input's value.
        self.versions = tuple(t._version[0] for t in inputs) if op.saves_inputs else None
        self.pre_hooks = None
        self.released = False

    def name(self) -> str:
        return self.op.grad_name

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"

    @property
    def next_functions(self):
        """((node or AccumulateGrad placeholder, output index), ...) like PyTorch."""
        return tuple((None, 0) if e is None else (e[0] if isinstance(e[0], Node)
                                                  else _LeafRef(e[0]), e[1])
                     for e in self.edges)

    # What a VJP reads -------------------------------------------------------------
    def saved_inputs(self):
        """The input tensors, checked against in-place modification since the forward."""
        if self.released:
            raise _freed_error(self)
        if self.versions is not None:
            for t, v in zip(self.inputs, self.versions):
                if t._version[0] != v:
                    raise EmberError(
                        "one of the variables needed for gradient computation has been "
                        f"modified by an inplace operation: [{t.dtype.name} {list(t.shape)}], "
                        f"which is an input of {self.name()}, is at version {t._version[0]}; "
                        f"expected version {v} instead. Hint: clone the tensor before "
                        "modifying it in place, or use the out-of-place op.")
        return self.inputs

    def output(self, index: int = 0):
        """The forward output ``index`` as a tensor attached to this node."""
        if self.released:
            raise _freed_error(self)
        from ..tensor import Tensor
        t = Tensor._make(self.out_data[index], self.inputs[0]._device)
        if grad_mode.is_grad_enabled():
            t._node, t._out_index, t._requires_grad = self, index, True
        return t

    def register_prehook(self, index: int, fn) -> "RemovableHandle":
        if self.pre_hooks is None:
            self.pre_hooks = {}
        return RemovableHandle(self.pre_hooks.setdefault(index, []), fn)

    def release(self):
        release_op = getattr(self.op, "release", None)
        if release_op is not None:
            release_op(self)
        if self.op.saves_inputs or self.out_data is not None:
            self.released = True
            self.out_data = None


class _LeafRef:
    """What ``next_functions`` shows for a leaf: PyTorch's AccumulateGrad."""
    __slots__ = ("variable",)

    def __init__(self, variable):
        self.variable = variable

    def name(self) -> str:
        return "AccumulateGrad"

    def __repr__(self) -> str:
        return f"<AccumulateGrad object at {id(self):#x}>"


class RemovableHandle:
    """Returned by ``register_hook``; ``handle.remove()`` unregisters the hook."""
    __slots__ = ("_hooks", "_fn")

    def __init__(self, hooks: list, fn):
        self._hooks = hooks
        self._fn = fn
        hooks.append(fn)

    def remove(self) -> None:
        if self._fn in self._hooks:
            self._hooks.remove(self._fn)


def _freed_error(node) -> EmberError:
    return EmberError(
        f"Trying to backward through the graph a second time (or to read saved tensors of "
        f"{node.name()} after they were freed). Saved tensors are freed after backward; "
        "pass retain_graph=True to the first backward() or autograd.grad() call if you "
        "need to backward through the graph again.")


def edge_of(t):
    """The edge from a consumer to tensor ``t`` (None when t needs no gradient)."""
    if not t._requires_grad:
        return None
    node = t._node
    return (t, 0) if node is None else (node, t._out_index)


# The engine --------------------------------------------------------------------------
def _topological_order(roots):
    """Nodes and leaf tensors reachable from ``roots``, each after everything feeding it."""
    order, seen = [], set()
    stack = [(r, False) for r in roots]
    while stack:
        item, expanded = stack.pop()
        if expanded:
            order.append(item)
            continue
        if id(item) in seen:
            continue
        seen.add(id(item))
        stack.append((item, True))
        if isinstance(item, Node):
            for e in item.edges:
                if e is not None and id(e[0]) not in seen:
                    stack.append((e[0], False))
    order.reverse()
    return order


def _accumulate(buffers, key, index, grad):
    slot = buffers.get(key)
    if slot is None:
        buffers[key] = {index: grad}
    elif index in slot:
        slot[index] = slot[index] + grad
    else:
        slot[index] = grad


def run_backward(roots, grad_roots, retain_graph: bool, create_graph: bool,
                 inputs=None, allow_unused: bool = False, accumulate: bool = True):
    """Propagate ``grad_roots`` from ``roots`` back through the graph.

    With ``inputs`` given, returns their gradients (``autograd.grad``); otherwise
    gradients accumulate into the ``.grad`` of the leaves (``backward``).
    """
    buffers: dict = {}
    targets = []
    for t, g in zip(roots, grad_roots):
        e = edge_of(t)
        if e is None:
            raise EmberError("element 0 of tensors does not require grad and does not "
                             "have a grad_fn")
        _accumulate(buffers, id(e[0]), e[1], g)
        targets.append(e[0])
    order = _topological_order(targets)

    wanted = None
    captured = {}
    if inputs is not None:
        wanted = {}
        for i, t in enumerate(inputs):
            e = edge_of(t)
            if e is not None:
                wanted.setdefault(id(e[0]), []).append((e[1], i))
        needed = _needed(order, wanted)

    with grad_mode.set_grad_enabled(create_graph):
        shared = {id(g) for g in grad_roots}  # grads a leaf must copy before keeping
        for item in order:
            slot = buffers.pop(id(item), None)
            if slot is None or (wanted is not None and id(item) not in needed):
                continue
            if not isinstance(item, Node):
                grad = _run_hooks(item._hooks, slot[0])
                if wanted is not None:
                    for _, i in wanted.get(id(item), ()):
                        captured[i] = grad
                elif accumulate:
                    _accumulate_leaf(item, grad, shared, create_graph)
                continue
            if item.pre_hooks:
                for index, hooks in item.pre_hooks.items():
                    if index in slot:
                        slot[index] = _run_hooks(hooks, slot[index])
            if wanted is not None:
                for index, i in wanted.get(id(item), ()):
                    captured[i] = slot.get(index)
            grads_in = _call_vjp(item, slot)
            for e, g in zip(item.edges, grads_in):
                if e is not None and g is not None:
                    shared.add(id(g))
                    _accumulate(buffers, id(e[0]), e[1], g)
            if not retain_graph:
                item.release()

    if inputs is None:
        return None
    result = []
    for i, t in enumerate(inputs):
        g = captured.get(i)
        if g is None and not allow_unused:
            raise EmberError(f"One of the differentiated Tensors (input {i}, shape "
                             f"{tuple(t.shape)}) appears to not have been used in the graph. "
                             "Set allow_unused=True if this is the desired behavior.")
        result.append(g)
    return tuple(result)


def _needed(order, wanted):
    """Nodes from which some wanted tensor is reachable (the rest need not run)."""
    needed = set(wanted)
    for item in reversed(order):
        if isinstance(item, Node) and id(item) not in needed:
            if any(e is not None and id(e[0]) in needed for e in item.edges):
                needed.add(id(item))
    return needed


def _run_hooks(hooks, grad):
    if hooks:
        for hook in list(hooks):
            out = hook(grad)
            if out is not None:
                grad = out
    return grad


def _accumulate_leaf(t, grad, shared, create_graph):
    if not create_graph:
        grad = grad.detach()
    if t.grad is None:
        data = grad._data
        if id(grad) in shared or not data.flags.writeable or not data.flags.c_contiguous:
            grad = grad.clone() if create_graph else type(grad)._make(data.copy(), grad._device)
        t.grad = grad
    else:
        t.grad = t.grad + grad


def _call_vjp(node, slot):
    op = node.op
    if op.n_outputs == 1:
        g = slot[0]
    else:
        g = tuple(slot.get(i) for i in range(op.n_outputs))
    grads = op.vjp(node, g)
    if not isinstance(grads, tuple):
        grads = (grads,)
    out = []
    for t, e, gi in zip(node.inputs, node.edges, grads):
        if e is None or gi is None:
            out.append(None)
            continue
        if gi.shape != t.shape:
            if not op.broadcasting:
                raise EmberError(f"internal error: {op.name}'s VJP returned a gradient of "
                                 f"shape {tuple(gi.shape)} for an input of shape "
                                 f"{tuple(t.shape)}")
            gi = _sum_to(gi, t.shape)
        if gi.dtype is not t.dtype:
            gi = gi.to(t.dtype)
        out.append(gi)
    return out


def _sum_to(g, shape):
    from ..ops.reduce import sum_to
    return sum_to(g, shape)
