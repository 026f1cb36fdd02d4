"""ember.optim.swa_utils against torch.optim.swa_utils: AveragedModel with every
averaging function (and use_buffers), update_bn, SWALR's schedules and state dicts, a
whole SWA run, ember.jit, and the argument errors."""
import copy

import numpy as np
import pytest

import ember
from ember import nn, optim
from ember.compiler import TraceError
from ember.errors import EmberValueError
from ember.optim import OptimizerError
from ember.optim import swa_utils

from .optim_oracle import check_jit_matches_eager, torch

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the oracle) not installed")


def ember_net():
    return nn.Sequential(nn.Linear(4, 3, dtype=ember.float64),
                         nn.BatchNorm1d(3, dtype=ember.float64), nn.Tanh(),
                         nn.Linear(3, 2, dtype=ember.float64))


def torch_net():
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3),
                               torch.nn.Tanh(), torch.nn.Linear(3, 2)).double()


def random_state(rng, like):
    """New values for a torch state dict: floats at random, counters moved on."""
    return {k: rng.standard_normal(tuple(v.shape)) if v.is_floating_point()
            else v.numpy() + rng.integers(1, 5) for k, v in like.items()}


def load_both(em, tm, values):
    tm.load_state_dict({k: torch.tensor(v) for k, v in values.items()})
    em.load_state_dict({k: ember.tensor(v) for k, v in values.items()})


def assert_module_state_match(ember_module, torch_module, atol=1e-12):
    esd, tsd = ember_module.state_dict(), torch_module.state_dict()
    assert list(esd) == list(tsd)
    for key, tv in tsd.items():
        ev = esd[key]
        assert str(ev.dtype).split(".")[-1] == str(tv.dtype).split(".")[-1], key
        np.testing.assert_allclose(ev.numpy(), tv.numpy(), rtol=0, atol=atol, err_msg=key)


AVERAGING = {
    "swa": lambda lib: {},
    "swa_buffers": lambda lib: dict(use_buffers=True),
    "ema_multi": lambda lib: dict(multi_avg_fn=lib.get_ema_multi_avg_fn(0.9)),
    "swa_multi": lambda lib: dict(multi_avg_fn=lib.get_swa_multi_avg_fn()),
    "ema_fn": lambda lib: dict(avg_fn=lib.get_ema_avg_fn(0.8)),
    "swa_fn": lambda lib: dict(avg_fn=lib.get_swa_avg_fn()),
    "ema_multi_buffers": lambda lib: dict(multi_avg_fn=lib.get_ema_multi_avg_fn(0.7),
                                          use_buffers=True),
    "ema_fn_buffers": lambda lib: dict(avg_fn=lib.get_ema_avg_fn(0.5), use_buffers=True),
}


@needs_torch
@pytest.mark.parametrize("name", list(AVERAGING))
def test_averaged_model_matches_torch(name):
    rng = np.random.default_rng(0)
    em, tm = ember_net(), torch_net()
    load_both(em, tm, random_state(rng, tm.state_dict()))
    ea = swa_utils.AveragedModel(em, **AVERAGING[name](swa_utils))
    ta = torch.optim.swa_utils.AveragedModel(tm, **AVERAGING[name](torch.optim.swa_utils))
    assert_module_state_match(ea, ta)
    for _ in range(5):
        load_both(em, tm, random_state(rng, tm.state_dict()))
        ea.update_parameters(em)
        ta.update_parameters(tm)
        assert_module_state_match(ea, ta)
    assert ea.n_averaged.item() == 5 and ea.n_averaged.dtype == ember.int64
    # the average is not the last model's weights
    assert not np.allclose(ea.module[0].weight.detach().numpy(), em[0].weight.detach().numpy())
    x = rng.standard_normal((6, 4))
    ea.eval()
    ta.eval()
    np.testing.assert_allclose(ea(ember.tensor(x)).detach().numpy(),
                               ta(torch.tensor(x)).detach().numpy(), rtol=0, atol=1e-12)


def test_equal_weight_average_of_snapshots():
    rng = np.random.default_rng(1)
    model = nn.Linear(3, 2, dtype=ember.float64)
    averaged = swa_utils.AveragedModel(model)
    snapshots = []
    for _ in range(4):
        with ember.no_grad():
            model.weight.copy_(ember.tensor(rng.standard_normal((2, 3))))
        snapshots.append(model.weight.detach().numpy().copy())
        averaged.update_parameters(model)
    np.testing.assert_allclose(averaged.module.weight.detach().numpy(),
                               np.mean(snapshots, axis=0), rtol=1e-12)
    # a copy: changing the model does not change the average until the next update
    with ember.no_grad():
        model.weight.fill_(100.0)
    assert np.abs(averaged.module.weight.detach().numpy()).max() < 10


def test_ema_of_a_constant_sequence_by_hand():
    model = nn.Linear(1, 1, bias=False, dtype=ember.float64)
    ema = swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.5))
    for value in (1.0, 3.0, 3.0):
        with ember.no_grad():
            model.weight.fill_(value)
        ema.update_parameters(model)
    assert ema.module.weight.item() == pytest.approx(2.5)  # 1 -> 2 -> 2.5


def test_buffers_follow_the_model_without_use_buffers():
    model = ember_net()
    averaged = swa_utils.AveragedModel(model)
    model.train()
    model(ember.randn(8, 4, dtype=ember.float64))
    averaged.update_parameters(model)
    np.testing.assert_array_equal(averaged.module[1].running_mean.numpy(),
                                  model[1].running_mean.numpy())
    assert averaged.module[1].num_batches_tracked.item() == 1


def test_averaged_model_errors():
    model = nn.Linear(2, 2)
    with pytest.raises(EmberValueError, match="Only one of avg_fn and multi_avg_fn should "
                                              "be provided"):
        swa_utils.AveragedModel(model, avg_fn=swa_utils.get_swa_avg_fn(),
                                multi_avg_fn=swa_utils.get_swa_multi_avg_fn())
    for fn in (swa_utils.get_ema_avg_fn, swa_utils.get_ema_multi_avg_fn):
        with pytest.raises(EmberValueError, match=r"Invalid decay value 1.5 provided. Please "
                                                  r"provide a value in \[0,1\] range."):
            fn(1.5)
        with pytest.raises(ValueError, match="Invalid decay value -0.1"):
            fn(-0.1)


def test_update_parameters_under_jit_raises_a_clear_error():
    model = nn.Linear(2, 2)
    averaged = swa_utils.AveragedModel(model)

    @ember.jit
    def step(x):
        averaged.update_parameters(model)
        return averaged(x)
    with pytest.raises(TraceError, match="AveragedModel.update_parameters cannot be compiled"):
        step(ember.ones(3, 2))
    assert averaged.n_averaged.item() == 0


# update_bn --------------------------------------------------------------------------
@needs_torch
def test_update_bn_matches_torch():
    rng = np.random.default_rng(2)
    em, tm = ember_net(), torch_net()
    load_both(em, tm, random_state(rng, tm.state_dict()))
    em[1].momentum = tm[1].momentum = 0.3
    em.eval()
    tm.eval()
    batches = [rng.standard_normal((n, 4)) for n in (5, 8, 3)]
    # a bare tensor, an (input, target) tuple and a list: the input is the first item
    ember_loader = [ember.tensor(batches[0]), (ember.tensor(batches[1]), ember.zeros(8)),
                    [ember.tensor(batches[2])]]
    torch_loader = [torch.tensor(batches[0]), (torch.tensor(batches[1]), torch.zeros(8)),
                    [torch.tensor(batches[2])]]
    swa_utils.update_bn(ember_loader, em, device="cpu")
    torch.optim.swa_utils.update_bn(torch_loader, tm, device="cpu")
    assert_module_state_match(em, tm)
    assert em[1].num_batches_tracked.item() == 3
    assert em[1].momentum == 0.3 and not em.training  # both restored
    # the statistics are the plain average over the batches (momentum None)
    h = [b @ em[0].weight.detach().numpy().T + em[0].bias.detach().numpy() for b in batches]
    np.testing.assert_allclose(em[1].running_mean.numpy(), np.mean([x.mean(0) for x in h], 0),
                               rtol=1e-12)


def test_update_bn_without_batchnorm_reads_nothing():
    def loader():
        raise AssertionError("the loader must not be read")
        yield
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    swa_utils.update_bn(loader(), model)


# SWALR ------------------------------------------------------------------------------
SCHEDULES = [
    dict(swa_lr=0.05),
    dict(swa_lr=[0.05, 0.01], anneal_epochs=3, anneal_strategy="linear"),
    dict(swa_lr=0.2, anneal_epochs=0),
    dict(swa_lr=0.01, anneal_epochs=1),
    dict(swa_lr=[0.5, 0.02], anneal_epochs=4),
]


def _sgd(lib, params):
    return lib.SGD([{"params": [params[0]]}, {"params": [params[1]], "lr": 0.3}], lr=0.1)


@needs_torch
@pytest.mark.parametrize("options", SCHEDULES, ids=str)
def test_swalr_matches_torch_and_resumes(options):
    eo = _sgd(optim, [ember.zeros(2, requires_grad=True) for _ in range(2)])
    to = _sgd(torch.optim, [torch.zeros(2, requires_grad=True) for _ in range(2)])
    es, ts = swa_utils.SWALR(eo, **options), torch.optim.swa_utils.SWALR(to, **options)
    assert es.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-15)
    ember_lrs, torch_lrs = [], []
    for i in range(12):
        eo.step()
        to.step()
        es.step()
        ts.step()
        ember_lrs.append(es.get_last_lr())
        torch_lrs.append(ts.get_last_lr())
        if i == 5:
            assert es.state_dict() == ts.state_dict()
            saved = copy.deepcopy((eo.state_dict(), es.state_dict()))
    np.testing.assert_allclose(ember_lrs, torch_lrs, rtol=1e-14)
    swa = options["swa_lr"]
    assert ember_lrs[-1] == pytest.approx(swa if isinstance(swa, list) else [swa, swa])

    # resume from the optimizer's and the scheduler's state dicts (other settings first)
    opt = _sgd(optim, [ember.zeros(2, requires_grad=True) for _ in range(2)])
    resumed = swa_utils.SWALR(opt, swa_lr=0.7, anneal_epochs=9, anneal_strategy="linear")
    opt.load_state_dict(saved[0])
    resumed.load_state_dict(saved[1])
    for expected in ember_lrs[6:]:
        opt.step()
        resumed.step()
        assert resumed.get_last_lr() == expected


def test_swalr_takes_over_from_the_current_rate():
    p = ember.zeros(1, requires_grad=True)
    opt = optim.SGD([p], lr=1.0)
    sched = swa_utils.SWALR(opt, swa_lr=0.1, anneal_epochs=2, anneal_strategy="linear")
    lrs = [sched.get_last_lr()[0]]
    for _ in range(3):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    assert lrs == pytest.approx([1.0, 0.55, 0.1, 0.1])


def test_swalr_in_a_compiled_step():
    check_jit_matches_eager(
        lambda p, lib: lib.SGD(p, lr=0.2, momentum=0.5),
        scheduler=lambda opt: swa_utils.SWALR(opt, swa_lr=0.01, anneal_epochs=3))


def test_swalr_errors():
    opt = _sgd(optim, [ember.zeros(2, requires_grad=True) for _ in range(2)])
    with pytest.raises(OptimizerError, match="anneal_strategy must be one of 'cos' or "
                                             "'linear', instead got exp"):
        swa_utils.SWALR(opt, swa_lr=0.1, anneal_strategy="exp")
    for bad in (-1, 2.5):
        with pytest.raises(OptimizerError, match=f"anneal_epochs must be equal or greater "
                                                 f"than 0, got {bad}"):
            swa_utils.SWALR(opt, swa_lr=0.1, anneal_epochs=bad)
    with pytest.raises(OptimizerError, match=r"swa_lr must have the same length as "
                                             r"optimizer.param_groups. swa_lr has 3 values, "
                                             r"param_groups has 2."):
        swa_utils.SWALR(opt, swa_lr=[0.1, 0.2, 0.3])
    with pytest.raises(TypeError, match="expected an ember.optim.Optimizer"):
        swa_utils.SWALR(object(), swa_lr=0.1)


@needs_torch
def test_a_whole_swa_run_matches_torch():
    """SGD with a cosine schedule, then SWALR and an AveragedModel for the last epochs,
    then update_bn: the PyTorch recipe, step by step."""
    rng = np.random.default_rng(3)
    em, tm = ember_net(), torch_net()
    load_both(em, tm, random_state(rng, tm.state_dict()))
    data = [(rng.standard_normal((8, 4)), rng.standard_normal((8, 2))) for _ in range(4)]
    runs = []
    for lib, model, swa in ((ember, em, swa_utils), (torch, tm, torch.optim.swa_utils)):
        opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=6)
        averaged, swa_sched = swa.AveragedModel(model), swa.SWALR(opt, swa_lr=0.02,
                                                                   anneal_epochs=2)
        for epoch in range(6):
            for x, y in data:
                opt.zero_grad()
                ((model(lib.tensor(x)) - lib.tensor(y)) ** 2).mean().backward()
                opt.step()
            if epoch >= 3:
                averaged.update_parameters(model)
                swa_sched.step()
            else:
                sched.step()
        swa.update_bn([lib.tensor(x) for x, _ in data], averaged)
        runs.append(averaged)
    assert_module_state_match(runs[0], runs[1], atol=1e-10)
