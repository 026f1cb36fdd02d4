"""The memory plan: a compiled training step's peak memory is no higher than eager
mode's (parameters and optimizer state are updated in place, dead values are freed
after their last reader, replaced gradients are dropped first)."""
from __future__ import annotations

import os
import sys
import tracemalloc

import pytest

import ember

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from training import make_step  # noqa: E402


def _peak_bytes(step) -> int:
    for _ in range(3):  # state made, kernels compiled
        step()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        step()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("workload", ["mlp", "cnn", "gpt"])
def test_compiled_step_peak_memory_is_not_above_eager(workload):
    eager = _peak_bytes(make_step(ember, workload))
    compiled = _peak_bytes(ember.jit(make_step(ember, workload)))
    assert compiled <= eager * 1.01, f"{workload}: compiled {compiled} B, eager {eager} B"
