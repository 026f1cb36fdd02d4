"""ember.data.datasets.Digits: the bundled 8×8 digits and their fixed train/test split."""
import hashlib
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.data import DataError, DataLoader
from ember.data.datasets import Digits

NPZ = Path(ember.data.datasets.__file__).with_name("digits.npz")
CLASS_COUNTS = [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]  # scikit-learn's counts


@pytest.fixture(scope="module")
def splits():
    return Digits(train=True), Digits(train=False)


def test_bundled_file():
    with np.load(NPZ, allow_pickle=False) as f:
        images, labels = f["images"], f["labels"]
    assert images.dtype == np.uint8 and images.shape == (1797, 8, 8)
    assert labels.dtype == np.int64 and labels.shape == (1797,)
    assert np.bincount(labels).tolist() == CLASS_COUNTS
    assert images.max() == 16 and images.min() == 0
    assert images.sum() == 561718  # mean pixel 4.884, as load_digits().data.mean()
    # the first image is scikit-learn's well-known zero
    assert images[0, :2].tolist() == [[0, 0, 5, 13, 9, 1, 0, 0], [0, 0, 13, 15, 10, 15, 5, 0]]
    assert labels[:10].tolist() == list(range(10))


def test_sizes_and_items(splits):
    train, test = splits
    assert (len(train), len(test)) == (1438, 359)
    image, label = train[0]
    assert isinstance(image, ember.Tensor) and image.dtype is ember.float32
    assert tuple(image.shape) == (1, 8, 8)
    assert type(label) is int and 0 <= label <= 9
    assert train.data.dtype is ember.uint8 and tuple(train.data.shape) == (1438, 8, 8)
    assert train.targets.dtype is ember.int64 and tuple(train.targets.shape) == (1438,)
    assert train.classes == [str(d) for d in range(10)]
    np.testing.assert_array_equal(image.numpy()[0], train.data[0].numpy() / 16.0)


def test_value_range(splits):
    for ds in splits:
        images = np.stack([ds[i][0].numpy() for i in range(len(ds))])
        assert images.min() == 0.0 and images.max() == 1.0


def test_split_is_stratified_disjoint_and_complete(splits):
    train, test = splits
    test_counts = np.bincount(test.targets.numpy(), minlength=10)
    expected = [int(np.floor(c * 0.2 + 0.5)) for c in CLASS_COUNTS]
    assert test_counts.tolist() == expected
    assert (np.bincount(train.targets.numpy()) + test_counts).tolist() == CLASS_COUNTS
    with np.load(NPZ, allow_pickle=False) as f:
        everything = sorted(img.tobytes() + bytes([lab]) for img, lab in
                            zip(f["images"], f["labels"]))
    rows = sorted(img.tobytes() + bytes([lab]) for ds in splits for img, lab in
                  zip(ds.data.numpy(), ds.targets.numpy()))
    assert rows == everything  # together they are the data set, each image once


def test_split_is_deterministic(splits):
    _, test = splits
    again = Digits(train=False)
    np.testing.assert_array_equal(again.data.numpy(), test.data.numpy())
    digest = hashlib.sha256(test.data.numpy().tobytes() + test.targets.numpy().tobytes())
    assert digest.hexdigest()[:16] == "75e9ed258238f479"  # the same on every machine
    assert test.targets[:10].tolist() == [0, 5, 0, 3, 8, 6, 9, 6, 9, 7]


def test_items_are_copies(splits):
    train, _ = splits
    image, _ = train[3]
    image.fill_(-1.0)
    assert train[3][0].min().item() >= 0.0


def test_test_fraction():
    assert len(Digits(train=False, test_fraction=0.0)) == 0
    assert len(Digits(train=True, test_fraction=1.0)) == 0
    half = Digits(train=False, test_fraction=0.5)
    assert len(half) == sum(int(np.floor(c * 0.5 + 0.5)) for c in CLASS_COUNTS)
    for bad in (-0.1, 1.5):
        with pytest.raises(DataError, match="test_fraction must be in"):
            Digits(test_fraction=bad)


def test_transforms():
    ds = Digits(train=False, transform=lambda x: x * 2 - 1, target_transform=lambda y: y + 10)
    image, label = ds[0]
    assert image.min().item() == -1.0 and label == 10 + Digits(train=False)[0][1]
    assert "Split: test" in repr(ds) and "359" in repr(ds)


def test_loads_in_batches(splits):
    train, _ = splits
    loader = DataLoader(train, batch_size=64, shuffle=True,
                        generator=ember.Generator().manual_seed(0))
    batches = list(loader)
    assert len(batches) == len(loader) == 23
    x, y = batches[0]
    assert tuple(x.shape) == (64, 1, 8, 8) and x.dtype is ember.float32
    assert y.dtype is ember.int64
    assert sum(len(b[1]) for b in batches) == 1438
