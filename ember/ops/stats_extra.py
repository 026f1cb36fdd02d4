"""More of PyTorch's top-level math: quantile/nanquantile, cov/corrcoef, trapezoid rules,
dist, inner, addr/addbmm, chain_matmul, renorm and histogram.

All but ``histogram`` are composites of existing ops, so they differentiate through
them exactly as PyTorch's formulas do (``quantile`` through ``sort`` and ``lerp``,
``renorm`` through the norm it divides by). ``histogram`` counts, so it has no gradient.
"""
from __future__ import annotations

import collections
import math

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, EmberTypeError, EmberValueError, ShapeError
from ..tensor import Tensor
from . import elementwise as ew, logical as lg
from .linalg import bmm, matmul, outer
from .reduce import sum
from .registry import AbstractValue, apply, register
from .shape import movedim, narrow, reshape, select, squeeze, unsqueeze, wrap_dim

__all__ = ["quantile", "nanquantile", "cov", "corrcoef", "trapezoid", "trapz",
           "cumulative_trapezoid", "dist", "inner", "addr", "addbmm", "chain_matmul",
           "renorm", "histogram"]
NOT_METHODS = ("trapezoid", "trapz", "cumulative_trapezoid", "chain_matmul")

histogram_result = collections.namedtuple("histogram", ["hist", "bin_edges"])
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _tensor(name, value):
    if not isinstance(value, Tensor):
        raise EmberTypeError(f"{name}: expected a Tensor, got {type(value).__name__}")
    return value


# quantile ---------------------------------------------------------------------------------
def _quantile(name, input, q, dim, keepdim, interpolation, ignore_nan):
    from .creation import tensor
    from .sorting import sort
    input = _tensor(name, input)
    if input.dtype not in (dt.float32, dt.float64):
        raise EmberTypeError(f"{name}() input tensor must be either float or double dtype "
                             f"(got {input.dtype.name})")
    if input.numel() == 0:
        raise EmberError(f"{name}() input tensor must be non-empty")
    if interpolation not in _INTERPOLATIONS:
        raise EmberValueError(f"{name}() interpolation must be one of "
                              f"{', '.join(_INTERPOLATIONS)}. Got {interpolation!r}")
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise ShapeError(f"{name}() q must be a scalar or 1D tensor (got {q.ndim}D)")
        if q.dtype is not input.dtype:
            raise EmberTypeError(f"{name}() q tensor must be same dtype as the input tensor "
                                 f"(got {q.dtype.name} and {input.dtype.name})")
        scalar_q, qv = q.ndim == 0, reshape(q.detach(), (-1,))
    else:
        scalar_q, qv = True, tensor([float(q)], dtype=input.dtype, device=input.device)
    qs = qv.numpy()
    if qs.size and not ((qs >= 0) & (qs <= 1)).all():
        raise EmberValueError(f"{name}() q values must be in the range [0, 1]")
    if dim is None:
        x, d = reshape(input, (-1,)), None
    else:
        d = wrap_dim(dim, input.ndim, name)
        x = movedim(input, d, -1) if input.ndim else reshape(input, (1,))
    values = sort(x, dim=-1).values  # NaN sorts last
    n = values.shape[-1]
    qv = ew.cast(qv, values.dtype)
    if ignore_nan:
        count = sum(lg.logical_not(lg.isnan(values)), -1, True)
        ranks = ew.clamp(qv * (ew.cast(count, values.dtype) - 1), min=0)
    else:
        has_nan = lg.isnan(values).any(-1, True)
        ranks = ew.where(has_nan, float(n - 1), qv * (n - 1))
    ranks = ranks.expand(tuple(values.shape[:-1]) + (qv.shape[0],))
    if interpolation == "lower":
        ranks = ew.floor(ranks)
    elif interpolation == "higher":
        ranks = ew.ceil(ranks)
    elif interpolation == "nearest":
        ranks = ew.round(ranks)  # half to even, as PyTorch
    below = ew.cast(ranks, dt.int64)
    out = values.gather(-1, below)
    if interpolation in ("linear", "midpoint"):
        above = values.gather(-1, ew.cast(ew.ceil(ranks), dt.int64))
        weight = ranks * 0.0 + 0.5 if interpolation == "midpoint" else ranks - ew.floor(ranks)
        out = ew.lerp(out, above, weight)
    out = movedim(out, -1, 0)  # q's dim first
    if keepdim:
        if d is None:
            out = reshape(out, (out.shape[0],) + (1,) * input.ndim)
        elif input.ndim:
            out = unsqueeze(out, d + 1)
    if scalar_q:
        out = squeeze(out, 0)
    return out


def quantile(input, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear"):
    """The ``q``-th quantiles of ``input`` (all elements when ``dim`` is None) with the
    given ``interpolation`` between the two nearest order statistics; a 1-D ``q`` gives
    a leading dim of that size. NaN in a slice makes its quantiles NaN.

    >>> ember.quantile(ember.tensor([0.0, 1.0, 2.0, 3.0]), 0.5)
    tensor(1.5000)
    """
    return _quantile("quantile", input, q, dim, keepdim, interpolation, False)


def nanquantile(input, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear"):
    """:func:`quantile` ignoring NaN (NaN where a slice has no numbers).

    >>> ember.nanquantile(ember.tensor([1.0, float("nan"), 2.0]), 0.5)
    tensor(1.5000)
    """
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, True)


# cov / corrcoef ---------------------------------------------------------------------------
def cov(input, *, correction: int = 1, fweights=None, aweights=None):
    """The covariance matrix of the variables in the rows of ``input`` (a 1-D input is one
    variable), observations in the columns, optionally weighted by integer frequency
    weights ``fweights`` and observation weights ``aweights``.

    >>> ember.cov(ember.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
    tensor([[ 1., -1.],
            [-1.,  1.]])
    """
    input = _tensor("cov", input)
    if input.ndim > 2:
        raise ShapeError(f"cov(): expected input to have two or fewer dimensions but got an "
                         f"input with {input.ndim} dimensions")
    x = reshape(input, (1, -1)) if input.ndim < 2 else input
    n = x.shape[1]
    w = None
    for wname, weights in (("fweights", fweights), ("aweights", aweights)):
        if weights is None:
            continue
        weights = _tensor("cov", weights)
        if weights.ndim > 1 or weights.numel() != n:
            raise ShapeError(f"cov(): expected {wname} to have one dimension and {n} "
                             f"elements (got shape {tuple(weights.shape)})")
        if wname == "fweights" and weights.dtype.is_floating_point:
            raise EmberTypeError("cov(): expected fweights to have integral dtype")
        if wname == "aweights" and not weights.dtype.is_floating_point:
            raise EmberTypeError("cov(): expected aweights to have floating point dtype")
        if bool((weights < 0).any()):
            raise EmberError(f"cov(): {wname} cannot be negative")
        w = weights if w is None else w * weights
    if not x.dtype.differentiable and (w is None or not w.dtype.is_floating_point):
        x = ew.cast(x, dt.get_default_dtype())
    if w is None:
        w_sum = float(n)
        avg = sum(x, 1) / w_sum
        norm = w_sum - correction
    else:
        w_sum = sum(w)
        avg = sum(x * w, 1) / w_sum
        if correction != 0 and aweights is not None:
            norm = w_sum - correction * sum(w * aweights) / w_sum
        else:
            norm = w_sum - correction
    if isinstance(norm, Tensor):
        norm = ew.where(norm <= 0, 0.0, norm)
    elif norm <= 0:
        norm = 0.0
    xc = x - unsqueeze(avg, 1)
    c = matmul(xc, (xc if w is None else xc * w).mH)  # (mH: the transpose if real)
    return squeeze(c / norm)


def corrcoef(input):
    """The Pearson correlation coefficients of the variables in the rows of ``input``,
    clipped to [-1, 1].

    >>> ember.corrcoef(ember.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
    tensor([[ 1., -1.],
            [-1.,  1.]])
    """
    c = cov(input)
    if c.ndim == 0:
        return c / c
    std = ew.sqrt(c.diagonal())
    c = c / unsqueeze(std, 1) / unsqueeze(std, 0)
    if c.dtype.is_complex:  # each part clipped, as PyTorch does
        from .complex_support import complex as make_complex, imag, real
        return make_complex(ew.clamp(real(c), -1, 1), ew.clamp(imag(c), -1, 1))
    return ew.clamp(c, -1, 1)


# trapezoid rules --------------------------------------------------------------------------
def _spacing(name, y, x, d):
    """The spacing along dim ``d``: x's differences (a 1-D x lies along ``d``)."""
    x = _tensor(name, x)
    if x.ndim == 1:
        if x.shape[0] != y.shape[d]:
            raise ShapeError(f"{name}: There must be one `x` value for each sample point "
                             f"(got {x.shape[0]} x values and {y.shape[d]} samples)")
        x = reshape(x, tuple(-1 if i == d else 1 for i in range(y.ndim)))
        xd = d
    else:
        xd = d - (y.ndim - x.ndim) if x.ndim < y.ndim else d
    m = x.shape[xd]
    return narrow(x, xd, 1, m - 1) - narrow(x, xd, 0, m - 1) if m else x


def _trapezoid(name, y, x, dx, dim, cumulative):
    y = _tensor(name, y)
    if y.ndim == 0:
        raise ShapeError(f"{name}: y must be at least 1-dimensional (got a 0-d tensor)")
    d = wrap_dim(dim, y.ndim, name)
    n = y.shape[d]
    if x is not None and dx is not None:
        raise EmberTypeError(f"{name}: pass x or dx, not both")
    if not cumulative and n == 0:
        from .creation import zeros
        shape = tuple(s for i, s in enumerate(y.shape) if i != d)
        return zeros(shape, dtype=y.dtype, device=y.device)
    left, right = narrow(y, d, 0, max(n - 1, 0)), narrow(y, d, min(1, n), max(n - 1, 0))
    if x is not None:
        spacing = _spacing(name, y, x, d)
        if cumulative:
            return (spacing * (left + right)).cumsum(d) / 2.0
        return sum(spacing * (left + right), d) / 2.0
    dx = 1.0 if dx is None else dx
    if cumulative:
        return ((left + right) * (dx / 2.0)).cumsum(d)
    return (sum(y, d) - (select(y, d, 0) + select(y, d, -1)) * 0.5) * dx


def trapezoid(y, x=None, *, dx=None, dim: int = -1):
    """The trapezoid rule along ``dim``: samples ``y`` at points ``x`` (or spaced ``dx``
    apart, default 1).

    >>> ember.trapezoid(ember.tensor([1.0, 2.0, 3.0]))
    tensor(4.)
    """
    return _trapezoid("trapezoid", y, x, dx, dim, False)


def trapz(y, x=None, *, dx=None, dim: int = -1):
    """An alias of :func:`trapezoid`."""
    return _trapezoid("trapz", y, x, dx, dim, False)


def cumulative_trapezoid(y, x=None, *, dx=None, dim: int = -1):
    """The running trapezoid rule along ``dim`` (one element fewer than ``y``).

    >>> ember.cumulative_trapezoid(ember.tensor([1.0, 2.0, 3.0]))
    tensor([1.5000, 4.0000])
    """
    return _trapezoid("cumulative_trapezoid", y, x, dx, dim, True)


# products ---------------------------------------------------------------------------------
def dist(input, other, p: float = 2):
    """The ``p``-norm of ``input - other`` (broadcast).

    >>> ember.dist(ember.tensor([0.0, 0.0]), ember.tensor([3.0, 4.0]))
    tensor(5.)
    """
    from .linalg_extra import vector_norm
    return vector_norm(_tensor("dist", input) - _tensor("dist", other), p)


def inner(input, other):
    """The inner product over the last dim of each (a 0-d operand multiplies): shape
    ``input.shape[:-1] + other.shape[:-1]``.

    >>> ember.inner(ember.tensor([1, 2]), ember.tensor([3, 4]))
    tensor(11)
    """
    a, b = _tensor("inner", input), _tensor("inner", other)
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if a.shape[-1] != b.shape[-1]:
        raise ShapeError(f"inner() the last dimension must match on both input tensors but "
                         f"got shapes {list(a.shape)} and {list(b.shape)}")
    k = a.shape[-1]
    out = matmul(reshape(a, (-1, k)), reshape(b, (-1, k)).mT)
    return reshape(out, tuple(a.shape[:-1]) + tuple(b.shape[:-1]))


def _scaled_sum(name, input, product, beta, alpha):
    from .linalg import _add_scaled
    return _add_scaled(name, input, product, beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """``beta * input + alpha * outer(vec1, vec2)``; ``input`` broadcasts.

    >>> ember.addr(ember.zeros(2, 2), ember.tensor([1.0, 2.0]), ember.tensor([1.0, 3.0]))
    tensor([[1., 3.],
            [2., 6.]])
    """
    vec1, vec2 = _tensor("addr", vec1), _tensor("addr", vec2)
    if vec1.ndim != 1 or vec2.ndim != 1:
        raise ShapeError(f"addr: expected 1-D vectors, got {vec1.ndim}-D and {vec2.ndim}-D")
    return _scaled_sum("addr", _tensor("addr", input), outer(vec1, vec2), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * sum_i(batch1[i] @ batch2[i])``; ``input`` broadcasts.

    >>> ember.addbmm(ember.zeros(2, 3), ember.ones(5, 2, 4), ember.ones(5, 4, 3))[0, 0]
    tensor(20.)
    """
    b1, b2 = _tensor("addbmm", batch1), _tensor("addbmm", batch2)
    if b1.ndim != 3 or b2.ndim != 3:
        raise ShapeError(f"addbmm: batch1 and batch2 must be 3-D, got {b1.ndim}-D and "
                         f"{b2.ndim}-D")
    return _scaled_sum("addbmm", _tensor("addbmm", input), sum(bmm(b1, b2), 0, dtype=b1.dtype),
                       beta, alpha)


def chain_matmul(*matrices):
    """The product of a chain of 2-D matrices (deprecated in PyTorch in favour of
    :func:`ember.linalg.multi_dot`).

    >>> ember.chain_matmul(ember.eye(2), ember.ones(2, 3)).shape
    ember.Size([2, 3])
    """
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise EmberError("chain_matmul(): Expected one or more matrices")
    for i, m in enumerate(matrices):
        if _tensor("chain_matmul", m).ndim != 2:
            raise ShapeError(f"chain_matmul(): Tensor dimension is {m.ndim}, expected 2 "
                             f"instead (tensor {i}).")
    if len(matrices) == 1:
        return matrices[0].clone()
    from .linalg_extra import multi_dot
    return multi_dot(matrices)


def renorm(input, p, dim: int, maxnorm):
    """Each slice ``input.select(dim, i)`` whose ``p``-norm exceeds ``maxnorm`` scaled to
    norm ``maxnorm`` (``maxnorm / (norm + 1e-7)``, as PyTorch); the others unchanged.

    >>> ember.renorm(ember.tensor([[3.0, 4.0], [0.3, 0.4]]), 2, 0, 1.0)
    tensor([[0.6000, 0.8000],
            [0.3000, 0.4000]])
    """
    from .linalg_extra import vector_norm
    input = _tensor("renorm", input)
    if not input.dtype.is_floating_point:
        raise EmberTypeError(f"renorm: expected a floating point tensor, got "
                             f"{input.dtype.name}")
    if p <= 0:
        raise EmberError(f"renorm: non-positive-norm not supported (got p={p})")
    if maxnorm < 0:
        raise EmberError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if input.ndim <= 1:
        raise ShapeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} "
                         f"dimensions")
    d = wrap_dim(dim, input.ndim, "renorm")
    dims = tuple(i for i in range(input.ndim) if i != d)
    norm = vector_norm(input, p, dims, True)
    return ew.where(norm > maxnorm, input * (maxnorm / (norm + 1e-7)), input)


# histogram --------------------------------------------------------------------------------
def _histogram_forward(xp, a, edges, w, bins, density, by_value):
    """Counts (or summed weights) of ``a`` in the bins ``edges`` bound; the last bin is
    closed. ``by_value``: the edges are arbitrary (binary search); otherwise they are
    equal-width and the bin is found by interpolation, then corrected by one if the
    rounding put it next door (PyTorch's kernel)."""
    x = a.reshape(-1)
    w = None if w is None else w.reshape(-1)
    lo, hi = edges[0], edges[-1]
    keep = (x >= lo) & (x <= hi)
    x = x[keep]
    w = None if w is None else w[keep]
    if by_value:
        pos = xp.searchsorted(edges, x, side="right") - 1
    else:
        pos = ((x - lo) * bins / (hi - lo)).astype(np.int64)
        pos = xp.clip(pos, 0, bins - 1)
        pos = pos - (x < edges[pos]) + (x >= edges[xp.minimum(pos + 1, bins)])
    pos = xp.clip(pos, 0, bins - 1)
    hist = xp.bincount(pos, weights=w, minlength=bins).astype(a.dtype)
    if density:
        hist = (hist / (hist.sum() * xp.diff(edges))).astype(a.dtype)
    return hist


_HISTOGRAM = register("histogram", lambda xp, a, edges, bins, density, by_value:
                      _histogram_forward(xp, a, edges, None, bins, density, by_value),
                      saves_inputs=False,
                      infer=lambda a, edges, bins, density, by_value:
                      AbstractValue((bins,), a.dtype))
_HISTOGRAM_W = register("histogram_weighted", _histogram_forward, saves_inputs=False,
                        infer=lambda a, edges, w, bins, density, by_value:
                        AbstractValue((bins,), a.dtype))


def histogram(input, bins=100, *, range=None, weight=None, density: bool = False):
    """``(hist, bin_edges)``: a histogram of ``input`` over ``bins`` equal-width bins
    spanning ``range`` (the data's min and max by default), or over the bins a 1-D
    tensor of edges bounds. ``weight`` weighs each element; ``density`` normalises the
    histogram to integrate to 1.

    >>> ember.histogram(ember.tensor([1.0, 2.0, 1.0]), bins=4, range=(0.0, 3.0)).hist
    tensor([0., 2., 1., 0.])
    """
    from .creation import linspace
    input = _tensor("histogram", input)
    if input.dtype not in (dt.float32, dt.float64):
        raise EmberTypeError(f"histogram: not implemented for '{input.dtype.name}' (expected "
                             f"float32 or float64)")
    if weight is not None:
        weight = _tensor("histogram", weight)
        if tuple(weight.shape) != tuple(input.shape) or weight.dtype is not input.dtype:
            raise ShapeError(f"histogram: weight must have the input's shape and dtype "
                             f"(got {tuple(weight.shape)} {weight.dtype.name}, input "
                             f"{tuple(input.shape)} {input.dtype.name})")
    if isinstance(bins, Tensor):
        if bins.ndim != 1 or bins.numel() < 1:
            raise ShapeError("histogram: bins tensor should have one dimension and at least "
                             "1 edge")
        if bins.dtype is not input.dtype:
            raise EmberTypeError("histogram: bins must have the input's dtype")
        edges, nbins, by_value = bins.detach().clone(), bins.numel() - 1, True
    else:
        nbins = int(bins)
        if nbins <= 0:
            raise EmberError(f"histogram: bins must be > 0, but got {nbins}")
        if range is not None:
            lo, hi = float(range[0]), float(range[1])
        elif input.numel():
            data = input.detach().numpy()
            lo, hi = float(data.min()), float(data.max())
        else:
            lo, hi = 0.0, 1.0
        if lo > hi:
            raise EmberError(f"histogram: min should not exceed max, but got min {lo} max {hi}")
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise EmberError(f"histogram: range of [{lo}, {hi}] is not finite")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges, by_value = linspace(lo, hi, nbins + 1, dtype=input.dtype,
                                   device=input.device), False
    if nbins == 0:
        from .creation import zeros
        return histogram_result(zeros(0, dtype=input.dtype, device=input.device), edges)
    params = dict(bins=nbins, density=bool(density), by_value=by_value)
    inputs = (input.detach(), edges) + (() if weight is None else (weight.detach(),))
    hist = apply(_HISTOGRAM if weight is None else _HISTOGRAM_W, *inputs, **params)
    return histogram_result(hist, edges)
