"""Convolution: conv1d/2d/3d, conv_transpose1d/2d/3d, unfold (im2col) and fold (col2im).

One N-d implementation serves every rank. The input is padded, a strided view lays the
receptive fields out as columns (im2col, no Python loop over pixels), and one BLAS
matmul per group contracts them with the weight. Three primitives close under
differentiation, so gradients of any order are convolutions again:

- ``convolution(x, w)``: the forward;
- ``conv_transpose(g, w)``: its adjoint in ``x`` (the input gradient, and the public
  transposed convolution): a matmul followed by col2im, which adds the columns back;
- ``conv_weight_grad(x, g)``: its adjoint in ``w``: a matmul of ``g`` with the columns.

For stride-1 convolutions with many input channels the columns use a *wide grid*: each
output row is computed at every column of the padded input (the extra columns are
dropped afterwards), so a column of the im2col matrix is a contiguous run of the padded
image. That turns the copies of im2col and col2im into a few long runs instead of one
short run per output row, which is what makes NumPy fast here.
"""
from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, EmberTypeError, ShapeError
from ..tensor import Tensor
from ._xp import as_strided, gemm
from .conv_grad_kernels import conv2d_input_grad, conv2d_weight_grad
from .conv_forward import conv2d_forward
from .conv_kernels import col2im_2d
from .registry import AbstractValue, apply, autocast_inputs, register
from .shape import squeeze, unsqueeze

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "unfold", "fold"]

# A copied row costs about as much as this many flops of GEMM (measured on NumPy with
# OpenBLAS); used to choose between the wide and the exact grid.
_ROW_COST_FLOPS = 750
_F32 = np.dtype(np.float32)


# Geometry ------------------------------------------------------------------------------
class Geometry:
    """Everything about one convolution's index arithmetic, computed once per shape.

    ``n``/``c``/``o``: batch, input and output channels; ``spatial``: the input's sizes
    (before padding); ``out``: the output's sizes; ``pads``: (low, high) per dim;
    ``padded``: the padded input's sizes. The *grid* is where outputs are computed:
    ``grid`` (its shape per image), ``grid_len`` (its length per image) and
    ``grid_out_strides`` (an output position's offset in it, in elements).
    """
    __slots__ = ("n", "c", "o", "groups", "spatial", "kernel", "stride", "dilation",
                 "pads", "out", "padded", "wide", "grid", "grid_len", "grid_out_strides")

    def __init__(self, n, c, o, groups, spatial, kernel, stride, dilation, pads, out, wide):
        self.n, self.c, self.o, self.groups = n, c, o, groups
        self.spatial, self.kernel, self.stride = spatial, kernel, stride
        self.dilation, self.pads, self.out = dilation, pads, out
        self.padded = tuple(s + lo + hi for s, (lo, hi) in zip(spatial, pads))
        self.wide = wide
        if wide:
            row = _row_strides(self.padded)
            self.grid_out_strides = row
            self.grid_len = sum((o_ - 1) * m for o_, m in zip(out, row)) + 1
            self.grid = (self.grid_len,)
        else:
            self.grid_out_strides = _row_strides(out)
            self.grid_len = math.prod(out)
            self.grid = out


def _row_strides(shape) -> tuple:
    """C-order strides (in elements) of an array of ``shape``."""
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
    return tuple(reversed(strides))


@functools.lru_cache(maxsize=512)
def geometry(n, c, o, groups, spatial, kernel, stride, dilation, pads, out,
             allow_wide=True) -> Geometry:
    """The (cached) :class:`Geometry` of a convolution; chooses the grid."""
    wide = allow_wide and len(spatial) > 1 and all(s == 1 for s in stride) and \
        _wide_is_cheaper(n, c // groups * math.prod(kernel), o // groups, groups, spatial,
                         pads, out)
    return Geometry(n, c, o, groups, spatial, kernel, stride, dilation, pads, out, wide)


def _wide_is_cheaper(n, k_cols, o_per_group, groups, spatial, pads, out) -> bool:
    """The wide grid copies fewer, longer rows but computes extra (discarded) columns."""
    padded = [s + lo + hi for s, (lo, hi) in zip(spatial, pads)]
    rows_exact = groups * k_cols * n * math.prod(out[:-1])
    rows_wide = groups * k_cols * n + n * groups * o_per_group * math.prod(out[:-1])
    wide_len = sum((o_ - 1) * m for o_, m in zip(out, _row_strides(padded))) + 1
    extra_flops = 2 * (wide_len - math.prod(out)) * n * k_cols * o_per_group * groups
    return rows_wide * _ROW_COST_FLOPS + extra_flops < rows_exact * _ROW_COST_FLOPS


# im2col / col2im on arrays ---------------------------------------------------------------
def pad_input(xp, x, geo: Geometry, fill=0):
    """``x`` padded by ``geo.pads`` with ``fill`` (x itself when there is no padding and
    its layout already suits the grid)."""
    if not any(lo or hi for lo, hi in geo.pads):
        if not geo.wide or _spatially_contiguous(x):
            return x
        return xp.ascontiguousarray(x)
    out = xp.full(x.shape[:2] + geo.padded, fill, dtype=x.dtype)
    inner = tuple(slice(lo, lo + s) for (lo, _), s in zip(geo.pads, geo.spatial))
    out[(slice(None), slice(None)) + inner] = x
    return out


def _spatially_contiguous(x) -> bool:
    """Whether the spatial dims of ``x`` form one C-ordered block (the wide grid steps
    through them as one flat axis)."""
    return x.strides[2:] == tuple(w * x.itemsize for w in _row_strides(x.shape[2:]))


def windows(xp, xpad, geo: Geometry):
    """A strided view of the padded input, shape ``(C, *kernel, N, *grid)``: element
    ``[c, k..., n, t...]`` is the input under kernel tap ``k`` for output ``t``."""
    s_n, s_c, *s_sp = xpad.strides
    tap = tuple(d * s for d, s in zip(geo.dilation, s_sp))
    if geo.wide:
        grid = (s_sp[-1],)
    else:
        grid = tuple(st * s for st, s in zip(geo.stride, s_sp))
    shape = (xpad.shape[1],) + geo.kernel + (xpad.shape[0],) + geo.grid
    return as_strided(xp, xpad, shape, (s_c,) + tap + (s_n,) + grid, writeable=False)


def im2col(xp, x, geo: Geometry, ones_row: bool = False):
    """The columns of ``x``, contiguous: ``(groups, C/groups * K, N * grid_len)`` on a wide
    grid (one GEMM per group), ``(N, groups, C/groups * K, L)`` on the exact grid (one
    GEMM per image and group, whose results are already in the output's layout).

    ``ones_row`` appends a row of ones to each group's columns, so that a bias appended
    to the weight matrix is added by the GEMM itself rather than by another pass."""
    view = windows(xp, pad_input(xp, x, geo), geo)  # (C, *K, N, *grid)
    rows = _cols_per_group(geo)
    extra = 1 if ones_row else 0
    kernel, n, groups = geo.kernel, geo.n, geo.groups
    per_group = (groups, geo.c // groups)
    if geo.wide:
        cols = xp.empty((groups, rows + extra, n * geo.grid_len), dtype=x.dtype)
        target = cols[:, :rows].reshape(per_group + kernel + (n,) + geo.grid)
        source = view.reshape(per_group + view.shape[1:])
    else:
        d = len(kernel)
        cols = xp.empty((n, groups, rows + extra, geo.grid_len), dtype=x.dtype)
        target = cols[:, :, :rows].reshape((n,) + per_group + kernel + geo.out)
        order = (d + 1, 0) + tuple(range(1, d + 1)) + tuple(range(d + 2, 2 * d + 2))
        source = view.transpose(order).reshape((n,) + per_group + kernel + geo.out)
    target[...] = source
    if ones_row:
        cols[..., rows, :] = 1
    return cols


def _cols_per_group(geo: Geometry) -> int:
    return geo.c // geo.groups * math.prod(geo.kernel)


def exact_cols_view(cols, geo: Geometry):
    """Exact-grid columns ``(N, groups, C/groups * K, L)`` viewed as ``(C, *K, N, *out)``,
    the layout :func:`col2im` reads."""
    d = len(geo.kernel)
    view = cols.reshape((geo.n, geo.c) + geo.kernel + geo.out)
    return view.transpose((1,) + tuple(range(2, d + 2)) + (0,) + tuple(range(d + 2, 2 * d + 2)))


def col2im(xp, cols, geo: Geometry, dtype):
    """The adjoint of :func:`windows`: add each entry of ``cols`` (viewable as
    ``(C, *kernel, N, *grid)``) into the input position it was read from."""
    buf = xp.zeros((geo.n, geo.c) + geo.padded, dtype=dtype)
    if buf.size and cols.size and not (xp is np and col2im_2d(cols, buf, geo)):
        flat = buf.reshape(-1)
        item = buf.itemsize
        rows = _row_strides(geo.padded)
        plane = math.prod(geo.padded)
        if geo.wide:
            grid = (item,)
        else:
            grid = tuple(st * r * item for st, r in zip(geo.stride, rows))
        shape = (geo.c, geo.n) + geo.grid
        strides = (plane * item, geo.c * plane * item) + grid
        for taps in itertools.product(*(range(k) for k in geo.kernel)):
            offset = sum(t * d * r for t, d, r in zip(taps, geo.dilation, rows))
            target = as_strided(xp, flat[offset:], shape, strides)
            target += cols[(slice(None),) + taps]
    inner = tuple(slice(lo, lo + s) for (lo, _), s in zip(geo.pads, geo.spatial))
    if any(lo or hi for lo, hi in geo.pads):
        return xp.ascontiguousarray(buf[(slice(None), slice(None)) + inner])
    return buf


def grid_to_output(xp, y, geo: Geometry):
    """Wide-grid results ``(O, N * grid_len)`` as the contiguous output ``(N, O, *out)``."""
    view = as_strided(xp, y, (geo.n, geo.o) + geo.out, _grid_strides(geo, y.itemsize),
                      writeable=False)
    return xp.ascontiguousarray(view)


def output_to_grid(xp, g, geo: Geometry):
    """The adjoint of :func:`grid_to_output`: ``g`` ``(N, O, *out)`` laid out as
    ``(groups, O/groups, N * grid_len)``, zero at the grid positions no output uses."""
    buf = xp.zeros((geo.o, geo.n * geo.grid_len), dtype=g.dtype)
    as_strided(xp, buf, (geo.n, geo.o) + geo.out, _grid_strides(geo, buf.itemsize))[...] = g
    return buf.reshape(geo.groups, geo.o // geo.groups, geo.n * geo.grid_len)


def _grid_strides(geo: Geometry, item: int) -> tuple:
    return (geo.grid_len * item, geo.n * geo.grid_len * item) + \
        tuple(s * item for s in geo.grid_out_strides)


# The three primitives ----------------------------------------------------------------------
def compute_dtype(a):
    """Half precision is computed in float32 and rounded once, as PyTorch's CPU does."""
    return _F32 if a.dtype.itemsize == 2 and a.dtype.kind in "fV" else a.dtype


def _grouped_weight(w, groups, work):
    return w.astype(work, copy=False).reshape(groups, w.shape[0] // groups,
                                              math.prod(w.shape[1:]))


def _per_group(g, geo: Geometry):
    """``(N, O, *out)`` as ``(N, groups, O/groups, L)``."""
    return g.reshape(geo.n, geo.groups, geo.o // geo.groups, geo.grid_len)


def _conv_forward(xp, x, w, *bias, stride, padding, dilation, groups, out_size):
    if xp is np and groups == 1 and len(out_size) == 2:  # one C loop (conv_forward.py)
        done = conv2d_forward(x, w, bias[0] if bias else None, stride,
                              tuple(lo for lo, _ in padding), dilation, out_size)
        if done is not None:
            return done
    geo = geometry(x.shape[0], x.shape[1], w.shape[0], groups, x.shape[2:], w.shape[2:],
                   stride, dilation, padding, out_size)
    work = compute_dtype(x)
    cols = im2col(xp, x.astype(work, copy=False), geo, ones_row=bool(bias))
    wm = _grouped_weight(w, groups, work)
    if bias:  # the bias rides along as one more column of the weight
        b = bias[0].astype(work, copy=False).reshape(groups, geo.o // groups, 1)
        wm = xp.concatenate([wm, b], axis=2)
    if geo.wide:
        out = grid_to_output(xp, gemm(xp, wm, cols).reshape(geo.o, geo.n * geo.grid_len),
                             geo)
    else:
        out = gemm(xp, wm, cols).reshape((geo.n, geo.o) + out_size)
    return out.astype(x.dtype, copy=False)


def _conv_transpose_forward(xp, g, w, *bias, stride, padding, dilation, groups, out_size):
    if xp is np and groups == 1 and len(out_size) == 2:  # one C loop (conv_grad_kernels.py)
        dx = conv2d_input_grad(g, w, out_size, stride, tuple(lo for lo, _ in padding),
                               dilation)
        if dx is not None:
            if bias:
                dx += bias[0].astype(dx.dtype, copy=False).reshape(-1, 1, 1)
            return dx
    c = w.shape[1] * groups
    geo = geometry(g.shape[0], c, w.shape[0], groups, out_size, w.shape[2:], stride,
                   dilation, padding, g.shape[2:])
    dtype, work = g.dtype, compute_dtype(g)
    wt = _grouped_weight(w, groups, work).transpose(0, 2, 1)
    g = g.astype(work, copy=False)
    if geo.wide:
        cols = gemm(xp, wt, output_to_grid(xp, g, geo))
        cols = cols.reshape((c,) + geo.kernel + (geo.n,) + geo.grid)
    else:
        cols = exact_cols_view(gemm(xp, wt, _per_group(g, geo)), geo)
    dx = col2im(xp, cols, geo, work)
    if bias:
        dx += bias[0].astype(work, copy=False).reshape((c,) + (1,) * len(out_size))
    return dx.astype(dtype, copy=False)


def _conv_weight_grad_forward(xp, x, g, *, stride, padding, dilation, groups, kernel_size):
    if xp is np and groups == 1 and len(kernel_size) == 2:  # (conv_grad_kernels.py)
        dw = conv2d_weight_grad(x, g, kernel_size, stride, tuple(lo for lo, _ in padding),
                                dilation)
        if dw is not None:
            return dw
    geo = geometry(x.shape[0], x.shape[1], g.shape[1], groups, x.shape[2:], kernel_size,
                   stride, dilation, padding, g.shape[2:])
    work = compute_dtype(x)
    cols = im2col(xp, x.astype(work, copy=False), geo)
    g = g.astype(work, copy=False)
    if geo.wide:
        # (cols @ gg^T)^T: the long dimension inner on both operands suits BLAS best
        dw = gemm(xp, cols, output_to_grid(xp, g, geo).transpose(0, 2, 1))
        dw = dw.transpose(0, 2, 1)
    else:
        dw = gemm(xp, _per_group(g, geo), cols.transpose(0, 1, 3, 2)).sum(axis=0)
    shape = (geo.o, geo.c // groups) + kernel_size
    return xp.ascontiguousarray(dw).reshape(shape).astype(x.dtype, copy=False)


def _bias_grad_forward(xp, g):
    flat = g.astype(compute_dtype(g), copy=False).reshape(g.shape[:2] + (math.prod(g.shape[2:]),))
    # einsum sums without NumPy's pairwise passes, several times faster here
    return xp.einsum("ncl->c", flat).astype(g.dtype, copy=False)


def _geometry_params(p):
    return {k: p[k] for k in ("stride", "padding", "dilation", "groups")}


def _bias_grad(g):
    return apply(_BIAS_GRAD, g)


def _bias_grad_vjp(n, u):
    shape = tuple(n.inputs[0].shape)
    return u.reshape((shape[1],) + (1,) * (len(shape) - 2)).expand(shape)


def _conv_vjp(n, g):
    inputs = n.saved_inputs()
    x, w = inputs[0], inputs[1]
    p = _geometry_params(n.params)
    gx = gw = gb = None
    if n.edges[0] is not None:
        gx = apply(_CONV_TRANSPOSE, g, w, out_size=tuple(x.shape[2:]), **p)
    if n.edges[1] is not None:
        gw = apply(_CONV_WEIGHT_GRAD, x, g, kernel_size=tuple(w.shape[2:]), **p)
    if len(inputs) == 3 and n.edges[2] is not None:
        gb = _bias_grad(g)
    return gx, gw, gb


def _conv_transpose_vjp(n, u):
    inputs = n.saved_inputs()
    g, w = inputs[0], inputs[1]
    p = _geometry_params(n.params)
    gg = gw = gb = None
    if n.edges[0] is not None:
        gg = apply(_CONV, u, w, out_size=tuple(g.shape[2:]), **p)
    if n.edges[1] is not None:
        gw = apply(_CONV_WEIGHT_GRAD, u, g, kernel_size=tuple(w.shape[2:]), **p)
    if len(inputs) == 3 and n.edges[2] is not None:
        gb = _bias_grad(u)
    return gg, gw, gb


def _conv_weight_grad_vjp(n, u):
    x, g = n.saved_inputs()
    p = _geometry_params(n.params)
    gx = gg = None
    if n.edges[0] is not None:
        gx = apply(_CONV_TRANSPOSE, g, u, out_size=tuple(x.shape[2:]), **p)
    if n.edges[1] is not None:
        gg = apply(_CONV, x, u, out_size=tuple(g.shape[2:]), **p)
    return gx, gg


def _conv_infer(x, w, *bias, out_size, **p):
    return AbstractValue((x.shape[0], w.shape[0]) + tuple(out_size), x.dtype)


def _conv_transpose_infer(g, w, *bias, out_size, groups, **p):
    return AbstractValue((g.shape[0], w.shape[1] * groups) + tuple(out_size), g.dtype)


def _conv_weight_grad_infer(x, g, *, kernel_size, groups, **p):
    return AbstractValue((g.shape[1], x.shape[1] // groups) + tuple(kernel_size), x.dtype)


_CONV = register("convolution", _conv_forward, _conv_vjp, infer=_conv_infer)
_CONV_TRANSPOSE = register("conv_transpose", _conv_transpose_forward, _conv_transpose_vjp,
                           infer=_conv_transpose_infer)
_CONV_WEIGHT_GRAD = register("conv_weight_grad", _conv_weight_grad_forward,
                             _conv_weight_grad_vjp, infer=_conv_weight_grad_infer)
_BIAS_GRAD = register("conv_bias_grad", _bias_grad_forward, _bias_grad_vjp,
                      saves_inputs=False,
                      infer=lambda g: AbstractValue((g.shape[1],), g.dtype))


# Argument checking -------------------------------------------------------------------------
_DIM_NAMES = {1: ("L",), 2: ("H", "W"), 3: ("D", "H", "W")}


def ntuple(name: str, what: str, value, d: int) -> tuple:
    """``value`` (an int or a sequence of ``d`` ints) as a tuple of ``d`` ints."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),) * d
    if isinstance(value, (tuple, list)) and len(value) == d and \
            all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value):
        return tuple(int(v) for v in value)
    if isinstance(value, (tuple, list)) and len(value) == 1 and d > 1:
        return ntuple(name, what, value[0], d)
    raise EmberError(f"{name}: expected {what} to be an int or a tuple of {d} ints, "
                     f"got {value!r}")


def _check_tensor(name: str, what: str, value) -> None:
    if not isinstance(value, Tensor):
        raise EmberTypeError(f"{name}: expected {what} to be a Tensor, got "
                             f"{type(value).__name__}")


def check_input_rank(name: str, input, d: int) -> bool:
    """Raise unless ``input`` has ``d + 2`` dims (or ``d + 1``, unbatched); returns
    whether it is batched."""
    _check_tensor(name, "input", input)
    if input.ndim in (d + 1, d + 2):
        return input.ndim == d + 2
    dims = ", ".join(_DIM_NAMES[d])
    raise ShapeError(f"{name}: expected input with {d + 2} dims (N, C, {dims}) or {d + 1} "
                     f"(C, {dims}), got shape {tuple(input.shape)}")


def _check_dtypes(name: str, input, weight, bias) -> None:
    if input.dtype is dt.bool:
        raise EmberTypeError(f"{name}: bool tensors are not supported")
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.dtype is not input.dtype:
            raise EmberTypeError(f"{name}: input dtype {input.dtype.name} and {what} dtype "
                                 f"{t.dtype.name} differ; convert one of them")


def _check_positive(name: str, what: str, values: tuple, allow_zero: bool = False) -> None:
    if any(v < 0 or (v == 0 and not allow_zero) for v in values):
        kind = "non-negative" if allow_zero else "positive"
        raise EmberError(f"{name}: {what} must be {kind}, got {values}")


def _check_weight(name, weight, d, c, groups, out_dim_name, transposed):
    if weight.ndim != d + 2:
        dims = ", ".join(f"k{x}" for x in _DIM_NAMES[d])
        layout = ("in_channels, out_channels/groups" if transposed
                  else "out_channels, in_channels/groups")
        raise ShapeError(f"{name}: expected weight with {d + 2} dims ({layout}, {dims}), "
                         f"got shape {tuple(weight.shape)}")
    if not isinstance(groups, (int, np.integer)) or isinstance(groups, bool) or groups < 1:
        raise EmberError(f"{name}: groups must be a positive integer, got {groups!r}")
    if weight.shape[0] % groups:
        raise ShapeError(f"{name}: weight's first dim ({out_dim_name}) {weight.shape[0]} is "
                         f"not divisible by groups {groups} (weight shape "
                         f"{tuple(weight.shape)})")
    expects = weight.shape[0] if transposed else weight.shape[1] * groups
    if c != expects:
        raise ShapeError(f"{name}: input has {c} channels but weight expects {expects} "
                         f"(weight shape {tuple(weight.shape)}, groups {groups})")


def _check_bias(name, bias, channels):
    if bias is None:
        return
    _check_tensor(name, "bias", bias)
    if tuple(bias.shape) != (channels,):
        raise ShapeError(f"{name}: expected bias of shape ({channels},), got "
                         f"{tuple(bias.shape)}")


def _conv_padding(name, padding, kernel, dilation, stride, d):
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * d
        if padding == "same":
            if any(s != 1 for s in stride):
                raise EmberError(f"{name}: padding='same' is not supported for strided "
                                 f"convolutions (stride {stride})")
            # the odd unit of an even kernel's padding goes on the high side, as in torch
            total = [dl * (k - 1) for dl, k in zip(dilation, kernel)]
            return tuple((t // 2, t - t // 2) for t in total)
        raise EmberError(f"{name}: padding must be 'valid', 'same', an int or a tuple of "
                         f"{d} ints, got {padding!r}")
    pads = ntuple(name, "padding", padding, d)
    _check_positive(name, "padding", pads, allow_zero=True)
    return tuple((p, p) for p in pads)


def _output_size(name, spatial, kernel, stride, dilation, pads) -> tuple:
    out = []
    for s, k, st, dl, (lo, hi) in zip(spatial, kernel, stride, dilation, pads):
        extent = dl * (k - 1) + 1
        if s + lo + hi < extent:
            padded = tuple(s_ + lo_ + hi_ for s_, (lo_, hi_) in zip(spatial, pads))
            kern = tuple(dl_ * (k_ - 1) + 1 for k_, dl_ in zip(kernel, dilation))
            raise ShapeError(f"{name}: kernel size {kern} (after dilation) is larger than "
                             f"the padded input size {padded} (input {spatial}, padding "
                             f"{tuple(lo_ for lo_, _ in pads)})")
        out.append((s + lo + hi - extent) // st + 1)
    return tuple(out)


# Public functions --------------------------------------------------------------------------
def _convnd(name, d, input, weight, bias, stride, padding, dilation, groups):
    batched = check_input_rank(name, input, d)
    _check_tensor(name, "weight", weight)
    input, weight, bias = autocast_inputs("convolution", input, weight, bias)
    _check_dtypes(name, input, weight, bias)
    x = input if batched else unsqueeze(input, 0)
    _check_weight(name, weight, d, x.shape[1], groups, "out_channels", False)
    _check_bias(name, bias, weight.shape[0])
    stride = ntuple(name, "stride", stride, d)
    dilation = ntuple(name, "dilation", dilation, d)
    _check_positive(name, "stride", stride)
    _check_positive(name, "dilation", dilation)
    kernel = tuple(weight.shape[2:])
    pads = _conv_padding(name, padding, kernel, dilation, stride, d)
    out_size = _output_size(name, tuple(x.shape[2:]), kernel, stride, dilation, pads)
    inputs = (x, weight) if bias is None else (x, weight, bias)
    out = apply(_CONV, *inputs, stride=stride, padding=pads, dilation=dilation,
                groups=int(groups), out_size=out_size)
    return out if batched else squeeze(out, 0)


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """1-D cross-correlation over an input ``(N, C_in, L)`` (or ``(C_in, L)``) with a
    weight ``(C_out, C_in/groups, kL)``.

    Args:
        padding: an int, a tuple, ``"valid"`` (none) or ``"same"`` (output as long as
            the input; stride 1 only).

    >>> F.conv1d(ember.randn(2, 3, 10), ember.randn(4, 3, 3), padding="same").shape
    ember.Size([2, 4, 10])
    """
    return _convnd("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """2-D cross-correlation over an input ``(N, C_in, H, W)`` (or ``(C_in, H, W)``) with
    a weight ``(C_out, C_in/groups, kH, kW)`` and an optional bias ``(C_out,)``.

    Args:
        stride, dilation: an int or a pair.
        padding: an int, a pair, ``"valid"`` (none) or ``"same"`` (output the size of the
            input; stride 1 only; an even kernel pads one more on the high side).
        groups: splits the channels into groups convolved separately.

    >>> F.conv2d(ember.randn(1, 3, 8, 8), ember.randn(16, 3, 3, 3), padding=1).shape
    ember.Size([1, 16, 8, 8])
    """
    return _convnd("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """3-D cross-correlation over an input ``(N, C_in, D, H, W)`` (or unbatched) with a
    weight ``(C_out, C_in/groups, kD, kH, kW)``; arguments as in :func:`conv2d`.

    >>> F.conv3d(ember.randn(1, 2, 4, 4, 4), ember.randn(3, 2, 3, 3, 3)).shape
    ember.Size([1, 3, 2, 2, 2])
    """
    return _convnd("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


def _conv_transposend(name, d, input, weight, bias, stride, padding, output_padding, groups,
                      dilation):
    batched = check_input_rank(name, input, d)
    _check_tensor(name, "weight", weight)
    input, weight, bias = autocast_inputs("conv_transpose", input, weight, bias)
    _check_dtypes(name, input, weight, bias)
    x = input if batched else unsqueeze(input, 0)
    _check_weight(name, weight, d, x.shape[1], groups, "in_channels", True)
    channels = weight.shape[1] * groups
    _check_bias(name, bias, channels)
    stride = ntuple(name, "stride", stride, d)
    dilation = ntuple(name, "dilation", dilation, d)
    if isinstance(padding, str):
        raise EmberError(f"{name}: padding must be an int or a tuple of {d} ints, got "
                         f"{padding!r} (string padding is for conv{d}d only)")
    pads = ntuple(name, "padding", padding, d)
    extra = ntuple(name, "output_padding", output_padding, d)
    _check_positive(name, "stride", stride)
    _check_positive(name, "dilation", dilation)
    _check_positive(name, "padding", pads, allow_zero=True)
    _check_positive(name, "output_padding", extra, allow_zero=True)
    if any(e >= s and e >= dl for e, s, dl in zip(extra, stride, dilation)):
        raise EmberError(f"{name}: output_padding {extra} must be smaller than either stride "
                         f"{stride} or dilation {dilation}")
    kernel = tuple(weight.shape[2:])
    out_size = tuple((n - 1) * s - 2 * p + dl * (k - 1) + e + 1 for n, s, p, dl, k, e in
                     zip(x.shape[2:], stride, pads, dilation, kernel, extra))
    if any(o <= 0 for o in out_size):
        raise ShapeError(f"{name}: the output size {out_size} is not positive (input "
                         f"{tuple(x.shape)}, weight {tuple(weight.shape)}, padding {pads})")
    inputs = (x, weight) if bias is None else (x, weight, bias)
    out = apply(_CONV_TRANSPOSE, *inputs, stride=stride, padding=tuple((p, p) for p in pads),
                dilation=dilation, groups=int(groups), out_size=out_size)
    return out if batched else squeeze(out, 0)


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """1-D transposed convolution (the adjoint of :func:`conv1d`) of ``(N, C_in, L)``
    with a weight ``(C_in, C_out/groups, kL)``; arguments as in :func:`conv_transpose2d`.

    >>> F.conv_transpose1d(ember.randn(1, 4, 5), ember.randn(4, 2, 3), stride=2).shape
    ember.Size([1, 2, 11])
    """
    return _conv_transposend("conv_transpose1d", 1, input, weight, bias, stride, padding,
                             output_padding, groups, dilation)


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """2-D transposed convolution ("deconvolution"): the adjoint of :func:`conv2d`, of
    an input ``(N, C_in, H, W)`` with a weight ``(C_in, C_out/groups, kH, kW)``.

    The output size is ``(H - 1) * stride - 2 * padding + dilation * (k - 1) +
    output_padding + 1`` per dim; ``output_padding`` picks among the sizes that a strided
    conv2d maps to the same input size.

    >>> F.conv_transpose2d(ember.randn(1, 4, 5, 5), ember.randn(4, 2, 3, 3), stride=2).shape
    ember.Size([1, 2, 11, 11])
    """
    return _conv_transposend("conv_transpose2d", 2, input, weight, bias, stride, padding,
                             output_padding, groups, dilation)


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """3-D transposed convolution of ``(N, C_in, D, H, W)`` with a weight
    ``(C_in, C_out/groups, kD, kH, kW)``; arguments as in :func:`conv_transpose2d`.

    >>> F.conv_transpose3d(ember.randn(1, 2, 3, 3, 3), ember.randn(2, 1, 2, 2, 2)).shape
    ember.Size([1, 1, 4, 4, 4])
    """
    return _conv_transposend("conv_transpose3d", 3, input, weight, bias, stride, padding,
                             output_padding, groups, dilation)


# unfold / fold ------------------------------------------------------------------------------
def _unfold_forward(xp, x, kernel_size, dilation, padding, stride, out_size):
    geo = geometry(x.shape[0], x.shape[1], 0, 1, x.shape[2:], kernel_size, stride, dilation,
                   padding, out_size, allow_wide=False)
    view = windows(xp, pad_input(xp, x, geo), geo)  # (C, *K, N, *out)
    d = len(kernel_size)
    order = (d + 1, 0) + tuple(range(1, d + 1)) + tuple(range(d + 2, 2 * d + 2))
    cols = xp.ascontiguousarray(view.transpose(order))
    return cols.reshape(x.shape[0], x.shape[1] * math.prod(kernel_size), geo.grid_len)


def _fold_forward(xp, cols, kernel_size, dilation, padding, stride, out_size, output_size):
    d = len(kernel_size)
    n = cols.shape[0]
    c = cols.shape[1] // math.prod(kernel_size)
    geo = geometry(n, c, 0, 1, output_size, kernel_size, stride, dilation, padding, out_size,
                   allow_wide=False)
    view = cols.reshape((n, c) + kernel_size + out_size)
    order = (1,) + tuple(range(2, d + 2)) + (0,) + tuple(range(d + 2, 2 * d + 2))
    return col2im(xp, view.transpose(order), geo, cols.dtype)


def _unfold_vjp(n, g):
    p = n.params
    return apply(_FOLD, g, output_size=tuple(n.inputs[0].shape[2:]), **p)


def _fold_vjp(n, g):
    p = dict(n.params)
    del p["output_size"]
    return apply(_UNFOLD, g, **p)


def _unfold_infer(x, kernel_size, out_size, **p):
    return AbstractValue((x.shape[0], x.shape[1] * math.prod(kernel_size),
                          math.prod(out_size)), x.dtype)


def _fold_infer(cols, kernel_size, output_size, **p):
    return AbstractValue((cols.shape[0], cols.shape[1] // math.prod(kernel_size))
                         + tuple(output_size), cols.dtype)


_UNFOLD = register("im2col", _unfold_forward, _unfold_vjp, saves_inputs=False,
                   infer=_unfold_infer)
_FOLD = register("col2im", _fold_forward, _fold_vjp, saves_inputs=False, infer=_fold_infer)


def _block_args(name, kernel_size, dilation, padding, stride):
    kernel = ntuple(name, "kernel_size", kernel_size, 2)
    dilation = ntuple(name, "dilation", dilation, 2)
    pads = ntuple(name, "padding", padding, 2)
    stride = ntuple(name, "stride", stride, 2)
    _check_positive(name, "kernel_size", kernel)
    _check_positive(name, "dilation", dilation)
    _check_positive(name, "stride", stride)
    _check_positive(name, "padding", pads, allow_zero=True)
    return kernel, dilation, tuple((p, p) for p in pads), stride


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Extract sliding blocks (im2col): ``(N, C, H, W)`` becomes ``(N, C * kH * kW, L)``,
    one column per block position (``L`` of them, row-major), entries ordered
    ``(c, kh, kw)``. An unbatched ``(C, H, W)`` gives ``(C * kH * kW, L)``.

    >>> F.unfold(ember.arange(16.).reshape(1, 1, 4, 4), 2, stride=2)[0, :, 0]
    tensor([0., 1., 4., 5.])
    """
    name = "unfold"
    batched = check_input_rank(name, input, 2)
    if input.dtype is dt.bool or not (input.dtype.is_floating_point):
        raise EmberTypeError(f"{name}: expected a floating-point input, got "
                             f"{input.dtype.name}")
    x = input if batched else unsqueeze(input, 0)
    kernel, dilation, pads, stride = _block_args(name, kernel_size, dilation, padding, stride)
    out_size = _output_size(name, tuple(x.shape[2:]), kernel, stride, dilation, pads)
    out = apply(_UNFOLD, x, kernel_size=kernel, dilation=dilation, padding=pads,
                stride=stride, out_size=out_size)
    return out if batched else squeeze(out, 0)


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Combine sliding blocks into an image (col2im), the adjoint of :func:`unfold`:
    ``(N, C * kH * kW, L)`` becomes ``(N, C, *output_size)``, overlapping entries summed.

    >>> F.fold(ember.ones(1, 4, 9), (4, 4), 2)[0, 0]  # counts how many blocks cover each pixel
    tensor([[1., 2., 2., 1.],
            [2., 4., 4., 2.],
            [2., 4., 4., 2.],
            [1., 2., 2., 1.]])
    """
    name = "fold"
    _check_tensor(name, "input", input)
    if input.ndim not in (2, 3):
        raise ShapeError(f"{name}: expected input with 3 dims (N, C * kH * kW, L) or 2 "
                         f"(C * kH * kW, L), got shape {tuple(input.shape)}")
    if not input.dtype.is_floating_point:
        raise EmberTypeError(f"{name}: expected a floating-point input, got "
                             f"{input.dtype.name}")
    batched = input.ndim == 3
    cols = input if batched else unsqueeze(input, 0)
    size = ntuple(name, "output_size", output_size, 2)
    kernel, dilation, pads, stride = _block_args(name, kernel_size, dilation, padding, stride)
    if cols.shape[1] % math.prod(kernel):
        raise ShapeError(f"{name}: expected input's dim 1 ({cols.shape[1]}) to be divisible "
                         f"by the product of kernel_size {kernel}, input shape "
                         f"{tuple(input.shape)}")
    out_size = _output_size(name, size, kernel, stride, dilation, pads)
    if cols.shape[2] != math.prod(out_size):
        raise ShapeError(f"{name}: output_size {size}, kernel_size {kernel}, dilation "
                         f"{dilation}, padding {tuple(p for p, _ in pads)} and stride {stride} "
                         f"give {out_size[0]} * {out_size[1]} = {math.prod(out_size)} blocks, "
                         f"but the input has {cols.shape[2]} (input shape "
                         f"{tuple(input.shape)})")
    out = apply(_FOLD, cols, kernel_size=kernel, dilation=dilation, padding=pads,
                stride=stride, out_size=out_size, output_size=size)
    return out if batched else squeeze(out, 0)
