"""The head's actors: calls in order, answers, restore, and their end.

Where an actor goes is `Placement`'s choice; live actors of rejoining workers are `Hosts'`;
checkpoints and the calls kept until one covers them are `Checkpoints'`. Calls are
numbered 1, 2, ... as they reach the head (each caller's in its order) and sent to the
actor's worker at once; it runs them one at a time, in order.

A lost worker's actor starts again elsewhere: actor-restore from the head's restore point
(actor-create without one), then every kept call in order; one answered before runs for
the state only. ``max_retries + 1`` workers lost in a row without an answer, or kept calls
cut, give it up. After a head restart a resuming driver's create is placed back on the
worker where the actor lives on, or restored from its newest checkpoint (`restoring`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Final

from ._conventions import (
    ERROR_COVERED,
    ERROR_FENCED,
    ERROR_NO_CHECKPOINT,
    KILL_KEEP,
    RESTORE_NEWEST,
    hosted_calls,
)
from ._encode import actor_call_frame
from ._events import ActorKill, ActorRestore, Checkpointed, Error, Event, Result, Stored
from ._head_actor_access import ActorAccess
from ._head_actor_covers import CoveredCalls, read_covers
from ._head_actor_hosts import Hosts
from ._head_actor_order import Replays
from ._head_actor_placement import Placement
from ._head_actor_stores import Stores
from ._head_checkpoints import Checkpoints
from ._head_counts import Counts
from ._head_objects import Copies, Objects
from ._head_records import ActorRecord, ActorState, Peer
from ._head_scheduling import Scheduler
from ._head_wire import Wire
from ._lifecycle import ActorCause, CallCause
from ._roles import Role

__all__ = ["Actors"]

#: Checkpoint frames an actor may have on their way: a periodic one falling due beyond
#: them holds the calls after it back, so that with calls coming faster than checkpoints
#: are written, a checkpoint still follows every ``checkpoint_every`` calls (what a restore
#: replays stays bounded), and a worker keeps at most this many more on disk.
CHECKPOINTS_IN_FLIGHT: Final = 2
#: Ended actors the head remembers (so that a late call hears why), the oldest forgotten.
DEAD_ACTORS_KEPT: Final = 10_000

_WAITING: Final = ActorState.WAITING
_STARTING: Final = ActorState.STARTING
_READY: Final = ActorState.READY
_DEAD: Final = ActorState.DEAD


class Actors:
    """Every actor the head knows, live and dead (the newest `DEAD_ACTORS_KEPT` of those)."""

    def __init__(
        self,
        wire: Wire,
        counts: Counts,
        objects: Objects,
        scheduler: Scheduler,
        copies: Copies,
        *,
        records: dict[int, ActorRecord],
        max_retries: int,
        keep_bytes: int,
        recovery_grace_ns: int,
    ) -> None:
        self._wire = wire
        self._counts = counts
        self._objects = objects
        self._scheduler = scheduler
        self._copies = copies
        self.records = records  # actor ID -> its record (`Objects` reads the IDs)
        self.max_retries = max_retries
        #: Where each answered call no checkpoint covers yet ran (its place in its actor's
        #: order): an answer given again (a reconnect, a claim) says it too.
        self.answered_at: dict[int, int] = {}
        self.checkpoints: Checkpoints = Checkpoints(wire, keep_bytes, self.answered_at)
        #: Calls the checkpoint a restored actor came back from includes (after a restart).
        self.covers: CoveredCalls = CoveredCalls(wire, objects, counts, self.answered_at)
        self.access: ActorAccess = ActorAccess(wire, records)  # who may call and kill which actor
        self.placement: Placement = Placement(wire, counts, scheduler)
        #: The live actors of rejoining workers.
        self.hosts: Hosts = Hosts(wire, counts, recovery_grace_ns, records)
        self._dead: deque[int] = deque()  # ended actors whose records stay, oldest first
        self.stores: Stores = Stores(wire, self.hosts.holds)  # numbered builds; forgets
        self.replays: Replays = Replays(wire, self.hosts.grace, self.send_calls)  # their order
        #: A driver left: the actors it made that others still hold (`ActorNames`).
        self.keeps: Callable[[Peer], set[int]] = lambda driver: set()

    @property
    def keep_bytes(self) -> int:
        return self.checkpoints.keep_bytes

    def start_restoring(self, actor: ActorRecord) -> None:
        """A resuming driver created ``actor`` again after a head restart: it lives on, on
        the worker that hosted it (placed back there once it rejoins, the grace at most),
        or in its checkpoints."""
        actor.restoring = True
        host = self.hosts.claim(actor)
        if host is None:
            self.hosts.await_host(actor)
        else:
            self._counts.move_actor(actor, ActorCause.PLACE)
            self.start_on(actor, host)

    # -- placement (`Placement` chooses) ----------------------------------------------------

    def place(self, actor: ActorRecord) -> None:
        """Start ``actor`` on a free worker, keep the least busy one for it, or wait."""
        worker = self.placement.choose(actor)
        if worker is not None:
            self.start_on(actor, worker)

    def place_waiting(self) -> None:
        """A worker came or was freed: place the actors that wait, oldest first."""
        placement = self.placement
        for actor, worker in placement.due():
            self.start_on(actor, worker)
        for actor in list(self.records.values()):
            kept = actor.worker
            if actor.state is _WAITING and kept is not None and kept.running:
                # Kept a busy worker for it: a worker with nothing to do is better.
                free = placement.better(actor)
                if free is not None:
                    kept.actor = None
                    self.start_on(actor, free)
                    self._scheduler.make_idle(kept)
                    self._scheduler.pump(kept.registry)

    def kept_for(self, worker: Peer) -> bool:
        """``worker``'s last task ended: start the actor kept for it; True if one is."""
        actor = worker.actor
        if actor is None:
            return False
        if actor.state is _WAITING and not worker.running and not self.hosts.holds(worker):
            self.start_on(actor, worker)
        return True

    def start_on(self, actor: ActorRecord, worker: Peer) -> None:
        """Build ``actor`` on ``worker`` and send it every kept call again, in order."""
        worker.actor = actor
        actor.worker = worker
        actor.moving = 0
        self._counts.move_actor(actor, ActorCause.START)
        actor.why = ""
        if actor.restoring:
            # After a head restart: the newest checkpoint there is, whose answer says what
            # it covers (`_restored` sends the calls then).
            self.stores.build(worker, ActorRestore(actor.actor_id, actor.type_id, RESTORE_NEWEST))
            return
        if actor.covered >= 0:
            self.stores.build(worker, ActorRestore(actor.actor_id, actor.type_id, actor.covered))
        else:
            self.stores.build(worker, actor.create)
        calls = actor.calls
        if actor.covered >= 0:
            actor.sent = actor.covered
        else:  # (the calls kept may be numbered past a live copy placed back without one)
            actor.sent = calls[0].seq - 1 if calls else actor.seq
        actor.asked_at = actor.sent
        self.checkpoints.send_at(actor, actor.sent)
        self.covers.send(actor)
        self.send_calls(actor)

    def send_calls(self, actor: ActorRecord) -> None:
        """Send the calls not sent yet, in order, with a checkpoint frame every
        ``checkpoint_every`` calls; stop where a periodic checkpoint falls due while
        `CHECKPOINTS_IN_FLIGHT` frames are on their way (`_written` goes on)."""
        worker = actor.worker
        assert worker is not None
        calls = actor.calls
        every = actor.every
        checkpoints = self.checkpoints
        while not actor.moving and not actor.gapped:  # (held for where it lands, or a gap)
            if every and actor.sent - actor.asked_at >= every:
                sent = sum(1 for at in actor.pending if at <= actor.sent)  # asks ahead wait
                if sent >= CHECKPOINTS_IN_FLIGHT:
                    return  # the calls wait: checkpoints keep pace with them
                checkpoints.ask(actor, None, actor.sent)
            if actor.sent >= actor.seq:
                return
            index = actor.sent + 1 - calls[0].seq
            assert index >= 0, "a call not sent yet was dropped"
            call = calls[index]
            frame = actor_call_frame(call.oid, call.method, actor.actor_id, call.argument)
            self._objects.store_mark(call.oid, worker)
            self._wire.links.send_encoded(worker.link, frame)  # (no `ActorCall` made)
            actor.sent = call.seq
            if call.seq in actor.pending:
                checkpoints.send_at(actor, call.seq)

    # -- from the actor's worker -----------------------------------------------------------

    def on_worker_event(self, worker: Peer, actor: ActorRecord, event: Event) -> None:
        """What the worker hosting ``actor`` (started, or starting) says: every answer is
        the actor's, as it runs nothing else."""
        if actor.restoring and getattr(event, "object_id", 0) == actor.actor_id:
            if isinstance(event, (Result, Error)):
                self._restored(worker, actor, event)
        elif isinstance(event, Error) and event.mark == ERROR_COVERED:
            self._covered_call(worker, event)
        elif isinstance(event, (Result, Stored)):
            self._answer(worker, event.object_id, event, None)
        elif isinstance(event, Error):
            self._answer(worker, event.object_id, None, event.message)

    def on_checkpointed(self, worker: Peer, event: Event) -> None:
        assert isinstance(event, Checkpointed)
        actor = worker.actor
        if self.stores.answered(worker, event):
            return
        if actor is None or actor.actor_id != event.object_id or actor.state is _WAITING:
            return
        if actor.restoring:
            return  # (asked before the restore: its answer says where it is, not this)
        if self.checkpoints.written(actor, event):
            self.cannot_rebuild(actor)
        if actor.state is not _DEAD and actor.worker is worker:
            if worker.draining and not actor.lossy:
                self.move_off(worker)  # (its move waited for this checkpoint)
                self._copies.recheck(worker)
                return
            self.send_calls(actor)  # calls held back for this answer go on

    def _answer(
        self, worker: Peer, oid: int, answer: Result | Stored | None, error: str | None
    ) -> None:
        actor = worker.actor
        assert actor is not None
        if oid == actor.actor_id:
            self._started(actor, error)
            return
        call = actor.by_oid.pop(oid, None)
        if call is not None:
            self._counts.move_call(call, CallCause.ANSWER)
            actor.losses = 0
            actor.unnumbered.pop(oid, None)  # (one the restored checkpoint has)
        obj = self._objects.by_id.get(oid)
        if call is None or obj is None or obj.owner != call.owner:
            # Answered before (a call run again after a restore), or released meanwhile; or
            # not a call to this actor at all (forged).
            if isinstance(answer, Stored):
                self._copies.free_copy(worker, oid)
            if call is None:
                self._wire.not_given(worker, oid)
        else:
            # Its place in the actor's order goes with the answer: a caller sends it again
            # on a resume, and a replay from a checkpoint follows it (`_resume_calls`).
            self._objects.set_answer(worker, obj, answer, error, call.seq)
            if call.seq:
                self.answered_at[oid] = call.seq
        self._copies.call_answered(oid)
        if actor.ending and not actor.by_oid and actor.state is not _DEAD:
            self.end(actor, actor.ending)

    def _started(self, actor: ActorRecord, error: str | None) -> None:
        if error is not None:
            restored = "restored from its checkpoint" if actor.covered >= 0 else "created"
            self.end(actor, f"actor {actor.actor_id:#x} could not be {restored}: {error}")
            return
        self._counts.move_actor(actor, ActorCause.STARTED)
        if actor.actor_id in self.hosts.told:
            worker = actor.worker
            self.hosts.placed(actor, f"runs on {worker.name if worker else 'a worker'} again")
        if not actor.announced:
            actor.announced = True
            if actor.owner in self._wire.peers:
                self._wire.links.send(actor.owner, Result(actor.actor_id, b""))

    def _restored(self, worker: Peer, actor: ActorRecord, event: Result | Error) -> None:
        """The answer to actor-restore for the newest checkpoint (`RESTORE_NEWEST`)."""
        actor.restoring = False
        if isinstance(event, Error):
            if event.mark == ERROR_FENCED or (
                event.mark == ERROR_NO_CHECKPOINT and self.hosts.copies.get(actor.actor_id)
            ):
                # A stale live copy (a head before lost its worker, and built the actor
                # again since), or none after all: the next copy that rejoined is tried,
                # or awaited (the newer one may still rejoin).
                self._drop_copy(worker, actor)
                self._counts.move_actor(actor, ActorCause.PLACE)
                host = self.hosts.claim(actor)
                if host is not None:
                    self.start_on(actor, host)
                else:
                    self.hosts.await_host(actor)
                return
            if event.mark == ERROR_NO_CHECKPOINT:
                self.stores.build(worker, actor.create)  # none: build it anew
                actor.covered = -1
                self._resume_calls(actor, 0, {})
                self._offer(self.hosts.settled(actor.actor_id))
                return
            self.end(actor, f"actor {actor.actor_id:#x} could not be restored: {event.message}")
            return
        value = bytes(event.value)
        calls = int.from_bytes(value[:8], "little") if len(value) >= 8 else 0
        covers = read_covers(value)
        if len(value) >= 8 and len(value) % 8 == 0:
            actor.covered = calls  # the checkpoint it came from, or one its live state wrote
        elif worker.checkpoints:
            # Alive, but no checkpoint covers what it has seen (none could be written): it
            # cannot be rebuilt exactly until one does, asked for at once.
            actor.covered = -1
            actor.lossy = True
            actor.pending.setdefault(0, [])  # (after the calls it has seen: `_resume_calls`)
        else:
            # Alive, with no store to write to: lost with its worker, it is built anew from
            # its create and the calls kept (which, never covered, are all of them).
            actor.covered = -1
        self._offer(self.hosts.settled(actor.actor_id))  # other copies are stale
        moving = worker.draining and not actor.lossy
        self._resume_calls(actor, calls, covers, send=not moving)
        self._started(actor, None)
        if moving:
            # Placed back on a worker that drains: its state (checkpointed) moves on, and
            # the calls go to where it lands.
            self.move_off(worker)
            self._copies.recheck(worker)

    def _drop_copy(self, worker: Peer, actor: ActorRecord) -> None:
        """``worker``'s live copy of restoring ``actor`` is stale: it goes."""
        self._wire.links.send(worker.link, ActorKill(actor.actor_id, KILL_KEEP))
        worker.actor = actor.worker = None
        actor.restoring = True
        self._offer([worker])

    def _resume_calls(
        self, actor: ActorRecord, base: int, covers: dict[int, int], send: bool = True
    ) -> None:
        """Number the calls this head took after the ``base`` the restored checkpoint
        covers, but for those it has (``covers``: `CoveredCalls`), and send them in the
        order the head before ran them, however their callers resumed (`replay_order`)."""
        self.covers.set_aside(actor, covers)
        for call in actor.calls:
            call.seq += base
        actor.pending = {calls + base: asks for calls, asks in actor.pending.items()}
        actor.seq += base
        actor.sent = base
        actor.asked_at = base
        self.replays.reorder(actor)
        if send:
            self.checkpoints.send_at(actor, base)
            self.covers.send(actor)
            self.send_calls(actor)

    def _covered_call(self, worker: Peer, event: Error) -> None:
        """The restored checkpoint includes this call: it did not run again."""
        actor = worker.actor
        assert actor is not None
        call = actor.by_oid.pop(event.object_id, None)
        if call is None:
            return  # its answer came before the restart: nothing more to say
        actor.unnumbered.pop(call.oid, None)
        self._counts.move_call(call, CallCause.ANSWER)
        obj = self._objects.by_id.get(call.oid)
        if obj is not None and obj.owner == call.owner:
            why = f"actor call {call.oid:#x} ran before the head restarted and its answer "
            why += (
                "was lost with it; the checkpoint the actor came back from has it (not run twice)"
            )
            self._objects.fail_object(obj, why)

    # -- the end of an actor ---------------------------------------------------------------

    def cannot_rebuild(self, actor: ActorRecord) -> None:
        self.end(
            actor,
            f"actor {actor.actor_id:#x} lost its worker and cannot be rebuilt: calls "
            "not covered by a checkpoint were dropped past the budget (set "
            "DISTA_CHECKPOINT_URI so that checkpoints cover them)",
        )

    def end(self, actor: ActorRecord, why: str) -> None:
        """``actor`` is gone for good: its unanswered calls fail, its worker runs tasks."""
        if actor.state is _DEAD:
            return
        wire = self._wire
        worker = actor.worker
        self.hosts.awaiting.pop(actor.actor_id, None)
        self.hosts.told.pop(actor.actor_id, None)  # (its drivers hear it ended)
        self._counts.move_actor(actor, ActorCause.END)
        actor.why = why
        actor.worker = None
        # Late calls get why it ended; the records kept for that are bounded.
        self._dead.append(actor.actor_id)
        if len(self._dead) > DEAD_ACTORS_KEPT:
            self.records.pop(self._dead.popleft(), None)
        if worker is None or worker.actor is not actor or not wire.alive(worker):
            self._forget_elsewhere(actor)  # no host to remove its checkpoints: another does
        if worker is not None and worker.actor is actor:
            worker.actor = None
            if wire.alive(worker):
                self.stores.kill(worker, actor.actor_id)
                if worker.draining:
                    self._copies.recheck(worker)  # its actor was what kept it
                else:
                    self.place_waiting()  # which may keep this worker for a waiting actor
                    if _actor_of(worker) is None:
                        self._scheduler.offer(worker)
        calls = list(actor.by_oid.values())
        actor.by_oid.clear()
        actor.unnumbered.clear()
        for call in calls:
            self._counts.move_call(call, CallCause.FAIL)
        for call in calls:
            obj = self._objects.by_id.get(call.oid)
            if obj is not None and obj.owner == call.owner:
                self._objects.fail_object(obj, why)
        if self.answered_at:
            for call in calls:
                self.answered_at.pop(call.oid, None)
        actor.calls.clear()
        for asks in actor.pending.values():
            for link, oid in asks:  # a driver's checkpoint ask is answered, whatever happens
                if link in wire.peers:
                    wire.links.send(link, Error(oid, why))
        actor.pending.clear()
        actor.kept_bytes = 0
        self.stores.ended(actor)  # its drivers hear it, once its checkpoints' removal is sure
        # `callers` stays: the drivers told (`call` tells a later one once).

    def _forget_elsewhere(self, actor: ActorRecord) -> None:
        """``actor`` ended with no worker hosting it (waiting, or its host lost): a worker
        with a checkpoint store removes what it may have written."""
        if not (actor.restoring or actor.covered >= 0 or actor.checkpoints or actor.pending):
            return  # it wrote none
        self.stores.forget(actor.actor_id)

    def worker_lost(self, worker: Peer, why: str) -> None:
        """The worker hosting (or kept for) an actor is lost: start it elsewhere."""
        self.hosts.lost(worker)
        self.stores.lost(worker)
        actor = worker.actor
        worker.actor = None
        if actor is None or actor.worker is not worker:
            return
        if actor.state is _WAITING:
            self.place(actor)
            return
        if actor.restoring:
            # Placed back on a live copy that is lost before it answered: the next copy
            # that rejoined, or, as at first, a wait (the grace at most) for that copy to
            # rejoin: lost is not gone (a cut or silent worker keeps it), and only it holds
            # the calls in the order the head before ran them.
            self._counts.move_actor(actor, ActorCause.PLACE)
            host = self.hosts.claim(actor)
            if host is not None:
                self.start_on(actor, host)
            else:
                actor.worker = None
                self.hosts.await_host(actor)
            return
        actor.losses += 1
        actor.restarts += 1
        actor.lost = f"{worker.name}: {why}"
        name = f"actor {actor.actor_id:#x}"
        if actor.lossy:
            self.end(
                actor,
                f"{name} was lost with {worker.name} ({why}) and cannot be rebuilt: calls "
                "not covered by a checkpoint were dropped past the budget (set "
                "DISTA_CHECKPOINT_URI so that checkpoints cover them)",
            )
        elif actor.losses >= self.max_retries + 1:  # max_retries + 1 lost, as tasks are
            self.end(
                actor,
                f"{name} was lost with {worker.name} ({why}); it lost {actor.losses} "
                "workers in a row without answering a call in between: gave up",
            )
        else:
            self.place(actor)

    def move_off(self, worker: Peer) -> None:
        """A draining worker's actor goes elsewhere, restored from its checkpoints."""
        actor = worker.actor
        assert actor is not None
        if self.hosts.holds(worker):
            # A live actor no driver has created again yet: placed back here first (its
            # state, checkpointed, then moves on) or dropped after the grace.
            worker.why = "it hosts a live actor its driver has not resumed yet"
            return
        if actor.lossy:
            worker.why = f"it hosts actor {actor.actor_id:#x}, which cannot move (calls cut)"
            return
        if actor.worker is worker and actor.covered < actor.sent:
            # What it has seen is made durable first, and calls wait meanwhile: a head
            # lost mid-move finds it alive here, or its checkpoint covering all it saw.
            if actor.state is _STARTING and actor.restoring:
                worker.why = f"moving actor {actor.actor_id:#x}: placed back here first"
                return
            waiting = actor.sent in actor.pending
            if actor.state is _READY and worker.checkpoints and (waiting or actor.moving < 3):
                if not waiting:  # (asked again if it failed: twice more at most)
                    actor.moving += 1
                    self.checkpoints.ask(actor, None, actor.sent)
                worker.why = f"moving actor {actor.actor_id:#x}: its checkpoint first"
                return
            # (No store there, or that checkpoint failed three times: it moves with the
            # calls the head keeps.)
        worker.actor = None
        if actor.worker is not worker:
            return
        if actor.state is not _WAITING:
            self._wire.links.send(worker.link, ActorKill(actor.actor_id, KILL_KEEP))
        self.place(actor)

    def ends_with(self, driver: Peer) -> None:
        """A driver left: the actors it made go too (as Ray's non-detached ones do)."""
        if driver.role != Role.DRIVER and driver.role != Role.CLIENT:
            return
        kept = self.keeps(driver)
        link = driver.link
        for actor in list(self.records.values()):
            owned = actor.owner == link and actor.actor_id not in kept
            if owned and actor.state is not _DEAD:
                self.end(actor, f"actor {actor.actor_id:#x}: its driver disconnected")
            elif actor.state is not _DEAD and any(c.owner == link for c in actor.calls):
                # Its calls no checkpoint covers have nobody to send them again after a
                # head restart that loses the live copy too: a checkpoint covers them now.
                self.checkpoints.ask(actor, None)
            actor.callers.discard(link)
            actor.opened.discard(driver.number)  # (the number may be given again)
            actor.claims.pop(driver.number, None)

    # -- the pulled timer: actors no worker can host ---------------------------------------

    def next_deadline(self) -> int | None:
        deadlines = (self.placement, self.hosts, self.replays)
        times = [t for t in (d.next_deadline() for d in deadlines) if t]
        return min(times) if times else None

    def on_timer(self, now: int) -> None:
        """Actors no worker of their registry came for within the grace fail; live actors
        no owner came back for go; restoring actors whose host did not come are rebuilt."""
        for actor, why in self.placement.expired(now):
            self.end(actor, why)
        freed, due = self.hosts.expired(now)
        for actor in due:
            self.place(actor)
        self.replays.expired(now)
        self._offer(freed)

    # -- live actors of rejoining workers (`Hosts` decides) --------------------------------

    def on_worker_error(self, worker: Peer, event: Event) -> None:
        """An error frame from a worker hosting no actor: a task's failure, or a rejoining
        worker saying which actor still lives on it."""
        assert isinstance(event, Error)
        calls = hosted_calls(event.mark)
        if calls is None:
            self._scheduler.on_answer(worker, event)
            return
        if not self.hosts.holds(worker):
            return  # not announced in its hello: not a rejoin
        record = self.records.get(event.object_id)
        host, freed = self.hosts.reported(worker, event.object_id, calls, record)
        if host is not None:
            assert record is not None
            self.start_on(record, host)
        self._offer(freed)

    def owner_resumed(self, number: int) -> None:
        """Driver ``number`` resumed: its live actors it did not create again go."""
        self._offer(self.hosts.owner_resumed(number))

    def _offer(self, workers: list[Peer]) -> None:
        for worker in workers:
            if self._wire.alive(worker):
                self.stores.store_came(worker)
            if worker.draining:
                self._copies.recheck(worker)  # the actor it kept was its last: it may go
            elif self._wire.alive(worker) and worker.actor is None:
                self.place_waiting()
                if _actor_of(worker) is None:
                    self._scheduler.offer(worker)


def _actor_of(worker: Peer) -> ActorRecord | None:
    """``worker.actor`` as declared. mypy keeps ``worker.actor = None`` narrowed to None
    across a call that sets it again, and mypyc checks that stale type on the read: a
    compiled head raised TypeError where pure Python went on."""
    return worker.actor
