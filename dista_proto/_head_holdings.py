"""Where stored objects lie while workers come and go: claims and holdings after a head
restart, a lost worker's objects waiting for it, stale copies, and drains.

Claims and holdings meet here. After a head restart a resuming driver claims each object
it holds on a worker, and a rejoining worker reports what it holds (holding). A claim waits
``recovery_grace_ns`` for the worker holding the object to rejoin (then the object fails
saying so); a holding waits for its driver to claim it, and is freed once that driver has
resumed without claiming it (`driver_resumed`), or after the grace if it never comes.

A worker lost but maybe alive (silent for the liveness timeout, or its link cut without a
reason the binding knows) leaves what it stored in limbo: pending again, waiting
``recovery_grace_ns`` for it to rejoin with holding, then failed. One the binding says is
dead fails its objects at once (`Objects.holder_lost`).

Stale copies: a rejoining worker may hold a copy of a result of a task it now runs again, or
an answer nobody needs any more; the copy is freed, but never while it is the copy the head
counts on there (a worker's store keeps one value per ID), nor while that worker runs what
makes the ID again (then once it has answered).

Drain: a worker that says drain takes no more work; each object it holds is adopted by
another worker (adopt, adopted), its actor moves (`Actors.move_off`), and once it runs
nothing, holds nothing, hosts nothing and serves no task's fetch it is told to stop.
"""

from __future__ import annotations

from typing import Final

from ._conventions import ID_BITS
from ._events import Adopt, Adopted, Free, Holding, Located, Stop
from ._head_objects import Objects
from ._head_records import ObjState, Peer, TaskRecord, TrackedObject
from ._head_wire import Wire

__all__ = ["ADOPT_TRIES", "Holdings"]

#: Attempts at adopting one object before a drain stops trying it (and says so).
ADOPT_TRIES: Final = 3

_PENDING: Final = ObjState.PENDING
_STORED: Final = ObjState.STORED


class Holdings:
    """Copies of stored objects on workers, as workers rejoin, go silent and drain."""

    def __init__(self, wire: Wire, objects: Objects, *, recovery_grace_ns: int) -> None:
        self._wire = wire
        self._objects = objects
        self.recovery_grace_ns = recovery_grace_ns
        #: Claimed objects no worker has reported yet: object ID -> until when it waits.
        self.claims: dict[int, int] = {}
        #: Objects a rejoining worker holds that no driver claimed yet: ID -> (worker, until).
        self.unclaimed: dict[int, tuple[Peer, int]] = {}
        #: Stored objects of a worker lost but maybe alive: ID -> (why, until when).
        self.limbo: dict[int, tuple[str, int]] = {}
        #: Stale copies a rejoining worker holds of results of a task it runs again: ID ->
        #: the worker, freed there once the task settles.
        self.stale: dict[int, Peer] = {}
        #: Objects being adopted off a draining worker: ID -> the adopting worker.
        self._adopting: dict[int, Peer] = {}
        self._adopt_tries: dict[int, int] = {}

    def watching(self) -> bool:
        """Whether a claim, holding or lost worker's object waits out a grace."""
        return bool(self.claims or self.unclaimed or self.limbo)

    # -- claims and holdings ---------------------------------------------------------------

    def claim(self, obj: TrackedObject) -> None:
        """A resuming driver claims ``obj`` (new here): attach it where a rejoining worker
        reported it, or wait for one to."""
        held = self.unclaimed.pop(obj.oid, None)
        if held is not None and self._wire.alive(held[0]):
            self._attach(obj, held[0])
            # Its driver may be fetching it there, located before the restart: the grant
            # the head before sent may have been lost with it.
            self._wire.grant(held[0], obj.oid, obj.owner)
        else:
            self.claims[obj.oid] = self._wire.now + self.recovery_grace_ns

    def on_holding(self, worker: Peer, event: Holding) -> None:
        wire = self._wire
        until = wire.now + self.recovery_grace_ns
        for entry in event.entries:
            oid = entry.object_id
            obj = self._objects.get(oid)
            if (
                obj is not None
                and obj.state is _PENDING
                and (oid in self.claims or oid in self.limbo)
            ):
                # Claimed, or stored on a worker that went silent: here it is. (One answered
                # meanwhile, an actor call run again elsewhere, is a stale copy below.)
                self.claims.pop(oid, None)
                self.limbo.pop(oid, None)
                self._attach(obj, worker)
                if obj.held:
                    wire.locate(obj, worker, worker.address)
                continue
            if obj is not None:
                self.free_copy(worker, oid)  # known otherwise: a stale copy
                continue
            owner = wire.numbers.get(oid >> ID_BITS)
            if owner is not None and not owner.resuming:
                self.free_copy(worker, oid)  # its driver did not claim it
                continue
            other = self.unclaimed.get(oid)
            if other is not None and other[0] is not worker:
                # Two copies (one adopted off a draining worker, its adopted lost with the
                # head): keep one, on a worker that stays if either does.
                if other[0].draining or not worker.draining:
                    self.unclaimed[oid] = (worker, until)
                    self._unclaimed_freed(other[0], oid)
                else:
                    self.free_copy(worker, oid)
                continue
            self.unclaimed[oid] = (worker, until)

    def driver_resumed(self, number: int) -> None:
        """Driver ``number`` sent resumed: what it did not claim is free."""
        for oid, (worker, _) in list(self.unclaimed.items()):
            if oid >> ID_BITS == number:
                del self.unclaimed[oid]
                self._unclaimed_freed(worker, oid)

    def _attach(self, obj: TrackedObject, worker: Peer) -> None:
        self._objects.attach(obj, worker)
        if worker.draining:
            self.recheck(worker)  # claimed from a draining worker: moves on

    def _unclaimed_freed(self, worker: Peer, oid: int) -> None:
        """A copy no driver claimed goes; a draining worker waiting for that may leave."""
        self.free_copy(worker, oid)
        if worker.draining:
            self.recheck(worker)

    # -- lost workers ----------------------------------------------------------------------

    def to_limbo(self, worker: Peer, why: str) -> None:
        """``worker`` is lost but may well be alive (silent, or its link cut): what it
        stored waits ``recovery_grace_ns`` for it to rejoin with holding, then fails."""
        until = self._wire.now + self.recovery_grace_ns
        for oid in self._objects.holder_away(worker):
            self.limbo[oid] = (why, until)

    def on_timer(self, now: int) -> None:
        """Claims, lost workers' objects and holdings that waited out the grace end."""
        seconds = self.recovery_grace_ns / 1e9
        objects = self._objects
        for oid, until in list(self.claims.items()):
            if now >= until:
                del self.claims[oid]
                obj = objects.get(oid)
                if obj is not None and obj.state is _PENDING and obj.task is None:
                    why = (
                        f"object {oid:#x} is lost: after the head restarted, no worker "
                        f"reported holding it within {seconds:g} s"
                    )
                    objects.fail_object(obj, why)
        for oid, (why, until) in list(self.limbo.items()):
            if now >= until:
                del self.limbo[oid]
                obj = objects.get(oid)
                if obj is not None and obj.state is _PENDING and obj.task is None:
                    lost = f"object lost: {why}, and did not come back within {seconds:g} s"
                    objects.fail_object(obj, lost)
        for oid, (worker, until) in list(self.unclaimed.items()):
            if now >= until:
                del self.unclaimed[oid]
                self._unclaimed_freed(worker, oid)

    # -- stale copies (`Copies`) -----------------------------------------------------------

    def free_copy(self, worker: Peer, oid: int) -> None:
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
                self.stale[oid] = worker
                return
        self._wire.links.send(worker.link, Free(oid))

    def _free_stale(self, oid: int, obj: TrackedObject | None) -> None:
        """``oid``'s task settled: free a stale copy a rejoining worker held of it, unless
        the worker now holds the object itself (the run stored it there again)."""
        worker = self.stale.pop(oid, None)
        if worker is None or (obj is not None and obj.holder is worker):
            return
        if self._wire.alive(worker):
            self._wire.links.send(worker.link, Free(oid))

    def task_settled(self, task: TaskRecord) -> None:
        if task.sources:
            self._sources_done(task)
        if self.stale:
            for oid in range(task.oid, task.oid + task.results):
                self._free_stale(oid, self._objects.get(oid))

    def forgotten(self, obj: TrackedObject) -> None:
        if self.stale:
            self._free_stale(obj.oid, None)  # a stale copy waiting for a run that never came
        holder = obj.holder
        if holder is not None and holder.draining and not holder.holds:
            self.recheck(holder)  # its last object went: it may go

    def call_answered(self, oid: int) -> None:
        if self.stale:
            self._free_stale(oid, self._objects.get(oid))

    # -- drain -----------------------------------------------------------------------------

    def _sources_done(self, task: TaskRecord) -> None:
        """``task`` no longer fetches its inputs (it answered, or left its worker): a
        draining worker it read from may leave now."""
        sources, task.sources = task.sources, ()
        for source in sources:
            if source.draining:
                self.recheck(source)

    def _read_from(self, worker: Peer) -> bool:
        """Whether a task sent elsewhere may still fetch an input from ``worker``: a task
        sent with its inputs' locations fetches them before it runs, so a draining worker
        that left at once (its objects adopted meanwhile) failed it."""
        return any(
            worker in t.sources
            for peer in self._wire.workers()
            if peer is not worker
            for t in peer.running.values()
        )

    def recheck(self, worker: Peer) -> None:
        """Adopt what a draining worker holds; stop it once it has nothing left."""
        if not self._wire.alive(worker):
            return
        self._adopt_from(worker)
        if (
            not worker.running
            and not worker.holds
            and worker.actor is None
            and not any(p is worker for p in self._adopting.values())
            and not any(p is worker for p, _ in self.unclaimed.values())
            and not self._read_from(worker)
        ):
            # (One still adopting objects, told to drain meanwhile, waits for them: they
            # then move on from it; one that rejoined a new head draining waits for its
            # drivers to claim what it holds, which is then adopted.)
            self._wire.links.send(worker.link, Stop())

    def left_draining(self, worker: Peer) -> str:
        """Why what ``worker`` held is lost when it leaves while draining (its drain timed
        out), for its objects' errors."""
        if any(not p.draining and p is not worker for p in self._wire.workers()):
            return f"{worker.name} was drained and left before its objects were moved"
        return f"{worker.name} was drained and left, and no other worker could take its objects"

    def recheck_draining(self, but: Peer | None = None) -> None:
        """Every draining worker (but ``but``) may be able to leave now."""
        for peer in self._wire.draining_workers():
            if peer is not but:
                self.recheck(peer)

    def recheck_holders(self, but: Peer) -> None:
        """A worker came: draining ones that hold objects may have them adopted now."""
        for other in list(self._wire.peers.values()):
            if other.draining and other.holds and other is not but:
                self.recheck(other)

    def _adopt_from(self, worker: Peer) -> None:
        todo = [
            oid
            for oid in worker.holds
            if oid not in self._adopting and self._adopt_tries.get(oid, 0) < ADOPT_TRIES
        ]
        if not todo:
            return
        adopters = [p for p in self._wire.workers() if not p.draining and p is not worker]
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
            self._wire.grant(worker, oid, adopter.link)
            self._wire.links.send(adopter.link, Adopt(oid, worker.address))

    def on_adopted(self, adopter: Peer, event: Adopted) -> None:
        self._adopted(adopter, event)
        # A draining worker waits for adoptions of its objects, and one adopting waits for
        # its own: either may leave now (the object may have gone meanwhile, released).
        self.recheck_draining()

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
                self.free_copy(adopter, oid)  # nobody needs this copy
            return
        if event.address is None:
            old.why = f"object {oid:#x} could not be adopted: {event.failure}"
            self.recheck(old)
            return
        # The draining worker keeps its copy until it stops: a fetch already on its way
        # to it still finds the object.
        old.holds.discard(oid)
        self._adopt_tries.pop(oid, None)
        obj.holder = adopter
        adopter.holds.add(oid)
        if obj.held:
            self._wire.grant(adopter, oid, obj.owner)
            self._wire.links.send(obj.owner, Located(oid, event.address))
        self.recheck(old)

    def adopter_lost(self, worker: Peer) -> None:
        """``worker`` is gone: what it was adopting is adopted by another. (That attempt
        does not count against the object: only an adopter's failure to fetch it does.)"""
        gone = [oid for oid, p in self._adopting.items() if p is worker]
        for oid in gone:
            del self._adopting[oid]
            self._adopt_tries[oid] = self._adopt_tries.get(oid, 1) - 1
        self.recheck_draining()
