"""Tasks of the orderly-stop tests (tests/processes/test_orderly_stops.py)."""

from __future__ import annotations

import time

import dista_runtime as dista


@dista.task
def spin(seconds: float) -> int:
    """Busy for ``seconds`` (holding the GIL as CPU-bound code does), then a small result."""
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += 1
    return n


@dista.task
def big(size: int) -> bytes:
    """A result large enough to stay on its worker (over the inline cap)."""
    return b"x" * size
