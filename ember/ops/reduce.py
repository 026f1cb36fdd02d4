"""Reductions over ``dim`` (an int, a tuple, or None for all) with ``keepdim``.
(The scans cumsum and cumprod are in ``scan.py``.)

Half-precision inputs (float16, bfloat16) accumulate in float32 and round once at the
end, as PyTorch's CPU kernels do. Integer and bool sums and products give int64.
"""
from __future__ import annotations

import builtins
import collections
import math
import numbers

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, EmberIndexError, EmberTypeError
from ..tensor import Tensor
from . import elementwise as ew, logical as lg
from ._xp import max_keepdims
from .registry import AbstractValue, apply, register
from .shape import cat, expand, permute, reshape, unsqueeze, wrap_dim, wrap_dims

__all__ = ["sum", "mean", "sum_to", "prod", "var", "std", "var_mean", "std_mean", "max",
           "min", "amax", "amin", "aminmax", "argmax", "argmin", "logsumexp", "norm", "all",
           "any", "count_nonzero"]
NOT_METHODS = ("sum_to", "var_mean", "std_mean")

# What max/min with a dim and aminmax return (``torch.return_types``).
max_result = collections.namedtuple("max", ["values", "indices"])
min_result = collections.namedtuple("min", ["values", "indices"])
aminmax_result = collections.namedtuple("aminmax", ["min", "max"])


def reduce_dims(input, dim, op: str) -> tuple:
    """``dim`` as a sorted tuple of non-negative dims (all dims when None or empty)."""
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(input.ndim))
    dims = wrap_dims(dim, input.ndim, op)
    return tuple(sorted(dims)) if input.ndim else ()


def reduced_shape(shape, dims, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def _reduce_infer(a, dims, keepdim, **params):
    dtype = params.get("dtype") or a.dtype
    return AbstractValue(reduced_shape(a.shape, dims, keepdim), dtype)


def grad_to_input_shape(g, input_shape, dims, keepdim):
    """Broadcast a reduction's output gradient back to the input's shape."""
    if not keepdim and g.ndim:  # (a 0-d gradient expands as it is)
        g = reshape(g, reduced_shape(input_shape, dims, True))
    return expand(g, tuple(input_shape))


def _accumulate_dtype(a):
    # Half types accumulate in float32, as PyTorch's CPU kernels do.
    return np.float32 if a.dtype.itemsize == 2 and a.dtype.kind in "fV" else None


def _work_dtype(a, dtype):
    """The dtype to accumulate in for a result of ``dtype`` (None: the input's)."""
    target = a.dtype if dtype is None else dtype.np
    return np.dtype(np.float32) if target.itemsize == 2 and target.kind in "fV" else target


def _count(shape, dims) -> int:
    return math.prod(shape[d] for d in dims)


def _require_nonempty(input, dims, op: str) -> None:
    """Reductions without an identity (max, min) fail on an empty reduced dim."""
    if dims is None:
        if input.numel() == 0:
            raise EmberIndexError(f"{op}(): Expected reduction dim to be specified for "
                                  "input.numel() == 0. Specify the reduction dim with the "
                                  "'dim' argument.")
        return
    for d in dims:
        if input.ndim and input.shape[d] == 0:
            raise EmberIndexError(f"{op}(): Expected reduction dim {d} to have non-zero size"
                                  f" (input shape {tuple(input.shape)}).")


# sum / prod ---------------------------------------------------------------------------
def _accumulating(fn):
    """A forward that reduces with ``fn`` in the accumulation dtype, then casts."""
    def forward(xp, a, dims, keepdim, dtype):
        out = fn(xp)(a, axis=dims, keepdims=keepdim, dtype=_work_dtype(a, dtype))
        target = a.dtype if dtype is None else dtype.np
        return out.astype(target) if out.dtype != target else out
    return forward


_SUM = register("sum", _accumulating(lambda xp: xp.sum),
                lambda n, g: grad_to_input_shape(g, n.inputs[0].shape, n.params["dims"],
                                                 n.params["keepdim"]),
                saves_inputs=False, infer=_reduce_infer)


def _sum_dtype(input, dtype):
    if dtype is None:
        return None if input.dtype.differentiable else dt.int64
    return dt.as_dtype(dtype)


def sum(input, dim=None, keepdim: bool = False, *, dtype=None):
    """Sum over ``dim`` (all dims when None). Integer and bool inputs sum to int64.

    >>> ember.tensor([[1.0, 2.0], [3.0, 4.0]]).sum(dim=0)
    tensor([4., 6.])
    """
    dims = reduce_dims(input, dim, "sum")
    return apply(_SUM, input, dims=dims, keepdim=keepdim, dtype=_sum_dtype(input, dtype))


def mean(input, dim=None, keepdim: bool = False, *, dtype=None):
    """Arithmetic mean over ``dim`` (floating inputs only, as in PyTorch).

    >>> ember.tensor([[1.0, 2.0], [3.0, 4.0]]).mean(1)
    tensor([1.5000, 3.5000])
    """
    if dtype is not None:
        input = input.to(dtype)
    if not input.dtype.differentiable:
        raise EmberError(f"mean(): could not infer output dtype. Input dtype must be either a "
                         f"floating point or complex dtype. Got: {input.dtype.name}")
    dims = reduce_dims(input, dim, "mean")
    count = _count(input.shape, dims)
    if input.dtype.itemsize == 2:  # divide in float32, round once
        total = sum(input, dims, keepdim, dtype=dt.float32)
        return ew.cast(total / count if count else total * math.nan, input.dtype)
    total = sum(input, dims, keepdim)
    return total / count if count else total * math.nan


def _prod_vjp(n, g):
    x, = n.saved_inputs()
    dims, keepdim = n.params["dims"], n.params["keepdim"]
    g = grad_to_input_shape(g, x.shape, dims, keepdim)
    if not lg.eq(x, 0).any():
        return g * grad_to_input_shape(n.output(0), x.shape, dims, keepdim) / x
    return g * _prod_of_others(x, dims)


_PROD = register("prod", _accumulating(lambda xp: xp.prod), _prod_vjp, saves_outputs=True,
                 infer=_reduce_infer)


def _prod_of_others(x, dims):
    """For each element, the product of the others in its reduced slice: a product of
    exclusive cumulative products from both sides, exact with zeros."""
    from .creation import ones
    from .scan import _CUMPROD, _scan, cumprod
    keep = [d for d in range(x.ndim) if d not in dims]
    order = keep + list(dims)
    moved = permute(x, tuple(order))
    flat = reshape(moved, tuple(moved.shape[:len(keep)]) + (-1,))
    one = ones(tuple(flat.shape[:-1]) + (1,), dtype=x.dtype, device=x.device)
    left = cumprod(cat([one, flat[..., :-1]], -1), -1)
    right = _scan(_CUMPROD, cat([flat[..., 1:], one], -1), -1, True, None)
    others = reshape(left * right, tuple(moved.shape))
    return permute(others, tuple(int(i) for i in np.argsort(order)))


def prod(input, dim=None, keepdim: bool = False, *, dtype=None):
    """Product of the elements (over ``dim``, an int, when given). Integer and bool
    inputs multiply to int64. The gradient is exact when the input holds zeros.

    >>> ember.tensor([[1.0, 2.0], [3.0, 4.0]]).prod(1)
    tensor([ 2., 12.])
    """
    if dim is not None and not isinstance(dim, numbers.Integral):
        raise EmberTypeError(f"prod(): dim must be an int, got {type(dim).__name__} "
                             f"({dim!r})")
    dims = reduce_dims(input, dim, "prod")
    return apply(_PROD, input, dims=dims, keepdim=keepdim, dtype=_sum_dtype(input, dtype))


# var / std ----------------------------------------------------------------------------
def _var_forward(xp, a, dims, correction, keepdim):
    acc = _accumulate_dtype(a)
    x = a.astype(acc) if acc is not None else a
    n = _count(a.shape, dims)
    centred = x - xp.sum(x, axis=dims, keepdims=True) / n
    # Computed here rather than with xp.var, whose degenerate-slice warnings escape.
    out = xp.sum(centred * centred, axis=dims, keepdims=keepdim) / builtins.max(n - correction, 0)
    return out.astype(a.dtype) if acc is not None else out


def _var_vjp(n, g):
    x, = n.saved_inputs()
    dims, correction, keepdim = n.params["dims"], n.params["correction"], n.params["keepdim"]
    dof = _count(x.shape, dims) - correction
    scale = 2.0 / dof if dof > 0 else math.inf
    g = grad_to_input_shape(g, x.shape, dims, keepdim)
    return g * scale * (x - mean(x, dims, keepdim=True))


_VAR = register("var", _var_forward, _var_vjp, infer=_reduce_infer)


def _var_args(op, input, dim, unbiased, correction):
    if isinstance(dim, bool):  # the old var(input, unbiased) overload
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise EmberError(f"{op}(): cannot specify both 'unbiased' and 'correction'")
    if correction is None:
        correction = 0 if unbiased is False else 1
    if not input.dtype.differentiable:
        raise EmberTypeError(f"{op}(): std and var only support floating point dtypes, got "
                             f"{input.dtype.name}")
    return reduce_dims(input, dim, op), correction


def var(input, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction=None):
    """Variance over ``dim`` (all dims when None), dividing by N - ``correction``
    (default 1, Bessel's correction; ``unbiased=False`` means correction 0).

    >>> ember.tensor([1.0, 2.0, 3.0, 4.0]).var()
    tensor(1.6667)
    """
    if input.dtype.is_complex:  # the spread of the real parts plus that of the imaginary
        from .complex_support import imag, real
        return ew.add(var(real(input), dim, unbiased, keepdim, correction=correction),
                      var(imag(input), dim, unbiased, keepdim, correction=correction))
    dims, correction = _var_args("var", input, dim, unbiased, correction)
    return apply(_VAR, input, dims=dims, correction=correction, keepdim=keepdim)


def _std_forward(xp, a, dims, correction, keepdim):
    return xp.sqrt(_var_forward(xp, a, dims, correction, keepdim))


def _std_vjp(n, g):
    # A zero std has a zero slice around the mean: PyTorch gives it a 0 gradient, not NaN.
    out = n.output(0)
    return _var_vjp(n, g / (2 * ew.where(lg.eq(out, 0), 1.0, out)))


_STD = register("std", _std_forward, _std_vjp, saves_outputs=True, infer=_reduce_infer)


def std(input, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
        correction=None):
    """Standard deviation: the square root of :func:`var`, same arguments.

    >>> ember.tensor([1.0, 2.0, 3.0, 4.0]).std(correction=0)
    tensor(1.1180)
    """
    if input.dtype.is_complex:
        return ew.sqrt(var(input, dim, unbiased, keepdim, correction=correction))
    dims, correction = _var_args("std", input, dim, unbiased, correction)
    return apply(_STD, input, dims=dims, correction=correction, keepdim=keepdim)


def var_mean(input, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction=None):
    """``(var(input, ...), mean(input, ...))`` over the same dims.

    >>> ember.var_mean(ember.tensor([1.0, 3.0]))
    (tensor(2.), tensor(2.))
    """
    dims, correction = _var_args("var_mean", input, dim, unbiased, correction)
    return (var(input, dims, keepdim=keepdim, correction=correction),
            mean(input, dims, keepdim))


def std_mean(input, dim=None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction=None):
    """``(std(input, ...), mean(input, ...))`` over the same dims.

    >>> ember.std_mean(ember.tensor([1.0, 3.0]))
    (tensor(1.4142), tensor(2.))
    """
    dims, correction = _var_args("std_mean", input, dim, unbiased, correction)
    return (std(input, dims, keepdim=keepdim, correction=correction),
            mean(input, dims, keepdim))


# max / min ------------------------------------------------------------------------------
def _extreme_vjp(n, g):
    """Gradient of amax/amin: split evenly among the elements equal to the result
    (NaN counts as equal to a NaN result)."""
    x, = n.saved_inputs()
    dims, keepdim = n.params["dims"], n.params["keepdim"]
    out = grad_to_input_shape(n.output(0).detach(), x.shape, dims, keepdim)
    hit = lg.eq(x, out) | (lg.isnan(x) & lg.isnan(out))
    share = ew.cast(hit, x.dtype)
    share = share / sum(share, dims, keepdim=True)
    return grad_to_input_shape(g, x.shape, dims, keepdim) * share


_AMAX = register("amax", lambda xp, a, dims, keepdim: xp.max(a, axis=dims, keepdims=keepdim),
                 _extreme_vjp, saves_outputs=True, infer=_reduce_infer)
_AMIN = register("amin", lambda xp, a, dims, keepdim: xp.min(a, axis=dims, keepdims=keepdim),
                 _extreme_vjp, saves_outputs=True, infer=_reduce_infer)


def amax(input, dim=(), keepdim: bool = False):
    """The largest element over ``dim`` (an int or a tuple; all dims when empty).
    The gradient is split evenly among tied maxima.

    >>> ember.tensor([[1.0, 5.0], [7.0, 2.0]]).amax(1)
    tensor([5., 7.])
    """
    dims = reduce_dims(input, dim, "amax")
    _require_nonempty(input, dims, "amax")
    return apply(_AMAX, input, dims=dims, keepdim=keepdim)


def amin(input, dim=(), keepdim: bool = False):
    """The smallest element over ``dim`` (an int or a tuple; all dims when empty).

    >>> ember.tensor([[1.0, 5.0], [7.0, 2.0]]).amin(1)
    tensor([1., 2.])
    """
    dims = reduce_dims(input, dim, "amin")
    _require_nonempty(input, dims, "amin")
    return apply(_AMIN, input, dims=dims, keepdim=keepdim)


def _select_forward(pick):
    """max/min along one dim: the values and the index of the first one picked."""
    def forward(xp, a, dim, keepdim):
        if a.ndim == 0:
            return a.copy(), xp.zeros((), dtype=np.int64)
        idx = pick(xp)(a, axis=dim, keepdims=True)
        values = xp.take_along_axis(a, idx, axis=dim)
        if not keepdim:
            idx, values = idx.squeeze(dim), values.squeeze(dim)
        return values, idx.astype(np.int64)
    return forward


def _select_infer(a, dim, keepdim):
    shape = reduced_shape(a.shape, (dim,) if a.ndim else (), keepdim)
    return AbstractValue(shape, a.dtype), AbstractValue(shape, dt.int64)


def _select_vjp(n, g):
    """The values' gradient goes to the position each index names."""
    g = g[0]
    x = n.inputs[0]
    if g is None:
        return None
    if x.ndim == 0:
        return g
    from .creation import arange
    d, keepdim = n.params["dim"], n.params["keepdim"]
    idx = n.output(1).detach()
    if not keepdim:
        idx, g = unsqueeze(idx, d), unsqueeze(g, d)
    positions = reshape(arange(x.shape[d], device=x.device),
                        tuple(-1 if i == d else 1 for i in range(x.ndim)))
    return ew.where(lg.eq(idx, positions), g, 0.0)


_MAX = register("max", _select_forward(lambda xp: xp.argmax), _select_vjp, n_outputs=2,
                saves_inputs=False, saves_outputs=True, infer=_select_infer)
_MIN = register("min", _select_forward(lambda xp: xp.argmin), _select_vjp, n_outputs=2,
                saves_inputs=False, saves_outputs=True, infer=_select_infer)


def _extreme(name, input, dim, keepdim, other, elementwise, full, along, result):
    if other is None and isinstance(dim, Tensor):
        other = dim
    if other is not None:
        return elementwise(input, other)
    if dim is None:
        _require_nonempty(input, None, name)
        return apply(full, input, dims=tuple(range(input.ndim)), keepdim=False)
    d = wrap_dim(dim, input.ndim, name)
    _require_nonempty(input, (d,), name)
    return result(*apply(along, input, dim=d, keepdim=keepdim))


def max(input, dim=None, keepdim: bool = False, *, other=None):
    """``max(input)``: the largest element. ``max(input, dim, keepdim=False)``: a
    ``(values, indices)`` named tuple along ``dim``. ``max(input, other)``: the
    elementwise :func:`maximum`.

    >>> ember.tensor([[1.0, 5.0], [7.0, 2.0]]).max(dim=1)
    max(values=tensor([5., 7.]), indices=tensor([1, 0]))
    """
    return _extreme("max", input, dim, keepdim, other, ew.maximum, _AMAX, _MAX, max_result)


def min(input, dim=None, keepdim: bool = False, *, other=None):
    """``min(input)``: the smallest element. ``min(input, dim, keepdim=False)``: a
    ``(values, indices)`` named tuple along ``dim``. ``min(input, other)``: the
    elementwise :func:`minimum`.

    >>> ember.tensor([[1.0, 5.0], [7.0, 2.0]]).min(dim=1)
    min(values=tensor([1., 2.]), indices=tensor([0, 1]))
    """
    return _extreme("min", input, dim, keepdim, other, ew.minimum, _AMIN, _MIN, min_result)


def aminmax(input, *, dim=None, keepdim: bool = False):
    """``(min, max)`` named tuple over ``dim`` (an int; all dims when None).

    >>> ember.aminmax(ember.tensor([3.0, -1.0, 2.0]))
    aminmax(min=tensor(-1.), max=tensor(3.))
    """
    dims = reduce_dims(input, dim, "aminmax")
    if input.ndim and _count(input.shape, dims) == 0:
        raise EmberIndexError("aminmax(): cannot compute aminmax over an empty dimension as "
                              "the operation has no identity.")
    return aminmax_result(apply(_AMIN, input, dims=dims, keepdim=keepdim),
                          apply(_AMAX, input, dims=dims, keepdim=keepdim))


def _arg_forward(pick):
    def forward(xp, a, dim, keepdim):
        if dim is None or a.ndim == 0:
            idx = xp.asarray(pick(xp)(a), dtype=np.int64)
            return idx.reshape((1,) * a.ndim) if keepdim else idx
        return pick(xp)(a, axis=dim, keepdims=keepdim).astype(np.int64)
    return forward


_ARGMAX = register("argmax", _arg_forward(lambda xp: xp.argmax), saves_inputs=False)
_ARGMIN = register("argmin", _arg_forward(lambda xp: xp.argmin), saves_inputs=False)


def _arg(name, op, input, dim, keepdim):
    if input.dtype is dt.bool:
        raise EmberTypeError(f"{name}(): does not support bool input")
    if dim is None:
        _require_nonempty(input, None, name)
    else:
        dim = wrap_dim(dim, input.ndim, name)
        _require_nonempty(input, (dim,), name)
    return apply(op, input, dim=dim, keepdim=keepdim)


def argmax(input, dim=None, keepdim: bool = False):
    """Index of the largest element along ``dim`` (of the flattened input when None);
    the first one on ties.

    >>> ember.tensor([[1.0, 5.0], [7.0, 2.0]]).argmax(1)
    tensor([1, 0])
    """
    return _arg("argmax", _ARGMAX, input, dim, keepdim)


def argmin(input, dim=None, keepdim: bool = False):
    """Index of the smallest element along ``dim`` (of the flattened input when None).

    >>> ember.tensor([[1.0, 5.0], [7.0, 2.0]]).argmin()
    tensor(0)
    """
    return _arg("argmin", _ARGMIN, input, dim, keepdim)


# logsumexp / norm -----------------------------------------------------------------------
def _logsumexp_forward(xp, a, dims, keepdim):
    acc = _accumulate_dtype(a)
    x = a.astype(acc) if acc is not None else a
    shift = max_keepdims(xp, x, dims)
    shift = xp.where(xp.isfinite(shift), shift, 0)  # all -inf (or inf, nan) slices
    out = xp.log(xp.sum(xp.exp(x - shift), axis=dims, keepdims=True)) + shift
    if not keepdim:
        out = out.reshape(reduced_shape(a.shape, dims, False))
    return out.astype(a.dtype) if acc is not None else out


def _logsumexp_vjp(n, g):
    x, = n.saved_inputs()
    dims, keepdim = n.params["dims"], n.params["keepdim"]
    out = grad_to_input_shape(n.output(0), x.shape, dims, keepdim)
    return grad_to_input_shape(g, x.shape, dims, keepdim) * ew.exp(x - out)


_LOGSUMEXP = register("logsumexp", _logsumexp_forward, _logsumexp_vjp, saves_outputs=True,
                      infer=_reduce_infer)


def logsumexp(input, dim, keepdim: bool = False):
    """log(sum(exp(input))) over ``dim``, computed without overflow. Integer inputs
    give the default float dtype.

    >>> ember.tensor([0.0, 0.0]).logsumexp(0)
    tensor(0.6931)
    """
    if input.dtype.is_complex:  # shifted by the largest real part (holomorphic steps)
        from .complex_support import real
        dims = reduce_dims(input, dim, "logsumexp")
        shift = amax(real(input).detach(), dims, keepdim=True)
        shift = ew.where(lg.isfinite(shift), shift, 0.0)
        if not keepdim:
            kept = tuple(n for i, n in enumerate(input.shape) if i not in dims)
        total = ew.log(sum(ew.exp(input - shift), dims, keepdim=keepdim))
        return total + (shift if keepdim else reshape(shift, kept))
    if not input.dtype.is_floating_point:
        input = ew.cast(input, dt.get_default_dtype())
    dims = reduce_dims(input, dim, "logsumexp")
    return apply(_LOGSUMEXP, input, dims=dims, keepdim=keepdim)


def _norm_forward(xp, a, p, dims, keepdim):
    acc = _accumulate_dtype(a)
    x = a.astype(acc) if acc is not None else a
    reduce = dict(axis=dims, keepdims=keepdim)
    if p == 2:
        out = xp.sqrt(xp.sum(x * x, **reduce))
    elif p == 1:
        out = xp.sum(xp.abs(x), **reduce)
    elif p == math.inf:
        out = xp.max(xp.abs(x), **reduce)
    elif p == -math.inf:
        out = xp.min(xp.abs(x), **reduce)
    elif p == 0:
        out = xp.sum(x != 0, dtype=x.dtype, **reduce)
    else:
        out = xp.sum(xp.abs(x) ** p, **reduce) ** (1.0 / p)
    return out.astype(a.dtype) if acc is not None else xp.asarray(out, dtype=a.dtype)


def _norm_vjp(n, g):
    x, = n.saved_inputs()
    p, dims, keepdim = n.params["p"], n.params["dims"], n.params["keepdim"]
    g = grad_to_input_shape(g, x.shape, dims, keepdim)
    out = grad_to_input_shape(n.output(0), x.shape, dims, keepdim)
    if p == 0:
        return g * 0
    if p == 1:
        return g * ew.sign(x)
    if abs(p) == math.inf:  # split evenly among the elements of largest (smallest) |x|
        ax = ew.abs(x)
        hit = ew.cast(lg.eq(ax, out.detach()) | lg.isnan(ax), x.dtype)
        return ew.sign(x) * g * hit / sum(hit, dims, keepdim=True)
    # Safe denominators: where the norm is 0 every x in the slice is 0 too.
    safe_out = ew.where(lg.eq(out, 0), 1.0, out)
    if p == 2:
        return g * x / safe_out
    safe_ax = ew.where(lg.eq(x, 0), 1.0, ew.abs(x))
    return g * ew.sign(x) * ew.pow(safe_ax / safe_out, p - 1)


_NORM = register("norm", _norm_forward, _norm_vjp, saves_outputs=True, infer=_reduce_infer)


def norm(input, p="fro", dim=None, keepdim: bool = False, dtype=None):
    """The vector p-norm of ``input`` over ``dim`` (all elements when None):
    ``sum(|x| ** p) ** (1 / p)``; ``p`` may be ``inf`` (max |x|), ``-inf`` (min |x|),
    0 (count of non-zeros) or ``"fro"`` (the 2-norm, the default).

    >>> ember.tensor([3.0, 4.0]).norm()
    tensor(5.)
    """
    if dtype is not None:
        input = ew.cast(input, dt.as_dtype(dtype))
    if not input.dtype.is_floating_point:
        raise EmberTypeError(f"norm(): expected a floating point tensor as input, got dtype "
                             f"{input.dtype.name}")
    if p is None or p == "fro":
        if isinstance(dim, (tuple, list)) and len(dim) > 2:
            raise EmberError(f"norm(): p='fro' expects at most 2 dims, got dim={dim!r}")
        p = 2
    elif isinstance(p, str):
        if p == "nuc":  # the sum of singular values of the matrices in dims ``dim``
            from .linalg_extra import matrix_norm
            if dim is None and input.ndim != 2:
                raise EmberError(f"norm(): p='nuc' without dim expects a 2-D tensor, got "
                                 f"shape {tuple(input.shape)}")
            return matrix_norm(input, "nuc", (-2, -1) if dim is None else dim, keepdim)
        raise EmberError(f"norm(): p must be a number, 'fro' or 'nuc', got {p!r}")
    p = float(p)
    dims = reduce_dims(input, dim, "norm")
    if abs(p) == math.inf and _count(input.shape, dims) == 0:
        raise EmberError(f"norm(): cannot compute the {p} norm over an empty dimension "
                         f"(input shape {tuple(input.shape)}): it has no identity")
    return apply(_NORM, input, p=p, dims=dims, keepdim=keepdim)


# all / any / count_nonzero ------------------------------------------------------------------
def _truth_forward(pick):
    def forward(xp, a, dims, keepdim):
        out = pick(xp)(a if a.dtype == np.bool_ else a != 0, axis=dims, keepdims=keepdim)
        return xp.asarray(out, dtype=np.uint8 if a.dtype == np.uint8 else np.bool_)
    return forward


_ALL = register("all", _truth_forward(lambda xp: xp.all), saves_inputs=False)
_ANY = register("any", _truth_forward(lambda xp: xp.any), saves_inputs=False)


def all(input, dim=None, keepdim: bool = False):
    """True where every element over ``dim`` is non-zero (all dims when None). uint8
    inputs give uint8, everything else bool.

    >>> ember.tensor([[True, False], [True, True]]).all(1)
    tensor([False,  True])
    """
    # PyTorch reduces nothing for an empty dim tuple here (unlike sum's "all dims")
    dims = () if isinstance(dim, (tuple, list)) and len(dim) == 0 else \
        reduce_dims(input, dim, "all")
    return apply(_ALL, input, dims=dims, keepdim=keepdim)


def any(input, dim=None, keepdim: bool = False):
    """True where some element over ``dim`` is non-zero (all dims when None).

    >>> ember.tensor([[0.0, 0.0], [0.0, 2.0]]).any(1)
    tensor([False,  True])
    """
    # PyTorch reduces nothing for an empty dim tuple here (unlike sum's "all dims")
    dims = () if isinstance(dim, (tuple, list)) and len(dim) == 0 else \
        reduce_dims(input, dim, "any")
    return apply(_ANY, input, dims=dims, keepdim=keepdim)


_COUNT_NONZERO = register(
    "count_nonzero",
    lambda xp, a, dims: xp.asarray(xp.count_nonzero(a, axis=dims), dtype=np.int64),
    saves_inputs=False)


def count_nonzero(input, dim=None):
    """The number of non-zero elements over ``dim`` (an int or a tuple; all when None).

    >>> ember.tensor([[0, 1], [2, 3]]).count_nonzero(0)
    tensor([1, 2])
    """
    return apply(_COUNT_NONZERO, input, dims=reduce_dims(input, dim, "count_nonzero"))


def sum_to(input, shape):
    """Sum ``input`` down to ``shape`` (the reverse of broadcasting ``shape`` up to it)."""
    shape = tuple(shape)
    have = tuple(input.shape)
    if have == shape:
        return input
    lead = len(have) - len(shape)
    dims = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape)
                                      if s == 1 and have[i + lead] != 1)
    out = sum(input, dims, keepdim=True) if dims else input
    return reshape(out, shape)
