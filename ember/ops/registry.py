"""The op registry: every primitive is one :class:`Op`, defined once.

An op has a forward written against the backend's array module (``xp``), a
vector-Jacobian product written with ember ops (so gradients of gradients work and the
compiler can trace it), and a shape/dtype rule. :func:`apply` runs an op eagerly and,
when a gradient is needed, records a :class:`~ember.autograd.graph.Node` on the tape.
"""
from __future__ import annotations

import threading
from typing import Callable

import numpy as np

from ..autograd import grad_mode
from ..autograd.graph import Node, edge_of
from ..errors import EmberError, EmberIndexError, EmberTypeError, ShapeError, describe
from ..tensor import Tensor

OPS: dict[str, "Op"] = {}
NO_COMPLEX, COMPLEX_FORWARD, COMPLEX_GRAD = 0, 1, 2
_observer = None  # set by tests to see every op call (shape-rule checks)
_trace = None     # the active ember.compiler.trace.Trace while ember.jit captures
# set by ember.profiler while it records: ``_profile(op, forward, inputs)`` gives the
# forward to call instead (the same, timed)
_profile = None


class _AutocastHook(threading.local):
    """Set by ``ember.amp.autocast`` (per thread): ``cast(name, inputs)`` returns the
    inputs cast as the autocast policy of the op or function ``name`` says; ``key``
    describes the active autocast settings (part of ``ember.jit``'s cache key)."""
    cast = None
    key = None


_autocast = _AutocastHook()
_autocasting = 0  # threads inside an autocast region: apply's one check while there are none


class Op:
    """A primitive.

    Args:
        name: the registry name (``"add"``); the grad_fn shows ``AddBackward0``.
        forward: ``forward(xp, *arrays, **params)`` returning an array (or a tuple of
            arrays when ``n_outputs > 1``).
        vjp: ``vjp(node, grad)`` returning a gradient (ember Tensor or None) per input;
            ``node.saved_inputs()``, ``node.output(i)`` and ``node.params`` give what the
            forward saw. None marks the op as not differentiable.
        infer: ``infer(*avals, **params)`` returning ``(shape, dtype)`` (or a tuple of
            them) without computing anything; defaults to evaluating the forward on
            zero-stride placeholder arrays.
        saves_inputs: the VJP reads the inputs' values (True), none of them (False), or
            only those at the given positions (a tuple); saved inputs are checked
            against in-place modification before the VJP reads them.
        saves_outputs: the VJP reads the outputs' values.
        broadcasting: inputs broadcast, so gradients are summed back to input shapes.
        is_view: the output shares memory with the first input.
        dynamic_shape: the output shape depends on the values (``nonzero``, ``unique``).
        grad_index: for an op whose VJP is "zeros of input 0's shape with the gradient
            written at an index" (basic indexing views), ``grad_index(node)`` gives that
            index, so a first-order backward adds the gradient straight into one buffer
            per input instead of materializing a zero-filled gradient per output.
        decompose: for a fused primitive (softmax, layer norm, GELU, ...):
            ``decompose(*tensors, **params)`` computing the same outputs (one tensor, or
            a tuple of ``n_outputs``) in simpler ember ops — elementwise ops and
            reductions over the trailing dims, which ``ember.jit`` fuses into generated
            loops — or None where that would not fuse (a reduction over leading dims, a
            half-precision input).
        whole_in_c: for an op with a ``decompose`` rule whose own forward runs a
            hand-written C kernel that beats the fused decomposition:
            ``whole_in_c(*values, **params)`` (values with ``shape`` and ``dtype``) says
            whether it does for these inputs; where fused kernels are generated as C, the
            op then stays whole (in ``ember.jit`` and in eager mode).
        fast: set by :mod:`ember.compiler.eager` for ops with a ``decompose`` rule: a
            forward with ``forward``'s signature that eager mode calls instead, running
            compiled kernels for large inputs.
        specialize: for ``ember.jit``'s executor on the CPU:
            ``specialize(avals, **params)`` (``(shape, dtype)`` of each input, NumPy
            dtypes) gives ``run(xp, *arrays)``, the forward for inputs of exactly those
            shapes and dtypes with whatever follows from them (a C loop's plan) worked
            out once, or None. ``run`` checks what the graph does not fix (memory
            layout, the process) and takes ``forward``'s path where that does not fit.
    """
    release = None  # (a compiled backward's op frees its residuals: see Node.release)
    __slots__ = ("name", "forward", "vjp", "infer", "n_outputs", "saves_inputs",
                 "saves_outputs", "broadcasting", "is_view", "dynamic_shape", "grad_name",
                 "explain", "grad_index", "decompose", "whole_in_c", "fast", "specialize",
                 "complex")

    def __init__(self, name: str, forward: Callable, vjp: Callable | None = None, *,
                 infer: Callable | None = None, n_outputs: int = 1,
                 saves_inputs: bool | tuple = True, saves_outputs: bool = False,
                 broadcasting: bool = False, is_view: bool = False,
                 dynamic_shape: bool = False, explain: Callable | None = None,
                 grad_index: Callable | None = None, decompose: Callable | None = None,
                 whole_in_c: Callable | None = None, specialize: Callable | None = None):
        self.name = name
        self.forward = forward
        self.vjp = vjp
        self.infer = infer
        self.n_outputs = n_outputs
        self.saves_inputs = saves_inputs
        self.saves_outputs = saves_outputs
        self.broadcasting = broadcasting
        self.is_view = is_view
        self.dynamic_shape = dynamic_shape
        self.explain = explain
        self.grad_index = grad_index
        self.decompose = decompose
        self.whole_in_c = whole_in_c
        self.specialize = specialize
        self.fast = None
        # complex inputs: NO (an error naming the op), FORWARD (its forward takes them),
        # GRAD (its VJP too); set by ember.ops.complex_support
        self.complex = NO_COMPLEX
        self.grad_name = "".join(p.capitalize() for p in name.split("_")) + "Backward0"

    def __repr__(self) -> str:
        return f"<ember op {self.name}>"


def register(name: str, forward: Callable, vjp: Callable | None = None, **flags) -> Op:
    """Create an :class:`Op` and add it to the registry under ``name``."""
    if name in OPS:
        raise ValueError(f"op {name!r} is already registered")
    op = OPS[name] = Op(name, forward, vjp, **flags)
    return op


def defvjp(op: Op):
    """Decorator that sets ``op``'s VJP (lets the VJP use ops defined after it)."""
    def deco(fn):
        op.vjp = fn
        return fn
    return deco


def apply(op: Op, *inputs, **params):
    """Run ``op`` on tensors ``inputs``; record it on the tape when a grad is needed."""
    if _autocasting and _autocast.cast is not None:
        inputs = _autocast.cast(op.name, inputs)
    first = inputs[0]
    device = first._device
    for t in inputs:
        if t._device is not device:
            device, inputs = _common_device(op, inputs)
        if t._base is not None and t._view_version != t._version[0]:
            t._refresh_view_node()  # its base changed in place since it was made
        if t._dtype.is_complex and op.complex == NO_COMPLEX:
            raise _complex_error(op, inputs)
    trace = _trace
    if trace is not None:
        if trace.rewrites is not None and op.name in trace.rewrites:
            res = trace.rewrite(op, inputs, params)
            if res is not None:
                return res
        out = _traced_forward(trace, op, inputs, params)
    else:
        backend = device.backend
        forward = op.fast or op.forward
        if _profile is not None:
            forward = _profile(op, forward, inputs)
        try:
            if backend.scoped:  # one of several GPUs: run where the inputs live
                with backend.activate():
                    out = forward(backend.xp, *[t._data for t in inputs], **params)
            else:
                out = forward(backend.xp, *[t._data for t in inputs], **params)
        except EmberError:
            raise
        except Exception as exc:  # NumPy's message, restated as an ember error
            raise _forward_error(op, inputs, params, exc) from None
        if _observer is not None:
            _observer(op, inputs, params, out)

    record = grad_mode._state.enabled and op.vjp is not None
    if record:
        record = False
        for t in inputs:
            if t._requires_grad:
                record = True
                break
    if op.n_outputs == 1:
        res = Tensor._make(out, device)
        if op.is_view:
            _link_view(res, first, op, params)
        if record and res._dtype.differentiable:
            _record(op, inputs, params, (res,), out if op.saves_outputs else None)
        if trace is not None:
            trace.note(res)
        return res
    results = tuple(Tensor._make(o, device) for o in out)
    if trace is not None:
        for r in results:
            trace.note(r)
    if record:
        outs = tuple(r for r in results if r._dtype.differentiable)
        if outs:
            _record(op, inputs, params, results, out if op.saves_outputs else None)
    return results


def _common_device(op: Op, inputs: tuple):
    """The device of an op whose inputs are on different devices, and the inputs moved
    there. As in PyTorch, a 0-d CPU tensor (a scalar: a step count, a loss scale) may
    join tensors on another device, and is copied over; anything else is an error."""
    from ..backends import CPU
    devices = []
    for t in inputs:
        if t._device not in devices and not (t._device is CPU and t.ndim == 0):
            devices.append(t._device)
    if len(devices) > 1:
        raise EmberError(f"{op.name}: expected all tensors on the same device, got "
                         f"{devices[0]} and {devices[1]} (only 0-d CPU tensors may join "
                         f"tensors on another device); move them with .to(device)")
    if not devices:  # (all on the CPU)
        return CPU, inputs
    device = devices[0]
    from .creation import to_device
    return device, tuple(t if t._device is device else to_device(t, device) for t in inputs)


def apply_in_given_dtypes(op: Op, *inputs, **params):
    """:func:`apply`, with the inputs' dtypes kept even inside ``ember.amp.autocast``:
    for a public function whose autocast rule differs from its primitive's (``mv`` runs
    in float32 where the ``matmul`` primitive would run in lower precision)."""
    if not _autocasting or _autocast.cast is None:
        return apply(op, *inputs, **params)
    saved, _autocast.cast = _autocast.cast, None
    try:
        return apply(op, *inputs, **params)
    finally:
        _autocast.cast = saved


def autocast_inputs(name: str, *inputs) -> tuple:
    """``inputs`` cast by the active autocast policy for ``name`` (unchanged outside
    ``ember.amp.autocast``). For public functions that check their arguments' dtypes, or
    are composed of several ops, before reaching :func:`apply`; non-tensors pass through.
    """
    cast = _autocast.cast if _autocasting else None
    return inputs if cast is None else cast(name, inputs)


def _traced_forward(trace, op, inputs, params):
    """While ``ember.jit`` traces: record the op instead of running it."""
    try:
        return trace.emit(op, inputs, params)
    except EmberError:
        raise
    except Exception as exc:  # the shape rule failed: restate as the eager error would
        raise _forward_error(op, inputs, params, exc) from None


def _complex_error(op, inputs) -> EmberTypeError:
    dtypes = ", ".join(t._dtype.name for t in inputs)
    return EmberTypeError(f"{op.name}: complex tensors are not supported by this op "
                          f"(got {dtypes}); the ops that take them are listed in "
                          "ember/ops/complex_support.py")


def _complex_grad_error(op) -> EmberTypeError:
    return EmberTypeError(f"{op.name}: the gradient for complex tensors is not implemented; "
                          "compute it under ember.no_grad() or detach the complex tensors")


def _record(op, inputs, params, results, out_data):
    if op.complex != COMPLEX_GRAD:  # (an op without complex inputs may still make them)
        for t in results:
            if t is not None and t._dtype.is_complex:
                raise _complex_grad_error(op)
        if op.complex == COMPLEX_FORWARD:
            for t in inputs:
                if t._dtype.is_complex:
                    raise _complex_grad_error(op)
    edges = tuple(edge_of(t) for t in inputs)
    if op.n_outputs == 1 and out_data is not None:
        out_data = (out_data,)
    node = Node(op, inputs, edges, params, out_data, results)
    for i, r in enumerate(results):
        if r._dtype.differentiable:
            r._node, r._out_index, r._requires_grad = node, i, True


def _link_view(res, src, op, params):
    res._version = src._version
    res._base = src if src._base is None else src._base
    res._view_src = (src, op, params)
    res._view_version = src._version[0]


def _forward_error(op, inputs, params, exc):
    if op.explain is not None:
        message = op.explain(inputs, params)
        if message:
            return ShapeError(f"{op.name}: {message}")
    text = str(exc)
    cls = EmberIndexError if isinstance(exc, IndexError) else ShapeError
    if isinstance(exc, TypeError):
        cls = EmberError
    if "broadcast" in text:
        shapes = " and ".join(str(tuple(t.shape)) for t in inputs)
        return ShapeError(f"{op.name}: shapes {shapes} cannot be broadcast together")
    if "read-only" in text:
        return EmberError(f"{op.name}: cannot write into a tensor whose elements share "
                          "memory (an expand()ed tensor); call .clone() first")
    given = describe(inputs)
    extra = ", ".join(f"{k}={v!r}" for k, v in params.items() if not _is_array(v))
    return cls(f"{op.name}: invalid arguments ({given}{', ' + extra if extra else ''}): {text}")


def _is_array(v) -> bool:
    return hasattr(v, "shape") and hasattr(v, "dtype") or isinstance(v, tuple) and \
        any(hasattr(x, "shape") for x in v)


# Shape and dtype rules ----------------------------------------------------------------
class AbstractValue:
    """A shape and a dtype: what the tracer knows about a value."""
    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = tuple(shape)
        self.dtype = dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"AbstractValue({self.shape}, {self.dtype})"


def infer(op: Op, *avals, **params):
    """Shapes and dtypes of ``op``'s outputs for inputs described by ``avals``."""
    if op.dynamic_shape:
        raise EmberError(f"{op.name}: the output shape depends on the input values")
    if op.infer is not None:
        return op.infer(*avals, **params)
    from ..dtypes import as_dtype
    dummies = [np.broadcast_to(np.zeros((), a.dtype.np), a.shape) for a in avals]
    out = op.forward(np, *dummies, **params)
    if op.n_outputs == 1:
        out = np.asarray(out)
        return AbstractValue(out.shape, as_dtype(out.dtype))
    return tuple(AbstractValue(np.shape(o), as_dtype(np.asarray(o).dtype)) for o in out)
