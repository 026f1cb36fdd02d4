"""Complex tensors against PyTorch: promotion, printing, the ops that take them, their
gradients (PyTorch's convention: z.grad = dL/dx + i dL/dy), a finite-difference check
that needs no PyTorch, ember.jit, saving, and the errors."""
import numpy as np
import pytest

import ember
from ember import dtypes as dt

RNG = np.random.default_rng(5)


def _complex(shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


# Promotion ------------------------------------------------------------------------------
def test_promotion_table_matches_torch():
    torch = pytest.importorskip("torch")
    every = dt.ALL + dt.COMPLEX
    for a in every:
        for b in every:
            expected = str(torch.promote_types(getattr(torch, a.name), getattr(torch, b.name)))
            assert dt.promote_types(a, b).name == expected.split(".")[1], (a, b)


@pytest.mark.parametrize("make", [
    lambda lib: lib.ones(2, dtype=lib.float32) + 1j,
    lambda lib: lib.ones(2, dtype=lib.float64) + 1j,
    lambda lib: lib.ones(2, dtype=lib.int64) * (2 - 1j),
    lambda lib: lib.ones(2, dtype=lib.complex64) + lib.tensor(1.5, dtype=lib.float64),
    lambda lib: lib.ones(2, dtype=lib.float32) + lib.tensor(1j, dtype=lib.complex128),
    lambda lib: lib.ones(2, dtype=lib.float64) * lib.tensor(1j, dtype=lib.complex64),
    lambda lib: lib.tensor([1, 2.5 + 1j]),
    lambda lib: lib.tensor(3j),
])
def test_result_dtypes_and_values_match_torch(make):
    torch = pytest.importorskip("torch")
    got, want = make(ember), make(torch)
    assert got.dtype.name == str(want.dtype).split(".")[1]
    np.testing.assert_allclose(got.numpy(), want.numpy())


def test_printing_matches_torch():
    torch = pytest.importorskip("torch")
    for values, dtype in (([1 + 2j, 3 - 1.5j], "complex64"), ([1 + 2j, 3 - 1.5j], "complex128"),
                          ([1e-5 + 2j, 300000 - 1.5j], "complex64"),
                          ([[1 + 2j, 3 - 1.5j], [0.25j, -1]], "complex64"),
                          (1 + 2j, "complex64"), ([complex("nan+1j"), complex("inf-2j")],
                                                   "complex64")):
        ours = repr(ember.tensor(values, dtype=getattr(ember, dtype)))
        theirs = repr(torch.tensor(values, dtype=getattr(torch, dtype)))
        assert ours == theirs.replace("torch.", "ember.")
    # line breaks (elements per line), scientific notation, summarised long tensors
    for values in (RNG.standard_normal(20) * 100 + 1j * RNG.standard_normal(20),
                   _complex((3, 9), np.complex64), RNG.standard_normal(2000) + 1j,
                   np.array([0, 3.4e38j + 2, -3.4e38], np.complex64)):
        ours = repr(ember.from_numpy(values))
        assert ours == repr(torch.from_numpy(values)).replace("torch.", "ember.")


# Forward values -------------------------------------------------------------------------
UNARY = ["neg", "exp", "log", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh",
         "reciprocal", "square", "abs", "angle", "sgn", "real", "conj", "conj_physical",
         "view_as_real", "isnan", "isfinite", "sum", "mean", "prod", "cumsum", "sigmoid",
         "rsqrt", "expm1", "log1p"]


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_unary_ops_match_torch(name, dtype):
    torch = pytest.importorskip("torch")
    x = _complex((3, 4), getattr(np, dtype))
    x[0, 0] = 0
    extra = {"cumsum": {"dim": 1}}.get(name, {})
    got = getattr(ember, name)(ember.from_numpy(x.copy()), **extra)
    want = getattr(torch, name)(torch.from_numpy(x.copy()), **extra)
    assert got.dtype.name == str(want.dtype).split(".")[1]
    tol = 1e-5 if dtype == "complex64" else 1e-12
    np.testing.assert_allclose(got.numpy(), want.resolve_conj().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow", "matmul", "eq", "ne"])
def test_binary_ops_match_torch(op):
    torch = pytest.importorskip("torch")
    a, b = _complex((4, 4)), _complex((4, 4))
    got = getattr(ember, op)(ember.from_numpy(a), ember.from_numpy(b))
    want = getattr(torch, op)(torch.from_numpy(a), torch.from_numpy(b))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    mixed = ember.from_numpy(a.real.astype(np.float32)) * ember.from_numpy(b.astype(np.complex64))
    assert mixed.dtype is ember.complex64


def test_parts_and_constructors_match_torch():
    torch = pytest.importorskip("torch")
    x, y = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))
    for fn in ("complex", "polar"):
        got = getattr(ember, fn)(ember.from_numpy(x), ember.from_numpy(y))
        want = getattr(torch, fn)(torch.from_numpy(x), torch.from_numpy(y))
        assert got.dtype is ember.complex128
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    pairs = RNG.standard_normal((2, 3, 2)).astype(np.float32)
    z = ember.view_as_complex(ember.from_numpy(pairs))
    np.testing.assert_array_equal(z.numpy(), torch.view_as_complex(torch.from_numpy(pairs)))
    np.testing.assert_array_equal(z.real.numpy(), pairs[..., 0])
    np.testing.assert_array_equal(z.imag.numpy(), pairs[..., 1])
    np.testing.assert_array_equal(ember.view_as_real(z).numpy(), pairs)
    # shape ops, indexing and reductions keep the numbers
    w = ember.from_numpy(_complex((2, 3, 4)))
    t = torch.from_numpy(w.numpy())
    np.testing.assert_array_equal(w.permute(2, 0, 1)[1:, :, ::2].numpy(),
                                  t.permute(2, 0, 1)[1:, :, ::2].numpy())
    np.testing.assert_allclose(ember.cat([w, w * 2j], 1).sum(2).numpy(),
                               torch.cat([t, t * 2j], 1).sum(2).numpy(), rtol=1e-12)
    np.testing.assert_allclose(ember.einsum("abc,abd->cd", w, w).numpy(),
                               torch.einsum("abc,abd->cd", t, t).numpy(), rtol=1e-12)


# Gradients ------------------------------------------------------------------------------
GRAD_CASES = {
    "abs": lambda lib, z, w: lib.abs(z * w).sum(),
    "abs2": lambda lib, z, w: (z * z.conj()).real.sum(),
    "angle": lambda lib, z, w: lib.angle(z + w).sum(),
    "real_imag": lambda lib, z, w: (z * w).real.sum() + 3 * (z / w).imag.sum(),
    "holomorphic": lambda lib, z, w: lib.view_as_real(
        lib.exp(z) * lib.sin(w) + lib.sqrt(z) / lib.tanh(z) + z.pow(3) - 1 / z).sum(),
    "matmul": lambda lib, z, w: lib.abs(z @ w @ z).sum(),
    "sum_mean": lambda lib, z, w: (lib.abs(z.sum(0)) ** 2).sum() + lib.real(z.mean() * w[0, 0]),
    "index_cat": lambda lib, z, w: lib.abs(lib.cat([z[1:], z[:1] * w[0]], 0)).sum(),
    "sgn_log": lambda lib, z, w: lib.view_as_real(lib.sgn(z) * lib.log(z * w)).sum(),
}


@pytest.mark.parametrize("case", list(GRAD_CASES))
def test_gradients_match_torch(case):
    torch = pytest.importorskip("torch")
    z0, w0 = _complex((3, 3)), _complex((3, 3))
    fn = GRAD_CASES[case]
    z, w = ember.from_numpy(z0.copy()).requires_grad_(), ember.from_numpy(w0.copy())
    fn(ember, z, w).backward()
    tz, tw = torch.from_numpy(z0.copy()).requires_grad_(), torch.from_numpy(w0.copy())
    fn(torch, tz, tw).backward()
    np.testing.assert_allclose(z.grad.numpy(), tz.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_gradients_of_real_inputs_through_complex_values_match_torch():
    torch = pytest.importorskip("torch")
    x0, y0 = RNG.standard_normal(5), RNG.standard_normal(5)

    def fn(lib, x, y):
        z = lib.complex(x, y) * lib.polar(y.abs() + 0.5, x)
        return lib.abs(z).sum() + lib.view_as_real(x.to(lib.complex128) * 1j).pow(2).sum()
    x, y = (ember.from_numpy(v.copy()).requires_grad_() for v in (x0, y0))
    fn(ember, x, y).backward()
    tx, ty = (torch.from_numpy(v.copy()).requires_grad_() for v in (x0, y0))
    fn(torch, tx, ty).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-10)
    assert x.grad.dtype is ember.float64


@pytest.mark.parametrize("case", ["abs", "angle", "holomorphic", "matmul", "sgn_log"])
def test_gradients_match_finite_differences(case):
    """dL/dx + i dL/dy by central differences on each part of each element."""
    fn = GRAD_CASES[case]
    z0, w0 = _complex((3, 3)), _complex((3, 3))
    w = ember.from_numpy(w0)
    z = ember.from_numpy(z0.copy()).requires_grad_()
    fn(ember, z, w).backward()

    def loss(values):
        with ember.no_grad():
            return float(fn(ember, ember.from_numpy(values), w))
    expected = np.zeros_like(z0)
    h = 1e-6
    for index in np.ndindex(z0.shape):
        for unit in (1, 1j):
            up, down = z0.copy(), z0.copy()
            up[index] += h * unit
            down[index] -= h * unit
            expected[index] += unit * (loss(up) - loss(down)) / (2 * h)
    np.testing.assert_allclose(z.grad.numpy(), expected, rtol=1e-5, atol=1e-6)


def test_compiled_equals_eager_with_gradients():
    z0 = _complex((4, 4))

    def fn(z):
        return ember.abs(ember.exp(z * 0.5) @ z + 2j).sum()
    z = ember.from_numpy(z0.copy()).requires_grad_()
    fn(z).backward()
    zc = ember.from_numpy(z0.copy()).requires_grad_()
    compiled = ember.jit(fn)
    out = compiled(zc)
    out.backward()
    np.testing.assert_allclose(float(out), float(fn(z)), rtol=1e-12)
    np.testing.assert_allclose(zc.grad.numpy(), z.grad.numpy(), rtol=1e-10)


# Saving ---------------------------------------------------------------------------------
def test_complex64_saves_and_loads_and_complex128_says_why_not(tmp_path):
    z = ember.tensor([1 + 2j, -3.5j])
    ember.save({"z": z}, tmp_path / "z.safetensors")
    back = ember.load(tmp_path / "z.safetensors")["z"]
    assert back.dtype is ember.complex64
    np.testing.assert_array_equal(back.numpy(), z.numpy())
    with pytest.raises(ember.EmberTypeError, match="complex128.*view_as_real"):
        ember.save({"z": z.to(ember.complex128)}, tmp_path / "w.safetensors")
    assert not (tmp_path / "w.safetensors").exists()


# Errors ---------------------------------------------------------------------------------
def test_unsupported_ops_name_themselves():
    z = ember.tensor([1 + 2j, 3j])
    with pytest.raises(ember.EmberTypeError, match="lt: complex tensors are not supported"):
        z < z
    with pytest.raises(ember.EmberTypeError, match="relu: complex tensors are not supported"):
        ember.relu(z)
    with pytest.raises(ember.EmberTypeError, match="clamp is not supported for complex"):
        z.clamp(0)
    with pytest.raises(ember.EmberTypeError, match="imag is not implemented for tensors "
                                                   "with non-complex dtypes"):
        ember.ones(2).imag
    with pytest.raises(ember.ShapeError, match="last dimension of size 2"):
        ember.view_as_complex(ember.ones(3))
    with pytest.raises(ember.EmberTypeError, match="same floating dtype"):
        ember.complex(ember.ones(2), ember.ones(2, dtype=ember.float64))


def test_gradient_errors():
    z = ember.tensor([1 + 2j, 3j], requires_grad=True)
    with pytest.raises(ember.EmberError, match="only for real scalar outputs"):
        (z * z).sum().backward()
    assert not ember.isnan(z).any()  # (forward only, and not differentiable: fine)
    with pytest.raises(ember.EmberTypeError, match="masked_select: the gradient for complex "
                                                   "tensors is not implemented"):
        z.masked_select(ember.tensor([True, False]))
    with ember.no_grad():
        np.testing.assert_array_equal(z.masked_select(ember.tensor([True, False])).numpy(),
                                      [1 + 2j])
    with pytest.raises(ember.EmberTypeError, match="floating point and complex"):
        ember.tensor([1, 2]).requires_grad_()


# More ops: conjugating forms, statistics, norms, fills, random --------------------------
MORE = {
    "vdot": lambda lib, a: lib.vdot(a[0], a[1]),
    "mH": lambda lib, a: a.mH,
    "H": lambda lib, a: a.H,
    "adjoint": lambda lib, a: a.adjoint(),
    "var": lambda lib, a: a.var(1),
    "std": lambda lib, a: a.std(),
    "var_mean": lambda lib, a: lib.var_mean(a, 0)[0],
    "vector_norm": lambda lib, a: lib.linalg.vector_norm(a, 3),
    "matrix_norm": lambda lib, a: lib.linalg.matrix_norm(a, 1),
    "fro": lambda lib, a: lib.linalg.norm(a),
    "masked_fill": lambda lib, a: a.masked_fill(a.real > 0, 1j),
    "pad": lambda lib, a: lib.nn.functional.pad(a, (1, 2)),
    "asin": lambda lib, a: a.asin() + a.acos() + a.atan(),
    "inv": lambda lib, a: lib.linalg.inv(a),
    "det": lambda lib, a: lib.linalg.det(a),
    "solve": lambda lib, a: lib.linalg.solve(a, a[:, :1] + 1j),
    "lerp": lambda lib, a: lib.lerp(a, a.flip(0), 0.3) + lib.lerp(a, a.T, a * 0.4),
    "exp2": lambda lib, a: lib.exp2(a),
    "float_power": lambda lib, a: lib.float_power(a.to(lib.complex64), 2) +
    lib.float_power(a.real, 1j),
    "logsumexp": lambda lib, a: lib.logsumexp(a * 3, 1) + lib.logsumexp(a, (0, 1)),
    "nan_to_num": lambda lib, a: lib.nan_to_num(
        lib.where(a.real > 0.5, a / 0, a), 1.0, 2.0, -3.0),
}


@pytest.mark.parametrize("name", list(MORE))
def test_more_ops_match_torch(name):
    torch = pytest.importorskip("torch")
    a = _complex((3, 3))
    got, want = MORE[name](ember, ember.from_numpy(a.copy())), MORE[name](
        torch, torch.from_numpy(a.copy()))
    assert got.dtype.name == str(want.dtype).split(".")[1]
    np.testing.assert_allclose(got.numpy(), want.resolve_conj().numpy(), rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("name", ["var", "std", "vector_norm", "fro", "asin", "inv", "det",
                                  "solve", "mH", "lerp", "exp2", "logsumexp"])
def test_more_gradients_match_torch(name):
    torch = pytest.importorskip("torch")
    a = _complex((3, 3))
    grads = []
    for lib in (ember, torch):
        z = lib.from_numpy(a.copy()).requires_grad_()
        out = MORE[name](lib, z)
        (lib.abs(out) ** 2).sum().backward()
        grads.append(z.grad.detach().resolve_conj().numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-9, atol=1e-11)


def test_complex_randn_has_parts_of_variance_one_half():
    ember.manual_seed(0)
    z = ember.randn(20000, dtype=ember.complex64)
    assert z.dtype is ember.complex64 and tuple(z.shape) == (20000,)
    parts = ember.view_as_real(z).numpy()
    np.testing.assert_allclose(parts.var(0), [0.5, 0.5], rtol=0.05)
    assert abs(parts.mean()) < 0.02


def test_assert_close_compares_complex_tensors_with_tolerances():
    torch = pytest.importorskip("torch")
    a = ember.tensor([1 + 2j, 3j])
    ember.testing.assert_close(a, a + 1e-7j)  # within complex64's tolerances
    messages = []
    for lib, x in ((ember, a), (torch, torch.from_numpy(a.numpy()))):
        with pytest.raises(AssertionError) as info:
            lib.testing.assert_close(x, x + 1e-3j)
        messages.append(str(info.value).splitlines()[:4])
    assert messages[0] == messages[1]


def _factor(lib, a):
    lower = a.tril(-1)
    return lower + lib.diag(lib.abs(a.diagonal()) + 1).to(a.dtype)


COMPOSITES = {
    "vecdot": lambda lib, a, t: lib.linalg.vecdot(a, a.flip(0)),
    "householder": lambda lib, a, t: lib.linalg.householder_product(a[:, :2], t),
    # (a Cholesky factor has a real positive diagonal; LAPACK's potri assumes one)
    "cholesky_solve": lambda lib, a, t: lib.cholesky_solve(a[:, :2], _factor(lib, a)),
    "cholesky_solve_upper": lambda lib, a, t: lib.cholesky_solve(
        a[:, :2], _factor(lib, a).mH, True),
    "cholesky_inverse": lambda lib, a, t: lib.cholesky_inverse(_factor(lib, a)),
    "isreal": lambda lib, a, t: lib.isreal(lib.where(a.real > 0, a.real.to(a.dtype), a)),
    "solve_triangular": lambda lib, a, t: lib.linalg.solve_triangular(a.triu(), a,
                                                                      upper=True),
    "multi_dot": lambda lib, a, t: lib.linalg.multi_dot([a, a.mH, a]),
    "kron_trace": lambda lib, a, t: lib.kron(a, a).trace(),
    "cov": lambda lib, a, t: lib.cov(a, aweights=lib.abs(a[0])),
    "corrcoef": lambda lib, a, t: lib.corrcoef(a),
}


@pytest.mark.parametrize("name", list(COMPOSITES))
def test_composites_conjugate_where_torch_does(name):
    torch = pytest.importorskip("torch")
    a, t = _complex((3, 3)), _complex((2,))
    got = COMPOSITES[name](ember, ember.from_numpy(a), ember.from_numpy(t))
    want = COMPOSITES[name](torch, torch.from_numpy(a), torch.from_numpy(t))
    np.testing.assert_allclose(got.numpy(), want.resolve_conj().numpy(), rtol=1e-9,
                               atol=1e-12)


def test_converting_to_real_warns_and_an_op_never_drops_imaginary_parts_silently():
    z = ember.tensor([1 + 2j, -3j])
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        x = z.to(ember.float64)
    assert x.dtype is ember.float64 and x.tolist() == [1.0, 0.0]
    from ember.ops.elementwise import cast  # (what an op for real numbers casts with)
    with pytest.raises(ember.EmberTypeError, match="complex64 tensor to float32 would "
                                                   "discard the imaginary parts"):
        cast(z, ember.float32)


_IDX = np.array([[0, 1, 1, 3]] * 4)
STRUCTURAL = {
    "gather": lambda lib, z: z.gather(1, lib.from_numpy(_IDX)),
    "take": lambda lib, z: lib.take(z, lib.tensor([0, 5, 5])),
    "unfold": lambda lib, z: z.unfold(1, 2, 1),
    "scatter": lambda lib, z: z.scatter(1, lib.from_numpy(_IDX[:, :2]), z[:, :2]),
    "scatter_add": lambda lib, z: z.scatter_add(1, lib.from_numpy(_IDX[:, :2]), z[:, :2]),
    "masked_scatter": lambda lib, z: z.masked_scatter(z.real > 0, z * 2),
    "index_fill": lambda lib, z: z.index_fill(0, lib.tensor([1]), 2j),
    "index_copy": lambda lib, z: z.index_copy(0, lib.tensor([1, 0]), z[2:]),
    "index_put": lambda lib, z: z.index_put((lib.tensor([0, 2]),), z[1:3] * 2),
    "setitem": lambda lib, z: (lambda c: (c.__setitem__(slice(0, 2), z[2:] * 3), c)[1])(
        z.clone()),
    "as_strided": lambda lib, z: z.as_strided((3, 3), (1, 1)),
    "pad_repeat": lambda lib, z: lib.nn.functional.pad(z, (1, 2, 0, 1)).repeat(2, 1),
    "diag": lambda lib, z: lib.diag_embed(z.diagonal(1)),
    "cumprod": lambda lib, z: z.cumprod(1) + z.prod(0),
}


@pytest.mark.parametrize("name", list(STRUCTURAL))
def test_structural_ops_values_and_gradients_match_torch(name):
    torch = pytest.importorskip("torch")
    a = _complex((4, 4))
    results = []
    for lib in (ember, torch):
        z = lib.from_numpy(a.copy()).requires_grad_()
        out = STRUCTURAL[name](lib, z)
        (lib.abs(out) ** 2).sum().backward()
        results.append((out.detach().resolve_conj().numpy(),
                        z.grad.detach().resolve_conj().numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


def _rope(lib, xq, xk, dim, end):
    """Rotary embeddings as LLaMA's reference code writes them, through complex numbers."""
    freqs = 1.0 / (10000.0 ** (lib.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    freqs = lib.outer(lib.arange(end).float(), freqs)
    freqs_cis = lib.polar(lib.ones_like(freqs), freqs)
    xq_ = lib.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = lib.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    shape = [d if i == 1 or i == xq_.ndim - 1 else 1 for i, d in enumerate(xq_.shape)]
    freqs_cis = freqs_cis.view(*shape)
    return (lib.view_as_real(xq_ * freqs_cis).flatten(3).type_as(xq),
            lib.view_as_real(xk_ * freqs_cis).flatten(3).type_as(xk))


def test_rotary_embeddings_through_complex_numbers_match_torch():
    torch = pytest.importorskip("torch")
    q0 = RNG.standard_normal((2, 16, 4, 32)).astype(np.float32)
    k0 = RNG.standard_normal((2, 16, 4, 32)).astype(np.float32)
    results = []
    for lib in (ember, torch):
        q, k = (lib.from_numpy(v.copy()).requires_grad_() for v in (q0, k0))
        a, b = _rope(lib, q, k, 32, 16)
        ((a * b).sum() + a.pow(2).sum()).backward()
        results.append((a.detach().numpy(), q.grad.numpy(), k.grad.numpy()))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    compiled = ember.jit(lambda q, k: _rope(ember, q, k, 32, 16)[0])
    np.testing.assert_allclose(compiled(ember.from_numpy(q0), ember.from_numpy(k0)).numpy(),
                               results[0][0], rtol=1e-6, atol=1e-6)


def test_real_imag_and_view_as_real_are_views_that_write_through_with_gradients():
    torch = pytest.importorskip("torch")
    a = _complex((3, 4))

    def run(lib):
        z = lib.from_numpy(a.copy()).requires_grad_()
        w = z.clone() * 1
        w.real.mul_(2)
        w.imag[0].add_(3)
        lib.view_as_real(w)[..., 1].mul_(0.5)
        ((lib.abs(w) ** 2).sum() + w.real.sum() * 2).backward()
        plain = lib.from_numpy(a.copy())
        plain.real.zero_()
        lib.view_as_real(plain)[0, 0, 1] = 7.0
        return w.detach().numpy(), z.grad.resolve_conj().numpy(), plain.numpy()
    for ours, theirs in zip(run(ember), run(torch)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
    z = ember.tensor([1 + 2j])
    assert z.real._base is z and z.imag._version is z._version


def test_view_as_complex_is_a_view_and_refuses_layouts_torch_refuses():
    torch = pytest.importorskip("torch")
    x = ember.randn(3, 4, 2)
    z = ember.view_as_complex(x)
    z.mul_(2j)
    np.testing.assert_array_equal(ember.view_as_real(z).numpy(), x.numpy())
    assert z._base is x
    base_np = np.arange(60, dtype=np.float32)
    for shape, stride, offset in (((4, 3, 2), (6, 1, 3), 0), ((3, 2), (5, 1), 1),
                                  ((3, 2), (3, 1), 0), ((3, 2), (4, 1), 0)):
        theirs = ours = "ok"
        try:
            torch.view_as_complex(torch.from_numpy(base_np).as_strided(shape, stride, offset))
        except RuntimeError:
            theirs = "error"
        try:
            ember.view_as_complex(ember.from_numpy(base_np).as_strided(shape, stride, offset))
        except ember.EmberError:
            ours = "error"
        assert ours == theirs, (shape, stride, offset)
