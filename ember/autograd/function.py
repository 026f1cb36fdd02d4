"""Custom differentiable functions: subclass :class:`Function`, write ``forward`` and
``backward`` as static methods, call ``MyFn.apply(...)``."""
from __future__ import annotations

from ..errors import EmberError
from . import grad_mode
from .graph import Node, edge_of


class FunctionCtx:
    """The ``ctx`` a custom Function's forward and backward share."""

    def __init__(self):
        self._saved = ()
        self._saved_versions = ()
        self._outputs_data = None
        self._node = None
        self.needs_input_grad = ()
        self.materialize_grads = True
        self._non_differentiable = set()
        self._dirty = set()

    def save_for_backward(self, *tensors) -> None:
        """Keep tensors for ``backward`` (checked against later in-place changes)."""
        self._saved = tensors
        self._saved_versions = tuple(None if t is None else t._version[0] for t in tensors)

    @property
    def saved_tensors(self) -> tuple:
        if self._saved is None:
            raise EmberError("Trying to backward through the graph a second time (saved "
                             "tensors of a custom Function were freed); pass "
                             "retain_graph=True to the first backward() call")
        out = []
        for t, v in zip(self._saved, self._saved_versions):
            if isinstance(t, int) and self._node is not None:
                out.append(self._node.output(t))  # one of our own outputs
                continue
            if t is not None and t._version[0] != v:
                raise EmberError("one of the variables needed for gradient computation has "
                                 "been modified by an inplace operation: "
                                 f"[{t.dtype.name} {list(t.shape)}] is at version "
                                 f"{t._version[0]}; expected version {v} instead")
            out.append(t)
        return tuple(out)

    def mark_non_differentiable(self, *tensors) -> None:
        self._non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors) -> None:
        self._dirty.update(id(t) for t in tensors)

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)


class _FunctionOp:
    """Makes a Function subclass look like a registry op to the engine."""
    broadcasting = False
    saves_inputs = False

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
            metas = node.params["out_meta"]
            grads = tuple(zeros(m[0], dtype=m[1]) if g is None else g
                          for g, m in zip(grads, metas))
        result = self.cls.backward(ctx, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        n_args = node.params["n_args"]
        if len(result) < n_args:
            result = result + (None,) * (n_args - len(result))
        elif len(result) > n_args:
            extra = result[n_args:]
            if any(r is not None for r in extra):
                raise EmberError(f"function {self.grad_name} returned an incorrect number of "
                                 f"gradients (expected {n_args}, got {len(result)})")
        return tuple(result[p] for p in self.positions)

    def release(self, node):
        node.params["ctx"]._saved = None


class _FunctionMeta(type):
    pass


class Function(metaclass=_FunctionMeta):
    """Base class of custom autograd functions.

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
        from ..tensor import Tensor
        ctx = FunctionCtx()
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        inputs = tuple(args[i] for i in positions)
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        with grad_mode.no_grad():
            outputs = cls.forward(ctx, *args, **kwargs)
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        # An input returned as is becomes a new tensor sharing its storage.
        outs = tuple(o.detach() if isinstance(o, Tensor) and any(o is i for i in inputs) else o
                     for o in outs)
        record = grad_mode.is_grad_enabled() and any(t._requires_grad for t in inputs)
        if record:
            for t in inputs:
                if t._base is not None and t._requires_grad:
                    t._refresh_view_node()
            op = _FunctionOp(cls, len(outs), positions)
            metas = tuple((tuple(o.shape), o.dtype) if isinstance(o, Tensor) else None
                          for o in outs)
            node = Node(op, inputs, tuple(edge_of(t) for t in inputs),
                        {"ctx": ctx, "out_meta": metas, "n_args": len(args)},
                        tuple(o._data if isinstance(o, Tensor) else None for o in outs))
            ctx._node = node
            # Saved outputs are kept as their index, so ctx does not hold them (no cycle).
            ctx._saved = tuple(_output_index(t, outs) for t in ctx._saved)
            for i, o in enumerate(outs):
                if (isinstance(o, Tensor) and o.dtype.is_floating_point
                        and id(o) not in ctx._non_differentiable):
                    o._node, o._out_index, o._requires_grad = node, i, True
        return outs[0] if single else outs


def _output_index(t, outs):
    for i, o in enumerate(outs):
        if t is o:
            return i
    return t
