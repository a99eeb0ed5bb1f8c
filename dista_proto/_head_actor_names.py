"""Named actors: a name per actor, looked up by any driver of the cluster, and who holds it.

Theory of operation
-------------------
A driver creating a named actor sends Dista's actor-name (the actor's ID, a request ID,
the name) right before its actor-create and actor-open. A name held by a live actor (or
reserved for one on its way) is taken: the request gets an error frame saying so, and the
actor-create that follows for that actor is refused with the same text (nothing is built).
A free name is reserved for the actor at once and the request answered with an empty
result; the actor-create and actor-open that follow complete it.

Actor-lookup (a request ID, a name) is answered with a result carrying the actor's ID, type
ID and capability (`LOOKUP_ANSWER`): a lookup is an opening, so the asker's number joins
the actor's ``opened`` (it may call and kill it, as a holder of a handle may). A name not
known is an error frame, except on a head that restarted (the asker's number came from an
older head: its creator may not have resumed yet), where the lookup waits for the name,
``recovery_grace_ns`` at most; so does one for a name reserved but not complete yet.

Lifetime: a named actor is held by its creator and by every driver that looked it up. A
holder dropping its last handle (actor-kill marked `KILL_AFTER_CALLS`) or leaving lets go
of it; the actor ends (after the calls made, as an unnamed one whose last handle went) when
the last holder lets go, whoever it is, or at once on any holder's plain kill. The creator
leaving while others hold it does not end it (`driver_left`, asked by `Actors.ends_with`).

After a head restart the new head knows nothing: the creator sends each named actor's
actor-name again after its actor-create and actor-open (request 0: no answer), and each
other holder an actor-lookup with request 0 (it still holds the actor; no answer).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from ._conventions import ID_BITS, KILL_AFTER_CALLS
from ._events import (
    ActorCreate,
    ActorKill,
    ActorLookup,
    ActorName,
    ActorOpen,
    Error,
    Event,
    Result,
)
from ._head_actors import Actors
from ._head_records import ActorRecord, ActorState, Peer
from ._head_resume import Resume
from ._head_wire import Wire
from ._roles import Role

__all__ = ["LOOKUP_ANSWER", "ActorNames"]

#: A lookup's answer: the actor's ID (u64), its type ID (u64), its capability (16 bytes).
LOOKUP_ANSWER: Final = "<QQ16s"
#: Lookups waiting for one name, at most (more get "unknown" at once).
WAITING_PER_NAME: Final = 1_024
#: Creates to refuse (their names were taken) kept at most, the oldest forgotten first.
REFUSED_KEPT: Final = 4_096
#: Names waited for at most (a restarted head's lookups of names not claimed yet).
NAMES_WAITED: Final = 4_096

_DEAD: Final = ActorState.DEAD
#: A waiting lookup: the asker's number, its request ID.
_Waiter = tuple[int, int]


class ActorNames:
    """Every name the head knows, the actors' holders, and lookups waiting for a name."""

    def __init__(
        self, wire: Wire, actors: Actors, resume: Resume, kill: Callable[[Peer, Any], None]
    ) -> None:
        self._wire = wire
        self._actors = actors
        self._resume = resume
        self._kill = kill  # the head's own actor-kill route
        self.by_name: dict[str, int] = {}  # name -> actor ID (live, or reserved)
        self.names: dict[int, str] = {}  # actor ID -> its name
        self._reserved: dict[int, int] = {}  # reserved actor ID -> the request to answer
        self._refused: dict[int, str] = {}  # actor ID -> why its coming create is refused
        #: Named actor -> the numbers of the drivers holding it (its creator, lookers-up).
        self.holders: dict[int, set[int]] = {}
        #: Name -> (until when, the lookups waiting for it).
        self.waiting: dict[str, tuple[int, list[_Waiter]]] = {}
        actors.keeps = self.driver_left

    def routes(self) -> dict[type[Event], Callable[[Peer, Any], None]]:
        """The driver routes this part takes, or goes before (the head adds them)."""
        return {
            ActorName: self.on_name,
            ActorLookup: self.on_lookup,
            ActorCreate: self.on_actor_create,
            ActorOpen: self.on_actor_open,
            ActorKill: self.on_actor_kill,
        }

    # -- naming ----------------------------------------------------------------------------

    def _live(self, actor_id: int) -> ActorRecord | None:
        actor = self._actors.records.get(actor_id)
        return actor if actor is not None and actor.state is not _DEAD else None

    def _holding(self, name: str) -> int | None:
        """The actor holding ``name`` now (live, or reserved), or None (it is free)."""
        actor_id = self.by_name.get(name)
        if actor_id is None:
            return None
        if actor_id in self._reserved or self._live(actor_id) is not None:
            return actor_id
        self._forget(actor_id)  # it ended: the name is free again
        return None

    def on_name(self, peer: Peer, event: ActorName) -> None:
        actor_id, name, request = event.object_id, event.name, event.request
        send = self._wire.links.send
        if actor_id >> ID_BITS != peer.number or (request and request >> ID_BITS != peer.number):
            why = f"actor-name: actor {actor_id:#x} and request {request:#x} must be yours"
            send(peer.link, Error(request or actor_id, why))
            return
        holder = self._holding(name)
        if holder == actor_id:  # sent again (a resume on this same head): it has it
            if request:
                send(peer.link, Result(request, b""))
            return
        if actor_id in self.names:
            if request:
                send(peer.link, Error(request, f"actor {actor_id:#x} is named already"))
            return
        if holder is not None:
            why = f"the actor name {name!r} is taken by actor {holder:#x}: choose another"
            why += ", or look it up with get_actor"
            if request:
                send(peer.link, Error(request, why))
            if actor_id not in self._actors.records:
                if len(self._refused) >= REFUSED_KEPT:
                    del self._refused[next(iter(self._refused))]
                self._refused[actor_id] = why
            return
        self.by_name[name] = actor_id
        self.names[actor_id] = name
        self.holders.setdefault(actor_id, set()).add(peer.number)
        actor = self._actors.records.get(actor_id)
        if actor is None or actor.capability is None:
            self._reserved[actor_id] = request  # complete at its create and open
        if request:
            send(peer.link, Result(request, b""))
        if actor is not None and actor.capability is not None:
            self._complete(actor)

    def on_actor_create(self, peer: Peer, event: ActorCreate) -> None:
        why = self._refused.pop(event.object_id, None)
        if why is not None and event.object_id >> ID_BITS == peer.number:
            self._wire.links.send(peer.link, Error(event.object_id, why))
            return
        self._resume.on_actor_create(peer, event)

    def on_actor_open(self, peer: Peer, event: ActorOpen) -> None:
        self._resume.on_actor_open(peer, event)
        actor = self._actors.records.get(event.object_id)
        if event.object_id in self._reserved and actor is not None and actor.capability:
            self._complete(actor)

    def _complete(self, actor: ActorRecord) -> None:
        """``actor`` is created and its capability known: lookups waiting for it are answered."""
        self._reserved.pop(actor.actor_id, None)
        name = self.names[actor.actor_id]
        _, waiters = self.waiting.pop(name, (0, []))
        for number, request in waiters:
            peer = self._wire.numbers.get(number)
            if peer is not None and peer.link in self._wire.peers:
                self._answer(peer, request, actor)

    # -- lookups ---------------------------------------------------------------------------

    def on_lookup(self, peer: Peer, event: ActorLookup) -> None:
        request, name = event.object_id, event.name
        if request and request >> ID_BITS != peer.number:
            why = f"actor-lookup: request {request:#x} is not numbered for driver {peer.number}"
            self._wire.links.send(peer.link, Error(request, why))
            return
        actor_id = self._holding(name)
        actor = self._live(actor_id) if actor_id is not None else None
        if actor is not None and actor.capability is not None:
            self._answer(peer, request, actor)
            return
        # Reserved and on its way, or a restarted head whose creator may resume yet.
        if actor_id is not None or peer.epoch != self._wire.epoch:
            until, waiters = self.waiting.get(name, (0, []))
            if len(waiters) < WAITING_PER_NAME and (waiters or len(self.waiting) < NAMES_WAITED):
                if not waiters:
                    until = self._wire.now + self._resume.recovery_grace_ns
                waiters.append((peer.number, request))
                self.waiting[name] = (until, waiters)
                return
        if request:
            self._wire.links.send(peer.link, Error(request, _unknown(name)))

    def _answer(self, peer: Peer, request: int, actor: ActorRecord) -> None:
        assert actor.capability is not None
        actor.opened.add(peer.number)  # a lookup is an opening
        self.holders.setdefault(actor.actor_id, set()).add(peer.number)
        if request:
            value = actor.actor_id.to_bytes(8, "little") + actor.type_id.to_bytes(8, "little")
            self._wire.links.send(peer.link, Result(request, value + actor.capability))

    # -- holders and the end ---------------------------------------------------------------

    def on_actor_kill(self, peer: Peer, event: ActorKill) -> None:
        """A holder's last handle went: the actor lives on while another holds it."""
        holders = self.holders.get(event.object_id)
        if event.mark == KILL_AFTER_CALLS and holders is not None and peer.number in holders:
            holders.discard(peer.number)
            if holders:
                return
        self._kill(peer, event)

    def driver_left(self, driver: Peer) -> set[int]:
        """``driver`` is gone for good: it holds nothing now. The named actors it created
        that others still hold (`Actors.ends_with` keeps them); those it held last, not its
        own, end here."""
        if driver.role != Role.DRIVER and driver.role != Role.CLIENT:
            return set()
        number = driver.number
        kept: set[int] = set()
        for actor_id, holders in list(self.holders.items()):
            mine = actor_id >> ID_BITS == number
            if number not in holders and not mine:
                continue
            holders.discard(number)
            actor = self._live(actor_id)
            if actor is None:
                if actor_id not in self._reserved:
                    self._forget(actor_id)  # it ended: its name is free
            elif holders:
                if mine:
                    kept.add(actor_id)
            elif not mine:
                self._actors.end(actor, f"actor {actor_id:#x} ended: its last holder left")
        for actor_id in [a for a in self._reserved if a >> ID_BITS == number]:
            if actor_id not in self._actors.records:
                self._forget(actor_id)  # reserved, never created
        for actor_id in [a for a in self._refused if a >> ID_BITS == number]:
            del self._refused[actor_id]
        return kept

    def _forget(self, actor_id: int) -> None:
        name = self.names.pop(actor_id, None)
        self._reserved.pop(actor_id, None)
        self.holders.pop(actor_id, None)
        if name is not None and self.by_name.get(name) == actor_id:
            del self.by_name[name]

    # -- the pulled timer ------------------------------------------------------------------

    def next_deadline(self) -> int | None:
        return min((until for until, _ in self.waiting.values()), default=None)

    def on_timer(self, now: int) -> None:
        """Lookups that waited out the grace: the name is unknown."""
        for name, (until, waiters) in list(self.waiting.items()):
            if now < until:
                continue
            del self.waiting[name]
            for number, request in waiters:
                peer = self._wire.numbers.get(number)
                if request and peer is not None and peer.link in self._wire.peers:
                    self._wire.links.send(peer.link, Error(request, _unknown(name)))


def _unknown(name: str) -> str:
    return f"no actor named {name!r} is alive in this cluster (see Cls.options(name=...))"
