"""The head's answers to requests (stats, status, timeline): bounded per peer, and counted.

Theory of operation
-------------------
A request is a few bytes; its answer may be megabytes (an observer's timeline: 84 bytes a
record, up to the head's cap) or a walk over every peer (status). One read may hold
thousands of requests, and the head handles a read's frames in one go: before, 1,235
timeline requests in a 21 KB write made the head build 1,235 replies of 8 MB at once.

So the head handles a peer's frames in *passes*, each with a budget (`ANSWER_BOUND`, the
engine's high-water mark): every answer costs its bytes, and at least `REQUEST_FLOOR` (the
work of a request whose answer is small: a status walk). Once a pass has spent the budget,
the rest of the frames the peer sent are *held*, unhandled, and the binding stops reading
the peer (`Head.holding`). When the binding has written those answers (`Head.writable`),
the next pass takes the held frames, up to the budget again. A read that still arrives
joins the held frames, behind them, and starts a pass. So what a peer can make the head hold for
it is one pass of answers plus what the binding keeps for a slow reader, and the work the
head does for it follows what it reads; a peer that goes takes its held frames along
(`forget`): nothing more is built for it.

Held frames are bounded too (`MAX_HELD`): a binding stops reading a peer whose frames are
held, and a peer that still gets more than that many in is refused.

Every answer is counted per peer (requests and bytes) so that status can name the heavy
ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from ._conventions import STATS_NO_REPLY
from ._events import Event, HeadStats, Stats, Status, Timeline, TimelineRecord
from ._head_records import Peer
from ._head_scheduling import Scheduler
from ._head_wire import Wire

__all__ = ["ANSWER_BOUND", "MAX_HELD", "REQUEST_FLOOR", "Answers"]

#: Bytes of answers (or work, `REQUEST_FLOOR` a request) one pass of a peer's frames may
#: cost before the rest wait for the binding to write them: the engine's high-water mark.
ANSWER_BOUND: Final = 4 << 20
#: What a request costs at least: 64 requests a pass.
REQUEST_FLOOR: Final = 64 << 10
#: Frames held for one peer past which it is refused (a binding that keeps reading it).
MAX_HELD: Final = 1 << 16
#: Status names this many of the peers that were answered the most bytes.
HEAVY_SHOWN: Final = 3


class Answers:
    """Stats, status and timeline answers, the passes that bound them, and the tally."""

    def __init__(
        self,
        wire: Wire,
        scheduler: Scheduler,
        stats: Callable[[], HeadStats],
        status: Callable[[], str],
        bound: int = ANSWER_BOUND,
    ) -> None:
        self._wire = wire
        self._scheduler = scheduler
        self._stats = stats
        self._status = status
        self.bound = bound
        #: What the pass under way has spent; past ``bound``, ``over`` is set and the pass
        #: stops after the frame that spent it (`Head._received` reads ``over``).
        self.spent: int = 0
        self.over: bool = False
        self._held: dict[int, list[Event]] = {}  # link -> frames not handled yet
        self._packed: bytes | None = None  # everyone's timeline, for this pass's requests
        self._tally: dict[int, list[int]] = {}  # link -> [requests, bytes answered]

    # -- passes ----------------------------------------------------------------------------

    def begin(self) -> None:
        """A pass over one peer's frames begins."""
        self.spent = 0
        self.over = False
        self._packed = None

    def holding(self, link: int) -> bool:
        """Whether ``link``'s peer has frames waiting for its answers to be written."""
        return link in self._held

    def hold(self, peer: Peer, events: list[Event]) -> bool:
        """Keep ``events`` (after any held before) for the next pass; False if the peer
        was refused for sending too many while held."""
        held = self._held.setdefault(peer.link, [])
        held.extend(events)
        if len(held) > MAX_HELD:
            self._held.pop(peer.link, None)
            self._wire.refuse(
                peer,
                f"sent more than {MAX_HELD} frames while the answers to its requests "
                "waited to be read: read the answers",
            )
            return False
        return True

    def take(self, link: int) -> list[Event]:
        """The frames held for ``link`` (now no longer held)."""
        return self._held.pop(link, [])

    def forget(self, link: int) -> None:
        """``link`` is gone: its held frames and tally with it."""
        self._held.pop(link, None)
        self._tally.pop(link, None)

    def answer(self, peer: Peer, event: Event, size: int) -> None:
        self._wire.links.send(peer.link, event)
        tally = self._tally.get(peer.link)
        if tally is None:
            tally = self._tally[peer.link] = [0, 0]
        tally[0] += 1
        tally[1] += size
        self.spent += max(size, REQUEST_FLOOR)
        if self.spent >= self.bound:
            self.over = True

    # -- the requests ----------------------------------------------------------------------

    def on_stats(self, peer: Peer, event: Event) -> None:
        assert isinstance(event, Stats)
        if event.mark != STATS_NO_REPLY:  # a keepalive asks nothing
            self.answer(peer, Stats(self._stats()), 40)

    def on_status(self, peer: Peer, event: Event) -> None:
        text = self._status()
        self.answer(peer, Status(text), len(text))

    def on_timeline(self, peer: Peer, event: Event) -> None:
        """A driver's own records, taken (`TimelineLog.take`)."""
        records: tuple[TimelineRecord, ...] = ()
        owner = self._wire.numbers.get(peer.number)
        if owner is not None:
            records = self._scheduler.timeline.take(owner.link)
        self.answer(peer, Timeline(records), 8 + 84 * len(records))

    def on_all_timeline(self, peer: Peer, event: Event) -> None:
        """Everyone's records, left in place: an observer's (`TimelineLog.packed`)."""
        packed = self._packed
        if packed is None:
            packed = self._packed = self._scheduler.timeline.packed()
        self.answer(peer, Timeline(packed=packed), len(packed))

    # -- the tally -------------------------------------------------------------------------

    def heavy_lines(self) -> list[str]:
        """Status lines for the peers answered the most bytes (none under one pass)."""
        peers = self._wire.peers
        heavy = sorted(
            ((t[1], t[0], link) for link, t in self._tally.items() if t[1] >= self.bound),
            reverse=True,
        )[:HEAVY_SHOWN]
        lines = []
        for size, requests, link in heavy:
            peer = peers.get(link)
            if peer is None or peer.role is None:
                continue
            who = f"{peer.role.name.lower()} on link {link}"
            if peer.host:
                who += f" from {peer.host}"
            lines.append(f"answered {who}: {requests} requests, {size} bytes")
        return lines
