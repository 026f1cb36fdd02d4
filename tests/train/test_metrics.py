"""Metric values against hand computation (scikit-learn's definitions) and PyTorch,
accumulated over several batches."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ember
from ember.train import TrainerError, metrics

T = ember.tensor
# 3 classes, 8 samples. Per class (tp, fp, fn): 0: (2, 1, 1), 1: (1, 1, 1), 2: (2, 1, 1)
TARGET = [0, 0, 0, 1, 1, 2, 2, 2]
PRED = [0, 0, 1, 1, 2, 2, 2, 0]


def _scores(pred, classes=3):
    out = np.full((len(pred), classes), -1.0, np.float32)
    out[np.arange(len(pred)), pred] = 2.0
    return out


def _fed(metric, pred=PRED, target=TARGET):
    scores = _scores(pred)
    for s in (slice(0, 3), slice(3, 8)):  # two batches: the value is over the split
        metric.update(T(scores[s]), T(target[s]))
    return metric.compute()


def test_accuracy_and_binary_thresholds():
    assert _fed(metrics.Accuracy()) == 5 / 8
    acc = metrics.Accuracy()
    acc.update(T([0.2, 0.7, 0.5, 0.1]), T([0, 1, 0, 1]))  # probabilities
    acc.update(T([-3.0, 2.0]), T([0, 0]))  # logits: sigmoid first
    assert acc.compute() == 3 / 6
    acc.reset()
    with pytest.raises(TrainerError, match="no samples were added"):
        acc.compute()


def test_precision_recall_f1_hand_computed():
    p = [2 / 3, 1 / 2, 2 / 3]
    r = [2 / 3, 1 / 2, 2 / 3]
    f1 = [2 * a * b / (a + b) for a, b in zip(p, r)]
    assert _fed(metrics.Precision("macro")) == pytest.approx(np.mean(p))
    assert _fed(metrics.Recall("macro")) == pytest.approx(np.mean(r))
    assert _fed(metrics.F1Score("macro")) == pytest.approx(np.mean(f1))
    for cls in (metrics.Precision, metrics.Recall, metrics.F1Score):  # micro = accuracy
        assert _fed(cls("micro")) == pytest.approx(5 / 8)
    support = np.array([3, 2, 3])
    assert _fed(metrics.F1Score("weighted")) == pytest.approx((np.array(f1) * support).sum() / 8)


def test_unequal_precision_and_recall_and_absent_class():
    # class 1 never predicted: its precision counts 0 (zero_division=0); class 3 only
    # in num_classes: counted in the macro mean only when num_classes is given
    target, pred = [0, 1, 1, 2, 2, 2], [0, 0, 2, 2, 2, 0]
    prec = [1 / 3, 0.0, 2 / 3]  # class 0: tp 1 fp 2; class 2: tp 2 fp 1
    rec = [1.0, 0.0, 2 / 3]
    assert _fed(metrics.Precision("macro"), pred, target) == pytest.approx(np.mean(prec))
    assert _fed(metrics.Recall("macro"), pred, target) == pytest.approx(np.mean(rec))
    m = metrics.Recall("macro", num_classes=4)
    m.update(T(_scores(pred, 4)), T(target))
    assert m.compute() == pytest.approx(sum(rec) / 4)


def test_binary_precision_recall_f1():
    target = T([1, 1, 1, 0, 0, 1])
    probs = T([0.9, 0.4, 0.6, 0.7, 0.1, 0.8])  # pred 1 0 1 1 0 1: tp 3, fp 1, fn 1
    for cls, value in ((metrics.Precision, 3 / 4), (metrics.Recall, 3 / 4),
                       (metrics.F1Score, 3 / 4)):
        m = cls("binary")
        m.update(probs, target)
        assert m.compute() == pytest.approx(value)
        assert m.name == cls._what


def test_top_k_accuracy_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    scores = rng.standard_normal((40, 7)).astype(np.float32)
    target = rng.integers(0, 7, 40)
    m = metrics.TopKAccuracy(k=3)
    m.update(T(scores[:15]), T(target[:15]))
    m.update(T(scores[15:]), T(target[15:]))
    top = torch.from_numpy(scores).topk(3, dim=1).indices.numpy()
    assert m.compute() == pytest.approx((top == target[:, None]).any(1).mean())
    assert m.name == "top3_accuracy"


def test_mse_mae_perplexity_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 10, 3)).astype(np.float32)
    mse, mae = metrics.MeanSquaredError(), metrics.MAE()
    for s in (slice(0, 4), slice(4, 10)):
        mse.update(T(a[s]), T(b[s]))
        mae.update(T(a[s]), T(b[s]))
    ta, tb = torch.from_numpy(a).double(), torch.from_numpy(b).double()
    assert mse.compute() == pytest.approx(torch.nn.functional.mse_loss(ta, tb).item())
    assert mae.compute() == pytest.approx(torch.nn.functional.l1_loss(ta, tb).item())
    logits = rng.standard_normal((4, 5, 11)).astype(np.float32)
    tokens = rng.integers(0, 11, (4, 5))
    tokens[0, :2] = -100
    ppl = metrics.Perplexity(ignore_index=-100)
    ppl.update(T(logits[:1]), T(tokens[:1]))
    ppl.update(T(logits[1:]), T(tokens[1:]))
    nll = torch.nn.functional.cross_entropy(torch.from_numpy(logits).double().reshape(-1, 11),
                                            torch.from_numpy(tokens).reshape(-1),
                                            ignore_index=-100)
    assert ppl.compute() == pytest.approx(math.exp(nll.item()))


def test_metric_state_round_trips_and_errors():
    m = metrics.F1Score("macro")
    _fed(m)
    other = metrics.F1Score("macro")
    other.load_state_dict(m.state_dict())
    assert other.compute() == m.compute()
    with pytest.raises(TrainerError, match="average must be one of"):
        metrics.Precision("samples")
    with pytest.raises(TrainerError, match=r"expected an output of shape \(N, C, ...\)"):
        metrics.Accuracy().update(T([[1.0, 2.0, 3.0]]), T([[0, 1]]))
