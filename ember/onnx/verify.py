"""``ember.onnx.verify``: run a model in ember and its exported file in ONNX Runtime on
the same inputs and compare."""
from __future__ import annotations

import os

import numpy as np

from ..autograd.grad_mode import no_grad
from ..compiler.jit import flatten
from .capture import OnnxExportError


class OnnxMismatchError(OnnxExportError):
    """ONNX Runtime's outputs differ from ember's by more than the tolerance."""


def verify(model, path, inputs, rtol: float = 1e-5, atol: float = 1e-5,
           verbose: bool = True) -> dict:
    """Run ``model(*inputs)`` in ember (eval mode, no grad) and the ONNX file ``path`` in
    ONNX Runtime, and compare every output.

    Args:
        model: the ember model that was exported.
        path: the ``.onnx`` file.
        inputs: a tensor or a tuple of arguments, as for ``export``.
        rtol, atol: the tolerance: every element must satisfy
            ``|ort - ember| <= atol + rtol * |ember|``.
        verbose: print the largest differences.

    Returns:
        ``{"max_abs": ..., "max_rel": ..., "outputs": n}``.

    Raises:
        OnnxMismatchError: an output's shape or values differ beyond the tolerance.

    Example::

        >>> ember.onnx.verify(model, "mlp.onnx", ember.randn(5, 4))
        {'max_abs': 1.1920929e-07, 'max_rel': 3.2e-07, 'outputs': 1}
    """
    from .export import require
    ort = require("onnxruntime")
    args = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
    leaves = flatten(tuple(args))[0]
    modes = [(m, m.training) for _, m in model.named_modules()] \
        if hasattr(model, "named_modules") else []
    for m, _ in modes:
        m.training = False
    try:
        with no_grad():
            expected = flatten(model(*args))[0]
    finally:
        for m, mode in modes:
            m.training = mode
    session = ort.InferenceSession(os.fspath(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    if len(names) != len(leaves):
        raise OnnxMismatchError(f"ember.onnx.verify: {path} takes {len(names)} inputs "
                                f"({names}), but {len(leaves)} tensors were given")
    feeds = {n: t.detach().cpu().numpy() for n, t in zip(names, leaves)}
    got = session.run(None, feeds)
    out_names = [o.name for o in session.get_outputs()]
    max_abs = max_rel = 0.0
    for name, e, g in zip(out_names, expected, got):
        e = e.detach().cpu().numpy()
        if e.shape != g.shape:
            raise OnnxMismatchError(f"ember.onnx.verify: output {name!r} has shape "
                                    f"{g.shape} in ONNX Runtime, expected {e.shape}")
        diff = np.abs(g.astype(np.float64) - e.astype(np.float64))
        ref = np.abs(e.astype(np.float64))
        if diff.size:
            max_abs = max(max_abs, float(diff.max()))
            max_rel = max(max_rel, float((diff / np.maximum(ref, np.finfo(np.float32).tiny)).max()))
        bad = diff > atol + rtol * ref
        if bad.any():
            k = np.unravel_index(int(np.argmax(diff - (atol + rtol * ref))), diff.shape)
            raise OnnxMismatchError(
                f"ember.onnx.verify: output {name!r} differs at {bad.sum()} of {bad.size} "
                f"elements (largest absolute difference {diff.max():.3g}; at {tuple(map(int, k))}: "
                f"ONNX Runtime {g[k]!r}, ember {e[k]!r}); expected |diff| <= {atol} + "
                f"{rtol} * |ember|")
    if verbose:
        print(f"ember.onnx.verify: {len(expected)} output(s) match; largest absolute "
              f"difference {max_abs:.3g}, largest relative {max_rel:.3g}")
    return {"max_abs": max_abs, "max_rel": max_rel, "outputs": len(expected)}
