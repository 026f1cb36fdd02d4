"""Review findings for ember.train: resumes that start an epoch afresh, hostile
checkpoint entries, and metrics on edge cases (binary (N, 1) outputs, ignore_index,
targets out of range, non-numeric inputs)."""
from __future__ import annotations

import os
import signal

import numpy as np
import pytest

import ember
from ember.train import TrainerError, find_checkpoints
from ember.train import metrics as M

from .common import assert_identical, build, params

N = 20  # 6 batches an epoch: epoch 3 starts at the 19th batch


def _emergency(dirpath) -> str:
    paths = [p for p in find_checkpoints(dirpath) if "emergency-" in os.path.basename(p)]
    assert len(paths) == 1, paths
    return paths[0]


@pytest.mark.parametrize("generator", [False, True])
def test_emergency_in_an_epochs_first_step_resumes_exactly(tmp_path, generator):
    # The epoch's shuffled order was drawn when its iterator was made, before the step
    # began; the checkpoint must hold the states from before that draw.
    straight = build(N, generator=generator)
    straight.fit()
    with pytest.raises(RuntimeError, match="boom"):
        build(N, fail_at=19, generator=generator, checkpoint_dir=tmp_path).fit()
    resumed = build(N, seed=7, generator=generator, resume_from=_emergency(tmp_path))
    resumed.fit()
    assert_identical(params(resumed.model), params(straight.model))


def test_emergency_mid_accumulation_at_an_epochs_start_resumes_exactly(tmp_path):
    straight = build(6, grad_accumulation_steps=4)  # 2 steps an epoch
    straight.fit()
    with pytest.raises(RuntimeError, match="boom"):  # the 2nd batch of epoch 2's 1st step
        build(6, fail_at=14, grad_accumulation_steps=4, checkpoint_dir=tmp_path).fit()
    resumed = build(6, seed=7, grad_accumulation_steps=4, resume_from=_emergency(tmp_path))
    resumed.fit()
    assert_identical(params(resumed.model), params(straight.model))


def test_sigint_at_an_epochs_start_resumes_exactly(tmp_path, sigint_default):
    class Interrupt(ember.train.Callback):
        def on_epoch_start(self, trainer):
            if trainer.epoch == 2:
                signal.raise_signal(signal.SIGINT)  # held, raised before the first step
    straight = build(N)
    straight.fit()
    with pytest.raises(KeyboardInterrupt):
        build(N, checkpoint_dir=tmp_path, callbacks=[Interrupt()]).fit()
    resumed = build(N, seed=7, resume_from=_emergency(tmp_path))
    resumed.fit()
    assert_identical(params(resumed.model), params(straight.model))


def _set(path, value):
    def change(state):
        node = state
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


@pytest.mark.parametrize("path, value, named", [
    (("loop",), "x", "'loop'"),
    (("loop", "epoch"), "x", "'loop.epoch'"),
    (("loop", "batch"), -3, "'loop.batch'"),
    (("loop", "global_step"), None, "'loop.global_step'"),
    (("loop", "epoch_loss"), 5, "'loop.epoch_loss'"),
    (("rng",), [], "'rng'"),
    (("rng", "python"), [1], "'rng'"),
    (("rng", "ember"), "zz", "'rng'"),
    (("epoch_start_rng",), 1, "'epoch_start_rng'"),
    (("callbacks",), [], "'callbacks'"),
    (("history",), 3, "'history'"),
    (("history", "rows"), [1], "'history'"),
    (("logged",), [1], "'logged'"),
    (("logged", "val_loss"), "low", "'logged.val_loss'"),
    (("train_metrics", "accuracy"), 4, "'train_metrics.accuracy'"),
    (("scheduler",), 7, "'scheduler'"),
    (("callbacks", "EarlyStopping"), {"best": 1}, "'callbacks.EarlyStopping'"),
])
def test_malformed_checkpoint_entries_are_named(tmp_path, path, value, named):
    first = build(5, callbacks=[ember.train.EarlyStopping(patience=50)])
    first.fit()
    state = ember.load(first.save_checkpoint(tmp_path / "good.safetensors"))
    _set(path, value)(state)
    bad = tmp_path / "bad.safetensors"
    ember.save(state, bad)
    resumed = build(N, resume_from=bad, callbacks=[ember.train.EarlyStopping(patience=50)])
    with pytest.raises(TrainerError, match=f"malformed: its entry {named}"):
        resumed.fit()


# Metrics --------------------------------------------------------------------------------

def test_binary_outputs_of_shape_n_by_1_are_thresholded_not_argmaxed():
    logits = ember.tensor([[2.0], [-1.0], [3.0], [-0.5]])
    target = ember.tensor([1, 0, 1, 1])
    acc = M.Accuracy()
    acc.update(logits, target)
    assert acc.compute() == 0.75  # (argmax over one column would predict 0 everywhere)
    f1 = M.F1Score(average="binary")
    f1.update(logits, target)
    assert f1.compute() == pytest.approx(2 * 2 / (2 * 2 + 0 + 1))


def test_accuracy_and_topk_ignore_index_match_the_masked_definition():
    rng = np.random.default_rng(0)
    scores = rng.standard_normal((6, 4, 5)).astype(np.float32)  # (N, C, d1)
    target = rng.integers(0, 4, (6, 5))
    target[0, :3] = target[4, 1] = -100
    keep = target != -100
    acc = M.Accuracy(ignore_index=-100)
    acc.update(ember.tensor(scores), ember.tensor(target))
    assert acc.compute() == (scores.argmax(1) == target)[keep].mean()
    top2 = M.TopKAccuracy(2, ignore_index=-100)
    top2.update(ember.tensor(scores), ember.tensor(target))
    ranks = np.argsort(-np.moveaxis(scores, 1, -1), -1)[..., :2]
    assert top2.compute() == (ranks == target[..., None]).any(-1)[keep].mean()


@pytest.mark.parametrize("metric", [M.Accuracy(), M.TopKAccuracy(2), M.Perplexity()])
@pytest.mark.parametrize("bad", [-100, -1, 3])
def test_targets_out_of_range_are_a_clear_error(metric, bad):
    scores = ember.tensor(np.zeros((3, 3), np.float32))
    with pytest.raises(TrainerError, match=f"target {bad} is out of range for 3 classes"):
        metric.update(scores, ember.tensor([0, bad, 1]))


@pytest.mark.parametrize("metric", [M.Accuracy(), M.MSE(), M.Precision(), M.Perplexity()])
def test_non_numeric_inputs_are_a_clear_error(metric):
    with pytest.raises(TrainerError, match="of numbers"):
        metric.update(np.array(["a", "b"]), ember.tensor([0, 1]))
    with pytest.raises(TrainerError):
        metric.update(ember.tensor(1.0), ember.tensor(1)) if isinstance(metric, M.Perplexity) \
            else metric.update(ember.tensor([[0.5, 0.5]]), np.array(["a"]))
