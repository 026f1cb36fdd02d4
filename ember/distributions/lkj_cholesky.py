"""The LKJ distribution over Cholesky factors of correlation matrices (Lewandowski,
Kurowicka and Joe, "Generating random correlation matrices based on vines and extended
onion method", 2009), sampled by the onion method with ember ops (so ``ember.jit``
traces it)."""
from __future__ import annotations

import math

from ..errors import EmberValueError
from ..ops.creation import arange
from ..ops.elementwise import where
from ..ops.shape import cat
from ..ops.special_fns import lgamma, mvlgamma
from ..tensor import Size
from . import constraints
from .distribution import Distribution
from .gamma import Beta
from .utils import _standard_normal, broadcast_all, finfo

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    """The LKJ distribution of lower Cholesky factors ``L`` of ``dim x dim`` correlation
    matrices: ``L L^T`` has density proportional to ``det(L L^T)^(concentration - 1)``
    (uniform over correlation matrices at ``concentration = 1``).

    Args:
        dim: the size of the matrices, at least 2.
        concentration: eta, positive (default 1).
        validate_args: see :class:`Distribution`.

    >>> LKJCholesky(3, 0.5).sample().shape
    ember.Size([3, 3])
    """
    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim: int, concentration=1.0, validate_args: bool | None = None) -> None:
        if dim < 2:
            raise EmberValueError(f"Expected dim to be an integer greater than or equal to 2. "
                                  f"Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = self.concentration.shape
        event_shape = Size((dim, dim))
        # The onion method (section 3.2): row k >= 1 puts squared length
        # y_k ~ Beta(k / 2, eta + (D - 2) / 2 - (k - 1) / 2) off the diagonal. (PyTorch
        # 2.13 draws Beta(k - 1/2, ...), which is not the LKJ distribution for D > 2:
        # its correlations are not exchangeable and disagree with log_prob.)
        marginal_conc = self.concentration + 0.5 * (self.dim - 2)
        offset = arange(self.dim - 1, dtype=self.concentration.dtype,
                        device=self.concentration.device)
        offset = cat([offset.new_zeros((1,)), offset])
        beta_conc1 = 0.5 * offset + 0.5
        beta_conc0 = marginal_conc.unsqueeze(-1) - 0.5 * offset
        self._beta = Beta(beta_conc1, beta_conc0)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = Size(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(tuple(batch_shape))
        new._beta = self._beta.expand(batch_shape + (self.dim,))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=Size()):
        # Each row i is sqrt(y_i) times a uniform direction in its first i coordinates,
        # y_i ~ Beta; the diagonal completes the row to unit length.
        y = self._beta.sample(sample_shape).unsqueeze(-1)
        u_normal = _standard_normal(self._extended_shape(sample_shape), dtype=y.dtype,
                                    device=y.device).tril(-1)
        u_hypersphere = u_normal / u_normal.norm(dim=-1, keepdim=True)
        # the first row has no coordinates before the diagonal (0 / 0 above)
        first_row = (arange(self.dim, device=y.device) == 0).unsqueeze(-1)
        u_hypersphere = where(first_row, 0.0, u_hypersphere)
        w = y.sqrt() * u_hypersphere
        diag_elems = (1 - (w ** 2).sum(-1)).clamp(min=finfo(w.dtype).tiny).sqrt()
        return w + diag_elems.diag_embed()

    def log_prob(self, value):
        # The density of L L^T is proportional to det ** (eta - 1) = prod L_ii^(2 eta - 2)
        # and the Jacobian from L to L L^T is prod L_ii^(D - i): the density of L is
        # prod L_ii^(2 eta - 2 + D - i)
        if self._validate_args:
            self._validate_sample(value)
        diag_elems = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = arange(2, self.dim + 1, device=self.concentration.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized_log_pdf = (order * diag_elems.log()).sum(-1)
        # the normalizing constant (page 1999 of the paper)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = lgamma(alpha) * dm1
        numerator = mvlgamma(alpha - 0.5, dm1)
        # the paper's pi term is D (D - 1) / 4 log(pi), mvlgamma's (D - 1)(D - 2) / 4
        # log(pi): the difference is (D - 1) / 2 log(pi)
        pi_constant = 0.5 * dm1 * math.log(math.pi)
        return unnormalized_log_pdf - (pi_constant + numerator - denominator)
