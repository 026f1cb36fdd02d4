"""The reference GPT (:class:`ember.models.GPT`, DESIGN.md's gpt workload) as the
parallel strategies split it: :func:`~ember.distributed.parallelize_gpt` slices its
weights across a tensor-parallel group, :func:`gpt_stages` lays it out as an
``nn.Sequential`` for a :class:`~ember.distributed.Pipeline`."""
from __future__ import annotations

from .. import nn
from ..models.gpt import GPT, Block as GPTBlock
from ..tensor import Tensor

__all__ = ["GPT", "GPTBlock", "GPTEmbedding", "GPTHead", "gpt_stages"]


class GPTEmbedding(nn.Module):
    """The first pipeline stage of a GPT: tokens to embeddings plus positions. It holds
    the GPT's own ``tok`` and ``pos`` (shared, not copied)."""

    def __init__(self, tok: nn.Module, pos: nn.Parameter):
        super().__init__()
        self.tok, self.pos = tok, pos

    def forward(self, idx: Tensor) -> Tensor:
        return self.tok(idx) + self.pos[:idx.shape[1]]


class GPTHead(nn.Module):
    """The last pipeline stage of a GPT: final LayerNorm and the vocabulary head."""

    def __init__(self, ln: nn.Module, head: nn.Module):
        super().__init__()
        self.ln, self.head = ln, head

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.ln(x))


def gpt_stages(model: GPT) -> nn.Sequential:
    """``model`` as ``Sequential(embedding, *blocks, head)``, sharing its parameters:
    ``n_layers + 2`` pieces a :class:`~ember.distributed.Pipeline` can split.

    >>> len(gpt_stages(GPT()))
    4
    """
    return nn.Sequential(GPTEmbedding(model.tok, model.pos), *model.blocks,
                         GPTHead(model.ln, model.head))
