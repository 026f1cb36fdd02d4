"""Activations and softmax (ember.nn.functional) against PyTorch, NumPy and finite
differences, plus known values and errors."""
import math

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ..ops.optable import FLOATS, OpCase, S, generate, nc, needs_torch, rand, torch

TF = None if torch is None else torch.nn.functional


def pointwise_samples(low=-3.0, high=3.0):
    def samples(rng, dtype):
        r = lambda shape: rand(rng, shape, dtype, low, high)  # noqa: E731
        return [S(r((3, 4))), S(r(())), S(r((1, 5))), S(r((0, 3))), S(nc(r((4, 3)))),
                S(r((2, 3, 2)))]
    return samples


def act(name, low=-3.0, high=3.0, dtypes=FLOATS, np_fn=None, tol=None, **kwargs):
    """A pointwise activation called as F.name(x, **kwargs)."""
    label = name + "".join(f"_{k}={v}" for k, v in kwargs.items())
    if dtypes != FLOATS:
        label += "_" + "_".join(dtypes)
    return OpCase(label, lambda x: getattr(F, name)(x, **kwargs),
                  lambda x: getattr(TF, name)(x, **kwargs),
                  pointwise_samples(low, high), np_fn=np_fn, dtypes=dtypes, tol=tol)


def _np_gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf, otypes=[np.float64])(x / math.sqrt(2)))


HALF_TOL = {"float64": (1e-7, 1e-9), "float32": (1e-5, 1e-5), "float16": (5e-3, 5e-3),
            "bfloat16": (3e-2, 3e-2)}


def softmax_samples(rng, dtype):
    r = lambda shape: rand(rng, shape, dtype, -4, 4)  # noqa: E731
    return [S(r((3, 4)), 1), S(r((2, 3, 4)), -2), S(r(()), 0), S(r((0, 3)), 1),
            S(nc(r((4, 3))), 0), S(r((5,)), -1), S(r((2, 1, 3)), 1),
            S(r((3, 4)), dim=0, dtype=ember.float64)]


def glu_samples(rng, dtype):
    r = lambda shape: rand(rng, shape, dtype)  # noqa: E731
    return [S(r((3, 4))), S(r((4, 3)), 0), S(r((2, 6, 2)), dim=1), S(nc(r((4, 2)))),
            S(r((0, 2)))]


def prelu_samples(rng, dtype):
    r = lambda shape, lo=-2, hi=2: rand(rng, shape, dtype, lo, hi)  # noqa: E731
    return [S(r((2, 3, 4)), r((3,), 0.1, 0.5)), S(r((3, 4)), r((1,), 0.1, 0.5)),
            S(r((5,)), r((1,), 0.1, 0.5)), S(nc(r((4, 3))), r((3,), 0.1, 0.5)),
            S(r((2, 3, 2, 2)), r((3,), -0.5, 0.5))]


CASES = [
    act("gelu", np_fn=_np_gelu), act("gelu", approximate="tanh"),
    act("silu"), act("mish"), act("relu"), act("relu6", -2, 8), act("elu"),
    act("elu", alpha=0.5), act("selu"), act("celu", alpha=2.0), act("leaky_relu"),
    act("leaky_relu", negative_slope=0.2), act("softplus"),
    act("softplus", beta=2.0, threshold=3.0), act("softsign"), act("hardswish", -5, 5),
    act("hardsigmoid", -5, 5), act("hardtanh", -2, 2),
    act("hardtanh", -3, 3, min_val=-2.0, max_val=0.5), act("tanhshrink"),
    act("hardshrink"), act("softshrink", lambd=0.3), act("logsigmoid", -10, 10),
    act("sigmoid"), act("tanh"), act("rrelu"),
    act("relu6", -2, 8, dtypes=("int64", "int32")), act("hardtanh", dtypes=("int64",)),
    OpCase("threshold", lambda x: F.threshold(x, 0.5, -2.0),
           lambda x: TF.threshold(x, 0.5, -2.0), pointwise_samples(),
           dtypes=FLOATS + ("int64",)),
    OpCase("softmax", F.softmax, lambda x, *a, **k: TF.softmax(x, *a, **k), softmax_samples,
           tol=HALF_TOL),
    OpCase("log_softmax", F.log_softmax, lambda x, *a, **k: TF.log_softmax(x, *a, **k),
           softmax_samples, tol=HALF_TOL),
    OpCase("softmin", F.softmin, lambda x, *a, **k: TF.softmin(x, *a, **k), softmax_samples,
           tol=HALF_TOL),
    OpCase("tensor_softmax", lambda x, d, **k: x.softmax(d, **k),
           lambda x, d, **k: x.softmax(d, **k),
           lambda rng, dt: [s for s in softmax_samples(rng, dt) if s.args[1:]]),
    OpCase("tensor_log_softmax", lambda x, d: x.log_softmax(d),
           lambda x, d: x.log_softmax(d),
           lambda rng, dt: [S(rand(rng, (3, 4), dt), -1), S(rand(rng, (2, 3), dt), 0)]),
    OpCase("glu", F.glu, lambda *a, **k: TF.glu(*a, **k), glu_samples),
    OpCase("prelu", F.prelu, lambda x, w: TF.prelu(x, w), prelu_samples),
]

generate(CASES, globals())


# Known values ------------------------------------------------------------------------
def test_known_values():
    x = ember.tensor([-1.0, 0.0, 1.0])
    np.testing.assert_allclose(F.gelu(x).numpy(), [-0.15865525, 0.0, 0.84134475], rtol=1e-6)
    np.testing.assert_allclose(F.silu(x).numpy(), [-0.26894142, 0.0, 0.73105858], rtol=1e-6)
    np.testing.assert_allclose(F.relu6(ember.tensor([-1.0, 3.0, 7.0])).numpy(), [0, 3, 6])
    np.testing.assert_allclose(F.softplus(ember.tensor([0.0])).numpy(), [math.log(2)])
    np.testing.assert_allclose(F.selu(ember.tensor([1.0])).numpy(), [1.0507009873554805])
    np.testing.assert_allclose(F.softmax(ember.tensor([1.0, 1.0]), 0).numpy(), [0.5, 0.5])
    np.testing.assert_allclose(F.glu(ember.tensor([2.0, 0.0])).numpy(), [1.0])


def test_softmax_is_stable_for_large_and_infinite_inputs():
    x = ember.tensor([[1000.0, 1000.0], [-math.inf, 0.0]])
    np.testing.assert_allclose(F.softmax(x, 1).numpy(), [[0.5, 0.5], [0.0, 1.0]])
    np.testing.assert_allclose(F.log_softmax(x, 1).numpy(),
                               [[-math.log(2), -math.log(2)], [-math.inf, 0.0]])
    assert np.isnan(F.softmax(ember.tensor([-math.inf, -math.inf]), 0).numpy()).all()


@needs_torch
@pytest.mark.parametrize("spread", [0.0, 15.0, 60.0, 400.0])
@pytest.mark.parametrize("masked", [False, True])
def test_softmax_rows_far_apart_match_torch(spread, masked):
    """Softmax shifts by the whole tensor's max where no row's max lies far below it,
    else by each row's max: rows offset by up to ``spread`` (some with -inf entries, as
    a causal attention mask makes) take either path and match PyTorch."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((4, 6, 9)) * 3).astype(np.float32)
    x += np.linspace(-spread, 0, 6, dtype=np.float32)[:, None]
    if masked:
        x[..., np.triu_indices(6, 1, 9)[0], np.triu_indices(6, 1, 9)[1]] = -np.inf
    up = rng.standard_normal(x.shape).astype(np.float32)
    for name in ("softmax", "log_softmax"):
        ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        out, ref = getattr(F, name)(ex, -1), getattr(TF, name)(tx, -1)
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
        out.backward(ember.tensor(up))
        ref.backward(torch.tensor(up))
        np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_softmax_backward_is_one_op_and_differentiates_twice():
    x = ember.tensor([[0.3, -1.2, 2.0]], requires_grad=True)
    y = F.softmax(x, 1)
    assert y.grad_fn.name() == "SoftmaxBackward0"
    (g,) = ember.autograd.grad((y * ember.tensor([[1.0, 2.0, 3.0]])).sum(), [x],
                               create_graph=True)
    assert g.grad_fn.name() == "SoftmaxBackwardBackward0"
    # the gradient of a softmax output sums to zero along the softmax dim
    np.testing.assert_allclose(g.sum().item(), 0.0, atol=1e-6)


def test_gelu_tolerates_in_place_use_of_its_output():
    # gelu keeps its input (and a hidden helper), not its output, as PyTorch does
    x = ember.tensor([0.5, -1.0], requires_grad=True)
    y = F.gelu(x)
    y.mul_(2.0)
    y.sum().backward()
    def dgelu(v):
        return 0.5 * (1 + math.erf(v / math.sqrt(2))) + v * math.exp(-v * v / 2) / math.sqrt(
            2 * math.pi)
    np.testing.assert_allclose(x.grad.numpy(), [2 * dgelu(0.5), 2 * dgelu(-1.0)], rtol=1e-5)


@pytest.mark.parametrize("name", ["relu", "elu", "selu", "celu", "leaky_relu", "hardtanh",
                                  "relu6", "silu", "mish", "hardswish", "hardsigmoid",
                                  "rrelu"])
def test_inplace_variants(name):
    x = ember.tensor([-1.5, 0.5, 2.0])
    expected = getattr(F, name)(x).numpy()
    out = getattr(F, name)(x, inplace=True)
    assert out is x
    np.testing.assert_allclose(x.numpy(), expected)


def test_underscore_variants_write_in_place():
    for fn, ref in ((F.relu_, F.relu), (F.elu_, F.elu), (F.leaky_relu_, F.leaky_relu),
                    (F.hardtanh_, F.hardtanh), (F.selu_, F.selu), (F.celu_, F.celu)):
        x = ember.tensor([-1.5, 0.5])
        expected = ref(x).numpy()
        assert fn(x) is x
        np.testing.assert_allclose(x.numpy(), expected)
    x = ember.tensor([0.2, 3.0])
    F.threshold_(x, 1.0, -1.0)
    np.testing.assert_allclose(x.numpy(), [-1.0, 3.0])


def test_inplace_activation_keeps_the_graph():
    a = ember.tensor([-1.0, 2.0], requires_grad=True)
    h = a * 1.0
    F.elu(h, inplace=True)
    h.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [math.exp(-1.0), 1.0], rtol=1e-6)


def test_rrelu_training_draws_slopes_in_range_and_is_seeded():
    x = -ember.ones(2000)
    ember.manual_seed(3)
    a = F.rrelu(x, 0.1, 0.3, training=True)
    ember.manual_seed(3)
    b = F.rrelu(x, 0.1, 0.3, training=True)
    slopes = -a.numpy()
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3
    assert abs(slopes.mean() - 0.2) < 0.01
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_allclose(F.rrelu(ember.tensor([-1.0, 2.0])).numpy(),
                               [-(1 / 8 + 1 / 3) / 2, 2.0])


def test_softmax_dtype_argument_and_implicit_dim():
    x = ember.tensor([[1, 2], [3, 4]], dtype=ember.int64)
    y = F.softmax(x, 1, dtype=ember.float64)
    assert y.dtype is ember.float64
    with pytest.warns(UserWarning, match="Implicit dimension"):
        z = F.softmax(ember.tensor([[0.0, 1.0]]))
    np.testing.assert_allclose(z.numpy(), F.softmax(ember.tensor([[0.0, 1.0]]), 1).numpy())


@needs_torch
@pytest.mark.parametrize("name", ["gelu", "silu", "mish", "elu", "softplus", "hardswish"])
def test_large_inputs_match_torch(name):
    """Large inputs run through the kernels in cache-sized pieces."""
    x = np.random.default_rng(0).uniform(-6, 6, (3, 50001)).astype(np.float32)
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, ref = getattr(F, name)(ex), getattr(TF, name)(tx)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5,
                               atol=1e-5)
    up = np.cos(x)
    out.backward(ember.tensor(up))
    ref.backward(torch.tensor(up))
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_in_pieces_matches_torch(dtype, approximate):
    """gelu's kernels write each cache-sized piece straight into the result (float32,
    float64) or through a float32 scratch piece (half precision)."""
    x = np.random.default_rng(2).uniform(-6, 6, (2, 40001)).astype(np.float32)
    up = np.cos(x)
    ex = ember.tensor(x).to(getattr(ember, dtype)).requires_grad_(True)
    tx = torch.tensor(x).to(getattr(torch, dtype)).requires_grad_(True)
    out, ref = F.gelu(ex, approximate=approximate), TF.gelu(tx, approximate=approximate)
    assert out.dtype is getattr(ember, dtype)
    rtol, atol = HALF_TOL[dtype]
    np.testing.assert_allclose(out.detach().to(ember.float64).numpy(),
                               ref.detach().double().numpy(), rtol=rtol, atol=atol)
    out.backward(ember.tensor(up).to(getattr(ember, dtype)))
    ref.backward(torch.tensor(up).to(getattr(torch, dtype)))
    np.testing.assert_allclose(ex.grad.to(ember.float64).numpy(), tx.grad.double().numpy(),
                               rtol=2 * rtol, atol=2 * atol)


# Errors ------------------------------------------------------------------------------------
def test_errors():
    with pytest.raises(ember.EmberTypeError, match="gelu: not implemented for dtype int64"):
        F.gelu(ember.tensor([1, 2]))
    with pytest.raises(ember.EmberTypeError, match="softmax: .*int64"):
        F.softmax(ember.tensor([1, 2]), 0)
    with pytest.raises(ember.EmberError, match="approximate argument must be either none"):
        F.gelu(ember.ones(2), approximate="fast")
    with pytest.raises(ember.EmberIndexError):
        F.softmax(ember.ones(2, 3), 2)
    with pytest.raises(ember.EmberError, match="glu: halving dimension must be even.*size 3"):
        F.glu(ember.ones(2, 3))
    with pytest.raises(ember.EmberError, match="prelu: mismatch.*3 channels"):
        F.prelu(ember.ones(2, 3), ember.ones(2))
    with pytest.raises(ember.EmberError, match="hardtanh: min_val"):
        F.hardtanh(ember.ones(2), 1.0, -1.0)
    with pytest.raises(ember.EmberTypeError, match="must be a Tensor"):
        F.silu([1.0, 2.0])


@needs_torch
def test_relu_keeps_integer_dtype_like_torch():
    x = np.array([-2, 0, 5])
    assert F.relu(ember.tensor(x)).dtype is ember.int64
    np.testing.assert_array_equal(F.relu6(ember.tensor(x)).numpy(),
                                  TF.relu6(torch.tensor(x)).numpy())
    assert F.softsign(ember.tensor(x)).dtype is ember.float32
