"""Data movement that copies: pad, flip, roll, repeat, tile, tril/triu, diag, meshgrid.

``diagonal`` is the one view here: a strided window onto its input that writes through.
Gathering ops whose backward must add up several gradients into one input element
(reflect/replicate/circular padding, repeat_interleave with per-element counts) get a
dedicated scatter-add primitive, and each is the other's VJP.
"""
from __future__ import annotations

import builtins
import numbers

import numpy as np

from ..errors import EmberError, EmberIndexError, EmberTypeError, ShapeError
from ..tensor import Tensor
from .registry import apply, defvjp, register
from .reduce import sum
from .shape import clone, expand, flatten, reshape, size_args, transpose, wrap_dim, wrap_dims

__all__ = ["pad", "flip", "fliplr", "flipud", "roll", "rot90", "repeat_interleave", "tile",
           "tril", "triu", "diag", "diagonal", "diag_embed", "trace", "meshgrid"]
NOT_METHODS = ("pad", "meshgrid")

_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _scatter_add_axis(xp, g, index, size: int, axis: int):
    """The transpose of ``xp.take(a, index, axis)``: adds each slice of ``g`` into
    position ``index[i]`` of a zero array whose ``axis`` has ``size`` elements."""
    out = xp.zeros(g.shape[:axis] + (size,) + g.shape[axis + 1:], g.dtype)
    xp.add.at(out, (slice(None),) * axis + (index,), g)
    return out


# pad ----------------------------------------------------------------------------------
def _constant_pad_forward(xp, a, pads, value):
    shape = tuple(s + lo + hi for s, (lo, hi) in zip(a.shape, pads))
    out = xp.empty(shape, a.dtype)
    out[...] = xp.asarray(value).astype(a.dtype)
    src, dst = [], []
    for s, (lo, hi) in zip(a.shape, pads):
        start, stop = max(-lo, 0), s - max(-hi, 0)
        src.append(slice(start, max(stop, start)))
        dst.append(slice(max(lo, 0), max(lo, 0) + max(stop - start, 0)))
    out[tuple(dst)] = a[tuple(src)]
    return out


# Padding with -pads crops what padding with pads added (and the reverse).
_CONSTANT_PAD = register(
    "constant_pad_nd", _constant_pad_forward,
    lambda n, g: apply(_CONSTANT_PAD, g, pads=tuple((-lo, -hi) for lo, hi in n.params["pads"]),
                       value=0),
    saves_inputs=False)


def _pad_index(xp, size: int, lo: int, hi: int, mode: str):
    """Which input element each output position along one dim reads."""
    if mode == "circular":  # wraps around what is left after cropping, as PyTorch does
        first, kept = max(-lo, 0), size - max(-lo, 0) - max(-hi, 0)
        return first + xp.arange(-max(lo, 0), kept + max(hi, 0)) % max(kept, 1)
    idx = xp.arange(-lo, size + hi)
    if mode == "reflect":
        idx = xp.abs(idx)
        return xp.where(idx >= size, 2 * (size - 1) - idx, idx)
    return xp.clip(idx, 0, size - 1)


def _index_pad_forward(xp, a, pads, mode):
    out = a
    for d, (lo, hi) in enumerate(pads):
        if lo or hi:
            out = xp.take(out, _pad_index(xp, out.shape[d], lo, hi, mode), axis=d)
    return out.copy() if out is a else out  # a result never shares the input's memory


def _index_pad_backward_forward(xp, g, pads, mode, shape):
    out = g
    for d, (lo, hi) in enumerate(pads):
        if lo or hi:
            out = _scatter_add_axis(xp, out, _pad_index(xp, shape[d], lo, hi, mode), shape[d],
                                    d)
    return out.copy() if out is g else out


_INDEX_PAD = register("index_pad", _index_pad_forward, saves_inputs=False)
_INDEX_PAD_BACKWARD = register(
    "index_pad_backward", _index_pad_backward_forward,
    lambda n, g: apply(_INDEX_PAD, g, pads=n.params["pads"], mode=n.params["mode"]),
    saves_inputs=False)


@defvjp(_INDEX_PAD)
def _index_pad_vjp(n, g):
    return apply(_INDEX_PAD_BACKWARD, g, pads=n.params["pads"], mode=n.params["mode"],
                 shape=tuple(n.inputs[0].shape))


def _check_index_pad(shape, pads, mode):
    for d, (lo, hi) in enumerate(pads):
        if not (lo or hi):
            continue
        size, out = shape[d], shape[d] + lo + hi
        if mode == "circular":
            if lo > size or hi > size:
                raise ShapeError(f"pad: Padding value causes wrapping around more than once "
                                 f"(padding ({lo}, {hi}) at dimension {d} of input "
                                 f"{list(shape)})")
            if out < 0 or (size - max(-lo, 0) - max(-hi, 0) <= 0 < max(lo, hi)):
                raise ShapeError(f"pad: negative padding ({lo}, {hi}) leaves nothing to wrap "
                                 f"around at dimension {d} of input {list(shape)}")
            continue
        if size == 0:
            raise ShapeError(f"pad: {mode} padding needs non-empty padded dimensions, but "
                             f"dimension {d} of input {list(shape)} is empty")
        if mode == "reflect" and (lo >= size or hi >= size):
            raise ShapeError(f"pad: Padding size should be less than the corresponding input "
                             f"dimension, but got: padding ({lo}, {hi}) at dimension {d} of "
                             f"input {list(shape)}")
        if out < 1:
            raise ShapeError(f"pad: input of size {size} at dimension {d} is too small for "
                             f"padding ({lo}, {hi}): the output size would be {out}")


def pad(input, pad, mode: str = "constant", value: float | None = None):
    """Pad ``input``. ``pad`` lists (left, right) amounts starting from the last dim and
    going backwards: ``(1, 1)`` pads the last dim, ``(1, 1, 2, 0)`` the last two.

    Args:
        mode: ``'constant'`` (fill with ``value``; negative amounts crop), ``'reflect'``
            (mirror without repeating the edge), ``'replicate'`` (repeat the edge) or
            ``'circular'`` (wrap around). The last three pad the last 1, 2 or 3 dims of a
            tensor with one or two more dims than that (batch and channel).
        value: the fill value for ``'constant'`` (default 0).

    >>> ember.pad(ember.tensor([[1.0, 2.0]]), (1, 2), value=9.0)
    tensor([[9., 1., 2., 9., 9.]])
    """
    if mode not in _PAD_MODES:
        raise EmberError(f"pad: Unrecognised padding mode {mode!r}; expected one of "
                         f"{', '.join(_PAD_MODES)}")
    amounts = tuple(pad)
    if not all(isinstance(p, numbers.Integral) for p in amounts):
        raise EmberTypeError(f"pad: argument 'pad' must be a tuple of ints, got {amounts!r}")
    ndim = input.ndim
    if len(amounts) % 2:
        raise ShapeError(f"pad: Padding length must be divisible by 2, got {len(amounts)}")
    k = len(amounts) // 2
    if k > ndim:
        raise ShapeError(f"pad: Padding length should be less than or equal to two times the "
                         f"input dimension but got padding length {len(amounts)} and input "
                         f"of dimension {ndim}")
    pads = [(0, 0)] * ndim
    for i in range(k):
        pads[ndim - 1 - i] = (int(amounts[2 * i]), int(amounts[2 * i + 1]))
    pads = tuple(pads)
    shape = tuple(input.shape)
    if mode == "constant":
        for d, (lo, hi) in enumerate(pads):
            if shape[d] + lo + hi < 0:
                raise ShapeError(f"pad: the input size {shape[d]} plus negative padding "
                                 f"({lo}, {hi}) gives a negative output size at dimension "
                                 f"{d} of input {list(shape)}")
        value = 0 if value is None else value
        dtype = input.dtype
        if not dtype.differentiable and dtype.name != "bool":
            info = np.iinfo(dtype.np)
            if not info.min <= value <= info.max:
                raise EmberError(f"pad: value {value} cannot be converted to type "
                                 f"{dtype.name} without overflow")
        return apply(_CONSTANT_PAD, input, pads=pads, value=value)
    if value is not None and value != 0:
        raise EmberError(f'pad: Padding mode "{mode}" doesn\'t take in value argument')
    if not 1 <= k <= 3 or ndim not in (k + 1, k + 2):
        raise ShapeError(f"pad: Padding size {len(amounts)} is not supported for {ndim}D input "
                         f"tensor in {mode} mode (pad the last 1, 2 or 3 dims of a tensor "
                         "with 1 or 2 more dims)")
    _check_index_pad(shape, pads, mode)
    return apply(_INDEX_PAD, input, pads=pads, mode=mode)


# flip / roll / rot90 -----------------------------------------------------------------------
_FLIP = register("flip", lambda xp, a, dims: xp.flip(a, dims).copy(),
                 lambda n, g: apply(_FLIP, g, dims=n.params["dims"]), saves_inputs=False)


def flip(input, dims, *more):
    """Reverse the order of elements along ``dims`` (a copy); ``x.flip(0, 1)`` is
    ``x.flip((0, 1))``.

    >>> ember.flip(ember.tensor([[1, 2], [3, 4]]), (1,))
    tensor([[2, 1],
            [4, 3]])
    """
    if more:
        dims = (dims,) + more
    dims = wrap_dims(dims, input.ndim, "flip")
    return apply(_FLIP, input, dims=dims if input.ndim else ())


def fliplr(input):
    """Reverse the columns (dim 1); ``input`` must have at least 2 dims.

    >>> ember.fliplr(ember.tensor([[1, 2], [3, 4]]))
    tensor([[2, 1],
            [4, 3]])
    """
    if input.ndim < 2:
        raise ShapeError(f"fliplr: Input must be >= 2-d, got shape {tuple(input.shape)}")
    return flip(input, (1,))


def flipud(input):
    """Reverse the rows (dim 0); ``input`` must have at least 1 dim.

    >>> ember.flipud(ember.tensor([1, 2, 3]))
    tensor([3, 2, 1])
    """
    if input.ndim < 1:
        raise ShapeError("flipud: Input must be >= 1-d, got a 0-d tensor")
    return flip(input, (0,))


_ROLL = register("roll", lambda xp, a, shifts, dims: xp.roll(a, shifts, axis=dims),
                 lambda n, g: apply(_ROLL, g, shifts=tuple(-s for s in n.params["shifts"]),
                                    dims=n.params["dims"]),
                 saves_inputs=False)


def roll(input, shifts, dims=None):
    """Shift elements along ``dims`` by ``shifts``, wrapping around at the end. With
    ``dims=None`` the tensor is rolled as if flattened, then restored to its shape.

    >>> ember.roll(ember.tensor([1, 2, 3, 4]), 1)
    tensor([4, 1, 2, 3])
    """
    shifts = tuple(int(s) for s in shifts) if isinstance(shifts, (tuple, list)) \
        else (int(shifts),)
    if not shifts:
        raise EmberError("roll: `shifts` required")
    if dims is None or (isinstance(dims, (tuple, list)) and not dims):
        if len(shifts) != 1:
            raise EmberError(f"roll: shifts and dimensions must align. shifts: {len(shifts)}, "
                             "dims:0")
        flat = apply(_ROLL, flatten(input), shifts=shifts, dims=(0,))
        return reshape(flat, tuple(input.shape))
    dims = (dims,) if isinstance(dims, numbers.Integral) else tuple(dims)
    if input.ndim == 0:
        raise EmberIndexError(f"roll: Dimension specified as {dims[0]} but tensor has no "
                              "dimensions")
    if len(dims) != len(shifts):
        raise EmberError(f"roll: shifts and dimensions must align. shifts: {len(shifts)}, "
                         f"dims:{len(dims)}")
    dims = tuple(wrap_dim(d, input.ndim, "roll") for d in dims)  # repeats add up
    return apply(_ROLL, input, shifts=shifts, dims=dims)


def rot90(input, k: int = 1, dims=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane of ``dims``, from the first towards
    the second.

    >>> ember.rot90(ember.tensor([[1, 2], [3, 4]]))
    tensor([[2, 4],
            [1, 3]])
    """
    dims = tuple(dims)
    if len(dims) != 2:
        raise EmberError(f"rot90: expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise ShapeError(f"rot90: expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = wrap_dim(dims[0], input.ndim, "rot90"), wrap_dim(dims[1], input.ndim, "rot90")
    if d0 == d1:
        raise EmberError(f"rot90: expected rotation dims to be different, but got dim0 = {d0} "
                         f"and dim1 = {d1}")
    k = int(k) % 4
    if k == 1:
        return transpose(flip(input, (d1,)), d0, d1)
    if k == 2:
        return flip(input, (d0, d1))
    if k == 3:
        return transpose(flip(input, (d0,)), d0, d1)
    return clone(input)


# repeat / tile / repeat_interleave --------------------------------------------------------
def _repeat_vjp(n, g):
    sizes, shape = n.params["sizes"], tuple(n.inputs[0].shape)
    if not sizes:
        return g
    padded = (1,) * (len(sizes) - len(shape)) + shape
    # each output dim is (repeat, size) blocks: split it in two and sum the repeats away
    blocks = reshape(g, tuple(x for r, s in zip(sizes, padded) for x in (r, s)))
    return reshape(sum(blocks, tuple(range(0, 2 * len(sizes), 2))), shape)


_REPEAT = register("repeat", lambda xp, a, sizes: xp.tile(a, sizes), _repeat_vjp,
                   saves_inputs=False)


def repeat(input, *sizes, **named):
    """Tile the tensor ``sizes[i]`` times along dim ``i`` (a copy). ``sizes`` may have
    more entries than the tensor has dims; the tensor then gains leading dims.

    >>> ember.tensor([1, 2]).repeat(2, 2)
    tensor([[1, 2, 1, 2],
            [1, 2, 1, 2]])
    """
    sizes = size_args(sizes, "repeat", named, "repeats")
    if len(sizes) < input.ndim:
        raise ShapeError(f"repeat: Number of dimensions of repeat dims ({len(sizes)}) can not "
                         f"be smaller than number of dimensions of tensor ({input.ndim})")
    if any(s < 0 for s in sizes):
        raise ShapeError(f"repeat: repeats must be non-negative, got {list(sizes)}")
    return apply(_REPEAT, input, sizes=sizes)


Tensor.repeat = repeat  # a method only: PyTorch has no torch.repeat


def tile(input, *dims, **named):
    """Tile the tensor ``dims[i]`` times along dim ``i``; when ``dims`` is shorter than
    the tensor's shape it is padded with leading 1s (unlike :meth:`Tensor.repeat`).

    >>> ember.tile(ember.tensor([[1, 2]]), (2,))
    tensor([[1, 2, 1, 2]])
    """
    dims = size_args(dims, "tile", named, "dims")
    return repeat(input, (1,) * (input.ndim - len(dims)) + dims)


def _repeat_interleave_vjp(n, g):
    repeats, dim = n.params["repeats"], n.params["dim"]
    shape = tuple(n.inputs[0].shape)
    if isinstance(repeats, int):  # each input element feeds `repeats` adjacent outputs
        split = reshape(g, shape[:dim] + (shape[dim], repeats) + shape[dim + 1:])
        return sum(split, dim + 1)
    return apply(_REPEAT_INTERLEAVE_BACKWARD, g, repeats=repeats, dim=dim)


def _repeat_interleave_backward_forward(xp, g, repeats, dim):
    owner = xp.repeat(xp.arange(len(repeats)), repeats)
    return _scatter_add_axis(xp, g, owner, len(repeats), dim)


_REPEAT_INTERLEAVE = register(
    "repeat_interleave", lambda xp, a, repeats, dim: xp.repeat(a, repeats, axis=dim),
    _repeat_interleave_vjp, saves_inputs=False)
_REPEAT_INTERLEAVE_BACKWARD = register(
    "repeat_interleave_backward", _repeat_interleave_backward_forward,
    lambda n, g: apply(_REPEAT_INTERLEAVE, g, repeats=n.params["repeats"],
                       dim=n.params["dim"]),
    saves_inputs=False)


def repeat_interleave(input, repeats=None, dim: int | None = None, *,
                      output_size: int | None = None):
    """Repeat each element ``repeats`` times along ``dim`` (the flattened tensor when
    ``dim`` is None). ``repeats`` is an int or an integer tensor with one count per
    element. Called with a 1-D integer tensor alone, returns the indices
    ``0, 1, ...`` repeated by its counts.

    >>> ember.repeat_interleave(ember.tensor([1, 2]), 2)
    tensor([1, 1, 2, 2])
    """
    if repeats is None:
        if input.ndim != 1 or input.dtype.is_floating_point or input.dtype.name == "bool":
            raise EmberError(f"repeat_interleave: called with repeats only, expects a 1-D "
                             f"integer tensor of counts, got shape {tuple(input.shape)} and "
                             f"dtype {input.dtype.name}")
        from .creation import arange
        return repeat_interleave(arange(input.shape[0], device=input.device), input,
                                 output_size=output_size)
    counts = _repeat_counts(repeats)
    if dim is None:
        input, d = flatten(input), 0
    elif input.ndim == 0:
        raise EmberIndexError(f"repeat_interleave: Dimension specified as {dim} but tensor "
                              "has no dimensions")
    else:
        d = wrap_dim(dim, input.ndim, "repeat_interleave")
    size = input.shape[d]
    if isinstance(counts, tuple):
        if len(counts) == 1:
            counts = counts[0]
        elif len(counts) != size:
            raise ShapeError(f"repeat_interleave: repeats must have the same size as input "
                             f"along dim, but got repeats.size(0) = {len(counts)} and "
                             f"input.size({d}) = {size}")
    total = counts * size if isinstance(counts, int) else builtins.sum(counts)
    if output_size is not None and output_size != total:
        raise ShapeError(f"repeat_interleave: Invalid output_size, expected {total} but got "
                         f"{output_size}")
    return apply(_REPEAT_INTERLEAVE, input, repeats=counts, dim=d)


def _repeat_counts(repeats):
    """``repeats`` as a non-negative int, or a tuple of them (from a 1-D tensor)."""
    if isinstance(repeats, Tensor):
        if repeats.dtype.is_floating_point or repeats.dtype.name == "bool":
            raise EmberTypeError(f"repeat_interleave: repeats must be an integer tensor, got "
                                 f"dtype {repeats.dtype.name}")
        if repeats.ndim > 1:
            raise ShapeError(f"repeat_interleave: repeats must be 0-dim or 1-dim tensor, got "
                             f"shape {tuple(repeats.shape)}")
        counts = repeats.tolist()
        counts = tuple(counts) if isinstance(counts, list) else int(counts)
    elif isinstance(repeats, numbers.Integral) and not isinstance(repeats, bool):
        counts = int(repeats)
    else:
        raise EmberTypeError(f"repeat_interleave: repeats must be an int or an integer tensor, "
                             f"got {type(repeats).__name__}")
    if (min(counts, default=0) if isinstance(counts, tuple) else counts) < 0:
        raise EmberError(f"repeat_interleave: repeats can not be negative, got {counts}")
    return counts


# tril / triu ------------------------------------------------------------------------------
_TRIL = register("tril", lambda xp, a, diagonal: xp.tril(a, diagonal),
                 lambda n, g: apply(_TRIL, g, diagonal=n.params["diagonal"]),
                 saves_inputs=False)
_TRIU = register("triu", lambda xp, a, diagonal: xp.triu(a, diagonal),
                 lambda n, g: apply(_TRIU, g, diagonal=n.params["diagonal"]),
                 saves_inputs=False)


def _triangle(op, input, diagonal):
    if input.ndim < 2:
        raise ShapeError(f"{op.name}: input tensor must have at least 2 dimensions, got shape "
                         f"{tuple(input.shape)}")
    return apply(op, input, diagonal=int(diagonal))


def tril(input, diagonal: int = 0):
    """The lower triangle of the last two dims (elements on and below diagonal
    ``diagonal``; positive values reach above the main diagonal), the rest zero.

    >>> ember.tril(ember.ones(2, 3))
    tensor([[1., 0., 0.],
            [1., 1., 0.]])
    """
    return _triangle(_TRIL, input, diagonal)


def triu(input, diagonal: int = 0):
    """The upper triangle of the last two dims (elements on and above diagonal
    ``diagonal``), the rest zero.

    >>> ember.triu(ember.ones(2, 3), 1)
    tensor([[0., 1., 1.],
            [0., 0., 1.]])
    """
    return _triangle(_TRIU, input, diagonal)


# diagonal / diag_embed / diag / trace -----------------------------------------------------
def _diagonal_forward(xp, a, offset, dim1, dim2):
    """A strided view of the diagonal (NumPy's own ``diagonal`` is read-only)."""
    start = [slice(None)] * a.ndim
    start[dim2 if offset >= 0 else dim1] = slice(abs(offset), None)
    a = a[tuple(start)]
    length = min(a.shape[dim1], a.shape[dim2])
    keep = [d for d in range(a.ndim) if d not in (dim1, dim2)]
    shape = tuple(a.shape[d] for d in keep) + (length,)
    strides = tuple(a.strides[d] for d in keep) + (a.strides[dim1] + a.strides[dim2],)
    return xp.lib.stride_tricks.as_strided(a, shape, strides)


def _diag_embed_forward(xp, a, shape, offset, dim1, dim2):
    out = xp.zeros(shape, a.dtype)
    _diagonal_forward(xp, out, offset, dim1, dim2)[...] = a
    return out


_DIAGONAL = register("diagonal", _diagonal_forward, is_view=True, saves_inputs=False)
_DIAG_EMBED = register(
    "diag_embed", _diag_embed_forward,
    lambda n, g: apply(_DIAGONAL, g, offset=n.params["offset"], dim1=n.params["dim1"],
                       dim2=n.params["dim2"]),
    saves_inputs=False)


@defvjp(_DIAGONAL)
def _diagonal_vjp(n, g):
    return apply(_DIAG_EMBED, g, shape=tuple(n.inputs[0].shape), offset=n.params["offset"],
                 dim1=n.params["dim1"], dim2=n.params["dim2"])


def _diag_dims(op, dim1, dim2, ndim):
    d1, d2 = wrap_dim(dim1, ndim, op), wrap_dim(dim2, ndim, op)
    if d1 == d2:
        raise EmberError(f"{op}: diagonal dimensions cannot be identical {dim1}, {dim2}")
    return d1, d2


def diagonal(input, offset: int = 0, dim1: int = 0, dim2: int = 1):
    """The diagonal of the 2-D planes spanned by ``dim1`` and ``dim2``, as a view that
    shares memory with ``input`` (writing to it writes to ``input``). Those two dims are
    removed and the diagonal becomes the last dim. ``offset > 0`` takes a diagonal above
    the main one, ``offset < 0`` one below.

    >>> ember.diagonal(ember.tensor([[1, 2], [3, 4]]))
    tensor([1, 4])
    """
    d1, d2 = _diag_dims("diagonal", dim1, dim2, input.ndim)
    return apply(_DIAGONAL, input, offset=int(offset), dim1=d1, dim2=d2)


def diag_embed(input, offset: int = 0, dim1: int = -2, dim2: int = -1):
    """Tensors whose diagonals (over ``dim1`` and ``dim2`` of the result) are filled
    from the last dim of ``input``, zeros elsewhere.

    >>> ember.diag_embed(ember.tensor([1, 2]))
    tensor([[1, 0],
            [0, 2]])
    """
    d1, d2 = _diag_dims("diag_embed", dim1, dim2, input.ndim + 1)
    size = input.shape[-1] + abs(int(offset))
    shape = list(input.shape[:-1])
    for d in sorted((d1, d2)):
        shape.insert(d, size)
    return apply(_DIAG_EMBED, input, shape=tuple(shape), offset=int(offset), dim1=d1, dim2=d2)


def diag(input, diagonal: int = 0):
    """For a 1-D tensor, the square matrix with ``input`` on diagonal ``diagonal``; for a
    2-D tensor, a copy of that diagonal as a 1-D tensor.

    >>> ember.diag(ember.tensor([1, 2]))
    tensor([[1, 0],
            [0, 2]])
    """
    if input.ndim == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.ndim == 2:
        return clone(apply(_DIAGONAL, input, offset=int(diagonal), dim1=0, dim2=1))
    raise ShapeError(f"diag: Supports 1D or 2D tensors. Got {input.ndim}D (shape "
                     f"{tuple(input.shape)})")


def trace(input):
    """The sum of the main diagonal of a matrix (integers sum to int64).

    >>> ember.trace(ember.tensor([[1.0, 2.0], [3.0, 4.0]]))
    tensor(5.)
    """
    if input.ndim != 2:
        raise ShapeError(f"trace: expected a matrix, but got tensor with dim {input.ndim} "
                         f"(shape {tuple(input.shape)})")
    if input.dtype.name == "bool":
        raise EmberTypeError("trace: not implemented for 'Bool'")
    return sum(diagonal(input))


# meshgrid --------------------------------------------------------------------------------
def meshgrid(*tensors, indexing: str = "ij"):
    """Coordinate grids from 1-D (or 0-D) tensors: output ``i`` holds ``tensors[i]``
    expanded along every other dim. ``indexing='ij'`` gives shape
    ``(len(t0), len(t1), ...)``; ``'xy'`` swaps the first two dims (Cartesian, as NumPy's
    default). The outputs are views of the inputs.

    >>> xs, ys = ember.meshgrid(ember.tensor([1, 2, 3]), ember.tensor([4, 5]))
    >>> xs.shape
    ember.Size([3, 2])
    """
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise EmberError(f'meshgrid: indexing must be one of "xy" or "ij", but received: '
                         f"{indexing}")
    if not tensors:
        raise EmberError("meshgrid: expects a non-empty list of tensors")
    for i, t in enumerate(tensors):
        if t.ndim > 1:
            raise ShapeError(f"meshgrid: Expected 0D or 1D tensor in the tensor list but got "
                             f"shape {tuple(t.shape)} at position {i}")
        if t.dtype is not tensors[0].dtype:
            raise EmberTypeError(f"meshgrid: expects all tensors to have the same dtype, got "
                                 f"{tensors[0].dtype.name} and {t.dtype.name}")
        if t.device != tensors[0].device:
            raise EmberError(f"meshgrid: expects all tensors to be on the same device, got "
                             f"{tensors[0].device} and {t.device}")
    swap = indexing == "xy" and len(tensors) >= 2
    if swap:
        tensors = (tensors[1], tensors[0]) + tuple(tensors[2:])
    sizes = tuple(t.numel() for t in tensors)
    grids = []
    for i, t in enumerate(tensors):
        axis_shape = (1,) * i + (sizes[i],) + (1,) * (len(tensors) - i - 1)
        grids.append(expand(reshape(t, axis_shape), sizes))
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)
