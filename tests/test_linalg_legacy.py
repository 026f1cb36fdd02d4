"""ember.triangular_solve, geqrf, orgqr, ormqr, svd_lowrank and pca_lowrank against
PyTorch (values, gradients in float64, shapes, errors); the randomized ones by their
accuracy on low-rank matrices."""
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(2)


def pair(a, grad=True):
    return (ember.tensor(a, dtype=ember.float64, requires_grad=grad),
            torch.tensor(a, dtype=torch.float64, requires_grad=grad))


def close(e, t, tol=1e-10):
    assert tuple(e.shape) == tuple(t.shape)
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)


def triangular(shape, upper):
    a = RNG.standard_normal(shape)
    a = a + 3 * np.eye(shape[-1])  # well conditioned
    return np.triu(a) if upper else np.tril(a)


@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("unitriangular", [True, False])
def test_triangular_solve(upper, transpose, unitriangular):
    # only the named triangle is read: fill the other with noise
    a = triangular((3, 3), upper) + (np.tril if upper else np.triu)(
        RNG.standard_normal((3, 3)), -1 if upper else 1)
    A, tA = pair(a)
    b, tb = pair(RNG.standard_normal((3, 2)))
    out = ember.triangular_solve(b, A, upper, transpose, unitriangular)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tout = torch.triangular_solve(tb, tA, upper, transpose, unitriangular)
    close(out.solution, tout.solution)
    close(out.cloned_coefficient, tout.cloned_coefficient)
    loss = (out.solution ** 2).sum() + out.cloned_coefficient.sin().sum()
    tloss = (tout.solution ** 2).sum() + tout.cloned_coefficient.sin().sum()
    for g, tg in zip(ember.autograd.grad(loss, [A, b]), torch.autograd.grad(tloss, [tA, tb])):
        close(g, tg, 1e-9)


def test_triangular_solve_broadcast_and_defaults():
    A, tA = pair(triangular((2, 1, 4, 4), True))
    b, tb = pair(RNG.standard_normal((3, 4, 1)))
    out = ember.triangular_solve(b, A)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tout = torch.triangular_solve(tb, tA)
    close(out[0], tout[0])
    close(out[1], tout[1])
    assert tuple(out.cloned_coefficient.shape) == (2, 3, 4, 4)


def test_triangular_solve_errors():
    A = ember.eye(3, dtype=ember.float64)
    with pytest.raises(ember.ShapeError, match="triangular_solve: Expected b to have at "
                                               "least 2 dimensions"):
        ember.triangular_solve(ember.zeros(3, dtype=ember.float64), A)
    with pytest.raises(ember.ShapeError, match="triangular_solve: Incompatible matrix sizes:"
                                               " each A matrix is 3 by 3 but each b matrix "
                                               "is 4 by 2"):
        ember.triangular_solve(ember.zeros(4, 2, dtype=ember.float64), A)
    with pytest.raises(ember.EmberTypeError, match="triangular_solve: Expected b and A to "
                                                   "have the same dtype"):
        ember.triangular_solve(ember.zeros(3, 2), A)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 6, 4), (0, 3), (1, 1)])
def test_geqrf(shape):
    a = RNG.standard_normal(shape)
    out = ember.geqrf(ember.tensor(a))
    tout = torch.geqrf(torch.tensor(a))
    close(out.a, tout.a)
    close(out.tau, tout.tau)
    f = ember.geqrf(ember.tensor(a, dtype=ember.float32))
    assert f.a.dtype == ember.float32
    close(f.a, tout.a.float(), 1e-5)
    assert not out.a.requires_grad


def test_geqrf_jit_and_errors():
    x = ember.tensor(RNG.standard_normal((4, 3)))
    close(ember.jit(lambda x: ember.geqrf(x).a * 2)(x), ember.geqrf(x).a * 2)
    with pytest.raises(ember.ShapeError, match="geqrf: The input tensor A must have at "
                                               "least 2 dimensions"):
        ember.geqrf(ember.zeros(3))
    with pytest.raises(ember.EmberTypeError, match="geqrf: Expected a floating point or complex"):
        ember.geqrf(ember.zeros(3, 3, dtype=ember.int64))


@pytest.mark.parametrize("shape", [(5, 3), (4, 4), (2, 5, 2)])
def test_orgqr(shape):
    h = torch.geqrf(torch.tensor(RNG.standard_normal(shape)))
    A, tA = pair(h.a.numpy())
    tau, ttau = pair(h.tau.numpy())
    out, tout = ember.orgqr(A, tau), torch.orgqr(tA, ttau)
    close(out, tout)
    for g, tg in zip(ember.autograd.grad(out.sin().sum(), [A, tau]),
                     torch.autograd.grad(tout.sin().sum(), [tA, ttau])):
        close(g, tg, 1e-9)


@pytest.mark.parametrize("shape,other,left", [((5, 3), (5, 2), True), ((5, 3), (2, 5), False),
                                              ((3, 5), (3, 4), True), ((4, 4), (1, 4), False),
                                              ((2, 4, 2), (2, 4, 3), True)])
@pytest.mark.parametrize("transpose", [False, True])
def test_ormqr(shape, other, left, transpose):
    h = torch.geqrf(torch.tensor(RNG.standard_normal(shape)))
    A, tA = pair(h.a.numpy())
    tau, ttau = pair(h.tau.numpy())
    C, tC = pair(RNG.standard_normal(other))
    out = ember.ormqr(A, tau, C, left, transpose)
    tout = torch.ormqr(tA, ttau, tC, left, transpose)
    close(out, tout)
    for g, tg in zip(ember.autograd.grad(out.sin().sum(), [A, tau, C]),
                     torch.autograd.grad(tout.sin().sum(), [tA, ttau, tC])):
        close(g, tg, 1e-9)


def test_ormqr_errors():
    a, tau = ember.geqrf(ember.randn(5, 3, dtype=ember.float64))
    with pytest.raises(ember.ShapeError, match=r"ormqr: other.shape\[-2\] must be equal to "
                                               r"input.shape\[-2\]"):
        ember.ormqr(a, tau, ember.zeros(4, 2, dtype=ember.float64))
    with pytest.raises(ember.ShapeError, match=r"ormqr: other.shape\[-1\] must be equal"):
        ember.ormqr(a, tau, ember.zeros(2, 4, dtype=ember.float64), left=False)
    with pytest.raises(ember.ShapeError, match=r"ormqr: tau.shape\[-1\] must be less than"):
        ember.ormqr(a, ember.zeros(4, dtype=ember.float64), ember.zeros(5, 2,
                                                                        dtype=ember.float64))


def low_rank(m, n, r, batch=()):
    return (RNG.standard_normal(batch + (m, r)) @ RNG.standard_normal(batch + (r, n)))


@pytest.mark.parametrize("m,n,q", [(40, 25, 5), (20, 60, 4), (30, 30, 8), (12, 5, 6)])
def test_svd_lowrank_recovers_low_rank(m, n, q):
    a = low_rank(m, n, min(q, 4))
    ember.manual_seed(0)
    U, S, V = ember.svd_lowrank(ember.tensor(a), q=q)
    k = min(q, m, n)
    assert tuple(U.shape) == (m, k) and tuple(S.shape) == (k,) and tuple(V.shape) == (n, k)
    full = np.linalg.svd(a, compute_uv=False)[:k]
    np.testing.assert_allclose(S.numpy(), full, rtol=1e-8, atol=1e-8)
    recon = (U * S[None]) @ V.mT
    np.testing.assert_allclose(recon.numpy(), a, atol=1e-8)
    np.testing.assert_allclose((V.mT @ V).numpy(), np.eye(k), atol=1e-10)
    # the same shapes as PyTorch's
    tU, tS, tV = torch.svd_lowrank(torch.tensor(a), q=q)
    assert tU.shape == U.shape and tS.shape == S.shape and tV.shape == V.shape


def test_svd_lowrank_batched_with_M_and_grad():
    a = low_rank(15, 10, 3, (2,))
    mean = RNG.standard_normal((1, 10))
    x = ember.tensor(a + mean, requires_grad=True)
    U, S, V = ember.svd_lowrank(x, q=3, niter=3, M=ember.tensor(mean))
    np.testing.assert_allclose(S.detach().numpy(), np.linalg.svd(a, compute_uv=False)[:, :3],
                               rtol=1e-8)
    (g,) = ember.autograd.grad(S.sum(), [x])  # d(sum of the top singular values)/dA = U V^T
    np.testing.assert_allclose(g.numpy(), (U @ V.mT).detach().numpy(), atol=1e-8)


def test_pca_lowrank():
    a = low_rank(60, 8, 3) + RNG.standard_normal(8)  # rank 3 around an offset
    U, S, V = ember.pca_lowrank(ember.tensor(a), q=3)
    centered = a - a.mean(0)
    np.testing.assert_allclose(S.numpy(), np.linalg.svd(centered, compute_uv=False)[:3],
                               rtol=1e-8)
    np.testing.assert_allclose(((U * S[None]) @ V.mT).numpy(), centered, atol=1e-8)
    U, S, V = ember.pca_lowrank(ember.tensor(a))
    assert tuple(S.shape) == (6,)
    # q below the rank: the top two come out approximately (power iterations sharpen them)
    U, S, V = ember.pca_lowrank(ember.tensor(centered), center=False, q=2, niter=8)
    np.testing.assert_allclose(S.numpy(), np.linalg.svd(centered, compute_uv=False)[:2],
                               rtol=1e-4)


def test_lowrank_errors():
    with pytest.raises(ember.EmberValueError, match=r"pca_lowrank: q\(=4\) must be "
                                                    r"non-negative integer and not greater "
                                                    r"than min\(m, n\)=3"):
        ember.pca_lowrank(ember.zeros(5, 3, dtype=ember.float64), q=4)
    with pytest.raises(ember.EmberValueError, match=r"svd_lowrank: niter\(=-1\)"):
        ember.svd_lowrank(ember.zeros(5, 3, dtype=ember.float64), niter=-1)
    with pytest.raises(ember.ShapeError, match="svd_lowrank: The input tensor A must have"):
        ember.svd_lowrank(ember.zeros(5, dtype=ember.float64))
