"""The base class of every distribution, as ``torch.distributions.Distribution``."""
from __future__ import annotations

import warnings

from ..autograd import no_grad
from ..errors import EmberValueError
from ..tensor import Size, Tensor
from . import constraints
from .utils import as_size, lazy_property, tracing

__all__ = ["Distribution"]


class Distribution:
    """The abstract base class of probability distributions.

    A distribution holds parameters of shape ``batch_shape`` (a batch of independent
    distributions) whose samples have shape ``event_shape`` each; ``sample(sample_shape)``
    returns ``sample_shape + batch_shape + event_shape``.

    Args:
        batch_shape: the shape over which parameters are batched.
        event_shape: the shape of a single sample (without batching).
        validate_args: check parameters (at construction) and values (in
            ``log_prob``, ``cdf``) against :attr:`arg_constraints` and :attr:`support`,
            raising :class:`ember.EmberValueError`. None takes the default (on, unless
            Python runs with ``-O``; see :meth:`set_default_validate_args`). While
            ``ember.jit`` traces, the checks (which read tensor values) are skipped.

    >>> d = ember.distributions.Normal(ember.zeros(3), 1.0)
    >>> d.batch_shape, d.sample((2,)).shape
    (ember.Size([3]), ember.Size([2, 3]))
    """
    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument validation on or off for distributions made from now on without
        ``validate_args`` (the default follows Python's ``assert``: on unless ``-O``).

        >>> ember.distributions.Distribution.set_default_validate_args(False)
        """
        if value not in (True, False):
            raise EmberValueError(f"set_default_validate_args: expected True or False, got "
                                  f"{value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape=Size(), event_shape=Size(),
                 validate_args: bool | None = None) -> None:
        self._batch_shape = as_size(batch_shape)
        self._event_shape = as_size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args and not tracing():
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warnings.warn(f"{self.__class__} does not define `arg_constraints`. Please "
                              "set `arg_constraints = {}` or initialize the distribution "
                              "with `validate_args=False` to turn off validation.",
                              stacklevel=2)
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue  # cannot be checked
                if param not in self.__dict__ and \
                        isinstance(getattr(type(self), param), lazy_property):
                    continue  # not constructed (the other of probs/logits)
                value = getattr(self, param)
                if not bool(constraint.check(value).all()):
                    raise EmberValueError(
                        f"Expected parameter {param} ({type(value).__name__} of shape "
                        f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                        f"constraint {constraint!r}, but found invalid values:\n{value}")
        super().__init__()

    def expand(self, batch_shape, _instance=None):
        """A new distribution with the batch dimensions expanded to ``batch_shape``
        (parameters are expanded views; nothing is re-validated).

        Args:
            batch_shape: the new batch shape; sizes of 1 may grow, new dims go in front.
            _instance: an instance made by a subclass that overrides ``expand``.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement expand")

    @property
    def batch_shape(self) -> Size:
        """The shape over which parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        """The shape of a single sample (without batching)."""
        return self._event_shape

    @property
    def arg_constraints(self) -> dict:
        """Each tensor argument's name and the :class:`Constraint` it must satisfy."""
        raise NotImplementedError

    @property
    def support(self):
        """The :class:`Constraint` samples lie in."""
        raise NotImplementedError

    @property
    def mean(self) -> Tensor:
        """The mean, of shape ``batch_shape + event_shape``."""
        raise NotImplementedError(f"{self.__class__} does not implement mean")

    @property
    def mode(self) -> Tensor:
        """The mode, of shape ``batch_shape + event_shape``."""
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self) -> Tensor:
        """The variance, of shape ``batch_shape + event_shape``."""
        raise NotImplementedError(f"{self.__class__} does not implement variance")

    @property
    def stddev(self) -> Tensor:
        """The standard deviation: the square root of :attr:`variance`."""
        return self.variance.sqrt()

    def sample(self, sample_shape=Size()) -> Tensor:
        """A sample of shape ``sample_shape + batch_shape + event_shape``, with no
        gradient."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()) -> Tensor:
        """A reparameterized sample (gradients flow to the parameters) of shape
        ``sample_shape + batch_shape + event_shape``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement rsample "
                                  f"(has_rsample is {self.has_rsample})")

    def sample_n(self, n: int) -> Tensor:
        """``n`` samples (deprecated: use ``sample((n,))``)."""
        warnings.warn("`sample_n(n)` will be deprecated. Use `sample((n,))` instead.",
                      FutureWarning, stacklevel=2)
        return self.sample(Size((n,)))

    def log_prob(self, value: Tensor) -> Tensor:
        """The log of the density (or mass) at ``value``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement log_prob")

    def cdf(self, value: Tensor) -> Tensor:
        """The cumulative distribution function at ``value``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement cdf")

    def icdf(self, value: Tensor) -> Tensor:
        """The inverse of the cumulative distribution function at ``value``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement icdf")

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """All values of a discrete distribution, along dimension 0: shape
        ``(cardinality,) + batch_shape + event_shape`` (with ``expand=False``, size-1
        batch dimensions)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement "
                                  "enumerate_support")

    def entropy(self) -> Tensor:
        """The entropy, of shape ``batch_shape``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement entropy")

    def perplexity(self) -> Tensor:
        """``exp(entropy)``, of shape ``batch_shape``."""
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=Size()) -> Size:
        """``sample_shape + batch_shape + event_shape``."""
        return as_size(sample_shape) + self._batch_shape + self._event_shape

    def _validate_sample(self, value) -> None:
        """Check ``value`` for ``log_prob``/``cdf``: a tensor whose trailing dimensions
        match ``event_shape`` and broadcast with ``batch_shape``, inside :attr:`support`."""
        if not isinstance(value, Tensor):
            raise EmberValueError("The value argument to log_prob must be a Tensor")
        start = value.dim() - len(self._event_shape)
        if tuple(value.shape[start:]) != tuple(self._event_shape):
            raise EmberValueError(f"The right-most size of value must match event_shape: "
                                  f"{value.shape} vs {self._event_shape}.")
        actual, expected = value.shape, self._batch_shape + self._event_shape
        for i, j in zip(reversed(actual), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise EmberValueError(f"Value is not broadcastable with batch_shape+"
                                      f"event_shape: {actual} vs {expected}.")
        if tracing():
            return
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{self.__class__} does not define `support` to enable sample "
                          "validation. Please initialize the distribution with "
                          "`validate_args=False` to turn off validation.", stacklevel=2)
            return
        if not bool(support.check(value).all()):
            raise EmberValueError(
                f"Expected value argument ({type(value).__name__} of shape "
                f"{tuple(value.shape)}) to be within the support ({support!r}) of the "
                f"distribution {self!r}, but found invalid values:\n{value}")

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(
                f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a "
                "custom __init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self) -> str:
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(
            f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}"
            for p in names)
        return f"{self.__class__.__name__}({args})"
