"""The tape: a :class:`Node` per differentiable op call, and the backward engine.

A node holds its op, its inputs (the tensors when the VJP reads their values, else
only their shapes and dtypes), its parameters, and an edge per input to the node that
produced it (or to the leaf tensor itself). Edges only point from outputs towards
inputs and outputs are not stored on their node (only their arrays and version
counters, when the VJP needs them), so a graph is freed by reference counting as soon
as its last output is dropped; a backward without ``retain_graph`` frees the saved
values at once.
"""
from __future__ import annotations

import math

from ..errors import EmberError
from . import grad_mode

# ember.autograd.anomaly_mode while anomaly detection is on (its forward and backward hooks)
_anomaly = None
# set by ember.profiler while it records: ``_profile(node, call)`` gives the VJP call to
# make instead (the same, timed)
_profile = None


class Node:
    """One recorded op call; shown to users as ``tensor.grad_fn``."""
    __slots__ = ("op", "inputs", "edges", "params", "out_data", "versions", "out_versions",
                 "pre_hooks", "retain_hooks", "released", "__weakref__")

    def __init__(self, op, inputs, edges, params, out_data=None, outputs=None):
        self.op = op
        saves = op.saves_inputs
        if saves is True:
            # Saved-tensor versions, checked when the VJP reads an input's value.
            self.versions = tuple(t._version[0] for t in inputs)
        else:
            # Only shapes are needed of the inputs not saved; holding the tensors could
            # make a cycle (a view's node holding its base, whose graph reaches the view
            # after an in-place op). Non-float tensors never get a node, so they are safe
            # to keep (``where`` reads its condition).
            if saves:
                inputs = tuple(t if i in saves or not t._dtype.differentiable
                               else _InputMeta(t) for i, t in enumerate(inputs))
                self.versions = tuple(t._version[0] if i in saves else None
                                      for i, t in enumerate(inputs))
            else:
                inputs = tuple(_InputMeta(t) if t._dtype.differentiable else t
                               for t in inputs)
                self.versions = None
        self.inputs = inputs
        self.edges = edges
        self.params = params
        self.out_data = out_data
        # The outputs' version counters (not the outputs: that would be a cycle), so that
        # reading a saved output after it was modified in place is caught.
        self.out_versions = None
        if out_data is not None and outputs is not None:
            self.out_versions = tuple(None if t is None else (t._version, t._version[0])
                                      for t in outputs)
        self.pre_hooks = None
        self.retain_hooks = None
        self.released = False
        if _anomaly is not None:
            _anomaly.note_forward(self)

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
                if v is not None and t._version[0] != v:
                    raise _modified_error(self, t.dtype, t.shape, "an input", t._version[0], v)
        return self.inputs

    def output(self, index: int = 0):
        """The forward output ``index`` as a tensor attached to this node."""
        if self.released:
            raise _freed_error(self)
        if self.out_data is None or self.out_data[index] is None:
            raise EmberError(f"internal error: {self.name()} reads output {index}, which its "
                             "op does not save (register it with saves_outputs=True)")
        data = self.out_data[index]
        entry = None if self.out_versions is None else self.out_versions[index]
        if entry is not None:
            counter, v = entry
            if counter[0] != v:
                from ..dtypes import as_dtype
                raise _modified_error(self, as_dtype(data.dtype), data.shape,
                                      f"output {index}", counter[0], v)
        from ..tensor import Tensor
        t = Tensor._make(data, self.inputs[0].device)
        if grad_mode.is_grad_enabled():
            t._node, t._out_index, t._requires_grad = self, index, True
        return t

    def register_prehook(self, index: int, fn) -> "RemovableHandle":
        """Call ``fn(grad)`` on the gradient of output ``index`` before the VJP runs."""
        if self.pre_hooks is None:
            self.pre_hooks = {}
        return RemovableHandle(self.pre_hooks.setdefault(index, []), fn)

    def register_retain_hook(self, index: int, fn) -> None:
        """Call ``fn(grad)`` on output ``index``'s final gradient (after every pre-hook),
        which is what ``retain_grad`` stores."""
        if self.retain_hooks is None:
            self.retain_hooks = {}
        self.retain_hooks[index] = fn

    def release(self):
        """Free what the VJP saved (after a backward without ``retain_graph``)."""
        release_op = getattr(self.op, "release", None)
        saved = release_op(self) if release_op is not None else False
        if self.op.saves_inputs or self.out_data is not None or saved:
            self.released = True
            self.out_data = None
            # Keep only what the engine needs (shapes, dtypes), so the saved values die.
            self.inputs = tuple(t if isinstance(t, _InputMeta) else _InputMeta(t)
                                for t in self.inputs)


class _InputMeta:
    """What a node keeps of an input whose value it does not need: shape, dtype, device."""
    __slots__ = ("_shape", "dtype", "device")

    def __init__(self, t):
        self._shape, self.dtype, self.device = t._data.shape, t._dtype, t._device

    @property
    def shape(self):
        return _size_type()(self._shape)

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def dim(self) -> int:
        return len(self._shape)

    def numel(self) -> int:
        return math.prod(self._shape)

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    def __repr__(self) -> str:
        return f"<input of shape {tuple(self.shape)}, dtype {self.dtype.name}>"


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


def _modified_error(node, dtype, shape, which, version, expected) -> EmberError:
    return EmberError(
        "one of the variables needed for gradient computation has been modified by an "
        f"inplace operation: [{dtype.name} {list(shape)}], which is {which} of "
        f"{node.name()}, is at version {version}; expected version {expected} instead. "
        "Hint: clone the tensor before modifying it in place, or use the out-of-place op.")


def edge_of(t):
    """The edge from a consumer to tensor ``t`` (None when t needs no gradient)."""
    if not t._requires_grad:
        return None
    node = t._node
    return (t, 0) if node is None else (node, t._out_index)


def reachable_leaves(tensors):
    """The leaf tensors that need a gradient and that ``tensors`` were computed from,
    each once (what a backward pass from them would reach)."""
    stack = [e[0] for e in (edge_of(t) for t in tensors) if e is not None]
    seen = set()
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, Node):
            stack.extend(e[0] for e in item.edges if e is not None)
        else:
            yield item


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
            # The first input (the activations, by convention) is explored first, so
            # in the reversed order a layer's weights come right after its node rather
            # than after the whole graph: gradients become ready from the last layer
            # back, which is what lets data parallel start reducing them early.
            for e in reversed(item.edges):
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


# Callbacks queued by hooks of each running backward pass (innermost last).
_final_callbacks: list = []


def queue_callback(fn) -> None:
    """Call ``fn()`` once the running backward pass has finished (every gradient
    computed and accumulated), as PyTorch's ``Variable._execution_engine.queue_callback``.
    Only from inside a backward pass, e.g. from a tensor hook: data parallel queues the
    wait for its gradient all-reduces this way. Callbacks run in the order queued, and
    not at all when the backward pass raises."""
    if not _final_callbacks:
        raise EmberError("queue_callback: final callbacks can only be queued during a "
                         "backward pass (from a hook); no backward pass is running")
    _final_callbacks[-1].append(fn)


def run_backward(roots, grad_roots, retain_graph: bool, create_graph: bool,
                 inputs=None, allow_unused: bool = False):
    """Propagate ``grad_roots`` from ``roots`` back through the graph.

    With ``inputs`` given, returns their gradients (``autograd.grad``) and runs only the
    part of the graph that leads to them; otherwise gradients accumulate into the
    ``.grad`` of the leaves (``backward``). Then the callbacks queued by
    :func:`queue_callback` during the pass run.
    """
    queued: list = []
    _final_callbacks.append(queued)
    try:
        result = _propagate(roots, grad_roots, retain_graph, create_graph, inputs,
                            allow_unused)
        while queued:  # a callback may queue another
            queued.pop(0)()
    finally:
        _final_callbacks.pop()
    return result


def _propagate(roots, grad_roots, retain_graph, create_graph, inputs, allow_unused):
    buffers: dict = {}
    targets = []
    for i, (t, g) in enumerate(zip(roots, grad_roots)):
        e = edge_of(t)
        if e is None:
            raise EmberError(f"element {i} of tensors does not require grad and does not "
                             "have a grad_fn")
        _accumulate(buffers, id(e[0]), e[1], g)
        targets.append(e[0])
    order = _topological_order(targets)

    wanted = reach = None
    captured = {}
    if inputs is not None:
        wanted = {}
        for i, t in enumerate(inputs):
            e = edge_of(t)
            if e is not None:
                wanted.setdefault(id(e[0]), []).append((e[1], i))
        reach = _reaching(order, wanted)

    with grad_mode.set_grad_enabled(create_graph):
        # How many consumers each gradient object was handed to: a leaf keeps a
        # gradient without copying only when it is its sole holder (the caller holds the
        # root gradients; a hook may keep what it saw).
        handed = {id(g): 2 for g in grad_roots}
        # (id(target), index) -> the gradient buffer the engine made and may still add
        # into (the gradients of an input's basic-index views, without create_graph)
        # (while ember.jit traces, gradients are graph values: nothing to add into)
        owned = None if create_graph or _tracing() else {}
        for item in order:
            slot = buffers.pop(id(item), None)
            if slot is None or (reach is not None and id(item) not in reach):
                continue
            if owned:
                for index in slot:
                    owned.pop((id(item), index), None)
            if not isinstance(item, Node):
                grad = _run_hooks(item._hooks, slot[0])
                if item._hooks:
                    handed[id(grad)] = 2
                if wanted is None:
                    _accumulate_leaf(item, grad, handed.get(id(grad), 0) > 1, create_graph)
                    if item._hooks:
                        _run_post_accumulate_hooks(item)
                else:
                    for _, i in wanted[id(item)]:
                        captured[i] = grad
                continue
            if item.pre_hooks or item.retain_hooks:
                _run_node_hooks(item, slot)
            if wanted is not None:
                for index, i in wanted.get(id(item), ()):
                    captured[i] = slot.get(index)
                if not any(e is not None and id(e[0]) in reach for e in item.edges):
                    continue
            if owned is not None and getattr(item.op, "grad_index", None) is not None \
                    and _add_at_index(buffers, owned, item, slot[0]):
                continue
            call = _call_vjp if _anomaly is None else _anomaly.call_vjp
            if _profile is not None:
                call = _profile(item, call)
            grads_in = call(item, slot)
            for e, g in zip(item.edges, grads_in):
                if e is not None and g is not None:
                    handed[id(g)] = handed.get(id(g), 0) + 1
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


def _add_at_index(buffers, owned, node, grad) -> bool:
    """Add ``grad`` into the gradient buffer of the node's input at the op's
    ``grad_index`` (what its VJP followed by the engine's sum would give, without the
    zero-filled full-size gradient). False (nothing done: the caller runs the VJP) where
    the gradient's dtype differs from the input's."""
    edge = node.edges[0]
    meta = node.inputs[0]
    if edge is None or grad._dtype is not meta.dtype:
        return edge is None
    key = (id(edge[0]), edge[1])
    slot = buffers.get(key[0])
    if slot is None:
        slot = buffers[key[0]] = {}
    buf = slot.get(edge[1])
    index = node.op.grad_index(node)
    if buf is not None and owned.get(key) is buf:
        buf._data[index] += grad._data
        return True
    if buf is None:
        array = grad._device.backend.xp.zeros(meta._shape, grad._data.dtype)
        array[index] = grad._data
    else:
        array = buf._data.copy()
        array[index] += grad._data
    slot[edge[1]] = owned[key] = type(grad)._make(array, grad._device)
    return True


def _reaching(order, wanted):
    """Ids of the graph items from which some wanted item can be reached."""
    reach = set(wanted)
    for item in reversed(order):  # inputs before the nodes that consume them
        if isinstance(item, Node) and id(item) not in reach:
            if any(e is not None and id(e[0]) in reach for e in item.edges):
                reach.add(id(item))
    return reach


def _run_hooks(hooks, grad):
    if hooks:
        for hook in list(hooks):
            out = hook(grad)
            if out is not None:
                grad = out
    return grad


class PostAccumulateGradHook:
    """A leaf's hook run with the leaf after its ``.grad`` was accumulated
    (``Tensor.register_post_accumulate_grad_hook``). It sits in the leaf's list of
    gradient hooks, as one that leaves the gradient as it is."""
    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, grad):
        return None


def _run_post_accumulate_hooks(t) -> None:
    for hook in list(t._hooks):
        if isinstance(hook, PostAccumulateGradHook) and hook.fn(t) is not None:
            raise EmberError("Tensor post accumulate grad hooks should return None.")


def _run_node_hooks(node, slot):
    """Tensor hooks of the node's outputs, then ``retain_grad`` (which sees their result)."""
    if node.pre_hooks:
        for index, hooks in node.pre_hooks.items():
            if index in slot:
                slot[index] = _run_hooks(hooks, slot[index])
    if node.retain_hooks:
        for index, keep in node.retain_hooks.items():
            if index in slot:
                keep(slot[index])


def accumulate_grad(t, grad, create_graph: bool = False) -> None:
    """Add ``grad`` to ``t.grad`` (in place, as PyTorch does, unless building a graph)."""
    if t.grad is None:
        t.grad = grad
    elif create_graph:
        t.grad = t.grad + grad
    else:
        with grad_mode.no_grad():
            t.grad.add_(grad)


def _accumulate_leaf(t, grad, shared: bool, create_graph):
    """Store or add ``grad`` into ``t.grad``; ``shared`` says someone else holds it too.
    A stored gradient must be the leaf's own array, since later backwards add into it
    in place: views and shared or read-only arrays are copied first."""
    if not create_graph:
        grad = grad.detach()
    if t.grad is None:
        data = grad._data
        if getattr(data, "_ember_tracer", False):
            pass  # a traced value: the compiled graph's outputs are never aliased
        elif shared or data.base is not None or not getattr(data.flags, "writeable", True) \
                or not data.flags.c_contiguous:  # (CuPy arrays are always writeable)
            grad = grad.clone() if create_graph else type(grad)._make(data.copy(), grad._device)
    accumulate_grad(t, grad, create_graph)


def _tracing() -> bool:
    registry = _lazy.get("registry")
    if registry is None:
        from ..ops import registry
        _lazy["registry"] = registry
    return registry._trace is not None


# Modules and types the engine uses that import it in turn: looked up once, not per call.
_lazy: dict = {}


def _size_type():
    size = _lazy.get("Size")
    if size is None:
        from ..tensor import Size as size
        _lazy["Size"] = size
    return size


def _raw_shape(t) -> tuple:
    """The plain shape tuple of a tensor or of an input's :class:`_InputMeta`."""
    return t._shape if t.__class__ is _InputMeta else t._data.shape


def _call_vjp(node, slot):
    op = node.op
    if node.released and (op.saves_inputs or op.saves_outputs):
        raise _freed_error(node)
    if op.n_outputs == 1:
        g = slot[0]
    else:
        g = tuple(slot.get(i) for i in range(op.n_outputs))
    grads = op.vjp(node, g)
    if not isinstance(grads, tuple):
        grads = (grads,)
    out = []
    for i, (t, e, gi) in enumerate(zip(node.inputs, node.edges, grads)):
        if e is None or gi is None:
            out.append(None)
            continue
        if gi._data.shape != _raw_shape(t):
            if not op.broadcasting or not _sums_to(gi.shape, t.shape):
                raise EmberError(_bad_grad_shape(node, i, gi.shape, t.shape))
            gi = _sum_to(gi, t.shape)
        if gi.dtype is not t.dtype:
            gi = gi.to(t.dtype)
        out.append(gi)
    return out


def _sums_to(shape, target) -> bool:
    """Whether a gradient of ``shape`` sums down to ``target`` (target broadcasts to it)."""
    if len(target) > len(shape):
        return False
    return all(t in (1, s) for t, s in zip(target[::-1], shape[::-1]))


def _bad_grad_shape(node, index, got, expected) -> str:
    if getattr(node.op, "is_custom", False):
        return (f"Function {node.name()} returned an invalid gradient at index {index} - "
                f"got {list(got)} but expected shape compatible with {list(expected)}")
    return (f"internal error: {node.op.name}'s VJP returned a gradient of shape "
            f"{tuple(got)} for input {index} of shape {tuple(expected)}")


def _sum_to(g, shape):
    from ..ops.reduce import sum_to
    return sum_to(g, shape)
