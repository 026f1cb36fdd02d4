"""The later families under ember.jit: compiled draws, scores and gradients equal the
eager ones (the same seed gives the same samples); host-drawn samples refuse to be
traced. (A file of its own: the first run compiles the graph's kernels.)"""
import numpy as np
import pytest

import ember
import ember.distributions as ED


def test_jit_matches_eager():
    def step(a, b, loc):
        out = ED.Pareto(a, b).rsample((3,)).sum() + ED.Weibull(a, b).rsample((2,)).sum()
        out = out + ED.Kumaraswamy(a, b).rsample((2,)).sum() + \
            ED.InverseGamma(b, a).rsample((2,)).sum()
        out = out + ED.GeneralizedPareto(loc, a, loc * 0.1).rsample((2,)).sum()
        out = out + ED.FisherSnedecor(a + 1, b + 4).rsample((2,)).sum()
        out = out + ED.LogisticNormal(loc, a).rsample((2,)).pow(2).sum()
        out = out + ED.VonMises(loc, b).sample((4,)).sum() + ED.VonMises(loc, b).log_prob(loc).sum()
        out = out + ED.LKJCholesky(3, b[0]).sample((2,)).sum()
        w = ED.Wishart(b + 3, scale_tril=ember.eye(3))
        return out + w.rsample((2,)).sum() + w.entropy().sum() + \
            ED.NegativeBinomial(b, logits=loc).log_prob(b.floor()).sum()

    def run(fn):
        args = [ember.tensor([0.8, 1.5, 2.0], requires_grad=True),
                ember.tensor([2.5, 3.0, 6.0], requires_grad=True),
                ember.tensor([0.1, -0.4, 0.3], requires_grad=True)]
        ember.manual_seed(11)
        out = fn(*args)
        out.backward()
        return [out.detach().numpy()] + [a.grad.numpy() for a in args]

    eager, jitted = run(step), run(ember.jit(step))
    for e, j in zip(eager, jitted):
        np.testing.assert_allclose(e, j, rtol=1e-5, atol=1e-5)


def test_jit_rejects_negative_binomial_sampling():
    fn = ember.jit(lambda p: ED.NegativeBinomial(3.0, p).sample())
    with pytest.raises(ember.EmberError):
        fn(ember.tensor([0.2, 0.5]))
