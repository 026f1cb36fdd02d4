"""Invertible transforms of random variables, with ``torch.distributions.transforms``'
names: a :class:`Transform` maps ``x`` to ``y``, knows its inverse (``.inv``) and the
log absolute determinant of its Jacobian, which :class:`TransformedDistribution` uses to
turn a base density into the density of ``y``. The base class, composition and the
shape transforms are in ``_transform_base.py``.

>>> t = ExpTransform()
>>> t(ember.tensor([0.0])), t.inv(ember.tensor([1.0]))
(tensor([1.]), tensor([0.]))
"""
from __future__ import annotations

import math
import numbers

from ..errors import EmberValueError
from ..ops.activation import logsigmoid, softplus
from ..ops.creation import full_like, ones
from ..ops.elementwise_composite import atanh
from ..ops.shape import broadcast_shapes, cat
from ..tensor import Size
from . import constraints
from ._transform_base import (ComposeTransform, IndependentTransform, ReshapeTransform,
                              Transform, identity_transform)
from .utils import _sum_rightmost, broadcast_all, finfo, lazy_property

__all__ = ["Transform", "ComposeTransform", "identity_transform", "IndependentTransform",
           "ReshapeTransform", "ExpTransform", "PowerTransform", "SigmoidTransform",
           "SoftplusTransform", "TanhTransform", "AbsTransform", "AffineTransform",
           "SoftmaxTransform", "StickBreakingTransform", "LowerCholeskyTransform"]


class ExpTransform(Transform):
    """``y = exp(x)``."""
    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other) -> bool:
        return isinstance(other, ExpTransform)

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class PowerTransform(Transform):
    """``y = x ** exponent`` on the positive reals."""
    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        (self.exponent,) = broadcast_all(exponent)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return PowerTransform(self.exponent, cache_size=cache_size)

    @lazy_property
    def sign(self):
        return self.exponent.sign()

    def __eq__(self, other) -> bool:
        return isinstance(other, PowerTransform) and bool((self.exponent == other.exponent).all())

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape):
        return broadcast_shapes(shape, tuple(self.exponent.shape))

    def inverse_shape(self, shape):
        return broadcast_shapes(shape, tuple(self.exponent.shape))


def _clipped_sigmoid(x):
    info = finfo(x.dtype)
    return x.sigmoid().clamp(min=info.tiny, max=1.0 - info.eps)


class SigmoidTransform(Transform):
    """``y = 1 / (1 + exp(-x))`` (kept inside (0, 1))."""
    domain = constraints.real
    codomain = constraints.unit_interval
    bijective = True
    sign = +1

    def __eq__(self, other) -> bool:
        return isinstance(other, SigmoidTransform)

    def _call(self, x):
        return _clipped_sigmoid(x)

    def _inverse(self, y):
        info = finfo(y.dtype)
        y = y.clamp(min=info.tiny, max=1.0 - info.eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -softplus(-x) - softplus(x)


class SoftplusTransform(Transform):
    """``y = log(1 + exp(x))``."""
    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other) -> bool:
        return isinstance(other, SoftplusTransform)

    def _call(self, x):
        return softplus(x)

    def _inverse(self, y):
        return (-(-y).expm1()).log() + y

    def log_abs_det_jacobian(self, x, y):
        return -softplus(-x)


class TanhTransform(Transform):
    """``y = tanh(x)``; its log-det-Jacobian ``2 (log 2 - x - softplus(-2x))`` is
    stable for large ``|x|``. Use ``cache_size=1`` when inverting values near +-1."""
    domain = constraints.real
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = +1

    def __eq__(self, other) -> bool:
        return isinstance(other, TanhTransform)

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return atanh(y)

    def log_abs_det_jacobian(self, x, y):
        return 2.0 * (math.log(2.0) - x - softplus(-2.0 * x))


class AbsTransform(Transform):
    """``y = |x|`` (not invertible; the inverse returns ``y``)."""
    domain = constraints.real
    codomain = constraints.positive

    def __eq__(self, other) -> bool:
        return isinstance(other, AbsTransform)

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class AffineTransform(Transform):
    """``y = loc + scale * x``, over events of ``event_dim`` dimensions.

    Args:
        loc: a tensor or number.
        scale: a tensor or number (non-zero).
        event_dim: the number of rightmost dimensions that form an event.
        cache_size: see :class:`Transform`.
    """
    bijective = True

    def __init__(self, loc, scale, event_dim: int = 0, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.loc = loc
        self.scale = scale
        self._event_dim = event_dim

    @property
    def event_dim(self) -> int:
        """The number of rightmost dimensions that form one event."""
        return self._event_dim

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        """The constraint inputs satisfy."""
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        """The constraint outputs satisfy."""
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self.event_dim, cache_size=cache_size)

    def __eq__(self, other) -> bool:
        if not isinstance(other, AffineTransform):
            return False
        for mine, theirs in ((self.loc, other.loc), (self.scale, other.scale)):
            if isinstance(mine, numbers.Number) and isinstance(theirs, numbers.Number):
                if mine != theirs:
                    return False
            elif not bool((mine == theirs).all()):
                return False
        return True

    @property
    def sign(self):
        """The sign of the derivative: +1 increasing, -1 decreasing (per element for a
        tensor scale)."""
        if isinstance(self.scale, numbers.Number):
            return 1 if float(self.scale) > 0 else -1 if float(self.scale) < 0 else 0
        return self.scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        shape = tuple(x.shape)
        if isinstance(self.scale, numbers.Number):
            result = full_like(x, math.log(abs(self.scale)))
        else:
            result = self.scale.abs().log()
        if self.event_dim:
            result = _sum_rightmost(result, self.event_dim)
            shape = shape[:-self.event_dim]
        return result.expand(shape)

    def forward_shape(self, shape):
        return broadcast_shapes(shape, tuple(getattr(self.loc, "shape", ())),
                                tuple(getattr(self.scale, "shape", ())))

    inverse_shape = forward_shape


class SoftmaxTransform(Transform):
    """``y = softmax(x)`` over the last dimension (not bijective; the inverse is
    ``log y``)."""
    domain = constraints.real_vector
    codomain = constraints.simplex

    def __eq__(self, other) -> bool:
        return isinstance(other, SoftmaxTransform)

    def _call(self, x):
        probs = (x - x.amax(-1, keepdim=True)).exp()
        return probs / probs.sum(-1, keepdim=True)

    def _inverse(self, y):
        return y.log()

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise EmberValueError("Too few dimensions on input")
        return shape

    inverse_shape = forward_shape


def _pad_one(x, where: str):
    one = ones(tuple(x.shape[:-1]) + (1,), dtype=x.dtype, device=x.device)
    return cat([x, one] if where == "right" else [one, x], -1)


class StickBreakingTransform(Transform):
    """A bijection from unconstrained vectors of length K - 1 to the K-simplex, by
    stick breaking (fractions ``sigmoid(x_i - log(K - 1 - i))`` of what is left)."""
    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    def __eq__(self, other) -> bool:
        return isinstance(other, StickBreakingTransform)

    @staticmethod
    def _offset(n, like):
        return n + 1 - like.new_ones((n,)).cumsum(-1)

    def _call(self, x):
        offset = self._offset(x.shape[-1], x)
        z = _clipped_sigmoid(x - offset.log())
        z_cumprod = (1 - z).cumprod(-1)
        return _pad_one(z, "right") * _pad_one(z_cumprod, "left")

    def _inverse(self, y):
        y_crop = y[..., :-1]
        offset = y.shape[-1] - y.new_ones((y_crop.shape[-1],)).cumsum(-1)
        sf = (1 - y_crop.cumsum(-1)).clamp(min=finfo(y.dtype).tiny)
        return y_crop.log() - sf.log() + offset.log()

    def log_abs_det_jacobian(self, x, y):
        offset = self._offset(x.shape[-1], x)
        x = x - offset.log()
        return (-x + logsigmoid(x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise EmberValueError("Too few dimensions on input")
        return Size(tuple(shape[:-1]) + (shape[-1] + 1,))

    def inverse_shape(self, shape):
        if len(shape) < 1:
            raise EmberValueError("Too few dimensions on input")
        return Size(tuple(shape[:-1]) + (shape[-1] - 1,))


class LowerCholeskyTransform(Transform):
    """Unconstrained square matrices to lower-triangular ones with a positive diagonal:
    the strictly lower part kept, the diagonal exponentiated."""
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def __eq__(self, other) -> bool:
        return isinstance(other, LowerCholeskyTransform)

    def _call(self, x):
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y):
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


# Transforms built on the ones above, in their own files (imported last: the matrix
# transforms use LowerCholeskyTransform)
from ._transform_functors import (CatTransform, CumulativeDistributionTransform,  # noqa: E402
                                  StackTransform)
from ._transform_matrix import CorrCholeskyTransform, PositiveDefiniteTransform  # noqa: E402

__all__ += ["CatTransform", "StackTransform", "CumulativeDistributionTransform",
            "CorrCholeskyTransform", "PositiveDefiniteTransform"]
