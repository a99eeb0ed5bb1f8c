"""Where an actor goes: a free worker of its registry, a busy one kept for it, or a wait.

An actor takes a whole worker: "An actor lives on one worker, which runs nothing else while
it hosts it." It goes to a worker of its registry with nothing running; if every such
worker is busy, the least busy one is kept for it (no new tasks) until its tasks finish;
if none is free at all (each hosts an actor, or none has its registry) it waits, oldest
first, and status says why. A waiting actor whose registry no worker has fails after the
no-worker grace, as tasks do.

Checkpoint stores: a worker says in its hello whether it has one (`HELLO_CHECKPOINTS`).
Any actor prefers such a worker (its checkpoints can be written there, and it can come
back from them); an actor that restores (`needs_store`: a checkpoint covers some of its
calls, or a head restart left it to restore from the newest there is) goes only there,
since a worker without a store would build it from its constructor and lose what the
checkpoint holds. With no such worker it waits, status says why, and the no-worker grace
applies as for a registry no worker has.

`Placement` decides and says which worker to start an actor on; `Actors` (which holds it)
starts it there. It never starts, ends or sends anything itself.
"""

from __future__ import annotations

from collections import deque
from typing import Final

from ._head_counts import Counts
from ._head_records import ActorRecord, ActorState, Peer
from ._head_registries import BY_VALUE
from ._head_scheduling import Scheduler
from ._head_wire import Wire
from ._lifecycle import ActorCause

__all__ = ["NO_STORE", "Placement", "needs_store"]

#: Why an actor that restores waits: no worker that may host it has a checkpoint store.
NO_STORE: Final = (
    "no connected worker has a checkpoint store: set DISTA_CHECKPOINT_URI on the workers"
)


def needs_store(actor: ActorRecord) -> bool:
    """Whether ``actor`` restores from a checkpoint, so only a worker with a store may
    host it: one covers some of its calls, or it is rebuilt after a head restart from the
    newest there is."""
    return actor.covered >= 0 or actor.restoring


_WAITING: Final = ActorState.WAITING


class Placement:
    """The actors waiting for a worker, and the choice of one."""

    def __init__(self, wire: Wire, counts: Counts, scheduler: Scheduler) -> None:
        self._wire = wire
        self._counts = counts
        self._scheduler = scheduler
        self.waiting: deque[ActorRecord] = deque()

    def candidates(self, actor: ActorRecord) -> list[Peer]:
        """The connected workers that may host ``actor`` now (hosting none, not draining,
        with a checkpoint store if it restores)."""
        hosts = self._hosts(actor)
        if needs_store(actor):
            return [w for w in hosts if w.checkpoints]
        return hosts

    def _hosts(self, actor: ActorRecord) -> list[Peer]:
        """The connected workers of ``actor``'s registry hosting none, not draining."""
        scheduler = self._scheduler
        if actor.registry >= BY_VALUE:
            # A class sent by value: on its driver's registry's workers, or those that
            # accept by-value code of any registry.
            serving = scheduler.workers_for(actor.registry - BY_VALUE) | scheduler.accepting
        else:
            serving = scheduler.workers_for(actor.registry)
        alive = self._wire.alive
        return [w for w in serving if w.actor is None and not w.draining and alive(w)]

    def choose(self, actor: ActorRecord) -> Peer | None:
        """Place ``actor``: the worker to start it on now; None if it waits (queued, its
        ``why`` says for what) or a busy worker is kept for it (`kept_for` starts it)."""
        actor.worker = None
        self._counts.move_actor(actor, ActorCause.PLACE)
        actor.since = self._wire.now
        free = self.candidates(actor)
        if not free:
            actor.why = self._why_none(actor)
            if actor not in self.waiting:
                self.waiting.append(actor)
            return None
        # A worker with a store first (the actor's checkpoints can be written there), then
        # the least busy.
        worker = min(free, key=lambda w: (not w.checkpoints, len(w.running), str(w.address)))
        worker.actor = actor
        actor.worker = worker
        if worker.running:
            actor.why = f"{worker.name} finishes its {len(worker.running)} tasks first"
            return None
        return worker

    def _why_none(self, actor: ActorRecord) -> str:
        if needs_store(actor) and self._scheduler.served(actor.registry):
            if not self._stored(actor):
                return NO_STORE
            return (
                "every worker of its registry with a checkpoint store hosts an actor: start "
                "another worker with DISTA_CHECKPOINT_URI set"
            )
        if self._scheduler.served(actor.registry):
            return "every worker of its registry hosts an actor: start another worker"
        if actor.registry >= BY_VALUE:
            return (
                f"no connected worker may host a by-value class of registry "
                f"{actor.registry - BY_VALUE:#018x}: start workers importing the same "
                "modules as the driver, or with --accept-by-value"
            )
        return f"no connected worker has its driver's registry {actor.registry:#018x}"

    def due(self) -> list[tuple[ActorRecord, Peer]]:
        """A worker came or was freed: the waiting actors that can start now, oldest
        first, each with its worker (the rest wait on, or keep a busy worker)."""
        starts = []
        waiting = self.waiting
        for _ in range(len(waiting)):
            actor = waiting.popleft()
            if actor.state is _WAITING and actor.worker is None:
                worker = self.choose(actor)  # waits again (appended) if there is none
                if worker is not None:
                    starts.append((actor, worker))
        return starts

    def better(self, actor: ActorRecord) -> Peer | None:
        """For an actor that keeps a busy worker: a worker with nothing to do, if any."""
        free = [w for w in self.candidates(actor) if not w.running]
        kept = actor.worker
        if kept is not None and kept.checkpoints:
            free = [w for w in free if w.checkpoints]  # not one without a store instead
        return min(free, key=lambda w: (not w.checkpoints, str(w.address))) if free else None

    # -- the pulled timer: actors no worker can host ---------------------------------------

    def _orphaned(self, actor: ActorRecord) -> bool:
        """It waits for a worker that is not there: none of its registry, or (restoring)
        none of its registry with a checkpoint store."""
        if actor.state is not _WAITING:
            return False
        if needs_store(actor):
            return not self._stored(actor)
        return not self._scheduler.served(actor.registry)

    def _stored(self, actor: ActorRecord) -> bool:
        """Whether a connected worker that may host ``actor`` has a store (busy or not)."""
        key = actor.registry
        if key >= BY_VALUE:
            workers = self._scheduler.workers_for(key - BY_VALUE) | self._scheduler.accepting
        else:
            workers = self._scheduler.workers_for(key)
        return any(w.checkpoints and not w.draining for w in workers)

    def next_deadline(self) -> int | None:
        starts = [a.since for a in self.waiting if self._orphaned(a)]
        return min(starts) + self._scheduler.no_worker_grace_ns if starts else None

    def expired(self, now: int) -> list[tuple[ActorRecord, str]]:
        """Actors no worker of their registry came for within the grace, and why they
        end (taken off the queue)."""
        grace = self._scheduler.no_worker_grace_ns
        ended = []
        for actor in list(self.waiting):
            if self._orphaned(actor) and now >= actor.since + grace:
                self.waiting.remove(actor)
                lost = f" after losing its worker ({actor.lost})" if actor.lost else ""
                why = (
                    f"no worker can host actor {actor.actor_id:#x}{lost} (type "
                    f"{self._wire.labels.name(actor.type_id)}): {_unhosted(actor)} (waited "
                    f"{grace / 1e9:g} s "
                    "for one)"
                )
                ended.append((actor, why))
        return ended


def _unhosted(actor: ActorRecord) -> str:
    if actor.registry >= BY_VALUE or actor.why == NO_STORE:
        return actor.why  # (which names the fix)
    return f"none of the connected workers has its driver's registry {actor.registry:#018x}"
