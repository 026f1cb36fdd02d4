"""ember.optim.lr_scheduler against torch.optim.lr_scheduler: 50 steps of learning
rates (and cycled momenta), state dicts (same keys, JSON round trip mid-run that
continues identically), resuming with last_epoch, and the validation errors."""
import copy
import json
import warnings

import numpy as np
import pytest

import ember
from ember import optim
from ember.errors import EmberTypeError
from ember.optim import OptimizerError
from ember.optim import lr_scheduler as EL

try:
    import torch
    from torch.optim import lr_scheduler as TL
except ImportError:  # the comparisons skip; the semantic and error tests still run
    torch = TL = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the oracle) not installed")


def make_optimizer(lib, name="SGD"):
    """Two parameter groups with different learning rates, in ember or PyTorch."""
    mod = ember if lib == "ember" else torch
    params = [mod.zeros(2, requires_grad=True), mod.zeros(3, requires_grad=True)]
    cls = getattr(optim if lib == "ember" else torch.optim, name)
    extra = {"momentum": 0.9} if name == "SGD" else {}
    return cls([{"params": [params[0]]}, {"params": [params[1]], "lr": 0.05}], lr=0.1,
               **extra)


def _decay(epoch):
    return 0.9 ** epoch


def _inverse(epoch):
    return 1.0 / (1 + epoch)


def _shrink(epoch):
    return 0.95


# name -> (builder(L, optimizer), optimizer names to run it with)
CASES = {
    "StepLR": (lambda L, o: L.StepLR(o, step_size=3, gamma=0.5), ["SGD"]),
    "MultiStepLR": (lambda L, o: L.MultiStepLR(o, [9, 2, 5, 5], gamma=0.5), ["SGD"]),
    "ExponentialLR": (lambda L, o: L.ExponentialLR(o, gamma=0.9), ["SGD"]),
    "CosineAnnealingLR": (lambda L, o: L.CosineAnnealingLR(o, T_max=7, eta_min=1e-3), ["SGD"]),
    "CosineAnnealingWarmRestarts": (
        lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=1e-3), ["SGD"]),
    "CosineAnnealingWarmRestarts-Tmult1": (
        lambda L, o: L.CosineAnnealingWarmRestarts(o, T_0=4), ["SGD"]),
    "LinearLR": (lambda L, o: L.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=10),
                 ["SGD"]),
    "ConstantLR": (lambda L, o: L.ConstantLR(o, factor=0.4, total_iters=6), ["SGD"]),
    "LambdaLR": (lambda L, o: L.LambdaLR(o, [_decay, _inverse]), ["SGD"]),
    "MultiplicativeLR": (lambda L, o: L.MultiplicativeLR(o, _shrink), ["SGD"]),
    "PolynomialLR": (lambda L, o: L.PolynomialLR(o, total_iters=30, power=2.0), ["SGD"]),
    "OneCycleLR-cos": (lambda L, o: L.OneCycleLR(o, [1.0, 0.5], total_steps=50),
                       ["SGD", "Adam"]),
    "OneCycleLR-linear-three-phase": (
        lambda L, o: L.OneCycleLR(o, 1.0, epochs=5, steps_per_epoch=10, pct_start=0.25,
                                  anneal_strategy="linear", three_phase=True, div_factor=10.0,
                                  final_div_factor=100.0), ["SGD", "Adam"]),
    "OneCycleLR-no-momentum": (
        lambda L, o: L.OneCycleLR(o, 0.3, total_steps=60, cycle_momentum=False), ["Adagrad"]),
    "CyclicLR-triangular": (lambda L, o: L.CyclicLR(o, 0.01, [0.1, 0.2], step_size_up=4,
                                                    step_size_down=6), ["SGD", "Adam"]),
    "CyclicLR-triangular2": (lambda L, o: L.CyclicLR(o, 0.01, 0.1, step_size_up=3,
                                                     mode="triangular2"), ["SGD"]),
    "CyclicLR-exp_range": (lambda L, o: L.CyclicLR(o, [0.01, 0.02], 0.1, step_size_up=3,
                                                   mode="exp_range", gamma=0.97,
                                                   base_momentum=0.7, max_momentum=0.95),
                           ["SGD", "Adam"]),
    "CyclicLR-scale_fn": (lambda L, o: L.CyclicLR(o, 0.01, 0.1, step_size_up=5,
                                                  scale_fn=_decay, scale_mode="iterations",
                                                  cycle_momentum=False), ["SGD"]),
    "SequentialLR": (lambda L, o: L.SequentialLR(
        o, [L.LinearLR(o, start_factor=0.1, total_iters=5), L.CosineAnnealingLR(o, T_max=20),
            L.ExponentialLR(o, gamma=0.9)], milestones=[5, 25]), ["SGD"]),
    "SequentialLR-lambdas": (lambda L, o: L.SequentialLR(
        o, [L.ConstantLR(o, factor=0.5, total_iters=3), L.LambdaLR(o, _decay),
            L.MultiplicativeLR(o, _shrink), L.PolynomialLR(o, total_iters=8)],
        milestones=[4, 10, 30]), ["SGD"]),
    "ChainedScheduler": (lambda L, o: L.ChainedScheduler(
        [L.ConstantLR(o, factor=0.1, total_iters=2), L.ExponentialLR(o, gamma=0.9),
         L.StepLR(o, step_size=4, gamma=0.5)]), ["SGD"]),
}
PAIRS = [(name, opt) for name, (_, opts) in CASES.items() for opt in opts]
PAIR_IDS = [f"{name}-{opt}" for name, opt in PAIRS]


def _momenta(optimizer):
    return [(g.get("momentum"), tuple(g["betas"]) if "betas" in g else None)
            for g in optimizer.param_groups]


def _lrs(optimizer):
    return [g["lr"] for g in optimizer.param_groups]


def _through_json(optimizer):
    """The optimizer's state dict with its groups sent through JSON (as ember.save
    stores them; the state's tensors are stored apart)."""
    sd = optimizer.state_dict()
    return {"state": copy.deepcopy(sd["state"]),
            "param_groups": json.loads(json.dumps(sd["param_groups"]))}


@needs_torch
@pytest.mark.parametrize("name,opt_name", PAIRS, ids=PAIR_IDS)
def test_fifty_steps_match_torch(name, opt_name):
    build = CASES[name][0]
    eo, to = make_optimizer("ember", opt_name), make_optimizer("torch", opt_name)
    es, ts = build(EL, eo), build(TL, to)
    trace = []
    for step in range(51):
        if step:
            eo.step()
            to.step()
            es.step()
            ts.step()
        np.testing.assert_allclose(es.get_last_lr(), ts.get_last_lr(), rtol=0, atol=1e-9)
        np.testing.assert_allclose(_lrs(eo), _lrs(to), rtol=0, atol=1e-9)
        for (em, eb), (tm, tb) in zip(_momenta(eo), _momenta(to)):
            assert em == pytest.approx(tm, abs=1e-9) and eb == pytest.approx(tb, abs=1e-9)
        trace.append(_lrs(eo)[0])
    assert len(set(trace)) >= 2  # the schedule did change the learning rate
    assert set(es.state_dict()) == set(ts.state_dict())
    assert set(eo.param_groups[0]) == set(to.param_groups[0])


@pytest.mark.parametrize("name,opt_name", PAIRS, ids=PAIR_IDS)
def test_json_state_dict_round_trip_continues_identically(name, opt_name):
    build = CASES[name][0]
    opt = make_optimizer("ember", opt_name)
    sched = build(EL, opt)
    for _ in range(23):
        opt.step()
        sched.step()
    saved_opt = _through_json(opt)
    saved_sched = json.loads(json.dumps(sched.state_dict()))

    opt2 = make_optimizer("ember", opt_name)
    sched2 = build(EL, opt2)
    opt2.load_state_dict(saved_opt)
    sched2.load_state_dict(saved_sched)
    assert sched2.get_last_lr() == sched.get_last_lr()
    for _ in range(27):
        for o, s in ((opt, sched), (opt2, sched2)):
            o.step()
            s.step()
        assert _lrs(opt2) == _lrs(opt) and sched2.get_last_lr() == sched.get_last_lr()
        assert _momenta(opt2) == _momenta(opt)


@needs_torch
@pytest.mark.parametrize("last_epoch", [0, 2, 3, 5])
@pytest.mark.parametrize("name", ["StepLR", "MultiStepLR", "ExponentialLR",
                                  "CosineAnnealingLR", "CosineAnnealingWarmRestarts",
                                  "LinearLR", "ConstantLR", "LambdaLR", "MultiplicativeLR",
                                  "PolynomialLR"])
def test_resuming_with_last_epoch_matches_torch(name, last_epoch):
    builders = {
        "StepLR": lambda L, o, e: L.StepLR(o, 3, 0.5, last_epoch=e),
        "MultiStepLR": lambda L, o, e: L.MultiStepLR(o, [3, 6], 0.5, last_epoch=e),
        "ExponentialLR": lambda L, o, e: L.ExponentialLR(o, 0.5, last_epoch=e),
        "CosineAnnealingLR": lambda L, o, e: L.CosineAnnealingLR(o, 8, last_epoch=e),
        "CosineAnnealingWarmRestarts":
            lambda L, o, e: L.CosineAnnealingWarmRestarts(o, 3, 2, last_epoch=e),
        "LinearLR": lambda L, o, e: L.LinearLR(o, 0.5, 1.0, 4, last_epoch=e),
        "ConstantLR": lambda L, o, e: L.ConstantLR(o, 0.5, 4, last_epoch=e),
        "LambdaLR": lambda L, o, e: L.LambdaLR(o, _decay, last_epoch=e),
        "MultiplicativeLR": lambda L, o, e: L.MultiplicativeLR(o, _shrink, last_epoch=e),
        "PolynomialLR": lambda L, o, e: L.PolynomialLR(o, 8, 2.0, last_epoch=e),
    }
    eo, to = make_optimizer("ember"), make_optimizer("torch")
    for o in (eo, to):
        for group in o.param_groups:
            group["initial_lr"] = 2 * group["lr"]
    es, ts = builders[name](EL, eo, last_epoch), builders[name](TL, to, last_epoch)
    for _ in range(8):
        np.testing.assert_allclose(_lrs(eo), _lrs(to), rtol=0, atol=1e-12)
        assert es.last_epoch == ts.last_epoch
        for o, s in ((eo, es), (to, ts)):
            o.step()
            s.step()


@needs_torch
@pytest.mark.parametrize("name", ["StepLR", "ExponentialLR", "CosineAnnealingLR",
                                  "LinearLR", "PolynomialLR", "MultiStepLR", "ConstantLR"])
def test_step_with_an_epoch_jumps_like_torch(name):
    builders = {
        "StepLR": lambda L, o: L.StepLR(o, 3, 0.5),
        "ExponentialLR": lambda L, o: L.ExponentialLR(o, 0.8),
        "CosineAnnealingLR": lambda L, o: L.CosineAnnealingLR(o, 10, eta_min=0.01),
        "LinearLR": lambda L, o: L.LinearLR(o, 0.25, total_iters=6),
        "PolynomialLR": lambda L, o: L.PolynomialLR(o, 9, 1.5),
        "MultiStepLR": lambda L, o: L.MultiStepLR(o, [2, 4], 0.5),
        "ConstantLR": lambda L, o: L.ConstantLR(o, 0.5, 3),
    }
    eo, to = make_optimizer("ember"), make_optimizer("torch")
    es, ts = builders[name](EL, eo), builders[name](TL, to)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for epoch in [3, 7, 1, None, 5, None, None]:
            eo.step()
            to.step()
            es.step(epoch)
            ts.step(epoch)
            np.testing.assert_allclose(_lrs(eo), _lrs(to), rtol=0, atol=1e-12)
    with pytest.warns(UserWarning, match="deprecated"):
        es.step(2)


@needs_torch
def test_warm_restarts_with_fractional_epochs():
    eo, to = make_optimizer("ember"), make_optimizer("torch")
    es = EL.CosineAnnealingWarmRestarts(eo, T_0=2, T_mult=3, eta_min=0.01)
    ts = TL.CosineAnnealingWarmRestarts(to, T_0=2, T_mult=3, eta_min=0.01)
    for epoch in np.arange(0, 12, 0.35):
        eo.step()
        to.step()
        es.step(float(epoch))
        ts.step(float(epoch))
        np.testing.assert_allclose(_lrs(eo), _lrs(to), rtol=0, atol=1e-12)
        assert es.T_i == ts.T_i and es.last_epoch == ts.last_epoch
    with pytest.raises(OptimizerError, match="non-negative epoch"):
        es.step(-1.0)


PLATEAU_CASES = [
    dict(),
    dict(mode="max", factor=0.5, patience=2),
    dict(threshold=0.1, threshold_mode="abs", patience=1, cooldown=2),
    dict(factor=0.5, patience=0, min_lr=[0.01, 0.02], eps=1e-3),
    dict(mode="max", threshold_mode="abs", threshold=0.0, patience=3, min_lr=0.02),
]


@needs_torch
@pytest.mark.parametrize("kwargs", PLATEAU_CASES, ids=[str(k) for k in PLATEAU_CASES])
def test_reduce_lr_on_plateau_matches_torch(kwargs):
    rng = np.random.default_rng(0)
    metrics = np.concatenate([np.linspace(1.0, 0.5, 10), np.full(10, 0.5),
                              0.5 + 0.05 * rng.standard_normal(30)])
    eo, to = make_optimizer("ember"), make_optimizer("torch")
    es, ts = EL.ReduceLROnPlateau(eo, **kwargs), TL.ReduceLROnPlateau(to, **kwargs)
    resumed = None
    for i, metric in enumerate(metrics):
        metric = float(metric)
        eo.step()
        to.step()
        es.step(ember.tensor(metric) if i % 2 else metric)
        ts.step(metric)
        if resumed is not None:
            ro, rs = resumed
            ro.step()
            rs.step(metric)
            assert _lrs(ro) == _lrs(eo)
        if i == 24:
            ro = make_optimizer("ember")
            rs = EL.ReduceLROnPlateau(ro, **kwargs)
            ro.load_state_dict(_through_json(eo))
            rs.load_state_dict(json.loads(json.dumps(es.state_dict())))
            resumed = ro, rs
        np.testing.assert_allclose(_lrs(eo), _lrs(to), rtol=0, atol=1e-12)
        assert es.get_last_lr() == ts.get_last_lr()
        assert (es.num_bad_epochs, es.cooldown_counter) == (ts.num_bad_epochs,
                                                            ts.cooldown_counter)
    assert _lrs(eo)[0] < 0.1  # the plateau did reduce the learning rate
    assert set(es.state_dict()) == set(ts.state_dict())


def test_state_dict_has_no_functions():
    opt = make_optimizer("ember")
    sched = EL.LambdaLR(opt, _decay)
    assert sched.state_dict()["lr_lambdas"] == [None, None]
    assert "optimizer" not in sched.state_dict()

    class Warmup:
        def __init__(self):
            self.steps = 3

        def __call__(self, epoch):
            return min(1.0, (epoch + 1) / self.steps)
    fn = Warmup()
    sched = EL.LambdaLR(make_optimizer("ember"), fn)
    state = json.loads(json.dumps(sched.state_dict()))
    assert state["lr_lambdas"] == [{"steps": 3}, {"steps": 3}]
    fn.steps = 10
    sched.load_state_dict(state)
    assert fn.steps == 3


def test_multistep_milestones_stay_a_list():
    sched = EL.MultiStepLR(make_optimizer("ember"), [5, 2, 5])
    assert sched.state_dict()["milestones"] == [2, 5, 5]


def test_scheduler_before_optimizer_step_warns():
    opt = make_optimizer("ember")
    sched = EL.StepLR(opt, 2)
    with pytest.warns(UserWarning, match=r"before optimizer.step\(\)"):
        sched.step()
    opt.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sched.step()


def test_get_lr_outside_step_warns():
    opt = make_optimizer("ember")
    sched = EL.ExponentialLR(opt, 0.5)
    with pytest.warns(UserWarning, match=r"get_last_lr\(\)"):
        sched.get_lr()
    assert sched.get_last_lr() == [0.1, 0.05]


def test_initial_lr_and_last_lr_semantics():
    opt = make_optimizer("ember")
    sched = EL.ConstantLR(opt, factor=0.5, total_iters=2)
    assert [g["initial_lr"] for g in opt.param_groups] == [0.1, 0.05]
    assert sched.get_last_lr() == [0.05, 0.025] and sched.last_epoch == 0
    with pytest.raises(KeyError, match=r"initial_lr.*param_groups\[0\]"):
        EL.StepLR(make_optimizer("ember"), 2, last_epoch=3)


# Validation ---------------------------------------------------------------------------
def test_scheduler_needs_an_optimizer():
    with pytest.raises(EmberTypeError, match="StepLR: expected an ember.optim.Optimizer, "
                                             "got list"):
        EL.StepLR([], 2)
    with pytest.raises(TypeError, match="ReduceLROnPlateau: expected an ember.optim.Optimizer"):
        EL.ReduceLROnPlateau(object())


def test_invalid_scheduler_arguments():
    opt = make_optimizer("ember")
    with pytest.raises(OptimizerError, match="ConstantLR: factor must be between 0 and 1"):
        EL.ConstantLR(opt, factor=1.5)
    with pytest.raises(ValueError, match=r"LinearLR: start_factor must be in \(0, 1\]"):
        EL.LinearLR(opt, start_factor=0)
    with pytest.raises(OptimizerError, match=r"LinearLR: end_factor must be in \[0, 1\]"):
        EL.LinearLR(opt, end_factor=2)
    with pytest.raises(OptimizerError, match="T_0 must be a positive integer, got 0"):
        EL.CosineAnnealingWarmRestarts(opt, T_0=0)
    with pytest.raises(OptimizerError, match="T_mult must be an integer >= 1, got 1.5"):
        EL.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=1.5)
    with pytest.raises(EmberTypeError, match="eta_min must be a number, got str"):
        EL.CosineAnnealingWarmRestarts(opt, T_0=2, eta_min="0")
    with pytest.raises(OptimizerError, match="lr_lambda has 3 values, but the optimizer has 2 "
                                             "parameter groups"):
        EL.LambdaLR(opt, [_decay] * 3)


def test_invalid_cyclic_arguments():
    opt = make_optimizer("ember")
    with pytest.raises(OptimizerError, match="OneCycleLR: give either total_steps or both "
                                             "epochs and steps_per_epoch"):
        EL.OneCycleLR(opt, 0.1, epochs=3)
    with pytest.raises(OptimizerError, match="total_steps must be a positive integer, got 0"):
        EL.OneCycleLR(opt, 0.1, total_steps=0)
    with pytest.raises(OptimizerError, match="pct_start must be a float between 0 and 1"):
        EL.OneCycleLR(opt, 0.1, total_steps=10, pct_start=1.5)
    with pytest.raises(OptimizerError, match="anneal_strategy must be 'cos' or 'linear'"):
        EL.OneCycleLR(opt, 0.1, total_steps=10, anneal_strategy="exp")
    with pytest.raises(OptimizerError, match="max_lr has 3 values"):
        EL.OneCycleLR(opt, [0.1] * 3, total_steps=10)
    adagrad = make_optimizer("ember", "Adagrad")
    with pytest.raises(OptimizerError, match="Adagrad has neither momentum nor betas"):
        EL.OneCycleLR(adagrad, 0.1, total_steps=10)
    with pytest.raises(OptimizerError, match="Adagrad has neither momentum nor betas"):
        EL.CyclicLR(adagrad, 0.01, 0.1)
    with pytest.raises(OptimizerError, match="CyclicLR: mode must be"):
        EL.CyclicLR(opt, 0.01, 0.1, mode="sine")
    sched = EL.OneCycleLR(opt, 0.1, total_steps=3)
    for _ in range(3):
        opt.step()
        sched.step()
    with pytest.raises(OptimizerError, match="tried to step 4 times, but the schedule has 3"):
        sched.step()


def test_invalid_combinations():
    opt, other = make_optimizer("ember"), make_optimizer("ember")
    a, b = EL.ExponentialLR(opt, 0.9), EL.StepLR(opt, 2)
    with pytest.raises(OptimizerError, match="one milestone fewer than schedulers, got 2 "
                                             "schedulers and 2 milestones"):
        EL.SequentialLR(opt, [a, b], milestones=[2, 4])
    with pytest.raises(OptimizerError, match="same optimizer, but the StepLR at index 1"):
        EL.SequentialLR(other, [EL.ExponentialLR(other, 0.9), b], milestones=[2])
    with pytest.raises(OptimizerError, match="at least one scheduler"):
        EL.ChainedScheduler([])
    with pytest.raises(OptimizerError, match="ReduceLROnPlateau .index 1. can't be combined"):
        EL.ChainedScheduler([a, EL.ReduceLROnPlateau(opt)])


def test_invalid_plateau_arguments():
    opt = make_optimizer("ember")
    with pytest.raises(OptimizerError, match="factor should be < 1.0, got 1.0"):
        EL.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(OptimizerError, match="mode must be 'min' or 'max', got 'up'"):
        EL.ReduceLROnPlateau(opt, mode="up")
    with pytest.raises(OptimizerError, match="threshold_mode must be 'rel' or 'abs'"):
        EL.ReduceLROnPlateau(opt, threshold_mode="pct")
    with pytest.raises(OptimizerError, match="expected 2 min_lrs, got 1"):
        EL.ReduceLROnPlateau(opt, min_lr=[0.1])
