"""Argument validation: bad parameters and values outside the support raise
ember.EmberValueError (a ValueError) with PyTorch's messages; validate_args and
set_default_validate_args switch it; constructor errors as in PyTorch."""
import numpy as np
import pytest

import ember
import ember.distributions as ED

torch = pytest.importorskip("torch")
TD = torch.distributions


def _message(fn):
    with pytest.raises(ValueError) as info:
        fn()
    return str(info.value)


def _same_message(make_e, make_t):
    """ember raises EmberValueError with PyTorch's message (up to the tensors printed
    after it, and 'torch.' spelled 'ember.')."""
    with pytest.raises(ember.EmberValueError) as info:
        make_e()
    ours = str(info.value)
    theirs = _message(make_t).replace("torch.", "ember.")
    head = theirs.split("but found invalid values")[0].split(" of distribution ")[0]
    assert ours.startswith(head), (ours, theirs)
    if "to satisfy the constraint" in theirs:
        assert theirs.split("to satisfy the constraint")[1].split(",")[0] in ours
    return ours


BAD_PARAMETERS = [
    ("Normal scale", lambda D, T: D.Normal(T([0.0, 1.0]), T([1.0, -1.0]))),
    ("Gamma concentration", lambda D, T: D.Gamma(T([0.0]), T([1.0]))),
    ("Beta", lambda D, T: D.Beta(T([0.5]), T([-0.5]))),
    ("Bernoulli probs", lambda D, T: D.Bernoulli(T([1.5]))),
    ("Bernoulli logits NaN", lambda D, T: D.Bernoulli(logits=T([float("nan")]))),
    ("Categorical probs", lambda D, T: D.Categorical(T([0.5, -0.1, 0.6]))),
    ("Uniform", lambda D, T: D.Uniform(T([1.0]), T([0.0]))),
    ("Dirichlet", lambda D, T: D.Dirichlet(T([1.0, 0.0]))),
    ("Poisson", lambda D, T: D.Poisson(T([-1.0]))),
    ("Binomial count", lambda D, T: D.Binomial(T([2.5]), T([0.5]))),
    ("Exponential", lambda D, T: D.Exponential(T([0.0]))),
    ("StudentT df", lambda D, T: D.StudentT(T([-1.0]))),
    ("HalfNormal", lambda D, T: D.HalfNormal(T([-1.0]))),
    ("MultivariateNormal covariance",
     lambda D, T: D.MultivariateNormal(T([0.0, 0.0]),
                                       covariance_matrix=T([[1.0, 2.0], [0.0, 1.0]]))),
    ("MultivariateNormal scale_tril",
     lambda D, T: D.MultivariateNormal(T([0.0, 0.0]), scale_tril=T([[1.0, 0.0], [1.0, -1.0]]))),
    ("Geometric probs 0", lambda D, T: D.Geometric(T([0.0, 0.5]))),
]


@pytest.mark.parametrize("name,make", BAD_PARAMETERS, ids=[b[0] for b in BAD_PARAMETERS])
def test_bad_parameters(name, make):
    _same_message(lambda: make(ED, ember.tensor), lambda: make(TD, torch.tensor))


OUT_OF_SUPPORT = [
    ("Exponential", lambda D, T: D.Exponential(T([1.0])), [-1.0]),
    ("Beta", lambda D, T: D.Beta(T([1.0]), T([1.0])), [1.5]),
    ("Bernoulli", lambda D, T: D.Bernoulli(T([0.5])), [0.5]),
    ("Poisson", lambda D, T: D.Poisson(T([1.0])), [1.5]),
    ("Categorical", lambda D, T: D.Categorical(T([0.5, 0.5])), [2.0]),
    ("Dirichlet", lambda D, T: D.Dirichlet(T([1.0, 1.0])), [[0.7, 0.7]]),
    ("Uniform", lambda D, T: D.Uniform(T([0.0]), T([1.0])), [1.5]),
    ("Binomial", lambda D, T: D.Binomial(3, T([0.5])), [4.0]),
    ("LogNormal", lambda D, T: D.LogNormal(T([0.0]), T([1.0])), [-1.0]),
    ("OneHotCategorical", lambda D, T: D.OneHotCategorical(T([0.5, 0.5])), [[1.0, 1.0]]),
]


@pytest.mark.parametrize("name,make,value", OUT_OF_SUPPORT, ids=[o[0] for o in OUT_OF_SUPPORT])
def test_values_outside_support(name, make, value):
    msg = _same_message(lambda: make(ED, ember.tensor).log_prob(ember.tensor(value)),
                        lambda: make(TD, torch.tensor).log_prob(torch.tensor(value)))
    assert "to be within the support" in msg


def test_value_shape_and_type_errors():
    d = ED.Normal(ember.zeros(3), ember.ones(3))
    with pytest.raises(ember.EmberValueError, match="not broadcastable"):
        d.log_prob(ember.zeros(4))
    with pytest.raises(ember.EmberValueError, match="must be a Tensor"):
        d.log_prob(0.5)
    mvn = ED.MultivariateNormal(ember.zeros(3), ember.eye(3))
    with pytest.raises(ember.EmberValueError, match="right-most size of value must match"):
        mvn.log_prob(ember.zeros(2))


def test_validate_args_switches():
    bad = ember.tensor([-1.0])
    ED.Normal(ember.zeros(1), bad, validate_args=False)   # no error
    try:
        ED.Distribution.set_default_validate_args(False)
        d = ED.Normal(ember.zeros(1), bad)
        assert not d._validate_args
        ED.Exponential(ember.ones(1)).log_prob(ember.tensor([-1.0]))
    finally:
        ED.Distribution.set_default_validate_args(True)
    with pytest.raises(ember.EmberValueError):
        ED.Normal(ember.zeros(1), bad)
    with pytest.raises(ValueError):
        ED.Distribution.set_default_validate_args("yes")
    with pytest.raises(ember.EmberValueError):
        ED.Normal(ember.zeros(1), ember.ones(1), validate_args=True).log_prob("x")


CONSTRUCTOR_ERRORS = [
    ("both probs and logits", lambda D, T: D.Bernoulli(T([0.5]), T([0.0])),
     "Either `probs` or `logits` must be specified, but not both."),
    ("neither", lambda D, T: D.Categorical(), "Either `probs` or `logits`"),
    ("0-d probs", lambda D, T: D.Categorical(T(0.5)), "must be at least one-dimensional"),
    ("0-d concentration", lambda D, T: D.Dirichlet(T(0.5)), "must be at least one-dimensional"),
    ("0-d loc", lambda D, T: D.MultivariateNormal(T(0.0), scale_tril=T([[1.0]])),
     "loc must be at least one-dimensional."),
    ("two matrices", lambda D, T: D.MultivariateNormal(T([0.0]), T([[1.0]]), T([[1.0]])),
     "Exactly one of covariance_matrix or precision_matrix or scale_tril"),
    ("1-d covariance", lambda D, T: D.MultivariateNormal(T([0.0]), T([1.0])),
     "covariance_matrix must be at least two-dimensional"),
    ("lowrank factor",
     lambda D, T: D.LowRankMultivariateNormal(T([0.0, 0.0]), T([[1.0]]), T([1.0, 1.0])),
     "cov_factor must be a batch of matrices with shape 2 x m"),
    ("independent ndims", lambda D, T: D.Independent(D.Normal(T([0.0]), T([1.0])), 2),
     "Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape)"),
    ("mixture type", lambda D, T: D.MixtureSameFamily(D.Normal(T([0.0]), T([1.0])),
                                                      D.Normal(T([0.0]), T([1.0]))),
     "The Mixture distribution needs to be an  instance of"),
    ("mixture components", lambda D, T: D.MixtureSameFamily(D.Categorical(T([0.5, 0.5])),
                                                            D.Normal(T([0.0] * 3), T([1.0] * 3))),
     "`mixture_distribution component` (2) does not equal"),
    ("transforms", lambda D, T: D.TransformedDistribution(D.Normal(T([0.0]), T([1.0])), "exp"),
     "transforms must be a Transform or list"),
]


@pytest.mark.parametrize("name,make,text", CONSTRUCTOR_ERRORS,
                         ids=[c[0] for c in CONSTRUCTOR_ERRORS])
def test_constructor_errors(name, make, text):
    assert text in _message(lambda: make(TD, torch.tensor))
    with pytest.raises(ember.EmberValueError) as info:
        make(ED, ember.tensor)
    assert text in str(info.value)


def test_not_implemented_cases():
    with pytest.raises(NotImplementedError, match="inhomogeneous total_count"):
        ED.Multinomial(ember.tensor(3), ember.tensor([0.5, 0.5]))
    b = ED.Binomial(ember.tensor([3.0, 4.0]), ember.tensor([0.5, 0.5]))
    with pytest.raises(NotImplementedError, match="Inhomogeneous total count"):
        b.entropy()
    with pytest.raises(NotImplementedError):
        ED.Bernoulli(ember.tensor([0.5])).rsample()
    with pytest.raises(NotImplementedError, match="Enumeration over cartesian product"):
        ED.Independent(ED.Bernoulli(ember.ones(2, 2) / 2), 1).enumerate_support()
    with pytest.warns(FutureWarning, match="sample_n"):
        assert ED.Normal(0.0, 1.0).sample_n(3).shape == (3,)


def test_expand_and_enumerate_support():
    d = ED.Bernoulli(ember.tensor([0.2, 0.7]))
    e = d.expand((3, 2))
    assert e.batch_shape == (3, 2) and e.sample().shape == (3, 2)
    t = TD.Bernoulli(torch.tensor([0.2, 0.7]))
    np.testing.assert_array_equal(d.enumerate_support().numpy(),
                                  t.enumerate_support().numpy())
    assert d.enumerate_support(expand=False).shape == (2, 1)
    c = ED.OneHotCategorical(ember.ones(2, 3) / 3)
    assert c.enumerate_support().shape == TD.OneHotCategorical(torch.ones(2, 3) / 3) \
        .enumerate_support().shape
    m = ED.MultivariateNormal(ember.zeros(2), ember.eye(2)).expand((4,))
    assert m.batch_shape == (4,) and m.covariance_matrix.shape == (4, 2, 2)
    with pytest.raises(NotImplementedError, match="custom .expand"):
        class MyNormal(ED.Normal):
            def __init__(self):
                super().__init__(0.0, 1.0)
        MyNormal().expand((2,))
