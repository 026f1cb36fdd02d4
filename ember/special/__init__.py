"""``ember.special``: special functions with ``torch.special``'s names.

>>> ember.special.expit(ember.tensor([0.0]))
tensor([0.5000])
"""
from ..ops.elementwise import (erf, erfc, exp2, expm1, log1p, logit, round,  # noqa: F401
                               sigmoid as expit, xlogy)
from ..ops.elementwise_composite import sinc  # noqa: F401
from ..ops.reduce import logsumexp  # noqa: F401
from ..ops.special_fns import (digamma, entr, erfinv, i0, i1, lgamma as gammaln,  # noqa: F401
                               multigammaln, ndtr, ndtri, polygamma, xlog1py, zeta)
from ..ops.special_fns import digamma as psi  # noqa: F401
from ..ops.igamma import igamma as gammainc, igammac as gammaincc  # noqa: F401
from .airy import airy_ai  # noqa: F401
from .bessel import *  # noqa: F401,F403
from .bessel import __all__ as _bessel_names
from .error_functions import erfcx, log_ndtr  # noqa: F401
from .polynomials import *  # noqa: F401,F403
from .polynomials import __all__ as _polynomial_names

__all__ = ["digamma", "entr", "erf", "erfc", "erfinv", "exp2", "expit", "expm1", "gammainc",
           "gammaincc", "gammaln",
           "i0", "i1", "log1p", "log_softmax", "logit", "logsumexp", "multigammaln", "ndtr",
           "ndtri", "polygamma", "psi", "round", "sinc", "softmax", "xlog1py", "xlogy", "zeta",
           "airy_ai", "erfcx", "log_ndtr", *_bessel_names, *_polynomial_names]


def softmax(input, dim: int, *, dtype=None):
    """``exp(input) / sum(exp(input), dim)`` (:func:`ember.nn.functional.softmax`)."""
    from ..nn.functional import softmax as _softmax
    return _softmax(input, dim, dtype=dtype)


def log_softmax(input, dim: int, *, dtype=None):
    """``log(softmax(input, dim))``, computed stably."""
    from ..nn.functional import log_softmax as _log_softmax
    return _log_softmax(input, dim, dtype=dtype)
