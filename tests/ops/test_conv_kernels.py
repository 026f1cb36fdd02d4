"""The C col2im (conv_kernels) and forward (conv_forward) against conv.py's NumPy loops:
the same bits for col2im, on wide and exact grids, with strides, dilation and padding, in
float32 and float64."""
import numpy as np
import pytest

from ember.ops import conv as C
from ember.ops import conv_forward as F
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
           (1, 2, (9, 9), 3, (3, 3), (3, 2), (2, 2), (2, 2), (2, 1)),
           # columns too large to group images per GEMM (576 x 576 x 4 > 1M elements)
           (3, 64, (26, 26), 8, (3, 3), (1, 1), (0, 0), (0, 0), (1, 1))]
# stride 1 with padding (the implicit path's padded images): one channel, 5 images (a
# group of them per product, and a last group short); one image on two threads with k
# past one block (450 taps) and 3 panels of weights, the last short; asymmetric pads;
# one large image of one channel, computed in many strips of rows (and a short last one)
IMPLICIT = [(5, 1, (10, 9), 6, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
            (1, 1, (41, 40), 32, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
            (1, 50, (8, 7), 70, (3, 3), (1, 1), (1, 2), (0, 1), (2, 1)),
            (2, 4, (9, 11), 9, (2, 3), (1, 1), (0, 1), (2, 0), (1, 1))]
FORWARD += IMPLICIT


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
    got = F.conv2d_forward(x, w, b, st, lo, dil, out)
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
    got = F.conv2d_forward(x, w, b, st, lo, dil, out, relu=relu, pool=pool)
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
    got = F.conv2d_forward(x, w, b, st, lo, dil, out, relu=True, pool=((2, 2), (2, 2)))
    if got is None:
        pytest.skip("no C compiler or OpenBLAS for the forward kernel")
    assert np.isnan(got[0, 0, 0, 0]) and not np.isnan(got[0, 0, 1:, :]).any()
    for channel, rest in ((1, 0), (2, np.inf)):
        assert np.isnan(got[0, channel, 0, 0])
        assert (got[0, channel].ravel()[1:] == rest).all()


def test_c_conv2d_forward_declines_what_it_does_not_cover():
    x, w, b, st, lo, hi, dil, out = _conv_case(FORWARD[3], np.float32)
    assert F.conv2d_forward(x.astype(np.float16), w.astype(np.float16), None, st, lo, dil,
                            out) is None
    assert F.conv2d_forward(x, w.astype(np.float64), None, st, lo, dil, out) is None
    assert F.conv2d_forward(x, w, b[:-1], st, lo, dil, out) is None


# The gradients ----------------------------------------------------------------------------
from ember.ops import conv_grad_kernels as G  # noqa: E402


@pytest.mark.parametrize("case", FORWARD)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_c_conv2d_gradients_match_the_numpy_path(case, dtype, monkeypatch):
    x, w, _, st, lo, hi, dil, out = _conv_case(case, dtype, bias=False)
    g = np.random.default_rng(3).standard_normal((x.shape[0], w.shape[0]) + out).astype(dtype)
    dw = G.conv2d_weight_grad(x, g, w.shape[2:], st, lo, dil)
    dx = G.conv2d_input_grad(g, w, x.shape[2:], st, lo, dil)
    if dw is None or dx is None:
        pytest.skip("no C compiler or OpenBLAS for the gradient kernels")
    want_dw, _, want_dx = _numpy_gradients(x, w, g, st, lo, hi, dil, monkeypatch)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for got, want in ((dw, want_dw), (dx, want_dx)):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def test_c_conv2d_weight_grad_sums_runs_of_images_in_a_fixed_order():
    # 20 images: 8 runs of 2 or 3; the same answer as one run at a time, image by image
    x, w, _, st, lo, hi, dil, out = _conv_case((20, 3, (9, 9), 4, (3, 3), (1, 1), (1, 1),
                                                (1, 1), (1, 1)), np.float64, bias=False)
    g = np.random.default_rng(4).standard_normal((20, 4) + out)
    dw = G.conv2d_weight_grad(x, g, (3, 3), st, lo, dil)
    if dw is None:
        pytest.skip("no C compiler or OpenBLAS for the gradient kernels")
    parts = [G.conv2d_weight_grad(x[i:i + 1], g[i:i + 1], (3, 3), st, lo, dil)
             for i in range(20)]
    np.testing.assert_allclose(dw, np.sum(parts, axis=0), rtol=1e-12, atol=1e-12)
    assert G.conv2d_weight_grad(x.astype(np.float32), g, (3, 3), st, lo, dil) is None


@pytest.mark.parametrize("case", FORWARD[:4] + FORWARD[-4:])
@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("pool", [((2, 2), (2, 2)), ((3, 2), (2, 1))])  # (2x2: its own loop)
def test_c_conv2d_indexed_pooling_matches_conv_relu_max_pool(case, relu, pool, monkeypatch):
    from ember.ops import pooling
    x, w, b, st, lo, hi, dil, out = _conv_case(case, np.float32)
    if any(o < k for o, k in zip(out, pool[0])):
        pytest.skip("the pooling window is larger than the result")
    x[0, 0, :3, :3] = np.nan         # NaN windows in image 0
    w[1] = 0                         # channel 1: the bias alone, ties everywhere
    got = F.conv2d_forward(x, w, b, st, lo, dil, out, relu=relu, pool=pool, indices=True)
    if got is None:
        pytest.skip("no C compiler or OpenBLAS for the forward kernel")
    y = _numpy_conv(x, w, b, st, lo, hi, dil, out, monkeypatch)
    y = np.maximum(y, 0) if relu else y
    pooled = tuple((s - k) // st_ + 1 for s, k, st_ in zip(out, *pool))
    want = pooling._max_pool_forward(np, y, pool[0], pool[1], (1, 1), (0, 0), pooled, False)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5 * np.nanmax(np.abs(y)))
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(want[0]))
    ties = got[1][:, 1]              # the first position of each window wins the ties
    np.testing.assert_array_equal(ties, want[1][:, 1])
    same = np.isclose(got[0], want[0], rtol=0, atol=0) | np.isnan(want[0])
    assert (got[1] == want[1])[same].mean() > 0.99


def _numpy_gradients(x, w, g, st, lo, hi, dil, monkeypatch):
    """(dW, db, dx) through conv.py's NumPy paths."""
    pads = tuple(zip(lo, hi))
    with monkeypatch.context() as m:
        m.setattr(C, "conv2d_weight_grad", lambda *a: None)
        m.setattr(C, "conv2d_input_grad", lambda *a: None)
        return (C._conv_weight_grad_forward(np, x, g, stride=st, padding=pads, dilation=dil,
                                            groups=1, kernel_size=w.shape[2:]),
                g.sum(axis=(0, 2, 3)),
                C._conv_transpose_forward(np, g, w, stride=st, padding=pads, dilation=dil,
                                          groups=1, out_size=x.shape[2:]))


@pytest.mark.parametrize("case", FORWARD)
def test_c_conv2d_backward_gives_the_three_gradients(case, monkeypatch):
    x, w, _, st, lo, hi, dil, out = _conv_case(case, np.float64, bias=False)
    g = np.random.default_rng(6).standard_normal((x.shape[0], w.shape[0]) + out)
    got = G.conv2d_backward(x, w, g, None, None, w.shape[2:], st, lo, dil, True)
    if got is None:
        pytest.skip("no C compiler or OpenBLAS for the gradient kernels")
    want = _numpy_gradients(x, w, g, st, lo, hi, dil, monkeypatch)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * np.abs(b).max())
    dw, db, dx = G.conv2d_backward(x, None, g, None, None, w.shape[2:], st, lo, dil, False)
    assert db is None and dx is None
    np.testing.assert_array_equal(dw, got[0])


@pytest.mark.parametrize("case", [FORWARD[1], FORWARD[3], FORWARD[7], FORWARD[-1]])
def test_c_conv2d_backward_from_a_pooling_gradient(case, monkeypatch):
    from ember.ops import pooling
    x, w, _, st, lo, hi, dil, out = _conv_case(case, np.float64, bias=False)
    rng = np.random.default_rng(7)
    pooled = tuple(s // 2 for s in out)
    y = rng.standard_normal((x.shape[0], w.shape[0]) + out)
    _, index = pooling._max_pool_forward(np, y, (2, 2), (2, 2), (1, 1), (0, 0), pooled, False)
    gp = rng.standard_normal(index.shape)
    got = G.conv2d_backward(x, w, gp, index, out, w.shape[2:], st, lo, dil, True)
    if got is None:
        pytest.skip("no C compiler or OpenBLAS for the gradient kernels")
    g = pooling._max_unpool_forward(np, gp, index, out, False)
    want = _numpy_gradients(x, w, g, st, lo, hi, dil, monkeypatch)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * np.abs(b).max())


def test_a_forked_child_takes_the_numpy_path(tmp_path):
    """OpenMP is not fork-safe: a plan made in the parent must not run in a child."""
    import os
    x, w, b, st, lo, hi, dil, out = _conv_case(FORWARD[1], np.float32)
    parent = F.conv2d_forward(x, w, b, st, lo, dil, out)
    if parent is None:
        pytest.skip("no C compiler or OpenBLAS for the forward kernel")
    pid = os.fork()
    if pid == 0:  # the child: the C path declines, conv.py's NumPy path answers
        ok = False
        try:
            ok = F.conv2d_forward(x, w, b, st, lo, dil, out) is None and np.allclose(
                C._conv_forward(np, x, w, b, stride=st, padding=tuple(zip(lo, hi)),
                                dilation=dil, groups=1, out_size=out), parent,
                rtol=1e-4, atol=1e-3)
        except BaseException:
            pass
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0


def test_python_threads_calling_at_once_get_their_own_results():
    """Plans and column buffers are per Python thread (the C calls release the GIL)."""
    import threading
    from ember.backends import cpu_blas
    cases = [_conv_case(FORWARD[i], np.float32, seed=i) for i in (1, 2, 3, 1)]
    want = [F.conv2d_forward(x, w, b, st, lo, dil, out, relu=True, pool=((2, 2), (2, 2)))
            for x, w, b, st, lo, hi, dil, out in cases]
    if want[0] is None:
        pytest.skip("no C compiler or OpenBLAS for the forward kernel")
    a = np.random.default_rng(9).standard_normal((4, 96, 784)).astype(np.float32)
    wm = np.random.default_rng(10).standard_normal((512, 784)).astype(np.float32)
    want_mm = [cpu_blas.matmul(a[i], wm.T) for i in range(4)]
    bad = []

    def work(i):
        x, w, b, st, lo, hi, dil, out = cases[i]
        for _ in range(20):
            got = F.conv2d_forward(x, w, b, st, lo, dil, out, relu=True, pool=((2, 2), (2, 2)))
            mm = cpu_blas.matmul(a[i], wm.T)
            if not (np.array_equal(got, want[i]) and np.array_equal(mm, want_mm[i])):
                bad.append(i)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad
