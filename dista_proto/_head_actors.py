"""The head's actors: placement, calls in order, checkpoints, covered, and restore.

An actor takes a whole worker: "An actor lives on one worker, which runs nothing else while
it hosts it." It goes to a worker of its registry with nothing running; if every such
worker is busy, the least busy one is kept for it (no new tasks) until its tasks finish;
if none is free at all (each hosts an actor, or none has its registry) it waits, and status
says why. A waiting actor whose registry no worker has fails after the no-worker grace, as
tasks do.

Calls are numbered 1, 2, ... in the order they reach the head (so each caller's stay in
the order it sent them) and sent to the actor's worker at once: the worker runs them one at
a time, in order, so the head never waits for an answer before sending the next. Every
``checkpoint_every`` calls, and when a driver asks, a checkpoint frame follows the calls it
covers; the head keeps every call the checkpoint it would restore from does not cover. When
checkpointed says one is written, it becomes the one the head restores from (a worker
removes only checkpoints older than the restore point a frame names, see
`_on_checkpointed`): the head drops the calls it covers and tells each of their callers, with
covered, the newest of its own calls it includes.

When the worker is lost, the actor starts again on another worker: actor-restore from the
checkpoint the head restores from (actor-create without one), then every kept call, in
order. A call answered before runs again for the actor's state, but its answer is not sent
twice: a caller gets each answer once. An actor that loses ``max_retries + 1`` workers in a
row without answering anything in between is given up, as is one whose kept calls were
cut. The head's kept calls are bounded as drivers' are: past ``actor_keep_bytes`` it asks
for a checkpoint; if checkpoints fail, it cuts the oldest and the actor can no longer be
rebuilt until a checkpoint covers them (one cut while it waits to be rebuilt fails then).
A call to an actor that is gone is a failed object, and its caller hears once that the
actor is gone. After a head restart a call to an actor this head does not know yet waits for
its owner to resume and create it again (`_head_recovery`), and a driver resuming on this
same head is answered again what its old connection missed (its create's answer, its calls',
covered, that an actor is gone).
`Head` inherits this; the state it reads is the head's own.
"""

from __future__ import annotations

from collections import deque
from typing import Final

from ._conventions import (
    ERROR_WARNING,
    ID_BITS,
    KILL_AFTER_CALLS,
    KILL_FORCE,
    RESTORE_NEWEST,
    TASK_ID_MASK,
    kept_size,
)
from ._events import (
    ActorCall,
    ActorCreate,
    ActorKill,
    ActorRestore,
    Checkpoint,
    Checkpointed,
    Covered,
    Error,
    Result,
    Stop,
    Stored,
)
from ._head_records import ActorRecord, ActorState, CallRecord, Peer, TrackedObject
from ._head_scheduling import ANYWHERE, Scheduling
from ._roles import Role

__all__ = ["DEFAULT_ACTOR_KEEP_BYTES", "Actors"]

#: Checkpoint frames an actor may have on their way: a periodic one falling due beyond
#: them holds the calls after it back, so that with calls coming faster than checkpoints
#: are written, a checkpoint still follows every ``checkpoint_every`` calls (what a restore
#: replays stays bounded), and a worker keeps at most this many more on disk.
CHECKPOINTS_IN_FLIGHT: Final = 2
#: Ended actors the head remembers (so that a late call hears why), the oldest forgotten.
DEAD_ACTORS_KEPT: Final = 10_000
#: The bytes of uncovered calls the head keeps per actor before it asks for a checkpoint.
DEFAULT_ACTOR_KEEP_BYTES: Final = 64 << 20

_WAITING: Final = ActorState.WAITING
_STARTING: Final = ActorState.STARTING
_READY: Final = ActorState.READY
_DEAD: Final = ActorState.DEAD


class Actors(Scheduling):
    """The actor half of `Head`."""

    _actors: dict[int, ActorRecord]
    _waiting_actors: deque[ActorRecord]
    _dead_actors: deque[int]  # ended actors whose records stay, oldest first
    #: Actors created and not ended: a local cluster starts a worker for each.
    actors_alive: int
    _portable: frozenset[int]
    max_retries: int
    actor_keep_bytes: int

    def _check_new_ids(self, peer: Peer, oid: int, results: int) -> bool:
        raise NotImplementedError  # the head's

    def _lose(self, peer: Peer, why: str) -> None:
        raise NotImplementedError  # the head's

    def _set_answer(
        self, worker: Peer, obj: TrackedObject, answer: Result | Stored | None, error: str | None
    ) -> None:
        raise NotImplementedError  # the head's

    def _fail_object(self, obj: TrackedObject, why: str) -> None:
        raise NotImplementedError  # the head's

    def _confirmed(self, peer: Peer, oid: int) -> None:
        raise NotImplementedError  # the recovery's

    def _answer_again(self, obj: TrackedObject) -> None:
        raise NotImplementedError  # the recovery's

    def _park_call(self, peer: Peer, event: ActorCall) -> bool:
        raise NotImplementedError  # the recovery's

    def _free_copy(self, worker: Peer, oid: int) -> None:
        raise NotImplementedError  # the recovery's

    def _free_stale_call(self, oid: int) -> None:
        raise NotImplementedError  # the recovery's

    def _unpark_calls(self, actor: ActorRecord) -> None:
        raise NotImplementedError  # the recovery's

    # -- from drivers ----------------------------------------------------------------------

    def _on_actor_create(self, peer: Peer, event: ActorCreate) -> None:
        known = self._actors.get(event.object_id)
        if peer.resuming and known is not None:
            # This head has it: the same driver on a new connection, which may have missed
            # how its create went (the answer was on its way on the old one).
            self._confirmed(peer, known.actor_id)
            if known.state is _DEAD:
                self._links.send(peer.link, Error(known.actor_id, known.why))
            elif known.announced:
                self._links.send(peer.link, Result(known.actor_id, b""))
            return
        if not self._check_new_ids(peer, event.object_id, 1):
            return
        registry = ANYWHERE if event.task_id & TASK_ID_MASK in self._portable else peer.registry
        actor = ActorRecord(event, peer.link, registry, self._now)
        # A driver resuming after a head restart: the actor lives on in its checkpoints.
        actor.restoring = peer.resuming
        self._actors[actor.actor_id] = actor
        self.actors_alive += 1
        self._place(actor)
        self._unpark_calls(actor)

    def _on_actor_call(self, peer: Peer, event: ActorCall) -> None:
        oid = event.object_id
        actor = self._actors.get(event.actor_id)
        if peer.resuming and actor is not None and actor.state is not _DEAD:
            obj = self._objects.get(oid)
            if obj is not None and obj.owner == peer.link:
                self._confirmed(peer, oid)
            if oid <= actor.newest_from.get(peer.number, 0):
                # A call this head took already: the same driver, reconnected, which may
                # have missed its answer and that a checkpoint covers it.
                if obj is not None and obj.owner == peer.link and obj.held:
                    self._answer_again(obj)
                newest = actor.covered_of.get(peer.number, 0)
                if oid <= newest:
                    self._links.send(peer.link, Covered(actor.actor_id, newest))
                return
            if obj is not None and obj.owner == peer.link and obj.task is None:
                self._replay_call(peer, actor, event)  # answered before the restart
                return
        if actor is None and self._park_call(peer, event):
            return  # its owner has not resumed yet: it may create it
        if peer.resuming:
            obj = self._objects.get(oid)
            if obj is not None and obj.owner == peer.link:
                # A call to a gone actor this head answered already: answer it again, and
                # say again that the actor is gone (it may have ended while the caller's
                # link was down, and the caller would keep its calls for good).
                self._confirmed(peer, oid)
                if obj.held:
                    self._answer_again(obj)
                if actor is not None:
                    self._links.send(peer.link, Error(actor.actor_id, actor.why))
                return
        if not self._check_new_ids(peer, oid, 1):
            return
        obj = self._objects[oid] = TrackedObject(oid, peer.link, None)
        if actor is None or actor.state is _DEAD:
            why = actor.why if actor is not None else "it is unknown to the head"
            if actor is None or peer.link not in actor.callers:
                # A caller that never heard the actor is gone keeps this call until a
                # checkpoint covers it, which none will: tell it, as its callers were told.
                # (One this head never knew, after a restart, tells it each time.)
                if actor is not None:
                    actor.callers.add(peer.link)
                self._links.send(peer.link, Error(event.actor_id, why))
            # A failed object the driver releases as any other (not an error frame).
            self._fail_object(obj, f"actor {event.actor_id:#x} is gone: {why}")
            return
        self.pending += 1
        self._take_call(peer, actor, event, False)

    def _replay_call(self, peer: Peer, actor: ActorRecord, event: ActorCall) -> None:
        """A call a resuming driver got the answer of: it runs again for the actor's state
        (unless its checkpoint includes it), and its answer goes nowhere."""
        self._take_call(peer, actor, event, True)

    def _take_call(self, peer: Peer, actor: ActorRecord, event: ActorCall, answered: bool) -> None:
        actor.seq += 1
        call = CallRecord(actor.seq, event.object_id, event.task_id, event.argument, peer.link)
        call.answered = answered
        if not answered:
            actor.by_oid[call.oid] = call
        actor.calls.append(call)
        actor.kept_bytes += kept_size(event.argument)
        actor.callers.add(peer.link)
        actor.newest_from[peer.number] = event.object_id
        if (actor.state is _STARTING or actor.state is _READY) and not actor.restoring:
            self._send_calls(actor)
        if actor.kept_bytes > self.actor_keep_bytes:
            self._over_budget(actor)

    def _on_actor_kill(self, peer: Peer, event: ActorKill) -> None:
        if self._foreign_actor(peer, event.object_id, event.object_id):
            return
        actor = self._actors.get(event.object_id)
        if actor is None or actor.state is _DEAD:
            return
        if event.mark == KILL_AFTER_CALLS:
            # Its last handle went: the calls already made run first, as in Ray.
            why = f"actor {actor.actor_id:#x} ended: {peer.name} dropped its last handle"
            if actor.by_oid:
                actor.ending = why
                return
            self._end_actor(actor, why)
        else:
            why = f"actor {actor.actor_id:#x} was killed by {peer.name}"
            worker = actor.worker
            if (
                event.mark == KILL_FORCE
                and worker is not None
                and actor.state is not _WAITING
                and self._peers.get(worker.link) is worker
            ):
                # A method stuck in C code: end its process (a supervisor replaces it).
                worker.actor = None
                actor.worker = None
                stopped = f"stopped to force-kill actor {actor.actor_id:#x}"
                self._links.send(worker.link, Stop())
                self._links.close(worker.link, stopped)
                self._lose(worker, stopped)
            self._end_actor(actor, why)

    def _on_checkpoint_ask(self, peer: Peer, event: Checkpoint) -> None:
        oid = event.object_id
        actor = self._actors.get(event.actor_id or 0)
        if oid >> ID_BITS != peer.number:
            why = f"checkpoint ID {oid:#x} is not numbered for driver {peer.number}"
            self._links.send(peer.link, Error(oid, why))
        elif actor is None or actor.state is _DEAD:
            why = actor.why if actor is not None else "it is unknown to the head"
            self._links.send(peer.link, Error(oid, f"actor {event.actor_id or 0:#x}: {why}"))
        elif actor.seq == actor.covered:
            self._links.send(peer.link, Result(oid, b""))  # one covering all is written
        else:
            self._ask_checkpoint(actor, (peer.link, oid))

    # -- placement ---------------------------------------------------------------------------

    def _candidates(self, actor: ActorRecord) -> list[Peer]:
        if actor.registry == ANYWHERE:
            serving: set[Peer] = set().union(*self._workers_of.values())
        else:
            serving = self._workers_of.get(actor.registry, set())
        peers = self._peers
        return [
            w for w in serving if w.actor is None and not w.draining and peers.get(w.link) is w
        ]

    def _place(self, actor: ActorRecord) -> None:
        """Start ``actor`` on a free worker, keep the least busy one for it, or wait."""
        actor.worker = None
        actor.state = _WAITING
        actor.since = self._now
        free = self._candidates(actor)
        if not free:
            if actor.registry == ANYWHERE or actor.registry in self._workers_of:
                actor.why = "every worker of its registry hosts an actor: start another worker"
            else:
                actor.why = f"no connected worker has its driver's registry {actor.registry:#018x}"
            if actor not in self._waiting_actors:
                self._waiting_actors.append(actor)
            return
        worker = min(free, key=lambda w: (len(w.running), str(w.address)))
        worker.actor = actor
        actor.worker = worker
        if worker.running:
            actor.why = f"{worker.name} finishes its {len(worker.running)} tasks first"
            return  # `_after_slot_freed` starts it once they are done
        self._start_on(actor, worker)

    def _place_waiting(self) -> None:
        """A worker came or was freed: place the actors that wait, oldest first."""
        waiting = self._waiting_actors
        for _ in range(len(waiting)):
            actor = waiting.popleft()
            if actor.state is _WAITING and actor.worker is None:
                self._place(actor)  # waits again (appended) if there is still no worker
        for actor in list(self._actors.values()):
            kept = actor.worker
            if actor.state is _WAITING and kept is not None and kept.running:
                # Kept a busy worker for it: a worker with nothing to do is better.
                free = [w for w in self._candidates(actor) if not w.running]
                if free:
                    kept.actor = None
                    self._start_on(actor, min(free, key=lambda w: str(w.address)))
                    self._make_idle(kept)
                    self._pump(kept.registry)

    def _actor_worker_free(self, worker: Peer) -> bool:
        """``worker``'s last task ended: start the actor kept for it; True if one is."""
        actor = worker.actor
        if actor is None:
            return False
        if actor.state is _WAITING and not worker.running:
            self._start_on(actor, worker)
        return True

    def _start_on(self, actor: ActorRecord, worker: Peer) -> None:
        """Build ``actor`` on ``worker`` and send it every kept call again, in order."""
        worker.actor = actor
        actor.worker = worker
        actor.state = _STARTING
        actor.why = ""
        send = self._links.send
        if actor.restoring:
            # After a head restart: the newest checkpoint there is, whose answer says what
            # it covers (`_on_restored` sends the calls then).
            send(worker.link, ActorRestore(actor.actor_id, actor.type_id, RESTORE_NEWEST))
            return
        if actor.covered >= 0:
            send(worker.link, ActorRestore(actor.actor_id, actor.type_id, actor.covered))
        else:
            send(worker.link, actor.create)
        actor.sent = max(actor.covered, 0)
        actor.asked_at = actor.sent
        self._send_checkpoints_at(actor, actor.sent)
        self._send_calls(actor)

    def _send_calls(self, actor: ActorRecord) -> None:
        """Send the calls not sent yet, in order, with a checkpoint frame every
        ``checkpoint_every`` calls; stop where a periodic checkpoint falls due while
        `CHECKPOINTS_IN_FLIGHT` frames are on their way (`_on_checkpointed` goes on)."""
        worker = actor.worker
        assert worker is not None
        calls = actor.calls
        every = actor.every
        while True:
            if every and actor.sent - actor.asked_at >= every:
                sent = sum(1 for at in actor.pending if at <= actor.sent)  # asks ahead wait
                if sent >= CHECKPOINTS_IN_FLIGHT:
                    return  # the calls wait: checkpoints keep pace with them
                self._ask_checkpoint(actor, None, actor.sent)
            if actor.sent >= actor.seq:
                return
            index = actor.sent + 1 - calls[0].seq
            assert index >= 0, "a call not sent yet was dropped"
            call = calls[index]
            event = ActorCall(call.oid, call.method, actor.actor_id, call.argument)
            self._store_mark(call.oid, worker)
            self._links.send(worker.link, event)
            actor.sent = call.seq
            if call.seq in actor.pending:
                self._send_checkpoints_at(actor, call.seq)

    # -- checkpoints ---------------------------------------------------------------------

    def _ask_checkpoint(
        self, actor: ActorRecord, ask: tuple[int, int] | None, calls: int = -1
    ) -> None:
        """A checkpoint covering ``calls`` calls (default: every call received so far);
        ``ask`` is a driver's."""
        if calls < 0:
            calls = actor.seq
        asks = actor.pending.get(calls)
        if asks is None:
            asks = actor.pending[calls] = []
            actor.asked_at = calls
            if actor.state is not _WAITING and actor.sent == calls and not actor.restoring:
                self._send_checkpoints_at(actor, calls)
        if ask is not None:
            asks.append(ask)

    def _send_checkpoints_at(self, actor: ActorRecord, calls: int) -> None:
        if calls in actor.pending and actor.worker is not None:
            restore = actor.covered if actor.covered >= 0 else None
            frame = Checkpoint(actor.actor_id, calls, None, restore)
            self._links.send(actor.worker.link, frame)

    def _on_checkpointed(self, worker: Peer, event: Checkpointed) -> None:
        """A checkpoint frame is answered: the asks on it too, and maybe a new restore point.

        The head restores from `covered`, so that checkpoint must stay on disk: each
        checkpoint frame names it as the one to keep, and writing one removes the others.
        A worker writing one removes only the checkpoints older than the one its frame
        names, and a frame names the restore point as it was when sent, never a newer one:
        no frame on its way can remove a checkpoint the head has heard is written. So a
        written checkpoint becomes the restore point at once (`covered`, the calls it covers
        dropped, `Covered` to their callers), however many frames are on their way.
        """
        actor = worker.actor
        if actor is None or actor.actor_id != event.object_id or actor.state is _WAITING:
            return
        calls = event.task_id
        asks = actor.pending.pop(calls, [])
        failure = event.failure
        for link, oid in asks:
            if link in self._peers:
                answer = Result(oid, b"") if failure is None else Error(oid, failure)
                self._links.send(link, answer)
        if failure is None:
            actor.failure = actor.warned = ""
            actor.checkpoints += 1
            if calls > actor.covered:
                self._cover(actor, calls)
        else:
            if failure != actor.warned and not asks:
                # Once per reason (a driver's own ask hears it in its answer instead).
                actor.warned = failure
                why = f"a checkpoint of actor {actor.actor_id:#x} failed: {failure}"
                for link in actor.callers:
                    if link in self._peers:
                        self._links.send(link, Error(actor.actor_id, why, ERROR_WARNING))
            actor.failure = failure
            if actor.kept_bytes > 2 * self.actor_keep_bytes:
                self._cut(actor)
        if actor.state is not _DEAD and actor.worker is worker:
            self._send_calls(actor)  # calls held back for this answer go on

    def _cover(self, actor: ActorRecord, calls: int) -> None:
        """Restore ``actor`` from the checkpoint covering ``calls`` calls from now on."""
        actor.covered = calls
        newest: dict[int, int] = {}
        for owner, (seq, oid) in list(actor.cut.items()):
            if seq <= calls:  # its calls cut past the budget are in this checkpoint
                newest[owner] = oid
                del actor.cut[owner]
        if not actor.cut:
            actor.lossy = False  # every call cut is in a checkpoint: it can be rebuilt again
        kept = actor.calls
        while kept and kept[0].seq <= calls:
            call = kept.popleft()
            actor.kept_bytes -= kept_size(call.argument)
            newest[call.owner] = call.oid
        covered_of = actor.covered_of
        for link, oid in newest.items():
            number = oid >> ID_BITS
            if oid > covered_of.get(number, 0):
                covered_of[number] = oid
            if link in self._peers:
                self._links.send(link, Covered(actor.actor_id, oid))

    def _over_budget(self, actor: ActorRecord) -> None:
        if actor.failure and actor.kept_bytes > 2 * self.actor_keep_bytes:
            self._cut(actor)
        elif not actor.pending:
            self._ask_checkpoint(actor, None)

    def _cut(self, actor: ActorRecord) -> None:
        """Drop the oldest kept calls down to the budget: the actor can't be rebuilt now."""
        kept = actor.calls
        # Never one not sent yet (calls held back behind a checkpoint): it must still run.
        while kept and kept[0].seq <= actor.sent and actor.kept_bytes > self.actor_keep_bytes:
            call = kept.popleft()
            actor.kept_bytes -= kept_size(call.argument)
            call.argument = b""
            # Its caller keeps it until covered says a checkpoint includes it: remember it.
            actor.cut[call.owner] = (call.seq, call.oid)
        actor.lossy = True
        if actor.state is _WAITING:
            # It waits to be rebuilt after losing its worker (with failing checkpoints it
            # has run before): replaying what is left would build a wrong state.
            self._end_actor(
                actor,
                f"actor {actor.actor_id:#x} lost its worker and cannot be rebuilt: calls "
                "not covered by a checkpoint were dropped past the budget (set "
                "DISTA_CHECKPOINT_URI so that checkpoints cover them)",
            )

    # -- answers from the actor's worker -------------------------------------------------

    def _on_actor_answer(
        self, worker: Peer, oid: int, answer: Result | Stored | None, error: str | None
    ) -> None:
        actor = worker.actor
        assert actor is not None
        if oid == actor.actor_id:
            self._actor_started(actor, error)
            return
        call = actor.by_oid.pop(oid, None)
        if call is not None:
            call.answered = True
            actor.losses = 0
            self.pending -= 1
        obj = self._objects.get(oid)
        if call is None or obj is None or obj.owner != call.owner:
            # Answered before (a call run again after a restore), or released meanwhile; or
            # not a call to this actor at all (forged).
            if isinstance(answer, Stored):
                self._free_copy(worker, oid)
            if call is None:
                self._not_given(worker, oid)
        else:
            self._set_answer(worker, obj, answer, error)
        self._free_stale_call(oid)
        if actor.ending and not actor.by_oid and actor.state is not _DEAD:
            self._end_actor(actor, actor.ending)

    def _actor_started(self, actor: ActorRecord, error: str | None) -> None:
        if error is not None:
            restored = "restored from its checkpoint" if actor.covered >= 0 else "created"
            self._end_actor(actor, f"actor {actor.actor_id:#x} could not be {restored}: {error}")
            return
        actor.state = _READY
        if not actor.announced:
            actor.announced = True
            if actor.owner in self._peers:
                self._links.send(actor.owner, Result(actor.actor_id, b""))

    # -- the end of an actor -------------------------------------------------------------

    def _end_actor(self, actor: ActorRecord, why: str) -> None:
        """``actor`` is gone for good: its unanswered calls fail, its worker runs tasks."""
        if actor.state is _DEAD:
            return
        self.actors_alive -= 1
        worker = actor.worker
        actor.state = _DEAD
        actor.why = why
        actor.worker = None
        # Late calls get why it ended; the records kept for that are bounded.
        self._dead_actors.append(actor.actor_id)
        if len(self._dead_actors) > DEAD_ACTORS_KEPT:
            self._actors.pop(self._dead_actors.popleft(), None)
        if worker is not None and worker.actor is actor:
            worker.actor = None
            if self._peers.get(worker.link) is worker:
                self._links.send(worker.link, ActorKill(actor.actor_id))
                self._place_waiting()  # which may keep this worker for a waiting actor
                if _actor_of(worker) is None:
                    self._make_idle(worker)
                    self._pump(worker.registry)
                    self._steal_for(worker)
        self.pending -= len(actor.by_oid)
        for call in actor.by_oid.values():
            obj = self._objects.get(call.oid)
            if obj is not None and obj.owner == call.owner:
                self._fail_object(obj, why)
        actor.by_oid.clear()
        actor.calls.clear()
        for asks in actor.pending.values():
            for link, oid in asks:  # a driver's checkpoint ask is answered, whatever happens
                if link in self._peers:
                    self._links.send(link, Error(oid, why))
        actor.pending.clear()
        actor.kept_bytes = 0
        for link in actor.callers:
            if link in self._peers:
                self._links.send(link, Error(actor.actor_id, why))
        # `callers` stays: the drivers told (`_on_actor_call` tells a later one once).

    def _lose_actor_worker(self, worker: Peer, why: str) -> None:
        """The worker hosting (or kept for) an actor is lost: start it elsewhere."""
        actor = worker.actor
        worker.actor = None
        if actor is None or actor.worker is not worker:
            return
        if actor.state is _WAITING:
            self._place(actor)
            return
        actor.losses += 1
        actor.restarts += 1
        actor.lost = f"{worker.name}: {why}"
        name = f"actor {actor.actor_id:#x}"
        if actor.lossy:
            self._end_actor(
                actor,
                f"{name} was lost with {worker.name} ({why}) and cannot be rebuilt: calls "
                "not covered by a checkpoint were dropped past the budget (set "
                "DISTA_CHECKPOINT_URI so that checkpoints cover them)",
            )
        elif actor.losses >= self.max_retries + 1:  # max_retries + 1 lost, as tasks are
            self._end_actor(
                actor,
                f"{name} was lost with {worker.name} ({why}); it lost {actor.losses} "
                "workers in a row without answering a call in between: gave up",
            )
        else:
            self._place(actor)

    def _fail_waiting_actors(self, now: int) -> None:
        """Actors no worker of their registry came for within the grace fail."""
        for actor in list(self._waiting_actors):
            if (
                actor.state is _WAITING
                and actor.registry != ANYWHERE
                and actor.registry not in self._workers_of
                and now >= actor.since + self.no_worker_grace_ns
            ):
                self._waiting_actors.remove(actor)
                waited = self.no_worker_grace_ns / 1e9
                lost = f" after losing its worker ({actor.lost})" if actor.lost else ""
                self._end_actor(
                    actor,
                    f"no worker can host actor {actor.actor_id:#x}{lost} (type "
                    f"{actor.type_id:#x}): none of the connected workers has its driver's "
                    f"registry {actor.registry:#018x} (waited {waited:g} s for one)",
                )

    def _actors_deadline(self) -> int | None:
        starts = [
            a.since
            for a in self._waiting_actors
            if a.state is _WAITING
            and a.registry != ANYWHERE
            and a.registry not in self._workers_of
        ]
        return min(starts) + self.no_worker_grace_ns if starts else None

    def _end_actors_of(self, driver: Peer) -> None:
        """A driver left: the actors it made go too (as Ray's non-detached ones do)."""
        if driver.role != Role.DRIVER and driver.role != Role.CLIENT:
            return
        for actor in list(self._actors.values()):
            if actor.owner == driver.link and actor.state is not _DEAD:
                self._end_actor(actor, f"actor {actor.actor_id:#x}: its driver disconnected")
            actor.callers.discard(driver.link)


def _actor_of(worker: Peer) -> ActorRecord | None:
    """``worker.actor`` as declared. mypy keeps ``worker.actor = None`` narrowed to None
    across a call that sets it again, and mypyc checks that stale type on the read: a
    compiled head raised TypeError where pure Python went on."""
    return worker.actor
