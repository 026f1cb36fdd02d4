"""Elementwise and reduction fusion: producer–consumer chains of elementwise ops, and
reductions over the last dims with what follows them, become one
:class:`~ember.compiler.fused.FusedKernel` instruction — one loop nest instead of one
pass over memory (and one temporary array) per op.

A group grows in program order. An instruction joins the groups of the values it reads
when it is an op a kernel can compute (``codegen/scalar.py``) and their shapes fit one
loop nest: the same shape; a one-element value (computed once, before the loop); or, in
a group with a reduction, one value per row of the reduced dims (a softmax's max and
sum, a layer norm's mean and variance). A value of the group that something outside
reads becomes an extra output of the kernel. Once an outside instruction reads a group,
the group takes no new members: the fused instruction stands where its last member
stood, so everything that reads it still comes after it, and effects are never members.
"""
from __future__ import annotations

import math

from ...ops.registry import Op
from ..codegen import scalar
from ..fused import FusedKernel, Step, keepdim_shape, plan_layout
from ..ir import Graph, Instr


class _Group:
    __slots__ = ("members", "domain", "reduced", "shapes", "region", "sealed", "parent")

    def __init__(self, ins, domain, reduced, shapes, region):
        self.members = [ins]
        self.domain, self.reduced = domain, reduced
        self.shapes = shapes  # every value's shape on the domain (for plan_layout)
        self.region = region  # a recompute region is fused only with itself
        self.sealed = False
        self.parent = None    # the group this one was merged into

    def root(self) -> "_Group":
        g = self
        while g.parent is not None:
            g = g.parent
        return g


# Ops worth a generated loop even alone: NumPy selects with a mask in several passes
# (a masked_fill copies, then fills; where tests the mask element by element).
SLOW_ALONE = frozenset({"where", "masked_fill"})


def fuse_elementwise(graph: Graph, half_types: bool = False) -> Graph:
    """Replace each fusible chain of at least two instructions (or a lone op of
    :data:`SLOW_ALONE`) by one fused kernel.

    Args:
        graph: the graph, rewritten in place.
        half_types: also fuse float16 and bfloat16 ops (for a renderer that computes
            them in float32, as the CUDA renderer does; the C renderer leaves them to
            NumPy).

    >>> g = fuse_elementwise(g)   # add, mul, exp over one shape -> fused_add_mul_exp
    """
    held = scalar.C_TYPES.keys() | (set(scalar.HALF_TYPES) if half_types else set())
    literals = {c.value.id: c.array for c in graph.constants
                if math.prod(c.value.shape) == 1 and c.value.dtype.name in held}
    order = {id(ins): i for i, ins in enumerate(graph.instrs)}
    group_of: dict[int, _Group] = {}  # value id -> the group that made it (or its root)
    groups: dict[int, _Group] = {}
    for ins in graph.instrs:
        sources = []
        for v in ins.inputs:
            g = group_of.get(v.id)
            if g is not None:
                g = g.root()
                if all(g is not s for s in sources):
                    sources.append(g)
        group = _start(ins, half_types)
        if group is None:
            for g in sources:
                g.sealed = True
            continue
        groups[id(group)] = group
        for g in sources:
            joined = None if g.sealed else _join(group, g)
            if joined is None:
                g.sealed = True
                continue
            absorbed = g if joined is group else group
            del groups[id(absorbed)]
            group = joined
        group_of[ins.outputs[0].id] = group
    fused = {}
    users = graph.users()
    roots = {v.id for v in graph.live_roots()}
    for g in groups.values():
        if len(g.members) < 2 and g.members[0].op.name not in SLOW_ALONE:
            continue
        g.members.sort(key=lambda m: order[id(m)])
        ins = _fused_instr(g, literals, users, roots)
        if ins is not None:
            fused[id(g.members[-1])] = ins
            for m in g.members[:-1]:
                fused[id(m)] = None
    if fused:
        kept = []
        for ins in graph.instrs:
            ins = fused.get(id(ins), ins)
            if ins is not None:
                kept.append(ins)
        graph.instrs = kept
    return graph


def _start(ins: Instr, half_types: bool) -> _Group | None:
    """A group holding just ``ins``, or None when ``ins`` cannot be fused."""
    op = ins.op
    if ins.effect or op.__class__ is not Op or op.n_outputs != 1:
        return None
    out = ins.outputs[0]
    if math.prod(out.shape) == 0:
        return None
    in_dtypes = [v.dtype for v in ins.inputs]
    if not scalar.can_lower(op.name, in_dtypes, out.dtype, ins.params, half_types):
        return None
    shapes = {tuple(v.shape) for v in ins.inputs}
    if op.name in scalar.REDUCTIONS:
        domain, reduced = tuple(ins.inputs[0].shape), tuple(ins.params["dims"])
        if math.prod(keepdim_shape(domain, reduced)) == math.prod(domain):
            return None  # nothing to reduce
        shapes.add(keepdim_shape(domain, reduced))
    else:
        domain, reduced = tuple(out.shape), ()
        shapes.add(tuple(out.shape))
    if plan_layout(domain, reduced, shapes) is None:
        return None
    return _Group(ins, domain, reduced, shapes, getattr(ins, "region", None))


def _join(a: _Group, b: _Group) -> _Group | None:
    """``a`` and ``b`` as one group (the larger, grown), or None when they do not fit
    one loop nest."""
    if a.region is not b.region:
        return None
    info = _merge_domains((a.domain, a.reduced), (b.domain, b.reduced))
    if info is None:
        return None
    shapes = a.shapes | b.shapes
    if plan_layout(info[0], info[1], shapes) is None:
        return None
    big, small = (a, b) if len(a.members) >= len(b.members) else (b, a)
    big.members.extend(small.members)
    big.domain, big.reduced = info
    big.shapes = shapes
    small.parent = big
    return big


def _merge_domains(a, b):
    (da, ra), (db, rb) = a, b
    if not ra and math.prod(da) == 1 and len(da) <= len(db):
        return b  # one-element values: computed once, before the loops
    if not rb and math.prod(db) == 1 and len(db) <= len(da):
        return a
    if da == db and (not ra or not rb or ra == rb):
        return da, ra or rb
    if ra and not rb and db == keepdim_shape(da, ra):
        return a  # b's values are one per row of a's reduction
    if rb and not ra and da == keepdim_shape(db, rb):
        return b
    return None


def _fused_instr(group: _Group, literals, users, roots) -> Instr | None:
    members = group.members
    made = {v.id for m in members for v in m.outputs}
    inputs, lits, local = [], [], {}
    for m in members:
        for v in m.inputs:
            if v.id in made or v.id in local:
                continue
            local[v.id] = None
            (lits if v.id in literals else inputs).append(v)
    for i, v in enumerate(inputs + lits):
        local[v.id] = i
    steps = []
    for m in members:
        v = m.outputs[0]
        local[v.id] = len(inputs) + len(lits) + len(steps)
        steps.append(Step(m.op, [local[a.id] for a in m.inputs], m.params, v.shape, v.dtype))
    inside = {id(m) for m in members}
    outs = [m.outputs[0] for m in members if m.outputs[0].id in roots or
            any(id(u) not in inside for u in users.get(m.outputs[0].id, ()))]
    if not outs:
        return None
    try:
        kernel = FusedKernel([(v.shape, v.dtype) for v in inputs],
                             [literals[v.id] for v in lits], steps,
                             [local[v.id] for v in outs], group.domain, group.reduced)
    except ValueError:
        return None
    fused = Instr(kernel, inputs, {}, [], where=members[-1].where)
    fused.outputs = outs
    for i, v in enumerate(outs):
        v.producer, v.index = fused, i
    return fused
