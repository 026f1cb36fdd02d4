"""Reference models: ``ember.models.GPT`` (DESIGN.md's gpt workload)."""
from .gpt import GPT, Block, merge_heads, split_heads

__all__ = ["GPT", "Block", "split_heads", "merge_heads"]
