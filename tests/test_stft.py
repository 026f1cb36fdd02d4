"""ember.stft and ember.istft against torch.stft and torch.istft: values, dtypes and
gradients (input and window), padding modes, framing options, round trips, ember.jit
and errors."""
import warnings

import numpy as np
import pytest

import ember

try:
    import torch
except ImportError:  # the torch comparisons skip; the rest still runs
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


def _data(rng, shape, dtype):
    a = rng.standard_normal(shape)
    if dtype.startswith("complex"):
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _real_name(dtype):
    return {"complex64": "float32", "complex128": "float64"}.get(dtype, dtype)


def _close(got, want, tol, what):
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} vs {want.dtype}"
    err = np.abs(got - want).max(initial=0.0) / max(np.abs(want).max(initial=0.0), 1.0)
    assert err < tol, f"{what}: relative error {err:.3g}"


def _t2n(t):
    return t.detach().resolve_conj().numpy()


def _compare(fn, x, window, kw, tol, seed):
    """``fn`` (stft or istft) of ``x`` and ``window`` in ember and torch: the output and
    the gradients of both after the same real loss."""
    rng = np.random.default_rng(seed)
    xe, xt = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    we = wt = None
    if window is not None:
        we, wt = ember.tensor(window, requires_grad=True), torch.tensor(window,
                                                                         requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch: return_complex=False is deprecated)
        out_t = getattr(torch, fn)(xt, window=wt, **kw)
    out_e = getattr(ember, fn)(xe, window=we, **kw)
    want = _t2n(out_t)
    _close(out_e.detach().numpy(), want, tol, f"{fn} {kw}")
    w = _data(rng, want.shape, want.dtype.name)
    (out_e * ember.tensor(w)).real.sum().backward()
    (out_t * torch.tensor(w)).real.sum().backward()
    _close(xe.grad.numpy(), _t2n(xt.grad), tol, f"{fn} {kw} input grad")
    if window is not None:
        _close(we.grad.numpy(), _t2n(wt.grad), tol, f"{fn} {kw} window grad")


STFT_CASES = [
    ((40,), "float64", dict(n_fft=16, return_complex=True), 16, "hann_window"),
    ((2, 40), "float32", dict(n_fft=16, hop_length=5, win_length=12, return_complex=True),
     12, "hann_window"),
    ((2, 41), "float64", dict(n_fft=15, win_length=10, center=False, return_complex=True),
     10, "hamming_window"),
    ((2, 40), "float64", dict(n_fft=16, win_length=9, center=False, align_to_window=True,
                              return_complex=True), 9, "hann_window"),
    ((2, 41), "float64", dict(n_fft=16, pad_mode="constant", normalized=True,
                              return_complex=True), 16, "hann_window"),
    ((2, 41), "float64", dict(n_fft=16, pad_mode="replicate", return_complex=False), 16,
     "blackman_window"),
    ((2, 41), "float64", dict(n_fft=16, pad_mode="circular", onesided=False,
                              return_complex=True), 16, "hann_window"),
    ((2, 41), "complex128", dict(n_fft=16, hop_length=3), 16, "hann_window"),
    ((33,), "complex64", dict(n_fft=8, center=False), None, None),
    ((1, 9), "float32", dict(n_fft=8, hop_length=1, return_complex=True), None, None),
]


@needs_torch
@pytest.mark.parametrize("i", range(len(STFT_CASES)))
def test_stft_matches_torch(i):
    shape, dtype, kw, win, window_fn = STFT_CASES[i]
    rng = np.random.default_rng(i)
    x = _data(rng, shape, dtype)
    window = None if win is None else getattr(torch, window_fn)(
        win, dtype=torch.float64).numpy().astype(_real_name(dtype))
    _compare("stft", x, window, kw, 1e-10 if "128" in dtype or dtype == "float64" else 2e-5,
             i)


ISTFT_CASES = [
    ((2, 40), "float64", dict(n_fft=16), dict(), 16, "hann_window"),
    ((40,), "float32", dict(n_fft=16, hop_length=5), dict(), 16, "hann_window"),
    ((2, 41), "float64", dict(n_fft=16, center=False), dict(), 16, "hamming_window"),
    ((2, 41), "float64", dict(n_fft=16), dict(length=41), 12, "hann_window"),
    ((2, 41), "float64", dict(n_fft=16, center=False), dict(length=70), 16, "hamming_window"),
    ((2, 41), "float64", dict(n_fft=16, normalized=True), dict(length=30), 16, "hann_window"),
    ((2, 41), "complex128", dict(n_fft=16), dict(return_complex=True), 16, "hann_window"),
    ((2, 41), "complex128", dict(n_fft=16), dict(), 16, "hann_window"),
]


@needs_torch
@pytest.mark.parametrize("i", range(len(ISTFT_CASES)))
def test_istft_matches_torch(i):
    shape, dtype, skw, extra, win, window_fn = ISTFT_CASES[i]
    rng = np.random.default_rng(10 + i)
    window = getattr(torch, window_fn)(win, dtype=torch.float64).numpy().astype(
        _real_name(dtype))
    spectrum = _t2n(torch.stft(torch.tensor(_data(rng, shape, dtype)),
                               window=torch.tensor(window), win_length=win,
                               return_complex=True, **skw))
    kw = dict(skw, win_length=win, **extra)
    _compare("istft", spectrum, window, kw, 1e-10 if "128" in dtype or dtype == "float64"
             else 2e-5, i)


def test_round_trip_and_methods():
    x = ember.tensor(np.random.default_rng(3).standard_normal((3, 100)))
    w = ember.hann_window(32, dtype=ember.float64)
    spectrum = x.stft(32, hop_length=8, window=w, return_complex=True)
    assert spectrum.shape == (3, 17, 13) and spectrum.dtype is ember.complex128
    back = spectrum.istft(32, hop_length=8, window=w, length=100)
    np.testing.assert_allclose(back.numpy(), x.numpy(), atol=1e-12)
    # a single frame of a rectangular window is the plain rfft
    one = ember.stft(x[0, :32], 32, center=False, return_complex=True)
    np.testing.assert_allclose(one[:, 0].numpy(), ember.fft.rfft(x[0, :32]).numpy(),
                               atol=1e-12)


def test_jit_matches_eager():
    x = ember.tensor(np.random.default_rng(4).standard_normal((2, 50)).astype(np.float32))
    w = ember.hann_window(16)

    def power(x):
        return ember.stft(x, 16, window=w, return_complex=True).abs().sum()

    def inverse(s):
        return ember.istft(s, 16, window=w, length=50)

    spectrum = ember.stft(x, 16, window=w, return_complex=True)
    compiled_power, compiled_inverse = ember.jit(power), ember.jit(inverse)
    for _ in range(2):
        np.testing.assert_allclose(compiled_power(x).item(), power(x).item(), rtol=1e-6)
        np.testing.assert_allclose(compiled_inverse(spectrum).numpy(),
                                   inverse(spectrum).numpy(), atol=1e-6)


@pytest.mark.parametrize("call,error,match", [
    (lambda x, s: ember.stft(x, 16), ember.EmberError, "return_complex parameter"),
    (lambda x, s: ember.stft(x[None], 16, return_complex=True), ember.ShapeError, "1D or 2D"),
    (lambda x, s: ember.stft(x.long(), 16, return_complex=True), ember.EmberTypeError,
     "floating point or complex"),
    (lambda x, s: ember.stft(x, 80, center=False, return_complex=True), ember.EmberError,
     "n_fft <= 40"),
    (lambda x, s: ember.stft(x, 16, hop_length=0, return_complex=True), ember.EmberError,
     "hop_length > 0"),
    (lambda x, s: ember.stft(x, 16, win_length=20, return_complex=True), ember.EmberError,
     "win_length <= n_fft"),
    (lambda x, s: ember.stft(x, 16, window=ember.ones(10), return_complex=True),
     ember.ShapeError, "win_length=16"),
    (lambda x, s: ember.stft(ember.complex(x, x), 16, onesided=True), ember.EmberError,
     "onesided"),
    (lambda x, s: ember.stft(x[:, :5], 16, return_complex=True), ember.ShapeError,
     "reflect padding"),
    (lambda x, s: ember.stft(x, 16, align_to_window=True, return_complex=True),
     ember.EmberError, "center = False"),
    (lambda x, s: ember.stft(x, 16, pad_mode="xx", return_complex=True), ember.EmberError,
     "padding mode"),
    (lambda x, s: ember.istft(ember.view_as_real(s), 16), ember.EmberTypeError,
     "complex-valued input"),
    (lambda x, s: ember.istft(s[0, 0], 16), ember.ShapeError, "2 or 3 dimensions"),
    (lambda x, s: ember.istft(s, 16, return_complex=True), ember.EmberError, "onesided"),
    (lambda x, s: ember.istft(s[:, :5], 16, onesided=True), ember.ShapeError,
     "n_fft / 2 \\+ 1 = 9"),
    (lambda x, s: ember.istft(s, 16, hop_length=20), ember.EmberError,
     "hop_length <= win_length"),
    (lambda x, s: ember.istft(s, 16, hop_length=16, window=ember.hann_window(16)),
     ember.EmberError, "overlap add min"),
    (lambda x, s: ember.istft(s[..., :0], 16), ember.EmberError, "empty"),
])
def test_errors(call, error, match):
    x = ember.randn(2, 40)
    spectrum = ember.stft(x, 16, window=ember.hann_window(16), return_complex=True)
    with pytest.raises(error, match=match):
        call(x, spectrum)
