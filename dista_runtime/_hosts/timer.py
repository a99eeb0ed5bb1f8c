"""A core's pulled timer on a loop: one loop timer kept at the core's next deadline.

The cores never read a clock: they say when they next have work (`next_deadline`, in
monotonic nanoseconds, `_clock`) and do it when told the time (`on_timer`), aioquic's
shape. The engine re-arms it after every input (`Engine.transmit`); the loops' own timers
are monotonic too, so a step of the wall clock moves neither.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._clock import now
from .._net.contract import Loop

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
            delay = max(0.0, (at - now()) / 1e9)
            self._timer = self._loop.call_later(delay, self._run)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._at = None

    def _run(self) -> None:
        self._timer = None
        self._at = None
        self._fire(now())
