"""(seam: filled by the issue-3 work)"""
from __future__ import annotations

__all__: list[str] = []
