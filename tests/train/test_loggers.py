"""CSV, JSON-lines and TensorBoard logs (read back with TensorBoard's own loader), the
progress display and plot_history."""
from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

import ember
from ember.train import CSVLogger, JSONLLogger, Trainer, metrics, plot_history

from .common import F, loader, model


def _fit(loggers=(), **kwargs):
    ember.manual_seed(0)
    net = model()
    kwargs.setdefault("progress_bar", False)
    trainer = Trainer(net, ember.optim.SGD(net.parameters(), lr=0.1), F.cross_entropy,
                      train_loader=loader(batch_size=16), val_loader=loader(shuffle=False),
                      max_epochs=2, log_every_n_steps=1, loggers=list(loggers),
                      metrics=[metrics.Accuracy()], hparams={"hidden": 16}, **kwargs)
    trainer.fit()
    return trainer


def test_csv_and_jsonl_hold_the_history(tmp_path):
    trainer = _fit([CSVLogger(tmp_path / "csv"), JSONLLogger(tmp_path / "jsonl")])
    with open(tmp_path / "csv" / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["train_loss_step"]) for r in rows if r["train_loss_step"]] == \
        trainer.history["train_loss_step"]
    assert [float(r["val_accuracy"]) for r in rows if r["val_accuracy"]] == \
        trainer.history["val_accuracy"]
    lines = [json.loads(line) for line in open(tmp_path / "jsonl" / "metrics.jsonl")]
    assert lines[0]["hparams"]["hidden"] == 16 and lines[0]["hparams"]["optimizer"] == "SGD"
    assert [r["val_loss"] for r in lines if "val_loss" in r] == trainer.history["val_loss"]
    assert json.load(open(tmp_path / "csv" / "hparams.json"))["lr"] == 0.1


def test_tensorboard_round_trip(tmp_path):
    pytest.importorskip("tensorboardX")
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing."
                                            "event_accumulator")
    trainer = _fit([ember.train.TensorBoardLogger(tmp_path)])
    acc = event_accumulator.EventAccumulator(str(tmp_path), size_guidance={"scalars": 0,
                                                                             "histograms": 0})
    acc.Reload()
    tags = acc.Tags()
    steps, values = trainer.history.series("val_loss")
    events = acc.Scalars("val_loss")
    assert [e.step for e in events] == steps
    np.testing.assert_allclose([e.value for e in events], values, rtol=1e-6)
    assert len(acc.Scalars("train_loss_step")) == 6
    assert "weights/0.weight" in tags["histograms"] and "grads/3.bias" in tags["histograms"]
    hist = acc.Histograms("weights/0.weight")[-1]
    w = trainer.model[0].weight.detach().numpy()
    assert hist.step == 6 and hist.histogram_value.num == w.size
    assert hist.histogram_value.min == pytest.approx(float(w.min()))
    assert hist.histogram_value.sum == pytest.approx(float(w.sum()), rel=1e-4)
    content = acc.PluginTagToContent("hparams")
    assert content and b"hidden" in b"".join(content.values())


def test_progress_bar_and_plain_fallback(monkeypatch, capsys):
    from ember.train import progress
    out = io.StringIO()
    bar = progress.ProgressBar(True, file=out)
    bar._tqdm = None  # as without tqdm
    monkeypatch.setattr(progress, "_PRINT_SECONDS", 0.0)
    bar.start_epoch(0, 4)
    bar.update(16, {"loss": 0.5})
    bar.summary({"val_accuracy": 0.75})
    text = out.getvalue()
    assert "epoch 0 step 1/4 loss 0.5" in text and "samples/s ETA" in text
    assert "val_accuracy 0.75" in text
    pytest.importorskip("tqdm")
    _fit(progress_bar=True)
    err = capsys.readouterr().err
    assert "epoch 1" in err and "samples/s" in err and "3/3" in err


def test_plot_history_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    trainer = _fit()
    path = plot_history(trainer.history, tmp_path / "curves.png")
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    from ember.train.plotting import _panels
    assert _panels(trainer.history) == {
        "loss": ["train_loss_step", "train_loss", "val_loss"],
        "accuracy": ["train_accuracy", "val_accuracy"]}
