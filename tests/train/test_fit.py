"""Trainer.fit / evaluate / predict: learning, accumulation, clipping, schedulers,
compile, and the errors for bad losses."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ember
from ember.train import NonFiniteLossError, Trainer, TrainerError, metrics

from .common import F, dataset, loader, model, nn, params

Digits = ember.data.datasets.Digits


def test_fit_on_digits_reaches_known_accuracy():
    ember.manual_seed(0)
    train = ember.data.DataLoader(Digits(train=True), batch_size=64, shuffle=True)
    val = ember.data.DataLoader(Digits(train=False), batch_size=128)
    net = nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = ember.optim.Adam(net.parameters(), lr=3e-3)
    trainer = Trainer(net, opt, F.cross_entropy, train_loader=train, val_loader=val,
                      max_epochs=5, metrics=[metrics.Accuracy()], progress_bar=False, seed=0)
    history = trainer.fit()
    assert trainer.global_step == 5 * len(train) and trainer.epoch == 5
    accs = history["val_accuracy"]
    assert len(accs) == 5 and accs[-1] >= 0.9, accs
    assert history["val_loss"][-1] < history["val_loss"][0]
    # evaluate() agrees with an independent count over the same split
    out = trainer.predict(val)
    assert tuple(out.shape) == (359, 10)
    acc = (out.numpy().argmax(1) == Digits(train=False).targets.numpy()).mean()
    assert trainer.evaluate(val)["val_accuracy"] == pytest.approx(acc)
    assert trainer.evaluate(val)["val_accuracy"] == pytest.approx(accs[-1])


def _sgd_run(accum, batch_size, clip=None, clip_value=None, steps=3):
    ember.manual_seed(0)
    net = model(dropout=0.0)
    opt = ember.optim.SGD(net.parameters(), lr=0.1)
    trainer = Trainer(net, opt, F.cross_entropy, train_loader=loader(batch_size=batch_size,
                                                                      shuffle=False),
                      max_steps=steps, grad_accumulation_steps=accum, grad_clip_norm=clip,
                      grad_clip_value=clip_value, progress_bar=False)
    trainer.fit()
    return net


def test_grad_accumulation_equals_large_batch():
    big, small = params(_sgd_run(1, 16)), params(_sgd_run(4, 4))
    for k in big:
        np.testing.assert_allclose(small[k], big[k], rtol=1e-5, atol=1e-6)
    # and differs from not accumulating (the test can fail)
    plain = params(_sgd_run(1, 4))
    assert not np.allclose(plain["0.weight"], big["0.weight"], atol=1e-6)


def test_accumulation_leftover_batches_make_a_last_step():
    ember.manual_seed(0)
    net = model()
    trainer = Trainer(net, ember.optim.SGD(net.parameters(), lr=0.1), F.cross_entropy,
                      train_loader=loader(batch_size=8), max_epochs=2,
                      grad_accumulation_steps=4, progress_bar=False)
    trainer.fit()  # 6 batches an epoch: steps of 4 and 2
    assert trainer.global_step == 4


def test_grad_clip_norm_and_value_match_manual_clipping():
    ember.manual_seed(0)
    net = model(dropout=0.0)
    ref = model(dropout=0.0)
    ref.load_state_dict(net.state_dict())
    x, y = dataset()[:8]
    opt = ember.optim.SGD(ref.parameters(), lr=0.5)
    opt.zero_grad()
    F.cross_entropy(ref(x), y).backward()
    norm = float(nn.utils.get_total_norm([p.grad for p in ref.parameters()]))
    assert norm > 0.05  # so clipping to 0.05 changes the step
    nn.utils.clip_grad_norm_(ref.parameters(), 0.05)
    opt.step()
    data = ember.data.TensorDataset(x, y)
    Trainer(net, ember.optim.SGD(net.parameters(), lr=0.5), F.cross_entropy,
            train_loader=loader(data, shuffle=False), max_steps=1, grad_clip_norm=0.05,
            progress_bar=False).fit()
    for (k, a), b in zip(net.state_dict().items(), ref.state_dict().values()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, err_msg=k)
    # by value: every update is at most lr * clip
    before = params(net)
    Trainer(net, ember.optim.SGD(net.parameters(), lr=1.0), F.cross_entropy,
            train_loader=loader(data, shuffle=False), max_steps=1, grad_clip_value=1e-3,
            progress_bar=False).fit()
    moved = max(np.abs(params(net)[k] - before[k]).max() for k in before)
    assert 0 < moved <= 1e-3 + 1e-7


@pytest.mark.parametrize("interval", ["step", "epoch"])
def test_scheduler_steps_per_step_or_epoch(interval):
    ember.manual_seed(0)
    net = model()
    opt = ember.optim.SGD(net.parameters(), lr=1.0)
    sched = ember.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    lrs = ember.train.LearningRateMonitor()
    trainer = Trainer(net, opt, F.cross_entropy, train_loader=loader(), max_epochs=2,
                      scheduler=sched, scheduler_interval=interval, callbacks=[lrs],
                      progress_bar=False)
    trainer.fit()  # 6 steps an epoch
    used = [v["lr"] for _, v in lrs.lrs]
    if interval == "step":
        assert used == [0.5 ** i for i in range(12)]
        assert opt.param_groups[0]["lr"] == 0.5 ** 12
    else:
        assert used == [1.0] * 6 + [0.5] * 6
        assert opt.param_groups[0]["lr"] == 0.25
    assert trainer.history["lr"] == used


def test_compile_matches_eager():
    runs = []
    for compiled in (False, True):
        ember.manual_seed(0)
        net = model(dropout=0.2)
        opt = ember.optim.AdamW(net.parameters(), lr=0.01)
        sched = ember.optim.lr_scheduler.StepLR(opt, 3, 0.5)
        trainer = Trainer(net, opt, F.cross_entropy, train_loader=loader(), max_epochs=2,
                          grad_clip_norm=1.0, scheduler=sched, compile=compiled,
                          log_every_n_steps=1, metrics=[metrics.Accuracy()],
                          progress_bar=False, seed=3)
        trainer.fit()
        runs.append((params(net), trainer.history["train_loss_step"],
                     trainer.history["train_accuracy"], trainer))
    (pe, le, ae, _), (pc, lc, ac, tc) = runs
    np.testing.assert_allclose(lc, le, rtol=1e-5)
    assert ac == ae
    for k in pe:
        np.testing.assert_allclose(pc[k], pe[k], rtol=1e-5, atol=1e-6, err_msg=k)
    assert len(tc._compiled["step"].retraces) <= 2  # (not one trace per step)


def test_compile_with_accumulation_matches_eager():
    runs = []
    for compiled in (False, True):
        ember.manual_seed(0)
        net = model(dropout=0.0)
        trainer = Trainer(net, ember.optim.Adam(net.parameters(), lr=0.01), F.cross_entropy,
                          train_loader=loader(shuffle=False), max_epochs=1,
                          grad_accumulation_steps=4, compile=compiled, progress_bar=False)
        trainer.fit()
        runs.append(params(net))
    for k in runs[0]:
        np.testing.assert_allclose(runs[1][k], runs[0][k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_non_scalar_loss_is_a_clear_error():
    net = model()
    trainer = Trainer(net, ember.optim.SGD(net.parameters(), lr=0.1),
                      lambda out, y: F.cross_entropy(out, y, reduction="none"),
                      train_loader=loader(), max_steps=1, progress_bar=False)
    with pytest.raises(TrainerError, match=r"loss_fn returned a loss of shape \(8,\); "
                                           r"expected a scalar"):
        trainer.fit()


def test_batch_that_is_not_a_pair_is_a_clear_error():
    net = model()
    ds = ember.data.TensorDataset(ember.randn(8, 6))
    trainer = Trainer(net, ember.optim.SGD(net.parameters(), lr=0.1), F.cross_entropy,
                      train_loader=ember.data.DataLoader(ds, batch_size=4), progress_bar=False)
    with pytest.raises(TrainerError, match="must be a pair .inputs, targets., got a list of "
                                           "length 1"):
        trainer.fit()


def test_nan_loss_stops_naming_the_step():
    net = model()
    calls = []

    def step(m, batch):
        calls.append(1)
        loss = F.cross_entropy(m(batch[0]), batch[1])
        return loss * math.nan if len(calls) == 4 else loss
    trainer = Trainer(net, ember.optim.SGD(net.parameters(), lr=0.1), training_step=step,
                      train_loader=loader(), max_epochs=3, progress_bar=False)
    before = None

    class Snapshot(ember.train.Callback):
        def on_step_end(self, trainer):
            nonlocal before
            before = params(net)
    trainer.callbacks.append(Snapshot())
    with pytest.raises(NonFiniteLossError, match=r"the loss is nan at step 3 \(epoch 0, "
                                                 r"batch 3 of the epoch\)") as info:
        trainer.fit()
    assert info.value.step == 3 and trainer.global_step == 3
    for k, v in params(net).items():  # the bad step was not applied
        assert np.array_equal(v, before[k])


def test_bad_arguments_are_named():
    net = model()
    opt = ember.optim.SGD(net.parameters(), lr=0.1)
    with pytest.raises(TrainerError, match="give loss_fn"):
        Trainer(net, opt)
    with pytest.raises(TrainerError, match="max_steps must be a positive int"):
        Trainer(net, opt, F.cross_entropy, max_steps=0)
    with pytest.raises(TrainerError, match="scheduler_interval must be 'step' or 'epoch'"):
        Trainer(net, opt, F.cross_entropy, scheduler_interval="batch")
    with pytest.raises(TrainerError, match="model must be an ember.nn.Module"):
        Trainer(lambda x: x, opt, F.cross_entropy)


def test_autocast_runs_the_forward_in_low_precision():
    amp = pytest.importorskip("ember.amp")
    seen = []

    def step(m, batch):
        out = m(batch[0])
        seen.append(out.dtype)
        return F.cross_entropy(out, batch[1])
    ember.manual_seed(0)
    net = model(dropout=0.0)
    trainer = Trainer(net, ember.optim.Adam(net.parameters(), lr=0.01), training_step=step,
                      train_loader=loader(), max_epochs=3, autocast_dtype=ember.bfloat16,
                      grad_scaler=amp.GradScaler(), progress_bar=False)
    trainer.fit()
    assert seen[0] is ember.bfloat16 and net[0].weight.dtype is ember.float32
    losses = trainer.history["train_loss"]
    assert losses[-1] < losses[0]


def test_lbfgs_trains_through_its_closure_as_a_manual_loop():
    ember.manual_seed(0)
    net = model(dropout=0.0)
    start = params(net)
    opt = ember.optim.LBFGS(net.parameters(), lr=0.5, max_iter=4)
    trainer = Trainer(net, opt, F.cross_entropy, train_loader=loader(shuffle=False),
                      max_epochs=1, progress_bar=False)
    trainer.fit()
    manual = model(dropout=0.0)
    manual.load_state_dict({k: ember.from_numpy(v) for k, v in start.items()})
    opt2 = ember.optim.LBFGS(manual.parameters(), lr=0.5, max_iter=4)
    for x, y in loader(shuffle=False):
        def closure():
            opt2.zero_grad()
            loss = F.cross_entropy(manual(x), y)
            loss.backward()
            return loss
        opt2.step(closure)
    got, want = params(net), params(manual)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-6, atol=1e-7)
    assert not np.allclose(got["0.weight"], start["0.weight"])
    with pytest.raises(TrainerError, match="LBFGS evaluates the loss again"):
        Trainer(net, opt, F.cross_entropy, train_loader=loader(), compile=True)
