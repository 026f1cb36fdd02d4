"""A sharded on-disk dataset format: samples stored field by field in ``.npy`` files of
``shard_size`` samples each, described by a JSON index, read back through memory maps.

A directory written by :class:`ShardWriter` holds ``index.json`` and, per shard and per
field, one ``.npy`` file whose first dim counts the shard's samples. Nothing is pickled:
files are read with ``np.load(allow_pickle=False)`` and the index is checked before any
file it names is opened.
"""
from __future__ import annotations

import bisect
import json
import numbers
import os
import re
import secrets
from collections import OrderedDict
from typing import Iterator

import numpy as np

from ..errors import EmberIndexError
from ..ops.random import randint
from ..serialization import atomic_write
from ..tensor import Tensor
from ._workers import get_worker_info
from .dataset import Dataset, IterableDataset
from .errors import DataError

__all__ = ["ShardWriter", "ShardedDataset"]

INDEX_NAME = "index.json"
_FORMAT = "ember-shards"
_VERSION = 1
_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\.npy$")
_NUMERIC_KINDS = "biufc"  # bool, ints, unsigned ints, floats, complex: never objects
_SEED_HIGH = 2 ** 63 - 1
_OPEN_SHARDS = 32  # memory maps kept open for random access (each holds a descriptor)


class ShardWriter:
    """Write samples into a sharded dataset directory, for :class:`ShardedDataset`.

    Each sample is a dict of arrays (the fields, by name) or a tuple of arrays; every
    sample has the same fields with the same per-sample shapes and dtypes (NumPy arrays,
    ember tensors or numbers; numeric and bool dtypes only). Every ``shard_size``
    samples become a shard. The index is written last, atomically, when the writer is
    closed: a writer that is killed, or a ``with`` block that raises, leaves the
    directory's previous index (or none) and no index pointing at a partial shard.

    Args:
        directory: where to write (created if missing). A dataset already there is
            replaced when this writer closes.
        shard_size: samples per shard (the last one may hold fewer).

    >>> with ember.data.ShardWriter("/tmp/digits", shard_size=1000) as writer:
    ...     for image, label in samples:                       # doctest: +SKIP
    ...         writer.write({"image": image, "label": label})
    """

    def __init__(self, directory: str | os.PathLike, shard_size: int = 10_000):
        if isinstance(shard_size, bool) or not isinstance(shard_size, numbers.Integral) \
                or shard_size <= 0:
            raise DataError(f"ShardWriter: shard_size should be a positive integer, got "
                            f"{shard_size!r}")
        self.directory = os.fspath(directory)
        os.makedirs(self.directory, exist_ok=True)
        self.shard_size = int(shard_size)
        self._token = secrets.token_hex(4)  # new shard names never clash with old ones
        self._kind: str | None = None
        self._fields: dict[str, tuple] | None = None  # name -> (shape, dtype)
        self._pending: list[dict] = []
        self._shards: list[dict] = []
        self._written: list[str] = []
        self._count = 0
        self._closed = False

    def __enter__(self) -> "ShardWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def _normalise(self, sample) -> dict[str, np.ndarray]:
        if isinstance(sample, dict):
            kind = "dict"
            items = list(sample.items())
            for key, _ in items:
                if not isinstance(key, str):
                    raise DataError(f"ShardWriter.write: field names must be strings, got "
                                    f"{key!r}")
        elif isinstance(sample, (tuple, list)):
            kind = "tuple"
            items = [(str(i), v) for i, v in enumerate(sample)]
        else:
            raise DataError(f"ShardWriter.write: a sample must be a dict or a tuple of "
                            f"arrays, got {type(sample).__name__}")
        arrays = {}
        for name, value in items:
            arr = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
            if arr.dtype.kind not in _NUMERIC_KINDS:
                raise DataError(f"ShardWriter.write: field {name!r} has dtype {arr.dtype}; "
                                "expected a numeric or bool dtype (objects and strings "
                                "cannot be stored without pickle)")
            arrays[name] = arr
        if self._fields is None:
            self._kind = kind
            self._fields = {n: (a.shape, a.dtype) for n, a in arrays.items()}
        elif kind != self._kind or list(arrays) != list(self._fields):
            raise DataError(f"ShardWriter.write: sample {self._count} has fields "
                            f"{list(arrays)} ({kind}); expected {list(self._fields)} "
                            f"({self._kind}) like the first sample")
        for name, arr in arrays.items():
            shape, dtype = self._fields[name]
            if arr.shape != shape or arr.dtype != dtype:
                raise DataError(f"ShardWriter.write: sample {self._count} field {name!r} "
                                f"has shape {arr.shape} and dtype {arr.dtype}; expected "
                                f"shape {shape} and dtype {dtype} like the first sample")
        return arrays

    def write(self, sample) -> None:
        """Add one sample (a dict or tuple of arrays)."""
        if self._closed:
            raise DataError("ShardWriter.write: the writer is closed")
        self._pending.append(self._normalise(sample))
        self._count += 1
        if len(self._pending) == self.shard_size:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        number = len(self._shards)
        files = {}
        for position, name in enumerate(self._fields):
            file_name = f"shard-{self._token}-{number:05d}.{position}.npy"
            stacked = np.stack([sample[name] for sample in self._pending])
            path = os.path.join(self.directory, file_name)
            atomic_write(path, lambda f: np.save(f, stacked, allow_pickle=False))
            self._written.append(path)
            files[name] = file_name
        self._shards.append({"count": len(self._pending), "files": files})
        self._pending = []

    def close(self) -> None:
        """Write the last shard and the index; the dataset is then complete."""
        if self._closed:
            return
        self._flush()
        self._closed = True
        index_path = os.path.join(self.directory, INDEX_NAME)
        previous = _previous_files(index_path)
        fields = {} if self._fields is None else {
            name: {"shape": list(shape), "dtype": dtype.str}
            for name, (shape, dtype) in self._fields.items()}
        index = {"format": _FORMAT, "version": _VERSION, "kind": self._kind or "dict",
                 "fields": fields, "num_samples": self._count, "shards": self._shards}
        text = json.dumps(index, indent=1).encode()
        atomic_write(index_path, text)
        kept = {os.path.basename(p) for p in self._written}
        for name in previous - kept:  # the replaced dataset's shards
            try:
                os.remove(os.path.join(self.directory, name))
            except OSError:
                pass

    def abort(self) -> None:
        """Stop without writing the index, removing the shards this writer wrote."""
        self._closed = True
        for path in self._written:
            try:
                os.remove(path)
            except OSError:
                pass


def _previous_files(index_path: str) -> set:
    try:
        with open(index_path, "rb") as f:
            index = json.loads(f.read())
        return {name for shard in index["shards"] for name in shard["files"].values()
                if isinstance(name, str) and _FILE_NAME.match(name)}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return set()


def _load_index(directory: str) -> dict:
    """The index of ``directory``, checked: every error names what was wrong."""
    path = os.path.join(directory, INDEX_NAME)
    where = f"ShardedDataset: index {path}"
    try:
        with open(path, "rb") as f:
            index = json.loads(f.read())
    except FileNotFoundError:
        raise DataError(f"{where} does not exist; expected a directory written by "
                        "ember.data.ShardWriter") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise DataError(f"{where} is not valid JSON ({e})") from None

    def bad(what: str):
        return DataError(f"{where}: {what}")

    if not isinstance(index, dict) or index.get("format") != _FORMAT:
        raise bad(f"expected a JSON object with format {_FORMAT!r}")
    if index.get("version") != _VERSION:
        raise bad(f"version {index.get('version')!r} is not supported (expected {_VERSION})")
    if index.get("kind") not in ("dict", "tuple"):
        raise bad(f"kind should be 'dict' or 'tuple', got {index.get('kind')!r}")
    fields = index.get("fields")
    if not isinstance(fields, dict):
        raise bad("fields should be an object of name -> {shape, dtype}")
    checked = {}
    for name, spec in fields.items():
        if not isinstance(spec, dict) or not isinstance(spec.get("shape"), list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0
                for d in spec["shape"]):
            raise bad(f"field {name!r} should have a shape of non-negative integers, got "
                      f"{spec!r:.200}")
        try:
            dtype = np.dtype(spec.get("dtype"))
        except (TypeError, ValueError):
            raise bad(f"field {name!r} has an unknown dtype {spec.get('dtype')!r}") from None
        if dtype.kind not in _NUMERIC_KINDS:
            raise bad(f"field {name!r} has dtype {dtype}; expected a numeric or bool dtype")
        checked[name] = (tuple(spec["shape"]), dtype)
    shards = index.get("shards")
    if not isinstance(shards, list):
        raise bad("shards should be a list")
    counts = []
    for i, shard in enumerate(shards):
        if not isinstance(shard, dict):
            raise bad(f"shard {i} should be an object with count and files")
        count = shard.get("count")
        if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
            raise bad(f"shard {i} count should be a positive integer, got {count!r}")
        files = shard.get("files")
        if not isinstance(files, dict) or set(files) != set(checked):
            raise bad(f"shard {i} should name one file per field {sorted(checked)}, got "
                      f"{files!r:.200}")
        for name in files.values():
            if not isinstance(name, str) or not _FILE_NAME.match(name) \
                    or os.path.basename(name) != name:
                raise bad(f"shard {i} names file {name!r}; expected a plain .npy file name "
                          "inside the dataset directory (no paths)")
        counts.append(count)
    if index.get("num_samples") != sum(counts):
        raise bad(f"num_samples is {index.get('num_samples')!r} but the shards hold "
                  f"{sum(counts)} samples")
    return {"kind": index["kind"], "fields": checked, "shards": shards, "counts": counts}


class ShardedDataset(IterableDataset):
    """A dataset written by :class:`ShardWriter`, read through memory maps so it can be
    much larger than memory.

    Iterating streams the samples shard by shard. With ``shuffle``, the shards come in
    a random order and samples pass through a shuffle buffer of ``buffer_size``. In a
    DataLoader with workers, worker ``i`` reads every ``num_workers``-th shard of that
    order. Samples are dicts (or tuples) of NumPy arrays, as they were written.

    It is also map-style: ``len(ds)`` and ``ds[i]`` read any sample; use
    :meth:`map_style` for a DataLoader with ``shuffle=True`` or a sampler.

    Args:
        directory: a directory written by :class:`ShardWriter`.
        shuffle: shuffle shard order and samples within the buffer.
        buffer_size: samples held in the shuffle buffer.
        seed: with a seed, pass ``e`` is shuffled from ``(seed, e)`` where ``e`` is set
            by :meth:`set_epoch` (0 by default). Without one, each pass draws its
            seed: in the main process from ember's default generator, in workers from
            the DataLoader's per-epoch base seed (so the loader's generator or
            ``ember.manual_seed`` makes it repeat).

    >>> ds = ember.data.ShardedDataset("/tmp/digits", shuffle=True, seed=0)  # doctest: +SKIP
    >>> loader = ember.data.DataLoader(ds, batch_size=64, num_workers=2)     # doctest: +SKIP
    """

    def __init__(self, directory: str | os.PathLike, shuffle: bool = False,
                 buffer_size: int = 1000, seed: int | None = None):
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, numbers.Integral) \
                or buffer_size <= 0:
            raise DataError(f"ShardedDataset: buffer_size should be a positive integer, got "
                            f"{buffer_size!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
            raise DataError(f"ShardedDataset: seed should be an integer or None, got {seed!r}")
        self.directory = os.fspath(directory)
        self.shuffle = bool(shuffle)
        self.buffer_size = int(buffer_size)
        self.seed = seed
        self.epoch = 0
        index = _load_index(self.directory)
        self.kind = index["kind"]
        self.fields = index["fields"]
        self._shards = index["shards"]
        self._counts = index["counts"]
        self._ends = list(np.cumsum(self._counts, dtype=np.int64).tolist())
        self._open: OrderedDict[int, dict] = OrderedDict()

    @property
    def num_shards(self) -> int:
        return len(self._shards)

    def set_epoch(self, epoch: int) -> None:
        """Select the shuffle of pass ``epoch`` (with a fixed ``seed``)."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def _shard(self, number: int) -> dict:
        """The memory-mapped arrays of one shard, by field, checked against the index."""
        arrays = self._open.get(number)
        if arrays is not None:
            self._open.move_to_end(number)
            return arrays
        shard, count = self._shards[number], self._counts[number]
        arrays = {}
        for name, (shape, dtype) in self.fields.items():
            path = os.path.join(self.directory, shard["files"][name])
            try:
                arr = np.load(path, mmap_mode="r", allow_pickle=False)
            except FileNotFoundError:
                raise DataError(f"ShardedDataset: shard file {path} named by the index "
                                "is missing") from None
            except (ValueError, OSError) as e:
                raise DataError(f"ShardedDataset: shard file {path} is not a readable "
                                f".npy file of plain data ({e})") from None
            if arr.shape != (count, *shape) or arr.dtype != dtype:
                raise DataError(f"ShardedDataset: shard file {path} holds shape "
                                f"{arr.shape} and dtype {arr.dtype}; the index expects "
                                f"shape {(count, *shape)} and dtype {dtype}")
            arrays[name] = arr
        self._open[number] = arrays
        if len(self._open) > _OPEN_SHARDS:
            self._open.popitem(last=False)
        return arrays

    def _sample(self, arrays: dict, row: int):
        values = {name: np.array(arr[row]) for name, arr in arrays.items()}
        return values if self.kind == "dict" else tuple(values.values())

    def __getitem__(self, index: int):
        n = len(self)
        if isinstance(index, bool) or not isinstance(index, numbers.Integral):
            raise DataError(f"ShardedDataset: index should be an integer, got {index!r}")
        if index < -n or index >= n:
            raise EmberIndexError(f"ShardedDataset: index {index} is out of range for a "
                                  f"dataset of {n} samples")
        index = int(index) % n
        number = bisect.bisect_right(self._ends, index)
        start = self._ends[number - 1] if number else 0
        return self._sample(self._shard(number), index - start)

    def _pass_seed(self) -> int:
        if self.seed is not None:
            return self.seed
        info = get_worker_info()
        if info is not None:
            return info.seed - info.id  # the epoch's base seed: the same in every worker
        return int(randint(0, _SEED_HIGH, ()).item())

    def __iter__(self) -> Iterator:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        order = np.arange(self.num_shards)
        rng = None
        if self.shuffle:
            pass_seed = self._pass_seed()
            order = np.random.default_rng([pass_seed, self.epoch]).permutation(order)
            rng = np.random.default_rng([pass_seed, self.epoch, worker + 1])
        samples = self._stream(order[worker::workers].tolist())
        return samples if rng is None else self._buffered(samples, rng)

    def _stream(self, shard_numbers: list) -> Iterator:
        for number in shard_numbers:
            arrays = self._shard(number)
            for row in range(self._counts[number]):
                yield self._sample(arrays, row)
            self._open.pop(number, None)  # let the mapping go once the shard is read

    def _buffered(self, samples: Iterator, rng: np.random.Generator) -> Iterator:
        buffer = []
        for sample in samples:
            if len(buffer) < self.buffer_size:
                buffer.append(sample)
                continue
            j = int(rng.integers(len(buffer)))
            yield buffer[j]
            buffer[j] = sample
        for j in rng.permutation(len(buffer)).tolist():
            yield buffer[j]

    def map_style(self) -> Dataset:
        """This dataset as a map-style :class:`Dataset` (``__len__``/``__getitem__``),
        for a DataLoader that shuffles by index or takes a sampler."""
        return _MapStyle(self)

    def __repr__(self) -> str:
        return (f"ShardedDataset({self.directory!r}, samples={len(self)}, "
                f"shards={self.num_shards}, fields={list(self.fields)})")


class _MapStyle(Dataset):
    def __init__(self, shards: ShardedDataset):
        self.shards = shards

    def __len__(self) -> int:
        return len(self.shards)

    def __getitem__(self, index):
        return self.shards[index]
