"""The 8×8 handwritten digits (scikit-learn's ``load_digits``), shipped inside ember.

The data is the test set of the UCI "Optical Recognition of Handwritten Digits" data set
(E. Alpaydin and C. Kaynak, 1998; CC BY 4.0), as scikit-learn ships it; see README.md in
this folder for its provenance.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import numpy as np

from ...ops.creation import from_numpy
from ...tensor import Tensor
from ..dataset import Dataset
from ..errors import DataError

__all__ = ["Digits"]

_FILE = Path(__file__).with_name("digits.npz")
_MAX_PIXEL = 16  # pixels count the "on" points of a 4×4 block: 0..16
_HASH_MULTIPLIER = 2654435761  # Knuth's multiplicative hash: a fixed, well-mixed order


def _load() -> tuple[np.ndarray, np.ndarray]:
    with np.load(_FILE, allow_pickle=False) as f:
        return f["images"], f["labels"]


def _test_indices(labels: np.ndarray, test_fraction: float) -> np.ndarray:
    """Per class, the first ``round(count * test_fraction)`` samples in hash order."""
    picked = []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        key = (idx.astype(np.uint64) * np.uint64(_HASH_MULTIPLIER)) % np.uint64(2 ** 32)
        order = idx[np.argsort(key, kind="stable")]
        picked.append(order[:math.floor(len(idx) * test_fraction + 0.5)])
    return np.sort(np.concatenate(picked))


class Digits(Dataset):
    """scikit-learn's 8×8 handwritten digits: 1,797 grey images of the digits 0–9,
    bundled with ember (no download).

    Item ``i`` is ``(image, label)``: a float32 tensor of shape (1, 8, 8) with values
    in [0, 1] (the 0–16 pixel counts divided by 16) and an ``int``. ``transform`` and
    ``target_transform`` are applied to them when given.

    The train/test split is fixed and stratified: from each class, a ``test_fraction``
    share (rounded) goes to the test split, chosen by a fixed hash of the sample's
    index, so it is the same on every machine and version; with the default 0.2 the
    test split has 359 images and the train split 1,438. The two splits are disjoint
    and together hold every image.

    Args:
        train: the train split (True) or the test split (False).
        transform: applied to each image tensor.
        target_transform: applied to each label.
        test_fraction: the share of each class held out for the test split, in [0, 1].

    Attributes:
        data: the images of this split, a uint8 tensor (N, 8, 8) of values 0–16.
        targets: the labels, an int64 tensor (N,).
        classes: the class names ``"0"`` .. ``"9"``.

    >>> ds = ember.data.datasets.Digits(train=True)
    >>> image, label = ds[0]
    >>> len(ds), image.shape
    (1438, ember.Size([1, 8, 8]))
    """

    classes = [str(d) for d in range(10)]

    def __init__(self, train: bool = True, transform: Callable | None = None,
                 target_transform: Callable | None = None, test_fraction: float = 0.2):
        if not 0.0 <= test_fraction <= 1.0:
            raise DataError(f"Digits: test_fraction must be in [0, 1], got {test_fraction}")
        images, labels = _load()
        test = _test_indices(labels, test_fraction)
        if train:
            keep = np.ones(len(labels), dtype=bool)
            keep[test] = False
            rows = np.flatnonzero(keep)
        else:
            rows = test
        self.train = train
        self.test_fraction = test_fraction
        self.transform = transform
        self.target_transform = target_transform
        self.data = from_numpy(np.ascontiguousarray(images[rows]))
        self.targets = from_numpy(np.ascontiguousarray(labels[rows]))
        self._images = (images[rows, None] / np.float32(_MAX_PIXEL)).astype(np.float32)
        self._labels = labels[rows].tolist()

    def __getitem__(self, index: int) -> tuple[Tensor, int]:
        # A copy per item, so a transform that writes in place can't change the dataset.
        image = from_numpy(self._images[index].copy())
        label = self._labels[index]
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return image, label

    def __len__(self) -> int:
        return len(self._labels)

    def __repr__(self) -> str:
        split = "train" if self.train else "test"
        return (f"Dataset Digits\n    Number of datapoints: {len(self)}\n    Split: {split}"
                f" (test_fraction={self.test_fraction})")
