"""``StackDataset``: several map-style datasets of one length read side by side, each
sample a tuple (datasets given positionally) or a dict (given by keyword)."""
from __future__ import annotations

from .dataset import Dataset
from .errors import DataError

__all__ = ["StackDataset"]


class StackDataset(Dataset):
    """Datasets of the same length stacked: item ``i`` is
    ``(d[i] for d in datasets)`` as a tuple, or ``{name: d[i]}`` when the datasets are
    given by keyword (not both). Where a dataset has ``__getitems__`` a batch is read
    through it, so the DataLoader's batched reads reach the datasets inside.

    Args:
        *args: datasets, for tuple samples.
        **kwargs: datasets by name, for dict samples.

    >>> images, labels = ember.randn(4, 3), ember.arange(4)
    >>> ds = ember.data.StackDataset(image=images, label=labels)
    >>> sorted(ds[0]), len(ds)
    (['image', 'label'], 4)
    """

    def __init__(self, *args: Dataset, **kwargs: Dataset):
        if args and kwargs:
            raise DataError("StackDataset: Supported either ``tuple``- (via ``args``) or "
                            "``dict``- (via ``kwargs``) like input/output, but both types "
                            "are given.")
        if not args and not kwargs:
            raise DataError("StackDataset: At least one dataset should be passed")
        parts = args or tuple(kwargs.values())
        lengths = [len(d) for d in parts]
        if len(set(lengths)) > 1:
            raise DataError(f"StackDataset: Size mismatch between datasets (lengths "
                            f"{lengths})")
        self._length = lengths[0]
        self.datasets = args if args else kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {name: d[index] for name, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def _column(self, dataset, indices: list) -> list:
        """``dataset``'s samples at ``indices``, batched where it can be."""
        getitems = getattr(dataset, "__getitems__", None)
        if not callable(getitems):
            return [dataset[i] for i in indices]
        items = getitems(indices)
        if len(items) != len(indices):
            raise DataError(f"StackDataset: Nested dataset's output size mismatch. Expected "
                            f"{len(indices)}, got {len(items)}")
        return items

    def __getitems__(self, indices: list) -> list:
        """The samples at ``indices`` (the DataLoader's batched read)."""
        if isinstance(self.datasets, dict):
            columns = {name: self._column(d, indices) for name, d in self.datasets.items()}
            return [{name: column[k] for name, column in columns.items()}
                    for k in range(len(indices))]
        columns = [self._column(d, indices) for d in self.datasets]
        return [tuple(column[k] for column in columns) for k in range(len(indices))]

    def __len__(self) -> int:
        return self._length
