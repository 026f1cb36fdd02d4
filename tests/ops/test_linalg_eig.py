"""linalg.eig and linalg.eigvals against PyTorch: complex values and vectors (LAPACK's
geev on both sides; each vector up to its phase, which LAPACK builds may choose
differently), gradients for losses that do not depend on the eigenvectors'
phases, and the errors."""
import numpy as np
import pytest

import ember

RNG = np.random.default_rng(11)


def _matrix(shape, dtype):
    a = RNG.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * RNG.standard_normal(shape)
    return a.astype(dtype)


def _loss_and_grad(lib, a, loss, w):
    """(the loss of a copy of ``a`` as a leaf, its gradient) in ``lib``."""
    A = lib.from_numpy(a.copy()).requires_grad_()
    out = loss(lib, A, lib.from_numpy(w))
    out.backward()
    return out.item(), A.grad.detach().resolve_conj().numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (1, 1)])
def test_eig_matches_torch_and_diagonalises(dtype, shape):
    torch = pytest.importorskip("torch")
    a = _matrix(shape, dtype)
    L, V = ember.linalg.eig(ember.from_numpy(a))
    tL, tV = torch.linalg.eig(torch.from_numpy(a))
    assert L.dtype.name == str(tL.dtype).split(".")[1] and V.dtype.name == L.dtype.name
    tol = 1e-4 if np.dtype(dtype).itemsize <= 8 else 1e-10
    np.testing.assert_allclose(L.numpy(), tL.numpy(), rtol=tol, atol=tol)
    # each eigenvector up to its phase (LAPACK builds may differ in it)
    ours, theirs = V.numpy(), tV.numpy()
    phase = np.sum(np.conj(theirs) * ours, axis=-2, keepdims=True)
    np.testing.assert_allclose(np.abs(phase), 1, rtol=tol)
    np.testing.assert_allclose(ours, theirs * phase / np.abs(phase), rtol=tol, atol=tol)
    np.testing.assert_allclose(a @ V.numpy(), V.numpy() * L.numpy()[..., None, :],
                               rtol=tol, atol=tol)
    np.testing.assert_allclose(ember.linalg.eigvals(ember.from_numpy(a)).numpy(), L.numpy())


LOSSES = {
    "values": lambda lib, L, V, W: lib.abs(L * W[..., 0, :]).sum(),
    "vectors": lambda lib, L, V, W: lib.abs(V * W).sum(),
    "both": lambda lib, L, V, W: (lib.abs(V) ** 2 * W.real).sum() + (L * L).real.sum(),
}


@pytest.mark.parametrize("loss", list(LOSSES))
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_eig_gradients_match_torch(loss, dtype):
    torch = pytest.importorskip("torch")
    a = _matrix((2, 4, 4), dtype)
    w = _matrix((2, 4, 4), np.complex128)
    grads = []
    for lib in (ember, torch):
        A = lib.from_numpy(a.copy()).requires_grad_()
        L, V = lib.linalg.eig(A)
        LOSSES[loss](lib, L, V, lib.from_numpy(w)).backward()
        grads.append(A.grad.detach().numpy())
    assert grads[0].dtype == a.dtype
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-8, atol=1e-10)


def test_eigvals_gradient_matches_finite_differences():
    a = _matrix((3, 3), np.float64)
    w = _matrix((3,), np.complex128)

    def loss(values):
        L = ember.linalg.eigvals(ember.from_numpy(values))
        return ember.abs(L * ember.from_numpy(w)).sum()
    A = ember.from_numpy(a.copy()).requires_grad_()
    loss_t = ember.abs(ember.linalg.eigvals(A) * ember.from_numpy(w)).sum()
    loss_t.backward()
    expected = np.zeros_like(a)
    h = 1e-6
    for index in np.ndindex(a.shape):
        up, down = a.copy(), a.copy()
        up[index] += h
        down[index] -= h
        with ember.no_grad():
            expected[index] = (float(loss(up)) - float(loss(down))) / (2 * h)
    np.testing.assert_allclose(A.grad.numpy(), expected, rtol=1e-5, atol=1e-7)


def test_eig_errors():
    with pytest.raises(ember.ShapeError, match="linalg.eig: A must be batches of square"):
        ember.linalg.eig(ember.ones(2, 3))
    with pytest.raises(ember.EmberTypeError, match="linalg.eigvals: Expected a floating point "
                                                   "or complex tensor"):
        ember.linalg.eigvals(ember.ones(2, 2, dtype=ember.int64))


HERMITIAN = {
    "eigvalsh": lambda lib, A, W: (lib.linalg.eigvalsh(A) * W.real[..., 0, :]).sum(),
    "eigh": lambda lib, A, W: lib.abs(lib.linalg.eigh(A)[1] * W).sum() +
    lib.linalg.eigh(A)[0].sum(),
    "cholesky": lambda lib, A, W: lib.abs(lib.linalg.cholesky(A) * W).sum(),
    "cholesky_upper": lambda lib, A, W: lib.abs(lib.linalg.cholesky(A, upper=True) * W).sum(),
}


@pytest.mark.parametrize("name", list(HERMITIAN))
def test_hermitian_complex_matrices_match_torch(name):
    """eigh (real eigenvalues, complex eigenvectors) and cholesky of complex Hermitian
    positive-definite matrices, values and gradients."""
    torch = pytest.importorskip("torch")
    a = _matrix((2, 4, 4), np.complex128)
    h = a @ np.conj(np.swapaxes(a, -1, -2)) + 4 * np.eye(4)
    w = _matrix((2, 4, 4), np.complex128)
    results = [_loss_and_grad(lib, h, HERMITIAN[name], w) for lib in (ember, torch)]
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-12)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-9, atol=1e-12)
    L, V = ember.linalg.eigh(ember.from_numpy(h))
    assert L.dtype is ember.float64 and V.dtype is ember.complex128


@pytest.mark.parametrize("shape", [(5, 3), (3, 3), (3, 5), (2, 4, 3)])
def test_qr_of_complex_matrices_matches_torch(shape):
    torch = pytest.importorskip("torch")
    a, w = _matrix(shape, np.complex128), _matrix(shape, np.complex128)
    results = []
    for lib in (ember, torch):
        A = lib.from_numpy(a.copy()).requires_grad_()
        Q, R = lib.linalg.qr(A)
        W = lib.from_numpy(w)
        loss = (lib.abs(Q) ** 2 * W[..., :Q.shape[-1]].real).sum() + \
            lib.abs(R * W[..., :R.shape[-2], :]).sum()
        loss.backward()
        results.append((Q.detach().resolve_conj().numpy(), R.detach().resolve_conj().numpy(),
                        A.grad.detach().resolve_conj().numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)


SVD_BASED = {
    "svd": lambda lib, A, B: lib.abs((lambda u, s, vh: (u @ vh) * s.sum())(
        *lib.linalg.svd(A, full_matrices=False))).sum(),
    "svd_full": lambda lib, A, B: (lambda u, s, vh: (lib.abs(u) ** 2).sum(0).sum() +
                                   s.sum() + (lib.abs(vh) ** 3).sum())(*lib.linalg.svd(A)),
    "svdvals": lambda lib, A, B: lib.linalg.svdvals(A).pow(3).sum(),
    "pinv": lambda lib, A, B: (lib.abs(lib.linalg.pinv(A) * B.mT) ** 2).sum(),
    "lstsq": lambda lib, A, B: lib.abs(lib.linalg.lstsq(A, B).solution).sum(),
    "cond": lambda lib, A, B: lib.linalg.cond(A),
    "nuclear": lambda lib, A, B: lib.linalg.matrix_norm(A, "nuc"),
    "spectral": lambda lib, A, B: lib.linalg.matrix_norm(A, 2),
}


@pytest.mark.parametrize("name", list(SVD_BASED))
@pytest.mark.parametrize("shape", [(4, 3), (3, 5)])
def test_svd_based_functions_of_complex_matrices_match_torch(name, shape):
    torch = pytest.importorskip("torch")
    a, b = _matrix(shape, np.complex128), _matrix(shape, np.complex128)
    results = [_loss_and_grad(lib, a, SVD_BASED[name], b) for lib in (ember, torch)]
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-10)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-8, atol=1e-11)


SLOGDET = {
    "logabsdet": lambda lib, A, W: lib.linalg.slogdet(A)[1].sum(),
    "sign": lambda lib, A, W: (lib.linalg.slogdet(A)[0] * W).real.sum(),
    "both": lambda lib, A, W: (lambda s, l: (s * W).imag.sum() + (l ** 2).sum())(
        *lib.linalg.slogdet(A)),
    "logdet": lambda lib, A, W: lib.abs(lib.logdet(A) * W).sum(),
}


@pytest.mark.parametrize("name", list(SLOGDET))
def test_slogdet_and_logdet_of_complex_matrices_match_torch(name):
    """The sign of a complex matrix's determinant is a phase, with a gradient."""
    torch = pytest.importorskip("torch")
    a, w = _matrix((2, 3, 3), np.complex128), _matrix((2,), np.complex128)
    results = [_loss_and_grad(lib, a, SLOGDET[name], w) for lib in (ember, torch)]
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-12)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-9, atol=1e-12)
    sign, logabs = ember.linalg.slogdet(ember.from_numpy(a))
    assert sign.dtype is ember.complex128 and logabs.dtype is ember.float64
