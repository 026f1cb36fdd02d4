"""Metrics accumulated over a whole split: ``update(output, target)`` after each batch,
``compute()`` at the end, ``reset()`` before the next split. Values follow
scikit-learn's definitions (``accuracy_score``, ``precision_recall_fscore_support``
with ``zero_division=0``, ``mean_squared_error``, ...).

Outputs are read as PyTorch's losses read them: class scores ``(N, C)`` (or ``(N, C,
d1, ...)``) against integer targets ``(N,)`` (or ``(N, d1, ...)``); for binary tasks, an
output of the target's shape holding probabilities (or logits, when any value lies
outside [0, 1]) thresholded at ``threshold``, or integer labels.

>>> acc = ember.train.metrics.Accuracy()
>>> acc.update(ember.tensor([[2.0, 1.0], [0.0, 3.0]]), ember.tensor([0, 0]))
>>> acc.compute()
0.5
"""
from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np

from ..tensor import Tensor
from .errors import TrainerError

__all__ = ["Metric", "Accuracy", "TopKAccuracy", "Precision", "Recall", "F1Score",
           "MeanSquaredError", "MeanAbsoluteError", "Perplexity", "MSE", "MAE", "F1"]


def _array(x, owner: str, what: str) -> np.ndarray:
    if isinstance(x, Tensor):
        x = x.detach()
        if x.dtype.is_floating_point and x.dtype.itemsize < 4:
            x = x.float()  # (bfloat16/float16 as float32 for NumPy)
        return x.numpy()
    try:
        arr = np.asarray(x)
    except Exception:
        arr = None
    if arr is None or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TrainerError(f"{owner}.update: {what} must be a tensor or array-like of "
                           f"numbers, got {type(x).__name__}"
                           + ("" if arr is None else f" of dtype {arr.dtype}"))
    return arr


class Metric:
    """Base class: subclasses define :meth:`update`, :meth:`compute` and :meth:`reset`,
    keep their running state in plain numbers or NumPy arrays, and list its attribute
    names in ``_state`` (so :meth:`state_dict` can save it in a checkpoint).

    Attributes:
        name: the name the Trainer logs the value under (after ``train_``/``val_``).
    """

    name = "metric"
    _state: tuple[str, ...] = ()

    def update(self, output, target) -> None:
        """Add one batch's outputs and targets."""
        raise NotImplementedError(f"{type(self).__name__} does not implement update()")

    def compute(self) -> float:
        """The value over every batch added since the last :meth:`reset`."""
        raise NotImplementedError(f"{type(self).__name__} does not implement compute()")

    def reset(self) -> None:
        """Forget every batch added."""
        raise NotImplementedError(f"{type(self).__name__} does not implement reset()")

    def clone(self) -> "Metric":
        """A fresh copy with the same settings (the Trainer keeps one for training and
        one for validation)."""
        other = copy.deepcopy(self)
        other.reset()
        return other

    def state_dict(self) -> dict[str, Any]:
        """The running state as JSON-able values."""
        out = {}
        for key in self._state:
            value = getattr(self, key)
            out[key] = value.tolist() if isinstance(value, np.ndarray) else value
        return out

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state from :meth:`state_dict`."""
        for key in self._state:
            current = getattr(self, key)
            value = state[key]
            setattr(self, key, np.asarray(value, dtype=current.dtype)
                    if isinstance(current, np.ndarray) else value)

    def _empty(self) -> TrainerError:
        return TrainerError(f"{type(self).__name__}.compute: no samples were added; call "
                            "update(output, target) first")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def _class_predictions(output: np.ndarray, target: np.ndarray, threshold: float,
                       owner: str) -> np.ndarray:
    """Predicted labels of the target's shape from scores, probabilities or labels."""
    if output.ndim == target.ndim + 1 and output.ndim > 1 and output.shape[1] == 1:
        output = output[:, 0]  # one score a sample, (N, 1): binary, not one class
    if output.ndim == target.ndim + 1:
        return output.argmax(axis=1 if output.ndim > 1 else 0)
    if output.shape != target.shape:
        raise TrainerError(f"{owner}.update: expected an output of shape (N, C, ...) for "
                           f"targets {target.shape} (class scores), or of the targets' "
                           f"shape (binary), got {output.shape}")
    if np.issubdtype(output.dtype, np.floating):
        if output.size and (output.min() < 0 or output.max() > 1):
            output = 1.0 / (1.0 + np.exp(-output))  # logits
        return (output >= threshold).astype(np.int64)
    return output.astype(np.int64)


def _labels(x: np.ndarray, owner: str) -> np.ndarray:
    if np.issubdtype(x.dtype, np.floating):
        if not np.array_equal(x, np.round(x)):
            raise TrainerError(f"{owner}.update: targets must be integer class labels, got "
                               f"non-integer values of dtype {x.dtype}")
    return x.astype(np.int64)


def _check_classes(target: np.ndarray, classes: int, owner: str) -> None:
    """Raise unless every target indexes one of ``classes`` class scores."""
    if target.size and (target.min() < 0 or target.max() >= classes):
        bad = int(target.min() if target.min() < 0 else target.max())
        hint = (f"; pass ignore_index={bad} if it marks samples to skip (padding)"
                if bad < 0 else "")
        raise TrainerError(f"{owner}.update: target {bad} is out of range for {classes} "
                           f"classes (expected 0 <= target < {classes}){hint}")


def _kept(target: np.ndarray, ignore_index: int | None) -> np.ndarray:
    """A mask of the targets that count (not ``ignore_index``)."""
    if ignore_index is None:
        return np.ones(target.shape, bool)
    return target != ignore_index


class _Fraction(Metric):
    """A share of the samples seen: ``correct / total``, counted by ``update``."""
    _state = ("correct", "total")

    def compute(self) -> float:
        if self.total == 0:
            raise self._empty()
        return self.correct / self.total

    def reset(self) -> None:
        self.correct, self.total = 0, 0


class Accuracy(_Fraction):
    """The fraction of samples whose predicted class is the target.

    Args:
        threshold: for binary outputs (probabilities or logits of the target's shape),
            the probability at and above which a sample is predicted positive.
        ignore_index: a target value that is not counted (padding), as in
            ``cross_entropy``.
    """

    name = "accuracy"

    def __init__(self, threshold: float = 0.5, ignore_index: int | None = None) -> None:
        self.threshold, self.ignore_index = threshold, ignore_index
        self.reset()

    def update(self, output, target) -> None:
        target = _labels(_array(target, "Accuracy", "target"), "Accuracy")
        output = _array(output, "Accuracy", "output")
        keep = _kept(target, self.ignore_index)
        if output.ndim == target.ndim + 1 and output.ndim > 1 and output.shape[1] > 1:
            _check_classes(target[keep], output.shape[1], "Accuracy")
        pred = _class_predictions(output, target, self.threshold, "Accuracy")
        self.correct += int((pred == target)[keep].sum())
        self.total += int(keep.sum())


class TopKAccuracy(_Fraction):
    """The fraction of samples whose target is among the ``k`` highest scores (ties at
    the k-th score count as in, as ``torch.topk`` may pick either).

    Args:
        k: how many of the top scores count.
        ignore_index: a target value that is not counted (padding).
    """

    def __init__(self, k: int = 5, ignore_index: int | None = None) -> None:
        if not isinstance(k, int) or k < 1:
            raise TrainerError(f"TopKAccuracy: k must be a positive int, got {k!r}")
        self.k, self.ignore_index = k, ignore_index
        self.name = f"top{k}_accuracy"
        self.reset()

    def update(self, output, target) -> None:
        target = _labels(_array(target, "TopKAccuracy", "target"), "TopKAccuracy")
        scores = _array(output, "TopKAccuracy", "output")
        if scores.ndim != target.ndim + 1:
            raise TrainerError(f"TopKAccuracy.update: expected class scores (N, C, ...) for "
                               f"targets {target.shape}, got output {scores.shape}")
        scores = np.moveaxis(scores, 1, -1) if scores.ndim > 1 else scores[None]
        if self.k > scores.shape[-1]:
            raise TrainerError(f"TopKAccuracy: k={self.k} exceeds the number of classes "
                               f"{scores.shape[-1]}")
        target = target.reshape(scores.shape[:-1])
        keep = _kept(target, self.ignore_index)
        scores, target = scores[keep], target[keep]
        _check_classes(target, scores.shape[-1], "TopKAccuracy")
        mine = np.take_along_axis(scores, target[:, None], -1)
        higher = (scores > mine).sum(-1)
        self.correct += int((higher < self.k).sum())
        self.total += int(target.size)


_AVERAGES = ("micro", "macro", "weighted", "binary")


class _Confusion(Metric):
    """Per-class true positives, false positives and false negatives, and which labels
    were seen (scikit-learn averages over the labels present in targets or predictions,
    or over ``range(num_classes)`` when that is given)."""

    _state = ("tp", "fp", "fn", "seen")
    _what = ""

    def __init__(self, average: str = "macro", num_classes: int | None = None,
                 pos_label: int = 1, threshold: float = 0.5) -> None:
        owner = type(self).__name__
        if average not in _AVERAGES:
            raise TrainerError(f"{owner}: average must be one of {_AVERAGES}, got "
                               f"{average!r}")
        self.average, self.num_classes = average, num_classes
        self.pos_label, self.threshold = pos_label, threshold
        self.name = f"{self._what}_{average}" if average != "binary" else self._what
        self.reset()

    def reset(self) -> None:
        n = self.num_classes or 0
        self.tp, self.fp, self.fn = (np.zeros(n, np.int64) for _ in range(3))
        self.seen = np.zeros(n, bool)

    def _grow(self, size: int) -> None:
        if size > self.tp.size:
            pad = size - self.tp.size
            self.tp, self.fp, self.fn = (np.concatenate([a, np.zeros(pad, np.int64)])
                                         for a in (self.tp, self.fp, self.fn))
            self.seen = np.concatenate([self.seen, np.zeros(pad, bool)])

    def update(self, output, target) -> None:
        owner = type(self).__name__
        target = _labels(_array(target, owner, "target"), owner).ravel()
        pred = _class_predictions(_array(output, owner, "output"),
                                  target.reshape(np.shape(target)), self.threshold, owner)
        pred = pred.ravel()
        if target.size and min(target.min(), pred.min()) < 0:
            raise TrainerError(f"{owner}.update: class labels must be >= 0")
        top = int(max(target.max(initial=-1), pred.max(initial=-1))) + 1
        if self.num_classes is not None and top > self.num_classes:
            raise TrainerError(f"{owner}.update: label {top - 1} is out of range for "
                               f"num_classes={self.num_classes}")
        self._grow(top)
        n = self.tp.size
        self.tp += np.bincount(target[pred == target], minlength=n)
        self.fp += np.bincount(pred[pred != target], minlength=n)
        self.fn += np.bincount(target[pred != target], minlength=n)
        self.seen[np.unique(np.concatenate([target, pred]))] = True

    @staticmethod
    def _ratio(num, den):
        num, den = np.asarray(num, np.float64), np.asarray(den, np.float64)
        return np.divide(num, den, out=np.zeros_like(num), where=den > 0)

    def _per_class(self, tp, fp, fn):
        raise NotImplementedError

    def compute(self) -> float:
        if not self.seen.any() and self.num_classes is None:
            raise self._empty()
        if self.average == "binary":
            k = self.pos_label
            self._grow(k + 1)
            return float(self._per_class(self.tp[k], self.fp[k], self.fn[k]))
        if self.average == "micro":
            return float(self._per_class(self.tp.sum(), self.fp.sum(), self.fn.sum()))
        labels = np.arange(self.tp.size) if self.num_classes is not None \
            else np.flatnonzero(self.seen)
        values = self._per_class(self.tp[labels], self.fp[labels], self.fn[labels])
        if self.average == "macro":
            return float(values.mean())
        support = (self.tp + self.fn)[labels]
        return float((values * support).sum() / support.sum()) if support.sum() else 0.0


class Precision(_Confusion):
    """``tp / (tp + fp)`` per class, averaged (``"macro"``: the plain mean over
    classes; ``"micro"``: from the summed counts; ``"weighted"``: by each class's
    support; ``"binary"``: of ``pos_label`` alone). A class never predicted counts 0.

    >>> Precision(average="macro")
    """

    _what = "precision"

    def _per_class(self, tp, fp, fn):
        return self._ratio(tp, tp + fp)


class Recall(_Confusion):
    """``tp / (tp + fn)`` per class, averaged as :class:`Precision` says."""

    _what = "recall"

    def _per_class(self, tp, fp, fn):
        return self._ratio(tp, tp + fn)


class F1Score(_Confusion):
    """``2 tp / (2 tp + fp + fn)`` per class (the harmonic mean of precision and
    recall), averaged as :class:`Precision` says."""

    _what = "f1"

    def _per_class(self, tp, fp, fn):
        return self._ratio(2 * np.asarray(tp), 2 * np.asarray(tp) + fp + fn)


class _MeanError(Metric):
    _state = ("total", "count")

    def __init__(self) -> None:
        self.reset()

    def _error(self, diff: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def update(self, output, target) -> None:
        owner = type(self).__name__
        out = _array(output, owner, "output").astype(np.float64)
        tgt = _array(target, owner, "target").astype(np.float64)
        if out.shape != tgt.shape:
            raise TrainerError(f"{owner}.update: output shape {out.shape} and target shape "
                               f"{tgt.shape} differ")
        self.total += float(self._error(out - tgt).sum())
        self.count += int(out.size)

    def compute(self) -> float:
        if self.count == 0:
            raise self._empty()
        return self.total / self.count

    def reset(self) -> None:
        self.total, self.count = 0.0, 0


class MeanSquaredError(_MeanError):
    """The mean of ``(output - target) ** 2`` over every element of the split."""

    name = "mse"

    def _error(self, diff):
        return diff * diff


class MeanAbsoluteError(_MeanError):
    """The mean of ``|output - target|`` over every element of the split."""

    name = "mae"

    def _error(self, diff):
        return np.abs(diff)


class Perplexity(Metric):
    """``exp`` of the mean negative log-likelihood per token, from logits ``(..., C)``
    (the vocabulary last, as a language model gives them) and token ids ``(...)``.

    Args:
        ignore_index: a target id that is not counted (padding).
    """

    name = "perplexity"
    _state = ("nll", "count")

    def __init__(self, ignore_index: int | None = None) -> None:
        self.ignore_index = ignore_index
        self.reset()

    def update(self, output, target) -> None:
        logits = _array(output, "Perplexity", "output").astype(np.float64)
        target = _labels(_array(target, "Perplexity", "target"), "Perplexity")
        if logits.ndim == 0 or logits.shape[:-1] != target.shape:
            raise TrainerError(f"Perplexity.update: expected logits (..., C) for targets "
                               f"{target.shape}, i.e. shape {target.shape + ('C',)}, got "
                               f"{logits.shape}")
        logits = logits.reshape(-1, logits.shape[-1])
        target = target.ravel()
        keep = _kept(target, self.ignore_index)
        logits, target = logits[keep], target[keep]
        _check_classes(target, logits.shape[-1], "Perplexity")
        top = logits.max(-1, keepdims=True)
        log_z = np.log(np.exp(logits - top).sum(-1)) + top[:, 0]
        self.nll += float((log_z - logits[np.arange(target.size), target]).sum())
        self.count += int(target.size)

    def compute(self) -> float:
        if self.count == 0:
            raise self._empty()
        return math.exp(self.nll / self.count)

    def reset(self) -> None:
        self.nll, self.count = 0.0, 0


MSE, MAE, F1 = MeanSquaredError, MeanAbsoluteError, F1Score
