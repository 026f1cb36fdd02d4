"""Graph passes, one a file, each ``pass(graph) -> graph`` and tested alone.

:func:`optimize` runs them in the order that lets each expose work for the next.
"""
from __future__ import annotations

from ..ir import Graph
from .epilogues import fuse_epilogues
from .conv_backward import fuse_conv_backward
from .cse import eliminate_common_subexpressions
from .dce import eliminate_dead_code
from .decompose import decompose_composites
from .fold_constants import fold_constants
from .fuse import fuse_elementwise
from .join_slices import join_slice_gradients
from .linear_chains import fuse_linear_chains
from .simplify import simplify

# Rewrites that keep the graph made of registry ops (so it can still be split into a
# forward and a backward part), then lowering into fused kernels: fused primitives
# into their elementwise steps first, so that those fuse with what is around them, and
# convolutions with the ReLU and pooling after them, and with their gradients.
SIMPLIFY = (fold_constants, simplify, join_slice_gradients, eliminate_common_subexpressions,
            eliminate_dead_code)
LOWER = (decompose_composites, fuse_epilogues, fuse_linear_chains, fuse_conv_backward,
         fuse_elementwise)
PIPELINE = SIMPLIFY + LOWER


def optimize(graph: Graph, passes=PIPELINE) -> Graph:
    """``graph`` after every pass of ``passes`` (default :data:`PIPELINE`)."""
    for run in passes:
        graph = run(graph)
    return graph


def lower(graph: Graph, renderer: str) -> Graph:
    """:data:`LOWER` for the fused kernels of ``renderer`` (``"c"``, ``"cuda"``,
    ``"numpy"``): the same passes, told what that renderer can hold (the NumPy
    executor keeps fused primitives whole; the CUDA renderer also fuses float16 and
    bfloat16 ops)."""
    from ..codegen import holds_half_types
    graph = decompose_composites(graph, renderer)
    graph = fuse_epilogues(graph, renderer)
    graph = fuse_linear_chains(graph, renderer)
    graph = fuse_conv_backward(graph, renderer)
    return fuse_elementwise(graph, half_types=holds_half_types(renderer))
