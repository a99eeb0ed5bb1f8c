"""A core's pulled timer on a loop: one loop timer kept at the core's next deadline.

The cores never read a clock: they say when they next have work (`next_deadline`, in
wall-clock nanoseconds) and do it when told the time (`on_timer`), aioquic's shape. A host
re-arms after every input that may move the deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .loop import Loop

__all__ = ["PulledTimer"]


class PulledTimer:
    """Keeps one timer on ``loop`` at ``deadline()``; ``fire(now)`` when it passes."""

    __slots__ = ("_at", "_deadline", "_fire", "_loop", "_timer")

    def __init__(
        self, loop: Loop, deadline: Callable[[], int | None], fire: Callable[[int], None]
    ) -> None:
        self._loop = loop
        self._deadline = deadline
        self._fire = fire
        self._timer: Any = None
        self._at: int | None = None

    def arm(self) -> None:
        """Follow the core's deadline (cheap when it did not move)."""
        at = self._deadline()
        if at == self._at:
            return
        self.cancel()
        self._at = at
        if at is not None:
            delay = max(0.0, (at - time.time_ns()) / 1e9)
            self._timer = self._loop.call_later(delay, self._run)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._at = None

    def _run(self) -> None:
        self._timer = None
        self._at = None
        self._fire(time.time_ns())
        self.arm()
