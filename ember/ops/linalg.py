"""Linear algebra: matmul and friends, einsum, tensordot."""
from __future__ import annotations

__all__: list[str] = []
