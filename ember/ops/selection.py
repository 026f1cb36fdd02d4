"""Selecting and scattering by index or mask; sorting: gather, scatter, index_select,
masked ops, take_along_dim, sort, topk, unique, nonzero."""
from __future__ import annotations

__all__: list[str] = []
