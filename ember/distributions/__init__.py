"""``ember.distributions``: probability distributions with ``torch.distributions``'
names, arguments and shapes, written with ember ops.

``log_prob``, ``cdf``, ``entropy`` and ``rsample`` are differentiable in the parameters
(Gamma, Beta, Dirichlet, Chi2 and StudentT samples through implicit reparameterization,
as in PyTorch) and can run under ``ember.jit``, where argument validation (which reads
values) is skipped. Sampling draws from ember's generator, so ``ember.manual_seed``
makes it repeat; Poisson and Binomial samples are drawn on the host and cannot be traced.

>>> import ember
>>> from ember.distributions import Normal, kl_divergence
>>> p = Normal(ember.zeros(3), ember.ones(3))
>>> p.log_prob(ember.zeros(3)).shape
ember.Size([3])
>>> kl_divergence(p, Normal(ember.ones(3), ember.ones(3)))
tensor([0.5000, 0.5000, 0.5000])
"""
from . import constraints, transforms
from .categorical import Categorical, Multinomial, OneHotCategorical, \
    OneHotCategoricalStraightThrough
from .continuous import Cauchy, Exponential, Laplace, Normal, Uniform
from .continuous_bernoulli import ContinuousBernoulli
from .discrete import Bernoulli, Binomial, Geometric, Poisson
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .gamma import Beta, Chi2, Dirichlet, Gamma, StudentT
from .independent import Independent, MixtureSameFamily
from .kl import kl_divergence, register_kl
from . import kl_cross  # noqa: F401  (registers the cross-family divergences)
from . import kl_pareto  # noqa: F401  (registers the divergences with a Pareto)
from .multivariate_normal import LowRankMultivariateNormal, MultivariateNormal
from .relaxed import (ExpRelaxedCategorical, LogitRelaxedBernoulli, RelaxedBernoulli,
                      RelaxedOneHotCategorical)
from .transformed import Gumbel, HalfCauchy, HalfNormal, LogNormal, TransformedDistribution
from .transforms import (AbsTransform, AffineTransform, ComposeTransform, ExpTransform,
                         IndependentTransform, LowerCholeskyTransform, PowerTransform,
                         ReshapeTransform, SigmoidTransform, SoftmaxTransform,
                         SoftplusTransform, StickBreakingTransform, TanhTransform, Transform,
                         identity_transform)
from .transforms import (CatTransform, CorrCholeskyTransform, CumulativeDistributionTransform,
                         PositiveDefiniteTransform, StackTransform)
from .constraint_registry import biject_to, transform_to
from .gamma_mixtures import FisherSnedecor, NegativeBinomial
from .generalized_pareto import GeneralizedPareto
from .lkj_cholesky import LKJCholesky
from .transformed_families import InverseGamma, Kumaraswamy, LogisticNormal, Pareto, Weibull
from .von_mises import VonMises
from .wishart import Wishart

__all__ = ["Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2",
           "ContinuousBernoulli", "Dirichlet", "Distribution", "Exponential",
           "ExponentialFamily", "ExpRelaxedCategorical", "Gamma", "Geometric", "Gumbel",
           "HalfCauchy", "HalfNormal", "Independent", "Laplace", "LogitRelaxedBernoulli",
           "LogNormal", "LowRankMultivariateNormal", "MixtureSameFamily", "Multinomial",
           "MultivariateNormal", "Normal", "OneHotCategorical",
           "OneHotCategoricalStraightThrough", "Poisson", "RelaxedBernoulli",
           "RelaxedOneHotCategorical", "StudentT", "TransformedDistribution", "Uniform",
           "constraints", "kl_divergence", "register_kl", "transforms",
           "AbsTransform", "AffineTransform", "ComposeTransform", "ExpTransform",
           "IndependentTransform", "LowerCholeskyTransform", "PowerTransform",
           "ReshapeTransform", "SigmoidTransform", "SoftmaxTransform", "SoftplusTransform",
           "StickBreakingTransform", "TanhTransform", "Transform", "identity_transform",
           "FisherSnedecor", "GeneralizedPareto", "InverseGamma", "Kumaraswamy",
           "LKJCholesky", "LogisticNormal", "NegativeBinomial", "Pareto", "VonMises",
           "Weibull", "Wishart", "CatTransform", "CorrCholeskyTransform",
           "CumulativeDistributionTransform", "PositiveDefiniteTransform", "StackTransform",
           "biject_to", "transform_to"]
