"""``ExponentialFamily``: distributions with density ``exp(<t(x), theta> - F(theta) +
k(x))``, whose entropy (and KL divergence between two of one family) follows from the
log normalizer ``F`` by automatic differentiation (a Bregman divergence)."""
from __future__ import annotations

from ..autograd import enable_grad, grad
from .distribution import Distribution
from .utils import _sum_rightmost

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """The base class of exponential-family distributions.

    A subclass gives its natural parameters (:attr:`_natural_params`), the log
    normalizer (:meth:`_log_normalizer`) and the expected carrier measure
    (:attr:`_mean_carrier_measure`); :meth:`entropy` then needs nothing else.
    """

    @property
    def _natural_params(self) -> tuple:
        """The natural parameters theta, a tuple of tensors."""
        raise NotImplementedError(f"{type(self).__name__} does not give _natural_params")

    def _log_normalizer(self, *natural_params):
        """The log normalizer F(theta)."""
        raise NotImplementedError(f"{type(self).__name__} does not give _log_normalizer")

    @property
    def _mean_carrier_measure(self) -> float:
        """E[k(x)], the expected carrier measure."""
        raise NotImplementedError(f"{type(self).__name__} does not give "
                                  "_mean_carrier_measure")

    def entropy(self):
        """``F(theta) - <theta, grad F(theta)> - E[k(x)]``, by autograd on ``F``."""
        result = -self._mean_carrier_measure
        params = [p.detach().requires_grad_() for p in self._natural_params]
        with enable_grad():
            log_norm = self._log_normalizer(*params)
            grads = grad(log_norm.sum(), params, create_graph=True)
        result = result + log_norm
        for p, g in zip(params, grads):
            term = p * g
            result = result - _sum_rightmost(term, term.dim() - len(self._batch_shape))
        return result
