"""Fixtures of the Trainer tests."""
from __future__ import annotations

import signal

import pytest


@pytest.fixture
def sigint_default():
    """SIGINT handled as Python's KeyboardInterrupt during the test. A suite started in
    the background of a non-interactive shell inherits SIGINT ignored, and then Python
    and the Trainer leave it ignored, so Ctrl-C tests would test nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
