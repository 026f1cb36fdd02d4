"""The devices tests run on: ``DEVICES`` parametrizes a test over ``cpu`` and ``cuda``;
the cuda case skips, with the reason, where CuPy or a GPU is missing (as here and in CI)."""
from __future__ import annotations

import pytest

import ember

needs_cuda = pytest.mark.skipif(not ember.cuda.is_available(),
                                reason="CUDA is not available: ember's cuda backend needs "
                                       "CuPy and a GPU")
DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=needs_cuda)]


def skip_unsupported(device: str, dtype: str) -> None:
    """Skip a bfloat16 case on a GPU whose CuPy can't hold bfloat16 (before CuPy 14)."""
    if device == "cuda" and dtype == "bfloat16" and not ember.cuda.is_bf16_supported():
        pytest.skip("this CuPy has no bfloat16 (needs CuPy 14 with ml_dtypes)")
