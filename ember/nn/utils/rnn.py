"""Variable-length sequences for the recurrent layers: :class:`PackedSequence` and the
functions that pack, pad and unpad batches of sequences, as ``torch.nn.utils.rnn``.

A packed batch keeps only the real time steps: sorted by length (longest first), step
``t`` holds the ``batch_sizes[t]`` sequences that are still running, one row each, and
``data`` is those rows for ``t = 0, 1, ...`` one after the other.

Every function here is one gather (``index_select``) with row indices worked out from
the lengths on the host, so gradients flow through packing and unpacking, and
``ember.jit`` captures them as long as the lengths are known when tracing (a Python
list, or a tensor the traced function did not receive as an input; reading the values
of a traced tensor raises ``DataDependentError``).
"""
from __future__ import annotations

import collections
from typing import Iterable

import numpy as np

from ... import dtypes as dt
from ...autograd import Function
from ...errors import EmberTypeError, EmberValueError, ShapeError
from ...ops.creation import arange, full, tensor, zeros_like
from ...ops.selection import index_select
from ...ops.shape import cat, reshape
from ...tensor import Tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence",
           "pad_packed_sequence", "pad_sequence", "unpad_sequence", "pack_sequence",
           "unpack_sequence"]

_PackedSequenceFields = collections.namedtuple(
    "PackedSequence_", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])


class PackedSequence(_PackedSequenceFields):
    """A batch of variable-length sequences packed for the recurrent layers; made by
    :func:`pack_padded_sequence` or :func:`pack_sequence`, not by hand.

    A named tuple of:

    - ``data`` (sum of lengths, ``*``): the rows of step 0 for every sequence, then those
      of step 1 for the sequences still running, and so on;
    - ``batch_sizes`` (int64, on the CPU): how many sequences run at each step;
    - ``sorted_indices`` (int64 or None): the original batch position of each sorted
      sequence (None when the batch came in sorted);
    - ``unsorted_indices``: its inverse, which puts results back in the original order.

    ``to``, ``cpu``, ``cuda``, ``float``, ``double`` and the other conversions act on
    ``data`` (the indices follow its device; ``batch_sizes`` stays on the CPU).

    >>> packed = pack_sequence([ember.tensor([1, 2, 3]), ember.tensor([4, 5])])
    >>> packed.data, packed.batch_sizes
    (tensor([1, 4, 2, 5, 3]), tensor([2, 2, 1]))
    """

    __slots__ = ()

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:  # PackedSequence((data, batch_sizes), ...)
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise EmberTypeError("PackedSequence: without batch_sizes, data must be a "
                                     f"(data, batch_sizes) pair, got {type(data).__name__}")
            data, batch_sizes = data
        if isinstance(batch_sizes, Tensor) and batch_sizes.device.type != "cpu":
            raise EmberValueError("PackedSequence: batch_sizes should always be on CPU "
                                  f"(got {batch_sizes.device}); make packed batches with "
                                  "pack_sequence or pack_padded_sequence")
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def _with_data(self, data: Tensor) -> "PackedSequence":
        if data is self.data:
            return self

        def follow(t):
            return None if t is None else t.to(data.device)
        return type(self)(data, self.batch_sizes, follow(self.sorted_indices),
                          follow(self.unsorted_indices))

    def to(self, *args, **kwargs) -> "PackedSequence":
        """``data.to(*args, **kwargs)`` in a PackedSequence; self when nothing changes."""
        return self._with_data(self.data.to(*args, **kwargs))

    def cpu(self) -> "PackedSequence":
        """The packed batch with ``data`` on the CPU."""
        return self._with_data(self.data.cpu())

    def cuda(self, device=None) -> "PackedSequence":
        """The packed batch with ``data`` on a CUDA device (see ``Tensor.cuda``)."""
        return self._with_data(self.data.cuda(device))

    def double(self) -> "PackedSequence":
        """``self.to(dtype=ember.float64)``."""
        return self.to(dtype=dt.float64)

    def float(self) -> "PackedSequence":
        """``self.to(dtype=ember.float32)``."""
        return self.to(dtype=dt.float32)

    def half(self) -> "PackedSequence":
        """``self.to(dtype=ember.float16)``."""
        return self.to(dtype=dt.float16)

    def long(self) -> "PackedSequence":
        """``self.to(dtype=ember.int64)``."""
        return self.to(dtype=dt.int64)

    def int(self) -> "PackedSequence":
        """``self.to(dtype=ember.int32)``."""
        return self.to(dtype=dt.int32)

    def short(self) -> "PackedSequence":
        """``self.to(dtype=ember.int16)``."""
        return self.to(dtype=dt.int16)

    def char(self) -> "PackedSequence":
        """``self.to(dtype=ember.int8)``."""
        return self.to(dtype=dt.int8)

    def byte(self) -> "PackedSequence":
        """``self.to(dtype=ember.uint8)``."""
        return self.to(dtype=dt.uint8)

    @property
    def is_cuda(self) -> bool:
        """Whether ``data`` is on a CUDA device."""
        return self.data.is_cuda


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of ``permutation`` (a 1-d int64 tensor): ``out[permutation[i]] = i``;
    None for None. It turns ``sorted_indices`` into ``unsorted_indices``.

    >>> invert_permutation(ember.tensor([2, 0, 1]))
    tensor([1, 2, 0])
    """
    if permutation is None:
        return None
    if not isinstance(permutation, Tensor):
        raise EmberTypeError(f"invert_permutation: expected a Tensor, got "
                             f"{type(permutation).__name__}")
    if permutation.ndim != 1:
        raise ShapeError(f"invert_permutation: expected a 1-d permutation, got shape "
                         f"{tuple(permutation.shape)}")
    positions = arange(permutation.shape[0], dtype=permutation.dtype,
                       device=permutation.device)
    return zeros_like(permutation).scatter(0, permutation, positions)


# Helpers ------------------------------------------------------------------------------
class _SplitRows(Function):
    """Consecutive blocks of rows of ``x`` as one graph node: slicing block by block
    would give each block a backward of ``x``'s full size; here it is one cat."""

    @staticmethod
    def forward(ctx, x, sizes):
        out, start = [], 0
        for size in sizes:
            out.append(x[start:start + size])
            start += size
        return tuple(out)

    @staticmethod
    def backward(ctx, *grads):
        return cat(grads, 0), None


def _split_rows(x: Tensor, sizes) -> tuple:
    """``x`` split along dim 0 into blocks of ``sizes`` rows (which sum to ``len(x)``)."""
    sizes = [int(s) for s in sizes]
    if len(sizes) == 1:
        return (x,)
    if not sizes:
        return ()
    return _SplitRows.apply(x, sizes)


def _lengths(op: str, lengths) -> np.ndarray:
    """``lengths`` (a list, array or 1-d tensor of numbers) as a 1-d int64 array."""
    if isinstance(lengths, Tensor):
        if lengths.ndim != 1:
            raise ShapeError(f"{op}: 'lengths' argument should be a 1D tensor, but got a "
                             f"{lengths.ndim}D tensor of shape {tuple(lengths.shape)}")
        return np.asarray(lengths.tolist(), dtype=np.float64).astype(np.int64)
    try:
        values = np.asarray([float(v) for v in lengths], dtype=np.float64)
    except (TypeError, ValueError):
        raise EmberTypeError(f"{op}: lengths must be a 1-d tensor or a list of ints, got "
                             f"{lengths!r}") from None
    return values.astype(np.int64)


def _sequences(op: str, sequences) -> list:
    """``sequences`` as a list of tensors of at least 1 dim and the same trailing shape."""
    if not isinstance(sequences, Iterable):
        raise EmberTypeError(f"{op}: Expected iterable for input sequences, but got arg of "
                             f"type: {type(sequences)}")
    seqs = list(sequences)
    if not seqs:
        raise EmberValueError(f"{op}: received an empty list of sequences")
    for i, s in enumerate(seqs):
        if not isinstance(s, Tensor):
            raise EmberTypeError(f"{op}: sequence {i} is a {type(s).__name__}, not a Tensor")
        if s.ndim == 0:
            raise ShapeError(f"{op}: each sequence must have at least 1 dim (L x *); "
                             f"sequence {i} is 0-d")
        if tuple(s.shape[1:]) != tuple(seqs[0].shape[1:]):
            raise ShapeError(f"{op}: every sequence must have the trailing shape of the "
                             f"first, {tuple(seqs[0].shape[1:])}; sequence {i} has shape "
                             f"{tuple(s.shape)}")
    return seqs


def _joined(seqs: list, padding_value=None) -> Tensor:
    """The sequences (cast to the first one's dtype) one after another along dim 0, then
    one row of ``padding_value`` when given."""
    first = seqs[0]
    parts = [s if s.dtype == first.dtype else s.to(first.dtype) for s in seqs]
    if padding_value is not None:
        parts.append(full((1,) + tuple(first.shape[1:]), padding_value, dtype=first.dtype,
                          device=first.device))
    return parts[0] if len(parts) == 1 else cat(parts, 0)


def _gather_rows(flat: Tensor, rows: np.ndarray) -> Tensor:
    """``flat[rows]`` (rows of any shape), differentiable."""
    index = tensor(rows.reshape(-1).astype(np.int64), device=flat.device)
    picked = index_select(flat, 0, index)
    return reshape(picked, tuple(rows.shape) + tuple(flat.shape[1:]))


def _step_positions(batch_sizes: np.ndarray) -> tuple:
    """For each packed row, its time step and its position in the sorted batch."""
    steps = np.repeat(np.arange(len(batch_sizes)), batch_sizes)
    starts = np.cumsum(batch_sizes) - batch_sizes
    return steps, np.arange(len(steps)) - np.repeat(starts, batch_sizes)


def _pack_order(op: str, lengths: np.ndarray, enforce_sorted: bool, max_length=None):
    """Checks ``lengths``; returns (sorting order or None, batch sizes)."""
    if enforce_sorted:
        order = None
        if np.any(np.diff(lengths) > 0):
            raise EmberValueError(
                f"{op}: `lengths` array must be sorted in decreasing order when "
                "`enforce_sorted` is True (got lengths "
                f"{lengths.tolist()}). You can pass `enforce_sorted=False` to "
                "pack_padded_sequence and/or pack_sequence to sidestep this requirement if "
                "you do not need ONNX exportability.")
    else:
        order = np.argsort(-lengths, kind="stable")  # ties keep their order
    sorted_lengths = lengths if order is None else lengths[order]
    if sorted_lengths[-1] <= 0:
        raise EmberValueError(f"{op}: Length of all samples has to be greater than 0, but "
                              f"found an element in 'lengths' that is <= 0 (lengths "
                              f"{lengths.tolist()})")
    if max_length is not None and sorted_lengths[0] > max_length:
        raise EmberValueError(f"{op}: lengths must not exceed the padded sequence length "
                              f"{max_length}, got a length of {sorted_lengths[0]}")
    ascending = sorted_lengths[::-1]
    batch_sizes = len(lengths) - np.searchsorted(ascending, np.arange(sorted_lengths[0]),
                                                 side="right")
    return order, batch_sizes


def _packed(data: Tensor, batch_sizes: np.ndarray, order) -> PackedSequence:
    if order is None:
        return PackedSequence(data, tensor(batch_sizes, dtype=dt.int64))
    # both orders from the host (not invert_permutation), so that ember.jit sees constants
    sorted_indices, unsorted_indices = (tensor(o, dtype=dt.int64, device=data.device)
                                        for o in (order, np.argsort(order)))
    return PackedSequence(data, tensor(batch_sizes, dtype=dt.int64), sorted_indices,
                          unsorted_indices)


def _check_tensor(op: str, what: str, value) -> None:
    if not isinstance(value, Tensor):
        raise EmberTypeError(f"{op}: expected {what} to be a Tensor, got "
                             f"{type(value).__name__}")


def _unpacked_layout(op: str, sequence) -> tuple:
    """(batch sizes, start row of each step, sequence lengths and sorted position of
    each sequence, both in the original batch order) of a packed batch."""
    if not isinstance(sequence, PackedSequence):
        raise EmberTypeError(f"{op}: expected a PackedSequence, got "
                             f"{type(sequence).__name__}")
    batch_sizes = _lengths(op, sequence.batch_sizes)
    rows = int(batch_sizes.sum())
    if sequence.data.ndim == 0 or sequence.data.shape[0] != rows:
        raise ShapeError(f"{op}: the batch sizes {batch_sizes.tolist()} add up to {rows} "
                         f"rows, but data has shape {tuple(sequence.data.shape)}")
    batch = int(batch_sizes[0]) if len(batch_sizes) else 0
    sorted_lengths = len(batch_sizes) - np.searchsorted(batch_sizes[::-1], np.arange(batch),
                                                        side="right")
    if sequence.unsorted_indices is None:
        position = np.arange(batch)
    else:
        position = _lengths(op, sequence.unsorted_indices)
    return batch_sizes, np.cumsum(batch_sizes) - batch_sizes, sorted_lengths[position], position


# Public functions ---------------------------------------------------------------------
def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack sequences of different lengths into one tensor, padding them to the longest.

    Args:
        sequences: tensors of shape (L_i, *) with the same trailing dims (cast to the
            first one's dtype).
        batch_first: return (B, T, *) instead of (T, B, *). Default: False.
        padding_value: the value of the padded positions. Default: 0.
        padding_side: ``'right'`` (pad after each sequence) or ``'left'``. Default:
            ``'right'``.

    Shape: (T, B, *) or (B, T, *), with T the longest length and B the number of
    sequences.

    >>> pad_sequence([ember.ones(3), ember.ones(1)], batch_first=True)
    tensor([[1., 1., 1.],
            [1., 0., 0.]])
    """
    op = "pad_sequence"
    seqs = _sequences(op, sequences)
    if padding_side not in ("left", "right"):
        raise EmberValueError(f"{op}: Expected padding_side to be one of left or right, but "
                              f"got {padding_side}.")
    lengths = np.array([s.shape[0] for s in seqs], dtype=np.int64)
    flat = _joined(seqs, padding_value)
    longest = int(lengths.max())
    within = np.arange(longest)[:, None] - (longest - lengths if padding_side == "left" else 0)
    starts = np.cumsum(lengths) - lengths
    rows = np.where((within >= 0) & (within < lengths), starts + within, flat.shape[0] - 1)
    return _gather_rows(flat, rows.T if batch_first else rows)


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch of sequences for a recurrent layer.

    Args:
        input: (T, B, *) padded sequences, or (B, T, *) with ``batch_first``.
        lengths: the length of each sequence (a list or a 1-d tensor; at most T, at
            least 1).
        batch_first: the input is (B, T, *). Default: False.
        enforce_sorted: the sequences must come longest first (``sorted_indices`` is
            then None); with False they are sorted here. Default: True.

    Returns a :class:`PackedSequence`; the positions past each length are left out.

    >>> x = ember.tensor([[1, 2, 0], [3, 0, 0], [4, 5, 6]])
    >>> pack_padded_sequence(x, [2, 1, 3], batch_first=True, enforce_sorted=False).data
    tensor([4, 1, 3, 5, 2, 6])
    """
    op = "pack_padded_sequence"
    _check_tensor(op, "input", input)
    if input.ndim < 2:
        raise ShapeError(f"{op}: input must have at least 2 dims (T x B x * or B x T x * "
                         f"with batch_first), got shape {tuple(input.shape)}")
    lengths = _lengths(op, lengths)
    batch, steps = (input.shape[0], input.shape[1]) if batch_first else \
        (input.shape[1], input.shape[0])
    if input.numel() == 0:
        raise EmberValueError(f"{op}: Cannot pack empty tensors (input of shape "
                              f"{tuple(input.shape)})")
    if len(lengths) != batch:
        raise ShapeError(f"{op}: Expected `len(lengths)` to be equal to batch_size, but got "
                         f"{len(lengths)} (batch_size={batch}, input of shape "
                         f"{tuple(input.shape)})")
    order, batch_sizes = _pack_order(op, lengths, enforce_sorted, steps)
    step, rank = _step_positions(batch_sizes)
    seq = rank if order is None else order[rank]
    rows = seq * steps + step if batch_first else step * batch + seq
    flat = reshape(input, (batch * steps,) + tuple(input.shape[2:]))
    return _packed(_gather_rows(flat, rows), batch_sizes, order)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0, total_length: int | None = None) -> tuple:
    """Unpack a :class:`PackedSequence` into a padded tensor (the inverse of
    :func:`pack_padded_sequence`), sequences back in their original order.

    Args:
        sequence: the packed batch.
        batch_first: return (B, T, *) instead of (T, B, *). Default: False.
        padding_value: the value of the padded positions. Default: 0.
        total_length: pad to this length (at least the longest sequence) instead of the
            longest sequence's.

    Returns ``(padded, lengths)``, ``lengths`` an int64 CPU tensor of B lengths.

    >>> packed = pack_sequence([ember.tensor([1, 2]), ember.tensor([3])])
    >>> pad_packed_sequence(packed, batch_first=True)
    (tensor([[1, 2],
            [3, 0]]), tensor([2, 1]))
    """
    op = "pad_packed_sequence"
    batch_sizes, starts, lengths, position = _unpacked_layout(op, sequence)
    steps = len(batch_sizes)
    if total_length is not None:
        if total_length < steps:
            raise EmberValueError(
                f"{op}: Expected total_length to be at least the length of the longest "
                f"sequence in input, but got total_length={total_length} and max sequence "
                f"length being {steps}")
        steps = int(total_length)
    step = np.arange(steps)[:, None]
    step_start = np.zeros(steps, dtype=np.int64)
    step_start[:len(starts)] = starts
    data = sequence.data
    rows = np.where(step < lengths, step_start[:, None] + position, data.shape[0])
    flat = _joined([data], padding_value)
    padded = _gather_rows(flat, rows.T if batch_first else rows)
    return padded, tensor(lengths, dtype=dt.int64)


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences of shape (L_i, *), as ``pack_padded_sequence`` of
    ``pad_sequence(sequences)`` but without building the padded tensor.

    Args:
        sequences: tensors (L_i, *) with the same trailing dims, longest first unless
            ``enforce_sorted`` is False.
        enforce_sorted: require decreasing lengths. Default: True.

    >>> pack_sequence([ember.tensor([1, 2, 3]), ember.tensor([4, 5]), ember.tensor([6])]).data
    tensor([1, 4, 6, 2, 5, 3])
    """
    op = "pack_sequence"
    seqs = _sequences(op, sequences)
    lengths = np.array([s.shape[0] for s in seqs], dtype=np.int64)
    if np.prod(seqs[0].shape[1:], dtype=np.int64) == 0:
        raise EmberValueError(f"{op}: Cannot pack empty tensors (sequences of shape "
                              f"{tuple(seqs[0].shape)}, ...)")
    order, batch_sizes = _pack_order(op, lengths, enforce_sorted)
    step, rank = _step_positions(batch_sizes)
    seq = rank if order is None else order[rank]
    rows = (np.cumsum(lengths) - lengths)[seq] + step
    return _packed(_gather_rows(_joined(seqs), rows), batch_sizes, order)


def unpack_sequence(packed_sequences: PackedSequence) -> list:
    """The sequences of a :class:`PackedSequence` as a list of tensors (L_i, *), in the
    original order (the inverse of :func:`pack_sequence`).

    >>> unpack_sequence(pack_sequence([ember.tensor([1, 2]), ember.tensor([3])]))
    [tensor([1, 2]), tensor([3])]
    """
    _, starts, lengths, position = _unpacked_layout("unpack_sequence", packed_sequences)
    seq = np.repeat(np.arange(len(lengths)), lengths)
    step = np.arange(len(seq)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    rows = starts[step] + position[seq]
    return list(_split_rows(_gather_rows(packed_sequences.data, rows), lengths))


def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list:
    """The sequences of a padded batch as a list of tensors (L_i, *) (the inverse of
    :func:`pad_sequence`). Unlike PyTorch's, it leaves ``padded_sequences`` as it is.

    Args:
        padded_sequences: (T, B, *), or (B, T, *) with ``batch_first``.
        lengths: the B lengths (a 1-d tensor or a list).
        batch_first: the input is (B, T, *). Default: False.

    >>> unpad_sequence(ember.tensor([[1, 2], [3, 0]]), ember.tensor([2, 1]), batch_first=True)
    [tensor([1, 2]), tensor([3])]
    """
    op = "unpad_sequence"
    _check_tensor(op, "padded_sequences", padded_sequences)
    if padded_sequences.ndim < 2:
        raise ShapeError(f"{op}: padded_sequences must have at least 2 dims, got shape "
                         f"{tuple(padded_sequences.shape)}")
    lengths = _lengths(op, lengths)
    shape = tuple(padded_sequences.shape)
    batch, steps = shape[:2] if batch_first else shape[1::-1]
    if len(lengths) != batch:
        raise EmberValueError(f"{op}: got {len(lengths)} lengths for a batch of {batch} "
                              f"sequences (padded_sequences of shape {shape})")
    lengths = np.clip(lengths, 0, steps)
    seq = np.repeat(np.arange(batch), lengths)
    step = np.arange(len(seq)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    rows = seq * steps + step if batch_first else step * batch + seq
    flat = reshape(padded_sequences, (batch * steps,) + shape[2:])
    return list(_split_rows(_gather_rows(flat, rows), lengths))
