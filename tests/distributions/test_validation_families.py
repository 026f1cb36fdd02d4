"""Argument validation of the later families: bad parameters and values outside the
support raise ember.EmberValueError with PyTorch's messages; constructor errors as in
PyTorch (where PyTorch raises AssertionError, ember raises EmberValueError with the same
text)."""
import pytest

import ember
import ember.distributions as ED
from tests.distributions.test_validation import _message, _same_message

torch = pytest.importorskip("torch")
TD = torch.distributions

BAD_PARAMETERS = [
    ("Pareto scale", lambda D, T: D.Pareto(T([1.0, -1.0]), T([1.0, 1.0]))),
    ("Pareto alpha", lambda D, T: D.Pareto(T([1.0]), T([0.0]))),
    ("Weibull concentration", lambda D, T: D.Weibull(T([1.0]), T([-2.0]))),
    ("Weibull scale", lambda D, T: D.Weibull(T([0.0]), T([2.0]))),
    ("Kumaraswamy", lambda D, T: D.Kumaraswamy(T([1.0]), T([-1.0]))),
    ("InverseGamma", lambda D, T: D.InverseGamma(T([1.0]), T([-1.0]))),
    ("LogisticNormal", lambda D, T: D.LogisticNormal(T([0.0, 0.0]), T([1.0, 0.0]))),
    ("GeneralizedPareto scale", lambda D, T: D.GeneralizedPareto(T([0.0]), T([-1.0]), T([0.1]))),
    ("GeneralizedPareto NaN", lambda D, T: D.GeneralizedPareto(T([0.0]), T([1.0]),
                                                               T([float("nan")]))),
    ("FisherSnedecor", lambda D, T: D.FisherSnedecor(T([-1.0]), T([1.0]))),
    ("NegativeBinomial count", lambda D, T: D.NegativeBinomial(T([-1.0]), T([0.5]))),
    ("NegativeBinomial probs", lambda D, T: D.NegativeBinomial(T([2.0]), T([1.0]))),
    ("VonMises", lambda D, T: D.VonMises(T([0.0]), T([0.0]))),
    ("Wishart covariance", lambda D, T: D.Wishart(T(4.0), covariance_matrix=T([[1.0, 2.0],
                                                                             [2.0, 1.0]]))),
    ("Wishart scale_tril", lambda D, T: D.Wishart(T(4.0), scale_tril=T([[1.0, 0.0],
                                                                      [0.5, -1.0]]))),
    ("LKJCholesky", lambda D, T: D.LKJCholesky(3, T([-1.0]))),
]


@pytest.mark.parametrize("name,make", BAD_PARAMETERS, ids=[b[0] for b in BAD_PARAMETERS])
def test_bad_parameters(name, make):
    _same_message(lambda: make(ED, ember.tensor), lambda: make(TD, torch.tensor))


OUT_OF_SUPPORT = [
    ("Pareto", lambda D, T: D.Pareto(T([1.0]), T([2.0])), [0.5]),
    ("Weibull", lambda D, T: D.Weibull(T([1.0]), T([2.0])), [-0.5]),
    ("Kumaraswamy", lambda D, T: D.Kumaraswamy(T([1.0]), T([2.0])), [1.5]),
    ("InverseGamma", lambda D, T: D.InverseGamma(T([1.0]), T([2.0])), [0.0]),
    ("LogisticNormal", lambda D, T: D.LogisticNormal(T([0.0]), T([1.0])), [[0.7, 0.7]]),
    ("GeneralizedPareto below", lambda D, T: D.GeneralizedPareto(T([1.0]), T([1.0]), T([0.2])),
     [0.5]),
    ("GeneralizedPareto above", lambda D, T: D.GeneralizedPareto(T([0.0]), T([1.0]), T([-0.5])),
     [2.5]),
    ("FisherSnedecor", lambda D, T: D.FisherSnedecor(T([1.0]), T([2.0])), [-1.0]),
    ("NegativeBinomial", lambda D, T: D.NegativeBinomial(T([2.0]), T([0.5])), [1.5]),
    ("VonMises", lambda D, T: D.VonMises(T([0.0]), T([1.0])), [float("nan")]),
    ("Wishart", lambda D, T: D.Wishart(T(4.0), covariance_matrix=T([[1.0, 0.0], [0.0, 1.0]])),
     [[1.0, 2.0], [2.0, 1.0]]),
    ("LKJCholesky", lambda D, T: D.LKJCholesky(2, T(1.0)), [[1.0, 0.0], [0.5, 0.5]]),
]


@pytest.mark.parametrize("name,make,value", OUT_OF_SUPPORT, ids=[o[0] for o in OUT_OF_SUPPORT])
def test_values_outside_support(name, make, value):
    msg = _same_message(lambda: make(ED, ember.tensor).log_prob(ember.tensor(value)),
                        lambda: make(TD, torch.tensor).log_prob(torch.tensor(value)))
    assert "to be within the support" in msg


CONSTRUCTOR_ERRORS = [
    ("NegativeBinomial both", lambda D, T: D.NegativeBinomial(2.0, T([0.5]), T([0.0])),
     "Either `probs` or `logits` must be specified, but not both."),
    ("Wishart df", lambda D, T: D.Wishart(1.0, covariance_matrix=T([[1.0, 0.0], [0.0, 1.0]]) * 1),
     "Value of df=1.0 expected to be greater than ndim - 1 = 1."),
    ("Wishart 1-d", lambda D, T: D.Wishart(3.0, scale_tril=T([1.0])),
     "scale_tril must be at least two-dimensional, with optional leading batch dimensions"),
    ("LKJCholesky dim", lambda D, T: D.LKJCholesky(1, 1.0),
     "Expected dim to be an integer greater than or equal to 2. Found dim=1."),
]


@pytest.mark.parametrize("name,make,text", CONSTRUCTOR_ERRORS,
                         ids=[c[0] for c in CONSTRUCTOR_ERRORS])
def test_constructor_errors(name, make, text):
    assert text in _message(lambda: make(TD, torch.tensor))
    with pytest.raises(ember.EmberValueError) as info:
        make(ED, ember.tensor)
    assert text in str(info.value)


def test_wishart_needs_exactly_one_matrix():
    text = "Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified."
    with pytest.raises(AssertionError, match=text):
        TD.Wishart(3.0, covariance_matrix=torch.eye(2), scale_tril=torch.eye(2))
    with pytest.raises(ember.EmberValueError, match=text):
        ED.Wishart(3.0, covariance_matrix=ember.eye(2), scale_tril=ember.eye(2))
    with pytest.raises(ember.EmberValueError, match=text):
        ED.Wishart(3.0)


def test_validation_switches_and_jit_skips_it():
    ED.Pareto(ember.tensor([-1.0]), ember.tensor([1.0]), validate_args=False)
    d = ED.GeneralizedPareto(0.0, 1.0, -0.5, validate_args=False)
    assert d.log_prob(ember.tensor(3.0)).item() != d.log_prob(ember.tensor(1.0)).item()
    with pytest.raises(ember.EmberValueError, match="within the support"):
        ED.GeneralizedPareto(0.0, 1.0, -0.5).log_prob(ember.tensor(3.0))
    # under ember.jit the value checks cannot run: scores come out without a raise
    fn = ember.jit(lambda s: ED.Weibull(s, 2.0).log_prob(ember.tensor([0.5])))
    assert fn(ember.tensor([1.0])).shape == (1,)
