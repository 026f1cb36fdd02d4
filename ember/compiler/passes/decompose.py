"""Decomposing fused primitives: softmax, layer norm, GELU and the like are single
registry ops with hand-tuned NumPy forwards, which no fused kernel could enter. Where
such an op has a :attr:`~ember.ops.registry.Op.decompose` rule (the same outputs written
in elementwise ops and trailing reductions), this pass replaces the instruction by the
rule's ops, so that :func:`~ember.compiler.passes.fuse.fuse_elementwise` puts them into
one generated loop nest — together with the residual adds, scalings and masks around
them.

A rule is ordinary ember code, recorded the way ``ember.jit`` records anything: run on
tracer tensors standing for the instruction's inputs. Numbers it uses become graph
constants (one-element ones are folded into kernels as literals).

With the NumPy backend (``EMBER_JIT_BACKEND=numpy``, or no C compiler) nothing is
decomposed: a primitive's own NumPy forward is faster than its steps run one by one. An
op whose forward has a hand-written C kernel faster than its fused decomposition (the
layer-norm backward: :attr:`~ember.ops.registry.Op.whole_in_c`) stays whole where
kernels are C.
"""
from __future__ import annotations

from ...autograd import grad_mode
from ...tensor import Tensor
from ..codegen import backend_name
from ..ir import Constant, Graph, Instr
from ..trace import Trace, TracerArray


def decompose_composites(graph: Graph, renderer: str | None = None) -> Graph:
    """Replace each instruction whose op has a ``decompose`` rule by the rule's ops
    (unless fused kernels run with NumPy: ``renderer`` is ``"numpy"``, or it is None
    and :func:`~ember.compiler.codegen.backend_name` says so).

    >>> g = decompose_composites(g)   # softmax -> amax, sub, exp, sum, div
    """
    renderer = backend_name() if renderer is None else renderer
    if renderer == "numpy":
        return graph
    instrs, replaced = [], {}
    for ins in graph.instrs:
        rule = getattr(ins.op, "decompose", None)
        whole = getattr(ins.op, "whole_in_c", None)
        if rule is not None and whole is not None and renderer == "c" and \
                whole(*ins.inputs, **ins.params):
            rule = None  # its own forward runs a hand-written C kernel, faster
        empty = any(0 in v.shape for v in ins.inputs + ins.outputs)
        recorded = None if rule is None or ins.effect or empty else _record(ins, rule)
        if recorded is None:
            instrs.append(ins)
            continue
        new_instrs, constants, results = recorded
        instrs.extend(new_instrs)
        graph.constants.extend(constants)
        for old, new in zip(ins.outputs, results):
            replaced[old.id] = new
    graph.instrs = instrs
    graph.replace_uses(replaced)
    return graph


def _record(ins: Instr, rule):
    """(instructions, constants, a value per output of ``ins``) recorded from
    ``rule`` on ``ins``'s inputs, or None when the rule declines."""
    with grad_mode.no_grad(), Trace() as sub:
        sub.region = ins.region
        args = [Tensor._make(TracerArray(v, sub)) for v in ins.inputs]
        results = rule(*args, **ins.params)
        if results is None:
            return None
        results = results if isinstance(results, tuple) else (results,)
        values = [sub.value_of(t) for t in results]
    for old, new in zip(ins.outputs, values, strict=True):
        if old.shape != new.shape or old.dtype is not new.dtype:
            raise AssertionError(f"{ins.op.name}: its decomposition makes "
                                 f"{new.dtype.name}{list(new.shape)} for output "
                                 f"{old.dtype.name}{list(old.shape)}")
    for new in sub.graph.instrs:
        new.where = ins.where
    # tensors the rule made (numbers, index ranges) were lifted as inputs: constants
    constants = sub.graph.constants + [Constant(rec.host_data(), rec.input.value)
                                       for rec in sub.lifted.values()]
    return sub.graph.instrs, constants, values
