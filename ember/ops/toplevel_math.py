"""Top-level math PyTorch has and ember's other op files do not: ``gradient`` (finite
differences), ``histogramdd``, the deprecated norms (``frobenius_norm``,
``nuclear_norm``) and the functional aliases ``constant_pad_nd``,
``max_pool1d_with_indices`` and ``rms_norm`` (the older LU interface:
:mod:`ember.ops.toplevel_lu`).

All but ``histogramdd`` are compositions of existing ops, so they differentiate (and
trace under ``ember.jit``) through them. ``histogramdd`` counts on the host, without a
gradient, as PyTorch's has none; under ``ember.jit`` it raises the compiler's
data-dependence error.
"""
from __future__ import annotations

import collections
import math
import numbers

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, EmberTypeError, ShapeError
from ..tensor import Tensor
from . import elementwise as ew
from .creation import _even_points
from .linalg_extra import matrix_norm, vector_norm
from . import movement
from .norm import rms_norm  # noqa: F401  (re-exported at the top level)
from .pooling import max_pool1d
from .shape import cat, narrow, reshape, wrap_dim

__all__ = ["gradient", "histogramdd", "frobenius_norm", "nuclear_norm", "constant_pad_nd",
           "max_pool1d_with_indices", "rms_norm"]

histogramdd_result = collections.namedtuple("histogramdd", ["hist", "bin_edges"])


def _tensor(name: str, value, arg: str = "input") -> Tensor:
    if not isinstance(value, Tensor):
        raise EmberTypeError(f"{name}: argument '{arg}' must be a Tensor, not "
                             f"{type(value).__name__}")
    return value


# gradient ---------------------------------------------------------------------------------
def _gradient_dims(input, dim) -> list:
    if dim is None:
        return list(range(input.ndim))
    dims = [dim] if isinstance(dim, numbers.Integral) else list(dim)
    wrapped = [wrap_dim(d, input.ndim, "gradient") for d in dims]
    if len(set(wrapped)) != len(wrapped):
        raise EmberError(f"gradient: dim {dims} names a dimension more than once")
    return wrapped


def _gradient_spacing(spacing, dims, dim_given) -> list:
    """One entry per dim: a number (the step) or a 1-D tensor (the coordinates)."""
    if isinstance(spacing, Tensor):
        raise EmberTypeError("gradient: spacing must be a number or a list of numbers or of "
                             "1-D tensors, got a Tensor (wrap it in a list: spacing=[t])")
    if isinstance(spacing, numbers.Number):
        return [spacing] * len(dims)
    spacing = list(spacing)
    if len(spacing) != len(dims):
        what = (f"a dim argument of length {len(dims)}" if dim_given else
                f"the input's {len(dims)} dims, since dim was not given")
        raise EmberError(f"gradient: expected spacing to be a scalar or a list of the same "
                         f"length as {what}, but got a list of length {len(spacing)}")
    for s in spacing:
        if isinstance(s, Tensor):
            if s.ndim != 1:
                raise ShapeError(f"gradient: expected each tensor of spacing to have one "
                                 f"dimension, but got one of shape {tuple(s.shape)}")
        elif not isinstance(s, numbers.Number) or isinstance(s, bool):
            raise EmberTypeError(f"gradient: each element of spacing must be a number or a "
                                 f"1-D tensor, got {type(s).__name__}")
    return spacing


def _along(values: Tensor, d: int, ndim: int) -> Tensor:
    """A 1-D tensor shaped to broadcast along dim ``d`` of an ``ndim``-dim tensor."""
    return reshape(values, (1,) * d + (-1,) + (1,) * (ndim - d - 1))


def _gradient_uniform(f, d, n, h, edge_order):
    def part(start, length):
        return narrow(f, d, start, length)
    inner = (part(2, n - 2) - part(0, n - 2)) / (2.0 * h)
    if edge_order == 1:
        first = (part(1, 1) - part(0, 1)) / h
        last = (part(n - 1, 1) - part(n - 2, 1)) / h
    else:
        first = (part(0, 1) * -1.5 + part(1, 1) * 2.0 - part(2, 1) * 0.5) / h
        last = (part(n - 3, 1) * 0.5 - part(n - 2, 1) * 2.0 + part(n - 1, 1) * 1.5) / h
    return cat([first, inner, last], d)


def _gradient_coordinates(f, d, n, x, edge_order):
    """Second-order differences on the uneven grid ``x`` (NumPy's formulas)."""
    def part(start, length):
        return narrow(f, d, start, length)
    dx = narrow(x, 0, 1, n - 1) - narrow(x, 0, 0, n - 1)
    dx1, dx2 = narrow(dx, 0, 0, n - 2), narrow(dx, 0, 1, n - 2)
    a = _along(-dx2 / (dx1 * (dx1 + dx2)), d, f.ndim)
    b = _along((dx2 - dx1) / (dx1 * dx2), d, f.ndim)
    c = _along(dx1 / (dx2 * (dx1 + dx2)), d, f.ndim)
    inner = part(0, n - 2) * a + part(1, n - 2) * b + part(2, n - 2) * c
    if edge_order == 1:
        first = (part(1, 1) - part(0, 1)) / narrow(dx, 0, 0, 1)
        last = (part(n - 1, 1) - part(n - 2, 1)) / narrow(dx, 0, n - 2, 1)
    else:
        h1, h2 = narrow(dx, 0, 0, 1), narrow(dx, 0, 1, 1)
        first = (part(0, 1) * (-(2.0 * h1 + h2) / (h1 * (h1 + h2))) +
                 part(1, 1) * ((h1 + h2) / (h1 * h2)) + part(2, 1) * (-h1 / (h2 * (h1 + h2))))
        h1, h2 = narrow(dx, 0, n - 3, 1), narrow(dx, 0, n - 2, 1)
        last = (part(n - 3, 1) * (h2 / (h1 * (h1 + h2))) +
                part(n - 2, 1) * (-(h1 + h2) / (h1 * h2)) +
                part(n - 1, 1) * ((2.0 * h2 + h1) / (h2 * (h1 + h2))))
    return cat([first, inner, last], d)


def gradient(input: Tensor, *, spacing=1, dim=None, edge_order: int = 1) -> tuple:
    """The gradient of the function sampled by ``input``, one tensor per dim, by second
    order central differences inside and first or second order one-sided differences at
    the two ends of each dim.

    Args:
        input: the samples; an integer input gives results in the default dtype.
        spacing: the distance between samples: one number for every dim, a list with a
            number per dim, or a list with a 1-D tensor per dim holding the coordinates
            of the samples along it (then the grid may be uneven).
        dim: the dims to differentiate along (an int or a list; all when None).
        edge_order: 1 or 2, the order of the differences at the ends. Each dim needs at
            least ``edge_order + 1`` samples.

    Returns: a tuple with the partial derivative along each dim of ``dim``, each of
    ``input``'s shape.

    >>> ember.gradient(ember.tensor([1.0, 4.0, 9.0, 16.0]))
    (tensor([3., 4., 6., 7.]),)
    """
    input = _tensor("gradient", input)
    if input.dtype is dt.bool:
        raise EmberTypeError("gradient: expected a numeric input, got dtype bool")
    if edge_order not in (1, 2) or isinstance(edge_order, bool):
        raise EmberError(f"gradient: only edge_order=1 and edge_order=2 are supported, got "
                         f"{edge_order!r}")
    dims = _gradient_dims(input, dim)
    spacing = _gradient_spacing(spacing, dims, dim is not None)
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise ShapeError(f"gradient: expected each dimension size to be at least "
                             f"edge_order+1 = {edge_order + 1}, but dim {d} of input shape "
                             f"{tuple(input.shape)} has size {input.shape[d]}")
    dtype = dt.result_type(input, *[s for s in spacing if isinstance(s, Tensor)])
    if not dtype.is_floating_point:
        dtype = dt.get_default_dtype()
    f = ew.cast(input, dtype)
    results = []
    for d, step in zip(dims, spacing):
        n = input.shape[d]
        if isinstance(step, Tensor):
            if step.shape[0] != n:
                raise ShapeError(f"gradient: the coordinates for dim {d} have "
                                 f"{step.shape[0]} entries, but that dim of input shape "
                                 f"{tuple(input.shape)} has {n}")
            results.append(_gradient_coordinates(f, d, n, ew.cast(step, dtype), edge_order))
        else:
            results.append(_gradient_uniform(f, d, n, step, edge_order))
    return tuple(results)


# histogramdd ------------------------------------------------------------------------------
def _histogram_edges(name, data, bins, range, dtype):
    """The bin edges (one float64 array per dim, the values in ``dtype``) and whether the
    user gave them."""
    dims = data.shape[1]
    if isinstance(bins, numbers.Integral) and not isinstance(bins, bool):
        bins = [int(bins)] * dims
    else:
        bins = list(bins)
        if len(bins) != dims:
            raise ShapeError(f"{name}: the number of bins ({len(bins)}) must equal the "
                             f"innermost dimension of the input ({dims})")
    if all(isinstance(b, Tensor) for b in bins):
        edges = []
        for i, b in enumerate(bins):
            if b.ndim != 1 or b.shape[0] < 1:
                raise ShapeError(f"{name}: the bin edges of dimension {i} must be a 1-D "
                                 f"tensor with at least one element, got shape "
                                 f"{tuple(b.shape)}")
            if b.dtype is not dtype:
                raise EmberTypeError(f"{name}: input and bins tensors should have the same "
                                     f"dtype, but got input {dtype.name} and bins of "
                                     f"dimension {i} {b.dtype.name}")
            e = b.detach().cpu().numpy().astype(np.float64)
            if e.size and (np.diff(e) < 0).any():
                raise EmberError(f"{name}: the bin edges of dimension {i} must be "
                                 f"non-decreasing, got {e.tolist()}")
            if e.size < 2:
                raise EmberError(f"{name}: bins must be > 0, but got {e.size - 1} for "
                                 f"dimension {i}")
            edges.append(e)
        return edges
    if not all(isinstance(b, numbers.Integral) and not isinstance(b, bool) for b in bins):
        raise EmberTypeError(f"{name}: bins must be an int, a list of ints or a list of 1-D "
                             f"tensors, got {bins!r}")
    if range is not None:
        range = [float(r) for r in range]
        if len(range) != 2 * dims:
            raise EmberError(f"{name}: for a {dims}-dimensional histogram range should "
                             f"have {2 * dims} elements, but got {len(range)}")
    edges = []
    for i, count in enumerate(bins):
        if count <= 0:
            raise EmberError(f"{name}: bins must be > 0, but got {count} for dimension {i}")
        if range is not None:
            low, high = range[2 * i], range[2 * i + 1]
        elif data.shape[0]:
            low, high = float(data[:, i].min()), float(data[:, i].max())
        else:
            low, high = 0.0, 1.0
        if not (math.isfinite(low) and math.isfinite(high)):
            raise EmberError(f"{name}: dimension {i}'s range [{low}, {high}] is not finite")
        if low > high:
            raise EmberError(f"{name}: min should not exceed max, but got min {low} max "
                             f"{high} for dimension {i}")
        if low == high:
            low, high = low - 0.5, high + 0.5
        points = _even_points(low, high, int(count) + 1)
        edges.append(points.astype(dtype.np).astype(np.float64))
    return edges


def histogramdd(input: Tensor, bins, *, range=None, weight=None, density: bool = False):
    """A histogram of points in D dimensions: the rows of ``input`` (its last dim has the
    D coordinates), counted in the cells of a D-dimensional grid of bins.

    A bin holds the points with ``edges[i] <= x < edges[i + 1]`` along each dim; the last
    bin of each dim also holds its right edge. Points outside the edges, or with a NaN
    coordinate, are not counted.

    Args:
        input: ``(..., D)`` floating points.
        bins: an int (that many equal bins along every dim), a list of D ints, or a list
            of D 1-D tensors with the (non-decreasing) bin edges of each dim.
        range: ``[min_0, max_0, ..., min_{D-1}, max_{D-1}]``, the span of the equal bins
            (the data's own span when None; ignored where bins gives edges).
        weight: ``input.shape[:-1]`` weights to count each point with (input's dtype).
        density: divide by the total count and each bin's volume, so the histogram
            integrates to 1.

    Returns: ``(hist, bin_edges)``: ``hist`` of shape ``(bins_0, ..., bins_{D-1})`` in
    ``input``'s dtype, ``bin_edges`` a tuple of the D edge tensors.

    >>> hist, edges = ember.histogramdd(ember.tensor([[0.0, 0.0], [1.0, 1.0]]), bins=2)
    >>> hist
    tensor([[1., 0.],
            [0., 1.]])
    """
    name = "histogramdd"
    input = _tensor(name, input)
    if not input.dtype.is_floating_point:
        raise EmberTypeError(f"{name}: expected a floating input, got dtype "
                             f"{input.dtype.name}")
    if input.ndim < 2:
        raise ShapeError(f"{name}: input tensor should have at least 2 dimensions, got "
                         f"shape {tuple(input.shape)}")
    dtype = input.dtype
    data = input.detach().cpu().numpy().astype(np.float64).reshape(-1, input.shape[-1])
    if weight is not None:
        weight = _tensor(name, weight, "weight")
        if tuple(weight.shape) != tuple(input.shape[:-1]):
            raise ShapeError(f"{name}: weight should have the shape of input without its "
                             f"last dim, {tuple(input.shape[:-1])}, but got "
                             f"{tuple(weight.shape)}")
        if weight.dtype is not dtype:
            raise EmberTypeError(f"{name}: input and weight should have the same dtype, but "
                                 f"got input {dtype.name} and weight {weight.dtype.name}")
        weights = weight.detach().cpu().numpy().astype(np.float64).reshape(-1)
    else:
        weights = None
    edges = _histogram_edges(name, data, bins, range, dtype)
    counts = [e.size - 1 for e in edges]
    keep = np.ones(data.shape[0], dtype=bool)
    cell = np.zeros(data.shape[0], dtype=np.int64)
    for i, e in enumerate(edges):
        x = data[:, i]
        keep &= (x >= e[0]) & (x <= e[-1])
        where = np.minimum(np.searchsorted(e, x, side="right") - 1, counts[i] - 1)
        cell = cell * counts[i] + np.clip(where, 0, counts[i] - 1)
    total = math.prod(counts)
    hist = np.bincount(cell[keep], None if weights is None else weights[keep],
                       minlength=total).astype(np.float64).reshape(counts)
    if density:
        volume = np.ones(counts)
        for i, e in enumerate(edges):
            volume = volume * np.diff(e).reshape((1,) * i + (-1,) + (1,) * (len(edges) - i - 1))
        with np.errstate(divide="ignore", invalid="ignore"):
            hist = hist / (hist.sum() * volume)
    device = input.device
    hist_t = Tensor._make(device.backend.asarray(hist.astype(dtype.np)), device)
    edge_ts = tuple(Tensor._make(device.backend.asarray(e.astype(dtype.np)), device)
                    for e in edges)
    return histogramdd_result(hist_t, edge_ts)


# deprecated norms and functional aliases --------------------------------------------------
def frobenius_norm(input: Tensor, dim, keepdim: bool = False) -> Tensor:
    """``sqrt(sum(input ** 2))`` over ``dim`` (one or two dims; all of them when empty).
    PyTorch keeps it for old code; prefer ``ember.linalg.vector_norm(input, 2, dim)``.

    >>> ember.frobenius_norm(ember.tensor([[3.0, 4.0]]), (0, 1))
    tensor(5.)
    """
    _tensor("frobenius_norm", input)
    dims = (dim,) if isinstance(dim, numbers.Integral) else tuple(dim)
    if len(dims) > 2:
        raise EmberError(f"frobenius_norm: expected at most 2 dimensions, but got "
                         f"{len(dims)} dimensions instead")
    return vector_norm(input, 2, dims, keepdim)


def nuclear_norm(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """The sum of the singular values of the matrices in dims ``dim`` (the last two
    when None). PyTorch keeps it for old code; prefer
    ``ember.linalg.matrix_norm(input, "nuc", dim)``. ``nuclear_norm(x, True)`` is
    ``keepdim=True``, as in PyTorch.

    >>> ember.nuclear_norm(ember.tensor([[3.0, 0.0], [0.0, -4.0]]))
    tensor(7.)
    """
    _tensor("nuclear_norm", input)
    if isinstance(dim, bool):  # nuclear_norm(input, keepdim)
        dim, keepdim = None, dim
    dims = (-2, -1) if dim is None else tuple(dim)
    if len(dims) != 2:
        raise EmberError(f"nuclear_norm: dim must hold 2 dimensions, got {dims}")
    return matrix_norm(input, "nuc", dims, keepdim)


def constant_pad_nd(input: Tensor, pad: tuple, value=0) -> Tensor:
    """Pad ``input`` with ``value``: ``pad`` gives (before, after) counts for the last
    dim, then the one before it, ...; negative counts crop.

    >>> ember.constant_pad_nd(ember.tensor([1, 2]), (1, 2), 9)
    tensor([9, 1, 2, 9, 9])
    """
    return movement.pad(_tensor("constant_pad_nd", input), tuple(pad), "constant", value)


def max_pool1d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode: bool = False):
    """:func:`ember.nn.functional.max_pool1d` with ``return_indices=True``: the maxima
    and, for each, its index along the input's last dim.

    >>> out, idx = ember.max_pool1d_with_indices(ember.tensor([[1.0, 3.0, 2.0, 0.0]]), 2)
    >>> idx
    tensor([[1, 2]])
    """
    if stride is None or (not isinstance(stride, numbers.Integral) and len(stride) == 0):
        stride = None  # PyTorch's [] default: the kernel size
    out, indices = max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode,
                              return_indices=True)
    return out, indices
