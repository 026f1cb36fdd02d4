"""max/avg/adaptive pooling and interpolate against PyTorch, finite differences (first and
second order) and known values."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.ops import registry
from ..ops.optable import OpCase, S, _ShapeRuleObserver, generate, nc, needs_torch, rand, torch

TF = None if torch is None else torch.nn.functional


def _t(name):
    return None if TF is None else getattr(TF, name)


def _distinct(rng, shape, dtype):
    """Values with no ties (a max's gradient is ambiguous at a tie)."""
    values = rng.permutation(int(np.prod(shape))).reshape(shape) / 4.0 - 3.0
    return values.astype(ember.dtypes.as_dtype(dtype).np)


def max_pool2d_samples(rng, dtype):
    r = lambda *shape: _distinct(rng, shape, dtype)  # noqa: E731
    return [S(r(2, 3, 6, 6), 2),
            S(r(2, 2, 7, 6), 3, stride=2, padding=1, dilation=(1, 2), return_indices=True),
            S(r(2, 2, 7, 6), (3, 2), stride=2, padding=1, ceil_mode=True, return_indices=True),
            S(nc(r(2, 2, 5, 5)), 3, stride=1, padding=1),  # overlapping windows
            S(r(3, 5, 4), 2, stride=(1, 2)),  # unbatched
            S(r(0, 2, 4, 4), 2)]


def max_pool1d_samples(rng, dtype):
    r = lambda *shape: _distinct(rng, shape, dtype)  # noqa: E731
    return [S(r(2, 3, 9), 3, stride=2, padding=1, return_indices=True),
            S(nc(r(2, 3, 8)), 2, dilation=2, ceil_mode=True), S(r(3, 7), 2)]


def max_pool3d_samples(rng, dtype):
    r = lambda *shape: _distinct(rng, shape, dtype)  # noqa: E731
    return [S(r(1, 2, 4, 5, 4), 2, stride=(1, 2, 2), padding=(1, 0, 1), return_indices=True)]


def avg_pool2d_samples(rng, dtype):
    r = lambda *shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r(2, 3, 6, 6), 2),
            S(r(2, 2, 7, 6), 3, stride=2, padding=1, ceil_mode=True),
            S(r(2, 2, 7, 6), 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
            S(nc(r(2, 2, 5, 6)), (2, 3), stride=1, padding=(1, 0), divisor_override=4),
            S(r(3, 5, 4), (2, 1))]


def avg_pool1d_samples(rng, dtype):
    r = lambda *shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r(2, 3, 9), 4, stride=3, padding=2, ceil_mode=True, count_include_pad=False),
            S(nc(r(2, 3, 8)), 3, stride=1, padding=1), S(r(3, 7), 2)]


def avg_pool3d_samples(rng, dtype):
    r = lambda *shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r(1, 2, 4, 5, 4), 2, stride=(1, 2, 2), padding=(1, 0, 1), ceil_mode=True)]


def adaptive_max2d_samples(rng, dtype):
    r = lambda *shape: _distinct(rng, shape, dtype)  # noqa: E731
    return [S(r(2, 3, 7, 6), (3, 4), return_indices=True),  # overlapping windows
            S(nc(r(2, 2, 6, 6)), 3), S(r(2, 5, 5), (None, 2)), S(r(1, 2, 3, 3), 5)]


def adaptive_max1d_samples(rng, dtype):
    r = lambda *shape: _distinct(rng, shape, dtype)  # noqa: E731
    return [S(r(2, 3, 7), 4, return_indices=True), S(r(3, 6), 3)]


def adaptive_avg_samples(d):
    def samples(rng, dtype):
        r = lambda *shape: rand(rng, shape, dtype)  # noqa: E731
        spatial = (7, 6, 5)[:d]
        return [S(r(2, 3, *spatial), (3, 4, 2)[:d]), S(nc(r(2, 2, *spatial)), 1),
                S(r(2, *spatial), (None,) + (2,) * (d - 1) if d > 1 else 9)]
    return samples


def interpolate_samples(rng, dtype):
    r = lambda *shape: rand(rng, shape, dtype)  # noqa: E731
    x = r(2, 2, 5, 4)
    samples = []
    for mode in ("nearest", "nearest-exact", "bilinear", "area"):
        corners = (False, True) if mode == "bilinear" else (None,)
        for align in corners:
            kw = {} if align is None else dict(align_corners=align)
            samples += [S(x, size=(7, 3), mode=mode, **kw),
                        S(nc(x), scale_factor=1.7, mode=mode, **kw),
                        S(x, scale_factor=(0.6, 2.5), mode=mode, **kw),
                        S(x, scale_factor=(1.1, 2.0), mode=mode, **kw),  # an unchanged axis
                        S(x, scale_factor=0.45, recompute_scale_factor=True, mode=mode, **kw)]
    x1, x3 = r(2, 3, 6), r(1, 2, 3, 4, 3)
    return samples + [S(x1, scale_factor=2.3, mode="linear"),
                      S(x1, size=4, mode="linear", align_corners=True),
                      S(x1, scale_factor=3, mode="nearest"),
                      S(x3, size=(4, 2, 5), mode="trilinear"),
                      S(x3, scale_factor=2, mode="nearest")]


CASES = [
    OpCase("max_pool2d", F.max_pool2d, _t("max_pool2d"), max_pool2d_samples),
    OpCase("max_pool1d", F.max_pool1d, _t("max_pool1d"), max_pool1d_samples),
    OpCase("max_pool3d", F.max_pool3d, _t("max_pool3d"), max_pool3d_samples),
    OpCase("avg_pool2d", F.avg_pool2d, _t("avg_pool2d"), avg_pool2d_samples),
    OpCase("avg_pool1d", F.avg_pool1d, _t("avg_pool1d"), avg_pool1d_samples),
    OpCase("avg_pool3d", F.avg_pool3d, _t("avg_pool3d"), avg_pool3d_samples,
           dtypes=("float32", "float64")),  # torch has no half-precision avg_pool3d
    OpCase("adaptive_max_pool2d", F.adaptive_max_pool2d, _t("adaptive_max_pool2d"),
           adaptive_max2d_samples),
    OpCase("adaptive_max_pool1d", F.adaptive_max_pool1d, _t("adaptive_max_pool1d"),
           adaptive_max1d_samples),
    OpCase("adaptive_avg_pool1d", F.adaptive_avg_pool1d, _t("adaptive_avg_pool1d"),
           adaptive_avg_samples(1)),
    OpCase("adaptive_avg_pool2d", F.adaptive_avg_pool2d, _t("adaptive_avg_pool2d"),
           adaptive_avg_samples(2)),
    OpCase("adaptive_avg_pool3d", F.adaptive_avg_pool3d, _t("adaptive_avg_pool3d"),
           adaptive_avg_samples(3)),
    OpCase("interpolate", F.interpolate, _t("interpolate"), interpolate_samples),
    OpCase("max_pool2d_int", F.max_pool2d, _t("max_pool2d"),
           lambda rng, d: [S(rand(rng, (2, 3, 7, 6), d, -9, 9), 3, stride=2, padding=1,
                             return_indices=True)],
           dtypes=("int64", "int32", "uint8"), grad=False),
    OpCase("avg_pool2d_int64", F.avg_pool2d, _t("avg_pool2d"),
           lambda rng, d: [S(rand(rng, (2, 3, 7, 6), d, -9, 9), 3, stride=2, padding=1)],
           dtypes=("int64",), grad=False),
]

generate(CASES, globals())


# Semantics -------------------------------------------------------------------------------------
def test_max_pool_known_values_and_indices():
    x = ember.arange(16.0).reshape(1, 1, 4, 4)
    values, indices = F.max_pool2d(x, 2, return_indices=True)
    assert values.tolist() == [[[[5.0, 7.0], [13.0, 15.0]]]]
    assert indices.dtype is ember.int64
    assert indices.tolist() == [[[[5, 7], [13, 15]]]]
    # ties go to the first element in row-major order, as in PyTorch
    _, first = F.max_pool2d(ember.ones(1, 1, 2, 2), 2, return_indices=True)
    assert first.item() == 0


def test_max_pool_nan_and_all_minus_inf_windows_match_torch_rules():
    x = np.array([[[[1.0, np.nan, 3.0, np.nan]]]])
    values, indices = F.max_pool2d(ember.tensor(x), (1, 4), return_indices=True)
    assert np.isnan(values.item()) and indices.item() == 3  # the last NaN
    _, indices = F.adaptive_max_pool2d(ember.tensor(x), 1, return_indices=True)
    assert indices.item() == 3
    # a window of -inf with padding names its first real element, never the padding
    _, indices = F.max_pool2d(ember.full((1, 1, 2, 2), -np.inf), 2, padding=1,
                              return_indices=True)
    assert indices.tolist() == [[[[0, 1], [2, 3]]]]


def test_max_pool_gradient_goes_to_the_winners_only():
    x = ember.tensor([[[[1.0, 5.0, 2.0], [3.0, 4.0, 0.0], [6.0, 1.0, 1.5]]]],
                     requires_grad=True)
    F.max_pool2d(x, 2, stride=1).sum().backward()
    # 5 wins two windows, 4 and 6 one each
    assert x.grad.tolist() == [[[[0.0, 2.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]]]


def test_avg_pool_divisors():
    x = ember.ones(1, 1, 3, 3)
    with_pad = F.avg_pool2d(x, 3, stride=1, padding=1)
    assert with_pad[0, 0, 0, 0].item() == pytest.approx(4 / 9)
    without = F.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)
    assert without.tolist() == [[[[1.0] * 3] * 3]]
    assert F.avg_pool2d(x, 3, stride=1, padding=1, divisor_override=2)[0, 0, 1, 1].item() == 4.5


def test_adaptive_avg_pool_windows_overlap_like_torch():
    x = ember.tensor([[[0.0, 1.0, 2.0, 3.0, 4.0]]])
    # windows [0, 2), [1, 4), [3, 5)
    np.testing.assert_allclose(F.adaptive_avg_pool1d(x, 3).numpy(), [[[0.5, 2.0, 3.5]]])


def test_interpolate_known_values():
    x = ember.tensor([[[1.0, 2.0, 3.0]]])
    assert F.interpolate(x, scale_factor=2).tolist() == [[[1.0, 1.0, 2.0, 2.0, 3.0, 3.0]]]
    assert F.interpolate(x, size=5, mode="linear", align_corners=True).tolist() == \
        [[[1.0, 1.5, 2.0, 2.5, 3.0]]]
    image = ember.tensor([[[[0.0, 1.0], [2.0, 3.0]]]])
    up = F.interpolate(image, size=(3, 3), mode="bilinear", align_corners=True)
    assert up[0, 0, 1].tolist() == [1.0, 1.5, 2.0]


def test_interpolate_nearest_index_rules_of_each_dimensionality():
    # PyTorch's 2-D nearest kernel copies an unchanged size and repeats each index where
    # the size doubles; its 1-D and 3-D kernels apply floor(dst / scale) every time
    def nearest(d, width, factor):
        x = ember.arange(float(width)).reshape((1, 1) + (1,) * (d - 1) + (width,))
        return F.interpolate(x, scale_factor=(1.0,) * (d - 1) + (factor,)).reshape(-1).tolist()
    assert nearest(2, 4, 2.2) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert nearest(1, 4, 2.2) == nearest(3, 4, 2.2) == [0, 0, 0, 1, 1, 2, 2, 3]
    assert nearest(2, 5, 1.02) == [0, 1, 2, 3, 4]
    assert nearest(1, 5, 1.02) == nearest(3, 5, 1.02) == [0, 0, 1, 2, 3]
    # bicubic resamples an axis whose size is unchanged (bilinear copies it)
    column = ember.arange(4.0).reshape(1, 1, 4, 1)
    np.testing.assert_allclose(
        F.interpolate(column, scale_factor=(1.16, 1), mode="bicubic").reshape(-1).numpy(),
        [-0.04481, 0.71950, 1.62012, 2.60982], atol=1e-4)
    assert F.interpolate(column, scale_factor=(1.16, 1), mode="bilinear").reshape(-1).tolist() \
        == [0.0, 1.0, 2.0, 3.0]
    # area with a scale that floors a size to 0 is empty (the other modes refuse)
    assert F.interpolate(ember.ones(1, 2, 1), scale_factor=0.7, mode="area").shape == (1, 2, 0)


@needs_torch
@pytest.mark.parametrize("d", [1, 2, 3])
def test_interpolate_matches_torch_across_sizes_and_factors(d):
    linear = {1: "linear", 2: "bilinear", 3: "trilinear"}[d]
    rng = np.random.default_rng(d)
    for width in range(1, 8):
        x = rng.standard_normal((1, 2) + (3,) * (d - 1) + (width,))
        for factor in (0.7, 1.0, 1.02, 1.5, 2.0, 2.2, 2.6, 3.7):
            for mode in ("nearest", "nearest-exact", "area", linear) + \
                    (("bicubic",) if d == 2 else ()):
                scale = (1.3,) * (d - 1) + (factor,)
                try:
                    want = TF.interpolate(torch.tensor(x), scale_factor=scale, mode=mode).numpy()
                except RuntimeError:
                    with pytest.raises(ember.EmberError):
                        F.interpolate(ember.tensor(x), scale_factor=scale, mode=mode)
                    continue
                got = F.interpolate(ember.tensor(x), scale_factor=scale, mode=mode).numpy()
                assert got.shape == want.shape, (width, factor, mode)
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12,
                                           err_msg=f"{mode} width {width} factor {factor}")


@needs_torch
@pytest.mark.parametrize("kw", [dict(size=(9, 11)), dict(size=(3, 4)), dict(scale_factor=2.0),
                                dict(scale_factor=(1.5, 0.7)), dict(size=(1, 1)),
                                dict(scale_factor=3, recompute_scale_factor=True)])
@pytest.mark.parametrize("align_corners", [False, True])
def test_bicubic_matches_torch(kw, align_corners):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 7))
    tx = torch.from_numpy(x).requires_grad_()
    ex = ember.from_numpy(x).requires_grad_()
    ty = torch.nn.functional.interpolate(tx, mode="bicubic", align_corners=align_corners, **kw)
    ey = F.interpolate(ex, mode="bicubic", align_corners=align_corners, **kw)
    g = rng.standard_normal(ty.shape)
    ty.backward(torch.from_numpy(g))
    ey.backward(ember.from_numpy(g))
    np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-11, atol=1e-11)


def test_max_pool_without_grad_skips_the_indices_but_agrees():
    x = ember.randn(2, 3, 8, 8)
    with ember.no_grad():
        plain = F.max_pool2d(x, 3, stride=2, padding=1)
    values, _ = F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True)
    np.testing.assert_array_equal(plain.numpy(), values.numpy())


@needs_torch
def test_double_backward_matches_torch():
    rng = np.random.default_rng(3)
    x = rng.permutation(2 * 2 * 6 * 6).reshape(2, 2, 6, 6) / 10.0
    results = []
    for lib, functional in ((ember, F), (torch, TF)):
        xt = lib.tensor(x, requires_grad=True)
        y = functional.max_pool2d(xt, 3, stride=2, padding=1) ** 2
        y = y.sum() + (functional.avg_pool2d(xt, 2, stride=1, padding=1) ** 3).sum()
        y = y + (functional.interpolate(xt, scale_factor=1.5, mode="bilinear") ** 2).sum()
        (g,) = lib.autograd.grad(y, [xt], create_graph=True)
        (gg,) = lib.autograd.grad((g * g).sum(), [xt])
        results.append([t.detach().numpy() for t in (g, gg)])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_every_primitive_shape_rule_holds_in_backward_and_double_backward():
    x = ember.randn(2, 3, 7, 6, dtype=ember.float64, requires_grad=True)
    registry._observer = _ShapeRuleObserver()
    try:
        outs = [F.max_pool2d(x, 3, stride=2, padding=1), F.max_pool2d(x, 2),
                F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True),
                F.adaptive_max_pool2d(x, (3, 4)), F.adaptive_avg_pool2d(x, (3, 4)),
                F.interpolate(x, scale_factor=1.5, mode="bilinear"),
                F.interpolate(x, scale_factor=1.5)]
        y = sum((o * o).sum() for o in outs)
        (g,) = ember.autograd.grad(y, [x], create_graph=True)
        ember.autograd.grad((g * g).sum(), [x])
    finally:
        registry._observer = None


# Errors ------------------------------------------------------------------------------------------
def _x(*shape):
    return ember.zeros(*shape)


@pytest.mark.parametrize("call,error,message", [
    (lambda: F.max_pool2d(_x(4, 4), 2), ember.ShapeError,
     r"max_pool2d: expected input with 4 dims \(N, C, H, W\) or 3 \(C, H, W\), got shape "
     r"\(4, 4\)"),
    (lambda: F.max_pool2d(_x(1, 1, 1, 1), 2), ember.ShapeError,
     r"max_pool2d: input of spatial size \(1, 1\) is too small for kernel_size \(2, 2\)"),
    (lambda: F.max_pool2d(_x(1, 1, 4, 4), 3, padding=2), ember.EmberError,
     r"max_pool2d: padding should be at most half of the kernel size, got padding \(2, 2\) "
     r"and kernel_size \(3, 3\)"),
    (lambda: F.max_pool2d(_x(1, 1, 4, 4), 2, stride=0), ember.EmberError,
     r"max_pool2d: stride must be positive, got \(0, 0\)"),
    (lambda: F.max_pool1d(_x(1, 1, 4), (2, 2)), ember.EmberError,
     r"max_pool1d: expected kernel_size to be an int or a tuple of 1 ints, got \(2, 2\)"),
    (lambda: F.max_pool2d(ember.zeros(1, 1, 4, 4, dtype=ember.bool), 2), ember.EmberTypeError,
     r"max_pool2d: bool tensors are not supported"),
    (lambda: F.max_pool2d(_x(1, 0, 4, 4), 2), ember.ShapeError,
     r"max_pool2d: expected non-empty channel and spatial dims, got shape \(1, 0, 4, 4\)"),
    (lambda: F.avg_pool2d(_x(1, 1, 4, 4), 2, divisor_override=0), ember.EmberError,
     r"avg_pool2d: divisor_override must be a non-zero integer, got 0"),
    (lambda: F.avg_pool2d(ember.zeros(1, 1, 4, 4, dtype=ember.int32), 2), ember.EmberTypeError,
     r"avg_pool2d: expected a floating-point or int64 input, got int32"),
    (lambda: F.avg_pool1d(_x(1, 1, 4, 4), 2), ember.ShapeError,
     r"avg_pool1d: expected input with 3 dims \(N, C, L\) or 2 \(C, L\), got shape"),
    (lambda: F.adaptive_avg_pool2d(_x(1, 1, 4, 4), (2, 0)), ember.EmberError,
     r"adaptive_avg_pool2d: output_size must be positive, got \(2, 0\)"),
    (lambda: F.adaptive_max_pool2d(_x(1, 1, 4, 4), (2, 2, 2)), ember.EmberError,
     r"adaptive_max_pool2d: expected output_size to be an int or a tuple of 2 ints"),
    (lambda: F.adaptive_max_pool2d(ember.zeros(1, 1, 4, 4, dtype=ember.int64), 2),
     ember.EmberTypeError, r"adaptive_max_pool2d: expected a floating-point input, got int64"),
    (lambda: F.interpolate(_x(1, 1, 4), size=3, scale_factor=2), ember.EmberError,
     r"interpolate: only one of size or scale_factor should be defined"),
    (lambda: F.interpolate(_x(1, 1, 4)), ember.EmberError,
     r"interpolate: either size or scale_factor should be defined"),
    (lambda: F.interpolate(_x(1, 1, 4), size=8, mode="bilinear"), ember.ShapeError,
     r"interpolate: mode 'bilinear' needs a 4-D input, got shape \(1, 1, 4\)"),
    (lambda: F.interpolate(_x(1, 1, 4), size=8, align_corners=True), ember.EmberError,
     r"interpolate: align_corners can only be set with the linear modes"),
    (lambda: F.interpolate(_x(1, 1, 4), size=8, mode="cubic"), ember.EmberError,
     r"interpolate: mode must be one of nearest, nearest-exact, area, linear, bilinear, "
     r"trilinear, bicubic, got 'cubic'"),
    (lambda: F.interpolate(_x(1, 1, 4), size=8, mode="bicubic"), ember.ShapeError,
     r"interpolate: mode 'bicubic' needs a 4-D input, got shape \(1, 1, 4\)"),
    (lambda: F.interpolate(_x(4, 4), size=8), ember.ShapeError,
     r"interpolate: expected input with 3, 4 or 5 dims \(N, C, \*spatial\), got shape \(4, 4\)"),
    (lambda: F.interpolate(_x(1, 1, 4), scale_factor=0.1), ember.ShapeError,
     r"interpolate: scale_factor 0.1 makes an empty output \(0,\)"),
    (lambda: F.interpolate(ember.zeros(1, 1, 4, dtype=ember.int64), size=8),
     ember.EmberTypeError,
     r"interpolate: expected a floating-point input \(or uint8 with the nearest modes\), "
     r"got int64"),
])
def test_errors_name_the_op_and_the_shapes(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("pool,shape", [(F.max_pool1d, (1, 1, 1)), (F.max_pool2d, (1, 1, 1, 1))])
def test_a_max_pool_window_entirely_in_the_padding_gives_no_gradient(pool, shape):
    # kernel 2, stride 2, padding 1, dilation 2 over one element: the window reads only
    # padding, so its max is -inf at no input position
    x = ember.ones(*shape, requires_grad=True)
    y = pool(x, 2, 2, 1, 2)
    y.sum().backward()
    assert y.reshape(-1).tolist() == [float("-inf")]
    assert x.grad.reshape(-1).tolist() == [0.0]
