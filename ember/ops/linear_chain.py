"""``linear_chain``: Linear layers one after another (each ``x @ w.T + b``, with its ReLU
where ``ember.jit`` folded one in), as one op that ``ember.jit`` puts in place of the
chain in graphs where nothing else reads the layers in between
(:mod:`ember.compiler.passes.linear_chains`): inference. It is never recorded by user
code and has no gradient.

On the CPU the BLAS driver runs the whole chain in one call
(:func:`ember.backends.cpu_blas.linear_chain`): each layer costs its product and no
Python; at batch 1 the mlp workload's three layers took 36-40 us against 44-63 us one by
one (in one process, alternating). The layers are the same products, except that one
too small for the driver on its own (NumPy's product then) runs on the driver's GEMM in
the chain: its result may differ in the last bits.
Anywhere else the layers run one by one.
"""
from __future__ import annotations

import numpy as np

from ..backends import cpu_blas
from .linear import _linear_forward
from .registry import register


def _forward(xp, x, *arrays, layers):
    """``layers``: ``(has_bias, relu)`` per layer; ``arrays`` each layer's weight and,
    where it has one, its bias."""
    if xp is np and x.__class__ is np.ndarray and x.ndim >= 2 and x.flags.c_contiguous:
        flat = x.reshape(-1, x.shape[-1])
        out = cpu_blas.linear_chain(flat, arrays, layers)
        if out is not None:
            return out.reshape(x.shape[:-1] + out.shape[-1:])
    k = 0
    for has_bias, relu in layers:
        x = _linear_forward(xp, x, *arrays[k:k + 1 + has_bias], relu=relu)
        k += 1 + has_bias
    return x


def _specialize(avals, *, layers):
    """The driver's plan for the chain, made once for the graph's shapes."""
    (shape, dtype), weights = avals[0], avals[1:]
    if len(shape) < 2:
        return None
    rows = int(np.prod(shape[:-1]))
    chain = cpu_blas.specialized_chain(((rows, shape[-1]), dtype), weights, layers)
    if chain is None:
        return None
    out_shape = tuple(shape[:-1]) + tuple(weights[-2 if layers[-1][0] else -1][0][:1])

    def run(xp, x, *arrays):
        done = None
        if xp is np and x.__class__ is np.ndarray:
            done = chain(x.reshape(rows, x.shape[-1]), arrays)
        return _forward(xp, x, *arrays, layers=layers) if done is None else \
            done.reshape(out_shape)
    return run


LINEAR_CHAIN = register("linear_chain", _forward, specialize=_specialize)

__all__ = ["LINEAR_CHAIN"]
