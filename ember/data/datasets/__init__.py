"""Small datasets that ship inside ember (no download)."""
from .digits import Digits

__all__ = ["Digits"]
