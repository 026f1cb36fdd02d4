"""The C col2im (conv_kernels) against conv.py's NumPy loop: the same bits, on wide and
exact grids, with strides, dilation and padding, in float32 and float64."""
import numpy as np
import pytest

from ember.ops import conv as C
from ember.ops import conv_kernels as K

CASES = [(64, 32, (13, 13), (3, 3), (1, 1), (1, 1), ((0, 0), (0, 0))),
         (2, 3, (9, 8), (3, 2), (2, 1), (1, 2), ((1, 1), (0, 2))),
         (3, 4, (7, 7), (3, 3), (1, 1), (1, 1), ((1, 1), (1, 1))),
         (2, 2, (10, 9), (2, 3), (3, 2), (2, 1), ((0, 0), (1, 0)))]


def _numpy_col2im(cols, geo, dtype, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(C, "col2im_2d", lambda *a: False)
        return C.col2im(np, cols, geo, dtype)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("allow_wide", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_c_col2im_gives_numpys_bits(case, allow_wide, dtype, monkeypatch):
    n, c, hw, k, st, dil, pad = case
    out = tuple((hw[i] + sum(pad[i]) - dil[i] * (k[i] - 1) - 1) // st[i] + 1 for i in range(2))
    geo = C.geometry(n, c, 5, 1, hw, k, st, dil, pad, out, allow_wide)
    rng = np.random.default_rng(0)
    if geo.wide:
        cols = rng.standard_normal((c,) + k + (n,) + geo.grid).astype(dtype)
    else:
        cols = rng.standard_normal((n, c) + k + out).astype(dtype).transpose((1, 2, 3, 0, 4, 5))
    buf = np.zeros((n, c) + geo.padded, dtype=dtype)
    if not K.col2im_2d(cols, buf, geo):
        pytest.skip("no C compiler for the col2im kernel")
    np.testing.assert_array_equal(C.col2im(np, cols, geo, dtype),
                                  _numpy_col2im(cols, geo, dtype, monkeypatch))


# The forward ------------------------------------------------------------------------------
# (N, C, H, W, O, kernel, stride, low pads, high pads, dilation): the cnn workload's two
# layers at batch 64 and 1 (1 image: the threads share it), strides, asymmetric padding,
# dilation, a 1x1 convolution (reads the image as its columns) and a strided 1x1
FORWARD = [(64, 1, (28, 28), 32, (3, 3), (1, 1), (0, 0), (0, 0), (1, 1)),
           (64, 32, (13, 13), 64, (3, 3), (1, 1), (0, 0), (0, 0), (1, 1)),
           (1, 32, (13, 13), 64, (3, 3), (1, 1), (0, 0), (0, 0), (1, 1)),
           (3, 5, (11, 9), 7, (3, 2), (2, 1), (1, 2), (0, 1), (1, 2)),
           (2, 8, (6, 6), 4, (1, 1), (1, 1), (0, 0), (0, 0), (1, 1)),
           (2, 3, (7, 8), 5, (1, 1), (2, 3), (0, 0), (0, 0), (1, 1)),
           (1, 2, (9, 9), 3, (3, 3), (3, 2), (2, 2), (2, 2), (2, 1))]


def _out_size(hw, k, st, lo, hi, dil):
    return tuple((hw[i] + lo[i] + hi[i] - dil[i] * (k[i] - 1) - 1) // st[i] + 1
                 for i in range(2))


def _numpy_conv(x, w, b, st, lo, hi, dil, out, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(C, "conv2d_forward", lambda *a, **k: None)
        return C._conv_forward(np, x, w, *([] if b is None else [b]), stride=st,
                               padding=tuple(zip(lo, hi)), dilation=dil, groups=1,
                               out_size=out)


def _conv_case(case, dtype, bias=True, seed=0):
    n, c, hw, o, k, st, lo, hi, dil = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c) + hw).astype(dtype)
    w = rng.standard_normal((o, c) + k).astype(dtype)
    b = rng.standard_normal(o).astype(dtype) if bias else None
    return x, w, b, st, lo, hi, dil, _out_size(hw, k, st, lo, hi, dil)


@pytest.mark.parametrize("case", FORWARD)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [True, False])
def test_c_conv2d_forward_matches_the_numpy_path(case, dtype, bias, monkeypatch):
    x, w, b, st, lo, hi, dil, out = _conv_case(case, dtype, bias)
    got = K.conv2d_forward(x, w, b, st, lo, dil, out)
    if got is None:
        pytest.skip("no C compiler or OpenBLAS for the forward kernel")
    want = _numpy_conv(x, w, b, st, lo, hi, dil, out, monkeypatch)
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("case", FORWARD)
@pytest.mark.parametrize("pool", [((2, 2), (2, 2)), ((3, 2), (2, 1)), ((1, 1), (1, 1))])
@pytest.mark.parametrize("relu", [True, False])
def test_c_conv2d_epilogue_is_relu_then_max_pool(case, pool, relu, monkeypatch):
    x, w, b, st, lo, hi, dil, out = _conv_case(case, np.float64)
    if any(o < k for o, k in zip(out, pool[0])):
        pytest.skip("the pooling window is larger than the result")
    got = K.conv2d_forward(x, w, b, st, lo, dil, out, relu=relu, pool=pool)
    if got is None:
        pytest.skip("no C compiler or OpenBLAS for the forward kernel")
    y = _numpy_conv(x, w, b, st, lo, hi, dil, out, monkeypatch)
    y = np.maximum(y, 0) if relu else y
    (kh, kw), (sh, sw) = pool
    ph, pw = ((s - k_) // s_ + 1 for s, k_, s_ in zip(out, pool[0], pool[1]))
    want = np.full(y.shape[:2] + (ph, pw), -np.inf)
    for i in range(kh):
        for j in range(kw):
            want = np.maximum(want, y[:, :, i:i + sh * (ph - 1) + 1:sh, j:j + sw * (pw - 1) + 1:sw])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


def test_c_conv2d_epilogue_keeps_nan_and_infinities():
    x, w, b, st, lo, hi, dil, out = _conv_case(FORWARD[2], np.float32)
    x[0, :, 0, 0] = np.nan      # reaches the outputs at (0, 0) only: its pooled window
    w[1] = 0
    b[1] = -np.inf              # channel 1 is -inf (NaN * 0 at (0, 0)): relu makes it 0
    b[2] = np.inf
    got = K.conv2d_forward(x, w, b, st, lo, dil, out, relu=True, pool=((2, 2), (2, 2)))
    if got is None:
        pytest.skip("no C compiler or OpenBLAS for the forward kernel")
    assert np.isnan(got[0, 0, 0, 0]) and not np.isnan(got[0, 0, 1:, :]).any()
    for channel, rest in ((1, 0), (2, np.inf)):
        assert np.isnan(got[0, channel, 0, 0])
        assert (got[0, channel].ravel()[1:] == rest).all()


def test_c_conv2d_forward_declines_what_it_does_not_cover():
    x, w, b, st, lo, hi, dil, out = _conv_case(FORWARD[3], np.float32)
    assert K.conv2d_forward(x.astype(np.float16), w.astype(np.float16), None, st, lo, dil,
                            out) is None
    assert K.conv2d_forward(x, w.astype(np.float64), None, st, lo, dil, out) is None
    assert K.conv2d_forward(x, w, b[:-1], st, lo, dil, out) is None
