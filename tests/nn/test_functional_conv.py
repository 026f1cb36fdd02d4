"""conv1d/2d/3d, conv_transpose1d/2d/3d, unfold and fold against PyTorch, finite
differences (first and second order) and known values."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.ops import conv as conv_module, registry
from ..ops.optable import (TOL, OpCase, S, _ShapeRuleObserver, generate, nc, needs_torch,
                           rand, torch)

TF = None if torch is None else torch.nn.functional
# PyTorch warns that it copies the input for 'same' padding of even kernels
pytestmark = pytest.mark.filterwarnings("ignore:Using padding='same':UserWarning")


def _t(name):
    return None if TF is None else getattr(TF, name)


def conv2d_samples(rng, dtype):
    r = lambda *shape: rand(rng, shape, dtype)  # noqa: E731
    return [
        S(r(2, 3, 5, 5), r(4, 3, 3, 3), r(4)),
        S(r(2, 3, 5, 5), r(4, 3, 3, 3), None, stride=2, padding=1),
        S(r(2, 4, 5, 6), r(6, 2, 2, 3), r(6), groups=2, dilation=(2, 1), padding=(1, 0)),
        S(r(1, 2, 5, 4), r(3, 2, 2, 2), padding="same"),  # even kernel: one more pad high
        S(r(2, 2, 6, 5), r(3, 2, 3, 2), r(3), padding="same", dilation=2),
        S(r(2, 1, 6, 6), r(8, 1, 3, 3), r(8), padding="valid"),  # the exact grid
        S(nc(r(2, 3, 5, 5)), nc(r(4, 3, 3, 3)), r(4), padding=1),
        S(r(2, 3, 5, 5), r(3, 1, 3, 3), r(3), groups=3, stride=(2, 1)),  # depthwise
        S(r(2, 3, 4, 4), r(5, 3, 1, 1), stride=(1, 2)),
        S(r(3, 5, 5), r(4, 3, 3, 3), r(4), padding=1),  # unbatched
        S(r(0, 3, 5, 5), r(4, 3, 3, 3), r(4)),  # empty batch
        S(r(2, 3, 1, 4), r(2, 3, 1, 2)),
    ]


def conv1d_samples(rng, dtype):
    r = lambda *shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r(2, 3, 9), r(4, 3, 3), r(4), stride=2, padding=1),
            S(r(2, 4, 9), r(4, 2, 4), None, padding="same", dilation=2, groups=2),
            S(nc(r(2, 3, 7)), r(2, 3, 2)), S(r(3, 6), r(2, 3, 3), r(2))]


def conv3d_samples(rng, dtype):
    r = lambda *shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r(1, 2, 4, 5, 3), r(3, 2, 2, 3, 2), r(3), padding=(1, 0, 1)),
            S(r(2, 2, 5, 4, 4), r(2, 1, 2, 2, 2), None, stride=(2, 1, 2), dilation=(1, 2, 1),
              groups=2),
            S(r(2, 4, 4, 4), r(3, 2, 2, 2, 2), padding="same")]


def conv_transpose2d_samples(rng, dtype):
    r = lambda *shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r(2, 4, 3, 3), r(4, 3, 3, 3), r(3), stride=2, padding=1, output_padding=1),
            S(r(2, 4, 3, 4), r(4, 2, 2, 3), None, stride=(1, 2), groups=2, dilation=(2, 1)),
            S(nc(r(2, 4, 3, 3)), r(4, 2, 2, 2), r(2), padding=1, stride=2),
            S(r(2, 3, 4, 4), r(3, 5, 3, 3), padding=1),  # stride 1: the wide grid
            S(r(4, 3, 3), r(4, 2, 3, 3))]


def conv_transpose1d_samples(rng, dtype):
    r = lambda *shape: rand(rng, shape, dtype)  # noqa: E731
    # output_padding 2 >= stride 1 is allowed because dilation 3 > 2
    return [S(r(2, 3, 5), r(3, 2, 3), r(2), dilation=3, output_padding=2),
            S(r(2, 4, 4), r(4, 1, 3), None, stride=3, groups=2, padding=1, output_padding=2)]


def conv_transpose3d_samples(rng, dtype):
    r = lambda *shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r(1, 2, 3, 2, 3), r(2, 3, 2, 2, 2), r(3), stride=(2, 1, 1), padding=(0, 1, 0))]


def unfold_samples(rng, dtype):
    r = lambda *shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r(2, 3, 5, 5), kernel_size=2),
            S(nc(r(2, 2, 5, 6)), kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
            S(r(3, 4, 4), kernel_size=3, padding=1)]


def fold_samples(rng, dtype):
    r = lambda *shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r(2, 12, 9), output_size=(4, 4), kernel_size=2),
            S(r(2, 12, 18), output_size=(5, 6), kernel_size=(2, 3), padding=1, stride=(2, 1)),
            S(nc(r(8, 16)), output_size=4, kernel_size=2, dilation=2, padding=1)]


# PyTorch's half-precision transposed convolutions on a CPU without AVX-512 accumulate in
# the half type: measured against float64 they are off by up to 1e-2 (float16) where
# ember, accumulating in float32, is off by 4e-3; the oracle needs a looser tolerance there
_HALF_TRANSPOSED_TOL = dict(TOL, float16=(1e-2, 1e-2), bfloat16=(5e-2, 5e-2))

CASES = [
    OpCase("conv2d", F.conv2d, _t("conv2d"), conv2d_samples),
    OpCase("conv1d", F.conv1d, _t("conv1d"), conv1d_samples),
    OpCase("conv3d", F.conv3d, _t("conv3d"), conv3d_samples),
    OpCase("conv_transpose2d", F.conv_transpose2d, _t("conv_transpose2d"),
           conv_transpose2d_samples, tol=_HALF_TRANSPOSED_TOL),
    OpCase("conv_transpose1d", F.conv_transpose1d, _t("conv_transpose1d"),
           conv_transpose1d_samples, tol=_HALF_TRANSPOSED_TOL),
    OpCase("conv_transpose3d", F.conv_transpose3d, _t("conv_transpose3d"),
           conv_transpose3d_samples, tol=_HALF_TRANSPOSED_TOL),
    OpCase("unfold", F.unfold, _t("unfold"), unfold_samples),
    OpCase("fold", F.fold, _t("fold"), fold_samples),
    OpCase("conv2d_int64", F.conv2d, _t("conv2d"),
           lambda rng, d: [S(rand(rng, (2, 3, 5, 5), d, -5, 5), rand(rng, (4, 3, 3, 3), d, -3, 3),
                             rand(rng, (4,), d, -3, 3), padding=1)],
           dtypes=("int64",), grad=False),
]
generate(CASES, globals())


# Both column layouts --------------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("wide", [True, False])
def test_wide_and_exact_grids_match_torch(monkeypatch, wide):
    """Force each layout of the columns on stride-1 convolutions (normally chosen by a cost
    model) and compare values and all three gradients with PyTorch."""
    monkeypatch.setattr(conv_module, "_wide_is_cheaper", lambda *args: wide)
    wide_calls = []
    for helper in ("grid_to_output", "output_to_grid"):  # only the wide grid uses these
        original = getattr(conv_module, helper)
        monkeypatch.setattr(conv_module, helper,
                            lambda *a, _f=original: wide_calls.append(1) or _f(*a))
    conv_module.geometry.cache_clear()
    rng = np.random.default_rng(0)
    try:
        for name, xs, ws, kw in [
                ("conv2d", (2, 4, 6, 5), (6, 2, 3, 2), dict(padding=(1, 2), groups=2)),
                ("conv2d", (3, 3, 5, 5), (2, 3, 2, 3), dict(dilation=(2, 1))),
                ("conv3d", (2, 2, 4, 5, 4), (3, 2, 2, 3, 2), dict(padding=1)),
                ("conv_transpose2d", (2, 3, 4, 4), (3, 2, 3, 3), dict(padding=1))]:
            x, w = rng.standard_normal(xs), rng.standard_normal(ws)
            b = rng.standard_normal(w.shape[1] if "transpose" in name else w.shape[0])
            ex, ew, eb = (ember.tensor(a, requires_grad=True) for a in (x, w, b))
            tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
            out = getattr(F, name)(ex, ew, eb, **kw)
            ref = getattr(TF, name)(tx, tw, tb, **kw)
            np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), atol=1e-12)
            u = rng.standard_normal(tuple(ref.shape))
            got = ember.autograd.grad(out, [ex, ew, eb], ember.tensor(u))
            want = torch.autograd.grad(ref, [tx, tw, tb], torch.tensor(u))
            for g, t in zip(got, want):
                np.testing.assert_allclose(g.numpy(), t.numpy(), atol=1e-12)
        assert bool(wide_calls) == wide
    finally:
        conv_module.geometry.cache_clear()


def test_cost_model_picks_each_grid_for_the_cnn_workload():
    first = conv_module.geometry(64, 1, 32, 1, (28, 28), (3, 3), (1, 1), (1, 1),
                                 ((0, 0), (0, 0)), (26, 26))
    second = conv_module.geometry(64, 32, 64, 1, (13, 13), (3, 3), (1, 1), (1, 1),
                                  ((0, 0), (0, 0)), (11, 11))
    strided = conv_module.geometry(64, 32, 64, 1, (13, 13), (3, 3), (2, 2), (1, 1),
                                   ((0, 0), (0, 0)), (6, 6))
    assert (first.wide, second.wide, strided.wide) == (False, True, False)


# Double backward against PyTorch -----------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("name,kw", [("conv2d", dict(stride=2, padding=1, groups=2)),
                                     ("conv_transpose2d", dict(stride=2, output_padding=1))])
def test_double_backward_matches_torch(name, kw):
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 4, 5, 5)), rng.standard_normal((4, 2, 3, 3))
    v = None
    results = []
    for lib, fn in ((ember, getattr(F, name)), (torch, getattr(TF, name))):
        xt = lib.tensor(x, requires_grad=True)
        wt = lib.tensor(w, requires_grad=True)
        out = fn(xt, wt, **kw)
        if v is None:
            v = rng.standard_normal(tuple(out.shape))
        gx, gw = lib.autograd.grad((out * out).sum(), [xt, wt], create_graph=True)
        second = lib.autograd.grad((gx * gx).sum() + (gw * lib.tensor(np.cos(w))).sum(),
                                   [xt, wt])
        results.append([g.detach().numpy() for g in (out, gx, gw) + tuple(second)])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_every_primitive_shape_rule_holds_in_backward_and_double_backward():
    rng = np.random.default_rng(4)
    x = ember.tensor(rng.standard_normal((2, 4, 5, 5)), requires_grad=True)
    w = ember.tensor(rng.standard_normal((4, 2, 3, 3)), requires_grad=True)
    b = ember.tensor(rng.standard_normal(4), requires_grad=True)
    registry._observer = _ShapeRuleObserver()
    try:
        for fn, kw in ((F.conv2d, dict(padding=1, groups=2)),
                       (F.conv_transpose2d, dict(stride=2, groups=2))):
            out = fn(x, w, b, **kw)
            grads = ember.autograd.grad((out * out).sum(), [x, w, b], create_graph=True)
            ember.autograd.grad(sum((g * g).sum() for g in grads), [x, w, b])
        cols = F.unfold(x, 2, padding=1)
        ember.autograd.grad((F.fold(cols * cols, (5, 5), 2, padding=1) ** 2).sum(), [x])
    finally:
        registry._observer = None


# Known values and properties -----------------------------------------------------------------
def test_identity_kernel_returns_the_input():
    x = ember.randn(2, 3, 6, 5)
    w = ember.zeros(3, 3, 3, 3)
    for c in range(3):
        w[c, c, 1, 1] = 1.0
    np.testing.assert_array_equal(F.conv2d(x, w, padding=1).numpy(), x.numpy())


def test_conv1d_known_values():
    x = ember.tensor([[[1.0, 2.0, 3.0, 4.0]]])
    w = ember.tensor([[[1.0, -1.0]]])
    assert F.conv1d(x, w).tolist() == [[[-1.0, -1.0, -1.0]]]
    assert F.conv1d(x, w, ember.tensor([10.0]), padding=1, stride=2).tolist() == \
        [[[9.0, 9.0, 14.0]]]


def test_conv_transpose_is_the_adjoint_of_conv():
    """<conv(x, w), y> == <x, conv_transpose(y, w)>, with PyTorch nowhere in sight."""
    rng = np.random.default_rng(1)
    for stride, padding, dilation, groups in ((1, 0, 1, 1), (2, 1, 1, 2), (3, 2, 2, 1)):
        x = ember.tensor(rng.standard_normal((2, 4, 9, 8)))
        w = ember.tensor(rng.standard_normal((6, 4 // groups, 3, 2)))
        y = F.conv2d(x, w, stride=stride, padding=padding, dilation=dilation, groups=groups)
        u = ember.tensor(rng.standard_normal(tuple(y.shape)))
        extra = [(s + 2 * padding - dilation * (k - 1) - 1) % stride
                 for s, k in zip((9, 8), (3, 2))]
        back = F.conv_transpose2d(u, w, stride=stride, padding=padding, output_padding=extra,
                                  dilation=dilation, groups=groups)
        assert back.shape == x.shape
        np.testing.assert_allclose((y * u).sum().item(), (x * back).sum().item(), rtol=1e-10)


def test_unfold_known_values_and_fold_counts_overlaps():
    x = ember.arange(16.0).reshape(1, 1, 4, 4)
    cols = F.unfold(x, 2, stride=2)
    assert cols.shape == (1, 4, 4)
    assert cols[0, :, 0].tolist() == [0.0, 1.0, 4.0, 5.0]
    assert cols[0, :, 3].tolist() == [10.0, 11.0, 14.0, 15.0]
    np.testing.assert_array_equal(F.fold(cols, (4, 4), 2, stride=2).numpy(), x.numpy())
    counts = F.fold(F.unfold(ember.ones(1, 1, 4, 4), 2), (4, 4), 2)
    assert counts[0, 0].tolist() == [[1, 2, 2, 1], [2, 4, 4, 2], [2, 4, 4, 2], [1, 2, 2, 1]]


def test_grad_fn_name_and_unbatched_shapes():
    x = ember.randn(3, 6, 6, requires_grad=True)
    w = ember.randn(4, 3, 3, 3)
    assert F.conv2d(x, w).shape == (4, 4, 4)
    assert F.conv_transpose2d(x, ember.randn(3, 2, 3, 3)).shape == (2, 8, 8)
    assert F.conv2d(x.unsqueeze(0), w).grad_fn.name() == "ConvolutionBackward0"


def test_half_precision_results_keep_their_dtype():
    for dtype in (ember.float16, ember.bfloat16):
        x = ember.randn(1, 2, 5, 5, dtype=dtype, requires_grad=True)
        w = ember.randn(3, 2, 3, 3, dtype=dtype, requires_grad=True)
        out = F.conv2d(x, w, ember.zeros(3, dtype=dtype), padding=1)
        assert out.dtype is dtype
        gx, gw = ember.autograd.grad(out.sum(), [x, w])
        assert gx.dtype is dtype and gw.dtype is dtype


# Errors ------------------------------------------------------------------------------------------
def _x(*shape):
    return ember.zeros(*shape)


@pytest.mark.parametrize("call,error,message", [
    (lambda: F.conv2d(_x(5, 5), _x(8, 4, 3, 3)), ember.ShapeError,
     r"conv2d: expected input with 4 dims \(N, C, H, W\) or 3 \(C, H, W\), got shape \(5, 5\)"),
    (lambda: F.conv2d(_x(2, 3, 5, 5), _x(8, 4, 3, 3)), ember.ShapeError,
     r"conv2d: input has 3 channels but weight expects 4 \(weight shape \(8, 4, 3, 3\), "
     r"groups 1\)"),
    (lambda: F.conv2d(_x(2, 4, 5, 5), _x(8, 1, 3, 3), groups=2), ember.ShapeError,
     r"conv2d: input has 4 channels but weight expects 2 \(weight shape \(8, 1, 3, 3\), "
     r"groups 2\)"),
    (lambda: F.conv2d(_x(2, 4, 5, 5), _x(3, 2, 3, 3), groups=2), ember.ShapeError,
     r"conv2d: weight's first dim \(out_channels\) 3 is not divisible by groups 2"),
    (lambda: F.conv2d(_x(2, 3, 2, 2), _x(8, 3, 3, 3)), ember.ShapeError,
     r"conv2d: kernel size \(3, 3\) \(after dilation\) is larger than the padded input size "
     r"\(2, 2\)"),
    (lambda: F.conv2d(_x(2, 3, 5, 5), _x(8, 3, 3, 3), dilation=3), ember.ShapeError,
     r"conv2d: kernel size \(7, 7\)"),
    (lambda: F.conv2d(_x(2, 3, 5, 5), _x(8, 3, 3, 3), stride=0), ember.EmberError,
     r"conv2d: stride must be positive, got \(0, 0\)"),
    (lambda: F.conv2d(_x(2, 3, 5, 5), _x(8, 3, 3, 3), stride=(1, 2, 3)), ember.EmberError,
     r"conv2d: expected stride to be an int or a tuple of 2 ints"),
    (lambda: F.conv2d(_x(2, 3, 5, 5), _x(8, 3, 3, 3), padding=-1), ember.EmberError,
     r"conv2d: padding must be non-negative"),
    (lambda: F.conv2d(_x(2, 3, 5, 5), _x(8, 3, 3, 3), stride=2, padding="same"),
     ember.EmberError, r"conv2d: padding='same' is not supported for strided convolutions"),
    (lambda: F.conv2d(_x(2, 3, 5, 5), _x(8, 3, 3, 3), padding="full"), ember.EmberError,
     r"conv2d: padding must be 'valid', 'same', an int or a tuple of 2 ints, got 'full'"),
    (lambda: F.conv2d(_x(2, 3, 5, 5), _x(8, 3, 3)), ember.ShapeError,
     r"conv2d: expected weight with 4 dims \(out_channels, in_channels/groups, kH, kW\)"),
    (lambda: F.conv2d(_x(2, 3, 5, 5), _x(8, 3, 3, 3), _x(4)), ember.ShapeError,
     r"conv2d: expected bias of shape \(8,\), got \(4,\)"),
    (lambda: F.conv2d(_x(2, 3, 5, 5), ember.zeros(8, 3, 3, 3, dtype=ember.float64)),
     ember.EmberTypeError, r"conv2d: input dtype float32 and weight dtype float64 differ"),
    (lambda: F.conv1d(_x(2, 3, 5, 5), _x(4, 3, 3)), ember.ShapeError,
     r"conv1d: expected input with 3 dims \(N, C, L\) or 2 \(C, L\), got shape \(2, 3, 5, 5\)"),
    (lambda: F.conv3d(_x(2, 3, 5, 5), _x(4, 3, 3, 3, 3), groups=0), ember.EmberError,
     r"conv3d: groups must be a positive integer, got 0"),
    (lambda: F.conv2d([[1.0]], _x(4, 3, 3, 3)), ember.EmberTypeError,
     r"conv2d: expected input to be a Tensor, got list"),
    (lambda: F.conv_transpose2d(_x(2, 4, 3, 3), _x(4, 2, 3, 3), stride=2, output_padding=2),
     ember.EmberError, r"conv_transpose2d: output_padding \(2, 2\) must be smaller than "
                       r"either stride \(2, 2\) or dilation \(1, 1\)"),
    (lambda: F.conv_transpose2d(_x(2, 3, 3, 3), _x(4, 2, 3, 3)), ember.ShapeError,
     r"conv_transpose2d: input has 3 channels but weight expects 4"),
    (lambda: F.conv_transpose2d(_x(2, 4, 1, 1), _x(4, 2, 1, 1), padding=1), ember.ShapeError,
     r"conv_transpose2d: the output size \(-1, -1\) is not positive"),
    (lambda: F.conv_transpose1d(_x(2, 4, 3), _x(4, 2, 3), padding="same"), ember.EmberError,
     r"conv_transpose1d: padding must be an int or a tuple of 1 ints"),
    (lambda: F.unfold(_x(3, 5), 2), ember.ShapeError,
     r"unfold: expected input with 4 dims \(N, C, H, W\) or 3 \(C, H, W\), got shape"),
    (lambda: F.unfold(ember.zeros(1, 1, 4, 4, dtype=ember.int64), 2), ember.EmberTypeError,
     r"unfold: expected a floating-point input, got int64"),
    (lambda: F.fold(_x(2, 12, 8), (4, 4), 2), ember.ShapeError,
     r"fold: output_size \(4, 4\), kernel_size \(2, 2\), dilation \(1, 1\), padding \(0, 0\) "
     r"and stride \(1, 1\) give 3 \* 3 = 9 blocks, but the input has 8"),
    (lambda: F.fold(_x(2, 10, 9), (4, 4), 2), ember.ShapeError,
     r"fold: expected input's dim 1 \(10\) to be divisible by the product of kernel_size"),
])
def test_errors_name_the_op_and_the_shapes(call, error, message):
    with pytest.raises(error, match=message):
        call()
