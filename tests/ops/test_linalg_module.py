"""ember.linalg (and the top-level aliases) against torch.linalg and finite differences.

Decompositions whose factors are unique only up to sign (svd, eigh) are checked through
functions that do not depend on the signs."""
import math

import numpy as np
import pytest

import ember
from .optable import OpCase, S, generate, nc, needs_torch, rand, torch

T = torch
F = ("float32", "float64")


def _t(fn):
    return None if T is None else fn()


def r(rng, dtype, *shape):
    return rand(rng, shape, dtype)


def square(rng, dtype, *batch, n=3):
    """Well-conditioned square matrices."""
    a = rng.uniform(-1, 1, batch + (n, n)) + 3 * np.eye(n)
    return a.astype(ember.dtypes.as_dtype(dtype).np)


def _spd(lib):
    return lambda a: a @ a.mT + lib.eye(a.shape[-1], dtype=a.dtype)


def _cholesky(lib):
    return lambda a: lib.linalg.cholesky(_spd(lib)(a))


def _svd_parts(lib, full):
    def fn(a):
        U, S, Vh = lib.linalg.svd(a, full_matrices=full)
        k = S.shape[-1]
        U, Vh = U[..., :k], Vh[..., :k, :]
        return (U * S.unsqueeze(-2)) @ Vh + (U @ U.mT)[..., :1] * 0.5 + (Vh.mT @ Vh)[..., :1, :]
    return fn


def _eigh_parts(lib, uplo="L"):
    def fn(a):
        L, V = lib.linalg.eigh(_spd(lib)(a), UPLO=uplo)
        return V * V * L.unsqueeze(-2)
    return fn


def _old_svd(lib):
    def fn(a):
        U, S, V = lib.svd(a)
        return (U * S.unsqueeze(-2)) @ V.mT
    return fn


CASES = [
    OpCase("det", ember.linalg.det, _t(lambda: T.linalg.det),
           lambda rng, d: [S(square(rng, d)), S(nc(square(rng, d, 2))), S(r(rng, d, 2, 4, 4)),
                           S(r(rng, d, 0, 2, 2)), S(r(rng, d, 1, 1))], dtypes=F),
    OpCase("slogdet", ember.linalg.slogdet, _t(lambda: T.linalg.slogdet),
           lambda rng, d: [S(r(rng, d, 3, 3)), S(nc(square(rng, d, 2)))], dtypes=F),
    OpCase("inv", ember.linalg.inv, _t(lambda: T.linalg.inv),
           lambda rng, d: [S(square(rng, d)), S(nc(square(rng, d, 2, 1))),
                           S(r(rng, d, 0, 3, 3))], dtypes=F),
    OpCase("solve", ember.linalg.solve, _t(lambda: T.linalg.solve),
           lambda rng, d: [S(square(rng, d), r(rng, d, 3, 2)), S(square(rng, d, 2), r(rng, d, 3)),
                           S(nc(square(rng, d, 2)), r(rng, d, 2, 3)),
                           S(square(rng, d, 2), r(rng, d, 3, 4)),
                           S(square(rng, d), r(rng, d, 2, 3), left=False)], dtypes=F),
    OpCase("cholesky", _cholesky(ember), _t(lambda: _cholesky(T)),
           lambda rng, d: [S(r(rng, d, 3, 3)), S(nc(r(rng, d, 2, 4, 4)))], dtypes=F),
    OpCase("cholesky_upper", lambda a: ember.linalg.cholesky(_spd(ember)(a), upper=True),
           _t(lambda: lambda a: T.linalg.cholesky(_spd(T)(a), upper=True)),
           lambda rng, d: [S(r(rng, d, 3, 3))], dtypes=F, gradgrad=False),
    OpCase("qr", ember.linalg.qr, _t(lambda: T.linalg.qr),
           lambda rng, d: [S(r(rng, d, 4, 3)), S(nc(r(rng, d, 2, 3, 3))), S(r(rng, d, 3, 5))],
           dtypes=F, gradgrad=False),
    OpCase("qr_complete", lambda a: ember.linalg.qr(a, mode="complete"),
           _t(lambda: lambda a: T.linalg.qr(a, mode="complete")),
           lambda rng, d: [S(r(rng, d, 3, 4))], dtypes=F, gradgrad=False),
    OpCase("svd", _svd_parts(ember, False), _t(lambda: _svd_parts(T, False)),
           lambda rng, d: [S(r(rng, d, 4, 3)), S(r(rng, d, 2, 3, 5)), S(nc(r(rng, d, 3, 3)))],
           dtypes=F, gradgrad=False),
    OpCase("svd_full", _svd_parts(ember, True), _t(lambda: _svd_parts(T, True)),
           lambda rng, d: [S(r(rng, d, 4, 3))], dtypes=F, gradgrad=False),
    OpCase("svdvals", ember.linalg.svdvals, _t(lambda: T.linalg.svdvals),
           lambda rng, d: [S(r(rng, d, 4, 3)), S(r(rng, d, 2, 2, 5))], dtypes=F),
    OpCase("eigh", _eigh_parts(ember), _t(lambda: _eigh_parts(T)),
           lambda rng, d: [S(r(rng, d, 3, 3)), S(nc(r(rng, d, 2, 4, 4)))], dtypes=F,
           gradgrad=False),
    OpCase("eigvalsh_upper", lambda a: ember.linalg.eigvalsh(a + a.mT, "U"),
           _t(lambda: lambda a: T.linalg.eigvalsh(a + a.mT, "U")),
           lambda rng, d: [S(r(rng, d, 2, 4, 4))], dtypes=F),
    OpCase("pinv", ember.linalg.pinv, _t(lambda: T.linalg.pinv),
           lambda rng, d: [S(r(rng, d, 4, 3)), S(r(rng, d, 2, 2, 3))], dtypes=F, gradgrad=False),
    OpCase("matrix_norm", lambda a, o: ember.linalg.matrix_norm(a, o),
           _t(lambda: lambda a, o: T.linalg.matrix_norm(a, o)),
           lambda rng, d: [S(r(rng, d, 2, 4, 3), o) for o in
                           ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)], dtypes=F,
           gradgrad=False),
    OpCase("norm", ember.linalg.norm, _t(lambda: T.linalg.norm),
           lambda rng, d: [S(r(rng, d, 2, 3, 4)), S(r(rng, d, 3, 4), "nuc"),
                           S(r(rng, d, 2, 3, 4), 1, (0, 2), True),
                           S(nc(r(rng, d, 3, 4)), 3, 1), S(r(rng, d, 5), math.inf)],
           dtypes=F, gradgrad=False),
    OpCase("vector_norm", ember.linalg.vector_norm, _t(lambda: T.linalg.vector_norm),
           lambda rng, d: [S(r(rng, d, 3, 4)), S(r(rng, d, 3, 4), 1, -1, True),
                           S(r(rng, d, 3, 4), 0.5, (0, 1)), S(r(rng, d, 3, 4), -math.inf, 0)],
           dtypes=F),
    OpCase("matrix_power", ember.linalg.matrix_power, _t(lambda: T.linalg.matrix_power),
           lambda rng, d: [S(square(rng, d, 2) / 3, n) for n in (0, 1, 3, -2)], dtypes=F),
    OpCase("multi_dot", lambda *ts: ember.linalg.multi_dot(ts),
           _t(lambda: lambda *ts: T.linalg.multi_dot(ts)),
           lambda rng, d: [S(r(rng, d, 3), r(rng, d, 3, 4), r(rng, d, 4, 2)),
                           S(r(rng, d, 2, 3), r(rng, d, 3, 4), r(rng, d, 4))], dtypes=F),
    OpCase("vecdot", ember.linalg.vecdot, _t(lambda: T.linalg.vecdot),
           lambda rng, d: [S(r(rng, d, 2, 3), r(rng, d, 3)), S(r(rng, d, 3, 2), r(rng, d, 3, 2), dim=0)],
           dtypes=F),
    OpCase("logdet", lambda a: ember.logdet(_spd(ember)(a)),
           _t(lambda: lambda a: T.logdet(_spd(T)(a))),
           lambda rng, d: [S(r(rng, d, 2, 3, 3))], dtypes=F),
    OpCase("svd_old", _old_svd(ember), _t(lambda: _old_svd(T)),
           lambda rng, d: [S(r(rng, d, 4, 3))], dtypes=F, gradgrad=False),
]

generate(CASES, globals())


def _same(e, t, rtol=1e-10):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=1e-10)


@needs_torch
def test_errors_match_where_torch_raises():
    with pytest.raises(ember.linalg.LinAlgError, match="singular"):
        ember.linalg.inv(ember.zeros(2, 2))
    with pytest.raises(RuntimeError, match="singular"):
        ember.linalg.solve(ember.zeros(3, 3), ember.ones(3))
    with pytest.raises(ember.linalg.LinAlgError, match="positive-definite"):
        ember.linalg.cholesky(-ember.eye(2))
    with pytest.raises(ember.ShapeError, match="square"):
        ember.linalg.inv(ember.ones(2, 3))
    with pytest.raises(ember.ShapeError, match="at least 2 dimensions"):
        ember.linalg.det(ember.ones(3))
    with pytest.raises(TypeError, match="int64"):
        ember.linalg.det(ember.ones(2, 2, dtype=ember.int64))
    with pytest.raises(ember.EmberError, match="UPLO"):
        ember.linalg.eigh(ember.eye(2), UPLO="X")
    with pytest.raises(ember.EmberError, match="mode"):
        ember.linalg.qr(ember.eye(2), mode="bad")
    # a singular matrix's determinant has a gradient: the cofactor matrix
    a = np.array([[1.0, 2.0], [2.0, 4.0]])
    e = ember.tensor(a, requires_grad=True)
    ember.linalg.det(e).backward()
    np.testing.assert_allclose(e.grad.numpy(), [[4.0, -2.0], [-2.0, 1.0]], atol=1e-12)
    assert ember.linalg.slogdet(ember.tensor(a)).sign.item() == 0


@needs_torch
def test_rank_lstsq_and_aliases_match_torch():
    rng = np.random.default_rng(0)
    low = rng.standard_normal((2, 5, 2)) @ rng.standard_normal((2, 2, 4))
    _same(ember.linalg.matrix_rank(ember.tensor(low)), torch.linalg.matrix_rank(torch.tensor(low)))
    _same(ember.linalg.matrix_rank(ember.tensor(low), atol=1.0, rtol=0.0),
          torch.linalg.matrix_rank(torch.tensor(low), atol=1.0, rtol=0.0))
    A, B = rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 5, 2))
    got = ember.linalg.lstsq(ember.tensor(A), ember.tensor(B))
    want = torch.linalg.lstsq(torch.tensor(A), torch.tensor(B))
    _same(got.solution, want.solution, 1e-8)
    _same(got.rank, want.rank)
    assert got.residuals.shape == want.residuals.shape
    M = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    e, t = ember.tensor(M), torch.tensor(M)
    for name in ("det", "inverse", "logdet", "pinverse"):
        _same(getattr(ember, name)(e), getattr(torch, name)(t), 1e-8)
        _same(getattr(e, name)(), getattr(t, name)(), 1e-8)
    spd = M @ M.T
    _same(ember.cholesky(ember.tensor(spd), upper=True), torch.cholesky(torch.tensor(spd), upper=True))
    _same(ember.slogdet(e).logabsdet, torch.slogdet(t).logabsdet)
    _same(ember.matrix_power(e, 3), torch.matrix_power(t, 3), 1e-8)
    Q, R = ember.qr(ember.tensor(A[0]), some=False)
    tQ, tR = torch.qr(torch.tensor(A[0]), some=False)
    _same(Q, tQ, 1e-8)
    _same(R, tR, 1e-8)
    U, S, V = ember.svd(ember.tensor(A[0]), some=False)
    tU, tS, tV = torch.svd(torch.tensor(A[0]), some=False)
    assert tuple(U.shape) == tuple(tU.shape) and tuple(V.shape) == tuple(tV.shape)
    _same(S, tS)
    _same(ember.linalg.diagonal(ember.tensor(A), offset=1),
          torch.linalg.diagonal(torch.tensor(A), offset=1))


def test_second_order_gradients_of_inv_and_solve_match_finite_differences():
    rng = np.random.default_rng(3)
    A = ember.tensor(rng.standard_normal((3, 3)) + 3 * np.eye(3), requires_grad=True)
    b = ember.tensor(rng.standard_normal(3))

    def grad_norm(a):
        x = ember.linalg.solve(a, b) + ember.linalg.inv(a).sum(0) + ember.linalg.det(a)
        g, = ember.autograd.grad((x * x).sum(), [a], create_graph=True)
        return (g * g).sum()

    value = grad_norm(A)
    g2, = ember.autograd.grad(value, [A])
    direction = rng.standard_normal((3, 3))
    eps = 1e-6
    plus = grad_norm(ember.tensor(A.detach().numpy() + eps * direction, requires_grad=True))
    minus = grad_norm(ember.tensor(A.detach().numpy() - eps * direction, requires_grad=True))
    numeric = (plus.item() - minus.item()) / (2 * eps)
    assert abs(float((g2.numpy() * direction).sum()) - numeric) < 1e-5 * max(1, abs(numeric))
