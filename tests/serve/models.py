"""Model builders for the serving tests, reachable as ``import:`` targets
(``tests.serve.models:slow_mlp``)."""
from __future__ import annotations

import time

import ember
from ember import nn
from ember.config.models import mlp


class SlowModel(nn.Module):
    """An MLP whose forward takes at least ``delay`` seconds, to hold requests in flight."""

    def __init__(self, sizes, delay: float) -> None:
        super().__init__()
        self.net = mlp(sizes)
        self.delay = delay

    def forward(self, x: ember.Tensor) -> ember.Tensor:
        time.sleep(self.delay)
        return self.net(x)


def slow_mlp(sizes=(8, 4), delay: float = 0.3) -> SlowModel:
    return SlowModel(list(sizes), delay)
