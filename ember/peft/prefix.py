"""Prefix tuning for ember's GPT: every block's attention also attends to
``num_virtual_tokens`` trainable key/value vectors per head, prepended to the keys and
values of the sequence; the base model is frozen.

Each ``ember.models.gpt.Block`` is replaced by a :class:`PrefixBlock` that holds the
block (unchanged) and its prefixes, and runs the block's own layers with the prefixes
added to attention.
"""
from __future__ import annotations

import contextlib
import os

from .. import serialization
from ..autograd import grad_mode
from ..errors import EmberValueError
from ..models.gpt import Block, merge_heads, split_heads
from ..nn import Module, Parameter
from ..nn import functional as F
from ..ops.creation import ones
from ..ops.movement import tril
from ..ops.random import randn
from ..ops.shape import cat
from ..tensor import Tensor
from .config import PrefixTuningConfig, config_from_dict
from .model import _ADAPTER_FORMAT, _AdapterWrapper, _set_child

__all__ = ["PrefixBlock", "PrefixTuningModel"]


class PrefixBlock(Module):
    """A GPT :class:`~ember.models.gpt.Block` whose causal self-attention also sees
    trainable prefixes: ``prefix_key`` and ``prefix_value``, each
    ``(n_heads, num_virtual_tokens, head_dim)``. Every position attends to the whole
    prefix and, causally, to the positions up to itself.

    >>> pb = PrefixBlock(ember.models.gpt.Block(128, 4), PrefixTuningConfig(8))
    >>> pb(ember.randn(2, 16, 128)).shape
    ember.Size([2, 16, 128])
    """

    def __init__(self, block: Block, config: PrefixTuningConfig) -> None:
        super().__init__()
        self.block = block
        self.enabled = True
        heads, head_dim = block.n_heads, block.d_model // block.n_heads
        like = block.qkv.weight
        shape = (heads, config.num_virtual_tokens, head_dim)
        self.prefix_key = Parameter(randn(*shape, dtype=like.dtype) * config.init_std)
        self.prefix_value = Parameter(randn(*shape, dtype=like.dtype) * config.init_std)

    def forward(self, x: Tensor) -> Tensor:
        if not self.enabled:
            return self.block(x)
        blk = self.block
        b, t, _ = x.shape
        q, k, v = blk.qkv(blk.ln1(x)).split(blk.d_model, dim=2)
        q, k, v = (split_heads(z, blk.n_heads) for z in (q, k, v))
        n = self.prefix_key.shape[1]
        pk = self.prefix_key.unsqueeze(0).expand(b, *self.prefix_key.shape)
        pv = self.prefix_value.unsqueeze(0).expand(b, *self.prefix_value.shape)
        k, v = cat([pk, k], dim=2), cat([pv, v], dim=2)
        causal = tril(ones(t, t, dtype=x.dtype)) > 0
        mask = cat([ones(t, n, dtype=x.dtype) > 0, causal], dim=1)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + blk.proj(merge_heads(y))
        return x + blk.fc2(F.gelu(blk.fc1(blk.ln2(x))))


class PrefixTuningModel(_AdapterWrapper):
    """A base model whose GPT blocks carry trainable key/value prefixes (made by
    :func:`~ember.peft.get_peft_model` with a :class:`PrefixTuningConfig`); only the
    prefixes train.

    >>> model = get_peft_model(ember.models.GPT(), PrefixTuningConfig(num_virtual_tokens=8))
    """

    def __init__(self, model: Module, config: PrefixTuningConfig,
                 adapter_name: str = "default") -> None:
        super().__init__(model)
        self.peft_config = {adapter_name: config}
        self.active_adapter = adapter_name
        self._requires_grad = {id(p): p.requires_grad for p in model.parameters()}
        blocks = [(n, m) for n, m in model.named_modules() if isinstance(m, Block)]
        if not blocks:
            kinds = sorted({type(m).__name__ for m in model.modules()})
            raise EmberValueError(f"PrefixTuningConfig: found no attention block it supports "
                                  f"(ember.models.gpt.Block) in {type(model).__name__}; its "
                                  f"modules are {kinds}. Prefix tuning of nn.MultiheadAttention "
                                  f"is not implemented yet; use LoRA on its projections")
        model.requires_grad_(False)
        for name, block in blocks:
            _set_child(model, name, PrefixBlock(block, config))

    def prefix_blocks(self) -> list[tuple[str, PrefixBlock]]:
        """``(dotted name, block)`` for every block with prefixes."""
        return [(n, m) for n, m in self.base_model.named_modules() if isinstance(m, PrefixBlock)]

    @contextlib.contextmanager
    def disable_adapter(self):
        """Run the base model without prefixes inside the ``with`` block."""
        blocks = [m for _, m in self.prefix_blocks()]
        for m in blocks:
            m.enabled = False
        try:
            yield
        finally:
            for m in blocks:
                m.enabled = True

    def adapter_state_dict(self) -> dict:
        """The prefixes, keyed ``"<block>.prefix_key"`` / ``"<block>.prefix_value"``."""
        state = {}
        for name, m in self.prefix_blocks():
            state[f"{name}.prefix_key"] = m.prefix_key.detach()
            state[f"{name}.prefix_value"] = m.prefix_value.detach()
        return state

    def save_adapter(self, path: str | os.PathLike, adapter_name: str | None = None) -> None:
        """Write the prefixes and the config to ``path`` through :func:`ember.save`."""
        serialization.save({"format": _ADAPTER_FORMAT,
                            "config": self.peft_config[self.active_adapter].to_dict(),
                            "tensors": self.adapter_state_dict()}, path)

    def load_adapter(self, path: str | os.PathLike, adapter_name: str = "default") -> None:
        """Read prefixes written by :meth:`save_adapter` (same model shape)."""
        data = serialization.load(path)
        if not isinstance(data, dict) or data.get("format") != _ADAPTER_FORMAT:
            raise EmberValueError(f"load_adapter: {os.fspath(path)!r} is not an ember adapter "
                                  f"file")
        config = config_from_dict(data["config"])
        if not isinstance(config, PrefixTuningConfig):
            raise EmberValueError(f"load_adapter: {os.fspath(path)!r} holds a "
                                  f"{config.peft_type} adapter, not a prefix-tuning one")
        current, tensors = self.adapter_state_dict(), data["tensors"]
        if set(current) != set(tensors) or any(
                current[k].shape != tensors[k].shape for k in current):
            raise EmberValueError(f"load_adapter: {os.fspath(path)!r} has prefixes "
                                  f"{sorted((k, tuple(v.shape)) for k, v in tensors.items())}, "
                                  f"this model "
                                  f"{sorted((k, tuple(v.shape)) for k, v in current.items())}")
        with grad_mode.no_grad():
            for key, value in tensors.items():
                current[key].copy_(value)

    def unload(self) -> Module:
        """Return the base model with the prefixes dropped."""
        for name, m in self.prefix_blocks():
            _set_child(self.base_model, name, m.block)
        for p in self.base_model.parameters():
            p.requires_grad_(self._requires_grad.get(id(p), True))
        return self.base_model
