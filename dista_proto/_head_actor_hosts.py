"""Live actors on rejoining workers, and the actors a new head holds back for them.

A worker whose head link is lost keeps the actor it hosts alive, and the actor work it has
queued runs on in the order that head sent it: its state is the one every answer it gave came from, in the one order it ran the calls. When
it rejoins, its hello carries `HELLO_HOSTS_ACTOR` (the head gives it nothing meanwhile) and
an error frame marked `ERROR_HOSTS_ACTOR` names the actor after its holding. Then:

=====================================  =================================================
what the head knows of the actor        what it does with the live one
=====================================  =================================================
nothing (a new head, owner not back)   keeps it for the owner's resume, the grace at most
a restoring actor that waits for it    places the actor back on that worker
its owner resumed without creating it  kills it, checkpoints too (killed while away)
anything else (moved, or dead)         drops it: kept checkpoints if alive elsewhere
=====================================  =================================================

A driver resuming after a head restart creates its actors again (`restoring`): each waits,
within the recovery grace, for the worker that hosts it to rejoin, and only then is rebuilt
from its newest checkpoint elsewhere. Placed back, the actor answers actor-restore for
`RESTORE_NEWEST` from its live instance; the calls callers resend that it ran already are
answered from the answers its worker keeps, and those it never ran run now: no answer a
caller has is contradicted, and nothing runs twice.

While an actor waits for its host, its drivers' calls wait too: each Dista driver that
owns or calls it hears so once per wait (an error frame marked `ERROR_AWAITS_HOST`
carrying how long at most), and again when it is placed (the mark with 0), so that a
driver's log says why its calls stall instead of nothing for up to the grace.

`Hosts` decides and returns; `Actors` (which holds it) starts, kills and offers workers.
"""

from __future__ import annotations

from typing import Final

from ._conventions import ID_BITS, KILL_KEEP, awaits_host_mark
from ._events import ActorCreate, ActorKill, Error
from ._head_counts import Counts
from ._head_records import ActorRecord, ActorState, Peer
from ._head_wire import Wire
from ._lifecycle import ActorCause

__all__ = ["Hosts"]

_WAITING: Final = ActorState.WAITING
_DEAD: Final = ActorState.DEAD
#: A placeholder's registry: no worker serves it.
_NO_REGISTRY: Final = -1


def _placeholder(actor_id: int) -> ActorRecord:
    """What a worker hosting a live actor this head has no record of holds in ``actor``:
    scheduling and placement see it busy; its frames route as a free worker's."""
    record = ActorRecord(ActorCreate(actor_id, 0, b""), 0, _NO_REGISTRY, 0)
    record.state = _WAITING  # (never counted: it is in no table of the head's)
    return record


class Hosts:
    """Live actors rejoining workers host, and restoring actors waiting for their host."""

    def __init__(
        self, wire: Wire, counts: Counts, grace: int, records: dict[int, ActorRecord]
    ) -> None:
        self._wire = wire
        self._counts = counts
        self._records = records  # (read only: whether an actor lives on at this head)
        self.grace = grace
        #: Live copies rejoining workers reported, of actors no worker hosts for this head
        #: yet: actor ID -> [(worker, until when, calls it has seen)], most calls first.
        self.copies: dict[int, list[tuple[Peer, int, int]]] = {}
        #: Restoring actors waiting for their host to rejoin: actor ID -> (it, until when).
        self.awaiting: dict[int, tuple[ActorRecord, int]] = {}
        #: The drivers told an actor waits (links), until told it is placed: actor ID -> them.
        self.told: dict[int, set[int]] = {}

    @staticmethod
    def holds(worker: Peer) -> bool:
        """Whether ``worker`` holds a live copy this head has not placed (or has not heard
        which yet)."""
        actor = worker.actor
        return actor is not None and actor.registry == _NO_REGISTRY

    def reserve(self, worker: Peer) -> None:
        """A rejoining worker says it hosts a live actor: nothing goes to it until it says
        which (`reported`)."""
        worker.actor = _placeholder(0)

    def reported(
        self, worker: Peer, actor_id: int, calls: int, record: ActorRecord | None
    ) -> tuple[Peer | None, list[Peer]]:
        """``worker`` hosts ``actor_id`` alive, having seen ``calls`` calls (``record``: the
        head's, if any). The worker to place the actor back on now (it waited for one),
        and the workers left free (to offer). A copy is kept while its owner may still
        create the actor again, or while a copy placed back has not answered: of two (one a
        head before left behind, cut off) the one that has seen more is tried first, and
        the next if that one turns out stale (`ERROR_FENCED`)."""
        if self.holds(worker):
            worker.actor = None
        waits = record is not None and record.restoring and record.state is not _DEAD
        if (record is None and not self._owner_back(actor_id)) or waits:
            kept = self.copies.setdefault(actor_id, [])
            kept.append((worker, self._wire.now + self.grace, calls))
            kept.sort(key=lambda c: -c[2])
            worker.actor = _placeholder(actor_id)
            if record is not None and self.awaiting.pop(actor_id, None) is not None:
                return self.claim(record), []
            return None, []
        # Moved on (another worker hosts it now, or will), ended, or never created again.
        alive = record is not None and record.state is not _DEAD
        self._wire.links.send(worker.link, ActorKill(actor_id, KILL_KEEP if alive else 0))
        return None, [worker]

    def _owner_back(self, actor_id: int) -> bool:
        """Whether the actor's owner has resumed on this head (it created what it still
        has)."""
        wire = self._wire
        owner = wire.numbers.get(actor_id >> ID_BITS)
        return owner is not None and not owner.resuming and wire.alive(owner)

    def claim(self, actor: ActorRecord) -> Peer | None:
        """The live copy to place ``actor`` back on (the one that has seen most), if one
        rejoined; else it waits for one, the grace at most (`await_host`)."""
        kept = self.copies.get(actor.actor_id)
        while kept:
            worker, _, calls = kept.pop(0)
            # Calls ran up to there (a stale copy's too): a replay waits for their callers.
            actor.ran = max(actor.ran, calls)
            if self.holds(worker):
                worker.actor = None
            if self._wire.alive(worker):
                return worker
        return None

    def settled(self, actor_id: int) -> list[Peer]:
        """A copy was placed back: the others are stale and go (checkpoints kept)."""
        return [
            self._drop(actor_id, worker, KILL_KEEP)
            for worker, _, _ in self.copies.pop(actor_id, [])
        ]

    def await_host(self, actor: ActorRecord) -> None:
        """``actor`` waits for its host to rejoin (status says so)."""
        self._counts.move_actor(actor, ActorCause.PLACE)
        actor.since = self._wire.now
        actor.why = "waits for the worker that hosts it to rejoin (the recovery grace at most)"
        self.awaiting[actor.actor_id] = (actor, self._wire.now + self.grace)
        for link in sorted(actor.callers):  # (the owner among them)
            self.tell(actor.actor_id, link)

    def tell(self, actor_id: int, link: int) -> None:
        """Driver ``link`` owns or calls ``actor_id``: if the actor waits for its host, the
        driver hears so (once per wait), if it is Dista's (a page's driver would take the
        frame for the actor's failure)."""
        waits = self.awaiting.get(actor_id)
        peer = self._wire.peers.get(link)
        if waits is None or peer is None or not peer.secret:
            return
        told = self.told.setdefault(actor_id, set())
        if link not in told:
            told.add(link)
            left_ms = max(1, (waits[1] - self._wire.now) // 1_000_000)
            why = f"actor {actor_id:#x} waits for the worker that hosts it to rejoin"
            self._wire.links.send(link, Error(actor_id, why, awaits_host_mark(left_ms)))

    def placed(self, actor: ActorRecord, where: str) -> None:
        """``actor`` runs again (``where``): the drivers told it waited hear it waits no
        more."""
        told = self.told.pop(actor.actor_id, None)
        for link in sorted(told or ()):
            if link in self._wire.peers:
                self._wire.links.send(link, Error(actor.actor_id, where, awaits_host_mark(0)))

    def owner_resumed(self, number: int) -> list[Peer]:
        """Driver ``number`` resumed: live actors of its that it did not create again were
        killed while the head was away: they go, with their checkpoints. Their workers."""
        freed: list[Peer] = []
        for actor_id in [a for a in self.copies if a >> ID_BITS == number]:
            if not self._lives(actor_id):
                freed.extend(self._drop(actor_id, w) for w, _, _ in self.copies.pop(actor_id))
        return freed

    def _lives(self, actor_id: int) -> bool:
        """Whether this head has ``actor_id`` alive (its copies are then not ours to end)."""
        record = self._records.get(actor_id)
        return record is not None and record.state is not _DEAD

    def _drop(self, actor_id: int, worker: Peer, mark: int = 0) -> Peer:
        """``worker``'s live copy goes (with its checkpoints, unless ``mark`` keeps them)."""
        if worker.actor is not None and worker.actor.actor_id == actor_id and self.holds(worker):
            worker.actor = None
        self._wire.links.send(worker.link, ActorKill(actor_id, mark))
        return worker

    def lost(self, worker: Peer) -> None:
        """``worker`` is lost: the live copies it reported are gone with it."""
        for actor_id, kept in list(self.copies.items()):
            kept[:] = [c for c in kept if c[0] is not worker]
            if not kept:
                del self.copies[actor_id]

    # -- the pulled timer ------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        times = [c[1] for kept in self.copies.values() for c in kept]
        times.extend(t for _, t in self.awaiting.values())
        return min(times) if times else None

    def expired(self, now: int) -> tuple[list[Peer], list[ActorRecord]]:
        """Past the grace: live copies no owner came back for go (their workers, to
        offer); restoring actors whose host did not rejoin are placed anew (to place)."""
        freed: list[Peer] = []
        for actor_id, kept in list(self.copies.items()):
            gone = [c for c in kept if now >= c[1]]
            kept[:] = [c for c in kept if now < c[1]]
            forget = not kept and not self._lives(actor_id)
            freed.extend(self._drop(actor_id, w, 0 if forget else KILL_KEEP) for w, _, _ in gone)
            if not kept:
                del self.copies[actor_id]
        due = []
        for actor_id, (actor, until) in list(self.awaiting.items()):
            if now >= until:
                del self.awaiting[actor_id]
                if actor.state is _WAITING:
                    due.append(actor)
        return freed, due
