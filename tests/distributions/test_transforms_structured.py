"""CatTransform, StackTransform, CumulativeDistributionTransform, CorrCholeskyTransform
and PositiveDefiniteTransform against PyTorch's (forward, inverse, log|det J| and its
gradient, shapes, event dimensions), and the biject_to / transform_to registries
against PyTorch's table."""
import numpy as np
import pytest

import ember
import ember.distributions as ED
from ember.distributions import constraints as EC
from ember.distributions import transforms as ET
from tests.distributions.common import close

torch = pytest.importorskip("torch")
TD = torch.distributions
TT = torch.distributions.transforms
TC = torch.distributions.constraints

R = np.random.default_rng(0)


def _module(M):
    """(transforms module, distributions module, tensor maker) of ember or torch."""
    if M is ET:
        return ET, ED, ember.tensor
    return TT, TD, torch.tensor


def _cdf_normal(M):
    T, D, tensor = _module(M)
    return T.CumulativeDistributionTransform(D.Normal(tensor(np.array([0.5, -1.0, 0.0, 2.0])),
                                                      tensor(np.array([2.0, 1.0, 0.5, 1.5]))))


TRANSFORMS = [
    ("Cat-last", lambda M: M.CatTransform([M.ExpTransform(), M.identity_transform,
                                           M.AffineTransform(1.0, -2.0)], dim=-1,
                                          lengths=[2, 1, 1]), R.normal(size=(3, 4))),
    ("Cat-first", lambda M: M.CatTransform([M.SigmoidTransform(), M.TanhTransform()], dim=0,
                                           lengths=[1, 2]), R.normal(size=(3, 4))),
    ("Cat-event-batch", lambda M: M.CatTransform(
        [M.IndependentTransform(M.ExpTransform(), 1), M.SigmoidTransform()], dim=0,
        lengths=[2, 2]), R.normal(size=(4, 3))),
    ("Cat-event-inside", lambda M: M.CatTransform(
        [M.IndependentTransform(M.ExpTransform(), 1), M.IndependentTransform(
            M.SoftplusTransform(), 1)], dim=-1, lengths=[2, 2]), R.normal(size=(3, 4))),
    ("Stack", lambda M: M.StackTransform([M.ExpTransform(), M.SigmoidTransform(),
                                          M.identity_transform], dim=1), R.normal(size=(4, 3))),
    ("Stack-negative-dim", lambda M: M.StackTransform([M.ExpTransform(), M.TanhTransform()],
                                                      dim=-1), R.normal(size=(2, 3, 2))),
    ("CumulativeDistribution", _cdf_normal, R.normal(size=(3, 4))),
    ("CorrCholesky", lambda M: M.CorrCholeskyTransform(), R.normal(size=(3, 6)) * 2),
    ("CorrCholesky-2x2", lambda M: M.CorrCholeskyTransform(), R.normal(size=(5, 1))),
    ("PositiveDefinite", lambda M: M.PositiveDefiniteTransform(), R.normal(size=(2, 3, 3))),
]


@pytest.mark.parametrize("id,build,x", TRANSFORMS, ids=[t[0] for t in TRANSFORMS])
def test_transform_against_torch(id, build, x):
    t_e, t_t = build(ET), build(TT)
    xe = ember.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    ye, yt = t_e(xe), t_t(xt)
    close(ye, yt, rtol=1e-12, what=f"{id} forward")
    close(t_e.inv(ye.detach()), t_t.inv(yt.detach()), rtol=1e-9, atol=1e-10, what=f"{id} inverse")
    if id != "PositiveDefinite":          # (the upper triangle of x is lost)
        np.testing.assert_allclose(t_e.inv(ye.detach()).numpy(), x, rtol=1e-8, atol=1e-9)
    assert t_e.domain.event_dim == t_t.domain.event_dim
    assert t_e.codomain.event_dim == t_t.codomain.event_dim
    assert t_e.bijective == t_t.bijective
    try:
        t_t.codomain.check(yt.detach())
    except RuntimeError:      # cat of parts with different event dims: neither can check
        with pytest.raises(ember.EmberError):
            t_e.codomain.check(ye.detach())
    else:
        assert bool(t_e.codomain.check(ye.detach()).all())
    assert tuple(t_e.forward_shape(ember.Size(x.shape))) == tuple(t_t.forward_shape(x.shape))
    assert tuple(t_e.inverse_shape(ye.shape)) == tuple(t_t.inverse_shape(yt.shape))
    try:
        ldj_t = t_t.log_abs_det_jacobian(xt, yt)
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            t_e.log_abs_det_jacobian(xe, ye)
        return
    ldj_e = t_e.log_abs_det_jacobian(xe, ye)
    close(ldj_e, ldj_t, rtol=1e-11, what=f"{id} log_abs_det_jacobian")
    w = R.normal(size=tuple(ldj_t.shape))
    loss_t = (ldj_t * torch.tensor(w)).sum() + (yt * yt).sum()
    loss_e = (ldj_e * ember.tensor(w)).sum() + (ye * ye).sum()
    (gt,) = torch.autograd.grad(loss_t, [xt])
    (ge,) = ember.autograd.grad(loss_e, [xe])
    close(ge, gt, rtol=1e-9, atol=1e-11, what=f"{id} gradient")


def test_corr_cholesky_jacobian_by_differences():
    """log|det J| of x to the strictly lower triangle of y, against finite differences
    (an oracle independent of PyTorch)."""
    x = R.normal(size=6)
    t = ET.CorrCholeskyTransform()

    def lower(v):
        y = t(ember.tensor(v)).numpy()
        return y[np.tril_indices(4, -1)]

    h = 1e-6
    jac = np.stack([(lower(x + h * e) - lower(x - h * e)) / (2 * h) for e in np.eye(6)], 1)
    xe = ember.tensor(x)
    np.testing.assert_allclose(t.log_abs_det_jacobian(xe, t(xe)).item(),
                               np.linalg.slogdet(jac)[1], rtol=1e-7)


def test_cache_sign_equality_and_errors():
    x = ember.tensor(R.normal(size=(2, 4)))
    for t in (ET.CatTransform([ET.ExpTransform(), ET.identity_transform], -1, [2, 2]),
              ET.StackTransform([ET.ExpTransform(), ET.identity_transform], 0),
              ET.CumulativeDistributionTransform(ED.Normal(0.0, 1.0))):
        cached = t.with_cache(1)
        assert cached._cache_size == 1 and cached.with_cache(1) is cached
        y = cached(x)
        assert cached.inv(y) is x
    assert ET.CumulativeDistributionTransform(ED.Normal(0.0, 1.0)).sign == 1
    assert ET.PositiveDefiniteTransform() == ET.PositiveDefiniteTransform()
    assert ET.CorrCholeskyTransform() != ET.CorrCholeskyTransform()   # identity, as PyTorch
    with pytest.raises(ember.EmberValueError, match="All elements of tseq must be Transform"):
        ET.CatTransform([ET.ExpTransform(), "exp"])
    with pytest.raises(ember.EmberValueError, match=r"lengths \(1\) must match transforms \(2\)"):
        ET.CatTransform([ET.ExpTransform(), ET.ExpTransform()], lengths=[3])
    cat = ET.CatTransform([ET.ExpTransform(), ET.ExpTransform()], dim=-1, lengths=[1, 2])
    with pytest.raises(ember.EmberValueError, match=r"x.size\(-1\) = 4 must equal length 3"):
        cat(x)
    with pytest.raises(ember.EmberValueError, match="dim -1 out of range for tensor"):
        cat(ember.tensor(1.0))
    with pytest.raises(ember.EmberValueError, match=r"y.size\(0\) = 2 must equal "
                                                    r"len\(transforms\) 3"):
        ET.StackTransform([ET.ExpTransform()] * 3).inv(x)
    corr = ET.CorrCholeskyTransform()
    with pytest.raises(ember.EmberValueError, match="not a flattened lower-diagonal number"):
        corr.forward_shape((2, 4))
    with pytest.raises(ember.EmberValueError, match="Input is not square"):
        corr.inverse_shape((3, 4))
    with pytest.raises(ember.EmberValueError, match="Too few dimensions"):
        corr.inverse_shape((3,))


def test_transformed_distributions_over_matrix_and_cdf_transforms():
    """A distribution over correlation Cholesky factors, a positive-definite one and a
    Gaussian copula, scored as in PyTorch."""
    loc, scale = R.normal(size=(2, 3)), R.uniform(0.5, 1.5, (2, 3))
    d_e = ED.TransformedDistribution(ED.Normal(ember.tensor(loc), ember.tensor(scale)),
                                     [ET.CorrCholeskyTransform()])
    d_t = TD.TransformedDistribution(TD.Normal(torch.tensor(loc), torch.tensor(scale)),
                                     [TT.CorrCholeskyTransform()])
    assert tuple(d_e.batch_shape) == tuple(d_t.batch_shape) == (2,)
    assert tuple(d_e.event_shape) == tuple(d_t.event_shape) == (3, 3)
    value = d_t.sample((4,))
    close(d_e.log_prob(ember.tensor(value.numpy())), d_t.log_prob(value), rtol=1e-9)
    ember.manual_seed(0)
    assert bool(EC.corr_cholesky.check(d_e.sample((5,))).all())
    base_e = ED.MultivariateNormal(ember.zeros(2, dtype=ember.float64),
                                   scale_tril=ember.tensor([[1.0, 0.0], [0.6, 0.8]],
                                                           dtype=ember.float64))
    base_t = TD.MultivariateNormal(torch.zeros(2, dtype=torch.float64),
                                   scale_tril=torch.tensor([[1.0, 0.0], [0.6, 0.8]],
                                                           dtype=torch.float64))
    copula_e = ED.TransformedDistribution(base_e, [ET.CumulativeDistributionTransform(
        ED.Normal(ember.tensor(0.0, dtype=ember.float64), 1.0))])
    copula_t = TD.TransformedDistribution(base_t, [TT.CumulativeDistributionTransform(
        TD.Normal(torch.tensor(0.0, dtype=torch.float64), 1.0))])
    u = R.uniform(0.05, 0.95, (5, 2))
    close(copula_e.log_prob(ember.tensor(u)), copula_t.log_prob(torch.tensor(u)), rtol=1e-10)


def _constraint_pairs():
    """(id, ember constraint, torch constraint)."""
    lower = R.normal(size=3)
    return [
        ("real", EC.real, TC.real), ("real_vector", EC.real_vector, TC.real_vector),
        ("positive", EC.positive, TC.positive), ("nonnegative", EC.nonnegative, TC.nonnegative),
        ("greater_than", EC.greater_than(2.0), TC.greater_than(2.0)),
        ("greater_than_eq-tensor", EC.greater_than_eq(ember.tensor(lower)),
         TC.greater_than_eq(torch.tensor(lower))),
        ("less_than", EC.less_than(3.0), TC.less_than(3.0)),
        ("interval", EC.interval(-1.0, 2.0), TC.interval(-1.0, 2.0)),
        ("unit_interval", EC.unit_interval, TC.unit_interval),
        ("half_open_interval", EC.half_open_interval(0, 1), TC.half_open_interval(0, 1)),
        ("simplex", EC.simplex, TC.simplex),
        ("lower_cholesky", EC.lower_cholesky, TC.lower_cholesky),
        ("positive_definite", EC.positive_definite, TC.positive_definite),
        ("positive_semidefinite", EC.positive_semidefinite, TC.positive_semidefinite),
        ("corr_cholesky", EC.corr_cholesky, TC.corr_cholesky),
        ("independent", EC.independent(EC.positive, 1), TC.independent(TC.positive, 1)),
        ("cat", EC.cat([EC.positive, EC.unit_interval], -1, [2, 1]),
         TC.cat([TC.positive, TC.unit_interval], -1, [2, 1])),
        ("stack", EC.stack([EC.positive, EC.real, EC.interval(-2.0, 0.0)], -1),
         TC.stack([TC.positive, TC.real, TC.interval(-2.0, 0.0)], -1)),
    ]


def _unconstrained(t_torch, shape_hint):
    """A float64 input of the shape the torch transform's domain wants."""
    if t_torch.domain.event_dim == 2:
        return R.normal(size=(2, 3, 3))
    if isinstance(t_torch, TT.CorrCholeskyTransform):
        return R.normal(size=(2, 3))
    return R.normal(size=shape_hint)


@pytest.mark.parametrize("registry", ["biject_to", "transform_to"])
@pytest.mark.parametrize("id,c_e,c_t", _constraint_pairs(), ids=[c[0] for c in _constraint_pairs()])
def test_registry_against_torch(registry, id, c_e, c_t):
    reg_e, reg_t = getattr(ED, registry), getattr(TD, registry)
    try:
        t_t = reg_t(c_t)
    except NotImplementedError as error:
        with pytest.raises(NotImplementedError) as ours:
            reg_e(c_e)
        assert str(ours.value) == str(error)
        return
    t_e = reg_e(c_e)
    assert repr(t_e) == repr(t_t)
    assert t_e.bijective == t_t.bijective
    x = _unconstrained(t_t, (4, 3))
    ye, yt = t_e(ember.tensor(x)), t_t(torch.tensor(x))
    close(ye, yt, rtol=1e-12, what=f"{registry}({id})")
    assert bool(c_e.check(ye).all())
    ldj_t = None
    try:
        ldj_t = t_t.log_abs_det_jacobian(torch.tensor(x), yt)
    except NotImplementedError:
        pass
    if ldj_t is not None:
        close(t_e.log_abs_det_jacobian(ember.tensor(x), ye), ldj_t, rtol=1e-11,
              what=f"{registry}({id}) ldj")
    if t_e.bijective:
        np.testing.assert_allclose(t_e.inv(ye).numpy(), x, rtol=1e-8, atol=1e-9)


def test_registry_unknown_constraints_and_registration():
    for c in (EC.boolean, EC.dependent, EC.nonnegative_integer, EC.one_hot):
        with pytest.raises(NotImplementedError, match="Cannot transform"):
            ED.transform_to(c)
    registry = ED.constraint_registry.ConstraintRegistry()

    @registry.register(EC.positive)
    def _to_positive(constraint):
        return ET.SoftplusTransform()

    assert isinstance(registry(EC.greater_than(1.0)), ET.SoftplusTransform)
    registry.register(EC.real, lambda c: ET.identity_transform)
    assert registry(EC.real) is ET.identity_transform
    with pytest.raises(ember.EmberTypeError, match="Constraint subclass or instance"):
        registry.register(int, lambda c: ET.ExpTransform())
    with pytest.raises(TypeError):
        registry.register("positive", lambda c: ET.ExpTransform())


@pytest.mark.parametrize("dist", ["Normal", "Gamma", "Beta", "Pareto", "Uniform", "Wishart",
                                  "LKJCholesky", "VonMises", "GeneralizedPareto"])
def test_unconstrained_parameters_of_distributions(dist):
    """transform_to(arg_constraints[name]) maps zeros into every parameter's set."""
    params = {"Normal": (ember.zeros(2), ember.ones(2)), "Gamma": (ember.ones(2), ember.ones(2)),
              "Beta": (ember.ones(2), ember.ones(2)), "Pareto": (ember.ones(2), ember.ones(2)),
              "Uniform": (ember.zeros(2), ember.ones(2)),
              "Wishart": (ember.tensor(3.0), ember.eye(2)),
              "LKJCholesky": (3, ember.ones(2)), "VonMises": (ember.zeros(2), ember.ones(2)),
              "GeneralizedPareto": (ember.zeros(2), ember.ones(2), ember.zeros(2))}[dist]
    d = getattr(ED, dist)(*params)
    for name, constraint in d.arg_constraints.items():
        if EC.is_dependent(constraint) or name not in d.__dict__:
            continue
        shape = tuple(getattr(d, name).shape)
        t = ED.transform_to(constraint)
        y = t(ember.zeros(t.inverse_shape(ember.Size(shape))))
        assert bool(constraint.check(y).all()), (dist, name)
