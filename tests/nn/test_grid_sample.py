"""F.grid_sample and F.affine_grid against PyTorch (values; gradients of input, grid and
theta; second derivatives), finite differences, shape rules, ember.jit, non-finite grid
coordinates and the errors."""
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.errors import EmberTypeError, EmberValueError, ShapeError
from ..ops.optable import OpCase, S, generate, nc, needs_torch, rand, torch

TF = None if torch is None else torch.nn.functional
PADDINGS = ("zeros", "border", "reflection")
CONFIGS = [(d, mode, padding, align)
           for d, mode in ((2, "bilinear"), (2, "nearest"), (2, "bicubic"),
                           (3, "bilinear"), (3, "nearest"))
           for padding in PADDINGS for align in (False, True)]
SPATIAL = {2: (4, 5), 3: (3, 4, 5)}
OUT_SPATIAL = {2: (3, 7), 3: (2, 3, 4)}


def _config_id(config):
    d, mode, padding, align = config
    return f"{d}d-{mode}-{padding}-{'aligned' if align else 'unaligned'}"


def _grid(rng, d, align, dtype, batch=2):
    """Random points in [-1.4, 1.4] (some outside the input); on the first ones, each
    coordinate is replaced by a corner, the centre, a pixel centre or a point halfway
    between pixels, where floors, clips and nearest's ties (to even) are exact."""
    grid = rng.uniform(-1.4, 1.4, (batch,) + OUT_SPATIAL[d] + (d,))
    flat = grid.reshape(-1, d)
    for axis in range(d):
        size = SPATIAL[d][-1 - axis]
        k = np.arange(size)
        if align:
            centres, halves = -1 + 2 * k / (size - 1), -1 + (2 * k[:-1] + 1) / (size - 1)
        else:
            centres, halves = -1 + (2 * k + 1) / size, -1 + 2 * (k + 1) / size
        special = np.concatenate([[-1.0, 1.0, 0.0], centres, halves])
        flat[:len(special), axis] = special
    return grid.astype(dtype)


def _tolerance(dtype, reference):
    scale = max(float(np.abs(reference).max()), 1.0) if reference.size else 1.0
    return (1e-10, 1e-10 * scale) if dtype == "float64" else (1e-5, 1e-5 * scale)


def _assert_close(got, want, dtype, what):
    rtol, atol = _tolerance(dtype, want)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def _ember_results(x, grid, upstream, **kwargs):
    """[output, d input, d grid] from ember, with ``upstream`` as the output's gradient."""
    ex, eg = ember.tensor(x, requires_grad=True), ember.tensor(grid, requires_grad=True)
    out = F.grid_sample(ex, eg, **kwargs)
    gx, gg = ember.autograd.grad(out, [ex, eg], ember.tensor(upstream))
    return [out.detach().numpy(), gx.numpy(), gg.numpy()]


def _torch_results(x, grid, upstream, **kwargs):
    tx, tg = torch.tensor(x, requires_grad=True), torch.tensor(grid, requires_grad=True)
    ref = TF.grid_sample(tx, tg, **kwargs)
    rx, rg = torch.autograd.grad(ref, (tx, tg), torch.tensor(upstream))
    return [ref.detach().numpy(), rx.numpy(), rg.numpy()]


def _ember_and_torch(x, grid, upstream, **kwargs):
    return (_ember_results(x, grid, upstream, **kwargs),
            _torch_results(x, grid, upstream, **kwargs))


# The sweep against PyTorch ------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("config", CONFIGS, ids=_config_id)
def test_values_and_gradients_match_torch(config, dtype):
    d, mode, padding, align = config
    rng = np.random.default_rng(sum(map(ord, _config_id(config) + dtype)))
    x = rng.standard_normal((2, 3) + SPATIAL[d]).astype(dtype)
    grid = _grid(rng, d, align, dtype)
    upstream = rng.standard_normal((2, 3) + OUT_SPATIAL[d]).astype(dtype)
    got, want = _ember_and_torch(x, grid, upstream, mode=mode, padding_mode=padding,
                                 align_corners=align)
    assert got[0].dtype == np.dtype(dtype) and got[0].shape == want[0].shape
    for what, g, w in zip(("output", "input grad", "grid grad"), got, want):
        _assert_close(g, w, dtype, f"{_config_id(config)} {dtype}: {what}")
    assert np.abs(got[0]).max() > 0.1 and np.abs(got[1]).max() > 0.1
    if mode != "nearest":
        assert np.abs(got[2]).max() > 0.1


@needs_torch
@pytest.mark.parametrize("config", CONFIGS, ids=_config_id)
def test_second_derivatives_match_torch(config):
    """d/d(input, grid, upstream) of <d<out, u>/d input, w1> + <d<out, u>/d grid, w2>."""
    d, mode, padding, align = config
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3) + SPATIAL[d])
    grid = rng.uniform(-1.3, 1.3, (2,) + OUT_SPATIAL[d] + (d,))
    u = rng.standard_normal((2, 3) + OUT_SPATIAL[d])
    w1, w2 = rng.standard_normal(x.shape), rng.standard_normal(grid.shape)
    kwargs = dict(mode=mode, padding_mode=padding, align_corners=align)

    leaves = [ember.tensor(a, requires_grad=True) for a in (x, grid, u)]
    out = F.grid_sample(leaves[0], leaves[1], **kwargs)
    gx, gg = ember.autograd.grad((out * leaves[2]).sum(), leaves[:2], create_graph=True)
    total = (gx * ember.tensor(w1)).sum() + (gg * ember.tensor(w2)).sum()
    got = ember.autograd.grad(total, leaves, allow_unused=True)

    t_leaves = [torch.tensor(a, requires_grad=True) for a in (x, grid, u)]
    ref = TF.grid_sample(t_leaves[0], t_leaves[1], **kwargs)
    rx, rg = torch.autograd.grad((ref * t_leaves[2]).sum(), t_leaves[:2], create_graph=True)
    t_total = (rx * torch.tensor(w1)).sum() + (rg * torch.tensor(w2)).sum()
    want = torch.autograd.grad(t_total, t_leaves, allow_unused=True)
    for name, g, w in zip(("input", "grid", "upstream"), got, want):
        if w is None:  # nearest: the input enters linearly, once
            assert g is None or not g.numpy().any(), name
            continue
        _assert_close(g.numpy(), w.numpy(), "float64", f"{_config_id(config)}: {name}")
    assert np.abs(got[2].numpy()).max() > 0.1


# The op-table templates: PyTorch, finite differences (first and second order), shape rules
def _sampling_case(d, mode):
    def samples(rng, dtype):
        def r(*shape, lo=-2.0, hi=2.0):
            return rand(rng, shape, dtype, lo, hi)
        spatial, out = SPATIAL[d], OUT_SPATIAL[d]
        cases = [S(r(2, 3, *spatial), r(2, *out, d, lo=-1.3, hi=1.3), mode=mode,
                   padding_mode=padding, align_corners=align)
                 for padding, align in zip(PADDINGS, (False, True, True))]
        return cases + [
            S(nc(r(2, 2, *spatial)), nc(r(2, *out, d, lo=-1.3, hi=1.3)), mode=mode,
              padding_mode="reflection", align_corners=False),
            S(r(1, 2, *(1,) * d), r(1, *out, d), mode=mode, align_corners=True),  # size 1
            S(r(0, 2, *spatial), r(0, *out, d), mode=mode, align_corners=False),
            S(r(2, 0, *spatial), r(2, *out, d), mode=mode, align_corners=False),
            S(r(2, 2, *spatial), r(2, 0, *out[1:], d), mode=mode, align_corners=False)]
    return OpCase(f"grid_sample_{d}d_{mode}", F.grid_sample,
                  None if TF is None else TF.grid_sample, samples,
                  dtypes=("float32", "float64"))


def _affine_samples(rng, dtype):
    def r(*shape):
        return rand(rng, shape, dtype, -1.5, 1.5)
    return [S(r(2, 2, 3), (2, 3, 4, 5), align_corners=False),
            S(r(2, 2, 3), (2, 1, 3, 1), align_corners=False),
            S(nc(r(3, 2, 3)), (3, 2, 5, 4), align_corners=True),
            S(r(2, 3, 4), (2, 3, 4, 5, 3), align_corners=False),
            S(r(1, 3, 4), (1, 1, 2, 3, 2), align_corners=True)]


CASES = [_sampling_case(d, mode) for d, mode in
         ((2, "bilinear"), (2, "nearest"), (2, "bicubic"), (3, "bilinear"), (3, "nearest"))]
CASES.append(OpCase("affine_grid", F.affine_grid, None if TF is None else TF.affine_grid,
                    _affine_samples, dtypes=("float32", "float64")))
generate(CASES, globals())


# affine_grid ----------------------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 1, 1, 6), (2, 1, 7, 2),
                                  (2, 3, 3, 4, 5), (2, 1, 4, 1, 3)])
def test_affine_grid_matches_torch(size, align, dtype):
    rng = np.random.default_rng(len(size) * 10 + size[2])
    d = len(size) - 2
    theta = rng.uniform(-1.5, 1.5, (2, d, d + 1)).astype(dtype)
    upstream = rng.standard_normal((2,) + size[2:] + (d,)).astype(dtype)
    et = ember.tensor(theta, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the unit-size warning, as PyTorch's
        grid = F.affine_grid(et, size, align_corners=align)
        tt = torch.tensor(theta, requires_grad=True)
        ref = TF.affine_grid(tt, size, align_corners=align)
    (g,) = ember.autograd.grad(grid, [et], ember.tensor(upstream))
    (rg,) = torch.autograd.grad(ref, tt, torch.tensor(upstream))
    assert tuple(grid.shape) == tuple(ref.shape) and grid.dtype.name == dtype
    _assert_close(grid.detach().numpy(), ref.detach().numpy(), dtype, "grid")
    _assert_close(g.numpy(), rg.numpy(), dtype, "theta grad")


def test_affine_grid_identity_hits_pixel_centres():
    theta = ember.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]], dtype=ember.float64)
    x = ember.arange(12.0, dtype=ember.float64).reshape(1, 1, 3, 4)
    for align in (False, True):
        grid = F.affine_grid(theta, (1, 1, 3, 4), align_corners=align)
        out = F.grid_sample(x, grid, align_corners=align)
        np.testing.assert_allclose(out.numpy(), x.numpy(), atol=1e-12)
    np.testing.assert_allclose(grid.numpy()[0, :, :, 0], [[-1, -1 / 3, 1 / 3, 1]] * 3)


# Non-finite and far-away coordinates -----------------------------------------------------------
_SPECIAL = (np.nan, np.inf, -np.inf, 1e10, -3e9, 1e20, 7.3, -5.2)


def _special_grid(d, value, dtype):
    """Two points: one with x = value, one with y = value (the other coordinates inside)."""
    grid = np.zeros((1, 2) + (1,) * (d - 1) + (d,), dtype)
    grid[0, 0, ..., 0], grid[0, 0, ..., 1] = value, 0.3
    grid[0, 1, ..., 0], grid[0, 1, ..., 1] = 0.3, value
    return grid


def _ramp(d, dtype):
    return (np.arange(3 ** d) + 1.0).reshape((1, 1) + (3,) * d).astype(dtype)


def _torch_crashes(d, mode, padding, value):
    """PyTorch 2.13's 4-D bilinear kernel reads out of bounds (a segfault) here."""
    return d == 2 and mode == "bilinear" and padding != "zeros" and (
        np.isnan(value) or padding == "reflection" and np.isinf(value))


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("config", [c for c in CONFIGS if c[0] == 2], ids=_config_id)
def test_nonfinite_coordinates_4d_match_torch(config, dtype):
    d, mode, padding, align = config
    x, upstream = _ramp(d, dtype), np.ones((1, 1, 2, 1), dtype)
    for value in _SPECIAL:
        grid = _special_grid(d, value, dtype)
        kwargs = dict(mode=mode, padding_mode=padding, align_corners=align)
        got = _ember_results(x, grid, upstream, **kwargs)
        if not _torch_crashes(d, mode, padding, value):
            want = _torch_results(x, grid, upstream, **kwargs)
        else:  # as PyTorch's other modes: the coordinate clips to 0, with no slope
            want = _torch_results(x, _special_grid(d, -np.inf, dtype), upstream,
                                  mode=mode, padding_mode="border", align_corners=align)
        for what, g, w in zip(("output", "input grad", "grid grad"), got, want):
            _assert_close(g, w, dtype, f"{_config_id(config)} at {value}: {what}")


@needs_torch
@pytest.mark.parametrize("config", [c for c in CONFIGS if c[0] == 3], ids=_config_id)
def test_nonfinite_coordinates_5d(config):
    """PyTorch's 5-D kernel: forward as it computes; with zero padding its gradients
    too. With border or reflection padding it reads a NaN coordinate (and, reflecting,
    an infinite one) at size - 1 but gives no gradient there; ember's gradients are
    those of the point it read, which PyTorch gives for a coordinate of +inf."""
    d, mode, padding, align = config
    x, upstream = _ramp(d, "float64"), np.ones((1, 1, 2, 1, 1))
    kwargs = dict(mode=mode, padding_mode=padding, align_corners=align)
    for value in (np.nan, np.inf, -np.inf, 1e10, -1e10, 1e6 + 0.3, -1e6 - 0.7, 7.3, -5.2):
        if padding == "reflection" and np.isfinite(value) and abs(value) > 2 ** 31:
            continue  # PyTorch counts the reflections in an int32, which overflows
        got, want = _ember_and_torch(x, _special_grid(d, value, "float64"), upstream,
                                     **kwargs)
        _assert_close(got[0], want[0], "float64", f"output at {value}")
        if padding != "zeros" and (np.isnan(value) or padding == "reflection"
                                   and np.isinf(value)):
            want = _torch_results(x, _special_grid(d, np.inf, "float64"), upstream,
                                  mode=mode, padding_mode="border", align_corners=align)
            _assert_close(got[0], want[0], "float64", f"output at {value} as at +inf")
        for what, g, w in zip(("input grad", "grid grad"), got[1:], want[1:]):
            _assert_close(g, w, "float64", f"{_config_id(config)} at {value}: {what}")


def test_nan_coordinate_with_zero_padding_gives_nan_in_4d_and_zero_in_5d():
    for d, mode, expected in ((2, "bilinear", np.nan), (2, "bicubic", np.nan),
                              (2, "nearest", 0.0), (3, "bilinear", 0.0)):
        x = ember.tensor(_ramp(d, "float64"))
        out = F.grid_sample(x, ember.tensor(_special_grid(d, np.nan, "float64")),
                            mode=mode, align_corners=False)
        np.testing.assert_array_equal(out.numpy().ravel(), [expected, expected])


# Gradients: nearest, grid only -----------------------------------------------------------------
def test_nearest_gives_the_grid_a_zero_gradient():
    x = ember.randn(1, 2, 3, 3)
    grid = ember.tensor(np.full((1, 2, 2, 2), 0.2), dtype=ember.float32, requires_grad=True)
    out = F.grid_sample(x, grid, mode="nearest", align_corners=False)
    assert out.requires_grad
    out.sum().backward()
    assert grid.grad is not None and grid.grad.shape == grid.shape
    assert not grid.grad.numpy().any()


def test_align_corners_none_warns_and_means_false():
    x = ember.randn(1, 1, 3, 4)
    grid = ember.rand(1, 2, 2, 2) * 2 - 1
    theta = ember.randn(1, 2, 3)
    with pytest.warns(UserWarning, match="align_corners=False"):
        out = F.grid_sample(x, grid)
    with pytest.warns(UserWarning, match="align_corners=False"):
        base = F.affine_grid(theta, (1, 1, 3, 4))
    np.testing.assert_array_equal(out.numpy(), F.grid_sample(x, grid, align_corners=False)
                                  .numpy())
    np.testing.assert_array_equal(base.numpy(),
                                  F.affine_grid(theta, (1, 1, 3, 4), align_corners=False)
                                  .numpy())


@needs_torch
def test_half_precision_matches_torch():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 5, 6)).astype(np.float16)
    grid = rng.uniform(-1.2, 1.2, (1, 3, 4, 2)).astype(np.float16)
    out = F.grid_sample(ember.tensor(x), ember.tensor(grid), align_corners=False)
    ref = TF.grid_sample(torch.tensor(x), torch.tensor(grid), align_corners=False)
    assert out.dtype is ember.float16
    np.testing.assert_allclose(out.numpy().astype(np.float32), ref.numpy().astype(np.float32),
                               rtol=1e-2, atol=1e-2)


def test_autocast(monkeypatch):
    """affine_grid runs its matmul in autocast's dtype, as PyTorch's bmm; grid_sample
    takes half-precision inputs to float32 once the policy names it, as PyTorch's."""
    pytest.importorskip("ml_dtypes")
    from ember.amp import policy
    theta = ember.tensor([[[0.9, 0.1, 0.0], [-0.2, 1.1, 0.1]]])
    x = ember.randn(1, 2, 4, 5).to(ember.bfloat16)
    monkeypatch.setitem(policy.POLICY, "grid_sample", policy.FLOAT32)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        grid = F.affine_grid(theta, (1, 2, 3, 3), align_corners=False)
        out = F.grid_sample(x, grid.float(), align_corners=False)
    assert grid.dtype is ember.bfloat16 and out.dtype is ember.float32
    want = F.grid_sample(x.float(), grid.float(), align_corners=False)
    np.testing.assert_array_equal(out.numpy(), want.numpy())


# ember.jit ------------------------------------------------------------------------------------
def test_jit_spatial_transformer_matches_eager():
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((2, 3, 6, 7)), requires_grad=True)
    x3 = ember.tensor(rng.standard_normal((2, 2, 3, 4, 5)), requires_grad=True)
    theta = ember.tensor(np.array([[[0.9, 0.2, 0.1], [-0.15, 1.1, -0.05]]] * 2)
                         + rng.standard_normal((2, 2, 3)) * 0.05, requires_grad=True)
    theta3 = ember.tensor(np.eye(3, 4) + rng.standard_normal((2, 3, 4)) * 0.1,
                          requires_grad=True)

    def step(x, x3, theta, theta3):
        x.grad = x3.grad = theta.grad = theta3.grad = None
        grid = F.affine_grid(theta, (2, 3, 5, 4), align_corners=False)
        y = F.grid_sample(x, grid, align_corners=False)
        z = F.grid_sample(x, grid * 1.3, mode="bicubic", padding_mode="reflection",
                          align_corners=True)
        w = F.grid_sample(x, grid, mode="nearest", padding_mode="border",
                          align_corners=False)
        grid3 = F.affine_grid(theta3, (2, 2, 2, 3, 4), align_corners=True)
        v = F.grid_sample(x3, grid3, padding_mode="border", align_corners=True)
        loss = (y ** 2).sum() + (z * y).sum() + w.sum() + (v ** 2).sum()
        loss.backward()
        return loss

    leaves = (x, x3, theta, theta3)
    eager = [t.detach().numpy().copy() for t in
             (step(*leaves),) + tuple(t.grad for t in leaves)]
    assert all(np.abs(e).max() > 1e-3 for e in eager)
    compiled = ember.jit(step)
    for _ in range(2):  # the trace, then the cached graph
        got = [t.detach().numpy() for t in
               (compiled(*leaves),) + tuple(t.grad for t in leaves)]
        for g, e in zip(got, eager):
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


# Errors -----------------------------------------------------------------------------------------
_X4, _G4 = ember.zeros(2, 3, 4, 5), ember.zeros(2, 6, 7, 2)
_X5, _G5 = ember.zeros(2, 3, 4, 5, 6), ember.zeros(2, 6, 7, 8, 3)
GRID_SAMPLE_ERRORS = [
    ((_X4[0], _G4[0]), {}, ShapeError, r"4-D input.*got input of shape \(3, 4, 5\)"),
    ((_X4, _G5), {}, ShapeError, r"grid of shape \(2, 6, 7, 8, 3\)"),
    ((ember.zeros(1, 1, 2, 2, 2, 2), ember.zeros(1, 1, 1, 1, 1, 4)), {}, ShapeError,
     "5-D ones"),
    ((_X4, ember.zeros(2, 6, 7, 3)), {}, ShapeError, "grid's last dim to be 2"),
    ((_X5, ember.zeros(2, 6, 7, 8, 2)), {}, ShapeError, "grid's last dim to be 3"),
    ((_X4, _G4[:1]), {}, ShapeError, "same batch size"),
    ((ember.zeros(2, 3, 0, 5), _G4), {}, ShapeError, "non-empty spatial dims"),
    ((_X5, _G5), {"mode": "bicubic"}, ShapeError, "bicubic interpolation only supports 4-D"),
    ((_X4, _G4), {"mode": "linear"}, EmberValueError, "mode to be 'bilinear'.*'linear'"),
    ((_X4, _G4), {"mode": "trilinear"}, EmberValueError, "'trilinear'"),
    ((_X4, _G4), {"padding_mode": "zero"}, EmberValueError,
     "padding_mode to be 'zeros'.*'zero'"),
    ((_X4, _G4.double()), {}, EmberTypeError, "same dtype, got float32 and float64"),
    ((_X4.long(), _G4.long()), {}, EmberTypeError, "floating-point input, got int64"),
    ((np.zeros((2, 3, 4, 5)), _G4), {}, EmberTypeError, "input to be a Tensor"),
    ((_X4, [[0.0, 0.0]]), {}, EmberTypeError, "grid to be a Tensor"),
]


@pytest.mark.parametrize("args,kwargs,error,match", GRID_SAMPLE_ERRORS)
def test_grid_sample_errors(args, kwargs, error, match):
    with pytest.raises(error, match="grid_sample: " + ".*" + match):
        F.grid_sample(*args, align_corners=False, **kwargs)


_T2, _T3 = ember.zeros(2, 2, 3), ember.zeros(2, 3, 4)
AFFINE_GRID_ERRORS = [
    ((_T2, (2, 3, 4, 5, 6)), EmberValueError, r"shape \(N, 3, 4\).*got theta of shape"),
    ((_T3, (2, 3, 4, 5)), EmberValueError, r"shape \(N, 2, 3\)"),
    ((_T2[0], (2, 3, 4, 5)), EmberValueError, r"shape \(N, 2, 3\)"),
    ((_T2, (2, 3, 4)), ShapeError, "only supports 4-D and 5-D sizes"),
    ((_T2.long(), (2, 3, 4, 5)), EmberValueError, "floating-point dtype, got int64"),
    ((_T2, (2, 3, 0, 5)), EmberValueError, "positive output size"),
    ((_T2, (3, 3, 4, 5)), ShapeError, "2 matrices but size asks for a batch of 3"),
    ((_T2, (2, 3, 4.0, 5)), EmberTypeError, "size to be a tuple of ints"),
    (([[1.0]], (2, 3, 4, 5)), EmberTypeError, "theta to be a Tensor"),
]


@pytest.mark.parametrize("args,error,match", AFFINE_GRID_ERRORS)
def test_affine_grid_errors(args, error, match):
    with pytest.raises(error, match="affine_grid: .*" + match):
        F.affine_grid(*args, align_corners=False)


def test_errors_are_caught_as_pytorchs_are():
    """A ported ``except ValueError`` / ``except RuntimeError`` still catches them."""
    with pytest.raises(ValueError):
        F.grid_sample(_X4, _G4, mode="area", align_corners=False)
    with pytest.raises(ValueError):
        F.affine_grid(_T3, (2, 3, 4, 5), align_corners=False)
    with pytest.raises(RuntimeError):
        F.grid_sample(_X4, _G4[:1], align_corners=False)


def test_grid_sample_runs_in_float32_under_autocast():
    x = ember.randn(1, 2, 4, 4).to(ember.bfloat16)
    grid = ember.rand(1, 3, 3, 2) * 2 - 1
    with ember.autocast("cpu", dtype=ember.bfloat16):
        y = F.grid_sample(x, grid, align_corners=False)
    assert y.dtype is ember.float32  # (as torch.autocast on the CPU)
    want = F.grid_sample(x.float(), grid, align_corners=False)
    np.testing.assert_array_equal(y.numpy(), want.numpy())
