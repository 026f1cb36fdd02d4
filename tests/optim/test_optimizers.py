"""ember.optim optimizers against torch.optim: 50-step trajectories from the same
parameters and gradients, state-dict round trips (ember's and PyTorch's), parameter
groups, and the validation errors."""
import copy
import warnings

import numpy as np
import pytest

import ember
from ember import optim
from ember.errors import EmberTypeError
from ember.optim import OptimizerError

try:
    import torch
except ImportError:  # the comparisons skip; the semantic and error tests still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the oracle) not installed")

SHAPES = [(3, 4), (5,), ()]
STEPS = 50

# (optimizer, options): every algorithm with its main options, singly and combined.
CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.5, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01, maximize=True)),
    ("Adam", dict(lr=0.05)),
    ("Adam", dict(lr=0.05, amsgrad=True)),
    ("Adam", dict(lr=0.05, betas=(0.8, 0.99), weight_decay=0.1, maximize=True)),
    ("Adam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True, amsgrad=True)),
    ("AdamW", dict(lr=0.05)),
    ("AdamW", dict(lr=0.05, weight_decay=0.1, amsgrad=True, maximize=True)),
    ("Adamax", dict()),
    ("Adamax", dict(lr=0.05, weight_decay=0.1, eps=1e-3, maximize=True)),
    ("NAdam", dict(lr=0.05)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", dict(lr=0.05)),
    ("RAdam", dict(lr=0.05, betas=(0.9, 0.9), weight_decay=0.1)),
    ("RAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RMSprop", dict()),
    ("RMSprop", dict(centered=True)),
    ("RMSprop", dict(alpha=0.9, momentum=0.9, weight_decay=0.1)),
    ("RMSprop", dict(centered=True, momentum=0.5, eps=1e-4, maximize=True)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1, weight_decay=0.1)),
    ("Adagrad", dict(eps=1e-6, maximize=True)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.5, eps=1e-4, weight_decay=0.1, maximize=True)),
]
IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'defaults'}"
       for name, kw in CASES]


class Run:
    """The same optimizer in ember and PyTorch, on the same float64 parameters, fed the
    same gradient sequence; the last parameter gets a gradient only every other step
    (so skipping parameters without one is checked too)."""

    def __init__(self, name, kwargs, seed=0):
        self.rng = np.random.default_rng(seed)
        init = [self.rng.standard_normal(s) for s in SHAPES]
        self.name, self.kwargs = name, kwargs
        self.ep = [ember.tensor(a, requires_grad=True) for a in init]
        self.eo = getattr(optim, name)(self.ep, **kwargs)
        self.t = 0
        if torch is not None:
            self.tp = [torch.tensor(a, requires_grad=True) for a in init]
            self.to = getattr(torch.optim, name)(self.tp, **kwargs)

    def grads(self):
        gs = [self.rng.standard_normal(s) for s in SHAPES]
        if self.t % 2 == 1:
            gs[-1] = None
        self.t += 1
        return gs

    def step(self, *optimizers, grads=None, with_torch=True):
        """One step of ember's optimizer (and each extra ember optimizer given, with its
        own parameters) and of PyTorch's, all with the same gradients."""
        gs = self.grads() if grads is None else grads
        for opt in (self.eo, *optimizers):
            for p, g in zip(_params(opt), gs):
                p.grad = None if g is None else ember.tensor(g)
            opt.step()
        if with_torch and torch is not None:
            for p, g in zip(self.tp, gs):
                p.grad = None if g is None else torch.tensor(g)
            self.to.step()
        return gs


def _params(opt):
    return [p for group in opt.param_groups for p in group["params"]]


def _values(params):
    return [p.detach().numpy().copy() for p in params]


def _assert_close(ember_params, torch_params, atol=1e-9):
    for e, t in zip(ember_params, torch_params):
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=0, atol=atol)


def _to_ember(value):
    """A PyTorch state dict converted to ember tensors (dtypes kept)."""
    if torch is not None and isinstance(value, torch.Tensor):
        return ember.tensor(value.detach().numpy().copy())
    if isinstance(value, dict):
        return {k: _to_ember(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_ember(v) for v in value]
    return value


@needs_torch
@pytest.mark.parametrize("name,kwargs", CASES, ids=IDS)
def test_trajectory_and_state_dict_match_torch(name, kwargs):
    run = Run(name, kwargs)
    start = _values(run.ep)
    for _ in range(STEPS // 2):
        run.step()
    _assert_close(run.ep, run.tp)

    # The state dict has PyTorch's structure, keys, dtypes and values.
    esd, tsd = run.eo.state_dict(), run.to.state_dict()
    assert esd["param_groups"] == tsd["param_groups"]
    assert sorted(esd["state"]) == sorted(tsd["state"])
    for index, tstate in tsd["state"].items():
        estate = esd["state"][index]
        assert list(estate) == list(tstate)
        for key, tv in tstate.items():
            ev = estate[key]
            assert str(ev.dtype).split(".")[-1] == str(tv.dtype).split(".")[-1], key
            assert tuple(ev.shape) == tuple(tv.shape), key
            np.testing.assert_allclose(ev.numpy(), tv.numpy(), rtol=0, atol=1e-9)

    # Resume: one ember optimizer from ember's state dict, one from PyTorch's.
    def resumed(state_dict):
        params = [ember.tensor(v, requires_grad=True) for v in _values(run.ep)]
        opt = getattr(optim, name)(params, **kwargs)
        opt.load_state_dict(state_dict)
        return opt
    from_ember = resumed(copy.deepcopy(esd))
    from_torch = resumed(_to_ember(tsd))
    for _ in range(STEPS - STEPS // 2):
        run.step(from_ember, from_torch)
    _assert_close(run.ep, run.tp)
    _assert_close(_params(from_torch), run.tp)
    for a, b in zip(_params(from_ember), run.ep):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    # The parameters moved: a wrong update could not pass by doing nothing.
    assert all(np.abs(a - b).max() > 1e-3 for a, b in zip(start, _values(run.ep)) if a.size)


@needs_torch
def test_float32_parameters_and_step_dtype():
    rng = np.random.default_rng(1)
    init = rng.standard_normal((4, 3)).astype(np.float32)
    ep, tp = ember.tensor(init, requires_grad=True), torch.tensor(init, requires_grad=True)
    eo, to = optim.AdamW([ep], lr=0.05), torch.optim.AdamW([tp], lr=0.05)
    for _ in range(20):
        g = rng.standard_normal((4, 3)).astype(np.float32)
        ep.grad, tp.grad = ember.tensor(g), torch.tensor(g)
        eo.step()
        to.step()
    assert ep.dtype == ember.float32 and eo.state[ep]["exp_avg"].dtype == ember.float32
    assert eo.state[ep]["step"].dtype == ember.float32 and eo.state[ep]["step"].item() == 20
    np.testing.assert_allclose(ep.detach().numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_step_counter_follows_default_dtype():
    previous = ember.get_default_dtype()
    try:
        ember.set_default_dtype(ember.float64)
        p = ember.zeros(2, dtype=ember.float32, requires_grad=True)
        opt = optim.Adam([p])
        p.grad = ember.ones(2, dtype=ember.float32)
        opt.step()
        assert opt.state[p]["step"].dtype == ember.float64
    finally:
        ember.set_default_dtype(previous)


@needs_torch
def test_param_groups_with_their_own_options():
    rng = np.random.default_rng(2)
    init = [rng.standard_normal(s) for s in [(3,), (2, 2), (4,)]]
    ep = [ember.tensor(a, requires_grad=True) for a in init]
    tp = [torch.tensor(a, requires_grad=True) for a in init]

    def groups(p):
        return [{"params": [p[0]]},
                {"params": [p[1]], "lr": 0.2, "betas": (0.5, 0.9), "weight_decay": 0.1}]
    eo, to = optim.Adam(groups(ep), lr=0.01), torch.optim.Adam(groups(tp), lr=0.01)
    eo.add_param_group({"params": ep[2], "lr": 0.5, "amsgrad": True})
    to.add_param_group({"params": tp[2], "lr": 0.5, "amsgrad": True})
    assert eo.param_groups[0]["lr"] == 0.01 and eo.param_groups[1]["lr"] == 0.2
    assert eo.param_groups[2]["betas"] == (0.9, 0.999) and eo.param_groups[2]["amsgrad"]
    for _ in range(30):
        for e, t in zip(ep, tp):
            g = rng.standard_normal(e.shape)
            e.grad, t.grad = ember.tensor(g), torch.tensor(g)
        eo.step()
        to.step()
    _assert_close(ep, tp)
    assert eo.state_dict()["param_groups"] == to.state_dict()["param_groups"]
    assert "max_exp_avg_sq" in eo.state[ep[2]] and "max_exp_avg_sq" not in eo.state[ep[0]]


@needs_torch
def test_named_parameters_and_torch_group_format():
    a, b = ember.zeros(2, requires_grad=True), ember.zeros(3, requires_grad=True)
    ta, tb = torch.zeros(2, requires_grad=True), torch.zeros(3, requires_grad=True)
    eo = optim.SGD([("weight", a), ("bias", b)], lr=0.1)
    to = torch.optim.SGD([("weight", ta), ("bias", tb)], lr=0.1)
    assert eo.state_dict() == to.state_dict()
    assert eo.param_groups[0]["params"][1] is b
    assert eo.defaults == to.defaults


def test_state_dict_survives_json_for_the_structure():
    import json
    p = ember.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.Adam([p], lr=0.1)
    p.grad = ember.tensor([0.5, -0.5])
    opt.step()
    sd = opt.state_dict()
    # What ember.save puts in JSON: the groups, and the state with tensors set apart.
    groups = json.loads(json.dumps(sd["param_groups"]))
    state = {str(k): v for k, v in sd["state"].items()}
    q = ember.tensor([1.0, 2.0], requires_grad=True)
    opt2 = optim.Adam([q], lr=0.1)
    opt2.load_state_dict({"state": state, "param_groups": groups})
    assert opt2.param_groups[0]["betas"] == [0.9, 0.999]
    assert opt2.state[q]["step"].item() == 1.0
    assert opt2.state[q]["exp_avg"] is not sd["state"][0]["exp_avg"]  # copied on load
    with ember.no_grad():
        q.copy_(p)
    for opt, param in ((opt, p), (opt2, q)):
        param.grad = ember.tensor([0.25, 1.0])
        opt.step()
    np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


def test_load_casts_state_to_the_parameter_dtype():
    p = ember.zeros(2, dtype=ember.float64, requires_grad=True)
    opt = optim.Adam([p])
    p.grad = ember.ones(2, dtype=ember.float64)
    opt.step()
    q = ember.zeros(2, dtype=ember.float32, requires_grad=True)
    opt32 = optim.Adam([q])
    opt32.load_state_dict(opt.state_dict())
    assert opt32.state[q]["exp_avg"].dtype == ember.float32
    assert opt32.state[q]["step"].dtype == opt.state[p]["step"].dtype


def test_load_state_dict_rejects_other_shapes_and_leaves_optimizer_unchanged():
    a, b = ember.zeros(2, requires_grad=True), ember.zeros(3, requires_grad=True)
    opt = optim.SGD([a, b], lr=0.1, momentum=0.9)
    other = optim.SGD([ember.zeros(2, requires_grad=True)], lr=0.5)
    with pytest.raises(OptimizerError, match="group 0 has 1 parameters, but the optimizer's "
                                             "group 0 has 2"):
        opt.load_state_dict(other.state_dict())
    two_groups = optim.SGD([{"params": [ember.zeros(2, requires_grad=True)]},
                            {"params": [ember.zeros(2, requires_grad=True)]}], lr=0.5)
    with pytest.raises(ValueError, match="2 parameter groups, but the optimizer has 1"):
        opt.load_state_dict(two_groups.state_dict())
    with pytest.raises(OptimizerError, match="'state' and 'param_groups'"):
        opt.load_state_dict({"param_groups": []})
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[0]["params"] == [a, b]


def test_zero_grad():
    p = ember.ones(3, requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    (p * 2).sum().backward()
    grad = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is grad and p.grad.tolist() == [0.0, 0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None
    opt.step()  # no gradient: nothing moves
    assert p.tolist() == [1.0, 1.0, 1.0] and not opt.state


def test_zero_grad_detaches_a_graph_connected_grad():
    p = ember.ones(2, requires_grad=True)
    (p * p).sum().backward(create_graph=True)
    assert p.grad.grad_fn is not None
    optim.SGD([p]).zero_grad(set_to_none=False)
    assert p.grad.grad_fn is None and p.grad.tolist() == [0.0, 0.0]


def test_closure_runs_with_grad_and_returns_loss():
    p = ember.tensor([3.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss
    with ember.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 9.0
    assert p.item() == pytest.approx(3.0 - 0.25 * 6.0)


def test_step_hooks():
    p = ember.tensor([1.0], requires_grad=True)
    opt = optim.SGD([p], lr=1.0)
    calls = []
    pre = opt.register_step_pre_hook(lambda o, args, kwargs: calls.append(("pre", p.item())))
    opt.register_step_post_hook(lambda o, args, kwargs: calls.append(("post", p.item())))
    p.grad = ember.tensor([0.5])
    opt.step()
    pre.remove()
    opt.step()
    assert calls == [("pre", 1.0), ("post", 0.5), ("post", 0.0)]


def test_hooks_run_once_when_an_override_calls_super():
    class ClippedSGD(optim.SGD):
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    p.grad.clamp_(-1.0, 1.0)
            return super().step(closure)
    p = ember.tensor([0.0], requires_grad=True)
    opt = ClippedSGD([p], lr=1.0)
    calls = []
    opt.register_step_pre_hook(lambda o, args, kwargs: calls.append("pre"))
    p.grad = ember.tensor([5.0])
    opt.step()
    assert calls == ["pre"] and p.item() == -1.0


def test_parameters_without_grad_get_no_state():
    a, b = ember.zeros(2, requires_grad=True), ember.zeros(2, requires_grad=True)
    opt = optim.Adam([a, b], lr=0.1)
    a.grad = ember.ones(2)
    opt.step()
    assert set(opt.state) == {a} and opt.state_dict()["state"].keys() == {0}
    assert b.tolist() == [0.0, 0.0]


def test_adagrad_makes_its_state_at_construction():
    p = ember.zeros(3, requires_grad=True)
    opt = optim.Adagrad([p], initial_accumulator_value=0.5)
    assert opt.state[p]["sum"].tolist() == [0.5, 0.5, 0.5]
    assert opt.state[p]["step"].item() == 0.0


def test_repr_lists_groups():
    opt = optim.SGD([ember.zeros(1, requires_grad=True)], lr=0.1, momentum=0.9)
    text = repr(opt)
    assert text.startswith("SGD (") and "Parameter Group 0" in text and "momentum: 0.9" in text


# Validation ---------------------------------------------------------------------------
def _p():
    return ember.zeros(2, requires_grad=True)


def test_params_must_be_tensors():
    with pytest.raises(EmberTypeError, match="SGD: params must be tensors, got int"):
        optim.SGD([_p(), 1], lr=0.1)
    with pytest.raises(TypeError, match="Adam: params must be tensors, got ndarray"):
        optim.Adam([np.zeros(2)])


def test_params_must_be_an_iterable_of_tensors_or_groups():
    with pytest.raises(EmberTypeError, match="SGD: params should be an iterable.*got a Tensor"):
        optim.SGD(_p(), lr=0.1)
    with pytest.raises(EmberTypeError, match="got int"):
        optim.SGD(3, lr=0.1)
    with pytest.raises(EmberTypeError, match="ordered collection"):
        optim.SGD({_p(), _p()}, lr=0.1)
    with pytest.raises(EmberTypeError, match="ordered collection"):
        optim.SGD([{"params": {_p(), _p()}}], lr=0.1)


def test_empty_parameter_list():
    with pytest.raises(OptimizerError, match="Adam: got an empty parameter list"):
        optim.Adam([])
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD(iter([]))


def test_non_leaf_tensor():
    with pytest.raises(OptimizerError, match="SGD: can't optimize a non-leaf Tensor"):
        optim.SGD([_p() * 2], lr=0.1)


def test_parameter_in_two_groups():
    p = _p()
    with pytest.raises(OptimizerError, match="more than one parameter group"):
        optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    opt = optim.SGD([p], lr=0.1)
    with pytest.raises(OptimizerError, match="more than one parameter group"):
        opt.add_param_group({"params": [p]})
    with pytest.raises(OptimizerError, match="'params' entry"):
        opt.add_param_group({"lr": 0.1})


def test_duplicate_parameter_in_a_group_warns():
    p = _p()
    with pytest.warns(UserWarning, match="same parameter more than once"):
        optim.SGD([p, p], lr=0.1)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam",
                                  "RMSprop", "Adagrad", "Adadelta"])
def test_negative_learning_rate(name):
    with pytest.raises(OptimizerError, match=f"{name}: invalid learning rate -0.1"):
        getattr(optim, name)([_p()], lr=-0.1)
    opt = getattr(optim, name)([_p()])
    with pytest.raises(OptimizerError, match="invalid learning rate -1"):
        opt.add_param_group({"params": [_p()], "lr": -1})
    with pytest.raises(OptimizerError, match="invalid weight_decay -0.5"):
        getattr(optim, name)([_p()], weight_decay=-0.5)


@pytest.mark.parametrize("name", ["Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop",
                                  "Adagrad", "Adadelta"])
def test_negative_eps(name):
    with pytest.raises(OptimizerError, match=f"{name}: invalid eps -1e-08"):
        getattr(optim, name)([_p()], eps=-1e-8)


@pytest.mark.parametrize("name", ["Adam", "AdamW", "Adamax", "NAdam", "RAdam"])
@pytest.mark.parametrize("betas,index", [((1.0, 0.999), 0), ((0.9, -0.1), 1),
                                         ((0.9, float("nan")), 1)])
def test_betas_out_of_range(name, betas, index):
    with pytest.raises(OptimizerError, match=f"{name}: invalid beta parameter at index "
                                             f"{index}"):
        getattr(optim, name)([_p()], betas=betas)


def test_other_invalid_options():
    with pytest.raises(OptimizerError, match="invalid momentum -0.9"):
        optim.SGD([_p()], lr=0.1, momentum=-0.9)
    with pytest.raises(OptimizerError, match="Nesterov momentum requires a momentum and zero "
                                             "dampening"):
        optim.SGD([_p()], lr=0.1, momentum=0.9, dampening=0.1, nesterov=True)
    with pytest.raises(OptimizerError, match="Adadelta: invalid rho 1.5"):
        optim.Adadelta([_p()], rho=1.5)
    with pytest.raises(OptimizerError, match="RMSprop: invalid alpha -0.1"):
        optim.RMSprop([_p()], alpha=-0.1)
    with pytest.raises(OptimizerError, match="Adagrad: invalid lr_decay"):
        optim.Adagrad([_p()], lr_decay=-1)
    with pytest.raises(OptimizerError, match="NAdam: invalid momentum_decay"):
        optim.NAdam([_p()], momentum_decay=-1)
    with pytest.raises(OptimizerError, match="invalid learning rate nan"):
        optim.SGD([_p()], lr=float("nan"))


def test_unsupported_implementation_flags():
    with pytest.raises(NotImplementedError, match="Adam: fused=True is not supported"):
        optim.Adam([_p()], fused=True)
    with pytest.raises(NotImplementedError, match="capturable=True"):
        optim.AdamW([_p()], capturable=True)
    with pytest.raises(NotImplementedError, match="differentiable=True"):
        optim.SGD([_p()], differentiable=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        optim.Adam([_p()], foreach=True)  # an implementation hint: accepted


def test_checkpoint_through_ember_save_resumes_exactly(tmp_path):
    from ember.optim.lr_scheduler import OneCycleLR
    rng = np.random.default_rng(3)

    def build(values):
        params = [ember.tensor(v, requires_grad=True) for v in values]
        opt = optim.AdamW(params, lr=0.01, amsgrad=True)
        return params, opt, OneCycleLR(opt, max_lr=0.1, total_steps=20)

    def train(params, opt, sched, grads):
        for g in grads:
            for p, gp in zip(params, g):
                p.grad = ember.tensor(gp)
            opt.step()
            sched.step()

    grads = [[rng.standard_normal(s) for s in SHAPES] for _ in range(20)]
    params, opt, sched = build([rng.standard_normal(s) for s in SHAPES])
    train(params, opt, sched, grads[:8])
    path = tmp_path / "checkpoint.safetensors"
    ember.save({"params": params, "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict()}, path)
    train(params, opt, sched, grads[8:])

    checkpoint = ember.load(path)
    params2, opt2, sched2 = build([p.detach().numpy() for p in checkpoint["params"]])
    opt2.load_state_dict(checkpoint["optimizer"])
    sched2.load_state_dict(checkpoint["scheduler"])
    train(params2, opt2, sched2, grads[8:])
    for a, b in zip(params, params2):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert opt2.param_groups[0]["betas"] == opt.param_groups[0]["betas"]
