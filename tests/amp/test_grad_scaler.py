"""ember.amp.GradScaler against torch.amp.GradScaler("cpu"): the same gradients (some
inf/NaN) give the same scales, skipped steps and parameters; state_dict; errors."""
import json

import numpy as np
import pytest

import ember
from ember.amp import GradScaler, GradScalerStateError

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the oracle) not installed")

SHAPES = [(3, 4), (4,)]
# Which iterations get a non-finite gradient, and what.
BAD = {2: np.inf, 3: np.nan, 9: -np.inf, 10: np.inf, 17: np.nan}
N_STEPS = 24


def _gradients(seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for step in range(N_STEPS):
        grads = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
        if step in BAD:
            grads[step % 2].flat[step % 3] = BAD[step]
        out.append(grads)
    return out


def _initial(seed=1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in SHAPES]


def _run(lib, scaler_kwargs, unscale_first=False, optimizer="sgd"):
    params = [lib.tensor(a.copy(), requires_grad=True) for a in _initial()]
    if optimizer == "sgd":
        opt = lib.optim.SGD(params, lr=0.1, momentum=0.9)
    else:
        opt = lib.optim.Adam(params, lr=0.01)
    scaler = ember.amp.GradScaler("cpu", **scaler_kwargs) if lib is ember \
        else torch.amp.GradScaler("cpu", **scaler_kwargs)
    scales, stepped, unscaled_grads = [], [], []
    for grads in _gradients():
        loss = sum((p * lib.tensor(g)).sum() for p, g in
                   zip(params, [np.where(np.isfinite(g), g, 0).astype(np.float32)
                                for g in grads]))
        scaler.scale(loss)  # starts the scale, as a training loop's first call does
        opt.zero_grad()
        s = np.float32(scaler.get_scale())
        for p, g in zip(params, grads):  # the gradients backward() of a scaled loss gives
            with np.errstate(over="ignore"):
                p.grad = lib.tensor((g * s).astype(np.float32))
        before = [p.detach().numpy().copy() for p in params]
        if unscale_first:
            scaler.unscale_(opt)
            unscaled_grads.append([p.grad.numpy().copy() for p in params])
        result = scaler.step(opt)
        changed = any(not np.array_equal(b, p.detach().numpy()) for b, p in zip(before, params))
        assert result is None  # what optimizer.step() returned, or None when skipped
        stepped.append(changed)
        scaler.update()
        scales.append(scaler.get_scale())
    return scales, stepped, [p.detach().numpy() for p in params], unscaled_grads, scaler


@needs_torch
@pytest.mark.parametrize("optimizer", ("sgd", "adam"))
@pytest.mark.parametrize("kwargs", [
    {"init_scale": 2.0 ** 10, "growth_interval": 3},
    {"init_scale": 3.0, "growth_factor": 1.7, "backoff_factor": 0.3, "growth_interval": 2},
    {"init_scale": 2.0 ** 127, "growth_interval": 1},  # growth overflows float32: kept
])
def test_scales_skipped_steps_and_parameters_match_torch(kwargs, optimizer):
    ours = _run(ember, kwargs, optimizer=optimizer)
    theirs = _run(torch, kwargs, optimizer=optimizer)
    assert ours[0] == theirs[0]  # the scale after every update, exactly
    assert ours[1] == theirs[1]  # the same steps skipped
    assert not any(ours[1][i] for i in BAD)
    assert any(ours[1])
    for a, b in zip(ours[2], theirs[2]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert ours[4]._get_growth_tracker() == theirs[4]._get_growth_tracker()


@needs_torch
def test_unscale_then_step_matches_torch_and_does_not_unscale_twice():
    kwargs = {"init_scale": 3.0, "growth_interval": 4}
    ours = _run(ember, kwargs, unscale_first=True)
    theirs = _run(torch, kwargs, unscale_first=True)
    assert ours[0] == theirs[0] and ours[1] == theirs[1]
    for step_ours, step_theirs in zip(ours[3], theirs[3]):
        for a, b in zip(step_ours, step_theirs):
            np.testing.assert_array_equal(a, b)  # bit for bit, NaN where torch has NaN
    for a, b in zip(ours[2], theirs[2]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_scaled_loss_backward_and_step():
    ember.manual_seed(0)
    model = ember.nn.Linear(3, 1)
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler(init_scale=8.0)
    x = ember.randn(5, 3)
    loss = model(x).pow(2).mean()
    scaled = scaler.scale(loss)
    np.testing.assert_allclose(scaled.item(), 8.0 * loss.item(), rtol=1e-6)
    scaled.backward()
    reference = ember.autograd.grad(model(x).pow(2).mean(), [model.weight])[0].numpy()
    scaler.unscale_(opt)
    np.testing.assert_allclose(model.weight.grad.numpy(), reference, rtol=1e-6, atol=1e-7)
    before = model.weight.detach().numpy().copy()
    scaler.step(opt)
    np.testing.assert_allclose(model.weight.detach().numpy(), before - 0.1 * reference,
                               rtol=1e-6, atol=1e-7)
    scaler.update()
    assert scaler.get_scale() == 8.0


def test_scale_keeps_structure_and_dtype():
    scaler = GradScaler(init_scale=4.0)
    a, b = ember.ones(2), ember.ones(2, dtype=ember.bfloat16)
    out = scaler.scale([a, (b, a)])
    assert isinstance(out, list) and isinstance(out[1], tuple)
    assert out[0].tolist() == [4.0, 4.0] and out[1][0].dtype is ember.bfloat16
    assert [t.tolist() for t in scaler.scale(iter([a]))] == [[4.0, 4.0]]
    with pytest.raises(ember.EmberTypeError, match="outputs must be a Tensor or an iterable"):
        scaler.scale(3.0)


@needs_torch
def test_state_dict_round_trip_matches_torch():
    kwargs = {"init_scale": 2.0 ** 10, "growth_interval": 3}
    ours, theirs = _run(ember, kwargs)[4], _run(torch, kwargs)[4]
    state = ours.state_dict()
    assert state == theirs.state_dict()
    restored = GradScaler(**{**kwargs, "init_scale": 1.0, "growth_interval": 99})
    restored.load_state_dict(json.loads(json.dumps(state)))
    assert restored.state_dict() == state
    assert restored.get_scale() == ours.get_scale()
    assert restored.get_growth_interval() == 3


def test_disabled_scaler_is_a_pass_through():
    scaler = GradScaler(enabled=False)
    p = ember.tensor([1.0], requires_grad=True)
    opt = ember.optim.SGD([p], lr=1.0)
    loss = (p * 2).sum()
    assert scaler.scale(loss) is loss
    p.grad = ember.tensor([1.0])
    scaler.step(opt)
    scaler.update()
    assert p.tolist() == [0.0] and scaler.get_scale() == 1.0
    assert not scaler.is_enabled() and scaler.state_dict() == {}


def _scaler_and_optimizer(lib):
    p = lib.tensor([1.0, 2.0], requires_grad=True)
    opt = lib.optim.SGD([p], lr=0.1)
    scaler = GradScaler() if lib is ember else torch.amp.GradScaler("cpu")
    return p, opt, scaler


def _misuse(name):
    def unscale_twice(lib, p, opt, scaler):
        scaler.scale(p.sum())
        p.grad = lib.ones(2)
        scaler.unscale_(opt)
        scaler.unscale_(opt)

    def step_twice(lib, p, opt, scaler):
        scaler.scale(p.sum())
        p.grad = lib.ones(2)
        scaler.step(opt)
        scaler.step(opt)

    def unscale_after_step(lib, p, opt, scaler):
        scaler.scale(p.sum())
        p.grad = lib.ones(2)
        scaler.step(opt)
        scaler.unscale_(opt)

    def step_without_scale(lib, p, opt, scaler):
        p.grad = lib.ones(2)
        scaler.step(opt)

    def update_without_step(lib, p, opt, scaler):
        scaler.scale(p.sum())
        scaler.update()

    def step_without_grads(lib, p, opt, scaler):
        scaler.scale(p.sum())
        scaler.step(opt)

    def load_empty(lib, p, opt, scaler):
        scaler.load_state_dict({})
    return locals()[name]


MISUSES = {
    "unscale_twice": "unscale_\\(\\) has already been called on this optimizer since the "
                     "last update\\(\\)",
    "step_twice": "step\\(\\) has already been called since the last update\\(\\)",
    "unscale_after_step": "unscale_\\(\\) is being called after step\\(\\)",
    "step_without_scale": "attempted step but the scale is not set yet.*scaler.scale",
    "update_without_step": "no inf checks were recorded prior to update",
    "step_without_grads": "no inf checks were recorded for this optimizer",
    "load_empty": "the state dict is empty",
}


@pytest.mark.parametrize("name", sorted(MISUSES))
def test_misuse_raises_what_torch_raises(name):
    fn = _misuse(name)
    expected = Exception
    if torch is not None:
        with pytest.raises(Exception) as theirs:
            fn(torch, *_scaler_and_optimizer(torch))
        expected = type(theirs.value)  # RuntimeError or AssertionError
    with pytest.raises(ember.EmberError, match=MISUSES[name]) as ours:
        fn(ember, *_scaler_and_optimizer(ember))
    assert isinstance(ours.value, expected)


def test_bad_arguments():
    with pytest.raises(ember.EmberValueError, match="growth factor must be > 1.0, got 0.5"):
        GradScaler(growth_factor=0.5)
    with pytest.raises(ember.EmberValueError, match="backoff factor must be < 1.0, got 2"):
        GradScaler(backoff_factor=2)
    with pytest.raises(ember.EmberError, match="unsupported device 'tpu'"):
        GradScaler("tpu")
    p = ember.tensor([1.0], dtype=ember.float16, requires_grad=True)
    opt = ember.optim.SGD([p], lr=0.1)
    scaler = GradScaler()
    scaler.scale(p.sum())
    p.grad = ember.ones(1, dtype=ember.float16)
    with pytest.raises(ember.EmberValueError, match="attempting to unscale float16 gradients"):
        scaler.unscale_(opt)


def test_update_with_new_scale():
    scaler = GradScaler()
    scaler.scale(ember.ones(1))
    scaler.update(1024.0)
    assert scaler.get_scale() == 1024.0
    scaler.update(ember.tensor(0.1))
    assert scaler.get_scale() == float(np.float32(0.1))
    assert isinstance(GradScalerStateError("x"), AssertionError)
