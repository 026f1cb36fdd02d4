"""Transforms built from others: :class:`CatTransform` and :class:`StackTransform` (one
transform per slice along a dimension) and :class:`CumulativeDistributionTransform` (a
distribution's CDF). ``transforms.py`` exports them."""
from __future__ import annotations

from ..errors import EmberValueError
from ..ops.shape import cat, stack
from . import constraints
from ._transform_base import Transform
from .utils import _sum_rightmost

__all__ = ["CatTransform", "StackTransform", "CumulativeDistributionTransform"]


def _check_transforms(tseq):
    if not all(isinstance(t, Transform) for t in tseq):
        raise EmberValueError("All elements of tseq must be Transform instances")


def _check_size(var: str, z, dim: int, expected: int, what: str, holder: str = "tensor"):
    """``z`` (called ``var``) has dimension ``dim`` of size ``expected`` (``what`` names
    that size); ``holder`` names ``z`` in the message about ``dim``."""
    if not -z.dim() <= dim < z.dim():
        raise EmberValueError(f"dim {dim} out of range for {holder} with {z.dim()} "
                              "dimensions")
    if z.shape[dim] != expected:
        raise EmberValueError(f"{var}.size({dim}) = {z.shape[dim]} must equal {what} "
                              f"{expected}")


class CatTransform(Transform):
    """Apply ``tseq[i]`` to the ``i``-th slice (of length ``lengths[i]``) along ``dim``, as
    :func:`ember.cat` would join the slices.

    Args:
        tseq: the transforms, one per slice.
        dim: the dimension the slices lie along.
        lengths: the slices' lengths (default 1 each).
        cache_size: see :class:`Transform`.

    >>> t = CatTransform([ExpTransform(), identity_transform], dim=0, lengths=[2, 2])
    >>> t(ember.zeros(4))
    tensor([1., 1., 0., 0.])
    """

    def __init__(self, tseq, dim: int = 0, lengths=None, cache_size: int = 0) -> None:
        _check_transforms(tseq)
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.lengths = [1] * len(self.transforms) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise EmberValueError(f"lengths ({len(self.lengths)}) must match transforms "
                                  f"({len(self.transforms)})")
        self.dim = dim

    @property
    def event_dim(self) -> int:
        """The largest event dimension of the parts."""
        return max(t.event_dim for t in self.transforms)

    @property
    def length(self) -> int:
        """The total length along :attr:`dim`."""
        return sum(self.lengths)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _slices(self, z):
        start = 0
        for length in self.lengths:
            yield z.narrow(self.dim, start, length)
            start = start + length

    def _call(self, x):
        _check_size("x", x, self.dim, self.length, "length")
        return cat([t(s) for t, s in zip(self.transforms, self._slices(x))], self.dim)

    def _inverse(self, y):
        _check_size("y", y, self.dim, self.length, "length")
        return cat([t.inv(s) for t, s in zip(self.transforms, self._slices(y))], self.dim)

    def log_abs_det_jacobian(self, x, y):
        _check_size("x", x, self.dim, self.length, "length", "x")
        _check_size("y", y, self.dim, self.length, "length", "y")
        terms = []
        for t, xs, ys in zip(self.transforms, self._slices(x), self._slices(y)):
            term = t.log_abs_det_jacobian(xs, ys)
            if t.event_dim < self.event_dim:
                term = _sum_rightmost(term, self.event_dim - t.event_dim)
            terms.append(term)
        # dim inside the batch: the pieces line up along it; inside the event: they add
        dim = self.dim - x.dim() if self.dim >= 0 else self.dim
        dim = dim + self.event_dim
        if dim < 0:
            return cat(terms, dim)
        return sum(terms)

    @property
    def bijective(self) -> bool:
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        """The constraint inputs satisfy."""
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @constraints.dependent_property
    def codomain(self):
        """The constraint outputs satisfy."""
        return constraints.cat([t.codomain for t in self.transforms], self.dim,
                               self.lengths)


class StackTransform(Transform):
    """Apply ``tseq[i]`` to the ``i``-th slice (index ``i``) along ``dim``, as
    :func:`ember.stack` would join the slices.

    Args:
        tseq: the transforms, one per index of ``dim``.
        dim: the dimension to slice.
        cache_size: see :class:`Transform`.

    >>> t = StackTransform([ExpTransform(), identity_transform], dim=1)
    >>> t(ember.zeros(3, 2))[0]
    tensor([1., 0.])
    """

    def __init__(self, tseq, dim: int = 0, cache_size: int = 0) -> None:
        _check_transforms(tseq)
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.dim = dim

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return StackTransform(self.transforms, self.dim, cache_size)

    def _slice(self, z):
        return [z.select(self.dim, i) for i in range(z.shape[self.dim])]

    def _call(self, x):
        _check_size("x", x, self.dim, len(self.transforms), "len(transforms)")
        return stack([t(s) for s, t in zip(self._slice(x), self.transforms)], self.dim)

    def _inverse(self, y):
        _check_size("y", y, self.dim, len(self.transforms), "len(transforms)")
        return stack([t.inv(s) for s, t in zip(self._slice(y), self.transforms)], self.dim)

    def log_abs_det_jacobian(self, x, y):
        _check_size("x", x, self.dim, len(self.transforms), "len(transforms)", "x")
        _check_size("y", y, self.dim, len(self.transforms), "len(transforms)", "y")
        return stack([t.log_abs_det_jacobian(xs, ys) for xs, ys, t in
                      zip(self._slice(x), self._slice(y), self.transforms)], self.dim)

    @property
    def bijective(self) -> bool:
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        """The constraint inputs satisfy."""
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @constraints.dependent_property
    def codomain(self):
        """The constraint outputs satisfy."""
        return constraints.stack([t.codomain for t in self.transforms], self.dim)


class CumulativeDistributionTransform(Transform):
    """``y = distribution.cdf(x)``: maps the distribution's support onto the unit
    interval; its inverse is ``icdf`` and its log-det-Jacobian ``log_prob``.

    Args:
        distribution: a univariate distribution with ``cdf`` (and ``icdf`` for the
            inverse).
        cache_size: see :class:`Transform`.

    >>> t = CumulativeDistributionTransform(Normal(0.0, 1.0))
    >>> t(ember.tensor([0.0]))
    tensor([0.5000])
    """
    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self):
        """The distribution's support."""
        return self.distribution.support

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return CumulativeDistributionTransform(self.distribution, cache_size=cache_size)
