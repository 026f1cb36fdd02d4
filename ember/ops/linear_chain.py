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
from .nn_misc import _linear_forward
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


LINEAR_CHAIN = register("linear_chain", _forward)

__all__ = ["LINEAR_CHAIN"]
