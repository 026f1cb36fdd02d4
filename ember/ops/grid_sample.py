"""``grid_sample`` and ``affine_grid``: sampling an image at arbitrary points, as in
``torch.nn.functional`` (4-D and 5-D inputs; bicubic on 4-D only).

A sample is a weighted sum of a few input pixels (its *taps*: 1 for nearest, 2**d for
(tri)linear, 16 for bicubic). The work is split so that gradients of every order come
from the chain rule:

- ``grid_sample_coords`` maps the grid's [-1, 1] coordinates to pixel coordinates and
  applies the padding mode (its slope is PyTorch's: zero where the clipped coordinate
  sits on a border, the sign of the last reflection elsewhere); ``grid_sample_taps``
  turns them into flat row indices (-1 where a tap lies outside the input);
- the tap weights are products of per-axis polynomials in the fractional coordinates,
  written with ember ops, so their derivatives need no code here;
- three fused primitives do the heavy part over a ``(rows, C)`` table of the input's
  pixels: ``grid_sample_rows`` (``out[m] = sum_k table[index[k, m]] * w[k, m]``), its
  transpose ``grid_sample_scatter`` and ``grid_sample_row_dots``
  (``sum_c g[m, c] * table[index[k, m], c]``). Each one's VJP is made of the three, so
  double backward and ``ember.jit`` work like for any other op.

Non-finite grid coordinates: PyTorch's 4-D and 5-D CPU kernels take them differently,
and so does ember. 4-D: with zero padding a NaN or infinite coordinate reaches no pixel
(the output is NaN for the interpolating modes, whose weights are NaN, and 0 for
nearest); border and reflection padding clip it, NaN to 0. 5-D: with zero padding it
lies far outside (the output is 0); border and reflection padding read NaN at size - 1.
A clipped coordinate's slope is 0. Where PyTorch has no answer (its 4-D bilinear kernel
crashes on NaN with border or reflection padding; its 5-D backward gives no gradient to
the pixel its forward read for NaN) ember's gradients are those of the point it read.
"""
from __future__ import annotations

import itertools
import math
import warnings

import numpy as np

from .. import dtypes as dt
from ..errors import EmberTypeError, EmberValueError, ShapeError
from ..tensor import Tensor
from .elementwise import floor
from .index_kernels import add_rows
from .registry import AbstractValue, apply, autocast_inputs, register
from .shape import movedim, reshape, stack, transpose

__all__ = ["grid_sample", "affine_grid"]

_MODES = ("bilinear", "nearest", "bicubic")
_PADDINGS = ("zeros", "border", "reflection")
_CUBIC_A = -0.75  # PyTorch's cubic convolution coefficient
_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to "
                  "align_corners=False since 1.3.0. Please specify align_corners=True if "
                  "the old behavior is desired. See the documentation of grid_sample for "
                  "details.")


# Weighted rows of a table: three primitives closed under differentiation ------------------
def _gather_rows(xp, table, index):
    """``table[index]`` (a new array) with zero rows where ``index`` is -1 (a tap outside
    the input; -1 itself reads the last row, which is then overwritten)."""
    rows = xp.take(table, index, axis=0)
    outside = index < 0
    if outside.any():
        rows[outside] = 0
    return rows


def _sample_rows_forward(xp, table, index, weights):
    out = None
    for k in range(index.shape[0]):
        rows = _gather_rows(xp, table, index[k])
        rows *= weights[k][:, None]
        out = rows if out is None else xp.add(out, rows, out=out)
    return out


def _scatter_rows_forward(xp, grad, index, weights, *, rows):
    out = xp.zeros((rows + 1, grad.shape[1]), dtype=grad.dtype)  # row `rows`: taps outside
    target = xp.where(index < 0, rows, index)
    for k in range(index.shape[0]):
        contribution = grad * weights[k][:, None]
        if not (xp is np and add_rows(out, target[k], contribution)):  # one C loop
            xp.add.at(out, target[k], contribution)
    return out[:rows]


def _row_dots_forward(xp, grad, table, index):
    out = xp.empty(index.shape, dtype=grad.dtype)
    for k in range(index.shape[0]):
        out[k] = xp.einsum("mc,mc->m", grad, _gather_rows(xp, table, index[k]))
    return out


def _sample_rows_vjp(n, g):
    table, index, weights = n.saved_inputs()
    g_table = apply(_SCATTER_ROWS, g, index, weights, rows=table.shape[0]) \
        if n.edges[0] else None
    g_weights = apply(_ROW_DOTS, g, table, index) if n.edges[2] else None
    return g_table, None, g_weights


def _scatter_rows_vjp(n, u):
    grad, index, weights = n.saved_inputs()
    g_grad = apply(_SAMPLE_ROWS, u, index, weights) if n.edges[0] else None
    g_weights = apply(_ROW_DOTS, grad, u, index) if n.edges[2] else None
    return g_grad, None, g_weights


def _row_dots_vjp(n, v):
    grad, table, index = n.saved_inputs()
    g_grad = apply(_SAMPLE_ROWS, table, index, v) if n.edges[0] else None
    g_table = apply(_SCATTER_ROWS, grad, index, v, rows=table.shape[0]) \
        if n.edges[1] else None
    return g_grad, g_table, None


_SAMPLE_ROWS = register(
    "grid_sample_rows", _sample_rows_forward, _sample_rows_vjp,
    infer=lambda table, index, weights: AbstractValue((index.shape[1], table.shape[1]),
                                                      table.dtype))
_SCATTER_ROWS = register(
    "grid_sample_scatter", _scatter_rows_forward, _scatter_rows_vjp,
    infer=lambda grad, index, weights, rows: AbstractValue((rows, grad.shape[1]),
                                                           grad.dtype))
_ROW_DOTS = register(
    "grid_sample_row_dots", _row_dots_forward, _row_dots_vjp,
    infer=lambda grad, table, index: AbstractValue(index.shape, grad.dtype))


# Source coordinates -------------------------------------------------------------------------
def _unnormalize(grid_axis, size: int, align_corners: bool):
    """[-1, 1] to pixel coordinates (the corner pixels' centres, or the image's corners),
    in the grid's precision and with PyTorch's rounding."""
    kind = grid_axis.dtype.type
    if align_corners:
        return (grid_axis + kind(1)) * kind((size - 1) / 2)
    return (grid_axis + kind(1)) * kind(size / 2) - kind(0.5)


def _reflect(xp, c, size: int, align_corners: bool):
    """``c`` reflected into [0, size - 1] (align_corners) or [-0.5, size - 0.5], and the
    sign of its slope (-1 after an odd number of reflections)."""
    kind = c.dtype.type
    if align_corners and size == 1:
        return xp.zeros_like(c), xp.zeros_like(c)
    shift = kind(0 if align_corners else 0.5)
    period = kind(2 * (size - 1) if align_corners else 2 * size)
    shifted = c + shift
    distance = xp.abs(shifted)
    extra = distance - xp.trunc(distance / period) * period
    mirrored = period - extra
    flip = extra > mirrored
    reflected = xp.where(flip, mirrored, extra) - shift
    return reflected, xp.where(flip ^ (shifted < 0), kind(-1), kind(1))


def _clip(xp, c, size: int):
    """``c`` clipped to [0, size - 1]; NaN becomes 0."""
    kind = c.dtype.type
    return xp.fmin(xp.fmax(c, kind(0)), kind(size - 1))


def _pad_coordinate(xp, c, size: int, padding_mode: str, align_corners: bool,
                    volumetric: bool = False):
    """The coordinate the padding mode reads. Non-finite coordinates as PyTorch's 4-D
    kernel takes them (NaN reads 0) or, ``volumetric``, its 5-D one (NaN reads size - 1
    and, with zero padding, any non-finite coordinate lies far outside)."""
    kind = c.dtype.type
    if padding_mode == "zeros":
        return xp.where(xp.isfinite(c), c, kind(-100)) if volumetric else c
    if padding_mode == "reflection":
        c = _reflect(xp, c, size, align_corners)[0]
    if volumetric:
        c = xp.where(xp.isnan(c), kind(size - 1), c)
    return _clip(xp, c, size)


def _coords_forward(xp, grid, *, sizes, padding_mode, align_corners):
    out = xp.empty_like(grid)
    with np.errstate(invalid="ignore", over="ignore"):
        for axis, size in enumerate(sizes):
            c = _unnormalize(grid[..., axis], size, align_corners)
            out[..., axis] = _pad_coordinate(xp, c, size, padding_mode, align_corners,
                                             volumetric=len(sizes) == 3)
    return out


def _coords_slope_forward(xp, grid, *, sizes, padding_mode, align_corners):
    """d coords / d grid, elementwise: the unnormalizing scale, times 0 where a clip
    took the coordinate to (or past) a border, times the reflections' sign."""
    out = xp.empty_like(grid)
    kind = grid.dtype.type
    with np.errstate(invalid="ignore", over="ignore"):
        for axis, size in enumerate(sizes):
            scale = kind((size - 1) / 2 if align_corners else size / 2)
            c = _unnormalize(grid[..., axis], size, align_corners)
            sign = kind(1)
            if padding_mode == "reflection":
                c, sign = _reflect(xp, c, size, align_corners)
            if padding_mode == "zeros":
                out[..., axis] = scale
            else:
                inside = (c > 0) & (c < size - 1)
                out[..., axis] = xp.where(inside, sign * scale, kind(0))
    return out


def _coords_vjp(n, g):
    return (g * apply(_COORDS_SLOPE, n.saved_inputs()[0], **n.params),)


def _same_aval(grid, **params):
    return AbstractValue(grid.shape, grid.dtype)


_COORDS = register("grid_sample_coords", _coords_forward, _coords_vjp, infer=_same_aval)
# piecewise constant in the grid: no gradient of its own
_COORDS_SLOPE = register("grid_sample_coords_slope", _coords_slope_forward,
                         infer=_same_aval)


# Taps ---------------------------------------------------------------------------------------
_TAP_COUNT = {"nearest": 1, "bilinear": 2, "bicubic": 4}  # per axis


def _tap_order(d: int, per_axis: int):
    """The taps' per-axis offsets, slowest axis first (z, y, x: the input's layout),
    shared by the indices and the weights."""
    return list(itertools.product(range(per_axis), repeat=d))


def _axis_positions(xp, c, size, mode, padding_mode, align_corners):
    """Each tap's integer position along one axis, and whether it lies inside."""
    if mode == "nearest":
        positions = [xp.rint(c)]
    else:
        base = xp.floor(c)
        if mode == "bilinear":
            positions = [base, base + 1]
        else:  # bicubic: the padding applies to each tap, not to the sample point
            positions = [_pad_coordinate(xp, base + c.dtype.type(offset), size,
                                         padding_mode, align_corners)
                         for offset in (-1, 0, 1, 2)]
    out = []
    for p in positions:
        inside = (p >= 0) & (p <= size - 1)  # False for NaN
        out.append((xp.where(inside, p, 0).astype(np.int64), inside))
    return out


def _taps_forward(xp, coords, *, sizes, mode, padding_mode, align_corners):
    """``coords`` (N, P, d) to (K, N * P) row indices into the (N * prod(sizes), C) table
    of the input's pixels; -1 for a tap outside the input."""
    n, p, d = coords.shape
    with np.errstate(invalid="ignore", over="ignore"):
        axes = [_axis_positions(xp, coords[..., a], sizes[a], mode, padding_mode,
                                align_corners) for a in range(d)]
    strides = [math.prod(sizes[:a]) for a in range(d)]
    first = xp.arange(n, dtype=np.int64)[:, None] * math.prod(sizes)
    rows = []
    for offsets in _tap_order(d, _TAP_COUNT[mode]):
        flat, inside = first, True
        for a, o in zip(reversed(range(d)), offsets):
            index, ok = axes[a][o]
            flat = flat + index * strides[a]
            inside = inside & ok
        rows.append(xp.where(inside, flat, -1).reshape(-1))
    return xp.stack(rows)


def _taps_infer(coords, *, mode, **params):
    n, p, d = coords.shape
    return AbstractValue((_TAP_COUNT[mode] ** d, n * p), dt.int64)


_TAPS = register("grid_sample_taps", _taps_forward, infer=_taps_infer)


def _unit_weights_vjp(n, g):
    return (g.new_zeros(tuple(n.inputs[0].shape)),)


# nearest: each sample is one tap of weight 1; the grid's gradient is 0, as in PyTorch
_UNIT_WEIGHTS = register(
    "grid_sample_unit_weights",
    lambda xp, coords: xp.ones((1, coords.shape[0] * coords.shape[1]), dtype=coords.dtype),
    _unit_weights_vjp, saves_inputs=False,
    infer=lambda coords: AbstractValue((1, coords.shape[0] * coords.shape[1]),
                                       coords.dtype))


# Weights ------------------------------------------------------------------------------------
def _cubic_coefficients(t):
    """The four cubic convolution weights (A = -0.75) of taps at distance 1 + t, t,
    1 - t and 2 - t, stacked on a new last axis."""
    a = _CUBIC_A

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return stack([far(t + 1), near(t), near(1 - t), far(2 - t)], -1)


def _tap_weights(coords, mode: str):
    """(K, N * P) weights from ``coords`` (N, P, d), in :func:`_tap_order`."""
    n, p, d = coords.shape
    flat = reshape(coords, (n * p, d))
    frac = flat - floor(flat.detach())
    if mode == "bilinear":
        per_axis = stack([1 - frac, frac], -1)  # (M, d, 2)
    else:
        per_axis = _cubic_coefficients(frac)  # (M, d, 4)
    taps = per_axis.shape[-1]
    weights = per_axis[:, d - 1]
    for a in range(d - 2, -1, -1):  # outer products, slowest axis first
        weights = reshape(weights[:, :, None] * per_axis[:, a, None, :],
                          (n * p, taps ** (d - a)))
    return transpose(weights, 0, 1)


# The public functions -----------------------------------------------------------------------
def _check_grid_sample(input, grid, mode, padding_mode):
    name = "grid_sample"
    for what, t in (("input", input), ("grid", grid)):
        if not isinstance(t, Tensor):
            raise EmberTypeError(f"{name}: expected {what} to be a Tensor, got "
                                 f"{type(t).__name__}")
    if mode not in _MODES:
        raise EmberValueError(f"{name}: expected mode to be 'bilinear', 'nearest' or "
                              f"'bicubic', but got {mode!r}")
    if padding_mode not in _PADDINGS:
        raise EmberValueError(f"{name}: expected padding_mode to be 'zeros', 'border' or "
                              f"'reflection', but got {padding_mode!r}")
    shapes = f"input of shape {tuple(input.shape)} and grid of shape {tuple(grid.shape)}"
    if input.ndim not in (4, 5) or grid.ndim != input.ndim:
        raise ShapeError(f"{name}: expected a 4-D input (N, C, H, W) with a 4-D grid "
                         f"(N, H_out, W_out, 2), or 5-D ones (N, C, D, H, W) and (N, D_out, "
                         f"H_out, W_out, 3), got {shapes}")
    d = input.ndim - 2
    if grid.shape[-1] != d:
        raise ShapeError(f"{name}: expected the grid's last dim to be {d} (one coordinate "
                         f"per spatial dim of the input), got {shapes}")
    if input.shape[0] != grid.shape[0]:
        raise ShapeError(f"{name}: expected input and grid to have the same batch size, "
                         f"got {shapes}")
    if 0 in tuple(input.shape[2:]):
        raise ShapeError(f"{name}: expected an input with non-empty spatial dims, got "
                         f"shape {tuple(input.shape)}")
    if mode == "bicubic" and d != 2:
        raise ShapeError(f"{name}: bicubic interpolation only supports 4-D input, got {shapes}")
    if not input.dtype.is_floating_point:
        raise EmberTypeError(f"{name}: expected a floating-point input, got "
                             f"{input.dtype.name}")
    if grid.dtype is not input.dtype:
        raise EmberTypeError(f"{name}: expected input and grid to have the same dtype, got "
                             f"{input.dtype.name} and {grid.dtype.name}")


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear",
                padding_mode: str = "zeros", align_corners: bool | None = None) -> Tensor:
    """Sample ``input`` at the points of ``grid``.

    Args:
        input: (N, C, H, W) or (N, C, D, H, W).
        grid: (N, H_out, W_out, 2) or (N, D_out, H_out, W_out, 3): per output point, the
            coordinates (x, y[, z]) to sample, normalized so that -1 and 1 are the left
            (top, front) and right (bottom, back) ends of the input; same dtype as input.
        mode: ``'bilinear'`` (trilinear for 5-D), ``'nearest'`` (ties to even) or
            ``'bicubic'`` (4-D only; cubic convolution with A = -0.75).
        padding_mode: what points outside the input see: ``'zeros'``, ``'border'``
            (the nearest border pixel) or ``'reflection'`` (the input mirrored at its
            borders).
        align_corners: -1 and 1 are the centres of the corner pixels (True) or the
            outer corners of the corner pixels (False; None means False, with
            PyTorch's warning).

    Returns:
        (N, C, H_out, W_out) or (N, C, D_out, H_out, W_out). Differentiable with
        respect to input and grid (nearest gives the grid a zero gradient), to any
        order. Where a clip or a pixel boundary makes the gradient jump, it is
        PyTorch's: the slope of a coordinate clipped to a border is 0, and a point on
        a pixel boundary takes the gradient of the cell after it. NaN and infinite
        coordinates: see :mod:`ember.ops.grid_sample`.

    >>> x = ember.arange(4.).reshape(1, 1, 2, 2)
    >>> F.grid_sample(x, ember.tensor([[[[0., 0.], [1., -1.]]]]), align_corners=True)
    tensor([[[[1.5000, 1.0000]]]])
    """
    # (a no-op until ember.amp's policy lists grid_sample; PyTorch's runs it in float32)
    input, grid = autocast_inputs("grid_sample", input, grid)
    _check_grid_sample(input, grid, mode, padding_mode)
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    align_corners = bool(align_corners)
    dtype = input.dtype
    if dtype.itemsize == 2:  # half precision is computed in float32
        input, grid = input.to(dt.float32), grid.to(dt.float32)
    n, c = input.shape[:2]
    d = input.ndim - 2
    spatial, out_spatial = tuple(input.shape[2:]), tuple(grid.shape[1:-1])
    sizes = spatial[::-1]  # in the grid's coordinate order: W, H(, D)
    coords = apply(_COORDS, grid, sizes=sizes, align_corners=align_corners,
                   padding_mode="zeros" if mode == "bicubic" else padding_mode)
    coords = reshape(coords, (n, math.prod(out_spatial), d))
    index = apply(_TAPS, coords, sizes=sizes, mode=mode, padding_mode=padding_mode,
                  align_corners=align_corners)
    weights = apply(_UNIT_WEIGHTS, coords) if mode == "nearest" else \
        _tap_weights(coords, mode)
    table = reshape(movedim(input, 1, -1), (n * math.prod(spatial), c))
    rows = apply(_SAMPLE_ROWS, table, index, weights)
    out = movedim(reshape(rows, (n,) + out_spatial + (c,)), -1, 1)
    return out if out.dtype is dtype else out.to(dtype)


def _linspace_from_neg_one(steps: int, align_corners: bool, kind):
    """PyTorch's base coordinates: ``linspace(-1, 1, steps)`` (filled from both ends, as
    its kernel does), scaled by (steps - 1) / steps unless align_corners; 0 for one step."""
    if steps <= 1:
        return np.zeros(steps, dtype=kind)
    step = (kind(1) - kind(-1)) / kind(steps - 1)
    i = np.arange(steps)
    values = np.where(i < steps // 2, kind(-1) + step * i.astype(kind),
                      kind(1) - step * (steps - 1 - i).astype(kind)).astype(kind)
    if not align_corners:
        values = values * kind(steps - 1) / kind(steps)
    return values


def _base_grid(spatial, align_corners: bool, kind):
    """(prod(spatial), d + 1): each output point's (x, y[, z], 1), row-major over
    spatial (D,) H, W."""
    d = len(spatial)
    axes = [_linspace_from_neg_one(s, align_corners, kind) for s in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # D, H, W order
    columns = [mesh[d - 1 - a].reshape(-1) for a in range(d)]  # x, y(, z)
    columns.append(np.ones(math.prod(spatial), dtype=kind))
    return np.stack(columns, axis=1)


def affine_grid(theta: Tensor, size, align_corners: bool | None = None) -> Tensor:
    """The sampling grid of an affine transform, for :func:`grid_sample`.

    Args:
        theta: (N, 2, 3) for 2-D transforms or (N, 3, 4) for 3-D ones: each maps an
            output point (x, y[, z], 1), in normalized coordinates, to the point of
            the input to sample.
        size: the output's size, (N, C, H, W) or (N, C, D, H, W).
        align_corners: as in :func:`grid_sample` (use the same value for both).

    Returns:
        (N, H, W, 2) or (N, D, H, W, 3), differentiable with respect to theta.

    >>> theta = ember.tensor([[[1., 0., 0.], [0., 1., 0.]]])
    >>> F.affine_grid(theta, (1, 1, 1, 3), align_corners=False)
    tensor([[[[-0.6667,  0.0000],
              [ 0.0000,  0.0000],
              [ 0.6667,  0.0000]]]])
    """
    name = "affine_grid"
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    if not isinstance(theta, Tensor):
        raise EmberTypeError(f"{name}: expected theta to be a Tensor, got "
                             f"{type(theta).__name__}")
    if not theta.dtype.is_floating_point:
        raise EmberValueError(f"{name}: expected theta to have a floating-point dtype, got "
                              f"{theta.dtype.name}")
    if not isinstance(size, (tuple, list)) or \
            not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool)
                    for s in size):
        raise EmberTypeError(f"{name}: expected size to be a tuple of ints, got {size!r}")
    size = tuple(int(s) for s in size)
    if len(size) not in (4, 5):
        raise ShapeError(f"{name}: only supports 4-D and 5-D sizes (N, C, H, W) and (N, C, "
                         f"D, H, W), for 2-D and 3-D transforms; got size {size}")
    d = len(size) - 2
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (d, d + 1):
        raise EmberValueError(f"{name}: expected a batch of {d}-D affine matrices of shape "
                              f"(N, {d}, {d + 1}) for size {size}, got theta of shape "
                              f"{tuple(theta.shape)}")
    spatial = size[2:]
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size "
                      "grids when align_corners=True. This is not an intended use case of "
                      "affine_grid. See the documentation of affine_grid for details.",
                      stacklevel=2)
    elif min(size) <= 0:
        raise EmberValueError(f"{name}: expected a non-zero, positive output size, got {size}")
    if theta.shape[0] != size[0]:
        raise ShapeError(f"{name}: theta holds {theta.shape[0]} matrices but size asks for "
                         f"a batch of {size[0]}")
    from .creation import tensor
    from .linalg import matmul
    work = dt.float32 if theta.dtype.itemsize == 2 else theta.dtype
    base = tensor(_base_grid(spatial, bool(align_corners), np.dtype(work.np).type), dtype=work,
                  device=theta.device)
    grid = matmul(base, transpose(theta.to(work), 1, 2))  # (N, prod(spatial), d)
    grid = reshape(grid, (size[0],) + spatial + (d,))
    # (in autocast's dtype inside ember.amp.autocast: matmul's, as PyTorch's bmm)
    return grid if work is theta.dtype else grid.to(theta.dtype)
