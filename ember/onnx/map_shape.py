"""ONNX mappings of shape, movement and indexing ops. Sizes that follow a dynamic axis
(a reshape to ``(batch, ...)``) are rewritten: Reshape's 0 (copy the input's dim) and
-1, or sizes read with Shape from the graph's inputs."""
from __future__ import annotations

import numpy as np

from .builder import INT64_MAX
from .mapping import maps

INT64_MIN = np.iinfo(np.int64).min


@maps("view")
def _view(b, ins):
    v, out = ins.inputs[0], ins.outputs[0]
    dims, alt = out.shape, b.cap.alt_shape(out)
    in_dims, in_alt = v.shape, b.cap.alt_shape(v)
    target, open_dims = [], 0
    for i, (a, c) in enumerate(zip(dims, alt)):
        if a == c:
            target.append(a)
        elif i < len(in_dims) and in_dims[i] == a and in_alt[i] == c:
            target.append(0)  # Reshape's 0: the input's size at this position
        else:
            target.append(-1)
            open_dims += 1
    if open_dims <= 1 and 0 not in [d for d, c in zip(dims, alt) if d == c]:
        shape = b.ints(target)
    else:
        shape = b.shape_tensor(dims, alt, prefer=[v], unknown=-1)
    return b.node("Reshape", [b.name(v), shape])


@maps("expand")
def _expand(b, ins):
    v, out = ins.inputs[0], ins.outputs[0]
    dims, alt = list(out.shape), list(b.cap.alt_shape(out))
    lead = len(dims) - len(v.shape)
    in_dims, in_alt = v.shape, b.cap.alt_shape(v)
    for i in range(len(dims)):
        j = i - lead
        if dims[i] != alt[i] and j >= 0 and in_dims[j] == dims[i] and in_alt[j] == alt[i]:
            dims[i] = alt[i] = 1  # Expand keeps the input's size where the target says 1
    return b.node("Expand", [b.name(v), b.shape_tensor(dims, alt, prefer=[v])])


@maps("permute")
def _permute(b, ins):
    return b.node("Transpose", [b.name(ins.inputs[0])],
                  perm=[int(d) for d in ins.params["dims"]])


@maps("cat")
def _cat(b, ins):
    out = ins.outputs[0]
    names = [b.input_as(v, out.dtype) for v in ins.inputs]
    return b.node("Concat", names, axis=int(ins.params["dim"]) % len(out.shape))


@maps("stack")
def _stack(b, ins):
    out = ins.outputs[0]
    axis = int(ins.params["dim"]) % len(out.shape)
    parts = [b.node("Unsqueeze", [b.input_as(v, out.dtype), b.ints([axis])])
             for v in ins.inputs]
    return b.node("Concat", parts, axis=axis)


@maps("triu", "tril")
def _trilu(b, ins):
    v = ins.inputs[0]
    x = b.name(v)
    # ONNX Runtime's Trilu has no bool kernel
    x = b.cast(x, v.dtype, "int64") if v.dtype.name == "bool" else x
    k = b.const(np.int64(ins.params["diagonal"]))
    y = b.node("Trilu", [x, k], upper=int(ins.op.name == "triu"))
    return b.cast(y, "int64", "bool") if v.dtype.name == "bool" else y


@maps("embedding")
def _embedding(b, ins):
    w, idx = ins.inputs
    return b.node("Gather", [b.name(w), b.name(idx)], axis=0)


@maps("index_select")
def _index_select(b, ins):
    v, idx = ins.inputs
    return b.node("Gather", [b.name(v), b.name(idx)],
                  axis=int(ins.params["dim"]) % len(v.shape))


@maps("gather")
def _gather(b, ins):
    v, idx = ins.inputs
    return b.node("GatherElements", [b.name(v), b.name(idx)],
                  axis=int(ins.params["dim"]) % len(v.shape))


@maps("index_view", "index")
def _index(b, ins):
    """Basic indexing (ints, slices, None, ...): one Slice, then Squeeze for the ints and
    Unsqueeze for the Nones."""
    v = ins.inputs[0]
    if len(ins.inputs) > 1:
        b.fail("indexes with tensors; ONNX export supports basic indexing (ints, slices, "
               "None, ...) and index_select/gather")
    index = ins.params["index"]
    index = index if isinstance(index, tuple) else (index,)
    if any(not isinstance(i, (int, np.integer, slice, type(None), type(Ellipsis)))
           for i in index):
        b.fail(f"indexes with {index!r}; expected ints, slices, None and ...")
    n_real = sum(1 for i in index if i is not None and i is not Ellipsis)
    if Ellipsis in index:
        k = index.index(Ellipsis)
        index = index[:k] + (slice(None),) * (len(v.shape) - n_real) + index[k + 1:]
    else:
        index = index + (slice(None),) * (len(v.shape) - n_real)
    starts, ends, axes, steps, squeeze, unsqueeze = [], [], [], [], [], []
    axis = out_axis = 0
    for item in index:
        if item is None:
            unsqueeze.append(out_axis)
            out_axis += 1
            continue
        if isinstance(item, slice):
            step = 1 if item.step is None else int(item.step)
            if item != slice(None):
                lo, hi = (0, INT64_MAX) if step > 0 else (INT64_MAX, INT64_MIN)
                starts.append(lo if item.start is None else int(item.start))
                ends.append(hi if item.stop is None else int(item.stop))
                axes.append(axis)
                steps.append(step)
            out_axis += 1
        else:
            i = int(item)
            starts.append(i)
            ends.append(INT64_MAX if i == -1 else i + 1)
            axes.append(axis)
            steps.append(1)
            squeeze.append(axis)
        axis += 1
    x = b.name(v)
    if axes:
        x = b.node("Slice", [x, b.ints(starts), b.ints(ends), b.ints(axes), b.ints(steps)])
    if squeeze:
        x = b.node("Squeeze", [x, b.ints(squeeze)])
    if unsqueeze:
        x = b.node("Unsqueeze", [x, b.ints(unsqueeze)])
    if x == b.name(v):
        x = b.node("Identity", [x])
    return x


@maps("constant_pad_nd")
def _constant_pad(b, ins):
    v, p = ins.inputs[0], ins.params
    pads = list(p["pads"])  # (lo, hi) per dim, leading dims first; negative crops
    pads = [(0, 0)] * (len(v.shape) - len(pads)) + pads
    begins, ends = [int(lo) for lo, _ in pads], [int(hi) for _, hi in pads]
    value = b.const(np.asarray(p["value"], dtype=v.dtype.np))
    return b.node("Pad", [b.name(v), b.ints(begins + ends), value], mode="constant")
