"""The head's recovery: drivers resuming, workers rejoining or going silent, drains.

The head keeps no disk state. After a head restart drivers and workers rebuild it, as the
page says: a driver resumes under its old number and sends, in order, each object it still
needs (a small result or error as a result or error frame, a result on a worker as claim,
an unfinished task as the frame it first sent), its live actors' creates and the calls it
keeps, then resumed; a rejoining worker sends holding.

Claims and holdings meet here. A claim waits for the worker holding the object to rejoin
(`recovery_grace_ns`, then the object fails saying so); a holding waits for its driver to
claim it, and is freed once that driver has resumed without claiming it, or after the
grace if it never comes.

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

Liveness: the head notes when it last read from each worker; one silent for
``liveness_ns`` (SIGSTOP, a hung host, a link cut without a reset: workers send a
`SPAN_ALIVE` heartbeat every few seconds) is lost: its tasks are retried elsewhere. What it
stored is not failed at once but waits ``recovery_grace_ns`` for it to rejoin with holding.
So does what a worker stored whose connection was lost for a reason the binding does not
know (a reset link: the worker rejoins this same head); one the binding says is dead (a
supervisor saw its process end) fails at once. A worker saying hello with the address of one
still connected is that worker rejoining before the loss of its old connection reached the
head: the old connection is lost then.

Drain: a worker that says drain takes no more work; each object it holds is adopted by
another worker (adopt, adopted), its actor moves to another worker (restored from its
checkpoints there), and once it runs nothing, holds nothing and hosts nothing it is told to
stop. `Head` inherits this; the state it reads is the head's own.
"""

from __future__ import annotations

from typing import Final

from ._conventions import ERROR_NO_CHECKPOINT, ID_BITS, KILL_KEEP, NUMBER_SPACE
from ._events import (
    ActorCall,
    ActorKill,
    Adopt,
    Adopted,
    Claim,
    Error,
    Free,
    Hello,
    Holding,
    Located,
    Result,
    Stop,
)
from ._head_actors import Actors
from ._head_records import (
    ActorRecord,
    ActorState,
    ObjState,
    Peer,
    TaskRecord,
    TaskState,
    TrackedObject,
)
from ._roles import Role
from ._timeline import TimelineLog

__all__ = ["LIVENESS_NS", "RECOVERY_GRACE_NS", "Recovery"]

#: A worker the head has not heard from for this long is lost (workers beat every 5 s).
LIVENESS_NS: Final = 30_000_000_000
#: How long a claim waits for the worker holding its object to rejoin, a holding for its
#: driver to claim it, and a silent worker's objects for it to come back.
RECOVERY_GRACE_NS: Final = 30_000_000_000
#: How often the head looks for silent workers and expired waits, at most.
_TICK_NS: Final = 1_000_000_000
#: Attempts at adopting one object before a drain stops trying it (and says so).
_ADOPT_TRIES: Final = 3

_PENDING: Final = ObjState.PENDING
_INLINE: Final = ObjState.INLINE
_STORED: Final = ObjState.STORED
_FAILED: Final = ObjState.FAILED


class Recovery(Actors):
    """The recovery half of `Head`."""

    _numbers: dict[int, Peer]
    _timeline: TimelineLog
    held_bytes: int
    liveness_ns: int
    recovery_grace_ns: int
    #: Claimed objects no worker has reported yet: object ID -> until when it waits.
    _claims: dict[int, int]
    #: Objects a rejoining worker holds that no driver claimed yet: ID -> (worker, until).
    _unclaimed: dict[int, tuple[Peer, int]]
    #: Stored objects of a worker gone silent, waiting for it to rejoin: ID -> until when.
    _limbo: dict[int, tuple[str, int]]
    #: Drivers whose connection was lost, that may resume: link -> (driver, until when).
    _away: dict[int, tuple[Peer, int]]
    #: Calls to an actor this head does not know, whose owner has not resumed yet: actor
    #: -> (until when, [(the caller's number, the call, answered before)]).
    _parked: dict[int, tuple[int, list[tuple[int, ActorCall, bool]]]]
    _parked_calls: set[int]  # their object IDs
    #: Stale copies a rejoining worker holds of results of a task it runs again: ID ->
    #: the worker, freed there once the task settles (`Head._settle`).
    _stale: dict[int, Peer]
    #: Objects being adopted off a draining worker: ID -> the adopting worker.
    _adopting: dict[int, Peer]
    _adopt_tries: dict[int, int]
    _tick_at: int

    def _wake(self, obj: TrackedObject) -> None:
        raise NotImplementedError  # the head's

    def _fail_tasks(self, stack: list[tuple[TaskRecord, str]]) -> None:
        raise NotImplementedError  # the head's

    # -- drivers resuming ------------------------------------------------------------------

    def _resume_number(self, peer: Peer, hello: Hello) -> int:
        """The number of a driver saying hello with a resume pair, or 0 (refused)."""
        resume = hello.resume
        assert resume is not None
        number = resume.number
        if not 1 <= number < NUMBER_SPACE:
            self._refuse(peer, f"driver number {number} is outside [1, 2**24)")
            return 0
        holder = self._numbers.get(number)
        if holder is not None:
            if resume.epoch != holder.epoch:
                # A driver of another head that drew the number one of ours has: giving it
                # the number would give it the other driver's objects.
                self._refuse(
                    peer,
                    f"driver number {number} is in use by a driver of this head (epoch "
                    f"{self._epoch():#x}); yours was given by the head of epoch "
                    f"{resume.epoch:#x}: start a new session",
                )
                return 0
            self._replace(holder, peer)
        peer.epoch = resume.epoch
        peer.resuming = True
        return number

    def _driver_away(self, peer: Peer) -> bool:
        """``peer``'s connection was lost: keep what it owns for it to resume, if it is a
        driver that may (True); a local head's last driver ends it instead."""
        if (
            peer.role != Role.DRIVER
            or not peer.number
            or self._numbers.get(peer.number) is not peer
            or self._stopping()
        ):
            return False
        if self._exit_without_drivers() and not any(
            p.role == Role.DRIVER and p is not peer for p in self._peers.values()
        ):
            return False
        self._peers.pop(peer.link, None)
        self._away[peer.link] = (peer, self._now + self.recovery_grace_ns)
        return True

    def _stopping(self) -> bool:
        raise NotImplementedError  # the head's

    def _exit_without_drivers(self) -> bool:
        raise NotImplementedError  # the head's

    def _lose_driver(self, driver: Peer) -> None:
        raise NotImplementedError  # the head's

    def _unref(self, obj: TrackedObject) -> None:
        raise NotImplementedError  # the head's

    def _cancel(self, peer: Peer, oid: int, force: bool) -> None:
        raise NotImplementedError  # the head's

    def _foreign(self, peer: Peer, oid: int) -> bool:
        raise NotImplementedError  # the head's

    def _count_inline(self, obj: TrackedObject) -> None:
        raise NotImplementedError  # the head's

    def _refuse(self, peer: Peer, why: str) -> None:
        raise NotImplementedError  # the head's

    def _epoch(self) -> int:
        raise NotImplementedError  # the head's

    def _replace(self, old: Peer, new: Peer) -> None:
        """``new`` is ``old``'s driver on a new connection: it takes over what it owned."""
        was, now = old.link, new.link
        self._peers.pop(was, None)
        self._away.pop(was, None)
        self._numbers.pop(old.number, None)
        unconfirmed = new.unconfirmed = set()
        for obj in self._objects.values():
            if obj.owner == was:
                obj.owner = now
                if obj.held:
                    unconfirmed.add(obj.oid)
                task = obj.task
                if task is not None and task.owner == was:
                    task.owner = now
        for actor in self._actors.values():
            if actor.owner == was:
                actor.owner = now
                unconfirmed.add(actor.actor_id)  # (a dead one: its news may be lost too)
            if was in actor.callers:
                actor.callers.discard(was)
                if actor.state is not ActorState.DEAD:
                    actor.callers.add(now)
                # (A dead one's news went to the old connection: the new one hears it
                # with the first call it resends.)
            for call in actor.calls:
                if call.owner == was:
                    call.owner = now
            for asks in actor.pending.values():
                asks[:] = [(now if link == was else link, oid) for link, oid in asks]
        self._timeline.rename(was, now)
        self._links.close(was, "the same driver connected again")

    def _resent(self, peer: Peer, oid: int, results: int = 1) -> bool:
        """Whether ``oid`` (and the ``results - 1`` after it, a task's) is one a resuming
        ``peer`` sends again that this head has: it gets the answer the head knows (if any
        yet) and nothing runs twice."""
        if not peer.resuming:
            return False
        objects = self._objects
        mine = [
            obj
            for i in range(oid, oid + results)
            if (obj := objects.get(i)) is not None and obj.owner == peer.link
        ]
        if not mine:
            return False
        for obj in mine:
            self._confirmed(peer, obj.oid)
            if obj.held:
                self._answer_again(obj)
        return True

    def _confirmed(self, peer: Peer, oid: int) -> None:
        """A resuming ``peer`` named ``oid`` (an object or an actor): it still has it."""
        if peer.unconfirmed is not None:
            peer.unconfirmed.discard(oid)

    def _answer_again(self, obj: TrackedObject) -> None:
        state = obj.state
        if state is _INLINE:
            self._links.send(obj.owner, Result(obj.oid, obj.value))
        elif state is _STORED and obj.holder is not None:
            self._grant(obj.holder, obj.oid, obj.owner)
            self._links.send(obj.owner, Located(obj.oid, obj.holder.address))
        elif state is _FAILED:
            self._links.send(obj.owner, Error(obj.oid, obj.error))

    def _on_driver_answer(self, peer: Peer, event: Result | Error) -> None:
        """A resuming driver's result or error: an object it has, for tasks to take."""
        oid = event.object_id
        if self._resent(peer, oid):
            obj = self._objects[oid]
            task = obj.task
            if isinstance(event, Error) and task is not None and obj.state is _PENDING:
                # It failed it while its link was down (a cancel the head never saw).
                self._cancel(peer, oid, False)
            return
        if not self._check_new_ids(peer, oid, 1):
            return
        obj = self._objects[oid] = TrackedObject(oid, peer.link, None)
        obj.answered = True
        if isinstance(event, Result):
            obj.state = _INLINE
            obj.value = event.value
            obj.size = len(event.value)
            self.held_bytes += obj.size
            self._count_inline(obj)  # (what it had before: not refused at its cap)
        else:
            obj.state = _FAILED
            obj.error = event.message

    def _on_claim(self, peer: Peer, event: Claim) -> None:
        """A resuming driver's claim; or, from one that is not resuming, the question where
        an object it holds lives now (a fetch failed where it was): answered again."""
        oid = event.object_id
        if self._foreign(peer, oid):
            return
        if not peer.resuming:
            obj = self._objects.get(oid)
            if obj is None or obj.owner != peer.link or not obj.held:
                self._links.send(peer.link, Error(oid, f"object {oid:#x} is unknown to the head"))
            else:
                self._answer_again(obj)  # (one waiting for its worker is answered then)
            return
        if self._resent(peer, oid) or not self._check_new_ids(peer, oid, 1):
            return
        obj = self._objects[oid] = TrackedObject(oid, peer.link, None)
        obj.answered = True
        held = self._unclaimed.pop(oid, None)
        if held is not None and self._peers.get(held[0].link) is held[0]:
            self._attach(obj, held[0])
        else:
            self._claims[oid] = self._now + self.recovery_grace_ns

    def _on_resumed(self, peer: Peer) -> None:
        """``peer`` sent everything it still needs: what it did not claim is free, and, on
        this same head, what it held or owned on its old connection and did not name again
        (it released or killed it while the link was down) goes."""
        peer.resuming = False
        unconfirmed, peer.unconfirmed = peer.unconfirmed, None
        for oid in sorted(unconfirmed or ()):
            actor = self._actors.get(oid)
            if actor is not None:
                if actor.owner != peer.link:
                    continue
                if actor.state is not ActorState.DEAD:
                    self._end_actor(actor, f"actor {oid:#x} was killed by {peer.name}")
                else:  # it ended while the link was down: the news went with the old one
                    self._links.send(peer.link, Error(oid, actor.why))
                continue
            obj = self._objects.get(oid)
            if obj is not None and obj.owner == peer.link and obj.held:
                obj.held = False
                self._unref(obj)
        number = peer.number
        for actor_id in [a for a in self._parked if a >> ID_BITS == number]:
            self._fail_parked(actor_id)  # its owner did not create it again
        for oid, (worker, _) in list(self._unclaimed.items()):
            if oid >> ID_BITS == number:
                del self._unclaimed[oid]
                self._unclaimed_freed(worker, oid)

    # -- calls to an actor not created yet ---------------------------------------------------

    def _park_call(self, peer: Peer, event: ActorCall) -> bool:
        """A call to an actor this head does not know: if its owner may still create it
        (a driver of the head before that has not resumed yet, or one that is away), it
        waits for that, ``recovery_grace_ns`` at most. True if parked."""
        actor_id = event.actor_id
        owner = self._numbers.get(actor_id >> ID_BITS)
        if owner is not None and not owner.resuming and self._peers.get(owner.link) is owner:
            return False  # its owner is here and has resumed: unknown indeed
        oid = event.object_id
        obj = self._objects.get(oid)
        mine = obj is not None and obj.owner == peer.link
        if oid in self._parked_calls:
            # Parked already: the same driver sending it again (its object perhaps released
            # and forgotten meanwhile: it would be parked, and run, twice).
            if mine:
                self._confirmed(peer, oid)
            return True
        answered = peer.resuming and mine and obj is not None and obj.task is None
        if not answered:
            if not self._check_new_ids(peer, oid, 1):
                return True
            self._objects[oid] = TrackedObject(oid, peer.link, None)
        else:
            self._confirmed(peer, oid)
        if actor_id not in self._parked:
            self._parked[actor_id] = (self._now + self.recovery_grace_ns, [])
        self._parked[actor_id][1].append((peer.number, event, answered))
        self._parked_calls.add(oid)
        return True

    def _unpark_calls(self, actor: ActorRecord) -> None:
        """``actor`` was created: the calls that waited for it are taken, in order."""
        parked = self._parked.pop(actor.actor_id, None)
        if parked is None:
            return
        for number, event, answered in parked[1]:
            oid = event.object_id
            self._parked_calls.discard(oid)
            caller = self._numbers.get(number)
            if caller is None:
                continue  # its driver is gone (and what it owned)
            obj = self._objects.get(oid)
            if obj is None or obj.owner != caller.link:
                answered = True  # released meanwhile: it runs for the actor's state only
            if not answered:
                self.pending += 1
            self._take_call(caller, actor, event, answered)

    def _fail_parked(self, actor_id: int) -> None:
        """No actor-create came for ``actor_id``: the calls that waited for it fail."""
        _, calls = self._parked.pop(actor_id, (0, []))
        why = "it is unknown to the head"
        told = set()
        for number, event, answered in calls:
            oid = event.object_id
            self._parked_calls.discard(oid)
            obj = self._objects.get(oid)
            if obj is not None and not answered and obj.state is _PENDING and obj.task is None:
                self._fail_object(obj, f"actor {actor_id:#x} is gone: {why}")
            elif obj is not None and obj.held:
                self._answer_again(obj)  # resent (the driver may not have its answer)
            caller = self._numbers.get(number)
            if caller is not None and number not in told:
                told.add(number)  # so that it keeps its calls no longer
                self._links.send(caller.link, Error(actor_id, why))

    # -- workers rejoining -----------------------------------------------------------------

    def _on_holding(self, worker: Peer, event: Holding) -> None:
        until = self._now + self.recovery_grace_ns
        for entry in event.entries:
            oid = entry.object_id
            obj = self._objects.get(oid)
            if (
                obj is not None
                and obj.state is _PENDING
                and (oid in self._claims or oid in self._limbo)
            ):
                # Claimed, or stored on a worker that went silent: here it is. (One answered
                # meanwhile, an actor call run again elsewhere, is a stale copy below.)
                self._claims.pop(oid, None)
                self._limbo.pop(oid, None)
                self._attach(obj, worker)
                if obj.held:
                    self._grant(worker, oid, obj.owner)
                    self._links.send(obj.owner, Located(oid, worker.address))
                continue
            if obj is not None:
                self._free_copy(worker, oid)  # known otherwise: a stale copy
                continue
            owner = self._numbers.get(oid >> ID_BITS)
            if owner is not None and not owner.resuming:
                self._free_copy(worker, oid)  # its driver did not claim it
                continue
            other = self._unclaimed.get(oid)
            if other is not None and other[0] is not worker:
                # Two copies (one adopted off a draining worker, its adopted lost with the
                # head): keep one, on a worker that stays if either does.
                if other[0].draining or not worker.draining:
                    self._unclaimed[oid] = (worker, until)
                    self._unclaimed_freed(other[0], oid)
                else:
                    self._free_copy(worker, oid)
                continue
            self._unclaimed[oid] = (worker, until)

    def _free_stale(self, oid: int, obj: TrackedObject | None) -> None:
        """``oid``'s task settled: free a stale copy a rejoining worker held of it, unless
        the worker now holds the object itself (the run stored it there again)."""
        worker = self._stale.pop(oid, None)
        if worker is None or (obj is not None and obj.holder is worker):
            return
        if self._peers.get(worker.link) is worker:
            self._links.send(worker.link, Free(oid))

    def _free_stale_call(self, oid: int) -> None:
        """An actor call answered: `_free_stale` for a copy a rejoining worker held of it."""
        if self._stale:
            self._free_stale(oid, self._objects.get(oid))

    def _unclaimed_freed(self, worker: Peer, oid: int) -> None:
        """A copy no driver claimed goes; a draining worker waiting for that may leave."""
        self._free_copy(worker, oid)
        if worker.draining:
            self._maybe_release_drained(worker)

    def _free_copy(self, worker: Peer, oid: int) -> None:
        """Free a copy of ``oid`` ``worker`` stored that nobody needs (a stale answer, an
        adoption too late, a rejoining worker's), unless it is the copy the head counts on
        there: its store keeps one value per ID, so a free would also delete the object it
        holds or adopts (an actor call run again on the worker adopting its first answer).
        Nor while the worker runs what makes ``oid`` again (its task, sent there again, or an
        actor call): the free would cancel that task, or delete the value it stores; then
        once it has answered (`_free_stale`)."""
        obj = self._objects.get(oid)
        if obj is not None:
            if obj.holder is worker or self._adopting.get(oid) is worker:
                return
            task = obj.task
            actor = worker.actor
            if (task is not None and task.worker is worker) or (
                actor is not None and oid in actor.by_oid
            ):
                self._stale[oid] = worker
                return
        self._links.send(worker.link, Free(oid))

    def _replace_worker(self, worker: Peer) -> None:
        """``worker`` says hello with the address of a worker still connected: the same
        worker, rejoining before its old connection's loss reached the head (a reset). The
        old connection is lost now, what it stored waiting for the holding that follows: its
        free of a copy the old connection held deleted the only one."""
        for old in list(self._peers.values()):
            if old is not worker and old.role == Role.WORKER and old.address == worker.address:
                why = "the same worker connected again"
                self._to_limbo(old, f"{old.name} connected again")
                self._links.close(old.link, why)
                self._lose(old, why)

    def _attach(self, obj: TrackedObject, worker: Peer) -> None:
        obj.state = _STORED
        self.held_bytes += obj.size  # known for a silent worker's, 0 for a claim
        obj.holder = worker
        worker.holds.add(obj.oid)
        self._wake(obj)
        if worker.draining:
            self._maybe_release_drained(worker)  # claimed from a draining worker: moves on

    # -- silence ---------------------------------------------------------------------------

    def _silent(self, worker: Peer, now: int) -> None:
        """``worker`` said nothing for the liveness timeout: it is lost, but what it stored
        waits for it to rejoin."""
        seconds = self.liveness_ns / 1e9
        why = f"silent for {seconds:g} s (no heartbeat: stopped, hung, or cut off)"
        self._to_limbo(worker, f"{worker.name} went {why}")
        self._links.close(worker.link, why)
        self._lose(worker, why)

    def _to_limbo(self, worker: Peer, why: str) -> None:
        """``worker`` is lost but may well be alive (silent, or its link cut): what it
        stored waits ``recovery_grace_ns`` for it to rejoin with holding, then fails."""
        until = self._now + self.recovery_grace_ns
        for oid in worker.holds:
            obj = self._objects.get(oid)
            if obj is not None and obj.state is _STORED:
                obj.state = _PENDING
                obj.holder = None
                self.held_bytes -= obj.size
                self._limbo[oid] = (why, until)
        worker.holds.clear()

    def _dispatch(self, task: TaskRecord, worker: Peer, cost: int | None) -> None:
        """`Scheduling._dispatch`, except that a task whose input went pending again since
        it was queued (in limbo: its worker was lost and may come back) waits for it."""
        if task.event is None and any(obj.state is _PENDING for obj in task.inputs):
            task.state = TaskState.WAITING  # the ready queue drops it; `_wake` queues it
            for obj in task.inputs:
                if obj.state is _PENDING:
                    task.waiting += 1
                    if obj.waiters is None:
                        obj.waiters = [task]
                    else:
                        obj.waiters.append(task)
            return
        before = task.sources
        super()._dispatch(task, worker, cost)
        if task.event is None and task.state is TaskState.RUNNING:
            task.sources = tuple(
                obj.holder
                for obj in task.inputs
                if obj.state is _STORED and obj.holder is not None and obj.holder is not worker
            )
        if before:  # sent before (and withdrawn, or its worker lost): not read from there
            for source in before:
                if source.draining and source not in task.sources:
                    self._maybe_release_drained(source)

    def _sources_done(self, task: TaskRecord) -> None:
        """``task`` no longer fetches its inputs (it answered, or left its worker): a
        draining worker it read from may leave now."""
        sources, task.sources = task.sources, ()
        for source in sources:
            if source.draining:
                self._maybe_release_drained(source)

    def _read_from(self, worker: Peer) -> bool:
        """Whether a task sent elsewhere may still fetch an input from ``worker``: a task
        sent with its inputs' locations fetches them before it runs, so a draining worker
        that left at once (its objects adopted meanwhile) failed it."""
        return any(
            worker in t.sources
            for peer in self._peers.values()
            if peer.role == Role.WORKER and peer is not worker
            for t in peer.running.values()
        )

    # -- timers ----------------------------------------------------------------------------

    def _recovery_deadline(self) -> int | None:
        watching = self._claims or self._unclaimed or self._limbo or self._away or self._parked
        if not watching and not (self.liveness_ns and self._workers_of):
            return None
        return self._tick_at

    def _on_recovery_timer(self, now: int) -> None:
        if now < self._tick_at:
            return
        self._tick_at = now + min(_TICK_NS, max(self.liveness_ns // 4, 1_000_000))
        if self.liveness_ns:
            late = now - self.liveness_ns
            for peer in list(self._peers.values()):
                if peer.role == Role.WORKER and peer.heard < late:
                    self._silent(peer, now)
        seconds = self.recovery_grace_ns / 1e9
        for link, (driver, until) in list(self._away.items()):
            if now >= until:
                del self._away[link]
                self._lose_driver(driver)  # it did not come back
        for actor_id, (until, _) in list(self._parked.items()):
            if now >= until:
                self._fail_parked(actor_id)
        for oid, until in list(self._claims.items()):
            if now >= until:
                del self._claims[oid]
                obj = self._objects.get(oid)
                if obj is not None and obj.state is _PENDING and obj.task is None:
                    why = (
                        f"object {oid:#x} is lost: after the head restarted, no worker "
                        f"reported holding it within {seconds:g} s"
                    )
                    self._fail_object(obj, why)
        for oid, (why, until) in list(self._limbo.items()):
            if now >= until:
                del self._limbo[oid]
                obj = self._objects.get(oid)
                if obj is not None and obj.state is _PENDING and obj.task is None:
                    lost = f"object lost: {why}, and did not come back within {seconds:g} s"
                    self._fail_object(obj, lost)
        for oid, (worker, until) in list(self._unclaimed.items()):
            if now >= until:
                del self._unclaimed[oid]
                self._unclaimed_freed(worker, oid)

    # -- drain -----------------------------------------------------------------------------

    def _on_drain(self, worker: Peer) -> None:
        if worker.draining:
            return
        worker.draining = True
        self._forget_worker(worker)
        if worker.actor is not None:
            self._move_actor(worker)
        self._maybe_release_drained(worker)

    def _move_actor(self, worker: Peer) -> None:
        """A draining worker's actor goes elsewhere, restored from its checkpoints."""
        actor = worker.actor
        assert actor is not None
        if actor.lossy:
            worker.why = f"it hosts actor {actor.actor_id:#x}, which cannot move (calls cut)"
            return
        worker.actor = None
        if actor.worker is not worker:
            return
        if actor.state is not ActorState.WAITING:
            self._links.send(worker.link, ActorKill(actor.actor_id, KILL_KEEP))
        self._place(actor)

    def _maybe_release_drained(self, worker: Peer) -> None:
        """Adopt what a draining worker holds; stop it once it has nothing left."""
        if self._peers.get(worker.link) is not worker:
            return
        self._adopt_from(worker)
        if (
            not worker.running
            and not worker.holds
            and worker.actor is None
            and not any(p is worker for p in self._adopting.values())
            and not any(p is worker for p, _ in self._unclaimed.values())
            and not self._read_from(worker)
        ):
            # (One still adopting objects, told to drain meanwhile, waits for them: they
            # then move on from it; one that rejoined a new head draining waits for its
            # drivers to claim what it holds, which is then adopted.)
            self._links.send(worker.link, Stop())

    def _adopt_from(self, worker: Peer) -> None:
        todo = [
            oid
            for oid in worker.holds
            if oid not in self._adopting and self._adopt_tries.get(oid, 0) < _ADOPT_TRIES
        ]
        if not todo:
            return
        adopters = [
            p
            for p in self._peers.values()
            if p.role == Role.WORKER and not p.draining and p is not worker
        ]
        if not adopters:
            worker.why = (
                f"no other worker to adopt its {len(worker.holds)} objects: start one "
                "(the worker gives up after DISTA_DRAIN_TIMEOUT)"
            )
            return
        worker.why = f"moving {len(worker.holds)} objects to other workers"
        # Spread over the adopters, the ones hosting no actor first.
        adopters.sort(key=lambda p: (p.actor is not None, len(p.holds)))
        for i, oid in enumerate(todo):
            adopter = adopters[i % len(adopters)]
            self._adopting[oid] = adopter
            self._adopt_tries[oid] = self._adopt_tries.get(oid, 0) + 1
            self._grant(worker, oid, adopter.link)
            self._links.send(adopter.link, Adopt(oid, worker.address))

    def _on_adopted(self, adopter: Peer, event: Adopted) -> None:
        self._adopted(adopter, event)
        # A draining worker waits for adoptions of its objects, and one adopting waits for
        # its own: either may leave now (the object may have gone meanwhile, released).
        for peer in list(self._peers.values()):
            if peer.draining and peer.role == Role.WORKER:
                self._maybe_release_drained(peer)

    def _adopted(self, adopter: Peer, event: Adopted) -> None:
        oid = event.object_id
        expected = self._adopting.get(oid)
        if expected is adopter:
            del self._adopting[oid]
        obj = self._objects.get(oid)
        old = obj.holder if obj is not None else None
        if (
            obj is None
            or expected is not adopter
            or obj.state is not _STORED
            or old is None
            or not old.draining
        ):
            if event.address is not None:
                self._free_copy(adopter, oid)  # nobody needs this copy
            return
        if event.address is None:
            old.why = f"object {oid:#x} could not be adopted: {event.failure}"
            self._maybe_release_drained(old)
            return
        # The draining worker keeps its copy until it stops: a fetch already on its way
        # to it still finds the object.
        old.holds.discard(oid)
        self._adopt_tries.pop(oid, None)
        obj.holder = adopter
        adopter.holds.add(oid)
        if obj.held:
            self._grant(adopter, oid, obj.owner)
            self._links.send(obj.owner, Located(oid, event.address))
        self._maybe_release_drained(old)

    def _adopter_lost(self, worker: Peer) -> None:
        """``worker`` is gone: what it was adopting is adopted by another. (That attempt
        does not count against the object: only an adopter's failure to fetch it does.)"""
        gone = [oid for oid, p in self._adopting.items() if p is worker]
        for oid in gone:
            del self._adopting[oid]
            self._adopt_tries[oid] = self._adopt_tries.get(oid, 1) - 1
        for peer in list(self._peers.values()):
            if peer.draining and peer.role == Role.WORKER:
                self._maybe_release_drained(peer)

    # -- actors after a head restart -------------------------------------------------------

    def _on_restored(self, worker: Peer, actor: ActorRecord, event: Result | Error) -> None:
        """The answer to actor-restore for the newest checkpoint (`RESTORE_NEWEST`)."""
        actor.restoring = False
        if isinstance(event, Error):
            if event.mark == ERROR_NO_CHECKPOINT:
                self._links.send(worker.link, actor.create)  # none: build it anew
                actor.covered = -1
                self._resume_calls(actor, 0)
                return
            self._end_actor(
                actor, f"actor {actor.actor_id:#x} could not be restored: {event.message}"
            )
            return
        value = bytes(event.value)
        calls = int.from_bytes(value[:8], "little") if len(value) == 8 else 0
        actor.covered = calls if len(value) == 8 else -1
        self._resume_calls(actor, max(calls, 0))
        self._actor_started(actor, None)

    def _resume_calls(self, actor: ActorRecord, base: int) -> None:
        """Number the calls this head took so far after the ``base`` the restored
        checkpoint covers (checkpoints stay named in order), and send them."""
        for call in actor.calls:
            call.seq += base
        actor.pending = {calls + base: asks for calls, asks in actor.pending.items()}
        actor.seq += base
        actor.sent = base
        actor.asked_at = base
        self._send_checkpoints_at(actor, base)
        self._send_calls(actor)

    def _on_covered_call(self, worker: Peer, event: Error) -> None:
        """The restored checkpoint includes this call: it did not run again."""
        actor = worker.actor
        assert actor is not None
        call = actor.by_oid.pop(event.object_id, None)
        if call is None:
            return  # its answer came before the restart: nothing more to say
        call.answered = True
        self.pending -= 1
        obj = self._objects.get(call.oid)
        if obj is not None and obj.owner == call.owner:
            why = (
                f"actor call {call.oid:#x} ran before the head restarted and its answer was "
                "lost with the head; the checkpoint the actor was restored from includes "
                "it, so it was not run twice"
            )
            self._fail_object(obj, why)
