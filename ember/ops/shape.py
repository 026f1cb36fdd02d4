"""Shape ops. Views (reshape/view, permute, transpose, expand, squeeze, unsqueeze,
narrow, split, ...) share memory with their input, as in PyTorch; cat and stack copy."""
from __future__ import annotations

import numbers

import numpy as np

from ..errors import EmberError, EmberIndexError, EmberTypeError, ShapeError
from ..memory_format import axis_order, is_laid_out
from .registry import AbstractValue, apply, register

METHODS_ONLY = ("view_as", "reshape_as", "expand_as")  # Tensor methods, not ember.*
__all__ = ["reshape", "view", "permute", "transpose", "swapaxes",
           "swapdims", "t", "adjoint", "movedim", "moveaxis", "expand",
           "broadcast_to", "broadcast_tensors", "broadcast_shapes", "squeeze", "unsqueeze",
           "flatten", "unflatten", "ravel", "narrow", "select", "split", "chunk", "unbind",
           "tensor_split", "contiguous", "clone", "cat", "concat", "concatenate", "stack",
           "hstack", "vstack", "dstack", "column_stack", "row_stack", "hsplit", "vsplit",
           "dsplit", "atleast_1d", "atleast_2d", "atleast_3d"]


def wrap_dim(dim, ndim: int, op: str) -> int:
    """``dim`` in [0, ndim) (negative dims count from the end), or a clear error."""
    if not isinstance(dim, numbers.Integral):
        raise EmberError(f"{op}: dim must be an int, got {type(dim).__name__}")
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise EmberIndexError(f"{op}: Dimension out of range (expected to be in range of "
                              f"[{-n}, {n - 1}], but got {dim})")
    return int(dim) % n


def wrap_dims(dims, ndim: int, op: str) -> tuple:
    if isinstance(dims, numbers.Integral):
        dims = (dims,)
    out = tuple(wrap_dim(d, ndim, op) for d in dims)
    if len(set(out)) != len(out):
        raise EmberError(f"{op}: dim {list(dims)} appears multiple times in the list of dims")
    return out


def size_args(size, op: str, named=None, keyword: str = "size") -> tuple:
    """``f(2, 3)``, ``f((2, 3))`` and ``f(ember.Size([2, 3]))`` all mean (2, 3); so does
    ``f(size=(2, 3))`` (PyTorch also takes the sizes by the name ``keyword``): ``named``
    holds the keyword arguments the function got besides its own."""
    if named:
        size = _by_keyword(size, named, keyword, op)
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    try:
        return tuple(int(s) for s in size)
    except TypeError:
        raise EmberError(f"{op}: expected ints for the shape, got {size!r}") from None


def _by_keyword(args: tuple, named: dict, keyword: str, op: str) -> tuple:
    if keyword not in named or len(named) > 1 or args:
        extra = next(k for k in named if k != keyword) if set(named) - {keyword} else keyword
        raise EmberTypeError(f"{op}() got an unexpected keyword argument {extra!r}" + (
            f" (sizes are given either as arguments or as {keyword}=...)"
            if extra == keyword else ""))
    return (named[keyword],)


def _resolve_shape(shape: tuple, numel: int, op: str) -> tuple:
    if shape.count(-1) > 1:
        raise ShapeError(f"{op}: only one dimension can be inferred (got {list(shape)})")
    known = 1
    for s in shape:
        if s != -1:
            if s < 0:
                raise ShapeError(f"{op}: invalid shape dimension {s} in {list(shape)}")
            known *= s
    if -1 in shape:
        if known == 0 or numel % known:
            raise ShapeError(f"{op}: shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise ShapeError(f"{op}: shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


# reshape / view -------------------------------------------------------------------------
def _view_forward(xp, a, shape):
    try:
        return a.reshape(shape, copy=False)
    except ValueError:
        raise ShapeError(f"view: view size is not compatible with input tensor's size and "
                         f"stride (shape {a.shape}, strides "
                         f"{tuple(s // a.itemsize for s in a.strides)}): at least one dimension "
                         f"spans across two contiguous subspaces; use .reshape(...) instead") from None


_VIEW = register("view", _view_forward, lambda n, g: reshape(g, n.inputs[0].shape),
                 is_view=True, saves_inputs=False,
                 infer=lambda a, shape: AbstractValue(shape, a.dtype))


def view(input, *shape, **named):
    """The same data seen with another shape (no copy; the strides must allow it).
    One dimension may be -1, inferred from the others.

    >>> ember.arange(6).view(2, 3)
    tensor([[0, 1, 2],
            [3, 4, 5]])
    """
    if named and "dtype" in named and not shape and len(named) == 1:
        return _view_dtype(input, named["dtype"])
    if len(shape) == 1 and not isinstance(shape[0], (numbers.Integral, tuple, list)):
        return _view_dtype(input, shape[0])
    shape = _resolve_shape(size_args(shape, "view", named), input._data.size, "view")
    return apply(_VIEW, input, shape=shape)


def _view_dtype_infer(a, dtype):
    shape = a.shape
    if dtype.itemsize != a.dtype.itemsize:
        shape = shape[:-1] + (shape[-1] * a.dtype.itemsize // dtype.itemsize,)
    return AbstractValue(shape, dtype)


# The same bytes read as another dtype; like PyTorch, not differentiable.
_VIEW_DTYPE = register("view_dtype", lambda xp, a, dtype: a.view(dtype.np), is_view=True,
                       saves_inputs=False, infer=_view_dtype_infer)


def _view_dtype(input, dtype):
    from .. import dtypes as dt
    dtype = dt.as_dtype(dtype)
    old, new = input.dtype, dtype
    if old.itemsize != new.itemsize:
        what = f"to view {old.name} as {new.name} (different element sizes)"
        if input.ndim == 0:
            raise ShapeError(f"view: self.dim() cannot be 0 {what}")
        if input.shape[-1] != 1 and input.stride(-1) != 1:
            raise ShapeError(f"view: self.stride(-1) must be 1 {what}, but got "
                             f"{input.stride(-1)}")
        if old.itemsize < new.itemsize and input.shape[-1] % (new.itemsize // old.itemsize):
            raise ShapeError(f"view: self.size(-1) must be divisible by "
                             f"{new.itemsize // old.itemsize} {what}, but got "
                             f"{input.shape[-1]}")
    return apply(_VIEW_DTYPE, input, dtype=dtype)


def reshape(input, *shape, **named):
    """``input`` with a new shape: a view when the strides allow, else a copy."""
    shape = _resolve_shape(size_args(shape, "reshape", named, "shape"), input._data.size,
                           "reshape")
    data = input._data
    if data.flags.c_contiguous or _viewable(data, shape):
        return apply(_VIEW, input, shape=shape)
    return apply(_VIEW, contiguous(input), shape=shape)


def _viewable(data, shape) -> bool:
    try:
        data.reshape(shape, copy=False)
        return True
    except ValueError:
        return False


def view_as(input, other):
    return view(input, tuple(other.shape))


def reshape_as(input, other):
    return reshape(input, tuple(other.shape))


def flatten(input, start_dim: int = 0, end_dim: int = -1):
    """Merge dims ``start_dim``..``end_dim`` into one."""
    shape = input._data.shape
    if not shape:
        return reshape(input, (1,))
    s = wrap_dim(start_dim, len(shape), "flatten")
    e = wrap_dim(end_dim, len(shape), "flatten")
    if s > e:
        raise EmberError("flatten: start_dim cannot come after end_dim")
    merged = 1
    for d in shape[s:e + 1]:
        merged *= d
    return reshape(input, shape[:s] + (merged,) + shape[e + 1:])


def ravel(input):
    return reshape(input, (-1,))


def unflatten(input, dim: int, sizes):
    """Split dim ``dim`` into ``sizes`` (one of them may be -1)."""
    shape = input._data.shape
    d = wrap_dim(dim, len(shape), "unflatten")
    sizes = _resolve_shape(tuple(sizes), shape[d], "unflatten")
    return view(input, shape[:d] + sizes + shape[d + 1:]) if input.is_contiguous() \
        else reshape(input, shape[:d] + sizes + shape[d + 1:])


def _clone_forward(xp, a, order=None):
    if order is None:
        return a.copy()
    inverse = tuple(int(i) for i in np.argsort(order))
    return xp.ascontiguousarray(a.transpose(order)).transpose(inverse)


_CLONE = register("clone", _clone_forward, lambda n, g: g, saves_inputs=False)


def clone(input, *, memory_format=None):
    """A copy of ``input`` (differentiable); ``memory_format=ember.channels_last`` lays
    it out channels-innermost."""
    order = axis_order(memory_format, input.ndim, "clone")
    return apply(_CLONE, input) if order is None else apply(_CLONE, input, order=order)


def contiguous(input, memory_format=None):
    """``input`` itself if laid out in ``memory_format`` (row-major by default), else a
    copy that is."""
    order = axis_order(memory_format, input.ndim, "contiguous")
    if order is None:
        return input if input._data.flags.c_contiguous else apply(_CLONE, input)
    return input if is_laid_out(input._data, order) else apply(_CLONE, input, order=order)


# permute / transpose ------------------------------------------------------------------------
_PERMUTE = register("permute", lambda xp, a, dims: xp.transpose(a, dims),
                    lambda n, g: permute(g, tuple(np.argsort(n.params["dims"]))),
                    is_view=True, saves_inputs=False)


def permute(input, *dims, **named):
    """Reorder the dims (a view). ``x.permute(2, 0, 1)``."""
    dims = wrap_dims(size_args(dims, "permute", named, "dims"), input.ndim, "permute")
    if len(dims) != input.ndim:
        raise ShapeError(f"permute: number of dims don't match: input has {input.ndim} dims, "
                         f"got {len(dims)} ({list(dims)})")
    return apply(_PERMUTE, input, dims=dims)


def transpose(input, dim0: int, dim1: int):
    """Swap two dims (a view)."""
    n = input.ndim
    if n == 0:
        wrap_dim(dim0, 0, "transpose")
        wrap_dim(dim1, 0, "transpose")
        return apply(_VIEW, input, shape=())
    d0, d1 = wrap_dim(dim0, n, "transpose"), wrap_dim(dim1, n, "transpose")
    dims = list(range(n))
    dims[d0], dims[d1] = d1, d0
    return apply(_PERMUTE, input, dims=tuple(dims))


swapaxes = swapdims = transpose


def t(input):
    """Transpose a tensor of at most 2 dims."""
    if input.ndim > 2:
        raise ShapeError(f"t: expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return transpose(input, 0, 1) if input.ndim == 2 else input.view(input.shape)


def adjoint(input):
    """The last two dims swapped, conjugated where complex (``mH``)."""
    out = transpose(input, -2, -1)
    if out.dtype.is_complex:
        from .complex_support import conj_physical
        out = conj_physical(out)
    return out


def movedim(input, source, destination):
    """Move dims ``source`` to positions ``destination``."""
    n = input.ndim
    src = wrap_dims(source, n, "movedim")
    dst = wrap_dims(destination, n, "movedim")
    if len(src) != len(dst):
        raise EmberError("movedim: Invalid source or destination dims: source and "
                         "destination must have the same number of dims")
    if n == 0:  # a 0-d tensor's only dim (0 or -1) moves onto itself
        return permute(input, ())
    order = [d for d in range(n) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(input, tuple(order))


moveaxis = movedim


# expand / broadcast ------------------------------------------------------------------------
def _expand_vjp(n, g):
    from .reduce import sum_to
    return sum_to(g, n.inputs[0].shape)


_EXPAND = register("expand", lambda xp, a, shape: xp.broadcast_to(a, shape), _expand_vjp,
                   is_view=True, saves_inputs=False,
                   infer=lambda a, shape: AbstractValue(shape, a.dtype))


def expand(input, *sizes, **named):
    """Repeat size-1 dims without copying (a view); -1 keeps a dim's size.

    >>> ember.tensor([[1], [2]]).expand(2, 3)
    tensor([[1, 1, 1],
            [2, 2, 2]])
    """
    sizes = size_args(sizes, "expand", named)
    shape = input._data.shape
    if len(sizes) < len(shape):
        raise ShapeError(f"expand: the number of sizes provided ({len(sizes)}) must be greater "
                         f"or equal to the number of dimensions in the tensor ({len(shape)})")
    lead = len(sizes) - len(shape)
    out = []
    for i, s in enumerate(sizes):
        if i < lead:
            if s < 0:
                raise ShapeError(f"expand: -1 is not allowed in a leading, non-existing "
                                 f"dimension {i}")
            out.append(s)
            continue
        have = shape[i - lead]
        if s == -1:
            s = have
        if have != s and have != 1:
            raise ShapeError(f"expand: the expanded size of the tensor ({s}) must match the "
                             f"existing size ({have}) at non-singleton dimension {i}. Target "
                             f"sizes: {list(sizes)}. Tensor sizes: {list(shape)}")
        out.append(s)
    out = tuple(out)
    if out == shape:
        return apply(_VIEW, input, shape=shape)
    return apply(_EXPAND, input, shape=out)


def expand_as(input, other):
    return expand(input, tuple(other.shape))


broadcast_to = expand


def broadcast_shapes(*shapes) -> tuple:
    """The shape that tensors of ``shapes`` broadcast to."""
    try:
        return tuple(np.broadcast_shapes(*[tuple(s) if not isinstance(s, int) else (s,)
                                           for s in shapes]))
    except ValueError:
        raise ShapeError(f"broadcast_shapes: shapes {', '.join(str(tuple(s)) for s in shapes)} "
                         "cannot be broadcast together") from None


def broadcast_tensors(*tensors):
    """Views of ``tensors`` expanded to their common shape."""
    shape = broadcast_shapes(*(t.shape for t in tensors))
    return tuple(expand(t, shape) for t in tensors)


# squeeze / unsqueeze ------------------------------------------------------------------------
def squeeze(input, dim=None):
    """Drop size-1 dims (all of them, or those in ``dim`` that have size 1)."""
    shape = input._data.shape
    if dim is None:
        new = tuple(s for s in shape if s != 1)
    else:
        dims = wrap_dims(dim, len(shape), "squeeze")  # a 0-d tensor takes dim 0 or -1
        new = tuple(s for i, s in enumerate(shape) if not (i in dims and s == 1))
    return apply(_VIEW, input, shape=new)


def unsqueeze(input, dim: int):
    """Insert a size-1 dim at ``dim`` (a view)."""
    shape = input._data.shape
    d = wrap_dim(dim, len(shape) + 1, "unsqueeze")
    return apply(_VIEW, input, shape=shape[:d] + (1,) + shape[d:])


def atleast_1d(*tensors):
    out = [t if t.ndim >= 1 else reshape(t, (1,)) for t in _flat(tensors)]
    return out[0] if len(out) == 1 else tuple(out)


def atleast_2d(*tensors):
    out = [t if t.ndim >= 2 else reshape(t, (1,) * (2 - t.ndim) + tuple(t.shape))
           for t in _flat(tensors)]
    return out[0] if len(out) == 1 else tuple(out)


def atleast_3d(*tensors):
    def lift(t):
        if t.ndim == 0:
            return reshape(t, (1, 1, 1))
        if t.ndim == 1:
            return reshape(t, (1, t.shape[0], 1))
        if t.ndim == 2:
            return unsqueeze(t, -1)
        return t
    out = [lift(t) for t in _flat(tensors)]
    return out[0] if len(out) == 1 else tuple(out)


def _flat(tensors):
    return list(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) \
        else list(tensors)


# narrow / select / split ------------------------------------------------------------------------
def narrow(input, dim: int, start: int, length: int):
    """Elements ``start``..``start+length`` along ``dim`` (a view)."""
    from .index import slice_dim
    if input.ndim == 0:
        raise ShapeError("narrow: narrow() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, input.ndim, "narrow")
    size = input.shape[d]
    start = int(start)
    if start < 0:
        start += size
    if length < 0:
        raise EmberError(f"narrow: length must be non-negative, got {length}")
    if not 0 <= start <= size or start + length > size:
        raise EmberIndexError(f"narrow: start ({start}) + length ({length}) exceeds dimension "
                              f"size ({size}) of dim {d}")
    return slice_dim(input, d, start, start + length)


def select(input, dim: int, index: int):
    """The slice at ``index`` along ``dim``, with that dim removed (a view)."""
    if input.ndim == 0:
        raise EmberIndexError("select: select() cannot be applied to a 0-dim tensor")
    d = wrap_dim(dim, input.ndim, "select")
    size = input.shape[d]
    if not -size <= index < size:
        raise EmberIndexError(f"select: index {index} out of range for tensor of size "
                              f"{tuple(input.shape)} at dimension {d}")
    return input[(slice(None),) * d + (index,)]


def split(tensor, split_size_or_sections, dim: int = 0):
    """Views of ``split_size_or_sections``-sized pieces along ``dim`` (the last may be
    smaller), or of the listed section sizes."""
    from .index import slice_dim
    if tensor.ndim == 0:
        raise ShapeError("split: expects at least a 1-dimensional tensor, got a 0-d tensor")
    d = wrap_dim(dim, tensor.ndim, "split")
    size = tensor.shape[d]
    if isinstance(split_size_or_sections, numbers.Integral):
        step = int(split_size_or_sections)
        if step < 0 or (step == 0 and size):
            raise EmberError(f"split: split_size must be positive (or 0 for an empty dim), "
                             f"got {step} for dimension {d} of size {size}")
        bounds = list(range(0, size, step)) if size else [0]
        sizes = [min(step, size - b) for b in bounds]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if any(s < 0 for s in sizes):
            raise ShapeError(f"split: split_with_sizes expects split_sizes have only "
                             f"non-negative entries, but got split_sizes={sizes}")
        if sum(sizes) != size:
            raise ShapeError(f"split: split_with_sizes expects split_sizes to sum exactly to "
                             f"{size} (input tensor's size at dimension {d}), but got "
                             f"split_sizes={sizes}")
    out, start = [], 0
    for s in sizes:
        out.append(slice_dim(tensor, d, start, start + s))
        start += s
    return tuple(out)


def chunk(input, chunks: int, dim: int = 0):
    """Split into ``chunks`` pieces of equal size (the last may be smaller)."""
    if chunks <= 0:
        raise EmberError(f"chunk: chunks must be greater than 0, got {chunks}")
    from .index import slice_dim
    if input.ndim == 0:
        raise ShapeError("chunk: chunk expects at least a 1-dimensional tensor")
    d = wrap_dim(dim, input.ndim, "chunk")
    size = input.shape[d]
    if size == 0:
        return tuple(slice_dim(input, d, 0, 0) for _ in range(chunks))
    return split(input, -(-size // chunks), d)


def tensor_split(input, indices_or_sections, dim: int = 0):
    """Split into n nearly-equal parts, or at the given indices (as NumPy's array_split)."""
    from .index import slice_dim
    if input.ndim == 0:
        raise ShapeError("tensor_split: tensor_split expected at least a 1-dimensional tensor, "
                         "but got a tensor with 0 dims")
    d = wrap_dim(dim, input.ndim, "tensor_split")
    size = input.shape[d]
    if hasattr(indices_or_sections, "tolist"):  # a 0-d (sections) or 1-d (indices) tensor
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, numbers.Integral):
        n = int(indices_or_sections)
        if n <= 0:
            raise EmberError(f"tensor_split: number of sections must be larger than 0, got {n}")
        base, extra = divmod(size, n)
        bounds = [0]
        for i in range(n):
            bounds.append(bounds[-1] + base + (1 if i < extra else 0))
    else:
        bounds = [0] + [int(i) for i in indices_or_sections] + [size]
    pieces = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        start, stop, _ = slice(a, b).indices(size)  # negative indices count from the end
        pieces.append(slice_dim(input, d, start, max(start, stop)))
    return tuple(pieces)


def unbind(input, dim: int = 0):
    """The slices along ``dim``, with that dim removed (views)."""
    if input.ndim == 0:
        raise EmberIndexError(f"unbind: Dimension specified as {dim} but tensor has no "
                              f"dimensions")
    d = wrap_dim(dim, input.ndim, "unbind")
    return tuple(select(input, d, i) for i in range(input.shape[d]))


# cat / stack ------------------------------------------------------------------------------
def _skipped(shape, ndim: int) -> bool:
    # PyTorch lets 1-d empty tensors join tensors of any rank, contributing nothing
    return len(shape) == 1 and shape[0] == 0 and ndim != 1


def _cat_forward(xp, *arrays, dim):
    ndim = max(a.ndim for a in arrays)
    return xp.concatenate([a for a in arrays if not _skipped(a.shape, ndim)], axis=dim)


def _cat_vjp(n, g):
    dim = n.params["dim"]
    kept = [not _skipped(t.shape, g.ndim) for t in n.inputs]
    pieces = iter(split(g, [t.shape[dim] for t, k in zip(n.inputs, kept) if k], dim))
    return tuple(next(pieces) if k else g.new_zeros((0,)) for k in kept)


_CAT = register("cat", _cat_forward, _cat_vjp, saves_inputs=False)


def cat(tensors, dim: int = 0):
    """Join tensors along an existing dim (all other dims must match).

    >>> ember.cat([ember.zeros(2, 3), ember.ones(1, 3)]).shape
    ember.Size([3, 3])
    """
    from ._promote import promote
    tensors = list(tensors)
    if not tensors:
        raise EmberError("cat: expected a non-empty list of Tensors")
    parts = [t for t in tensors if not _skipped(t.shape, 0)] or tensors[:1]
    ref = parts[0]
    d = wrap_dim(dim, ref.ndim, "cat")
    if ref.ndim == 0:
        raise EmberError("cat: zero-dimensional tensor (at position 0) cannot be concatenated")
    for i, p in enumerate(parts):
        if p.ndim != ref.ndim:
            raise ShapeError(f"cat: Tensors must have same number of dimensions: got "
                             f"{ref.ndim} and {p.ndim} (tensor {i})")
        for k in range(ref.ndim):
            if k != d and p.shape[k] != ref.shape[k]:
                raise ShapeError(f"cat: Sizes of tensors must match except in dimension {d}. "
                                 f"Expected size {ref.shape[k]} but got size {p.shape[k]} for "
                                 f"tensor number {i} in the list (shapes "
                                 f"{', '.join(str(tuple(q.shape)) for q in parts)})")
    tensors, _ = promote("cat", tensors)
    return apply(_CAT, *tensors, dim=d)


concat = concatenate = cat


def _stack_vjp(n, g):
    dim = n.params["dim"]
    return tuple(select(g, dim, i) for i in range(len(n.inputs)))


_STACK = register("stack", lambda xp, *arrays, dim: xp.stack(arrays, axis=dim), _stack_vjp,
                  saves_inputs=False)


def stack(tensors, dim: int = 0):
    """Join tensors of the same shape along a new dim.

    >>> ember.stack([ember.zeros(2), ember.ones(2)], dim=1)
    tensor([[0., 1.],
            [0., 1.]])
    """
    from ._promote import promote
    tensors = list(tensors)
    if not tensors:
        raise EmberError("stack: expected a non-empty list of Tensors")
    shape = tensors[0]._data.shape
    for i, x in enumerate(tensors):
        if x._data.shape != shape:
            raise ShapeError(f"stack: expects each tensor to be equal size, but got {shape} at "
                             f"entry 0 and {tuple(x.shape)} at entry {i}")
    d = wrap_dim(dim, len(shape) + 1, "stack")
    tensors, _ = promote("stack", tensors)
    return apply(_STACK, *tensors, dim=d)


def hstack(tensors):
    tensors = atleast_1d(*tensors) if len(tensors) > 1 else (atleast_1d(tensors[0]),)
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    tensors = atleast_2d(*tensors) if len(tensors) > 1 else (atleast_2d(tensors[0]),)
    return cat(tensors, 0)


def dstack(tensors):
    tensors = atleast_3d(*tensors) if len(tensors) > 1 else (atleast_3d(tensors[0]),)
    return cat(tensors, 2)


def column_stack(tensors):
    """Side by side as columns: 0-d and 1-d tensors become (n, 1) columns first.

    >>> ember.column_stack([ember.tensor([1, 2]), ember.tensor([3, 4])])
    tensor([[1, 3],
            [2, 4]])
    """
    columns = [reshape(t, (t.numel(), 1)) if t.ndim <= 1 else t for t in tensors]
    return cat(columns, 1)


row_stack = vstack


def _split_along(name, input, sections, dim, least):
    if input.ndim < least:
        raise ShapeError(f"{name}: requires a tensor with at least {least} dimension"
                         f"{'s' if least > 1 else ''}, but got a tensor with {input.ndim} "
                         f"dimensions")
    if isinstance(sections, numbers.Integral) and (sections <= 0 or
                                                   input.shape[dim] % sections):
        raise ShapeError(f"{name}: attempted to split along dimension {dim}, but the size of "
                         f"the dimension {input.shape[dim]} is not divisible by the split_size "
                         f"{sections}")
    return tensor_split(input, sections, dim)


def hsplit(input, indices_or_sections):
    """:func:`tensor_split` along dim 1 (dim 0 of a 1-d tensor); an int must divide it."""
    return _split_along("hsplit", input, indices_or_sections, 1 if input.ndim > 1 else 0, 1)


def vsplit(input, indices_or_sections):
    """:func:`tensor_split` along dim 0 of a tensor of 2 or more dims."""
    return _split_along("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input, indices_or_sections):
    """:func:`tensor_split` along dim 2 of a tensor of 3 or more dims."""
    return _split_along("dsplit", input, indices_or_sections, 2, 3)
