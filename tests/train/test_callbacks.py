"""Callback order, EarlyStopping, ModelCheckpoint (every N, keep last K, best), and
LearningRateMonitor."""
from __future__ import annotations

import os

import pytest

import ember
from ember.train import (Callback, EarlyStopping, ModelCheckpoint, Trainer, TrainerError,
                         read_checkpoint)

from .common import F, Recorder, loader, model


def _trainer(**kwargs):
    ember.manual_seed(0)
    net = model()
    kwargs.setdefault("progress_bar", False)
    return Trainer(net, ember.optim.SGD(net.parameters(), lr=0.1), F.cross_entropy,
                   train_loader=loader(batch_size=16), **kwargs)  # 3 steps an epoch


def test_hooks_run_in_order():
    rec = Recorder()
    trainer = _trainer(val_loader=loader(shuffle=False), max_epochs=2, eval_every_n_steps=2,
                       callbacks=[rec])
    trainer.fit()
    names = [c[0] for c in rec.calls]
    step = ["on_step_start", "on_step_end"]
    val = ["on_validation_start", "on_validation_end"]
    assert names == (["on_train_start", "on_epoch_start"] + step + step + val + step + val
                     + ["on_epoch_end", "on_epoch_start"] + step + val + step + step + val
                     + val + ["on_epoch_end", "on_train_end"])
    ends = [(s, e) for n, s, e in rec.calls if n == "on_step_end"]
    assert ends == [(1, 0), (2, 0), (3, 0), (4, 1), (5, 1), (6, 1)]


def test_on_exception_sees_the_error():
    seen = []

    class Boom(Callback):
        def on_step_end(self, trainer):
            raise ValueError("callback failed")

        def on_exception(self, trainer, exc):
            seen.append(exc)
    with pytest.raises(ValueError, match="callback failed"):
        _trainer(callbacks=[Boom()]).fit()
    assert len(seen) == 1 and isinstance(seen[0], ValueError)


class Scripted(Callback):
    """Logs a scripted 'score' at each validation, before EarlyStopping reads it."""

    def __init__(self, values):
        self.values = list(values)

    def on_validation_end(self, trainer):
        trainer.log({"score": self.values.pop(0)})


def test_early_stopping_stops_at_the_expected_epoch():
    # best 0.5 at epoch 1; then 0.55, 0.5 (not better by min_delta), 0.49 (neither) -> stop
    scores = [1.0, 0.5, 0.55, 0.5, 0.49, 0.1, 0.1]
    stop = EarlyStopping("score", mode="min", patience=3, min_delta=0.02)
    trainer = _trainer(val_loader=loader(shuffle=False), max_epochs=7,
                       callbacks=[Scripted(scores), stop])
    trainer.fit()
    assert stop.stopped_epoch == 4 and trainer.epoch == 5
    assert stop.best == 0.5 and stop.wait == 3
    assert trainer.history["score"] == scores[:5]


def test_early_stopping_max_mode_and_real_metric():
    stop = EarlyStopping("score", mode="max", patience=1)
    trainer = _trainer(val_loader=loader(shuffle=False), max_epochs=9,
                       callbacks=[Scripted([0.1, 0.3, 0.2, 0.9]), stop])
    trainer.fit()
    assert stop.stopped_epoch == 2
    with pytest.raises(TrainerError, match=r"monitor='val_acc' was not logged; logged "
                                           r"names are \['train_loss', 'val_loss'\]"):
        _trainer(val_loader=loader(shuffle=False), callbacks=[EarlyStopping("val_acc")]).fit()


def test_model_checkpoint_keep_last_k_and_best(tmp_path):
    scores = [0.9, 0.4, 0.6, 0.3, 0.5]
    ckpt = ModelCheckpoint(tmp_path, every_n_steps=2, keep_last_k=2, monitor="score",
                           mode="min", save_best=True)
    trainer = _trainer(val_loader=loader(shuffle=False), max_epochs=5,
                       callbacks=[Scripted(scores), ckpt])
    trainer.fit()  # 15 steps; periodic at 2, 4, ..., 14
    files = sorted(os.listdir(tmp_path))
    assert files == ["best-epoch=3-step=12.safetensors", "epoch=3-step=12.safetensors",
                     "epoch=4-step=14.safetensors"]
    assert ckpt.best_score == 0.3
    best = read_checkpoint(tmp_path / "best-epoch=3-step=12.safetensors")
    assert best["loop"]["global_step"] == 12 and best["logged"]["score"] == 0.3
    # (step 12 is epoch 3's last: saved after the step, before the epoch's end)
    loop = read_checkpoint(tmp_path / "epoch=3-step=12.safetensors")["loop"]
    assert (loop["epoch"], loop["batch"]) == (3, 3)
    assert ckpt.saved == [str(tmp_path / "epoch=3-step=12.safetensors"),
                          str(tmp_path / "epoch=4-step=14.safetensors")]


def test_model_checkpoint_every_n_epochs_and_state_resumes(tmp_path):
    ckpt = ModelCheckpoint(every_n_epochs=2)
    trainer = _trainer(max_epochs=4, checkpoint_dir=tmp_path, callbacks=[ckpt])
    trainer.fit()
    assert sorted(os.listdir(tmp_path)) == ["epoch=2-step=6.safetensors",
                                            "epoch=4-step=12.safetensors"]
    again = ModelCheckpoint(every_n_epochs=2)
    _trainer(max_epochs=5, checkpoint_dir=tmp_path, callbacks=[again],
             resume_from="latest").fit()
    assert again.saved == ckpt.saved  # its state came back from the checkpoint
    with pytest.raises(TrainerError, match="no folder to save in"):
        _trainer(callbacks=[ModelCheckpoint(every_n_steps=1)]).fit()


def test_learning_rate_monitor_per_group():
    net = model()
    opt = ember.optim.SGD([{"params": net[0].parameters()},
                           {"params": net[3].parameters(), "lr": 0.01}], lr=0.1)
    sched = ember.optim.lr_scheduler.ExponentialLR(opt, gamma=0.5)
    mon = ember.train.LearningRateMonitor(logging_interval="epoch")
    Trainer(net, opt, F.cross_entropy, train_loader=loader(batch_size=16), max_epochs=3,
            scheduler=sched, scheduler_interval="epoch", callbacks=[mon],
            progress_bar=False).fit()
    assert [v for _, v in mon.lrs] == [
        {"lr/group0": 0.1, "lr/group1": 0.01}, {"lr/group0": 0.05, "lr/group1": 0.005},
        {"lr/group0": 0.025, "lr/group1": 0.0025}]
