"""Graph passes, one a file, each ``pass(graph) -> graph`` and tested alone.

:func:`optimize` runs them in the order that lets each expose work for the next.
"""
from __future__ import annotations

from ..ir import Graph
from .cse import eliminate_common_subexpressions
from .dce import eliminate_dead_code

PIPELINE = (eliminate_common_subexpressions, eliminate_dead_code)


def optimize(graph: Graph) -> Graph:
    """``graph`` after every pass of :data:`PIPELINE`."""
    for run in PIPELINE:
        graph = run(graph)
    return graph
