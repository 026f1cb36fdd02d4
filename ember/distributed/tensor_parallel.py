"""Tensor parallelism in the Megatron-LM pattern: one layer's weight split across the
ranks of a group, the activations between layers replicated.

- :class:`ColumnParallelLinear` holds a block of the weight's *rows* (output features):
  its input is replicated, its output is this rank's slice (or all of it, gathered);
- :class:`RowParallelLinear` holds a block of the weight's *columns* (input features):
  it takes this rank's slice of its input and all-reduces the partial products;
- :class:`VocabParallelEmbedding` holds a block of the vocabulary: each rank looks up the
  tokens it owns, zeros the rest, and the results are all-reduced.

A column-parallel layer followed by a row-parallel one (the MLP; attention with its heads
split) costs one all-reduce forward and one backward. Parameters that are not split
(LayerNorm, biases of row-parallel layers, positions) are replicated, and because every
rank computes the same replicated activations their gradients agree without
communication.

Built fresh, each layer initialises the *full* weight as the unsplit layer would (same
random stream, so give every rank of the group the same seed) and keeps its slice; a
model built this way, or split with :func:`parallelize_gpt`, equals the unsplit model.
"""
from __future__ import annotations

import copy

import numpy as np

from .. import nn
from ..models.gpt import merge_heads, split_heads
from ..nn import functional as F
from ..ops.creation import tensor as as_tensor
from ..tensor import Tensor
from .collectives import ReduceOp, all_reduce
from .models import GPT, GPTBlock
from .nn.functional import (_group, copy_to_group, gather_from_group, reduce_from_group,
                            scatter_to_group)
from .process_group import DistributedError, ProcessGroup

__all__ = ["ColumnParallelLinear", "RowParallelLinear", "VocabParallelEmbedding",
           "ParallelSelfAttention", "ParallelMLP", "ParallelGPTBlock", "ParallelGPT",
           "parallelize_gpt", "parallel_slices", "average_gradients"]


def _block(name: str, what: str, size: int, group: ProcessGroup) -> np.ndarray:
    """The indices of this rank's equal block of ``size`` items."""
    if size % group.size:
        raise DistributedError(f"{name}: {what}={size} is not divisible by the tensor-"
                               f"parallel group size {group.size}; expected a multiple of "
                               f"{group.size}")
    width = size // group.size
    return np.arange(group.rank * width, (group.rank + 1) * width)


def _take(t: Tensor, dim: int, index: np.ndarray) -> nn.Parameter:
    """A new parameter holding ``t``'s entries ``index`` along ``dim``."""
    return nn.Parameter(t.detach().index_select(dim, as_tensor(index)).contiguous().clone())


def _replicate(t: Tensor) -> nn.Parameter:
    return nn.Parameter(t.detach().clone())


class ColumnParallelLinear(nn.Module):
    """``y = x @ weight.T + bias`` with the output features split across ``group``: this
    rank holds rows ``partition`` of the full ``(out_features, in_features)`` weight.

    Args:
        in_features, out_features, bias: as :class:`ember.nn.Linear`.
        gather_output: all-gather the slices so every rank gets all ``out_features``
            (else each rank returns its ``out_features / group size`` slice).
        group: the tensor-parallel group (the world by default).
        partition: the rows of the full weight this rank holds (default: the rank's
            contiguous block); a custom one keeps e.g. the q, k and v of the same heads
            together, and needs ``gather_output=False``.

    Shape: input ``(*, in_features)`` (replicated), output ``(*, out_features)`` or
    ``(*, out_features / group size)``.

    >>> layer = ColumnParallelLinear(16, 32, gather_output=False)   # on 2 ranks
    >>> layer(ember.randn(4, 16)).shape
    ember.Size([4, 16])
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 gather_output: bool = True, group: ProcessGroup | None = None, *,
                 partition=None, device=None, dtype=None):
        super().__init__()
        self._setup(in_features, out_features, gather_output, group, partition)
        full = nn.Linear(in_features, out_features, bias, device=device, dtype=dtype)
        self._load(full)

    @classmethod
    def from_linear(cls, linear: nn.Linear, gather_output: bool = True,
                    group: ProcessGroup | None = None, *, partition=None):
        """This rank's slice of an existing ``nn.Linear`` (copied)."""
        layer = cls.__new__(cls)
        nn.Module.__init__(layer)
        layer._setup(linear.in_features, linear.out_features, gather_output, group, partition)
        layer._load(linear)
        return layer

    def _setup(self, in_features, out_features, gather_output, group, partition):
        self.group = _group(group)
        self.in_features, self.out_features = in_features, out_features
        self.gather_output = gather_output
        if partition is None:
            partition = _block("ColumnParallelLinear", "out_features", out_features,
                               self.group)
        elif gather_output:
            raise DistributedError("ColumnParallelLinear: a custom partition needs "
                                   "gather_output=False (gathering assumes contiguous "
                                   "blocks in rank order)")
        self.partition = np.asarray(partition, dtype=np.int64)
        self.partition_dim = 0

    def _load(self, full: nn.Linear) -> None:
        self.weight = _take(full.weight, 0, self.partition)
        if full.bias is not None:
            self.bias = _take(full.bias, 0, self.partition)
        else:
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim == 0 or input.shape[-1] != self.in_features:
            raise DistributedError(f"ColumnParallelLinear: expected input with "
                                   f"{self.in_features} features in its last dimension, "
                                   f"got shape {tuple(input.shape)}")
        y = F.linear(copy_to_group(input, self.group), self.weight, self.bias)
        return gather_from_group(y, self.group) if self.gather_output else y

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features} "
                f"({len(self.partition)} on this rank), bias={self.bias is not None}, "
                f"gather_output={self.gather_output}")


class RowParallelLinear(nn.Module):
    """``y = x @ weight.T + bias`` with the input features split across ``group``: this
    rank holds columns ``partition`` of the full weight; the partial products are
    all-reduced and the (replicated) bias added after.

    Args:
        in_features, out_features, bias: as :class:`ember.nn.Linear`.
        input_is_parallel: the input is already this rank's slice of the features (the
            output of a :class:`ColumnParallelLinear` with ``gather_output=False``); else
            the layer takes its slice of a replicated input.
        group: the tensor-parallel group (the world by default).

    Shape: input ``(*, in_features / group size)`` or ``(*, in_features)``, output
    ``(*, out_features)`` (replicated).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 input_is_parallel: bool = False, group: ProcessGroup | None = None, *,
                 device=None, dtype=None):
        super().__init__()
        self._setup(in_features, out_features, input_is_parallel, group)
        self._load(nn.Linear(in_features, out_features, bias, device=device, dtype=dtype))

    @classmethod
    def from_linear(cls, linear: nn.Linear, input_is_parallel: bool = False,
                    group: ProcessGroup | None = None):
        """This rank's slice of an existing ``nn.Linear`` (copied)."""
        layer = cls.__new__(cls)
        nn.Module.__init__(layer)
        layer._setup(linear.in_features, linear.out_features, input_is_parallel, group)
        layer._load(linear)
        return layer

    def _setup(self, in_features, out_features, input_is_parallel, group):
        self.group = _group(group)
        self.in_features, self.out_features = in_features, out_features
        self.input_is_parallel = input_is_parallel
        self.partition = _block("RowParallelLinear", "in_features", in_features, self.group)
        self.partition_dim = 1

    def _load(self, full: nn.Linear) -> None:
        self.weight = _take(full.weight, 1, self.partition)
        if full.bias is not None:
            self.bias = _replicate(full.bias)
        else:
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:
        want = len(self.partition) if self.input_is_parallel else self.in_features
        if input.ndim == 0 or input.shape[-1] != want:
            raise DistributedError(f"RowParallelLinear: expected input with {want} features "
                                   f"in its last dimension (input_is_parallel="
                                   f"{self.input_is_parallel}), got shape "
                                   f"{tuple(input.shape)}")
        x = input if self.input_is_parallel else scatter_to_group(input, self.group)
        y = reduce_from_group(F.linear(x, self.weight), self.group)
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features} ({len(self.partition)} on this rank), "
                f"out_features={self.out_features}, bias={self.bias is not None}, "
                f"input_is_parallel={self.input_is_parallel}")


class VocabParallelEmbedding(nn.Module):
    """An embedding table with its rows (the vocabulary) split across ``group``: each
    rank looks up the tokens in its block, gives zeros for the others, and the results
    are all-reduced, so every rank gets every token's vector.

    Args:
        num_embeddings: the vocabulary size (a multiple of the group size).
        embedding_dim: the size of each vector.
        group: the tensor-parallel group (the world by default).

    Shape: input: integer tokens ``(*)`` (replicated); output ``(*, embedding_dim)``.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int,
                 group: ProcessGroup | None = None, *, device=None, dtype=None):
        super().__init__()
        self._setup(num_embeddings, embedding_dim, group)
        self._load(nn.Embedding(num_embeddings, embedding_dim, device=device, dtype=dtype))

    @classmethod
    def from_embedding(cls, embedding: nn.Embedding, group: ProcessGroup | None = None):
        """This rank's rows of an existing ``nn.Embedding`` (copied; padding_idx,
        max_norm and the other options are not supported)."""
        if embedding.padding_idx is not None or embedding.max_norm is not None:
            raise DistributedError("VocabParallelEmbedding.from_embedding: padding_idx and "
                                   "max_norm are not supported; expected an Embedding "
                                   "without them")
        layer = cls.__new__(cls)
        nn.Module.__init__(layer)
        layer._setup(embedding.num_embeddings, embedding.embedding_dim, group)
        layer._load(embedding)
        return layer

    def _setup(self, num_embeddings, embedding_dim, group):
        self.group = _group(group)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.partition = _block("VocabParallelEmbedding", "num_embeddings", num_embeddings,
                                self.group)
        self.partition_dim = 0

    def _load(self, full: nn.Embedding) -> None:
        self.weight = _take(full.weight, 0, self.partition)

    def forward(self, input: Tensor) -> Tensor:
        start, stop = int(self.partition[0]), int(self.partition[-1]) + 1
        mine = (input >= start) & (input < stop)
        local = (input - start) * mine       # tokens of other ranks look up row 0 ...
        out = F.embedding(local, self.weight) * mine.unsqueeze(-1).to(self.weight.dtype)
        return reduce_from_group(out, self.group)   # ... and are zeroed before the sum

    def extra_repr(self) -> str:
        return (f"{self.num_embeddings}, {self.embedding_dim} (rows "
                f"{self.partition[0]}..{self.partition[-1]} on this rank)")


# Attention and MLP ----------------------------------------------------------------------
def _check_heads(name: str, n_heads: int, group: ProcessGroup) -> int:
    if n_heads % group.size:
        raise DistributedError(f"{name}: n_heads={n_heads} is not divisible by the tensor-"
                               f"parallel group size {group.size}; expected a group size "
                               "that divides the number of heads")
    return n_heads // group.size


def qkv_partition(d_model: int, n_heads: int, group: ProcessGroup) -> np.ndarray:
    """The rows of a fused ``(3 * d_model, d_model)`` q/k/v weight that hold this rank's
    heads: its q rows, then its k rows, then its v rows."""
    local = _check_heads("qkv_partition", n_heads, group) * (d_model // n_heads)
    rows = np.arange(group.rank * local, (group.rank + 1) * local)
    return np.concatenate([rows, rows + d_model, rows + 2 * d_model])


def _attend(x: Tensor, qkv: ColumnParallelLinear, proj: RowParallelLinear,
            local_heads: int) -> Tensor:
    q, k, v = qkv(x).chunk(3, dim=-1)
    y = F.scaled_dot_product_attention(*(split_heads(z, local_heads) for z in (q, k, v)),
                                       is_causal=True)
    return proj(merge_heads(y))


def _mlp(x: Tensor, fc1: ColumnParallelLinear, fc2: RowParallelLinear) -> Tensor:
    return fc2(F.gelu(fc1(x)))


class ParallelSelfAttention(nn.Module):
    """Causal multi-head self-attention with the heads split across ``group``: a
    column-parallel fused q/k/v projection (each rank computes its heads), attention on
    the local heads, and a row-parallel output projection (one all-reduce).

    Args:
        d_model: the model width. n_heads: heads in all (a multiple of the group size).

    Shape: ``(batch, time, d_model)`` to ``(batch, time, d_model)``, replicated.
    """

    def __init__(self, d_model: int, n_heads: int, group: ProcessGroup | None = None, *,
                 dtype=None):
        super().__init__()
        g = _group(group)
        self.local_heads = _check_heads("ParallelSelfAttention", n_heads, g)
        self.qkv = ColumnParallelLinear(d_model, 3 * d_model, gather_output=False, group=g,
                                        partition=qkv_partition(d_model, n_heads, g),
                                        dtype=dtype)
        self.proj = RowParallelLinear(d_model, d_model, input_is_parallel=True, group=g,
                                      dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        return _attend(x, self.qkv, self.proj, self.local_heads)


class ParallelMLP(nn.Module):
    """``fc2(gelu(fc1(x)))`` with the hidden features split across ``group``
    (column-parallel ``fc1``, row-parallel ``fc2``: one all-reduce).

    Shape: ``(*, d_model)`` to ``(*, d_model)``, replicated.
    """

    def __init__(self, d_model: int, hidden: int, group: ProcessGroup | None = None, *,
                 dtype=None):
        super().__init__()
        g = _group(group)
        self.fc1 = ColumnParallelLinear(d_model, hidden, gather_output=False, group=g,
                                        dtype=dtype)
        self.fc2 = RowParallelLinear(hidden, d_model, input_is_parallel=True, group=g,
                                     dtype=dtype)

    def forward(self, x: Tensor) -> Tensor:
        return _mlp(x, self.fc1, self.fc2)


class ParallelGPTBlock(nn.Module):
    """A :class:`~ember.distributed.models.GPTBlock` split across ``group``, with the
    same parameter names (``qkv``, ``proj``, ``fc1``, ``fc2`` hold slices; ``ln1`` and
    ``ln2`` are replicated), built from the unsplit ``block``'s weights."""

    def __init__(self, block: GPTBlock, group: ProcessGroup | None = None):
        super().__init__()
        g = _group(group)
        self.local_heads = _check_heads("ParallelGPTBlock", block.n_heads, g)
        self.ln1, self.ln2 = copy.deepcopy(block.ln1), copy.deepcopy(block.ln2)
        self.qkv = ColumnParallelLinear.from_linear(
            block.qkv, gather_output=False, group=g,
            partition=qkv_partition(block.d_model, block.n_heads, g))
        self.proj = RowParallelLinear.from_linear(block.proj, input_is_parallel=True, group=g)
        self.fc1 = ColumnParallelLinear.from_linear(block.fc1, gather_output=False, group=g)
        self.fc2 = RowParallelLinear.from_linear(block.fc2, input_is_parallel=True, group=g)

    def forward(self, x: Tensor) -> Tensor:
        x = x + _attend(self.ln1(x), self.qkv, self.proj, self.local_heads)
        return x + _mlp(self.ln2(x), self.fc1, self.fc2)


class ParallelGPT(nn.Module):
    """A :class:`~ember.distributed.models.GPT` split across a tensor-parallel group
    (made by :func:`parallelize_gpt`): vocabulary-parallel token embedding, blocks with
    their heads and MLP split, and a column-parallel head whose logits are gathered, so
    the output is the full ``(batch, time, vocab_size)`` on every rank."""

    def __init__(self, model: GPT, group: ProcessGroup | None = None):
        super().__init__()
        g = _group(group)
        self.group = g
        self.vocab_size, self.context = model.vocab_size, model.context
        self.tok = VocabParallelEmbedding.from_embedding(model.tok, g)
        self.pos = _replicate(model.pos)
        self.blocks = nn.Sequential(*[ParallelGPTBlock(b, g) for b in model.blocks])
        self.ln = copy.deepcopy(model.ln)
        self.head = ColumnParallelLinear.from_linear(model.head, gather_output=True, group=g)

    def forward(self, idx: Tensor) -> Tensor:
        t = idx.shape[1]
        return self.head(self.ln(self.blocks(self.tok(idx) + self.pos[:t])))


def parallelize_gpt(model: GPT, group: ProcessGroup | None = None) -> ParallelGPT:
    """The tensor-parallel version of ``model`` on ``group`` (the world by default): each
    rank keeps its slice of every split weight (copied; ``model`` is left as it is).
    Every rank must pass the same ``model``; its outputs and (sliced) gradients then
    equal the unsplit model's.

    >>> model = GPT(dtype=ember.float64)           # same seed on every rank
    >>> tp = parallelize_gpt(model)                # n_heads must divide by the ranks
    >>> tp(tokens).shape == model(tokens).shape
    True
    """
    if not isinstance(model, GPT):
        raise DistributedError(f"parallelize_gpt: expected an ember.distributed.models.GPT, "
                               f"got {type(model).__name__}")
    return ParallelGPT(model, group)


def parallel_slices(module: nn.Module) -> dict:
    """For each parameter name of ``module``: ``(dim, indices)`` when it holds a slice
    of the unsplit parameter (the entries ``indices`` along ``dim``), or ``None`` when it
    is replicated. ``full.index_select(dim, indices)`` is this rank's part."""
    out = {}
    for prefix, m in module.named_modules():
        for name, p in m.named_parameters(recurse=False):
            full = f"{prefix}.{name}" if prefix else name
            split = hasattr(m, "partition") and not (isinstance(m, RowParallelLinear)
                                                     and name == "bias")
            dim = 0 if name == "bias" else getattr(m, "partition_dim", 0)
            out[full] = (dim, m.partition) if split else None
    return out


def average_gradients(module: nn.Module, group: ProcessGroup | None = None) -> None:
    """Average every parameter's ``.grad`` over ``group`` (a data-parallel group), in
    place; parameters without a gradient are skipped (every rank must have the same
    ones). For data parallel × tensor parallel, call it with the data-parallel group
    after ``backward()``."""
    g = _group(group)
    if g.size == 1:
        return
    for p in module.parameters():
        if p.grad is not None:
            all_reduce(p.grad, ReduceOp.AVG, g)

