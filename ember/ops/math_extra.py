"""Assorted math PyTorch has at the top level: cross, kron, cdist, bincount, histc,
isin, tril_indices/triu_indices, bit shifts, cartesian_prod, combinations, block_diag,
vander, nextafter, frexp, ldexp, gcd and lcm.

Most are composites of existing ops (so they differentiate through them); the
counting, set and integer ops are primitives without gradients, as in PyTorch.
"""
from __future__ import annotations

import collections
import itertools
import math

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, EmberTypeError, ShapeError
from ..tensor import Tensor
from . import elementwise as ew
from .logical import isfinite
from ._promote import FLOAT, INTEGRAL, SAME, promote
from .registry import AbstractValue, apply, register
from .shape import broadcast_tensors, cat, reshape, select, stack, unsqueeze, wrap_dim

__all__ = ["cross", "kron", "cdist", "bincount", "histc", "isin", "tril_indices",
           "triu_indices", "bitwise_left_shift", "bitwise_right_shift", "cartesian_prod",
           "combinations", "block_diag", "vander", "nextafter", "frexp", "ldexp", "gcd",
           "lcm", "angle"]
NOT_METHODS = ("cdist", "tril_indices", "triu_indices", "cartesian_prod", "block_diag",
               "vander")

frexp_result = collections.namedtuple("frexp", ["mantissa", "exponent"])


def _tensor(name, value):
    if not isinstance(value, Tensor):
        raise EmberTypeError(f"{name}: expected a Tensor, got {type(value).__name__}")
    return value


# cross / kron / cdist -------------------------------------------------------------------
def cross(input, other, dim: int | None = None):
    """The cross product of 3-vectors along ``dim``, broadcasting the other dims. With
    ``dim=None`` it is the first dim of size 3 (PyTorch's older default; prefer
    :func:`ember.linalg.cross`, whose default is the last dim).

    >>> ember.cross(ember.tensor([1.0, 0.0, 0.0]), ember.tensor([0.0, 1.0, 0.0]))
    tensor([0., 0., 1.])
    """
    a, b = _tensor("cross", input), _tensor("cross", other)
    if a.dtype is not b.dtype:
        raise EmberTypeError(f"cross: expected input and other to have the same dtype, got "
                             f"{a.dtype.name} and {b.dtype.name}")
    if dim is None:
        dim = next((i for i, s in enumerate(a.shape) if s == 3), None)
        if dim is None:
            raise ShapeError(f"cross: no dimension of size 3 in input of shape "
                             f"{tuple(a.shape)}")
    return _cross(a, b, dim, "cross")


def _cross(a, b, dim, name):
    if a.ndim != b.ndim:
        raise ShapeError(f"{name}: inputs must have the same number of dimensions (got "
                         f"{a.ndim} and {b.ndim})")
    if a.ndim == 0:
        raise ShapeError(f"{name}: expected tensors with at least one dimension")
    d = wrap_dim(dim, max(a.ndim, b.ndim), name)
    da, db = d - (max(a.ndim, b.ndim) - a.ndim), d - (max(a.ndim, b.ndim) - b.ndim)
    sa = a.shape[da] if 0 <= da < a.ndim else None
    sb = b.shape[db] if 0 <= db < b.ndim else None
    if sa != 3 or sb != 3:
        raise ShapeError(f"{name}: inputs dimension {dim} must have length 3. Got {sa} and "
                         f"{sb}")
    a, b = broadcast_tensors(a, b)
    a0, a1, a2 = (select(a, d, i) for i in range(3))
    b0, b1, b2 = (select(b, d, i) for i in range(3))
    return stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


def kron(input, other):
    """The Kronecker product: every element of ``input`` times the whole of ``other``,
    laid out block by block (the fewer dims get leading size-1 dims).

    >>> ember.kron(ember.tensor([1, 2]), ember.tensor([1, 10]))
    tensor([ 1, 10,  2, 20])
    """
    a, b = _tensor("kron", input), _tensor("kron", other)
    nd = max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + tuple(a.shape)
    sb = (1,) * (nd - b.ndim) + tuple(b.shape)
    a = reshape(a, tuple(x for s in sa for x in (s, 1)))
    b = reshape(b, tuple(x for s in sb for x in (1, s)))
    return reshape(a * b, tuple(x * y for x, y in zip(sa, sb)))


def cdist(x1, x2, p: float = 2.0, compute_mode: str = "use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance between each row of ``x1`` (``(..., P, M)``) and each row of
    ``x2`` (``(..., R, M)``): shape ``(..., P, R)``, batch dims broadcasting. ``p`` may be
    any non-negative number or ``inf``; the gradient is 0 where two rows coincide.

    >>> ember.cdist(ember.tensor([[0.0, 0.0]]), ember.tensor([[3.0, 4.0], [1.0, 0.0]]))
    tensor([[5., 1.]])
    """
    from .reduce import norm
    x1, x2 = _tensor("cdist", x1), _tensor("cdist", x2)
    if x1.ndim < 2 or x2.ndim < 2:
        raise ShapeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D, "
                         f"X2 got: {x2.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(f"cdist: X1 and X2 must have the same number of columns. X1: "
                         f"{x1.shape[-1]} X2: {x2.shape[-1]}")
    if not (x1.dtype.is_floating_point and x2.dtype.is_floating_point):
        raise EmberTypeError(f"cdist only supports floating-point dtypes, X1 got: "
                             f"{x1.dtype.name}, X2 got: {x2.dtype.name}")
    if x1.dtype is not x2.dtype:
        raise EmberTypeError(f"cdist: expected both inputs to have the same dtype, got "
                             f"{x1.dtype.name} and {x2.dtype.name}")
    if p < 0:
        raise EmberError(f"cdist only supports non-negative p values, got {p}")
    diff = unsqueeze(x1, -2) - unsqueeze(x2, -3)
    if x1.shape[-1] == 0:
        from .creation import zeros
        return zeros(tuple(diff.shape[:-1]), dtype=x1.dtype, device=x1.device)
    return norm(diff, p, dim=-1)


# counting -------------------------------------------------------------------------------
def _bincount_forward(xp, a, *weights, minlength):
    w = weights[0] if weights else None
    out = xp.bincount(a, weights=w, minlength=minlength)
    if w is None:
        return out.astype(np.int64, copy=False)
    return out.astype(w.dtype if w.dtype.kind == "f" else np.float64, copy=False)


_BINCOUNT = register("bincount", _bincount_forward, saves_inputs=False, dynamic_shape=True)


def bincount(input, weights=None, minlength: int = 0):
    """How many times each value ``0 .. max(input)`` occurs in the 1-D non-negative
    integer ``input`` (at least ``minlength`` bins); with ``weights``, their sums per bin
    instead (float weights keep their dtype, others give float64).

    >>> ember.bincount(ember.tensor([0, 1, 1, 3]))
    tensor([1, 2, 0, 1])
    """
    input = _tensor("bincount", input)
    if input.ndim != 1 or input.dtype.is_floating_point or input.dtype is dt.bool or \
            (input.numel() and bool((input < 0).any())):
        raise EmberError(f"bincount only supports 1-d non-negative integral inputs (got "
                         f"shape {tuple(input.shape)}, dtype {input.dtype.name})")
    if minlength < 0:
        raise EmberError(f"bincount: minlength should be >= 0, got {minlength}")
    if weights is None:
        return apply(_BINCOUNT, input, minlength=int(minlength))
    weights = _tensor("bincount", weights)
    if tuple(weights.shape) != tuple(input.shape):
        raise ShapeError(f"bincount: weights should be 1-d and have the same length as input "
                         f"(got {tuple(weights.shape)} and {tuple(input.shape)})")
    return apply(_BINCOUNT, input, weights, minlength=int(minlength))


def _histc_forward(xp, a, bins, low, high):
    x = a.astype(np.float32) if a.dtype.itemsize == 2 else a
    x = x.reshape(-1)
    if low == high and x.size:
        finite = x[xp.isfinite(x)]
        if finite.size:
            low, high = float(finite.min()), float(finite.max())
    if low == high:
        low, high = low - 1, high + 1
    keep = (x >= low) & (x <= high)
    x = x[keep]
    pos = ((x - low) * bins / (high - low)).astype(np.int64)
    pos = xp.minimum(pos, bins - 1)
    return xp.bincount(pos, minlength=bins).astype(a.dtype)


_HISTC = register("histc", _histc_forward, saves_inputs=False,
                  infer=lambda a, bins, low, high: AbstractValue((bins,), a.dtype))


def histc(input, bins: int = 100, min: float = 0, max: float = 0):
    """A histogram of ``input`` with ``bins`` equal-width bins over ``[min, max]`` (the
    data's own range when both are 0); elements outside are ignored.

    >>> ember.histc(ember.tensor([1.0, 2.0, 1.0]), bins=4, min=0, max=3)
    tensor([0., 2., 1., 0.])
    """
    input = _tensor("histc", input)
    if not input.dtype.is_floating_point:
        raise EmberTypeError(f"histc: expected a floating point tensor, got dtype "
                             f"{input.dtype.name}")
    if bins <= 0:
        raise EmberError(f"histc: bins must be > 0, got {bins}")
    if min > max:
        raise EmberError(f"histc: max must be larger than min (got min={min}, max={max})")
    if not (math.isfinite(min) and math.isfinite(max)):
        raise EmberError(f"histc: range of [{min}, {max}] is not finite")
    if min == max and input.numel() and not bool(isfinite(input).all()):
        raise EmberError("histc: range of the data (min = max = 0 asks for it) is not "
                         "finite: input holds NaN or inf")
    return apply(_HISTC, input, bins=int(bins), low=float(min), high=float(max))


# sets -----------------------------------------------------------------------------------
def _isin_forward(xp, a, b, invert):
    return xp.asarray(xp.isin(a, b, invert=invert), dtype=bool)


_ISIN = register("isin", _isin_forward, saves_inputs=False,
                 infer=lambda a, b, invert: AbstractValue(a.shape, dt.bool))


def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False):
    """True where an element of ``elements`` is among ``test_elements`` (either may be
    a number); ``invert`` negates the answer.

    >>> ember.isin(ember.tensor([1, 2, 3]), ember.tensor([2, 5]))
    tensor([False,  True, False])
    """
    (a, b), _ = promote("isin", (elements, test_elements), SAME)
    return apply(_ISIN, a, b, invert=bool(invert))


# index helpers --------------------------------------------------------------------------
def _triangle_indices(name, row, col, offset, dtype, device, lower):
    from .creation import _dev
    if row < 0 or col < 0:
        raise EmberError(f"{name}: row and col must be non-negative, got {row} and {col}")
    dtype = dt.as_dtype(dtype, name)
    if dtype not in (dt.int32, dt.int64):
        raise EmberTypeError(f"{name}: dtype must be int32 or int64, got {dtype.name}")
    dev = _dev(device, name)
    xp = dev.backend.xp
    pick = xp.tril_indices if lower else xp.triu_indices
    rows, cols = pick(row, k=offset, m=col)
    out = xp.stack([rows, cols]).astype(dtype.np).reshape(2, -1)
    return Tensor._make(out, dev)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype=dt.int64, device=None,
                 layout=None):
    """The coordinates (a ``2 x N`` tensor, row by row) of the lower triangle of a
    ``row x col`` matrix, on and below diagonal ``offset``.

    >>> ember.tril_indices(2, 2)
    tensor([[0, 1, 1],
            [0, 0, 1]])
    """
    return _triangle_indices("tril_indices", row, col, offset, dtype, device, True)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype=dt.int64, device=None,
                 layout=None):
    """The coordinates (a ``2 x N`` tensor, row by row) of the upper triangle of a
    ``row x col`` matrix, on and above diagonal ``offset``.

    >>> ember.triu_indices(2, 2)
    tensor([[0, 0, 1],
            [0, 1, 1]])
    """
    return _triangle_indices("triu_indices", row, col, offset, dtype, device, False)


# integer ops -----------------------------------------------------------------------------
def _shift_forward(left):
    def forward(xp, a, b):
        bits = a.dtype.itemsize * 8
        out_of_range = (b < 0) | (b >= bits)
        safe = xp.where(out_of_range, 0, b).astype(a.dtype)
        if left:
            return xp.where(out_of_range, 0, xp.left_shift(a, safe)).astype(a.dtype)
        fill = xp.right_shift(a, a.dtype.type(bits - 1))  # 0 or -1: the sign, repeated
        return xp.where(out_of_range, fill, xp.right_shift(a, safe)).astype(a.dtype)
    return forward


def _int_binary(name, forward, doc):
    op = register(name, forward, None, broadcasting=True, saves_inputs=False,
                  infer=lambda a, b: AbstractValue(np.broadcast_shapes(a.shape, b.shape),
                                                   a.dtype))

    def fn(input, other):
        (a, b), dtype = promote(name, (input, other), INTEGRAL)
        if dtype is dt.bool:
            raise EmberTypeError(f"{name}: not implemented for bool tensors")
        return apply(op, a, b)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


bitwise_left_shift = _int_binary(
    "bitwise_left_shift", _shift_forward(True),
    """``input << other`` for integer tensors (0 where the shift is negative or at least
    the bit width).

    >>> ember.bitwise_left_shift(ember.tensor([1, 3]), 2)
    tensor([ 4, 12])
    """)
bitwise_right_shift = _int_binary(
    "bitwise_right_shift", _shift_forward(False),
    """``input >> other`` for integer tensors (arithmetic: the sign fills in; 0 or -1
    where the shift is negative or at least the bit width).

    >>> ember.bitwise_right_shift(ember.tensor([8, -8]), 2)
    tensor([ 2, -2])
    """)
gcd = _int_binary("gcd", lambda xp, a, b: xp.gcd(a, b).astype(a.dtype), """The greatest
    common divisor of integer tensors, elementwise (non-negative).

    >>> ember.gcd(ember.tensor([12, -4]), ember.tensor([8, 6]))
    tensor([4, 2])
    """)
lcm = _int_binary("lcm", lambda xp, a, b: xp.lcm(a, b).astype(a.dtype), """The least common
    multiple of integer tensors, elementwise (non-negative; 0 where either is 0).

    >>> ember.lcm(ember.tensor([4, 3]), ember.tensor([6, 5]))
    tensor([12, 15])
    """)


# floating-point representation -----------------------------------------------------------
def _float_only(name, *tensors):
    for t in tensors:
        if not t.dtype.is_floating_point:
            raise EmberTypeError(f"{name}: only supports floating-point dtypes, got "
                                 f"{t.dtype.name}")


_NEXTAFTER = register("nextafter", lambda xp, a, b: xp.nextafter(a, b), None,
                      broadcasting=True, saves_inputs=False,
                      infer=lambda a, b: AbstractValue(np.broadcast_shapes(a.shape, b.shape),
                                                       a.dtype))


def nextafter(input, other):
    """The next floating-point value after ``input`` towards ``other``, elementwise.

    >>> ember.nextafter(ember.tensor([1.0]), ember.tensor([2.0])) > 1
    tensor([True])
    """
    (a, b), _ = promote("nextafter", (input, other), SAME)
    _float_only("nextafter", a)
    return apply(_NEXTAFTER, a, b)


def _frexp_forward(xp, a):
    work = a.astype(np.float32) if a.dtype.kind == "V" else a
    mantissa, exponent = xp.frexp(work)
    return mantissa.astype(a.dtype, copy=False), exponent.astype(np.int32)


_FREXP = register("frexp", _frexp_forward, None, n_outputs=2, saves_inputs=False,
                  infer=lambda a: (AbstractValue(a.shape, a.dtype),
                                   AbstractValue(a.shape, dt.int32)))


def frexp(input):
    """``(mantissa, exponent)`` with ``input = mantissa * 2 ** exponent`` and
    ``0.5 <= |mantissa| < 1`` (int32 exponents).

    >>> ember.frexp(ember.tensor([8.0]))
    frexp(mantissa=tensor([0.5000]), exponent=tensor([4], dtype=ember.int32))
    """
    _float_only("frexp", _tensor("frexp", input))
    return frexp_result(*apply(_FREXP, input))


def ldexp(input, other):
    """``input * 2 ** other``, elementwise (integer inputs give the default float dtype).

    >>> ember.ldexp(ember.tensor([1.0]), ember.tensor([3]))
    tensor([8.])
    """
    (a, b), _ = promote("ldexp", (input, other), FLOAT)
    return a * ew.exp2(b)


def angle(input):
    """The argument of each element: for complex numbers in (-pi, pi]; for real numbers
    ``pi`` where negative, else 0 (NaN stays NaN; integers give the default float dtype;
    the gradient of a real angle is 0).

    >>> ember.angle(ember.tensor([-2.0, 0.0, 3.0]))
    tensor([3.1416, 0.0000, 0.0000])
    """
    if ew._is_complex(input):
        from .complex_support import complex_angle
        return complex_angle(input)
    (x,), _ = promote("angle", (input,), FLOAT)
    return ew.where(x < 0, math.pi, ew.mul(x, 0.0))  # (x * 0 keeps NaN)


# building tensors from others -----------------------------------------------------------
def cartesian_prod(*tensors):
    """The Cartesian product of 1-D tensors: every combination, one per row (a single
    tensor is returned as it is).

    >>> ember.cartesian_prod(ember.tensor([1, 2]), ember.tensor([3, 4]))
    tensor([[1, 3],
            [1, 4],
            [2, 3],
            [2, 4]])
    """
    from .movement import meshgrid
    for t in tensors:
        if _tensor("cartesian_prod", t).ndim != 1:
            raise ShapeError(f"cartesian_prod: expected 1-D tensors, got shape "
                             f"{tuple(t.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    if len({t.dtype for t in tensors}) > 1:
        raise EmberTypeError("cartesian_prod: expected all tensors to have the same dtype, "
                             f"got {', '.join(t.dtype.name for t in tensors)}")
    grids = meshgrid(*tensors, indexing="ij")
    return stack([reshape(g, (-1,)) for g in grids], 1)


def combinations(input, r: int = 2, with_replacement: bool = False):
    """The length-``r`` combinations of the elements of the 1-D ``input``, one per row,
    in the order :mod:`itertools` gives (with repeats when ``with_replacement``).

    >>> ember.combinations(ember.tensor([1, 2, 3]))
    tensor([[1, 2],
            [1, 3],
            [2, 3]])
    """
    from .creation import as_tensor
    from .selection import index_select
    input = _tensor("combinations", input)
    if input.ndim != 1:
        raise ShapeError(f"combinations: expect a 1D vector, but got shape "
                         f"{tuple(input.shape)}")
    if r < 0:
        raise EmberError(f"combinations: expect a non-negative number, but got {r}")
    if r == 0:
        return index_select(input, 0, as_tensor(np.zeros(0, np.int64), device=input.device))
    pick = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    index = np.asarray(list(pick(range(input.shape[0]), r)), dtype=np.int64).reshape(-1)
    flat = index_select(input, 0, as_tensor(index, device=input.device))
    return reshape(flat, (-1, r))


def block_diag(*tensors):
    """The tensors (0-d, 1-D or 2-D) placed along the diagonal of one matrix, zeros
    elsewhere; dtypes promote.

    >>> ember.block_diag(ember.tensor([[1, 2]]), ember.tensor(3))
    tensor([[1, 2, 0],
            [0, 0, 3]])
    """
    from .creation import zeros
    from .movement import pad
    mats = []
    for t in tensors:
        t = _tensor("block_diag", t)
        if t.ndim > 2:
            raise ShapeError(f"block_diag: Input tensors must have 2 or fewer dimensions. "
                             f"Input {len(mats)} has {t.ndim} dimensions")
        mats.append(reshape(t, (1, 1)) if t.ndim == 0 else unsqueeze(t, 0) if t.ndim == 1
                    else t)
    if not mats:
        return zeros((1, 0))
    dtype = dt.result_type(*mats)
    mats = [m if m.dtype is dtype else ew.cast(m, dtype) for m in mats]
    width = sum(m.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        rows.append(pad(m, (left, width - left - m.shape[1], 0, 0)))
        left += m.shape[1]
    return cat(rows, 0)


def vander(x, N: int | None = None, increasing: bool = False):
    """The Vandermonde matrix of the 1-D ``x``: columns ``x ** (N - 1), ..., x, 1`` (the
    other way round with ``increasing``); integers give int64.

    >>> ember.vander(ember.tensor([1, 2, 3]))
    tensor([[1, 1, 1],
            [4, 2, 1],
            [9, 3, 1]])
    """
    from .creation import ones
    from .movement import flip
    from .scan import cumprod
    from .shape import expand
    x = _tensor("vander", x)
    if x.ndim != 1:
        raise ShapeError(f"vander: x must be a one-dimensional tensor, got shape "
                         f"{tuple(x.shape)}")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise EmberError(f"vander: N must be non-negative, got {n}")
    dtype = x.dtype if x.dtype.is_floating_point else dt.int64
    x = x if x.dtype is dtype else ew.cast(x, dtype)
    if n == 0:
        return reshape(x, (-1, 1))[:, :0]
    columns = [ones((x.shape[0], 1), dtype=dtype, device=x.device)]
    if n > 1:
        columns.append(expand(unsqueeze(x, 1), (x.shape[0], n - 1)))
    out = cumprod(cat(columns, 1), 1)
    return out if increasing else flip(out, (1,))
