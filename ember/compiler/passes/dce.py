"""Dead-code elimination: drop instructions whose outputs nothing reads."""
from __future__ import annotations

from ..ir import Graph


def eliminate_dead_code(graph: Graph) -> Graph:
    """Remove instructions no output, update or live instruction depends on.

    Instructions with an effect (random draws) stay, so the random stream advances as
    in eager mode; so do the inputs and constants (they cost nothing unread)."""
    live = {v.id for v in graph.live_roots()}
    kept = []
    for ins in reversed(graph.instrs):
        if ins.effect or any(v.id in live for v in ins.outputs):
            kept.append(ins)
            live.update(v.id for v in ins.inputs)
    kept.reverse()
    graph.instrs = kept
    graph.constants = [c for c in graph.constants if c.value.id in live]
    return graph
