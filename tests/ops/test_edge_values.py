"""Values at the edges of elementwise ops' domains, where a formula that is right in the
middle goes wrong: overflow in intermediate squares, equal infinities, a gradient lost
at 0, rounding at the far end of an interpolation. Known values, so these run without
PyTorch; each case is one PyTorch gives (checked against torch 2.13)."""
from __future__ import annotations

import numpy as np
import pytest

import ember


def _grad(fn, *values, dtype=ember.float64):
    xs = [ember.tensor(v, dtype=dtype, requires_grad=True) for v in values]
    out = fn(*xs)
    out.sum().backward()
    return out.detach().numpy(), [x.grad.numpy() for x in xs]


def test_asinh_has_gradient_one_at_both_zeros_and_keeps_the_sign_of_zero():
    out, (g,) = _grad(ember.asinh, [0.0, -0.0, -2.0, 1e9])
    np.testing.assert_array_equal(g[:2], [1.0, 1.0])
    np.testing.assert_allclose(g[2:], [1 / np.sqrt(5.0), 1e-9], rtol=1e-12)
    assert list(np.signbit(out[:2])) == [False, True]
    np.testing.assert_allclose(out[2:], np.arcsinh([-2.0, 1e9]), rtol=1e-14)


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_hypot_does_not_overflow_or_underflow_in_its_squares(dtype):
    big, tiny = (3e20, 3e-30) if dtype is ember.float32 else (3e200, 3e-200)
    out, (ga, gb) = _grad(ember.hypot, [big, tiny, 3.0], [big * 4 / 3, tiny * 4 / 3, -4.0],
                          dtype=dtype)
    np.testing.assert_allclose(out, [big * 5 / 3, tiny * 5 / 3, 5.0], rtol=1e-6)
    np.testing.assert_allclose(ga, [0.6, 0.6, 0.6], rtol=1e-6)
    np.testing.assert_allclose(gb, [0.8, 0.8, -0.8], rtol=1e-6)
    inf = ember.hypot(ember.tensor([np.inf, 1.0]), ember.tensor([1.0, np.nan])).numpy()
    assert inf[0] == np.inf and np.isnan(inf[1])


@pytest.mark.parametrize("fn,log2", [(ember.logaddexp, np.log(2.0)), (ember.logaddexp2, 1.0)])
def test_logaddexp_of_equal_infinities_is_that_infinity(fn, log2):
    out = fn(ember.tensor([np.inf, -np.inf, 1.0]), ember.tensor([np.inf, -np.inf, 1.0]))
    np.testing.assert_allclose(out.numpy(), [np.inf, -np.inf, 1.0 + log2], rtol=1e-7)
    _, (ga, gb) = _grad(fn, [2.0], [2.0])  # equal arguments share the gradient
    np.testing.assert_allclose(ga, [0.5])
    np.testing.assert_allclose(gb, [0.5])


def test_lerp_is_exact_at_weight_one_and_agrees_compiled():
    out = ember.lerp(ember.tensor([3.0, 1e8]), ember.tensor([-1e-3, 1.0]), 1.0).numpy()
    np.testing.assert_array_equal(out, np.float32([-1e-3, 1.0]))
    assert np.isnan(ember.lerp(ember.tensor([0.0]), ember.tensor([np.inf]), 0.5).item())
    s, e = ember.randn(4096), ember.randn(4096)
    w = ember.rand(4096) * 3 - 1  # both sides of 0.5, and outside [0, 1]
    np.testing.assert_array_equal(ember.jit(ember.lerp)(s, e, w).numpy(),
                                  ember.lerp(s, e, w).numpy())


def test_mode_of_a_vector_is_zero_dimensional():
    values, indices = ember.mode(ember.tensor([1, 2, 2, 3]))
    assert values.shape == () and indices.shape == ()
    assert values.item() == 2 and indices.item() == 2


def test_tensor_where_method_takes_the_condition_first():
    a = ember.tensor([1.0, 2.0, 3.0], dtype=ember.float64)
    out = a.where(ember.tensor([True, False, True]), 0.0)
    np.testing.assert_array_equal(out.numpy(), [1.0, 0.0, 3.0])
    assert out.dtype is ember.float64


def test_half_with_a_python_number_computes_in_float32_and_rounds_once():
    h = ember.tensor([0.5, 2.0]).half()
    np.testing.assert_array_equal((h * 70000).float().numpy(), [35008.0, np.inf])
    np.testing.assert_array_equal((h / 1e5).float().numpy(), np.float16([5.0067901611328125e-06,
                                                                         2.002716064453125e-05]))
    np.testing.assert_array_equal((ember.tensor([0.0, 1.0]).half() * 1e10).float().numpy(),
                                  [0.0, np.inf])
    assert (h * 70000).dtype is ember.float16
    h.mul_(70000)  # in place too (no-grad fast path)
    np.testing.assert_array_equal(h.float().numpy(), [35008.0, np.inf])


@pytest.mark.parametrize("method,value,dtype,expected", [
    ("add_", -1, ember.uint8, [255, 0, 99]), ("mul_", -1, ember.uint8, [0, 255, 156]),
    ("mul_", 300, ember.int8, [0, 44, 48]), ("add_", 300, ember.uint8, [44, 45, 144])])
def test_in_place_integer_ops_wrap_an_out_of_range_number(method, value, dtype, expected):
    x = ember.tensor([0, 1, 100], dtype=dtype)
    getattr(x, method)(value)
    assert x.numpy().tolist() == expected and x.dtype is dtype


def test_atan2_gradient_at_the_origin_is_zero():
    _, (ga, gb) = _grad(ember.atan2, [0.0, 1.0], [0.0, 2.0])
    np.testing.assert_allclose(ga, [0.0, 0.4], rtol=1e-14)
    np.testing.assert_allclose(gb, [0.0, -0.2], rtol=1e-14)


def test_clamp_gradient_with_equal_tensor_bounds_follows_pytorch():
    x = ember.tensor([0.0, 1.0, 2.0], requires_grad=True)
    lo = ember.ones(3, requires_grad=True)
    hi = ember.ones(3, requires_grad=True)
    ember.clamp(x, lo, hi).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 0.0]
    assert lo.grad.tolist() == [0.0, 0.0, 0.0]  # (torch 2.13 drops the first one's)
    assert hi.grad.tolist() == [0.0, 0.0, 1.0]


def test_bfloat16_with_a_number_or_a_0d_tensor_rounds_once():
    b = ember.tensor([1.0078125], dtype=ember.bfloat16)
    assert (b * 3.01).float().item() == 3.03125  # (3.01 rounded first would give 3.046875)
    lr = ember.tensor(3.01, dtype=ember.float64)  # ember.jit's learning rates are 0-d tensors
    assert (b * lr).float().item() == 3.03125 and (b * lr).dtype is ember.bfloat16


def test_a_jitted_bfloat16_sgd_step_equals_eager():
    def run(compiled):
        ember.manual_seed(0)
        p = ember.nn.Parameter(ember.randn(64).to(ember.bfloat16))
        opt = ember.optim.SGD([p], lr=1e-2)
        grads = [ember.randn(64).to(ember.bfloat16) for _ in range(3)]

        def step(g):
            p.grad = g
            opt.step()
        step = ember.jit(step) if compiled else step
        for g in grads:
            step(g)
        return p.detach().float().numpy()
    np.testing.assert_array_equal(run(True), run(False))


def test_in_place_write_into_an_expanded_view_is_refused_clearly():
    x = ember.zeros(3).expand(2, 3)
    with pytest.raises(ember.EmberError, match=r"add_: more than one element .*clone\(\)"):
        x.add_(1)
    with pytest.raises(ember.EmberError, match="single memory location"):
        x[0] = 1.0


def test_binary_cross_entropy_target_gradient_is_unclamped_as_pytorch():
    p = ember.tensor([0.0, 1.0, 0.25], requires_grad=True)
    y = ember.tensor([0.0, 1.0, 0.5], requires_grad=True)
    ember.nn.functional.binary_cross_entropy(p, y, reduction="sum").backward()
    assert y.grad.tolist()[:2] == [np.inf, -np.inf]
    np.testing.assert_allclose(y.grad.numpy()[2], np.log(0.75) - np.log(0.25), rtol=1e-6)


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_with_nan_follows_pytorchs_comparisons(right):
    seq = ember.tensor([1.0, 2.0, float("nan")])
    got = ember.searchsorted(seq, ember.tensor([float("nan"), 0.5, 1.5, 2.0, 5.0]), right=right)
    assert got.tolist() == ([3, 0, 1, 3, 3] if right else [3, 0, 1, 1, 3])
    rows = ember.tensor([[1.0, float("nan"), 2.0], [0.0, 1.0, 2.0]])
    got = ember.searchsorted(rows, ember.tensor([[1.5, 2.0], [float("nan"), 1.0]]))
    assert got.tolist() == [[2, 2], [3, 1]]


def test_interpolate_nearest_takes_uint8():
    x = (ember.arange(8, dtype=ember.uint8) * 30).reshape(1, 1, 8)
    out = ember.nn.functional.interpolate(x, size=5, mode="nearest")
    assert out.dtype is ember.uint8 and out.tolist() == [[[0, 30, 90, 120, 180]]]
    with pytest.raises(ember.EmberTypeError, match="uint8 with mode='linear'"):
        ember.nn.functional.interpolate(x, size=5, mode="linear")


def test_mvlgamma_has_no_domain_check_as_pytorch_2_13():
    out = ember.mvlgamma(ember.tensor([0.3, 0.5, 1.0, 3.0], dtype=ember.float64), 3)
    np.testing.assert_allclose(out.numpy(), [6.026863353182922, np.inf, np.inf, 2.694924879806965],
                               rtol=1e-12)


def test_float_power_widens_each_operand_to_float64_on_its_own():
    base = ember.tensor([1.5, 2.0], dtype=ember.float16)
    exponent = ember.tensor(0.3, dtype=ember.float32)  # not rounded to float16 first
    out = ember.float_power(base, exponent)
    assert out.dtype is ember.float64
    np.testing.assert_allclose(out.numpy(), np.array([1.5, 2.0]) ** float(np.float32(0.3)),
                               rtol=1e-15)


@pytest.mark.parametrize("dtype", ["bool", "int64", "float16", "float32", "float64"])
def test_angle_of_real_tensors_as_pytorch(dtype):
    torch = pytest.importorskip("torch")
    values = [True, False] if dtype == "bool" else \
        ([-2, 0, 3] if dtype == "int64" else [-2.0, 0.0, 3.0, float("nan")])
    want = torch.angle(torch.tensor(values).to(getattr(torch, dtype)))
    got = ember.angle(ember.tensor(values).to(getattr(ember, dtype)))
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
    x = ember.tensor([-1.0, 2.0], requires_grad=True)
    x.angle().sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("a_shape,b_shape,left", [((3, 3, 3), (3, 3), True),
                                                  ((3, 3, 3), (3, 3), False),
                                                  ((2, 1, 3, 3), (4, 3, 5), True)])
def test_solve_triangular_reads_b_as_matrices_as_pytorch(a_shape, b_shape, left):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a = np.triu(rng.standard_normal(a_shape)) + 3 * np.eye(a_shape[-1])
    b = rng.standard_normal(b_shape)
    got = ember.linalg.solve_triangular(ember.tensor(a), ember.tensor(b), upper=True, left=left)
    want = torch.linalg.solve_triangular(torch.tensor(a), torch.tensor(b), upper=True,
                                         left=left)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)


def test_poisson_and_binomial_of_0d_tensors():
    ember.manual_seed(0)
    p = ember.poisson(ember.tensor(3.0))
    b = ember.binomial(ember.tensor(5.0), ember.tensor(0.5))
    assert p.shape == () and b.shape == () and p.dtype is ember.float32
    assert 0 <= b.item() <= 5 and p.item() == int(p.item())


def test_clamp_gradient_is_zero_where_clamped_even_for_a_nan_incoming_gradient():
    x = ember.tensor([-2.0, 0.5, 3.0], requires_grad=True)
    ember.clamp(x, 0.0, 1.0).backward(ember.tensor([float("nan")] * 3))
    got = x.grad.tolist()
    assert got[0] == 0.0 and got[2] == 0.0 and np.isnan(got[1])  # (as PyTorch)


def test_index_put_refuses_values_of_another_dtype_as_pytorch():
    x = ember.zeros(3)
    with pytest.raises(ember.EmberTypeError, match="dtypes match, got float32 for the "
                                                   "destination and int64 for the source"):
        ember.index_put(x, (ember.tensor([0]),), ember.tensor([1]))
    assert ember.index_put(x, (ember.tensor([0]),), ember.tensor([1.0])).tolist() == \
        [1.0, 0.0, 0.0]
