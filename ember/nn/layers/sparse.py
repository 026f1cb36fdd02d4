"""Lookup tables: Embedding and EmbeddingBag."""
from __future__ import annotations

from ...autograd import grad_mode
from ...errors import EmberError
from ...ops.creation import empty
from ...tensor import Tensor
from .. import functional as F
from .. import init
from ..module import Module
from ..parameter import Parameter

__all__ = ["Embedding", "EmbeddingBag"]


def _check_padding_idx(padding_idx: int | None, num_embeddings: int) -> int | None:
    if padding_idx is None:
        return None
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(f"Padding_idx must be within num_embeddings: got padding_idx="
                         f"{padding_idx} for {num_embeddings} embeddings")
    return padding_idx % num_embeddings


def _check_dense(cls: str, sparse: bool) -> None:
    if sparse:
        raise NotImplementedError(f"{cls}: sparse gradients are not supported in ember; use "
                                  "sparse=False (dense gradients)")


def _make_weight(num_embeddings, embedding_dim, _weight, _freeze, device, dtype):
    """The weight parameter (given or fresh) and whether it still needs initialising."""
    if _weight is None:
        return Parameter(empty((num_embeddings, embedding_dim), device=device, dtype=dtype),
                         requires_grad=not _freeze), True
    if tuple(_weight.shape) != (num_embeddings, embedding_dim):
        raise EmberError(f"Shape of weight {tuple(_weight.shape)} does not match "
                         f"num_embeddings and embedding_dim ({num_embeddings}, {embedding_dim})")
    return Parameter(_weight, requires_grad=not _freeze), False


def _options_repr(m) -> str:
    s = ""
    if m.max_norm is not None:
        s += f", max_norm={m.max_norm}"
    if m.norm_type != 2:
        s += f", norm_type={m.norm_type}"
    if m.scale_grad_by_freq is not False:
        s += f", scale_grad_by_freq={m.scale_grad_by_freq}"
    return s


class Embedding(Module):
    """A table of ``num_embeddings`` vectors of size ``embedding_dim``; the input holds
    indices into it.

    Args:
        padding_idx: this row gets no gradient (and starts at zeros).
        max_norm: rows looked up are renormalised in place to at most this norm.
        norm_type: the p of the norm for ``max_norm``.
        scale_grad_by_freq: divide gradients by how often each index occurs in the batch.
        sparse: sparse gradients (not supported; must be False).

    ``weight`` is initialised from N(0, 1).

    >>> emb = ember.nn.Embedding(10, 3, padding_idx=0)
    >>> emb(ember.tensor([[0, 2], [4, 9]])).shape
    ember.Size([2, 2, 3])
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight: Tensor | None = None, _freeze: bool = False, device=None, dtype=None):
        super().__init__()
        _check_dense("Embedding", sparse)
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = _check_padding_idx(padding_idx, num_embeddings)
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.sparse = sparse
        weight, fresh = _make_weight(num_embeddings, embedding_dim, _weight, _freeze, device,
                                     dtype)
        self.weight = weight
        if fresh:
            self.reset_parameters()

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self) -> None:
        if self.padding_idx is not None:
            with grad_mode.no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s + _options_repr(self)

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        padding_idx: int | None = None, max_norm: float | None = None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False) -> "Embedding":
        """An Embedding holding ``embeddings`` (2-D) as its weight (not copied; frozen
        unless ``freeze=False``).

        >>> ember.nn.Embedding.from_pretrained(ember.eye(3))(ember.tensor([1])).tolist()
        [[0.0, 1.0, 0.0]]
        """
        if embeddings.ndim != 2:
            raise EmberError(f"Embeddings parameter is expected to be 2-dimensional, got "
                             f"shape {tuple(embeddings.shape)}")
        rows, cols = embeddings.shape
        return cls(rows, cols, _weight=embeddings, _freeze=freeze, padding_idx=padding_idx,
                   max_norm=max_norm, norm_type=norm_type,
                   scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)



class EmbeddingBag(Module):
    """Sums, averages or takes the max of bags of embeddings without building the
    intermediate (N, L, D) tensor.

    ``input`` is (B, L) (B bags of L indices) or 1-D with ``offsets`` giving where each
    bag starts; ``per_sample_weights`` weight each index (mode ``"sum"`` only).

    >>> bag = ember.nn.EmbeddingBag(10, 3, mode="sum")
    >>> bag(ember.tensor([1, 2, 4, 5, 4, 3, 2, 9]), ember.tensor([0, 4])).shape
    ember.Size([2, 3])
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                 sparse: bool = False, _weight: Tensor | None = None,
                 include_last_offset: bool = False, padding_idx: int | None = None,
                 device=None, dtype=None):
        super().__init__()
        _check_dense("EmbeddingBag", sparse)
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.padding_idx = _check_padding_idx(padding_idx, num_embeddings)
        weight, fresh = _make_weight(num_embeddings, embedding_dim, _weight, False, device,
                                     dtype)
        self.weight = weight
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset
        if fresh:
            self.reset_parameters()

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with grad_mode.no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input: Tensor, offsets: Tensor | None = None,
                per_sample_weights: Tensor | None = None) -> Tensor:
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                               self.scale_grad_by_freq, self.mode, self.sparse,
                               per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}{_options_repr(self)}, mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        max_norm: float | None = None, norm_type: float = 2.0,
                        scale_grad_by_freq: bool = False, mode: str = "mean",
                        sparse: bool = False, include_last_offset: bool = False,
                        padding_idx: int | None = None) -> "EmbeddingBag":
        """An EmbeddingBag holding ``embeddings`` (2-D) as its weight (frozen unless
        ``freeze=False``)."""
        if embeddings.ndim != 2:
            raise EmberError(f"Embeddings parameter is expected to be 2-dimensional, got "
                             f"shape {tuple(embeddings.shape)}")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, _weight=embeddings, max_norm=max_norm, norm_type=norm_type,
                  scale_grad_by_freq=scale_grad_by_freq, mode=mode, sparse=sparse,
                  include_last_offset=include_last_offset, padding_idx=padding_idx)
        bag.weight.requires_grad_(not freeze)
        return bag
