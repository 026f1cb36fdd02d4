"""Transforms against torch.distributions.transforms: forward, inverse,
log|det J| and its gradient, shapes, event dimensions, sign, caching and equality; and
TransformedDistribution over transforms that change the event shape."""
import numpy as np
import pytest

import ember
import ember.distributions as ED
from ember.distributions import transforms as ET
from tests.distributions.common import close

torch = pytest.importorskip("torch")
TT = torch.distributions.transforms
TD = torch.distributions

R = np.random.default_rng(0)
LOC, SCALE, SCALE_POS = R.normal(size=4), R.uniform(-2, 2, 4), R.uniform(1, 2, 4)

# (id, build(module, T), input x as float64 array)
TRANSFORMS = [
    ("Exp", lambda M, T: M.ExpTransform(), R.normal(size=(3, 4))),
    ("Sigmoid", lambda M, T: M.SigmoidTransform(), R.normal(size=(3, 4)) * 3),
    ("Tanh", lambda M, T: M.TanhTransform(), R.normal(size=(3, 4))),
    ("Softplus", lambda M, T: M.SoftplusTransform(), R.normal(size=(3, 4)) * 3),
    ("Affine", lambda M, T: M.AffineTransform(T(LOC), T(SCALE)),
     R.normal(size=(3, 4))),
    ("Affine-number", lambda M, T: M.AffineTransform(1.5, -2.0), R.normal(size=(3, 4))),
    ("Affine-event", lambda M, T: M.AffineTransform(0.5, T(SCALE_POS), event_dim=1),
     R.normal(size=(3, 4))),
    ("Power", lambda M, T: M.PowerTransform(T(np.array(2.5))), R.uniform(0.5, 2, (3, 4))),
    ("StickBreaking", lambda M, T: M.StickBreakingTransform(), R.normal(size=(3, 4))),
    ("LowerCholesky", lambda M, T: M.LowerCholeskyTransform(), R.normal(size=(2, 3, 3))),
    ("Softmax", lambda M, T: M.SoftmaxTransform(), R.normal(size=(3, 4))),
    ("Abs", lambda M, T: M.AbsTransform(), R.normal(size=(3, 4))),
    ("Reshape", lambda M, T: M.ReshapeTransform((4,), (2, 2)), R.normal(size=(3, 4))),
    ("Independent", lambda M, T: M.IndependentTransform(M.SigmoidTransform(), 1),
     R.normal(size=(3, 4))),
    ("Compose", lambda M, T: M.ComposeTransform([M.AffineTransform(0.0, 2.0), M.ExpTransform(),
                                                 M.AffineTransform(1.0, -1.0)]),
     R.normal(size=(3, 4))),
    ("Compose-event", lambda M, T: M.ComposeTransform([M.StickBreakingTransform(),
                                                       M.ExpTransform().inv]),
     R.normal(size=(3, 4))),
    ("Inverse", lambda M, T: M.ExpTransform().inv, R.uniform(0.5, 2, (3, 4))),
    ("Identity", lambda M, T: M.identity_transform, R.normal(size=(3, 4))),
]


@pytest.mark.parametrize("id,build,x", TRANSFORMS, ids=[t[0] for t in TRANSFORMS])
def test_transform_against_torch(id, build, x):
    t_e, t_t = build(ET, ember.tensor), build(TT, torch.tensor)
    xe = ember.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    ye, yt = t_e(xe), t_t(xt)
    close(ye, yt, what=f"{id} forward")
    close(t_e.inv(ye.detach()), t_t.inv(yt.detach()), rtol=1e-9, what=f"{id} inverse")
    assert t_e.domain.event_dim == t_t.domain.event_dim
    assert t_e.codomain.event_dim == t_t.codomain.event_dim
    assert t_e.bijective == t_t.bijective
    assert tuple(t_e.forward_shape(ember.Size(x.shape))) == tuple(t_t.forward_shape(x.shape))
    assert tuple(t_e.inverse_shape(ye.shape)) == tuple(t_t.inverse_shape(yt.shape))
    try:
        sign_t = t_t.sign
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            t_e.sign
    else:
        sign_e = t_e.sign
        np.testing.assert_array_equal(np.asarray(getattr(sign_e, "numpy", lambda: sign_e)()),
                                      np.asarray(getattr(sign_t, "numpy", lambda: sign_t)()))
    try:
        ldj_t = t_t.log_abs_det_jacobian(xt, yt)
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            t_e.log_abs_det_jacobian(xe, ye)
        return
    ldj_e = t_e.log_abs_det_jacobian(xe, ye)
    close(ldj_e, ldj_t, what=f"{id} log_abs_det_jacobian")
    w = R.normal(size=tuple(ldj_t.shape))
    loss_t = (ldj_t * torch.tensor(w)).sum() + (yt * yt).sum()
    loss_e = (ldj_e * ember.tensor(w)).sum() + (ye * ye).sum()
    (gt,) = torch.autograd.grad(loss_t, [xt])
    (ge,) = ember.autograd.grad(loss_e, [xe])
    close(ge, gt, rtol=1e-9, atol=1e-11, what=f"{id} gradient")


def test_cache_equality_and_repr():
    t = ET.TanhTransform(cache_size=1)
    x = ember.tensor([30.0])             # tanh(30) rounds to 1: atanh cannot recover it
    y = t(x)
    assert t.inv(y) is x
    assert ET.TanhTransform().with_cache(1)._cache_size == 1
    with pytest.raises(ember.EmberValueError, match="cache_size must be 0 or 1"):
        ET.ExpTransform(cache_size=2)
    assert ET.ExpTransform() == ET.ExpTransform() and ET.ExpTransform() != ET.SigmoidTransform()
    assert ET.ExpTransform().inv == ET.ExpTransform().inv
    assert ET.AffineTransform(1.0, 2.0) == ET.AffineTransform(1.0, 2.0)
    assert ET.AffineTransform(1.0, 2.0) != ET.AffineTransform(1.0, 3.0)
    assert ET.ComposeTransform([ET.ExpTransform()]) == ET.ComposeTransform([ET.ExpTransform()])
    c = ET.ComposeTransform([ET.ExpTransform(), ET.AffineTransform(0.0, 2.0)])
    assert c.inv.inv is c
    assert repr(ET.ExpTransform()) == repr(TT.ExpTransform())
    assert repr(ET.ExpTransform().inv) == repr(TT.ExpTransform().inv)
    with pytest.raises(ember.EmberValueError, match="different numbers of elements"):
        ET.ReshapeTransform((4,), (3,))


def test_transformed_distribution_shapes_and_values():
    """Stick breaking turns a batch of normals into a distribution on the simplex
    (event dimension 1); the base is wrapped in Independent as in PyTorch."""
    loc, scale = R.normal(size=(2, 3)), R.uniform(0.5, 1.5, (2, 3))
    d_e = ED.TransformedDistribution(ED.Normal(ember.tensor(loc), ember.tensor(scale)),
                                     [ET.StickBreakingTransform()])
    d_t = TD.TransformedDistribution(TD.Normal(torch.tensor(loc), torch.tensor(scale)),
                                     [TT.StickBreakingTransform()])
    assert tuple(d_e.batch_shape) == tuple(d_t.batch_shape) == (2,)
    assert tuple(d_e.event_shape) == tuple(d_t.event_shape) == (4,)
    assert isinstance(d_e.base_dist, ED.Independent)
    ember.manual_seed(0)
    s = d_e.sample((5,))
    assert s.shape == (5, 2, 4) and bool(ED.constraints.simplex.check(s).all())
    value = R.dirichlet(np.ones(4), size=(5, 2))
    close(d_e.log_prob(ember.tensor(value)), d_t.log_prob(torch.tensor(value)), rtol=1e-9)
    # a base broadcast up by the transform's parameters
    d_e = ED.TransformedDistribution(ED.Normal(0.0, 1.0),
                                     ET.AffineTransform(ember.zeros(3), ember.ones(3)))
    d_t = TD.TransformedDistribution(TD.Normal(0.0, 1.0),
                                     TT.AffineTransform(torch.zeros(3), torch.ones(3)))
    assert tuple(d_e.batch_shape) == tuple(d_t.batch_shape) == (3,)
    assert d_e.expand((2, 3)).sample().shape == (2, 3)
    # a decreasing transform flips the cdf
    d_e = ED.TransformedDistribution(ED.Exponential(ember.tensor([1.5])),
                                     ET.AffineTransform(0.0, -1.0))
    d_t = TD.TransformedDistribution(TD.Exponential(torch.tensor([1.5])),
                                     TT.AffineTransform(0.0, -1.0))
    close(d_e.cdf(ember.tensor([-0.3])), d_t.cdf(torch.tensor([-0.3])), rtol=1e-6)
    close(d_e.icdf(ember.tensor([0.3])), d_t.icdf(torch.tensor([0.3])), rtol=1e-6)
    with pytest.raises(ember.EmberValueError, match="needs to have shape with size at least"):
        ED.TransformedDistribution(ED.Normal(0.0, 1.0), ET.StickBreakingTransform())
