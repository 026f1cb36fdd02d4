"""``ember.data``: datasets, samplers and the DataLoader (with worker processes and a
resumable state), with the names and behaviour of PyTorch's ``torch.utils.data``, and
a sharded on-disk format for data larger than memory.

>>> ds = ember.data.TensorDataset(ember.randn(8, 3), ember.arange(8))
>>> for x, y in ember.data.DataLoader(ds, batch_size=4, shuffle=True):
...     pass
"""
from . import datasets, text, transforms
from .collate import default_collate, default_convert
from ._workers import WorkerInfo, get_worker_info
from .dataloader import DataLoader
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset,
                      TensorDataset, random_split)
from .errors import DataError, WorkerError
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                      SubsetRandomSampler, WeightedRandomSampler)
from .shards import ShardedDataset, ShardWriter
from .stack_dataset import StackDataset

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset",
           "Subset", "random_split", "default_collate", "default_convert", "DataLoader",
           "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler", "DataError", "WorkerError",
           "WorkerInfo", "get_worker_info", "ShardWriter", "ShardedDataset", "datasets",
           "text", "transforms", "StackDataset"]
