"""F.ctc_loss and nn.CTCLoss against PyTorch (values and the gradient PyTorch returns),
against finite differences through log_softmax, under ember.jit, and their errors."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.errors import EmberIndexError, EmberTypeError, EmberValueError, ShapeError

torch = pytest.importorskip("torch")

TOL = {"float64": (1e-9, 1e-10), "float32": (1e-5, 1e-5)}


def _log_softmax(x):
    shifted = x - x.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def _close(actual, expected, dtype, what):
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    rtol, atol = TOL[dtype]
    finite = np.abs(expected[np.isfinite(expected)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol * scale, equal_nan=True,
                               err_msg=what)


def _labels(rng, shape, classes, blank):
    """Random labels in [0, classes) other than blank."""
    labels = rng.integers(0, classes - 1, size=shape)
    return labels + (labels >= blank)


def _torch_lengths(v):
    return torch.tensor(v) if isinstance(v, np.ndarray) else v


def _ember_lengths(v):
    return ember.tensor(v) if isinstance(v, np.ndarray) else v


def compare(lp, targets, input_lengths, target_lengths, dtype="float64", seed=0, **kwargs):
    """ember against torch: the loss and the gradient wrt log_probs for a random upstream
    gradient. Lengths are NumPy arrays (passed as tensors) or lists/tuples."""
    lp = lp.astype(dtype)
    t_lp = torch.tensor(lp).requires_grad_()
    e_lp = ember.tensor(lp).requires_grad_()
    t_loss = torch.nn.functional.ctc_loss(t_lp, torch.tensor(targets),
                                          _torch_lengths(input_lengths),
                                          _torch_lengths(target_lengths), **kwargs)
    e_loss = F.ctc_loss(e_lp, ember.tensor(targets), _ember_lengths(input_lengths),
                        _ember_lengths(target_lengths), **kwargs)
    _close(e_loss.detach().numpy(), t_loss.detach().numpy(), dtype, "loss")
    upstream = np.random.default_rng(seed).standard_normal(tuple(t_loss.shape)).astype(dtype)
    t_loss.backward(torch.tensor(upstream))
    e_loss.backward(ember.tensor(upstream))
    _close(e_lp.grad.numpy(), t_lp.grad.numpy(), dtype, "grad of log_probs")
    return e_loss, t_loss


# Against PyTorch -----------------------------------------------------------------------
CASES = [  # T, N, C, max target length, blank
    (6, 3, 5, 3, 0), (12, 4, 7, 5, 3), (9, 2, 4, 4, 3), (1, 1, 3, 1, 0), (15, 5, 20, 6, 11),
    (8, 1, 2, 3, 1),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("case", CASES)
def test_random_shapes_padded_targets(case, reduction, dtype):
    T, N, C, S, blank = case
    rng = np.random.default_rng(T * 100 + N)
    lp = _log_softmax(rng.standard_normal((T, N, C)) * 2)
    targets = _labels(rng, (N, S), C, blank)
    target_lengths = rng.integers(0, S + 1, N)
    input_lengths = np.maximum(rng.integers(T // 2, T + 1, N), 1)
    compare(lp, targets, input_lengths, target_lengths, dtype, blank=blank, reduction=reduction)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_concatenated_targets_and_list_lengths(reduction, dtype):
    rng = np.random.default_rng(1)
    T, N, C, blank = 10, 4, 6, 2
    lp = _log_softmax(rng.standard_normal((T, N, C)))
    target_lengths = [3, 0, 4, 2]
    targets = _labels(rng, (sum(target_lengths),), C, blank)
    compare(lp, targets, [10, 7, 9, 6], tuple(target_lengths), dtype, blank=blank,
            reduction=reduction)


def test_repeated_labels_need_a_blank_between():
    rng = np.random.default_rng(2)
    lp = _log_softmax(rng.standard_normal((7, 4, 4)))
    targets = np.array([[1, 1, 1], [2, 2, 3], [3, 1, 3], [1, 1, 2]])
    target_lengths = np.array([3, 3, 3, 2])
    # "1 1 1" needs 5 frames (1 _ 1 _ 1), "2 2 3" 4, "3 1 3" 3 and "1 1" 3
    e_loss, _ = compare(lp, targets, np.array([7, 4, 3, 3]), target_lengths,
                        reduction="none")
    assert np.isfinite(e_loss.detach().numpy()).all()
    e_loss, _ = compare(lp, targets, np.array([4, 3, 2, 2]), target_lengths,
                        reduction="none")
    assert np.isinf(e_loss.detach().numpy()).all()


@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_impossible_alignments(reduction, zero_infinity):
    """A target longer than its input has infinite loss: PyTorch's gradient there is NaN
    (zero with zero_infinity, which also zeroes the loss)."""
    rng = np.random.default_rng(3)
    lp = _log_softmax(rng.standard_normal((5, 3, 6)))
    targets = _labels(rng, (3, 5), 6, 0)
    e_loss, t_loss = compare(lp, targets, np.array([5, 2, 5]), np.array([3, 4, 2]),
                             reduction=reduction, zero_infinity=zero_infinity)
    if reduction == "none":
        assert np.isinf(e_loss.detach().numpy()[1]) != zero_infinity


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_zero_length_targets_and_inputs(dtype):
    rng = np.random.default_rng(4)
    lp = _log_softmax(rng.standard_normal((6, 4, 5)))
    targets = _labels(rng, (4, 3), 5, 0)
    # an empty target: the all-blank path; no frames: 0 for an empty target, else inf
    e_loss, _ = compare(lp, targets, np.array([6, 0, 0, 3]), np.array([0, 0, 2, 0]), dtype,
                        reduction="none")
    loss = e_loss.detach().numpy()
    np.testing.assert_allclose(loss[0], -lp[:, 0, 0].sum(), rtol=1e-5)
    assert loss[1] == 0 and np.isinf(loss[2])
    compare(lp, targets, np.array([6, 5, 4, 3]), np.array([0, 0, 0, 0]), dtype)
    compare(lp, np.zeros((0,), np.int64), [6, 5, 4, 3], [0, 0, 0, 0], dtype, reduction="sum")


def test_unbatched():
    rng = np.random.default_rng(5)
    lp = _log_softmax(rng.standard_normal((8, 5)))
    targets = _labels(rng, (3,), 5, 0)
    for reduction in ("none", "mean", "sum"):
        e_loss, _ = compare(lp, targets, np.array(8), np.array(3), reduction=reduction)
        assert e_loss.shape == ()
    compare(lp, targets, [7], [3])
    compare(lp, targets[None], np.array([8]), np.array([2]), reduction="none")


def test_non_contiguous_log_probs_and_int32():
    rng = np.random.default_rng(6)
    batch_first = _log_softmax(rng.standard_normal((3, 7, 5)))
    lp = np.transpose(batch_first, (1, 0, 2))            # a view, not contiguous
    targets = _labels(rng, (3, 4), 5, 0)
    t_lp = torch.tensor(batch_first).transpose(0, 1).requires_grad_()
    e_lp = ember.tensor(batch_first).transpose(0, 1).requires_grad_()
    il, tl = np.array([7, 6, 5], np.int32), np.array([4, 1, 3], np.int32)
    t_loss = torch.nn.functional.ctc_loss(t_lp, torch.tensor(targets.astype(np.int32)),
                                          torch.tensor(il), torch.tensor(tl))
    e_loss = F.ctc_loss(e_lp, ember.tensor(targets.astype(np.int32)), ember.tensor(il),
                        ember.tensor(tl))
    _close(e_loss.detach().numpy(), t_loss.detach().numpy(), "float64", "loss")
    t_loss.backward()
    e_loss.backward()
    _close(e_lp.grad.numpy(), t_lp.grad.numpy(), "float64", "grad")
    compare(lp, targets, il.astype(np.int64), tl.astype(np.int64))


def test_minus_inf_log_probs_as_pytorch():
    """A log-probability of -inf (a class never emitted) gives PyTorch's NaN gradient
    there and a finite one elsewhere."""
    rng = np.random.default_rng(7)
    lp = _log_softmax(rng.standard_normal((5, 1, 4)))
    lp[1, 0, 2] = -np.inf
    lp[2, 0, 3] = -np.inf
    compare(lp, np.array([[1, 2]]), np.array([5]), np.array([2]), reduction="sum")


# Against finite differences -------------------------------------------------------------
def _fd_check(logits, targets, il, tl, **kwargs):
    """The gradient through log_softmax is the loss's true gradient (PyTorch's extra
    exp(log_probs) term cancels there): check it by central differences."""
    x = ember.tensor(logits).requires_grad_()
    F.ctc_loss(x.log_softmax(2), ember.tensor(targets), il, tl, **kwargs).backward()

    def loss(v):
        with ember.no_grad():
            return float(F.ctc_loss(ember.tensor(v).log_softmax(2), ember.tensor(targets), il,
                                    tl, **kwargs))
    rng = np.random.default_rng(0)
    for _ in range(3):
        direction = rng.standard_normal(logits.shape)
        h = 1e-5
        fd = (loss(logits + h * direction) - loss(logits - h * direction)) / (2 * h)
        np.testing.assert_allclose((x.grad.numpy() * direction).sum(), fd, rtol=1e-6,
                                   atol=1e-8)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_gradient_by_finite_differences(reduction):
    rng = np.random.default_rng(8)
    logits = rng.standard_normal((9, 3, 5))
    _fd_check(logits, np.array([[1, 1, 2], [3, 4, 0], [2, 0, 0]]), [9, 7, 4], [3, 2, 1],
              reduction=reduction)


def test_blank_inside_targets_gives_the_exact_gradient():
    """Targets should not contain blank; where they do, ember's gradient is the exact
    one of the loss (PyTorch drops a term at the last frame), and the loss matches."""
    rng = np.random.default_rng(9)
    logits = rng.standard_normal((6, 1, 5))
    targets = np.array([[1, 2, 0]])
    _fd_check(logits, targets, [6], [3], reduction="sum")
    t = torch.nn.functional.ctc_loss(torch.tensor(logits).log_softmax(2), torch.tensor(targets),
                                     [6], [3], reduction="sum")
    e = F.ctc_loss(ember.tensor(logits).log_softmax(2), ember.tensor(targets), [6], [3],
                   reduction="sum")
    np.testing.assert_allclose(float(e), float(t), rtol=1e-12)


# Modes ------------------------------------------------------------------------------------
def test_no_grad_and_jit_match_eager():
    rng = np.random.default_rng(10)
    x = ember.tensor(rng.standard_normal((8, 3, 5)))
    targets = ember.tensor(_labels(rng, (3, 4), 5, 0))
    il, tl = ember.tensor([8, 6, 7]), ember.tensor([4, 2, 3])
    weight = ember.tensor(rng.standard_normal((5, 5)))

    def step(x, targets, il, tl):
        x = x.detach().requires_grad_()
        loss = F.ctc_loss((x @ weight).log_softmax(2), targets, il, tl)
        loss.backward()
        return loss, x.grad

    eager_loss, eager_grad = step(x, targets, il, tl)
    with ember.no_grad():
        plain = F.ctc_loss((x @ weight).log_softmax(2), targets, il, tl)
    np.testing.assert_allclose(plain.numpy(), eager_loss.detach().numpy(), rtol=1e-12)
    jit_loss, jit_grad = ember.jit(step)(x, targets, il, tl)
    np.testing.assert_allclose(jit_loss.detach().numpy(), eager_loss.detach().numpy(),
                               rtol=1e-12)
    np.testing.assert_allclose(jit_grad.numpy(), eager_grad.numpy(), rtol=1e-10, atol=1e-14)
    assert np.abs(eager_grad.numpy()).max() > 1e-3


def test_second_derivative_raises():
    x = ember.randn(5, 2, 4, dtype=ember.float64).requires_grad_()
    loss = F.ctc_loss(x.log_softmax(2), ember.tensor([[1, 2], [3, 0]]), [5, 4], [2, 1])
    (g,) = ember.autograd.grad(loss, x, create_graph=True)
    with pytest.raises(NotImplementedError, match="ctc_loss"):
        ember.autograd.grad(g.sum(), x)


def test_module_matches_functional_and_torch():
    rng = np.random.default_rng(11)
    lp = _log_softmax(rng.standard_normal((7, 2, 6)))
    targets = _labels(rng, (2, 3), 6, 5)
    module = ember.nn.CTCLoss(blank=5, reduction="sum", zero_infinity=True)
    reference = torch.nn.CTCLoss(blank=5, reduction="sum", zero_infinity=True)
    assert repr(module) == repr(reference) == "CTCLoss()"
    e = module(ember.tensor(lp), ember.tensor(targets), [7, 2], [3, 3])
    t = reference(torch.tensor(lp), torch.tensor(targets), [7, 2], [3, 3])
    np.testing.assert_allclose(float(e), float(t), rtol=1e-12)
    assert float(e) != 0.0


# Errors ------------------------------------------------------------------------------------
def _args():
    lp = ember.tensor(_log_softmax(np.random.default_rng(0).standard_normal((4, 2, 5))))
    return lp, ember.tensor([[1, 2], [3, 3]]), [4, 3], [2, 2]


@pytest.mark.parametrize("change, error, match", [
    (dict(blank=5), EmberValueError, "blank"),
    (dict(blank=-1), EmberValueError, "blank"),
    (dict(input_lengths=[5, 3]), EmberValueError, "at most 4"),
    (dict(input_lengths=[4, -1]), EmberValueError, "at least 0"),
    (dict(target_lengths=[2, -2]), EmberValueError, "at least 0"),
    (dict(target_lengths=[3, 2]), ShapeError, "columns"),
    (dict(input_lengths=[4]), ShapeError, "one entry per batch"),
    (dict(target_lengths=ember.tensor([2, 2, 2])), ShapeError, "one entry per batch"),
    (dict(input_lengths=ember.tensor([4.0, 3.0])), EmberTypeError, "integral"),
    (dict(input_lengths=4), EmberTypeError, "input_lengths"),
    (dict(input_lengths=[4.0, 3]), EmberTypeError, "list of ints"),
    (dict(targets=ember.tensor([[1, 7], [3, 3]])), EmberIndexError, "out of range"),
    (dict(targets=ember.tensor([1, 2, 3])), ShapeError, "sum"),
    (dict(targets=ember.tensor([[[1, 2]], [[3, 3]]])), ShapeError, "targets"),
    (dict(targets=ember.tensor([[1, 2]])), ShapeError, "targets"),
    (dict(targets=ember.tensor([[True, False], [True, True]])), EmberTypeError, "integer"),
    (dict(log_probs=ember.zeros(4, 5)[None]), ShapeError, "targets"),
    (dict(log_probs=ember.zeros(4, 2, 3, 5)), ShapeError, "log_probs"),
    (dict(log_probs=ember.zeros(0, 2, 5)), EmberValueError, "empty"),
    (dict(log_probs=ember.zeros(4, 2, 5, dtype=ember.int64)), EmberTypeError, "floating"),
    (dict(reduction="batchmean"), EmberValueError, "reduction"),
])
def test_errors(change, error, match):
    lp, targets, il, tl = _args()
    kwargs = dict(log_probs=lp, targets=targets, input_lengths=il, target_lengths=tl)
    kwargs.update(change)
    with pytest.raises(error, match=match):
        F.ctc_loss(**kwargs)


def test_ctc_loss_runs_in_float32_under_autocast():
    log_probs = ember.randn(10, 2, 5).log_softmax(-1).to(ember.bfloat16)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        loss = ember.nn.functional.ctc_loss(log_probs, ember.tensor([[1, 2], [3, 3]]),
                                            [10, 8], [2, 2])
    assert loss.dtype is ember.float32  # (as torch.autocast on the CPU)
    want = ember.nn.functional.ctc_loss(log_probs.float(), ember.tensor([[1, 2], [3, 3]]),
                                        [10, 8], [2, 2])
    assert loss.item() == want.item()
