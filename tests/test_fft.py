"""ember.fft against torch.fft: values, dtypes and gradients of every transform (float32,
float64, complex64 and complex128 inputs; every norm; n/s cropping and zero-padding;
negative and several dims; size-1 dims; transposed inputs), the frequencies and shifts,
double backward, ember.jit, errors; and, without PyTorch, round trips and a
finite-difference gradient."""
import numpy as np
import pytest

import ember

try:
    import torch
except ImportError:  # the torch comparisons skip; the rest still runs
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

NORMS = (None, "backward", "ortho", "forward")
C2C = ("fft", "ifft", "fft2", "ifft2", "fftn", "ifftn")
R2C = ("rfft", "ihfft", "rfft2", "ihfft2", "rfftn", "ihfftn")
C2R = ("irfft", "hfft", "irfft2", "hfft2", "irfftn", "hfftn")
ONE_DIM = ("fft", "ifft", "rfft", "ihfft", "irfft", "hfft")
ALL_DTYPES = ("float32", "float64", "complex64", "complex128")

# (input shape, keyword arguments, transposed input); the norms cycle through the cases
CASES_1D = [((8,), {}, False), ((7,), {}, False), ((3, 6), {"n": 4}, True),
            ((3, 5), {"n": 9}, False), ((5, 3), {"dim": 0}, True),
            ((4, 5), {"dim": -2, "n": 3}, True), ((1, 6), {"n": 1}, False),
            ((3, 1), {"n": 5}, True)]
CASES_ND = [((4, 6), {}, True), ((3, 5), {}, False), ((2, 3, 4), {"s": (5, 3)}, True),
            ((2, 3, 5), {"dim": (0, 2)}, False), ((2, 3, 4), {"s": (-1, 7), "dim": (-1, 0)}, True),
            ((1, 4, 3), {"dim": (-2, -1)}, True), ((3, 4, 2), {"s": (2, 3, 5)}, False),
            ((3, 1, 6), {"s": (4, 3), "dim": (1, 2)}, True)]


def _data(rng, shape, dtype):
    a = rng.standard_normal(shape)
    if dtype.startswith("complex"):
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _tol(dtype) -> float:
    return 1e-10 if dtype in ("float64", "complex128") else 2e-5


def _close(got, want, tol, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} vs {want.dtype}"
    scale = max(float(np.abs(want).max(initial=0.0)), 1.0)
    err = float(np.abs(got - want).max(initial=0.0)) / scale
    assert err < tol, f"{what}: relative error {err:.3g}"


def _t2n(t):
    return t.detach().resolve_conj().numpy()


def _against_torch(name, shape, dtype, kw, transposed, seed=0):
    """ember's output and leaf gradient (after the same real loss) against torch's."""
    rng = np.random.default_rng(seed)
    a = _data(rng, shape[::-1] if transposed else shape, dtype)
    leaf_e, leaf_t = ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    xe, xt = (leaf_e.mT, leaf_t.mT) if transposed else (leaf_e, leaf_t)
    if transposed and len(shape) == 3:
        xe, xt = leaf_e.permute(2, 1, 0), leaf_t.permute(2, 1, 0)
    out_t = getattr(torch.fft, name)(xt, **kw)
    out_e = getattr(ember.fft, name)(xe, **kw)
    what = f"{name}{shape} {dtype} {kw}{' transposed' if transposed else ''}"
    want = _t2n(out_t)
    _close(out_e.detach().numpy(), want, _tol(dtype), what)
    w = _data(rng, want.shape, want.dtype.name)
    ((out_e * ember.tensor(w)).real.sum()).backward()
    ((out_t * torch.tensor(w)).real.sum()).backward()
    _close(leaf_e.grad.numpy(), _t2n(leaf_t.grad), _tol(dtype), what + " grad")


def _dtypes(name):
    return ("float32", "float64") if name in R2C else ALL_DTYPES


@needs_torch
@pytest.mark.parametrize("name,dtype", [(n, d) for n in C2C + R2C + C2R for d in _dtypes(n)])
def test_values_and_gradients_match_torch(name, dtype):
    cases = CASES_1D if name in ONE_DIM else CASES_ND
    for i, (shape, kw, transposed) in enumerate(cases):
        if name in C2R:  # (a size-1 last dim has no default output length)
            dims = kw.get("dim", -1 if name in ONE_DIM else (-2, -1) if "2" in name else None)
            last = dims if isinstance(dims, int) else -1 if dims is None else dims[-1]
            if shape[last] == 1 and "n" not in kw and "s" not in kw:
                continue
        if name.endswith("2") and "s" in kw and "dim" not in kw and len(kw["s"]) != 2:
            continue
        _against_torch(name, shape, dtype, dict(kw, norm=NORMS[i % 4]), transposed, seed=i)


@needs_torch
@pytest.mark.parametrize("name", C2C + R2C + C2R)
@pytest.mark.parametrize("norm", NORMS)
def test_every_norm(name, norm):
    kw = {"n": 7} if name in ONE_DIM else {"s": (3, 7)} if "2" in name else {"s": (2, 3, 7)}
    _against_torch(name, (2, 4, 6), "float64", dict(kw, norm=norm), False)


@needs_torch
@pytest.mark.parametrize("name", ["fft", "rfft", "hfft", "fftn", "irfftn"])
def test_integer_and_bool_inputs_use_the_default_dtype(name):
    for a in (np.arange(6).reshape(2, 3), np.array([[True, False, True, True]])):
        want = getattr(torch.fft, name)(torch.tensor(a))
        got = getattr(ember.fft, name)(ember.tensor(a))
        _close(got.numpy(), _t2n(want), 1e-6, name)
    prior = ember.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    try:
        assert getattr(ember.fft, name)(ember.tensor([1, 2, 3, 4])).dtype.name in (
            "complex128", "float64")
    finally:
        ember.set_default_dtype(prior)


@needs_torch
@pytest.mark.parametrize("name,kw", [("rfft", {"n": 6}), ("irfft", {"n": 5}),
                                     ("fft", {"norm": "ortho"}), ("hfft", {}),
                                     ("ihfft", {"n": 8}), ("irfft2", {"s": (4, 5)})])
def test_double_backward_matches_torch(name, kw):
    a = np.random.default_rng(1).standard_normal((3, 7))
    results = []
    for lib in (ember, torch):
        x = lib.tensor(a, requires_grad=True)
        y = getattr(lib.fft, name)(x, **kw)
        parts = lib.view_as_real(y.resolve_conj()) if y.dtype.is_complex else y
        loss = (parts ** 3).sum()
        (g,) = lib.autograd.grad(loss, x, create_graph=True)
        (g ** 2).sum().backward()
        results.append((g.detach().numpy(), x.grad.numpy()))
    (ge, gge), (gt, ggt) = results
    _close(ge, gt, 1e-10, name + " grad")
    _close(gge, ggt, 1e-10, name + " grad of grad")


@needs_torch
def test_frequencies_match_torch():
    for fn in ("fftfreq", "rfftfreq"):
        for n, d in ((5, 1.0), (8, 0.25), (1, 2.0), (0, 1.0), (7, 3)):
            got, want = getattr(ember.fft, fn)(n, d), getattr(torch.fft, fn)(n, d)
            assert got.dtype is ember.float32 and got.shape == want.shape
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)  # (nan: n=0)
        got = getattr(ember.fft, fn)(6, dtype=ember.float64, requires_grad=True)
        assert got.dtype is ember.float64 and got.requires_grad
        _close(got.detach().numpy(), getattr(torch.fft, fn)(6, dtype=torch.float64).numpy(),
               1e-15, fn)


@needs_torch
def test_shifts_match_torch():
    a = np.arange(30).reshape(5, 6)
    for fn in ("fftshift", "ifftshift"):
        for dim in (None, 0, -1, (0, 1), (1,)):
            got = getattr(ember.fft, fn)(ember.tensor(a), dim=dim)
            want = getattr(torch.fft, fn)(torch.tensor(a), dim=dim)
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    z = np.random.default_rng(0).standard_normal((3, 5)) * (1 + 2j)
    xe, xt = ember.tensor(z, requires_grad=True), torch.tensor(z, requires_grad=True)
    w = np.arange(15).reshape(3, 5) * (1 - 1j)
    (ember.fft.fftshift(xe) * ember.tensor(w)).real.sum().backward()
    (torch.fft.fftshift(xt) * torch.tensor(w)).real.sum().backward()
    _close(xe.grad.numpy(), xt.grad.numpy(), 1e-12, "fftshift grad")


@needs_torch
def test_out_argument():
    x = np.random.default_rng(2).standard_normal((2, 6)).astype(np.float32)
    out = ember.empty(0, dtype=ember.complex64)
    res = ember.fft.rfft(ember.tensor(x), out=out)
    assert res is out
    _close(out.numpy(), torch.fft.rfft(torch.tensor(x)).numpy(), 2e-5, "rfft out=")
    with pytest.raises(ember.EmberTypeError, match="dtype"):
        ember.fft.rfft(ember.tensor(x), out=ember.empty(2, 4))


@needs_torch
def test_autocast_runs_the_transforms_in_float32():
    a = np.random.default_rng(6).standard_normal((4, 8)).astype(np.float32)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        low = ember.tensor(a) @ ember.tensor(a).T
        got = [ember.fft.fft(low), ember.fft.irfft(low)]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low_t = torch.tensor(a) @ torch.tensor(a).T
        want = [torch.fft.fft(low_t), torch.fft.irfft(low_t)]
    for g, w in zip(got, want):
        _close(g.numpy(), _t2n(w), 2e-5, "autocast")
    with pytest.raises(ember.EmberTypeError, match="Unsupported dtype bfloat16"):
        ember.fft.fft(low)


# Without PyTorch -----------------------------------------------------------------------
def test_finite_differences():
    """Gradients of a real loss of irfftn (cropping, odd n) and of hfft (padding) of a
    complex input, against central differences in its real and imaginary parts."""
    rng = np.random.default_rng(3)
    z = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    w = rng.standard_normal((2, 5))

    def loss(arr, grad=False):
        x = ember.tensor(arr, requires_grad=grad)
        y = ember.fft.irfftn(x, s=(2, 5), norm="ortho") + ember.fft.hfft(x, n=9)[:2, 2:7]
        out = (ember.sin(y) * ember.tensor(w)).sum()
        if grad:
            out.backward()
            return x.grad.numpy()
        return out.item()

    grad = loss(z, grad=True)
    eps, numeric = 1e-6, np.zeros_like(z)
    for idx in np.ndindex(z.shape):
        for unit in (1, 1j):
            step = np.zeros_like(z)
            step[idx] = eps * unit
            numeric[idx] += unit * (loss(z + step) - loss(z - step)) / (2 * eps)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)


def test_round_trips_and_known_values():
    rng = np.random.default_rng(4)
    x = ember.tensor(rng.standard_normal((3, 5, 4)))
    for norm in NORMS:
        np.testing.assert_allclose(ember.fft.irfftn(ember.fft.rfftn(x, norm=norm), x.shape,
                                                    norm=norm).numpy(), x.numpy(), atol=1e-12)
        np.testing.assert_allclose(ember.fft.ifft(ember.fft.fft(x, norm=norm), norm=norm)
                                   .real.numpy(), x.numpy(), atol=1e-12)
        np.testing.assert_allclose(ember.fft.hfft(ember.fft.ihfft(x, norm=norm), n=4,
                                                  norm=norm).numpy(), x.numpy(), atol=1e-12)
    impulse = ember.tensor([0.0, 1.0, 0.0, 0.0])
    np.testing.assert_allclose(ember.fft.fft(impulse).numpy(), [1, -1j, -1, 1j], atol=1e-7)
    np.testing.assert_allclose(ember.fft.fft(ember.ones(4), norm="ortho").numpy(),
                               [2, 0, 0, 0], atol=1e-7)
    assert ember.fft.fft(ember.ones(2, 3, dtype=ember.float32)).dtype is ember.complex64
    assert ember.fft.irfft(ember.ones(2, 3, dtype=ember.complex128)).dtype is ember.float64
    np.testing.assert_allclose(ember.fft.fftshift(ember.fft.fftfreq(5)).numpy(),
                               [-0.4, -0.2, 0.0, 0.2, 0.4], atol=1e-7)


def test_zero_dim_empty_batch_and_size_one():
    scalar = ember.tensor(2.0)
    out = ember.fft.fftn(scalar)
    assert out.dtype is ember.complex64 and out.shape == () and out.item() == 2
    z = ember.tensor([1 + 1j])
    same = ember.fft.fftn(z, dim=())
    assert same is not z and same.numpy().tolist() == [1 + 1j]
    empty = ember.fft.rfft(ember.zeros(0, 6))
    assert empty.shape == (0, 4) and empty.dtype is ember.complex64
    assert ember.fft.irfft(ember.zeros(0, 4, dtype=ember.complex128)).shape == (0, 6)
    one = ember.fft.fft(ember.tensor([[3.0], [4.0]]), norm="forward")
    np.testing.assert_allclose(one.numpy(), [[3], [4]])


def test_jit_matches_eager():
    x = ember.tensor(np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32))

    def loss(x):
        return ember.fft.rfft(x).abs().sum()

    compiled = ember.jit(loss)
    for _ in range(2):
        np.testing.assert_allclose(compiled(x).item(), loss(x).item(), rtol=1e-6)

    def step(x):
        x = x.detach().requires_grad_(True)
        y = ember.fft.irfft(ember.fft.fft2(x, norm="ortho"), n=9)
        (y * y).sum().backward()
        return x.grad

    compiled_step = ember.jit(step)
    for _ in range(2):
        np.testing.assert_allclose(compiled_step(x).numpy(), step(x).numpy(), rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.parametrize("call,error,match", [
    (lambda x, c: ember.fft.rfft(c), ember.EmberTypeError, "rfft expects a real input"),
    (lambda x, c: ember.fft.ihfft2(c), ember.EmberTypeError, "ihfft2 expects a real input"),
    (lambda x, c: ember.fft.fft(x.half()), ember.EmberTypeError, "Unsupported dtype float16"),
    (lambda x, c: ember.fft.fft(x, n=0), ember.EmberError, r"Invalid number of data points \(0\)"),
    (lambda x, c: ember.fft.fftn(x, s=(-2, 3)), ember.EmberError, r"data points \(-2\)"),
    (lambda x, c: ember.fft.fft(ember.zeros(0)), ember.EmberError, r"data points \(0\)"),
    (lambda x, c: ember.fft.irfft(c[:, :1]), ember.EmberError, r"data points \(0\)"),
    (lambda x, c: ember.fft.fft(ember.tensor(1.0)), ember.EmberIndexError, "no dimensions"),
    (lambda x, c: ember.fft.fft(x, dim=2), ember.EmberIndexError, "out of range"),
    (lambda x, c: ember.fft.fft2(x[0]), ember.EmberIndexError, "out of range"),
    (lambda x, c: ember.fft.fftn(x, dim=(0, -2)), ember.EmberError, "must be unique"),
    (lambda x, c: ember.fft.fftn(x, s=(2,), dim=(0, 1)), ember.EmberError, "same length"),
    (lambda x, c: ember.fft.fftn(x, s=(2, 2, 2)), ember.EmberError, "3 values .* 2 dim"),
    (lambda x, c: ember.fft.rfftn(x, dim=()), ember.EmberError, "at least one axis"),
    (lambda x, c: ember.fft.fft(x, norm="xx"), ember.EmberError, "normalization mode"),
    (lambda x, c: ember.fft.fft(x, n=2.0), ember.EmberTypeError, "'n' must be int"),
    (lambda x, c: ember.fft.fft(x, dim=1.0), ember.EmberTypeError, "'dim' must be int"),
    (lambda x, c: ember.fft.fft([1.0, 2.0]), ember.EmberTypeError, "expected a Tensor"),
    (lambda x, c: ember.fft.fftfreq(-1), ember.EmberError, "negative dimension"),
    (lambda x, c: ember.fft.fftfreq(4, dtype=ember.int64), ember.EmberTypeError,
     "floating point or complex dtype"),
    (lambda x, c: ember.fft.fftshift(ember.tensor(1.0)), ember.EmberError, "no dims"),
])
def test_errors(call, error, match):
    x = ember.randn(4, 6)
    c = ember.complex(ember.randn(4, 6), ember.randn(4, 6))
    with pytest.raises(error, match=match):
        call(x, c)
