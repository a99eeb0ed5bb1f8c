"""The watch on links that have not said hello: closed after a deadline since they
connected, or after a while without a byte, so that peers with no credentials cannot hold
the head's connections (docs/security.md)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

__all__ = ["HelloWatch"]


def _seconds(ns: int) -> str:
    return f"{ns / 1e9:g} s"


class HelloWatch:
    """Links that have not said hello yet, closed after ``deadline_ns`` since they connected
    or ``idle_ns`` without a byte (0: that check is off).

    Two deques, each in time order because time only moves forward: one entry per link at
    connect, and one per read before its hello (a hello is at most 46 bytes, so a link adds
    a bounded number). Entries of links that said hello since, or read again, are dropped
    when they reach the front: the cost is O(1) amortized per link.
    """

    def __init__(self, deadline_ns: int, idle_ns: int) -> None:
        if deadline_ns < 0 or idle_ns < 0:
            raise ValueError("hello_deadline_ns and hello_idle_ns must be >= 0 (0: off)")
        self.deadline_ns = deadline_ns
        self.idle_ns = idle_ns
        self._opened: deque[tuple[int, int]] = deque()  # (link, connected at)
        self._heard: deque[tuple[int, int]] = deque()  # (link, read at)
        self._last: dict[int, int] = {}  # un-greeted link -> when it last read

    def opened(self, link: int, now: int) -> None:
        if self.deadline_ns or self.idle_ns:
            self._last[link] = now
            if self.deadline_ns:
                self._opened.append((link, now))
            if self.idle_ns:
                self._heard.append((link, now))

    def heard(self, link: int, now: int) -> None:
        """``link`` read bytes (call only before its hello)."""
        if link in self._last and self._last[link] != now:
            self._last[link] = now
            if self.idle_ns:
                self._heard.append((link, now))

    def done(self, link: int) -> None:
        """``link`` said hello, or is gone: no longer watched."""
        self._last.pop(link, None)

    def watching(self, link: int) -> bool:
        return link in self._last

    def next_deadline(self) -> int | None:
        self._prune()
        times = []
        if self._opened:
            times.append(self._opened[0][1] + self.deadline_ns)
        if self._heard:
            times.append(self._heard[0][1] + self.idle_ns)
        return min(times) if times else None

    def _prune(self) -> None:
        last = self._last
        opened, heard = self._opened, self._heard
        while opened and opened[0][0] not in last:
            opened.popleft()
        while heard and last.get(heard[0][0]) != heard[0][1]:
            heard.popleft()

    def due(self, now: int, close: Callable[[int, str], None]) -> None:
        """Call ``close(link, why)`` for every watched link past its deadline or idle time."""
        last = self._last
        opened, heard = self._opened, self._heard
        while opened and (opened[0][0] not in last or opened[0][1] + self.deadline_ns <= now):
            link, _ = opened.popleft()
            if link in last:
                del last[link]
                close(link, f"no hello within {_seconds(self.deadline_ns)}")
        while heard and (
            last.get(heard[0][0]) != heard[0][1] or heard[0][1] + self.idle_ns <= now
        ):
            link, at = heard.popleft()
            if last.get(link) == at:
                del last[link]
                close(link, f"no hello, and nothing read for {_seconds(self.idle_ns)}")
