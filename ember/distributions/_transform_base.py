"""The transform machinery: the :class:`Transform` base class, inverses, composition
(:class:`ComposeTransform`), :class:`IndependentTransform` and
:class:`ReshapeTransform`. The concrete transforms are in ``transforms.py``, which
exports these names too."""
from __future__ import annotations

import operator
from functools import reduce

from ..errors import EmberValueError
from ..tensor import Size
from . import constraints
from .utils import _sum_rightmost, lazy_property

__all__ = ["Transform", "ComposeTransform", "identity_transform", "IndependentTransform",
           "ReshapeTransform"]


class Transform:
    """The base class of invertible (or at least one-sided) transforms.

    Args:
        cache_size: 0 (no cache) or 1 (remember the last ``(x, y)`` pair, so the
            inverse of a value just computed is the exact input, also where the inverse
            is not unique or not numerically stable).

    Attributes:
        domain, codomain: the :class:`Constraint` of inputs and outputs.
        bijective: whether the transform is invertible.
        sign: +1 or -1 for monotone increasing or decreasing univariate transforms.
    """
    bijective = False

    def __init__(self, cache_size: int = 0) -> None:
        if cache_size not in (0, 1):
            raise EmberValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._inv = None
        if cache_size == 1:
            self._cached_x_y = (None, None)
        super().__init__()

    @property
    def event_dim(self) -> int:
        """The number of rightmost dimensions that form one event."""
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise EmberValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self) -> "Transform":
        """The inverse transform (``t.inv(t(x)) == x``)."""
        inv = self._inv
        if inv is None:
            inv = self._inv = _InverseTransform(self)
        return inv

    @property
    def sign(self) -> int:
        """The sign of the derivative: +1 increasing, -1 decreasing (per element for a
        tensor scale)."""
        raise NotImplementedError(f"{type(self).__name__} has no sign")

    def with_cache(self, cache_size: int = 1) -> "Transform":
        """This transform with the given cache size."""
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self)}.with_cache is not implemented")

    def __eq__(self, other) -> bool:
        return self is other

    def __ne__(self, other) -> bool:
        return not self.__eq__(other)

    __hash__ = None

    def __call__(self, x):
        if self._cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = (x, y)
        return y

    def _inv_call(self, y):
        if self._cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = (x, y)
        return x

    def _call(self, x):
        raise NotImplementedError(f"{type(self).__name__} has no forward")

    def _inverse(self, y):
        raise NotImplementedError(f"{type(self).__name__} has no inverse")

    def log_abs_det_jacobian(self, x, y):
        """``log |dy/dx|`` for the pair ``(x, y = self(x))``."""
        raise NotImplementedError(f"{type(self).__name__} has no log_abs_det_jacobian")

    def __repr__(self) -> str:
        return type(self).__name__ + "()"

    def forward_shape(self, shape):
        """The output shape for an input of ``shape``."""
        return shape

    def inverse_shape(self, shape):
        """The input shape for an output of ``shape``."""
        return shape


class _InverseTransform(Transform):
    """The inverse of a transform (``t.inv``)."""

    def __init__(self, transform: Transform) -> None:
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        return self._inv.codomain

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        return self._inv.domain

    @property
    def bijective(self) -> bool:
        return self._inv.bijective

    @property
    def sign(self) -> int:
        return self._inv.sign

    @property
    def inv(self) -> Transform:
        return self._inv

    def with_cache(self, cache_size: int = 1) -> Transform:
        return self.inv.with_cache(cache_size).inv

    def __eq__(self, other) -> bool:
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._inv!r})"

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape):
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv.forward_shape(shape)


class ComposeTransform(Transform):
    """The transforms ``parts`` applied one after another.

    Args:
        parts: a list of transforms.
        cache_size: see :class:`Transform`.

    >>> t = ComposeTransform([AffineTransform(0.0, 2.0), ExpTransform()])
    >>> t(ember.tensor([0.0]))
    tensor([1.])
    """

    def __init__(self, parts: list, cache_size: int = 0) -> None:
        if cache_size:
            parts = [part.with_cache(cache_size) for part in parts]
        super().__init__(cache_size=cache_size)
        self.parts = parts

    def __eq__(self, other) -> bool:
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        """The constraint inputs satisfy."""
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        event_dim = self.parts[-1].codomain.event_dim
        for part in reversed(self.parts):
            event_dim += part.domain.event_dim - part.codomain.event_dim
            event_dim = max(event_dim, part.domain.event_dim)
        if event_dim > domain.event_dim:
            domain = constraints.independent(domain, event_dim - domain.event_dim)
        return domain

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        """The constraint outputs satisfy."""
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim += part.codomain.event_dim - part.domain.event_dim
            event_dim = max(event_dim, part.codomain.event_dim)
        if event_dim > codomain.event_dim:
            codomain = constraints.independent(codomain, event_dim - codomain.event_dim)
        return codomain

    @lazy_property
    def bijective(self) -> bool:
        return all(p.bijective for p in self.parts)

    @lazy_property
    def sign(self):
        sign = 1
        for p in self.parts:
            sign = sign * p.sign
        return sign

    @property
    def inv(self) -> Transform:
        inv = self._inv
        if inv is None:
            inv = ComposeTransform([p.inv for p in reversed(self.parts)])
            self._inv = inv
            inv._inv = self
        return inv

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return ComposeTransform(self.parts, cache_size=cache_size)

    def __call__(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return x.new_zeros(tuple(x.shape))
        xs = [x]
        for part in self.parts[:-1]:
            xs.append(part(xs[-1]))
        xs.append(y)
        terms = []
        event_dim = self.domain.event_dim
        for part, a, b in zip(self.parts, xs[:-1], xs[1:]):
            terms.append(_sum_rightmost(part.log_abs_det_jacobian(a, b),
                                        event_dim - part.domain.event_dim))
            event_dim += part.codomain.event_dim - part.domain.event_dim
        return reduce(operator.add, terms)

    def forward_shape(self, shape):
        for part in self.parts:
            shape = part.forward_shape(shape)
        return shape

    def inverse_shape(self, shape):
        for part in reversed(self.parts):
            shape = part.inverse_shape(shape)
        return shape

    def __repr__(self) -> str:
        return type(self).__name__ + "(\n    " + \
            ",\n    ".join(repr(p) for p in self.parts) + "\n)"


identity_transform = ComposeTransform([])


class IndependentTransform(Transform):
    """``base_transform`` with ``reinterpreted_batch_ndims`` more dimensions treated as
    part of an event (its log-det-Jacobian is summed over them).

    Args:
        base_transform: the transform to wrap.
        reinterpreted_batch_ndims: how many batch dimensions join the event.
        cache_size: see :class:`Transform`.
    """

    def __init__(self, base_transform: Transform, reinterpreted_batch_ndims: int,
                 cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims,
                                    cache_size=cache_size)

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        """The constraint inputs satisfy."""
        return constraints.independent(self.base_transform.domain,
                                       self.reinterpreted_batch_ndims)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        """The constraint outputs satisfy."""
        return constraints.independent(self.base_transform.codomain,
                                       self.reinterpreted_batch_ndims)

    @property
    def bijective(self) -> bool:
        return self.base_transform.bijective

    @property
    def sign(self):
        """The sign of the derivative: +1 increasing, -1 decreasing (per element for a
        tensor scale)."""
        return self.base_transform.sign

    def _call(self, x):
        if x.dim() < self.domain.event_dim:
            raise EmberValueError("Too few dimensions on input")
        return self.base_transform(x)

    def _inverse(self, y):
        if y.dim() < self.codomain.event_dim:
            raise EmberValueError("Too few dimensions on input")
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        result = self.base_transform.log_abs_det_jacobian(x, y)
        return _sum_rightmost(result, self.reinterpreted_batch_ndims)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_transform!r}, " \
               f"{self.reinterpreted_batch_ndims})"

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)


class ReshapeTransform(Transform):
    """Reshape the rightmost ``in_shape`` dimensions to ``out_shape`` (Jacobian 1)."""
    bijective = True

    def __init__(self, in_shape, out_shape, cache_size: int = 0) -> None:
        self.in_shape, self.out_shape = Size(in_shape), Size(out_shape)
        if self.in_shape.numel() != self.out_shape.numel():
            raise EmberValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size=cache_size)

    @constraints.dependent_property
    def domain(self):
        """The constraint inputs satisfy."""
        return constraints.independent(constraints.real, len(self.in_shape))

    @constraints.dependent_property
    def codomain(self):
        """The constraint outputs satisfy."""
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return ReshapeTransform(self.in_shape, self.out_shape, cache_size=cache_size)

    def _call(self, x):
        batch = tuple(x.shape[:x.dim() - len(self.in_shape)])
        return x.reshape(batch + tuple(self.out_shape))

    def _inverse(self, y):
        batch = tuple(y.shape[:y.dim() - len(self.out_shape)])
        return y.reshape(batch + tuple(self.in_shape))

    def log_abs_det_jacobian(self, x, y):
        return x.new_zeros(tuple(x.shape[:x.dim() - len(self.in_shape)]))

    def _reshaped(self, shape, have, want):
        if len(shape) < len(have):
            raise EmberValueError("Too few dimensions on input")
        cut = len(shape) - len(have)
        if tuple(shape[cut:]) != tuple(have):
            raise EmberValueError(f"Shape mismatch: expected {shape[cut:]} but got {have}")
        return Size(tuple(shape[:cut]) + tuple(want))

    def forward_shape(self, shape):
        return self._reshaped(shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return self._reshaped(shape, self.out_shape, self.in_shape)
