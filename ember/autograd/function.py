"""Custom differentiable functions: subclass :class:`Function`, write ``forward`` and
``backward`` as static methods, call ``MyFn.apply(...)``."""
from __future__ import annotations

import weakref

from ..errors import EmberError, EmberTypeError
from . import grad_mode
from .graph import Node, edge_of


class _SavedOutput:
    """Stands in ctx for a saved output of the function (ctx must not hold its outputs:
    they point to the node, which holds ctx)."""
    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


class FunctionCtx:
    """The ``ctx`` a custom Function's forward and backward share."""

    def __init__(self):
        self._saved = ()
        self._saved_versions = ()
        self._node_ref = None
        self.needs_input_grad = ()
        self.materialize_grads = True
        self._non_differentiable = set()
        self._dirty = set()

    def save_for_backward(self, *tensors) -> None:
        """Keep tensors (inputs, outputs or None) for ``backward``; reading them there
        fails if they were modified in place in between."""
        from ..tensor import Tensor
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise EmberTypeError(f"save_for_backward can only save tensors or None, "
                                     f"got {type(t).__name__}")
        self._saved = tensors
        self._saved_versions = tuple(None if t is None else t._version[0] for t in tensors)

    @property
    def saved_tensors(self) -> tuple:
        """The tensors given to ``save_for_backward``, in order."""
        if self._saved is None:
            raise EmberError("Trying to backward through the graph a second time (or to "
                             "read the saved tensors of a custom Function after they were "
                             "freed); pass retain_graph=True to the first backward() call")
        node = self._node_ref() if self._node_ref is not None else None
        out = []
        for t, v in zip(self._saved, self._saved_versions):
            if isinstance(t, _SavedOutput):
                out.append(node.output(t.index))  # version-checked there
                continue
            if t is not None and t._version[0] != v:
                raise EmberError("one of the variables needed for gradient computation has "
                                 "been modified by an inplace operation: "
                                 f"[{t.dtype.name} {list(t.shape)}], saved by "
                                 f"{node.name() if node else 'a custom Function'}, is at "
                                 f"version {t._version[0]}; expected version {v} instead")
            out.append(t)
        return tuple(out)

    def mark_non_differentiable(self, *tensors) -> None:
        """Outputs that get no gradient (integer indices, masks)."""
        self._non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors) -> None:
        """Inputs that forward modified in place (and returns as outputs)."""
        self._dirty.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool) -> None:
        """With False, backward gets None (not zeros) for outputs that got no gradient."""
        self.materialize_grads = bool(value)


class _FunctionOp:
    """Makes a Function subclass look like a registry op to the engine."""
    broadcasting = True  # like PyTorch, a gradient that sums to the input's shape is fine
    saves_inputs = False
    saves_outputs = False
    is_custom = True

    def __init__(self, cls, n_outputs: int, positions):
        self.cls = cls
        self.name = cls.__name__
        self.grad_name = cls.__name__ + "Backward"
        self.n_outputs = n_outputs
        self.positions = positions  # where each tensor input sits among forward's args

    def vjp(self, node, grads):
        ctx = node.params["ctx"]
        if not isinstance(grads, tuple):
            grads = (grads,)
        if ctx.materialize_grads:
            from ..ops.creation import zeros
            grads = tuple(zeros(m[0], dtype=m[1], device=m[2]) if g is None and m else g
                          for g, m in zip(grads, node.params["out_meta"]))
        result = self.cls.backward(ctx, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        n_args = node.params["n_args"]
        if len(result) < n_args or any(r is not None for r in result[n_args:]):
            raise EmberError(f"function {self.grad_name} returned an incorrect number of "
                             f"gradients (expected {n_args}, got {len(result)})")
        for i, r in enumerate(result[:n_args]):
            if r is not None and i not in self.positions:
                raise EmberError(f"function {self.grad_name} returned a gradient different "
                                 f"than None at position {i}, but the corresponding forward "
                                 "input was not a Tensor")
        return tuple(result[p] for p in self.positions)

    def release(self, node) -> bool:
        ctx = node.params["ctx"]
        if ctx._saved:
            ctx._saved = None
        return True


class Function:
    """Base class of custom autograd functions.

    ``forward(ctx, *args)`` runs without recording a graph; ``backward(ctx, *grads)``
    gets one gradient per output and returns one per forward argument (None for
    non-tensor arguments and inputs that need no gradient). A backward written with
    ember ops is itself differentiable (double backward).

    >>> class Exp(ember.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         y = x.exp()
    ...         ctx.save_for_backward(y)
    ...         return y
    ...     @staticmethod
    ...     def backward(ctx, grad):
    ...         (y,) = ctx.saved_tensors
    ...         return grad * y
    >>> y = Exp.apply(ember.ones(3, requires_grad=True))
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a custom Function must define forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("a custom Function must define backward(ctx, ...)")

    @classmethod
    def apply(cls, *args, **kwargs):
        """Run ``forward`` and, when an input requires grad, record it on the tape."""
        from ..tensor import Tensor
        ctx = FunctionCtx()
        positions = tuple(i for i, a in enumerate(args) if isinstance(a, Tensor))
        inputs = tuple(args[i] for i in positions)
        record = grad_mode.is_grad_enabled() and any(t._requires_grad for t in inputs)
        if record:
            for t in inputs:
                if t._base is not None and t._requires_grad:
                    t._refresh_view_node()
        # Graph positions as they were before forward (which may modify inputs in place).
        edges = tuple(edge_of(t) for t in inputs) if record else ()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        with grad_mode.no_grad():
            outputs = cls.forward(ctx, *args, **kwargs)
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        outs = tuple(_own_output(o, inputs, ctx, record, cls.__name__) for o in outs)
        if ctx._dirty:
            _check_dirty_returned(ctx, inputs, outs, cls.__name__)
        if not record:
            return outs[0] if single else outs

        saved_outputs = set()
        saved = []
        for t in ctx._saved:
            index = next((i for i, o in enumerate(outs) if t is o), None)
            if index is None:
                saved.append(t)
            else:
                saved.append(_SavedOutput(index))
                saved_outputs.add(index)
        ctx._saved = tuple(saved)
        metas = tuple((tuple(o.shape), o.dtype, o.device) if isinstance(o, Tensor) else None
                      for o in outs)
        out_data = None
        if saved_outputs:
            out_data = tuple(o._data if i in saved_outputs else None for i, o in enumerate(outs))
        node = Node(_FunctionOp(cls, len(outs), positions), inputs, edges,
                    {"ctx": ctx, "out_meta": metas, "n_args": len(args)}, out_data,
                    outputs=tuple(o if isinstance(o, Tensor) else None for o in outs))
        ctx._node_ref = weakref.ref(node)
        for i, o in enumerate(outs):
            if (isinstance(o, Tensor) and o.dtype.is_floating_point
                    and id(o) not in ctx._non_differentiable):
                o._node, o._out_index, o._requires_grad = node, i, True
                if id(o) in ctx._dirty and o._base is not None:
                    from ..ops.inplace import update_view_base
                    update_view_base(o)
        return outs[0] if single else outs


def _own_output(o, inputs, ctx, record, name):
    """An input returned as is becomes a new tensor sharing its storage, unless it was
    marked dirty (then it is that tensor, now at the function's place in the graph)."""
    from ..tensor import Tensor
    if not isinstance(o, Tensor) or not any(o is t for t in inputs):
        return o
    if id(o) not in ctx._dirty:
        return o.detach()
    if record:
        from ..ops.inplace import _check_leaf
        _check_leaf(name, o)
    o._version[0] += 1
    return o


def _check_dirty_returned(ctx, inputs, outs, name):
    returned = {id(o) for o in outs}
    for t in inputs:
        if id(t) in ctx._dirty and id(t) not in returned:
            raise EmberError(f"{name}: some inputs marked as dirty in forward were not "
                             "returned as outputs")
