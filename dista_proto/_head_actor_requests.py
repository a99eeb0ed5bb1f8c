"""What drivers ask of actors: create one, call it, kill it, checkpoint it.

Each request is checked (IDs numbered for the driver, who may call and kill which actor:
`ActorAccess`) and handed to `Actors`, which runs the actor's life on its workers. Calls
are numbered 1, 2, ... in the order they reach the head, so each caller's keep the order
it sent them. What a resuming driver sends again is sorted out by `Resume` first.
"""

from __future__ import annotations

from typing import Final

from ._conventions import ID_BITS, KILL_AFTER_CALLS, KILL_FORCE, kept_size
from ._events import ActorCall, ActorCreate, ActorKill, Checkpoint, Error, Result, Stop
from ._head_actor_access import MAY, not_opened
from ._head_actor_order import NEW
from ._head_actors import Actors
from ._head_counts import Counts
from ._head_objects import Objects
from ._head_records import ActorRecord, ActorState, CallRecord, Peer
from ._head_scheduling import Scheduler
from ._head_wire import Wire
from ._lifecycle import CallCause

__all__ = ["ActorRequests"]

_WAITING: Final = ActorState.WAITING
_STARTING: Final = ActorState.STARTING
_READY: Final = ActorState.READY
_DEAD: Final = ActorState.DEAD


class ActorRequests:
    """Drivers' actor-create, actor-call, actor-kill and checkpoint asks."""

    def __init__(
        self, wire: Wire, counts: Counts, objects: Objects, scheduler: Scheduler, actors: Actors
    ) -> None:
        self._wire = wire
        self._counts = counts
        self._objects = objects
        self._scheduler = scheduler
        self._actors = actors

    def create(self, peer: Peer, event: ActorCreate) -> ActorRecord | None:
        """A new actor (None if its ID is refused)."""
        if not self._objects.check_new_ids(peer, event.object_id, 1):
            return None
        registry = self._scheduler.registry_of(event.task_id, peer)
        actor = ActorRecord(event, peer.link, registry, self._wire.now)
        self._actors.records[actor.actor_id] = actor
        if peer.resuming:
            self._actors.start_restoring(actor)  # after a head restart: it lives on
        else:
            self._actors.place(actor)
        return actor

    def call(self, peer: Peer, event: ActorCall, position: int = 0) -> None:
        """A new call (what a resuming driver sends again went to `Resume` first)."""
        oid = event.object_id
        if not self._objects.check_new_ids(peer, oid, 1):
            return
        obj = self._objects.track(oid, peer.link)
        actor = self._actors.records.get(event.actor_id)
        if actor is None or actor.state is _DEAD:
            why = actor.why if actor is not None else "it is unknown to the head"
            if actor is None or peer.link not in actor.callers:
                # A caller that never heard the actor is gone keeps this call until a
                # checkpoint covers it, which none will: tell it, as its callers were told.
                # (One this head never knew, after a restart, tells it each time.)
                if actor is not None:
                    actor.callers.add(peer.link)
                self._wire.links.send(peer.link, Error(event.actor_id, why))
            # A failed object the driver releases as any other (not an error frame).
            self._objects.fail_object(obj, f"actor {event.actor_id:#x} is gone: {why}")
            return
        self.take_call(peer, actor, event, False, position)

    def take_call(
        self,
        peer: Peer,
        actor: ActorRecord,
        event: ActorCall,
        answered: bool,
        position: int = 0,
        resent: bool | None = None,
    ) -> None:
        """Number ``event`` and send it on; one ``answered`` before (a resuming driver's)
        runs for the actor's state only; ``position``: where a head before ran it;
        ``resent``: sent again by a resuming driver (default: whether ``peer`` resumes; a
        parked call is taken later, its caller's resume perhaps over). One the checkpoint
        restored after a head restart has takes no place (`CoveredCalls`)."""
        if actor.restored_covers and self._actors.covers.take(peer, actor, event, answered):
            return
        actor.seq += 1
        call = CallRecord(actor.seq, event.object_id, event.task_id, event.argument, peer.link)
        if resent is None:
            resent = peer.resuming
        if position:
            call.position = position
        elif (actor.restoring or actor.gapped) and not resent:
            call.position = NEW  # made after the restart: it ran nowhere before
        if answered:
            self._counts.move_call(call, CallCause.REPLAY)
        else:
            self._counts.move_call(call, CallCause.TAKE)
            actor.by_oid[call.oid] = call
        actor.calls.append(call)
        actor.kept_bytes += kept_size(event.argument)
        actor.callers.add(peer.link)
        actor.newest_from[peer.number] = event.object_id
        if actor.restoring and actor.state is _WAITING:
            self._actors.hosts.tell(actor.actor_id, peer.link)  # why its calls wait
        if actor.gapped:
            self._actors.replays.reorder(actor)  # it may bring the call a replay waits for
        elif (actor.state is _STARTING or actor.state is _READY) and not actor.restoring:
            self._actors.send_calls(actor)
        if actor.kept_bytes > self._actors.keep_bytes and self._actors.checkpoints.over_budget(
            actor
        ):
            self._actors.cannot_rebuild(actor)

    def kill(self, peer: Peer, event: ActorKill) -> tuple[Peer, str] | None:
        """End an actor, now or after its calls; a force-kill also stops its worker's
        process: that worker and why, for the head to lose (it owns losing peers)."""
        actor = self._actors.records.get(event.object_id)
        if actor is None or actor.state is _DEAD:
            return None
        if self._actors.access.verdict(peer, actor) != MAY:
            self._actors.access.refuse(peer, actor.actor_id)  # the actor lives on
            return None
        if event.mark == KILL_AFTER_CALLS:
            # Its last handle went: the calls already made run first, as in Ray.
            why = f"actor {actor.actor_id:#x} ended: {peer.name} dropped its last handle"
            actor.ending = why
            if not actor.by_oid:
                self._actors.end(actor, why)
            return None
        why = f"actor {actor.actor_id:#x} was killed by {peer.name}"
        worker = actor.worker
        stopped = None
        if (
            event.mark == KILL_FORCE
            and worker is not None
            and actor.state is not _WAITING
            and self._wire.alive(worker)
        ):
            # A method stuck in C code: end its process (a supervisor replaces it).
            worker.actor = None
            actor.worker = None
            stopped = (worker, f"stopped to force-kill actor {actor.actor_id:#x}")
            self._wire.links.send(worker.link, Stop())
            self._wire.close(worker.link, stopped[1])
        actor.ending = why  # (a kill: its drivers hear it once its checkpoints surely go)
        self._actors.end(actor, why)
        return stopped

    def ask_checkpoint(self, peer: Peer, event: Checkpoint) -> None:
        oid = event.object_id
        actor = self._actors.records.get(event.actor_id or 0)
        send = self._wire.links.send
        if oid >> ID_BITS != peer.number:
            why = f"checkpoint ID {oid:#x} is not numbered for driver {peer.number}"
            send(peer.link, Error(oid, why))
        elif actor is None or actor.state is _DEAD:
            why = actor.why if actor is not None else "it is unknown to the head"
            send(peer.link, Error(oid, f"actor {event.actor_id or 0:#x}: {why}"))
        elif self._actors.access.verdict(peer, actor) != MAY:
            send(peer.link, Error(oid, not_opened(actor.actor_id)))
        elif actor.seq == actor.covered:
            send(peer.link, Result(oid, b""))  # one covering all is written
        else:
            self._actors.checkpoints.ask(actor, (peer.link, oid))
