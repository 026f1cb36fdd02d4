"""Helpers the distributions share, with ``torch.distributions.utils``'s names:
broadcasting parameters, converting between probabilities and logits, lazily computed
attributes, and packing lower triangles into vectors."""
from __future__ import annotations

import functools
import math
import numbers

import numpy as np

from .. import dtypes as dt
from ..autograd import enable_grad
from ..errors import EmberTypeError, EmberValueError
from ..ops import registry
from ..ops.activation import softmax
from ..ops.creation import arange, tensor, zeros
from ..ops.elementwise import finfo as _np_finfo
from ..ops.random import rand, randn
from ..ops.linalg_more import solve_triangular
from ..ops.shape import broadcast_shapes, broadcast_tensors
from ..tensor import Size, Tensor

__all__ = ["broadcast_all", "logits_to_probs", "clamp_probs", "probs_to_logits",
           "lazy_property", "tril_matrix_to_vec", "vec_to_tril_matrix", "euler_constant"]

euler_constant = 0.57721566490153286060  # the Euler-Mascheroni constant


def finfo(dtype: dt.DType):
    """NumPy's (or ml_dtypes') float info for an ember floating dtype: ``eps``, ``tiny``,
    ``min``, ``max`` as Python floats."""
    info = _np_finfo(dtype.np)
    return _Info(float(info.eps), float(info.tiny), float(info.min), float(info.max))


class _Info:
    __slots__ = ("eps", "tiny", "min", "max")

    def __init__(self, eps, tiny, min, max):
        self.eps, self.tiny, self.min, self.max = eps, tiny, min, max


def tracing() -> bool:
    """Whether ``ember.jit`` is capturing: tensor values cannot be read, so checks that
    read them (argument validation) are skipped."""
    return registry._trace is not None


def is_number(value) -> bool:
    """Whether ``value`` is a plain number (a parameter given as a Python or NumPy
    scalar rather than a tensor)."""
    return isinstance(value, numbers.Number)


def broadcast_all(*values) -> tuple:
    """Broadcast tensors and numbers to one shape.

    Numbers become tensors of the dtype and device of the first tensor among ``values``
    (the default dtype when there is none); the tensors are then broadcast as
    :func:`ember.broadcast_tensors` does (views, no copies).

    >>> loc, scale = broadcast_all(ember.zeros(3), 1.0)
    >>> scale
    tensor([1., 1., 1.])
    """
    if not all(isinstance(v, (Tensor, numbers.Number)) for v in values):
        raise EmberValueError("Input arguments must all be instances of Number or "
                              "ember.Tensor.")
    if not all(isinstance(v, Tensor) for v in values):
        first = next((v for v in values if isinstance(v, Tensor)), None)
        dtype = dt.get_default_dtype() if first is None else first.dtype
        device = None if first is None else first.device
        values = tuple(v if isinstance(v, Tensor) else tensor(v, dtype=dtype, device=device)
                       for v in values)
    return broadcast_tensors(*values)


def _standard_normal(shape, dtype, device) -> Tensor:
    return randn(tuple(shape), dtype=dtype, device=device)


def _uniform(shape, dtype, device) -> Tensor:
    return rand(tuple(shape), dtype=dtype, device=device)


def _sum_rightmost(value, dim: int):
    """Sum out the ``dim`` rightmost dimensions of ``value``."""
    if dim == 0:
        return value
    keep = tuple(value.shape[:value.dim() - dim])
    return value.reshape(keep + (math.prod(value.shape[value.dim() - dim:]),)).sum(-1)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """Probabilities from logits: the sigmoid of log-odds (``is_binary``), otherwise
    the softmax over the last dimension of (unnormalized) log-probabilities."""
    if is_binary:
        return logits.sigmoid()
    return softmax(logits, dim=-1)


def clamp_probs(probs: Tensor) -> Tensor:
    """``probs`` clamped to ``[eps, 1 - eps]`` (``eps`` of their dtype).

    >>> clamp_probs(ember.tensor([0.0, 0.5, 1.0], dtype=ember.float64))
    tensor([2.2204e-16, 5.0000e-01, 1.0000e+00], dtype=ember.float64)
    """
    eps = finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """Logits from probabilities (clamped away from 0 and 1 first): log-odds for
    ``is_binary``, otherwise log-probabilities."""
    clamped = clamp_probs(probs)
    if is_binary:
        return clamped.log() - (-clamped).log1p()
    return clamped.log()


class lazy_property:
    """A decorator for an attribute computed on first access (with gradients recorded)
    and then stored on the instance, replacing the descriptor."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        functools.update_wrapper(self, wrapped)

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return _lazy_property_and_property(self.wrapped)
        with enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


class _lazy_property_and_property(lazy_property, property):
    """What the class attribute of a :class:`lazy_property` looks like: a property (for
    documentation tools) that validation still recognises as lazy."""

    def __init__(self, wrapped):
        property.__init__(self, wrapped)


def _tril_mask(n: int, diag: int, device) -> Tensor:
    idx = arange(n, device=device)
    return idx < idx.reshape(-1, 1) + (diag + 1)


def tril_matrix_to_vec(mat: Tensor, diag: int = 0) -> Tensor:
    """The lower-triangular entries (on and below diagonal ``diag``) of a ``D x D``
    matrix, or a batch of them, in row order."""
    n = mat.shape[-1]
    if not tracing() and (diag < -n or diag >= n):
        raise EmberValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    return mat[..., _tril_mask(n, diag, mat.device)]


def vec_to_tril_matrix(vec: Tensor, diag: int = 0) -> Tensor:
    """The ``D x D`` lower-triangular matrix (or batch) whose entries on and below
    diagonal ``diag`` are ``vec``'s, in row order: the inverse of
    :func:`tril_matrix_to_vec`."""
    # the positive root of D**2 + (1 + 2 diag) D - |diag| (diag + 1) - 2 len = 0
    b = 1 + 2 * diag
    n = (-b + math.sqrt(b * b + 8 * vec.shape[-1] + 4 * abs(diag) * (diag + 1))) / 2
    if abs(round(n) - n) > 1e-6:
        raise EmberValueError(f"The size of last dimension is {vec.shape[-1]} which cannot "
                              "be expressed as the lower triangular part of a square D x D "
                              "matrix.")
    n = round(n)
    flat = zeros(tuple(vec.shape[:-1]) + (n * n,), dtype=vec.dtype, device=vec.device)
    positions = np.flatnonzero(np.tril(np.ones((n, n), dtype=bool), diag))
    index = tensor(positions, device=vec.device).expand(tuple(vec.shape[:-1]) +
                                                        (len(positions),))
    return flat.scatter(-1, index, vec).reshape(tuple(vec.shape[:-1]) + (n, n))


def one_hot(indices: Tensor, num_classes: int, dtype) -> Tensor:
    """``indices`` as one-hot vectors of ``dtype`` along a new last dimension; written
    with a comparison (not ``F.one_hot``, which checks the values), so ``ember.jit``
    traces it."""
    classes = arange(num_classes, device=indices.device)
    return (indices.unsqueeze(-1) == classes).to(dtype)


def solve_lower(A, B):
    """``A^-1 B`` for lower-triangular ``A`` with the batch dimensions of both made
    explicit (so a ``B`` of shape ``A.shape[:-1]`` is never read as a batch of
    vectors)."""
    batch = tuple(broadcast_shapes(tuple(A.shape[:-2]), tuple(B.shape[:-2])))
    return solve_triangular(A.expand(batch + tuple(A.shape[-2:])),
                            B.expand(batch + tuple(B.shape[-2:])), upper=False)


def as_size(shape) -> Size:
    """``shape`` (a Size, tuple, list or int-like) as an :class:`ember.Size`."""
    if isinstance(shape, Size):
        return shape
    if isinstance(shape, numbers.Integral):
        raise EmberTypeError(f"expected a sequence of ints for a shape, got the int {shape}")
    return Size(tuple(int(s) for s in shape))
