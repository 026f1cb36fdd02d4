"""Whole training steps under ember.jit: every optimizer, and learning-rate schedulers
stepped inside or outside the compiled step, give the same parameters, learning rates
and optimizer state as the same steps run eagerly (float64, to 1e-9)."""
import copy

import numpy as np
import pytest

import ember
from ember import nn, optim
from ember.compiler import TraceError
from ember.optim import lr_scheduler

STEPS = 10
ATOL = 1e-9

# (optimizer, options): every algorithm, with the options that change its graph.
CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01, maximize=True)),
    ("Adam", dict(lr=0.05)),
    ("Adam", dict(lr=0.05, amsgrad=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.05, betas=(0.8, 0.99), weight_decay=0.1,
                  decoupled_weight_decay=True, maximize=True)),
    ("AdamW", dict(lr=0.05)),
    ("AdamW", dict(lr=0.05, weight_decay=0.1, amsgrad=True)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, initial_accumulator_value=0.1, weight_decay=0.1,
                     maximize=True)),
    ("Adamax", dict()),
    ("Adamax", dict(lr=0.05, weight_decay=0.1, eps=1e-3, maximize=True)),
    ("NAdam", dict(lr=0.05)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    # default betas: rho_t <= 5 for steps 1-5, then the rectified update (both branches)
    ("RAdam", dict(lr=0.05)),
    ("RAdam", dict(lr=0.05, betas=(0.9, 0.9), weight_decay=0.1)),
    ("RAdam", dict(lr=0.05, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RMSprop", dict()),
    ("RMSprop", dict(centered=True)),
    ("RMSprop", dict(alpha=0.9, momentum=0.9, weight_decay=0.1)),
    ("RMSprop", dict(centered=True, momentum=0.5, eps=1e-4, maximize=True)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.5, eps=1e-4, weight_decay=0.1, maximize=True)),
]
IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in kw.items()) or 'defaults'}"
       for name, kw in CASES]


def batches(n=STEPS, seed=1):
    rng = np.random.default_rng(seed)
    return [(ember.tensor(rng.standard_normal((8, 6))), ember.tensor(rng.standard_normal((8, 2))))
            for _ in range(n)]


class Run:
    """A Linear 6->4->2 (tanh) model in float64 with fixed initial weights, an optimizer
    and optionally a scheduler; ``train`` runs steps eagerly or through ember.jit."""

    def __init__(self, name, options, schedule=None, groups=False):
        rng = np.random.default_rng(0)
        self.model = nn.Sequential(nn.Linear(6, 4, dtype=ember.float64), nn.Tanh(),
                                   nn.Linear(4, 2, dtype=ember.float64))
        with ember.no_grad():
            for p in self.model.parameters():
                p.copy_(ember.tensor(rng.standard_normal(tuple(p.shape))))
        self.initial = self.params()
        params = self.model.parameters()
        if groups:  # the first layer at a tenth of the learning rate
            first, second = self.model[0].parameters(), self.model[2].parameters()
            params = [{"params": list(first), "lr": options.get("lr", 0.01) / 10},
                      {"params": list(second)}]
        self.opt = getattr(optim, name)(params, **options)
        self.scheduler = schedule(self.opt) if schedule is not None else None
        self.lrs = []

    def step_fn(self, schedule_inside: bool):
        def step(x, y):
            self.opt.zero_grad()
            loss = ((self.model(x) - y) ** 2).mean()
            loss.backward()
            self.opt.step()
            if schedule_inside:
                self.scheduler.step()
            return loss.detach()  # (the step's graph was consumed by backward())
        return step

    def train(self, data, compiled: bool, schedule_inside: bool = False, fn=None):
        """Run one step per batch; returns the losses (and keeps the step function)."""
        if fn is None:
            fn = self.step_fn(schedule_inside)
            fn = ember.jit(fn) if compiled else fn
        self.fn = fn
        losses = []
        for x, y in data:
            losses.append(fn(x, y).item())
            if self.scheduler is not None and not schedule_inside:
                self.scheduler.step()
            group = self.opt.param_groups[0]
            self.lrs.append((group["lr"], group.get("betas"), group.get("momentum")))
        return losses

    def params(self):
        return [p.detach().numpy().copy() for p in self.model.parameters()]


def assert_same_params(a: Run, b: Run):
    for x, y in zip(a.params(), b.params()):
        np.testing.assert_allclose(x, y, rtol=0, atol=ATOL)


def assert_same_state(a: dict, b: dict):
    assert a["param_groups"] == b["param_groups"]
    assert a["state"].keys() == b["state"].keys()
    for index, entries in a["state"].items():
        assert entries.keys() == b["state"][index].keys()
        for key, value in entries.items():
            other = b["state"][index][key]
            assert value.dtype == other.dtype, (index, key)
            np.testing.assert_allclose(value.numpy(), other.numpy(), rtol=0, atol=ATOL,
                                       err_msg=f"state[{index}][{key!r}]")


def traced_only_for_state(compiled) -> bool:
    """The compiled step was traced on the first call and, at most, once more when the
    first step made the optimizer's state: nothing a step changes forces a retrace."""
    reasons = compiled.retraces
    return reasons[0] == "first call" and len(reasons) <= 2 and \
        all("state entries changed" in r for r in reasons[1:])


@pytest.mark.parametrize("name,options", CASES, ids=IDS)
def test_compiled_steps_match_eager(name, options):
    data = batches()
    eager, compiled = Run(name, options), Run(name, options)
    eager_losses = eager.train(data, compiled=False)
    compiled_losses = compiled.train(data, compiled=True)
    np.testing.assert_allclose(compiled_losses, eager_losses, rtol=0, atol=ATOL)
    assert_same_params(eager, compiled)
    assert any(np.abs(p - q).max() > 1e-3 for p, q in zip(compiled.params(), eager.initial))
    assert traced_only_for_state(compiled.fn), compiled.fn.retraces
    assert_same_state(compiled.opt.state_dict(), eager.opt.state_dict())


@pytest.mark.parametrize("name,options", [("SGD", dict(lr=0.1, momentum=0.9)),
                                          ("Adam", dict(lr=0.05)),
                                          ("RAdam", dict(lr=0.05))], ids=str)
def test_parameter_groups_keep_their_own_learning_rates(name, options):
    data = batches()
    eager, compiled = Run(name, options, groups=True), Run(name, options, groups=True)
    eager.train(data, compiled=False)
    compiled.train(data, compiled=True)
    assert_same_params(eager, compiled)
    assert compiled.opt.param_groups[0]["lr"] != compiled.opt.param_groups[1]["lr"]


SCHEDULES = [
    ("SGD", dict(lr=0.1, momentum=0.9), lambda opt: lr_scheduler.StepLR(opt, 3, gamma=0.5)),
    ("Adam", dict(lr=0.05), lambda opt: lr_scheduler.CosineAnnealingLR(opt, T_max=STEPS)),
    ("RMSprop", dict(lr=0.01), lambda opt: lr_scheduler.SequentialLR(
        opt, [lr_scheduler.LinearLR(opt, 0.1, total_iters=3),
              lr_scheduler.ExponentialLR(opt, 0.8)], milestones=[4])),
    # OneCycleLR also cycles the momentum: Adam's beta1, SGD's momentum
    ("Adam", dict(lr=0.05), lambda opt: lr_scheduler.OneCycleLR(opt, 0.1, total_steps=STEPS)),
    ("SGD", dict(lr=0.1, momentum=0.9),
     lambda opt: lr_scheduler.OneCycleLR(opt, 0.1, total_steps=STEPS)),
    ("NAdam", dict(lr=0.05), lambda opt: lr_scheduler.CyclicLR(opt, 0.01, 0.1, 3)),
]
SCHEDULE_IDS = ["SGD-StepLR", "Adam-CosineAnnealingLR", "RMSprop-SequentialLR",
                "Adam-OneCycleLR", "SGD-OneCycleLR", "NAdam-CyclicLR"]


@pytest.mark.parametrize("name,options,schedule", SCHEDULES, ids=SCHEDULE_IDS)
@pytest.mark.parametrize("inside", [True, False], ids=["inside", "outside"])
def test_scheduler_with_compiled_step(name, options, schedule, inside):
    # inside: scheduler.step() in the compiled function runs at every call (after the
    # graph); outside: the usual loop, and the compiled step reads the new lr each call
    data = batches()
    eager, compiled = Run(name, options, schedule), Run(name, options, schedule)
    eager.train(data, compiled=False, schedule_inside=inside)
    compiled.train(data, compiled=True, schedule_inside=inside)
    assert compiled.lrs == eager.lrs
    assert len(set(lr for lr, _, _ in eager.lrs)) > 2
    assert compiled.scheduler.get_last_lr() == eager.scheduler.get_last_lr()
    assert compiled.scheduler.last_epoch == eager.scheduler.last_epoch == STEPS
    assert_same_params(eager, compiled)
    # neither the lr nor a cycled momentum is baked into the graph
    assert traced_only_for_state(compiled.fn), compiled.fn.retraces


@pytest.mark.parametrize("name", sorted({name for name, _ in CASES}))
def test_every_optimizer_reads_the_learning_rate_at_every_call(name):
    data = batches()

    def schedule(opt):
        return lr_scheduler.ExponentialLR(opt, gamma=0.7)

    eager, compiled = Run(name, {}, schedule), Run(name, {}, schedule)
    eager.train(data, compiled=False, schedule_inside=True)
    compiled.train(data, compiled=True, schedule_inside=True)
    assert compiled.lrs == eager.lrs
    assert_same_params(eager, compiled)
    assert traced_only_for_state(compiled.fn), compiled.fn.retraces


def test_changing_an_option_retraces_with_a_reason():
    data = batches()
    eager, compiled = Run("Adam", dict(lr=0.05)), Run("Adam", dict(lr=0.05))
    for run, is_compiled in ((eager, False), (compiled, True)):
        run.train(data[:4], compiled=is_compiled)
        run.opt.param_groups[0]["betas"] = (0.5, 0.9)
        run.train(data[4:], compiled=is_compiled, fn=run.fn)
    assert_same_params(eager, compiled)
    assert len(compiled.fn.retraces) == 3
    reason = compiled.fn.retraces[-1]
    assert "Adam param_groups[0] options changed" in reason
    assert "(0.5, 0.9)" in reason


def test_learning_rate_set_by_hand_is_read_at_every_call():
    data = batches()
    eager, compiled = Run("SGD", dict(lr=0.1)), Run("SGD", dict(lr=0.1))
    for run, is_compiled in ((eager, False), (compiled, True)):
        run.train(data[:3], compiled=is_compiled)
        run.opt.param_groups[0]["lr"] = 0.01
        run.train(data[3:], compiled=is_compiled, fn=run.fn)
    assert_same_params(eager, compiled)
    assert compiled.fn.retraces == ["first call"]


@pytest.mark.parametrize("name,options", [("Adam", dict(lr=0.05, amsgrad=True)),
                                          ("NAdam", dict(lr=0.05)),
                                          ("SGD", dict(lr=0.1, momentum=0.9)),
                                          ("Adagrad", dict(lr=0.1, lr_decay=0.05))], ids=str)
def test_state_dict_after_compiled_steps_resumes(name, options):
    data = batches()
    eager, compiled = Run(name, options), Run(name, options)
    eager.train(data[:5], compiled=False)
    compiled.train(data[:5], compiled=True)
    saved = copy.deepcopy(compiled.opt.state_dict())
    assert_same_state(saved, eager.opt.state_dict())
    weights = copy.deepcopy(compiled.model.state_dict())

    # a fresh model and optimizer, loaded, continue as the eager run does
    resumed = Run(name, options)
    resumed.model.load_state_dict(weights)
    resumed.opt.load_state_dict(copy.deepcopy(saved))
    eager.train(data[5:], compiled=False)
    resumed.train(data[5:], compiled=True)
    assert_same_params(eager, resumed)
    assert_same_state(resumed.opt.state_dict(), eager.opt.state_dict())

    # rewinding the optimizer that the compiled step already uses replaces its state
    # tensors: the step must retrace and read the loaded ones, not the old ones
    compiled.train(data[5:], compiled=True, fn=compiled.fn)
    compiled.model.load_state_dict(weights)
    compiled.opt.load_state_dict(copy.deepcopy(saved))
    compiled.train(data[5:], compiled=True, fn=compiled.fn)
    assert_same_params(eager, compiled)
    assert_same_state(compiled.opt.state_dict(), eager.opt.state_dict())
    reason = compiled.fn.retraces[-1]  # load_state_dict replaced the groups and the state
    assert "parameter groups" in reason or "state tensors" in reason


def test_plateau_scheduler_with_a_traced_metric_raises():
    run = Run("SGD", dict(lr=0.1), lambda opt: lr_scheduler.ReduceLROnPlateau(opt))

    @ember.jit
    def step(x, y):
        run.opt.zero_grad()
        loss = ((run.model(x) - y) ** 2).mean()
        loss.backward()
        run.opt.step()
        run.scheduler.step(loss)
        return loss.detach()

    x, y = batches(1)[0]
    with pytest.raises(TraceError, match=r"ReduceLROnPlateau\.step\(\).*outside the compiled"):
        step(x, y)
    assert run.params()[0].tolist() == run.initial[0].tolist()


def test_plateau_scheduler_outside_the_compiled_step():
    # a maximised loss grows: every epoch is a bad one, so the lr halves each step
    data = batches()

    def schedule(opt):
        return lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=0)

    eager = Run("SGD", dict(lr=0.1, maximize=True), schedule)
    compiled = Run("SGD", dict(lr=0.1, maximize=True), schedule)
    for run, is_compiled in ((eager, False), (compiled, True)):
        fn = run.step_fn(False)
        fn = ember.jit(fn) if is_compiled else fn
        for x, y in data:
            run.scheduler.step(fn(x, y))
            run.lrs.append(run.opt.param_groups[0]["lr"])
    assert compiled.lrs == eager.lrs
    assert compiled.lrs[-1] < 0.1 / 2 ** 5
    assert_same_params(eager, compiled)


def test_optimizer_step_after_its_scheduler_step_in_one_call_raises():
    # two training steps in one compiled call: the scheduler's first step would run only
    # after the graph, so the second optimizer step would use a stale learning rate
    run = Run("SGD", dict(lr=0.1), lambda opt: lr_scheduler.StepLR(opt, 1, gamma=0.5))
    one_step = run.step_fn(schedule_inside=True)

    @ember.jit
    def two_steps(x, y):
        one_step(x, y)
        return one_step(x, y)

    x, y = batches(1)[0]
    with pytest.raises(TraceError, match=r"SGD\.step\(\) is called after StepLR\.step\(\)"):
        two_steps(x, y)
    assert run.opt.param_groups[0]["lr"] == 0.1
    assert run.params()[0].tolist() == run.initial[0].tolist()
