"""Reference models: ``ember.models.GPT`` (DESIGN.md's gpt workload)."""
from .gpt import GPT, Block

__all__ = ["GPT", "Block"]
