"""Links of a chain for tests/processes/test_ahead.py: short tasks, each on the last."""

from __future__ import annotations

import os
import time

import dista_runtime as dista


@dista.task
def first() -> tuple[int, int]:
    """The chain's start: no links yet, run here."""
    return 0, os.getpid()


@dista.task
def link(state: tuple[int, int], raise_at: int = -1, pause: float = 0.0) -> tuple[int, int]:
    """One more link, and where it ran; link ``raise_at`` raises instead."""
    count, _ = state
    if count == raise_at:
        raise ValueError(f"link {count} raised on purpose")
    if pause:
        time.sleep(pause)
    return count + 1, os.getpid()
