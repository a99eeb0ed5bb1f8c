"""The watch on links past their hello: idle drivers and observers, slow-drip frames, and
the observer cap, so that peers with no work to do cannot hold the head's connections.

Theory of operation
-------------------
- **Idle.** An observer, or a driver (or a task's client) that owns nothing at the head
  (no object, which covers its unfinished tasks' results, and no live actor), that sends
  nothing for ``idle_ns`` is closed. A driver that owns something is spared however long
  it is quiet: it may wait hours for a long task, and a driver that follows only the wire
  page has no way to say it is alive (what it owns is bounded by the connection caps and,
  under TLS, by its certificate). A Dista driver also sends a keepalive well within the
  timeout (a stats request marked `STATS_NO_REPLY`, which the head does not answer), so
  that it keeps its number while it owns nothing. Workers are watched by their heartbeat
  instead (`Membership`). The head only closes the link: a driver's loss then comes as
  any lost connection does, and it may resume within the recovery grace.
- **Rate floor.** A frame begun must keep arriving at ``min_rate`` bytes a second on
  average once ``grace_ns`` has passed since its first byte; time the head itself paused
  reading the link (backpressure: `paused`, `resumed`) does not count; nor may a frame
  stop arriving for ``grace_ns`` (a peer that sent fast, then stopped, would keep a high
  average for hours while it holds its partial frame). Bytes are counted from the read the
  frame began in until a read ends between frames.
- **Observers.** At most ``max_observers`` at once; a hello past it is refused.

The head looks at most once per tick (a second, or less for short limits): the scan is
linear in the links watched, a few microseconds each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from ._events import Error, Hello
from ._head_objects import Objects
from ._head_records import ActorRecord, ActorState, Peer
from ._head_wire import Wire
from ._roles import Role

__all__ = ["IDLE_NS", "MAX_OBSERVERS", "MIN_RATE", "RATE_GRACE_NS", "PeerWatch"]

_TICK_NS: Final = 1_000_000_000
_NEVER: Final = 2**63
#: A driver or observer that sends nothing this long after its hello is closed (drivers send
#: a `STATS_NO_REPLY` keepalive well within it).
IDLE_NS: Final = 60_000_000_000
#: The least average rate (bytes a second) at which a frame begun must keep arriving once
#: `RATE_GRACE_NS` has passed since its first byte.
MIN_RATE: Final = 1024
RATE_GRACE_NS: Final = 10_000_000_000
#: Observers connected at once, at most: they cannot take the connections drivers and
#: workers need.
MAX_OBSERVERS: Final = 64


class _Frame:
    __slots__ = ("began", "got", "last", "paused_at", "paused_ns")

    def __init__(self, now: int, got: int) -> None:
        self.began = now
        self.got = got
        self.last = now  # when its last byte came, or reading it was last resumed
        self.paused_ns = 0
        self.paused_at = -1  # when reading it was paused, if it is now


class PeerWatch:
    """Greeted links' silence and frame rates (module docstring); 0 turns a check off."""

    def __init__(
        self,
        wire: Wire,
        owned: tuple[Objects, dict[int, ActorRecord]],
        idle_ns: int,
        min_rate: int,
        grace_ns: int,
        max_observers: int,
    ) -> None:
        if idle_ns < 0 or min_rate < 0 or grace_ns < 0 or max_observers < 1:
            raise ValueError("idle_ns, min_rate and grace_ns must be >= 0, max_observers >= 1")
        self._wire = wire
        self._objects, self._actors = owned  # what drivers own: a quiet one owning any stays
        self.idle_ns = idle_ns
        self.min_rate = min_rate
        self.grace_ns = grace_ns
        self.max_observers = max_observers
        self._idle: dict[int, int] = {}  # idle-watched link -> when it was last heard
        self._observers: set[int] = set()
        self._frames: dict[int, _Frame] = {}  # link -> its frame in progress
        self._paused: set[int] = set()  # links whose reading the head paused
        #: When the next idle link may be due (a look at `_idle` only then), and when the
        #: frames in progress are looked at next: deadlines only for what can fall due, so
        #: that a quiet head with drivers connected does not wake every tick.
        self._idle_at = _NEVER
        self._frames_at = _NEVER

    def refusal(self, role: int) -> str:
        """Why a hello as ``role`` is refused now ("" if it is not): past the observer cap."""
        if role != Role.OBSERVER or len(self._observers) < self.max_observers:
            return ""
        return (
            f"too many observers: the head takes {self.max_observers} at once "
            "(DISTA_MAX_OBSERVERS); try again later"
        )

    def hello(self, peer: Peer, hello: Hello, admit: Callable[[Peer, Hello], None]) -> None:
        """``peer`` says ``hello``: refused past the observer cap, else ``admit`` it (the
        head's membership) and watch it if it stays."""
        wire = self._wire
        refusal = self.refusal(hello.role)
        if refusal:
            wire.refuse(peer, refusal)
            return
        admit(peer, hello)
        if peer.role is not None and wire.peers.get(peer.link) is peer:
            self.greeted(peer.link, wire.now, peer.role)

    def greeted(self, link: int, now: int, role: Role) -> None:
        """``link`` said hello as ``role``: drivers and observers are watched for idleness
        (workers by their heartbeat: `Membership`)."""
        if role == Role.OBSERVER:
            self._observers.add(link)
        if role != Role.WORKER and self.idle_ns:
            self._idle[link] = now
            self._idle_at = min(self._idle_at, now + self.idle_ns)

    def _tick(self) -> int:
        """How often the frames in progress are looked at: a tick, or a quarter of the grace."""
        shortest = min(t for t in (self.grace_ns, _TICK_NS * 4) if t > 0)
        return max(min(_TICK_NS, shortest // 4), 1_000_000)

    def heard(self, peer: Peer, nbytes: int) -> None:
        """``peer`` read ``nbytes``. Frames count only past its hello (before it,
        `HelloWatch` bounds the link)."""
        link, now = peer.link, self._wire.now
        conn = self._wire.links.conn(link)
        in_frame = peer.role is not None and conn is not None and conn.in_frame()
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
            self._frames_at = min(self._frames_at, now + self._tick())
            if link in self._paused:
                frame.paused_at = now
        else:
            frame.got += nbytes
            frame.last = now

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
            frame.last = max(frame.last, now)

    def forget(self, link: int) -> None:
        """``link`` is gone, or closed."""
        self._idle.pop(link, None)
        self._observers.discard(link)
        self._frames.pop(link, None)
        self._paused.discard(link)

    def _owns(self, link: int) -> bool:
        """Whether ``link`` (a driver's) owns an object or a live actor at the head: the
        objects are counted as they come and go; the actors (few) are looked through only
        when the link has been quiet for the whole timeout."""
        peer = self._wire.peers.get(link)
        if peer is None or peer.role == Role.OBSERVER:
            return False
        if self._objects.owned.get(link):
            return True
        dead = ActorState.DEAD
        return any(a.owner == link and a.state is not dead for a in self._actors.values())

    def next_deadline(self) -> int | None:
        at = min(
            self._idle_at if self._idle else _NEVER, self._frames_at if self._frames else _NEVER
        )
        return None if at == _NEVER else at

    def due(self, now: int) -> None:
        """Close each link idle too long or dripping a frame, telling it why; its loss then
        comes as a lost connection's (a driver may resume)."""
        late: list[tuple[int, str]] = []
        if self.idle_ns and now >= self._idle_at:
            since = now - self.idle_ns
            idle = self._idle
            first = _NEVER  # the earliest a link left here may fall due
            for link, heard in idle.items():
                if heard <= since:
                    if self._owns(link):
                        heard = idle[link] = now  # waits for its work: looked at again later
                    else:
                        late.append((link, f"idle: nothing sent for {self.idle_ns / 1e9:g} s"))
                        continue
                first = min(first, heard + self.idle_ns)
            self._idle_at = first
        if now < self._frames_at:
            self._finish(late)
            return
        self._frames_at = now + self._tick() if self._frames else _NEVER
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
            elif frame.paused_at < 0 and now - frame.last > self.grace_ns:
                # Fast, then stopped: an average would keep it for hours, holding its
                # frame's reservation (`PartialCap`) and its place.
                stalled = (now - frame.last) / 1e9
                why = f"too slow: no byte of a frame begun for {stalled:.1f} s"
                late.append((link, why))
        self._finish(late)

    def _finish(self, late: list[tuple[int, str]]) -> None:
        """Close each link in ``late``, telling it why."""
        wire = self._wire
        for link, why in late:
            self.forget(link)
            if link in wire.peers:
                wire.links.send(link, Error(0, f"the head closed the connection: {why}"))
                wire.close(link, why)
