"""Differentiating through a compiled function: ``loss = compiled_model(x)`` then an
eager ``loss.backward()``.

While tracing, when the function's outputs need gradients, the backward pass is traced
too, from cotangent inputs to the gradients of every differentiable tensor the function
read (its arguments and the parameters it reached). The joint graph is optimised as one,
then split: the forward part also returns the values the backward part reads
(residuals), and each call attaches one autograd node to the outputs whose VJP runs the
backward part. The eager engine then carries the gradients on into the tensors' own
graphs and ``.grad``.
"""
from __future__ import annotations

from ..autograd import grad_mode
from ..autograd.graph import Node, edge_of, run_backward
from ..errors import EmberError
from ..ops.registry import Op
from ..tensor import Tensor
from .ir import Graph, Input, Value
from .runtime import place
from .trace import TraceError, TracerArray, _target


def trace_backward(trace, outputs: list) -> list:
    """Record the backward pass of ``outputs`` (traced tensors needing gradients) into
    the trace; returns the differentiable inputs' targets (argument positions or
    tensors), in the order of ``graph.grad_outputs``."""
    graph = trace.graph
    n_inputs, n_instrs = len(graph.inputs), len(graph.instrs)
    cotangents = []
    for k, t in enumerate(outputs):
        v = Value(t.shape, t.dtype)
        graph.inputs.append(Input("cotangent", k, v, f"d(output {k})"))
        cotangents.append(Tensor._make(TracerArray(v, trace)))
    records = [rec for rec in trace.lifted.values()
               if rec.owner is None and rec.node[2] and rec.tensor._dtype.differentiable]
    tensors = [rec.tensor for rec in records]
    for t in tensors:  # gradients stop at the lifted tensors (they are leaves in here)
        t._requires_grad = True
    try:
        grads = run_backward(outputs, cotangents, retain_graph=True, create_graph=False,
                             inputs=tensors, allow_unused=True)
    except TraceError:
        raise  # a backward that reads values: not capturable (never a silent no-gradient)
    except EmberError:
        # an output whose graph the function already consumed (it called backward on
        # it): as in eager mode, no gradient can flow through it any more
        del graph.inputs[n_inputs:], graph.instrs[n_instrs:]
        return None
    finally:
        for rec in records:
            rec.tensor._requires_grad = rec.node[2]
    graph.grad_outputs = [None if g is None else trace.value_of(g) for g in grads]
    return [_target(rec) for rec in records]


def split(graph: Graph) -> tuple[Graph, Graph, int]:
    """(forward graph, backward graph, number of residuals) of a joint graph. The
    forward graph's outputs are the function's outputs followed by the residuals; the
    backward graph's inputs are the residuals followed by the cotangents."""
    forward_roots = graph.outputs + [u.value for u in graph.updates if u.value is not None]
    needed = {v.id for v in forward_roots}
    forward_ids = set()
    for ins in reversed(graph.instrs):
        if ins.effect or any(v.id in needed for v in ins.outputs):
            forward_ids.add(id(ins))
            needed.update(v.id for v in ins.inputs)
    fwd_instrs = [i for i in graph.instrs if id(i) in forward_ids]
    bwd_instrs = [i for i in graph.instrs if id(i) not in forward_ids]
    cotangent_ids = {inp.value.id for inp in graph.inputs if inp.kind == "cotangent"}
    made_in_bwd = {v.id for ins in bwd_instrs for v in ins.outputs} | cotangent_ids
    constant_ids = {c.value.id for c in graph.constants}

    residuals: dict[int, Value] = {}
    for v in [x for ins in bwd_instrs for x in ins.inputs] + \
            [g for g in graph.grad_outputs if g is not None]:
        if v.id not in made_in_bwd and v.id not in constant_ids:
            residuals.setdefault(v.id, v)

    fwd = Graph()
    fwd.inputs = [inp for inp in graph.inputs if inp.kind != "cotangent"]
    fwd.constants = graph.constants
    fwd.instrs = fwd_instrs
    fwd.outputs = graph.outputs + list(residuals.values())
    fwd.updates = graph.updates

    bwd = Graph()
    mapping = {}
    for k, v in enumerate(residuals.values()):
        fresh = Value(v.shape, v.dtype)
        bwd.inputs.append(Input("residual", k, fresh, f"residual {k}"))
        mapping[v.id] = fresh
    bwd.inputs += [inp for inp in graph.inputs if inp.kind == "cotangent"]
    bwd.constants = graph.constants
    bwd.instrs = bwd_instrs
    bwd.grad_outputs = list(graph.grad_outputs)
    bwd.replace_uses(mapping)
    return fwd, bwd, len(residuals)


class _NodeOp(Op):
    __slots__ = ("release",)  # frees the residuals after a backward (see Node.release)


def _gradients(results, inputs, fed, device) -> tuple:
    """The backward graph's results as gradient tensors for ``inputs``. One array that
    is the gradient of several inputs (two biases added to the same sum) becomes one
    tensor, so the engine sees it handed out twice and copies it before storing it in
    a ``.grad`` that later backwards add into; an array the graph was fed (an incoming
    gradient passed straight through) is copied here, since its caller still holds it."""
    fed_ids = {id(a) for a in fed}
    made: dict = {}
    out = []
    for r, t in zip(results, inputs):
        if r is None:
            out.append(None)
            continue
        g = made.get(id(r))
        if g is None:
            data = r.copy() if id(r) in fed_ids else r
            g = made[id(r)] = Tensor._make(place(data, device, t.device), t.device)
        out.append(g)
    return tuple(out)


class CompiledBackward:
    """The autograd op of one compiled specialisation: its VJP runs the backward graph
    on the residuals the forward call saved."""

    def __init__(self, name: str, executor, n_outputs: int, out_avals):
        self.op = _NodeOp(f"compiled_{name}", None, self._vjp, n_outputs=n_outputs,
                          saves_inputs=False)
        self.op.release = self._release
        self.executor = executor
        self.out_avals = out_avals  # (shape, dtype) of each differentiable output

    def attach(self, outputs: list, inputs: list, residuals: list) -> None:
        """Make ``outputs`` (tensors) the results of one node over ``inputs``."""
        edges = tuple(edge_of(t) for t in inputs)
        # the backward graph reads these tensors' values as they were: remember their
        # version counters, as eager mode does for saved tensors
        versions = [(t._version, t._version[0], t) for t in inputs]
        node = Node(self.op, inputs, edges, {"residuals": residuals, "versions": versions})
        for i, t in enumerate(outputs):
            if t is not None:
                t._node, t._out_index, t._requires_grad = node, i, True

    def _vjp(self, node, grads):
        if grad_mode.is_grad_enabled():
            raise EmberError("ember.jit: gradients of gradients (create_graph=True) through a "
                             "compiled function are not supported; call the function "
                             "eagerly for that (compiled.__wrapped__)")
        if node.params.get("residuals") is None:
            raise EmberError("ember.jit: backward through a compiled call a second time; "
                             "pass retain_graph=True to the first backward()")
        for counter, version, t in node.params["versions"]:
            if counter[0] != version:
                raise EmberError(
                    "one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: [{t.dtype.name} {list(t.shape)}], read by "
                    f"{node.name()}, is at version {counter[0]}; expected version {version} "
                    "instead. Hint: modify it after backward(), or clone it first.")
        grads = grads if isinstance(grads, tuple) else (grads,)
        ex = self.executor
        cot = [ex.xp.zeros(shape, dtype.np) if g is None else place(g._data, g.device, ex.device)
               for g, (shape, dtype) in zip(grads, self.out_avals)]
        fed = node.params["residuals"] + cot
        _, _, results = ex.run(fed)
        return _gradients(results, node.inputs, fed, ex.device)

    @staticmethod
    def _release(node) -> bool:
        node.params["residuals"] = None
        node.params["versions"] = ()
        return True
