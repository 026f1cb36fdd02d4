"""``ember.onnx.export``: a model's forward, traced by ember.jit's tracer, written as an
ONNX file."""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from ..compiler.jit import flatten
from ..tensor import Tensor
from .builder import Builder, onnx_type
from .capture import Capture, OnnxExportError, capture
from .map_quant import newest_qdq_opset, uses_quantized_ops
from .mapping import MAPPINGS, supported_ops

MIN_OPSET = 17
# ops whose parameters embed sizes: their mappings rewrite the sizes that follow a
# dynamic axis themselves
_SIZE_AWARE = {"view", "expand"}


def export(model, example_inputs, path, input_names: Sequence[str] | None = None,
           output_names: Sequence[str] | None = None, dynamic_axes: dict | None = None,
           opset_version: int | None = None, doc_string: str | None = None) -> str:
    """Write ``model``'s forward as an ONNX file that ONNX Runtime runs.

    The forward is traced (recorded, not run) in eval mode, as ``torch.onnx.export``
    does; the model's training flags are restored afterwards. Parameters and buffers
    become initializers named by their state-dict keys.

    Args:
        model: an ``ember.nn.Module`` (or a callable taking tensors).
        example_inputs: a tensor or a tuple of arguments (tensors, nested lists/tuples
            of tensors) to trace ``model(*example_inputs)`` with.
        path: the ``.onnx`` file to write (atomically).
        input_names: names of the flattened tensor inputs (default ``input_0``, ...).
        output_names: names of the flattened outputs (default ``output_0``, ...).
        dynamic_axes: ``{name: {axis: dim_name}}`` or ``{name: [axes]}`` for inputs
            (and outputs) whose sizes vary: the batch axis, a sequence axis. The model
            is traced a second time with those axes at other sizes to learn which sizes
            inside the graph follow them.
        opset_version: the ONNX opset (17 or newer); default the newest that the
            installed ONNX Runtime runs.
        doc_string: the model's description (default: the model class's docstring).

    Returns:
        ``path``.

    Raises:
        OnnxExportError: an op without an ONNX mapping (naming the op, the module that
            issued it and the source line), or a size ONNX cannot make follow a
            dynamic axis.

    Example::

        >>> model = ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.ReLU())
        >>> ember.onnx.export(model, ember.randn(2, 4), "mlp.onnx",
        ...                   input_names=["x"], output_names=["y"],
        ...                   dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
        'mlp.onnx'
    """
    onnx = require("onnx")
    args = example_inputs if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    args = tuple(args)
    leaves = flatten(args)[0]
    if not leaves:
        raise OnnxExportError("ember.onnx.export: example_inputs holds no tensor; expected a "
                              "tensor or a tuple of the model's tensor arguments")
    in_names = _names(input_names, len(leaves), "input", "input_names")
    dynamic = _dynamic_inputs(dynamic_axes, in_names, leaves)
    opset = resolve_opset(opset_version)

    modes = [(m, m.training) for m in _modules(model)]
    for m, _ in modes:
        m.training = False
    try:
        cap = capture(model, args, dynamic)
    finally:
        for m, mode in modes:
            m.training = mode

    if opset_version is None and uses_quantized_ops(cap.graph):
        opset = min(opset, newest_qdq_opset())
    b = Builder(cap, opset)
    graph_inputs = _add_inputs(b, cap, model, in_names, dynamic)
    _fold_constants(cap)
    _add_constants(b, cap)
    _map_instructions(b, cap, model)
    out_names = _names(output_names, len(cap.graph.outputs), "output", "output_names")
    graph_outputs = _add_outputs(b, cap, out_names, dynamic, dynamic_axes or {})

    doc = doc_string if doc_string is not None else (type(model).__doc__ or "").strip()
    graph = onnx.helper.make_graph(b.nodes, type(model).__name__, graph_inputs,
                                   graph_outputs, initializer=b.initializers)
    opsets = [onnx.helper.make_opsetid("", opset)]
    proto = onnx.helper.make_model(graph, opset_imports=opsets, producer_name="ember",
                                   producer_version=_ember_version(), doc_string=doc)
    proto.ir_version = onnx.helper.find_min_ir_version_for(opsets)
    onnx.helper.set_model_props(proto, {
        "model_class": f"{type(model).__module__}.{type(model).__qualname__}",
        "exported_by": f"ember {_ember_version()}",
        "dynamic_axes": ", ".join(sorted({n for axes in dynamic.values()
                                          for n in axes.values()})),
    })
    _write(proto, os.fspath(path))
    return path


def require(package: str):
    """Import ``package`` (onnx, onnxruntime), or say how to install it."""
    import importlib
    try:
        return importlib.import_module(package)
    except ImportError:
        raise OnnxExportError(f"ember.onnx needs the {package} package, which is not "
                              "installed: pip install onnx onnxruntime") from None


# Opset -------------------------------------------------------------------------------------------
_probed: dict = {}


def resolve_opset(requested: int | None) -> int:
    """``requested`` checked against what the ``onnx`` package knows, or (None) the
    newest opset the installed ONNX Runtime loads, found by trying small models."""
    import onnx
    newest = onnx.defs.onnx_opset_version()
    if requested is not None:
        if not MIN_OPSET <= int(requested) <= newest:
            raise OnnxExportError(f"ember.onnx.export: opset_version {requested} is not "
                                  f"supported; expected {MIN_OPSET} to {newest} (the "
                                  "installed onnx package's newest)")
        return int(requested)
    if "default" not in _probed:
        _probed["default"] = next((v for v in range(newest, MIN_OPSET - 1, -1)
                                   if _runtime_loads(v)), MIN_OPSET)
    return _probed["default"]


def _runtime_loads(opset: int) -> bool:
    import onnx
    try:
        import onnxruntime as ort
    except ImportError:
        return opset <= 21  # no runtime to ask: an opset every recent release runs
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"])], "probe",
                                   [x], [y])
    opsets = [onnx.helper.make_opsetid("", opset)]
    proto = onnx.helper.make_model(graph, opset_imports=opsets)
    proto.ir_version = onnx.helper.find_min_ir_version_for(opsets)
    try:
        ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        return True
    except Exception:  # the runtime refuses this opset or IR version
        return False


# Arguments --------------------------------------------------------------------------------------
def _names(given, n: int, prefix: str, what: str) -> list[str]:
    names = list(given or [])
    if len(names) > n or len(set(names)) != len(names):
        raise OnnxExportError(f"ember.onnx.export: {what} has {len(names)} names "
                              f"{names}; expected at most {n} distinct names (one per "
                              f"flattened tensor {prefix})")
    return names + [f"{prefix}_{i}" for i in range(len(names), n)]


def _dynamic_inputs(dynamic_axes, in_names, leaves) -> dict[int, dict[int, str]]:
    out: dict[int, dict[int, str]] = {}
    for key, axes in (dynamic_axes or {}).items():
        if key not in in_names:
            continue  # an output's axes: named when the outputs are
        i = in_names.index(key)
        ndim = leaves[i].ndim
        axes = _axes_dict(key, axes)
        for axis in axes:
            if not -ndim <= axis < ndim:
                raise OnnxExportError(f"ember.onnx.export: dynamic_axes[{key!r}] names axis "
                                      f"{axis}, but input {key!r} has {ndim} dims")
        out[i] = {a % ndim: n for a, n in axes.items()}
    return out


def _axes_dict(key, axes) -> dict[int, str]:
    if isinstance(axes, dict):
        return {int(a): str(n) for a, n in axes.items()}
    if isinstance(axes, (list, tuple)):
        return {int(a): f"{key}_dynamic_axes_{int(a)}" for a in axes}
    raise OnnxExportError(f"ember.onnx.export: dynamic_axes[{key!r}] is {axes!r}; expected a "
                          "dict {axis: name} or a list of axes")


def _modules(model) -> list:
    return [m for _, m in model.named_modules()] if hasattr(model, "named_modules") else []


def _ember_version() -> str:
    from .. import __version__
    return __version__


# The graph --------------------------------------------------------------------------------------
def _add_inputs(b: Builder, cap: Capture, model, in_names, dynamic) -> list:
    import onnx
    state = {}
    if hasattr(model, "named_parameters"):
        for key, t in list(model.named_parameters()) + list(model.named_buffers()):
            state.setdefault(id(t), key)
    graph_inputs, others = [], 0
    for inp in cap.graph.inputs:
        v = inp.value
        if inp.kind == "arg":
            name = in_names[inp.source]
            dims = [dynamic.get(inp.source, {}).get(a, n) for a, n in enumerate(v.shape)]
            graph_inputs.append(onnx.helper.make_tensor_value_info(
                name, onnx_type(v.dtype), dims))
            b.names[v.id] = name
            b.arg_inputs.append((v, name))
        elif inp.kind == "data":
            key = state.get(id(inp.source))
            if key is None:
                others += 1
                key = f"tensor_{others}"
            b.names[v.id] = b.initializer(key, _array_of(inp.source))
        else:
            b.missing[v.id] = (f"a {inp.kind} input ({inp.label}) changes between calls, "
                               "and an ONNX graph has only tensor inputs")
    return graph_inputs


def _array_of(t) -> np.ndarray:
    return np.asarray(t.detach().cpu().numpy() if isinstance(t, Tensor) else t)


def _fold_constants(cap: Capture) -> None:
    """Instructions that read only constants of static shape run now (a causal mask
    built from ``ones(t, t)``) and become constants."""
    from ..compiler.ir import Constant
    g = cap.graph
    known = {c.value.id: np.asarray(c.array) for c in g.constants
             if tuple(cap.alt_shape(c.value)) == tuple(c.value.shape)}
    kept = []
    for ins in g.instrs:
        static = all(v.id in known for v in ins.inputs) and ins.inputs and not ins.effect \
            and all(cap.alt_shape(o) == o.shape for o in ins.outputs) and \
            ins.params == cap.alt_params.get(id(ins), ins.params)
        if static:
            try:
                out = ins.op.forward(np, *[known[v.id] for v in ins.inputs], **ins.params)
            except Exception:  # leave it to its mapping
                static = False
        if not static:
            kept.append(ins)
            continue
        outs = out if ins.op.n_outputs != 1 else (out,)
        for v, array in zip(ins.outputs, outs):
            known[v.id] = np.asarray(array)
            g.constants.append(Constant(np.asarray(array), v))
    g.instrs = kept


def _add_constants(b: Builder, cap: Capture) -> None:
    live = _live(cap)
    read = {v.id for ins in cap.graph.instrs if id(ins) in live for v in ins.inputs}
    read.update(v.id for v in cap.graph.outputs)
    for c in cap.graph.constants:
        v, array = c.value, np.asarray(c.array)
        if v.id not in read:
            continue
        alt = cap.alt_shape(v)
        if tuple(alt) == tuple(v.shape):
            b.names[v.id] = b.initializer(b.fresh("const"), array.astype(v.dtype.np))
            continue
        flat = array.reshape(-1)
        if flat.size and (flat == flat[0]).all():
            # zeros(batch, n) made in forward: one value, expanded to the dynamic shape
            b.names[v.id] = b.node("Expand", [b.const(flat[0], v.dtype.np),
                                              b.shape_tensor(v.shape, alt)])
        else:
            b.missing[v.id] = (f"a constant of shape {tuple(v.shape)} made in forward "
                               "whose size follows a dynamic axis and whose values vary; "
                               "make it from the input (ember.arange(x.shape[1]) as an "
                               "op on x, or slice a buffer)")


def _live(cap: Capture) -> set:
    needed = {v.id for v in cap.graph.outputs}
    live = set()
    for ins in reversed(cap.graph.instrs):
        if any(o.id in needed for o in ins.outputs):
            live.add(id(ins))
            needed.update(v.id for v in ins.inputs)
    return live


def _map_instructions(b: Builder, cap: Capture, model) -> None:
    supported_ops()  # fill the table
    live = _live(cap)
    modules = dict(model.named_modules()) if hasattr(model, "named_modules") else {}
    for ins in cap.graph.instrs:
        if id(ins) not in live:
            continue
        path = cap.scopes.get(id(ins), "")
        b.instr = ins
        b.scope = f"{path} ({type(modules[path]).__name__})" if path in modules and path \
            else path
        fn = MAPPINGS.get(ins.op.name)
        if fn is None:
            b.fail("has no ONNX mapping; ember.onnx.supported_ops() lists the ops that "
                   "export (see docs/onnx.md). Rewrite that part of the model with "
                   "supported ops, or keep it outside the exported forward.")
        if ins.op.name not in _SIZE_AWARE and not _same(ins.params, b.params_alt(ins)):
            b.fail(f"has parameters that change with a dynamic axis ({ins.params!r}); "
                   "ONNX export supports sizes that follow dynamic axes in reshape/view "
                   "and expand only")
        b.scope = path
        outs = fn(b, ins)
        outs = [outs] if isinstance(outs, str) else list(outs)
        for v, name in zip(ins.outputs, outs):
            if name is None:
                b.missing[v.id] = f"output {v.index} of {ins.op.name} has no ONNX form"
            else:
                b.names[v.id] = name
    b.instr, b.scope = None, ""


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # arrays in the parameters: compare element by element
        return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def _add_outputs(b: Builder, cap: Capture, out_names, dynamic, dynamic_axes) -> list:
    import onnx
    named = {}  # (size, alt size) -> dim name, from the inputs' dynamic axes
    for v, _ in b.arg_inputs:
        pos = v.producer.source
        for axis, name in dynamic.get(pos, {}).items():
            named.setdefault((v.shape[axis], cap.alt_shape(v)[axis]), name)
    outputs = []
    for v, name in zip(cap.graph.outputs, out_names):
        b.nodes.append(onnx.helper.make_node("Identity", [b.name(v)], [name],
                                             name=f"{name}_identity"))
        user = _axes_dict(name, dynamic_axes[name]) if name in dynamic_axes else {}
        dims = []
        for axis, (n, alt) in enumerate(zip(v.shape, cap.alt_shape(v))):
            if n == alt:
                dims.append(n)
            else:
                dims.append(user.get(axis) or named.get((n, alt)) or f"{name}_dim{axis}")
        outputs.append(onnx.helper.make_tensor_value_info(name, onnx_type(v.dtype), dims))
    return outputs


def _write(proto, path: str) -> None:
    """Check the model, then write it atomically (temporary file, fsync, rename)."""
    import onnx
    try:
        onnx.checker.check_model(proto, full_check=True)
    except Exception as exc:
        raise OnnxExportError(f"ember.onnx.export: the ONNX graph built for the model fails "
                              f"onnx.checker: {exc}") from None
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(proto.SerializeToString())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
