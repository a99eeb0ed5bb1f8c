"""The watch on links past their hello: idle drivers and observers, slow-drip frames, and
the observer cap, so that peers with no work to do cannot hold the head's connections.

Theory of operation
-------------------
- **Idle.** A driver (or a task's client) or an observer that sends nothing for
  ``idle_ns`` is closed. Drivers are legitimately quiet for hours, so a Dista driver sends a
  keepalive well within it (a stats request marked `STATS_NO_REPLY`, which the head does
  not answer); workers are watched by their heartbeat instead (`Membership`). The head
  only closes the link: a driver's loss then comes as any lost connection does, and it may
  resume within the recovery grace.
- **Rate floor.** A frame begun must keep arriving at ``min_rate`` bytes a second on
  average once ``grace_ns`` has passed since its first byte; time the head itself paused
  reading the link (backpressure: `paused`, `resumed`) does not count. Bytes are counted
  from the read the frame began in until a read ends between frames.
- **Observers.** At most ``max_observers`` at once; a hello past it is refused.

The head looks at most once per tick (a second, or less for short limits): the scan is
linear in the links watched, a few microseconds each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

__all__ = ["PeerWatch"]

_TICK_NS: Final = 1_000_000_000


class _Frame:
    __slots__ = ("began", "got", "paused_at", "paused_ns")

    def __init__(self, now: int, got: int) -> None:
        self.began = now
        self.got = got
        self.paused_ns = 0
        self.paused_at = -1  # when reading it was paused, if it is now


class PeerWatch:
    """Greeted links' silence and frame rates (module docstring); 0 turns a check off."""

    def __init__(self, idle_ns: int, min_rate: int, grace_ns: int, max_observers: int) -> None:
        if idle_ns < 0 or min_rate < 0 or grace_ns < 0 or max_observers < 1:
            raise ValueError("idle_ns, min_rate and grace_ns must be >= 0, max_observers >= 1")
        self.idle_ns = idle_ns
        self.min_rate = min_rate
        self.grace_ns = grace_ns
        self.max_observers = max_observers
        self._idle: dict[int, int] = {}  # idle-watched link -> when it was last heard
        self._observers: set[int] = set()
        self._frames: dict[int, _Frame] = {}  # link -> its frame in progress
        self._paused: set[int] = set()  # links whose reading the head paused
        self._tick_at = 0

    def observer_room(self) -> bool:
        """Whether one more observer may say hello."""
        return len(self._observers) < self.max_observers

    def greeted(self, link: int, now: int, *, observer: bool, idle: bool) -> None:
        """``link`` said hello: an observer, and/or one watched for idleness."""
        if observer:
            self._observers.add(link)
        if idle and self.idle_ns:
            self._idle[link] = now
            self._arm(now)

    def _arm(self, now: int) -> None:
        """Look again one tick from ``now``, unless a look is due already."""
        if self._tick_at <= now:
            self._tick_at = now + self._tick()

    def _tick(self) -> int:
        shortest = min(t for t in (self.idle_ns, self.grace_ns, _TICK_NS * 4) if t > 0)
        return max(min(_TICK_NS, shortest // 4), 1_000_000)

    def heard(self, link: int, nbytes: int, now: int, in_frame: bool) -> None:
        """``link`` read ``nbytes``; ``in_frame``: a frame has begun and not ended (only
        past its hello: before it, `HelloWatch` bounds the link)."""
        if link in self._idle:
            self._idle[link] = now
        if not self.min_rate:
            return
        frame = self._frames.get(link)
        if not in_frame:
            if frame is not None:
                del self._frames[link]
        elif frame is None:
            frame = self._frames[link] = _Frame(now, nbytes)
            self._arm(now)
            if link in self._paused:
                frame.paused_at = now
        else:
            frame.got += nbytes

    def paused(self, link: int, now: int) -> None:
        """The head stopped reading ``link`` (a peer it feeds reads slowly)."""
        self._paused.add(link)
        frame = self._frames.get(link)
        if frame is not None and frame.paused_at < 0:
            frame.paused_at = now

    def resumed(self, link: int, now: int) -> None:
        self._paused.discard(link)
        frame = self._frames.get(link)
        if frame is not None and frame.paused_at >= 0:
            frame.paused_ns += now - frame.paused_at
            frame.paused_at = -1

    def forget(self, link: int) -> None:
        """``link`` is gone, or closed."""
        self._idle.pop(link, None)
        self._observers.discard(link)
        self._frames.pop(link, None)
        self._paused.discard(link)

    def next_deadline(self) -> int | None:
        if not self._idle and not self._frames:
            return None
        return self._tick_at

    def due(self, now: int, close: Callable[[int, str], None]) -> None:
        """Call ``close(link, why)`` for each link idle too long or dripping a frame."""
        if now < self._tick_at:
            return
        self._tick_at = now + self._tick()
        late: list[tuple[int, str]] = []
        if self.idle_ns:
            since = now - self.idle_ns
            for link, heard in self._idle.items():
                if heard <= since:
                    late.append((link, f"idle: nothing sent for {self.idle_ns / 1e9:g} s"))
        for link, frame in self._frames.items():
            spent = now - frame.began - frame.paused_ns
            if frame.paused_at >= 0:
                spent -= now - frame.paused_at
            if spent > self.grace_ns and frame.got * 1_000_000_000 < self.min_rate * spent:
                why = (
                    f"too slow: {frame.got} bytes of a frame in {spent / 1e9:.1f} s, "
                    f"under the floor of {self.min_rate} bytes a second"
                )
                late.append((link, why))
        for link, why in late:
            self.forget(link)
            close(link, why)
