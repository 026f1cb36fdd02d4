"""Data movement that copies: pad, flip, roll, repeat, tile, tril/triu, diag, meshgrid."""
from __future__ import annotations

__all__: list[str] = []
