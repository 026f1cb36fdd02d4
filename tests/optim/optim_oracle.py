"""Helpers for the optimizer tests that compare with torch.optim: the same optimizer on
the same float64 parameters and gradients in both, state-dict comparison and
conversion, a resume check, and an ember.jit-versus-eager run."""
import copy

import numpy as np

import ember
from ember import nn

try:
    import torch
except ImportError:  # the callers skip their torch tests
    torch = None

SHAPES = [(3, 4), (5,), (), (2, 3, 2)]
RTOL = 1e-9  # state values relative to their size (LBFGS keeps 1 / y.s, which grows)


class Pair:
    """One optimizer in ember and in PyTorch (``make(params, lib)`` builds it, ``lib``
    being ``ember.optim`` or ``torch.optim``) over the same parameters, fed the same
    gradients. The last parameter gets a gradient only every other step."""

    def __init__(self, make, shapes=SHAPES, seed=0, dtype=np.float64):
        self.rng = np.random.default_rng(seed)
        self.shapes, self.dtype, self.t = shapes, dtype, 0
        self.init = [self.rng.standard_normal(s).astype(dtype) for s in shapes]
        self.make = make
        self.ep = [ember.tensor(a, requires_grad=True) for a in self.init]
        self.tp = [torch.tensor(a, requires_grad=True) for a in self.init]
        self.eo, self.to = make(self.ep, ember.optim), make(self.tp, torch.optim)

    def grads(self):
        gs = [self.rng.standard_normal(s).astype(self.dtype) for s in self.shapes]
        if self.t % 2 == 1:
            gs[-1] = None
        self.t += 1
        return gs

    def step(self, *others):
        """One step of both optimizers (and of each extra ember optimizer given)."""
        gs = self.grads()
        for opt in (self.eo, *others):
            for p, g in zip(params_of(opt), gs):
                p.grad = None if g is None else ember.tensor(g)
            opt.step()
        for p, g in zip(self.tp, gs):
            p.grad = None if g is None else torch.tensor(g)
        self.to.step()

    def resumed(self, state_dict):
        """A new ember optimizer on copies of the current parameters, loaded from
        ``state_dict``."""
        params = [ember.tensor(p.detach().numpy().copy(), requires_grad=True)
                  for p in self.ep]
        opt = self.make(params, ember.optim)
        opt.load_state_dict(state_dict)
        return opt


def params_of(opt):
    return [p for group in opt.param_groups for p in group["params"]]


def assert_params_close(ember_params, torch_params, atol=1e-10):
    for e, t in zip(ember_params, torch_params):
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=0, atol=atol)


def assert_same_params(a, b):
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.detach().numpy(), y.detach().numpy())


def assert_state_dicts_match(esd, tsd, atol=1e-10):
    """PyTorch's structure, keys and key order, dtypes, shapes and values."""
    assert esd["param_groups"] == tsd["param_groups"]
    assert list(esd["state"]) == list(tsd["state"])
    for index, tstate in tsd["state"].items():
        estate = esd["state"][index]
        assert list(estate) == list(tstate), index
        for key, tv in tstate.items():
            _assert_value_match(estate[key], tv, atol, f"state[{index}][{key!r}]")


def _assert_value_match(ev, tv, atol, where):
    if isinstance(tv, torch.Tensor):
        assert isinstance(ev, ember.Tensor), where
        assert str(ev.dtype).split(".")[-1] == str(tv.dtype).split(".")[-1], where
        assert tuple(ev.shape) == tuple(tv.shape), where
        np.testing.assert_allclose(ev.numpy(), tv.numpy(), rtol=RTOL, atol=atol, err_msg=where)
    elif isinstance(tv, list):
        assert isinstance(ev, list) and len(ev) == len(tv), where
        for i, (e, t) in enumerate(zip(ev, tv)):
            _assert_value_match(e, t, atol, f"{where}[{i}]")
    elif isinstance(tv, float):
        assert type(ev) is float and abs(ev - tv) <= atol * max(1.0, abs(tv)), where
    else:
        assert type(ev) is type(tv) and ev == tv, (where, ev, tv)


def to_ember(value):
    """A PyTorch state dict with its tensors as ember tensors (dtypes kept)."""
    if isinstance(value, torch.Tensor):
        return ember.tensor(value.detach().numpy().copy())
    if isinstance(value, dict):
        return {k: to_ember(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_ember(v) for v in value]
    return value


def check_trajectory_and_resume(make, steps=30, atol=1e-10):
    """``steps`` steps against PyTorch, with both state dicts compared half way and two
    ember optimizers resumed there (from ember's and from PyTorch's state dict)."""
    pair = Pair(make)
    for _ in range(steps // 2):
        pair.step()
    assert_params_close(pair.ep, pair.tp, atol)
    esd, tsd = pair.eo.state_dict(), pair.to.state_dict()
    assert_state_dicts_match(esd, tsd, atol)
    from_ember, from_torch = pair.resumed(copy.deepcopy(esd)), pair.resumed(to_ember(tsd))
    for _ in range(steps - steps // 2):
        pair.step(from_ember, from_torch)
    assert_params_close(pair.ep, pair.tp, atol)
    assert_same_params(params_of(from_ember), pair.ep)
    assert_params_close(params_of(from_torch), pair.tp, atol)
    assert_state_dicts_match(pair.eo.state_dict(), pair.to.state_dict(), atol)
    # the parameters moved: an update that does nothing cannot pass
    assert all(np.abs(p.detach().numpy() - a).max() > 1e-3
               for p, a in zip(pair.ep, pair.init))
    return pair


def jit_run(make, compiled, steps=8, scheduler=None):
    """A Linear 6->4->2 (tanh) float64 model trained ``steps`` steps, eagerly or through
    ember.jit; returns (losses, parameters, optimizer, step function)."""
    rng = np.random.default_rng(0)
    model = nn.Sequential(nn.Linear(6, 4, dtype=ember.float64), nn.Tanh(),
                          nn.Linear(4, 2, dtype=ember.float64))
    with ember.no_grad():
        for p in model.parameters():
            p.copy_(ember.tensor(rng.standard_normal(tuple(p.shape))))
    opt = make(list(model.parameters()), ember.optim)
    sched = scheduler(opt) if scheduler is not None else None
    data = [(ember.tensor(rng.standard_normal((8, 6))), ember.tensor(rng.standard_normal((8, 2))))
            for _ in range(steps)]

    def step(x, y):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.detach()
    fn = ember.jit(step) if compiled else step
    losses = []
    for x, y in data:
        losses.append(fn(x, y).item())
        if sched is not None:
            sched.step()
    return losses, [p.detach().numpy().copy() for p in model.parameters()], opt, fn


def check_jit_matches_eager(make, scheduler=None, atol=1e-12):
    eager_losses, eager_params, eager_opt, _ = jit_run(make, False, scheduler=scheduler)
    losses, params, opt, fn = jit_run(make, True, scheduler=scheduler)
    np.testing.assert_allclose(losses, eager_losses, rtol=0, atol=atol)
    for a, b in zip(params, eager_params):
        np.testing.assert_allclose(a, b, rtol=0, atol=atol)
    # traced once, and once more when the first step made the state; no retrace after
    assert fn.retraces[0] == "first call" and len(fn.retraces) <= 2, fn.retraces
    assert all("state entries changed" in r for r in fn.retraces[1:]), fn.retraces
    esd, csd = eager_opt.state_dict(), opt.state_dict()
    assert esd["param_groups"] == csd["param_groups"]
    for index, entries in esd["state"].items():
        for key, value in entries.items():
            other = csd["state"][index][key]
            assert value.dtype == other.dtype, key
            np.testing.assert_allclose(other.numpy(), value.numpy(), rtol=0, atol=atol)
    return fn
