"""Drivers resuming: after a head restart, or on a new connection to this same head.

The head keeps no disk state. After a head restart a driver resumes under its old number
and sends, in order, each object it still needs (a small result or error as a result or
error frame, a result on a worker as claim, an unfinished task as the frame it first sent),
its live actors' creates and the calls it keeps, then resumed (the page).

A driver whose connection is lost (for a reason the binding does not know) is away, not
gone: what it owns (its tasks, objects and actors) stays ``recovery_grace_ns`` for it to
resume on a new connection, and only then is dropped as a lost driver's. A driver resuming
under a number this head knows (connected or away), with the epoch that number came from,
is the same driver on a new connection: the old connection is dropped and everything it
owned moves to the new one, and what it sends again that the head already has is answered
from what the head knows instead of run twice; at resumed, what it held or owned on the old
connection and did not name again (released, killed while the link was down) goes. A
resume under a number another driver holds (from another epoch) is refused. A claim from a
driver that is not resuming asks where an object it holds lives now (its fetch failed where
it was): the head answers it again.

A call to an actor this head does not know yet waits (parked) for its owner to resume and
create it again, ``recovery_grace_ns`` at most; so does a call from a driver that showed the
actor's capability before its creator did (`ActorAccess`), until the creator's actor-open
decides it. A call from a driver that may not call the actor fails at once. A driver
resuming on this same head is answered again what its old connection missed (its create's
answer, its calls', covered, that an actor is gone).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from ._conventions import HELLO_SECRET, ID_BITS, NUMBER_SPACE, at_mark
from ._credentials import RESUME_REFUSED, Credentials
from ._events import (
    ActorCall,
    ActorCreate,
    ActorOpen,
    ActorOrder,
    Claim,
    Covered,
    Error,
    Event,
    Hello,
    Result,
)
from ._head_actor_access import NO, WAIT, not_opened
from ._head_actor_requests import ActorRequests
from ._head_actors import Actors
from ._head_holdings import Holdings
from ._head_objects import Objects
from ._head_records import ActorRecord, ActorState, ObjState, Peer, TrackedObject
from ._head_wire import Wire
from ._roles import Role
from ._timeline import TimelineLog

__all__ = ["Resume"]

_PENDING: Final = ObjState.PENDING
_INLINE: Final = ObjState.INLINE
_STORED: Final = ObjState.STORED
_FAILED: Final = ObjState.FAILED
_DEAD: Final = ActorState.DEAD

#: A parked call: its driver's number, the call, whether it was answered, its position,
#: and whether it was sent again (by a resuming driver: made before the restart).
_Parked = tuple[int, ActorCall, bool, int, bool]
#: Positions are the head's call counts: u64s, a few bits fewer than that at most.
_NO_POSITION: Final = 1 << 56


class Resume:
    """Resuming drivers, drivers away, and calls parked for actors not created yet."""

    def __init__(
        self,
        wire: Wire,
        objects: Objects,
        actors: Actors,
        requests: ActorRequests,
        holdings: Holdings,
        timeline: TimelineLog,
        credentials: Credentials,
        *,
        recovery_grace_ns: int,
        exit_without_drivers: bool,
    ) -> None:
        self._wire = wire
        self._objects = objects
        self._actors = actors
        self._requests = requests  # (what a resuming driver sends that is new goes there)
        self._holdings = holdings
        self._timeline = timeline
        #: Drivers' secrets: what a resume must show (`dista_proto._credentials`).
        self.credentials = credentials
        self.recovery_grace_ns = recovery_grace_ns
        self._exit_without_drivers = exit_without_drivers
        #: Drivers whose connection was lost, that may resume: link -> (driver, until when).
        self.away: dict[int, tuple[Peer, int]] = {}
        #: Calls to an actor this head does not know, whose owner has not resumed yet:
        #: actor -> (until when, the calls).
        self.parked: dict[int, tuple[int, list[_Parked]]] = {}
        self._parked_calls: set[int] = set()  # their object IDs
        #: Where a resuming driver's kept calls ran (actor-order), until they come.
        self._positions: dict[int, int] = {}
        #: For people: drivers resumed here, and the heads before whose drivers did (the
        #: head restarts this head has seen).
        self.resumes: int = 0
        self.epochs_before: set[int] = set()

    def watching(self) -> bool:
        return bool(self.away or self.parked)

    # -- hello, away, replaced -------------------------------------------------------------

    def number(self, peer: Peer, hello: Hello) -> int:
        """The number of a driver saying hello with a resume pair, or 0 (refused)."""
        resume = hello.resume
        assert resume is not None
        number = resume.number
        if not 1 <= number < NUMBER_SPACE:
            self._wire.refuse(peer, f"driver number {number} is outside [1, 2**24)")
            return 0
        holder = self._wire.numbers.get(number)
        if holder is not None and resume.epoch != holder.epoch:
            # A driver of another head that drew the number one of ours has: giving it
            # the number would give it the other driver's objects.
            self._wire.refuse(
                peer,
                f"driver number {number} is in use by a driver of this head (epoch "
                f"{self._wire.epoch:#x}); yours was given by the head of epoch "
                f"{resume.epoch:#x}: start a new session",
            )
            return 0
        if not self._proven(peer, hello, holder):
            return 0
        if holder is not None:
            self._replace(holder, peer)
        peer.epoch = resume.epoch
        peer.resuming = True
        self.resumes += 1
        if resume.epoch != self._wire.epoch:
            if len(self.epochs_before) < 1024:
                self.epochs_before.add(resume.epoch)
            if self._wire.resumes_from is None:
                self._wire.resumes_from = self._wire.now  # a head before's drivers come back
        return number

    def _proven(self, peer: Peer, hello: Hello, holder: Peer | None) -> bool:
        """Whether ``peer``'s resume shows what only the driver it names holds: if not, it
        is refused (an error frame, a line in the head's log naming its certificate) and
        that driver keeps everything. On success ``peer`` keeps the secret."""
        resume = hello.resume
        assert resume is not None
        credentials = self.credentials
        held = None if holder is None else (holder.secret, holder.identity)
        why = credentials.resume_refusal(
            resume.number, resume.epoch, resume.secret, peer.identity, held
        )
        if why is not None:
            text = f"cannot resume driver {resume.number}: {why}: only the driver the head "
            text += "numbered may resume under its number (start a new session)"
            who = f"certificate {peer.subject}" if peer.subject else "a peer without TLS"
            self._wire.refuse(
                peer, text, f"{RESUME_REFUSED} of driver {resume.number} by {who}: {why}"
            )
            return False
        secret = resume.secret
        if not secret and holder is not None:
            secret = holder.secret
        if not secret and hello.mark & HELLO_SECRET:
            secret = credentials.secret(resume.epoch, resume.number, peer.identity)
        peer.secret = secret
        return True

    def went_away(self, peer: Peer) -> bool:
        """``peer``'s connection was lost: keep what it owns for it to resume, if it is a
        driver that may (True); a local head's last driver ends it instead."""
        wire = self._wire
        if (
            peer.role != Role.DRIVER
            or not peer.number
            or wire.numbers.get(peer.number) is not peer
            or wire.stopping
        ):
            return False
        if self._exit_without_drivers and not any(
            p.role == Role.DRIVER and p is not peer for p in wire.peers.values()
        ):
            return False
        wire.peers.pop(peer.link, None)
        self.away[peer.link] = (peer, wire.now + self.recovery_grace_ns)
        return True

    def _replace(self, old: Peer, new: Peer) -> None:
        """``new`` is ``old``'s driver on a new connection: it takes over what it owned."""
        was, now = old.link, new.link
        wire = self._wire
        wire.peers.pop(was, None)
        self.away.pop(was, None)
        wire.numbers.pop(old.number, None)
        unconfirmed = new.unconfirmed = set()
        for obj in self._objects.by_id.values():
            if obj.owner == was:
                obj.owner = now
                if obj.held:
                    unconfirmed.add(obj.oid)
                task = obj.task
                if task is not None and task.owner == was:
                    task.owner = now
        self._objects.reown(was, now)
        for actor in self._actors.records.values():
            if actor.owner == was:
                actor.owner = now
                unconfirmed.add(actor.actor_id)  # (a dead one: its news may be lost too)
            if was in actor.callers:
                actor.callers.discard(was)
                if actor.state is not _DEAD:
                    actor.callers.add(now)
                # (A dead one's news went to the old connection: the new one hears it
                # with the first call it resends.)
            for calls in (actor.calls, actor.unnumbered.values()):
                for call in calls:
                    if call.owner == was:
                        call.owner = now
            for asks in actor.pending.values():
                asks[:] = [(now if link == was else link, oid) for link, oid in asks]
        self._timeline.rename(was, now)
        self._objects.rename_tallies(was, now)
        wire.close(was, "the same driver connected again")

    def on_timer(self, now: int) -> list[Peer]:
        """Parked calls that waited out the grace fail; the drivers away that did not come
        back, for the head to drop."""
        gone = []
        for link, (driver, until) in list(self.away.items()):
            if now >= until:
                del self.away[link]
                gone.append(driver)
        for actor_id, (until, _) in list(self.parked.items()):
            if now >= until:
                self._fail_parked(actor_id)
        return gone

    # -- what a resuming driver sends again ------------------------------------------------

    def resent(self, peer: Peer, oid: int, results: int = 1) -> bool:
        """Whether ``oid`` (and the ``results - 1`` after it, a task's) is one a resuming
        ``peer`` sends again that this head has: it gets the answer the head knows (if any
        yet) and nothing runs twice."""
        if not peer.resuming:
            return False
        objects = self._objects.by_id
        mine = [
            obj
            for i in range(oid, oid + results)
            if (obj := objects.get(i)) is not None and obj.owner == peer.link
        ]
        if not mine:
            return False
        for obj in mine:
            _confirmed(peer, obj.oid)
            if obj.held:
                self.answer_again(obj)
        return True

    def answer_again(self, obj: TrackedObject) -> None:
        """Answer ``obj`` again (an actor call's with where it ran, if still kept)."""
        state = obj.state
        answered_at = self._actors.answered_at
        position = answered_at.get(obj.oid, 0) if answered_at else 0
        if position and not self._wire.told_positions(obj.owner):
            position = 0
        if state is _INLINE:
            self._wire.links.send(obj.owner, Result(obj.oid, obj.value, position))
        elif state is _STORED and obj.holder is not None:
            self._wire.locate(obj, obj.holder, obj.holder.address, position)
        elif state is _FAILED:
            mark = at_mark(position) if position else 0
            self._wire.links.send(obj.owner, Error(obj.oid, obj.error, mark))

    def on_driver_answer(self, peer: Peer, event: Result | Error) -> None:
        """A resuming driver's result or error: an object it has, for tasks to take."""
        oid = event.object_id
        objects = self._objects
        if self.resent(peer, oid):
            obj = objects.by_id[oid]
            if isinstance(event, Error) and obj.task is not None and obj.state is _PENDING:
                # It failed it while its link was down (a cancel the head never saw).
                objects.cancel(peer, oid, False)
            return
        if not objects.check_new_ids(peer, oid, 1):
            return
        obj = objects.track(oid, peer.link)
        if isinstance(event, Result):
            objects.keep_inline(obj, event.value)  # (what it had before: not refused at its cap)
        else:
            objects.keep_error(obj, event.message)

    def on_claim(self, peer: Peer, event: Claim) -> None:
        """A resuming driver's claim; or, from one that is not resuming, the question where
        an object it holds lives now (a fetch failed where it was): answered again."""
        oid = event.object_id
        objects = self._objects
        if not peer.resuming:
            obj = objects.get(oid)
            if obj is None or obj.owner != peer.link or not obj.held:
                self._wire.links.send(
                    peer.link, Error(oid, f"object {oid:#x} is unknown to the head")
                )
            else:
                self.answer_again(obj)  # (one waiting for its worker is answered then)
            return
        if self.resent(peer, oid) or not objects.check_new_ids(peer, oid, 1):
            return
        self._holdings.claim(objects.track(oid, peer.link))

    def on_resumed(self, peer: Peer) -> None:
        """``peer`` sent everything it still needs: what it did not claim is free, and, on
        this same head, what it held or owned on its old connection and did not name again
        (it released or killed it while the link was down) goes."""
        peer.resuming = False
        unconfirmed, peer.unconfirmed = peer.unconfirmed, None
        for oid in sorted(unconfirmed or ()):
            actor = self._actors.records.get(oid)
            if actor is not None:
                if actor.owner != peer.link:
                    continue
                if actor.state is not _DEAD:
                    actor.ending = f"actor {oid:#x} was killed by {peer.name}"
                    self._actors.end(actor, actor.ending)
                else:  # it ended while the link was down: the news went with the old one
                    self._wire.links.send(peer.link, Error(oid, actor.why))
                continue
            obj = self._objects.get(oid)
            if obj is not None and obj.owner == peer.link and obj.held:
                obj.held = False
                self._objects.unref(obj)
        number = peer.number
        for actor_id in [a for a in self.parked if a >> ID_BITS == number]:
            self._fail_parked(actor_id)  # its owner did not create it again
        self._actors.owner_resumed(number)  # live ones it did not create again go too
        self._holdings.driver_resumed(number)

    # -- actors ----------------------------------------------------------------------------

    def on_actor_create(self, peer: Peer, event: ActorCreate) -> None:
        known = self._actors.records.get(event.object_id)
        if peer.resuming and known is not None:
            # This head has it: the same driver on a new connection, which may have missed
            # how its create went (the answer was on its way on the old one).
            _confirmed(peer, known.actor_id)
            if known.state is _DEAD:
                self._wire.links.send(peer.link, Error(known.actor_id, known.why))
            elif known.announced:
                self._wire.links.send(peer.link, Result(known.actor_id, b""))
            return
        actor = self._requests.create(peer, event)
        if actor is not None:
            self._actors.access.created(actor)
            self._unpark_calls(actor)

    def on_actor_open(self, peer: Peer, event: ActorOpen) -> None:
        """An actor's capability: the creator's decides the calls held for it. One for an
        actor this head does not know is kept only while its creator may still create it,
        the recovery grace at most, as calls to it are (`_park_call`)."""
        actor_id = event.object_id
        if actor_id not in self._actors.records and actor_id >> ID_BITS != peer.number:
            wire = self._wire
            owner = wire.numbers.get(actor_id >> ID_BITS)
            if owner is not None and not owner.resuming and wire.alive(owner):
                return  # its creator is here and has resumed: no such actor
            self.parked.setdefault(actor_id, (wire.now + self.recovery_grace_ns, []))
        if self._actors.access.open(peer, event):
            self._unpark_calls(self._actors.records[event.object_id])

    def routes(self) -> dict[type[Event], Callable[[Peer, Any], None]]:
        """What drivers send that a resume decides first (a resuming driver's frames are
        answered from what this head knows): creates, calls, opens, answers, and where
        kept calls ran."""
        return {
            ActorCreate: self.on_actor_create,
            ActorCall: self.on_actor_call,
            ActorOpen: self.on_actor_open,
            ActorOrder: self.on_actor_order,
            Result: self.on_driver_answer,
            Error: self.on_driver_answer,
        }

    def on_actor_order(self, peer: Peer, event: ActorOrder) -> None:
        """Where a resuming driver's kept calls to an actor ran (the positions their
        answers carried), just before it sends them again: a replay from a checkpoint
        follows that order (`Actors.resume_calls`), whatever order callers resume in."""
        if not peer.resuming:
            return  # (the calls this head takes get their places here)
        positions = self._positions
        for oid, position in event.positions:
            if oid >> ID_BITS == peer.number and 0 < position < _NO_POSITION:
                positions[oid] = position

    def on_actor_call(self, peer: Peer, event: ActorCall) -> None:
        """A call: one from a driver that may not call the actor fails, one whose right to
        call is not known yet waits; what a resuming driver sends again is answered from
        what this head knows; one to an actor not created yet may wait for it; the rest is
        `Actors`'."""
        oid = event.object_id
        position = self._positions.pop(oid, 0) if self._positions else 0
        actor = self._actors.records.get(event.actor_id)
        send = self._wire.links.send
        if actor is not None and actor.state is not _DEAD:
            verdict = self._actors.access.verdict(peer, actor)
            if verdict == NO:
                if self._objects.check_new_ids(peer, oid, 1):
                    refused = self._objects.track(oid, peer.link)
                    self._objects.fail_object(refused, not_opened(actor.actor_id))
                return
            if verdict == WAIT:
                self._park_call(peer, event, True, position)
                return
        if peer.resuming and actor is not None and actor.state is not _DEAD:
            obj = self._objects.get(oid)
            if obj is not None and obj.owner == peer.link:
                _confirmed(peer, oid)
            if oid <= actor.newest_from.get(peer.number, 0):
                # A call this head took already: the same driver, reconnected, which may
                # have missed its answer and that a checkpoint covers it.
                if obj is not None and obj.owner == peer.link and obj.held:
                    self.answer_again(obj)
                newest = actor.covered_of.get(peer.number, 0)
                if oid <= newest:
                    send(peer.link, Covered(actor.actor_id, newest))
                return
            if obj is not None and obj.owner == peer.link and obj.task is None:
                # Answered before the restart: it runs again for the actor's state only.
                self._requests.take_call(peer, actor, event, True, position)
                return
        if actor is None and self._park_call(peer, event, position=position):
            return  # its owner has not resumed yet: it may create it
        if peer.resuming:
            obj = self._objects.get(oid)
            if obj is not None and obj.owner == peer.link:
                # A call to a gone actor this head answered already: answer it again, and
                # say again that the actor is gone (it may have ended while the caller's
                # link was down, and the caller would keep its calls for good).
                _confirmed(peer, oid)
                if obj.held:
                    self.answer_again(obj)
                # (Unknown here: its owner resumed without it, having killed it.)
                why = actor.why if actor is not None else "it is unknown to the head"
                send(peer.link, Error(event.actor_id, why))
                return
        self._requests.call(peer, event, position)

    def _park_call(
        self, peer: Peer, event: ActorCall, held: bool = False, position: int = 0
    ) -> bool:
        """A call to an actor this head does not know: if its owner may still create it
        (a driver of the head before that has not resumed yet, or one that is away), it
        waits for that, ``recovery_grace_ns`` at most; ``held``: a call to a known actor
        that waits for its creator's capability. True if parked."""
        actor_id = event.actor_id
        wire = self._wire
        owner = wire.numbers.get(actor_id >> ID_BITS)
        if not held and owner is not None and not owner.resuming and wire.alive(owner):
            return False  # its owner is here and has resumed: unknown indeed
        oid = event.object_id
        obj = self._objects.get(oid)
        mine = obj is not None and obj.owner == peer.link
        if oid in self._parked_calls:
            # Parked already: the same driver sending it again (its object perhaps released
            # and forgotten meanwhile: it would be parked, and run, twice).
            if mine:
                _confirmed(peer, oid)
            return True
        answered = peer.resuming and mine and obj is not None and obj.task is None
        if not answered:
            if not self._objects.check_new_ids(peer, oid, 1):
                return True
            self._objects.track(oid, peer.link)
        else:
            _confirmed(peer, oid)
        if actor_id not in self.parked:
            self.parked[actor_id] = (wire.now + self.recovery_grace_ns, [])
        # (Whether it is sent again is kept for when it is taken: its caller's resume may
        # be over by then, and a call not sent again was made after the restart.)
        parked = (peer.number, event, answered, position, peer.resuming)
        self.parked[actor_id][1].append(parked)
        self._parked_calls.add(oid)
        return True

    def _unpark_calls(self, actor: ActorRecord) -> None:
        """``actor`` was created (or its creator's capability came): the calls that waited
        for it are taken, in order; those whose caller's capability cannot be checked yet
        wait on; those from callers that may not call it fail."""
        parked = self.parked.pop(actor.actor_id, None)
        if parked is None:
            return
        still: list[_Parked] = []
        waiting: set[int] = set()
        access = self._actors.access
        for number, event, answered, position, resent in parked[1]:
            oid = event.object_id
            caller = self._wire.numbers.get(number)
            if caller is None:
                self._parked_calls.discard(oid)
                continue  # its driver is gone (and what it owned)
            verdict = access.verdict(caller, actor)
            if verdict == WAIT or number in waiting:
                waiting.add(number)  # (each caller's calls keep their order)
                still.append((number, event, answered, position, resent))
                continue
            self._parked_calls.discard(oid)
            obj = self._objects.get(oid)
            if verdict == NO:
                if obj is not None and obj.state is _PENDING and obj.task is None:
                    self._objects.fail_object(obj, not_opened(actor.actor_id))
                continue
            if obj is None or obj.owner != caller.link:
                answered = True  # released meanwhile: it runs for the actor's state only
            self._requests.take_call(caller, actor, event, answered, position, resent)
        if still:
            self.parked[actor.actor_id] = (parked[0], still)

    def _fail_parked(self, actor_id: int) -> None:
        """No actor-create (or no capability from its creator) came for ``actor_id``: the
        calls that waited for it fail."""
        _, calls = self.parked.pop(actor_id, (0, []))
        self._actors.access.forget_early(actor_id)
        known = actor_id in self._actors.records  # (they waited for its capability)
        why = not_opened(actor_id) if known else "it is unknown to the head"
        told = set()
        for number, event, answered, _, _ in calls:
            oid = event.object_id
            self._parked_calls.discard(oid)
            obj = self._objects.get(oid)
            if obj is not None and not answered and obj.state is _PENDING and obj.task is None:
                gone = why if known else f"actor {actor_id:#x} is gone: {why}"
                self._objects.fail_object(obj, gone)
            elif obj is not None and obj.held:
                self.answer_again(obj)  # resent (the driver may not have its answer)
            caller = self._wire.numbers.get(number)
            if caller is not None and number not in told:
                told.add(number)  # so that it keeps its calls no longer
                self._wire.links.send(caller.link, Error(actor_id, why))


def _confirmed(peer: Peer, oid: int) -> None:
    """A resuming ``peer`` named ``oid`` (an object or an actor): it still has it."""
    if peer.unconfirmed is not None:
        peer.unconfirmed.discard(oid)
