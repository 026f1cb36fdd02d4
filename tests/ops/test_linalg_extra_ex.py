"""ember.linalg's cond, householder_product, the *_ex functions, LDL, tensorinv,
tensorsolve and vander against torch.linalg and finite differences."""
import math

import numpy as np
import pytest

import ember
from .optable import OpCase, S, generate, nc, needs_torch, rand, torch

T = torch
F = ("float32", "float64")
L = ember.linalg


def _t(fn):
    return None if T is None else fn()


def r(rng, dtype, *shape):
    return rand(rng, shape, dtype)


def square(rng, dtype, *batch, n=3):
    a = rng.uniform(-1, 1, batch + (n, n)) + 3 * np.eye(n)
    return a.astype(ember.dtypes.as_dtype(dtype).np)


def _spd(lib):
    return lambda a: a @ a.mT + lib.eye(a.shape[-1], dtype=a.dtype)


def _first(fn):
    """The first result of an ``*_ex`` function (its info is checked separately)."""
    return lambda *a, **k: fn(*a, **k)[0]


CASES = [
    OpCase("cond", L.cond, _t(lambda: T.linalg.cond),
           lambda rng, d: [S(square(rng, d)), S(r(rng, d, 2, 3, 4)), S(nc(r(rng, d, 4, 3)), 2),
                           S(square(rng, d, 2), -2), S(square(rng, d, 2), "nuc")],
           dtypes=F, gradgrad=False),
    # (PyTorch's own backward of cond through inv_ex fails: its formula is the reference)
    OpCase("cond_norms", L.cond, _t(lambda: lambda a, p: T.linalg.matrix_norm(a, p) *
                                    T.linalg.matrix_norm(T.linalg.inv(a), p)),
           lambda rng, d: [S(square(rng, d, 2), p) for p in ("fro", math.inf, -math.inf, 1, -1)]
           + [S(nc(square(rng, d)), 1)], dtypes=F, gradgrad=False),
    OpCase("householder_product", L.householder_product,
           _t(lambda: T.linalg.householder_product),
           lambda rng, d: [S(r(rng, d, 4, 3), r(rng, d, 3)), S(r(rng, d, 5, 3), r(rng, d, 2)),
                           S(nc(r(rng, d, 2, 4, 4)), r(rng, d, 2, 4)),
                           S(r(rng, d, 3, 2), r(rng, d, 0))], dtypes=F),
    OpCase("inv_ex", _first(L.inv_ex), _t(lambda: _first(T.linalg.inv_ex)),
           lambda rng, d: [S(square(rng, d)), S(nc(square(rng, d, 2)))], dtypes=F),
    OpCase("solve_ex", _first(L.solve_ex), _t(lambda: _first(T.linalg.solve_ex)),
           lambda rng, d: [S(square(rng, d), r(rng, d, 3, 2)), S(square(rng, d, 2), r(rng, d, 3)),
                           S(square(rng, d), r(rng, d, 2, 3), left=False)], dtypes=F),
    OpCase("cholesky_ex", lambda a, **k: L.cholesky_ex(_spd(ember)(a), **k)[0],
           _t(lambda: lambda a, **k: T.linalg.cholesky_ex(_spd(T)(a), **k)[0]),
           lambda rng, d: [S(r(rng, d, 3, 3)), S(nc(r(rng, d, 2, 4, 4)), upper=True)],
           dtypes=F, gradgrad=False),
    OpCase("lu_factor_ex", _first(L.lu_factor_ex), _t(lambda: _first(T.linalg.lu_factor_ex)),
           lambda rng, d: [S(square(rng, d)), S(r(rng, d, 2, 4, 3)), S(r(rng, d, 3, 5))],
           dtypes=F, gradgrad=False),
    OpCase("tensorinv", L.tensorinv, _t(lambda: T.linalg.tensorinv),
           lambda rng, d: [S(square(rng, d, n=6).reshape(2, 3, 6), 2),
                           S(square(rng, d, n=4).reshape(4, 2, 2), ind=1)], dtypes=F),
    OpCase("tensorsolve", L.tensorsolve, _t(lambda: T.linalg.tensorsolve),
           lambda rng, d: [S(square(rng, d, n=6).reshape(2, 3, 6), r(rng, d, 2, 3)),
                           S(square(rng, d, n=6).reshape(6, 2, 3), r(rng, d, 2, 3), dims=(0,))],
           dtypes=F),
    OpCase("vander", L.vander, _t(lambda: T.linalg.vander),
           lambda rng, d: [S(r(rng, d, 4)), S(nc(r(rng, d, 2, 3)), N=5),
                           S(np.array([0.0, 1.5, -2.0], dtype=r(rng, d).dtype), N=4)],
           dtypes=F),
]

generate(CASES, globals())


def _same(e, t, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol)


SINGULAR = np.array([[[1.0, 2.0], [2.0, 4.0]], [[2.0, 0.0], [0.0, 3.0]],
                     [[0.0, 0.0], [0.0, 0.0]]])


@needs_torch
def test_info_matches_torch():
    A, tA = ember.tensor(SINGULAR), torch.tensor(SINGULAR)
    B, tB = ember.ones(3, 2, 1, dtype=ember.float64), torch.ones(3, 2, 1, dtype=torch.float64)
    for got, want in ((L.inv_ex(A), torch.linalg.inv_ex(tA)),
                      (L.solve_ex(A, B), torch.linalg.solve_ex(tA, tB)),
                      (L.lu_factor_ex(A), torch.linalg.lu_factor_ex(tA))):
        assert got.info.dtype is ember.int32
        assert np.array_equal(got.info.numpy(), want.info.numpy())
        _same(got[0][1], want[0][1])  # the invertible one
    _same(L.lu_factor_ex(A).pivots, torch.linalg.lu_factor_ex(tA).pivots)
    _same(L.lu_factor_ex(A).LU, torch.linalg.lu_factor_ex(tA).LU)
    assert np.isnan(L.inv_ex(A).inverse[0].numpy()).all()
    spd = np.array([[[1.0, 2.0], [2.0, 1.0]], [[4.0, 2.0], [2.0, 3.0]], [[-1.0, 0.0], [0.0, 1.0]],
                    [[1.0, 0.0], [0.0, 0.0]], [[1.0, 0.0], [0.0, math.nan]]])
    got, want = L.cholesky_ex(ember.tensor(spd)), torch.linalg.cholesky_ex(torch.tensor(spd))
    assert np.array_equal(got.info.numpy(), want.info.numpy())
    _same(got.L[1], want.L[1])
    for fn in (L.inv_ex, L.lu_factor_ex, L.cholesky_ex):  # 0-d info for one matrix
        info = fn(ember.eye(3)).info
        assert info.shape == () and info.item() == 0
    info = L.solve_ex(ember.eye(3).expand(2, 3, 3), ember.ones(4, 1, 3, 1)).info
    assert tuple(info.shape) == (2,)  # (A's batch shape, as PyTorch's)


@needs_torch
def test_check_errors_raise_as_torch():
    A = ember.tensor(SINGULAR)
    with pytest.raises(L.LinAlgError, match=r"inv_ex: \(Batch element 0\): The diagonal "
                                            r"element 2 is zero"):
        L.inv_ex(A, check_errors=True)
    with pytest.raises(L.LinAlgError, match="solve_ex.*singular"):
        L.solve_ex(A, ember.ones(3, 2, dtype=ember.float64), check_errors=True)
    with pytest.raises(L.LinAlgError, match=r"leading minor of order 1"):
        L.cholesky_ex(-ember.eye(2), check_errors=True)
    with pytest.raises(L.LinAlgError, match=r"U\[2,2\] is zero"):
        L.lu_factor_ex(A, check_errors=True)
    with pytest.raises(L.LinAlgError, match=r"Batch element 0.*D\[2,2\] is zero"):
        L.ldl_factor(ember.tensor(SINGULAR))
    assert L.inv_ex(ember.eye(2), check_errors=True).info.item() == 0


@needs_torch
def test_cond_edge_cases_match_torch():
    for p in (None, 2, -2, "fro", "nuc", 1, -1, math.inf, -math.inf):
        for a in (SINGULAR[1:] if p in (None, 2, -2, "nuc") else SINGULAR, np.zeros((2, 0, 0)),
                  np.array([[1.0, 2.0], [3.0, 4.0]])):  # (rounded singular values differ)
            got = L.cond(ember.tensor(a), p)
            want = torch.linalg.cond(torch.tensor(a), p)
            assert tuple(got.shape) == tuple(want.shape)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, equal_nan=True,
                                       err_msg=str(p))
    _same(L.cond(ember.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.5]])),
          torch.linalg.cond(torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.5]])), 1e-5)
    with pytest.raises(ember.ShapeError, match="square"):
        L.cond(ember.ones(2, 3), "fro")
    with pytest.raises(ember.EmberError, match="invalid norm type: 3"):
        L.cond(ember.eye(2), 3)


@needs_torch
def test_ldl_matches_torch():
    rng = np.random.default_rng(0)
    for trial in range(40):
        n = int(rng.integers(1, 8))
        a = rng.standard_normal((2, n, n))
        a = a + a.swapaxes(-1, -2)
        if trial % 2:
            a[..., np.arange(n), np.arange(n)] = 0.0  # forces 2x2 pivots
        got = L.ldl_factor_ex(ember.tensor(a))
        want = torch.linalg.ldl_factor_ex(torch.tensor(a))
        assert np.array_equal(got.pivots.numpy(), want.pivots.numpy())
        assert np.array_equal(got.info.numpy(), want.info.numpy())
        _same(got.LD, want.LD, 1e-9, 1e-9)
        if want.info.any():
            continue
        b = rng.standard_normal((n, 3))
        x = L.ldl_solve(got.LD, got.pivots, ember.tensor(b))
        np.testing.assert_allclose(a @ x.numpy(), np.broadcast_to(b, (2, n, 3)), atol=1e-8)
        _same(x, torch.linalg.ldl_solve(want.LD, want.pivots, torch.tensor(b)), 1e-8, 1e-8)
    LD, pivots = L.ldl_factor(ember.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=ember.float32))
    assert LD.dtype is ember.float32 and pivots.dtype is ember.int32
    a = ember.tensor([[4.0, 1.0], [1.0, 3.0]], requires_grad=True)
    assert not L.ldl_factor(a).LD.requires_grad  # (no derivative in PyTorch)
    with pytest.raises(ember.ShapeError, match="pivots"):
        L.ldl_solve(LD, pivots[:1], ember.ones(2, 1))
    with pytest.raises(TypeError, match="int32"):
        L.ldl_solve(LD, pivots.long(), ember.ones(2, 1))


@needs_torch
def test_integer_vander_and_errors():
    got = L.vander(ember.tensor([[1, 2, 3], [0, -1, 4]]))
    want = torch.linalg.vander(torch.tensor([[1, 2, 3], [0, -1, 4]]))
    assert got.dtype.name == str(want.dtype).removeprefix("torch.")
    assert np.array_equal(got.numpy(), want.numpy())
    for bad in (lambda: L.vander(ember.tensor([1.0]), N=1), lambda: L.vander(ember.tensor(2.0))):
        with pytest.raises(ember.EmberError):
            bad()
    with pytest.raises(ember.ShapeError, match="prod"):
        L.tensorinv(ember.ones(2, 3, 4), ind=1)
    with pytest.raises(ember.EmberError, match="strictly positive"):
        L.tensorinv(ember.eye(4), ind=0)
    with pytest.raises(ember.ShapeError, match="prod"):
        L.tensorsolve(ember.ones(2, 3, 4), ember.ones(2, 3))
    with pytest.raises(ember.ShapeError, match="greater than or equal to tau"):
        L.householder_product(ember.ones(4, 3), ember.ones(4))
    with pytest.raises(ember.ShapeError, match=r"input.shape\[-2\]"):
        L.householder_product(ember.ones(3, 4), ember.ones(2))
    with pytest.raises(ember.ShapeError, match="batch dimensions"):
        L.householder_product(ember.ones(2, 4, 3), ember.ones(3, 2))


def test_householder_product_of_geqrf_is_q():
    a = np.random.default_rng(1).standard_normal((5, 3))
    h, tau = np.linalg.qr(a, mode="raw")
    Q = L.householder_product(ember.tensor(np.ascontiguousarray(h.T)), ember.tensor(tau))
    np.testing.assert_allclose(np.abs(Q.numpy()), np.abs(np.linalg.qr(a)[0]), atol=1e-12)


def test_compiled_matches_eager():
    rng = np.random.default_rng(2)
    A = ember.tensor(square(rng, "float64", 2), requires_grad=True)
    B = ember.tensor(rng.standard_normal((2, 3, 2)))

    def fn(a, b):
        x, info = L.solve_ex(a, b)
        inv, _ = L.inv_ex(a)
        chol, _ = L.cholesky_ex(a @ a.mT)
        out = x.sum() + inv.sum() + chol.sum() + L.cond(a, 1).sum() + L.cond(a).sum()
        out = out + L.householder_product(a, a[..., 0]).sum() + L.vander(a[..., 0]).sum()
        return out + info.sum(), ember.autograd.grad(out, [a])[0]

    (value, grad), (cvalue, cgrad) = fn(A, B), ember.jit(fn)(A, B)
    np.testing.assert_allclose(cvalue.detach().numpy(), value.detach().numpy(), rtol=1e-10)
    np.testing.assert_allclose(cgrad.numpy(), grad.numpy(), rtol=1e-9)
