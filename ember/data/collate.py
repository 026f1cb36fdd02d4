"""Turning a list of samples into a batch (``default_collate``) and single samples into
tensors (``default_convert``), with PyTorch's rules for each kind of element."""
from __future__ import annotations

import collections.abc
import copy

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, EmberTypeError, ShapeError
from ..ops.creation import as_tensor, tensor
from ..ops.shape import stack
from ..tensor import Tensor

__all__ = ["default_collate", "default_convert"]

_UNSUPPORTED = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
                "or lists; found {}")


def _is_text_array(arr: np.ndarray) -> bool:
    # Strings, bytes and Python objects: NumPy dtype kinds that no tensor can hold.
    return arr.dtype.kind in "SaUO"


def _stack_tensors(batch: list) -> Tensor:
    first = batch[0]
    plain = all(t._dtype is first._dtype and t._device == first._device
                and not t._requires_grad for t in batch)
    if not plain:  # mixed dtypes promote and grads flow, as torch.stack does
        return stack(batch, 0)
    shape = first._data.shape
    for i, t in enumerate(batch):
        if t._data.shape != shape:
            raise ShapeError(f"default_collate: tensors in a batch must have the same shape "
                             f"to be stacked, got {tuple(shape)} at entry 0 and "
                             f"{tuple(t._data.shape)} at entry {i}")
    # One backend stack instead of ember.stack's per-element ops: this runs every batch.
    backend = first._device.backend
    with backend.activate():  # (one of several GPUs: the tensors')
        stacked = backend.xp.stack([t._data for t in batch])
    return Tensor._make(stacked, first._device)


def _rebuild_mapping(elem, values: dict):
    """A mapping of ``elem``'s type holding ``values``; a plain dict if that fails."""
    try:
        if isinstance(elem, collections.abc.MutableMapping):
            clone = copy.copy(elem)
            clone.update(values)
            return clone
        return type(elem)(values)
    except TypeError:
        return values


def _rebuild_sequence(elem, values: list):
    """A sequence of ``elem``'s type holding ``values``; a list if that fails."""
    try:
        if isinstance(elem, collections.abc.MutableSequence):
            clone = copy.copy(elem)
            for i, v in enumerate(values):
                clone[i] = v
            return clone
        return type(elem)(values)
    except TypeError:
        return values


def _kind(x) -> str:
    """The collate rule an element falls under (numbers of any type are one kind)."""
    if isinstance(x, Tensor):
        return "tensor"
    if isinstance(x, np.ndarray):
        return "array"
    if isinstance(x, (bool, int, float, np.bool_, np.number)):
        return "number"
    if isinstance(x, (str, bytes)):
        return "string"
    if isinstance(x, collections.abc.Mapping):
        return "mapping"
    if isinstance(x, collections.abc.Sequence):
        return "sequence"
    return type(x).__name__


def _check_same_kind(batch) -> None:
    first = type(batch[0])
    if first is not dict and all(type(x) is first for x in batch):
        return  # the common case, checked cheaply: one type throughout
    kind = _kind(batch[0])
    for i, x in enumerate(batch):
        if _kind(x) != kind and {kind, _kind(x)} != {"tensor", "array"}:
            raise EmberTypeError(
                f"default_collate: the samples of a batch must have the same structure; "
                f"entry 0 is {type(batch[0]).__name__} and entry {i} is "
                f"{type(x).__name__} (does the dataset return the same kind of sample "
                f"for every index?)")
    if kind == "mapping":
        keys = set(batch[0])
        for i, x in enumerate(batch):
            if set(x) != keys:
                raise EmberTypeError(
                    f"default_collate: the dicts of a batch must have the same keys; entry "
                    f"0 has {sorted(map(str, keys))} and entry {i} has "
                    f"{sorted(map(str, x))}")


def default_collate(batch):
    """Merge a list of samples into a batch, recursively by the samples' structure.

    - tensors are stacked along a new first dim; NumPy arrays become tensors and are
      stacked; NumPy scalars become a 1-D tensor of their dtype;
    - Python floats become a float64 tensor, ints an int64 tensor, bools a bool tensor;
    - strings and bytes are returned as given: the list itself at the top level, a
      tuple when they are a field of tuples, lists or namedtuples;
    - dicts (and other mappings) are collated per key, keeping the mapping's type;
    - namedtuples are collated per field; tuples become lists (as in PyTorch) and other
      sequences keep their type, collated position by position.

    >>> ember.data.default_collate([(ember.zeros(2), 0), (ember.ones(2), 1)])
    [tensor([[0., 0.],
            [1., 1.]]), tensor([0, 1])]
    """
    if not batch:
        raise EmberError("default_collate: an empty batch (no samples to merge)")
    _check_same_kind(batch)
    elem = batch[0]
    if isinstance(elem, Tensor):
        for x in batch:
            if not isinstance(x, Tensor):
                raise EmberTypeError(f"default_collate: a batch mixes tensors with "
                                     f"{type(x).__name__}")
        return _stack_tensors(batch)
    if isinstance(elem, np.ndarray):
        if _is_text_array(elem):
            raise EmberTypeError(_UNSUPPORTED.format(elem.dtype))
        return default_collate([as_tensor(b) for b in batch])
    if isinstance(elem, (np.bool_, np.number)):
        return as_tensor(batch)
    if isinstance(elem, float):
        return tensor(batch, dtype=dt.float64)
    if isinstance(elem, int):  # bools too: a batch of bools gives a bool tensor
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        return _rebuild_mapping(elem, {key: default_collate([d[key] for d in batch])
                                       for key in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple
        return type(elem)(*(default_collate(field) for field in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        sizes = [len(x) for x in batch]
        if len(set(sizes)) > 1:
            raise EmberError(f"default_collate: each element in list of batch should be of "
                             f"equal size, got sizes {sizes}")
        # Columns are tuples, as in PyTorch: a column of strings comes back as a tuple.
        columns = [default_collate(col) for col in zip(*batch)]
        if isinstance(elem, tuple):
            return columns
        return _rebuild_sequence(elem, columns)
    raise EmberTypeError(_UNSUPPORTED.format(type(elem)))


def default_convert(data):
    """Turn NumPy arrays and scalars inside ``data`` into tensors, keeping its structure
    (what the DataLoader applies to each sample when ``batch_size=None``). Tuples become
    lists, as in PyTorch; string arrays and everything else are returned unchanged.

    >>> ember.data.default_convert({"x": np.zeros(2)})
    {'x': tensor([0., 0.], dtype=ember.float64)}
    """
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray):
        return data if _is_text_array(data) else as_tensor(data)
    if isinstance(data, (np.bool_, np.number)):
        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {key: default_convert(data[key]) for key in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data
