"""The head's dealings with its workers' checkpoint stores, for actors.

Theory of operation. Workers whose hello carried `HELLO_CHECKPOINTS` reach a checkpoint
store; the head tells them two things about it beyond the page:

- **Builds are numbered** (`build`). Before each actor-create or actor-restore to such a
  worker goes actor-build (Dista's kind 38): this head's epoch and a count from 1. The
  store orders the incarnation that build begins by it, so builds are ordered as the heads
  asked for them, not as they ran: a create a cut-off worker had queued and runs late
  fences off no copy a head counts on (docs/protocol.md, "Fenced checkpoints").
- **Ended actors' checkpoints go** (`forget`, `kill`). Its host removes them (actor-kill);
  an actor that ends where no worker hosts it (waiting, or its host lost) may have left
  some: actor-kill for an actor it does not host makes a worker with a store remove them
  (one that does not drain: it may exit before the frame reaches it). With none
  connected, the next one that joins or is freed does (`store_came`); the newest
  `FORGETS_KEPT` wait for it.

A removal is sure only once its actor-kill reached the worker: the worker's core then
hands the removal to its binding, which finishes it even past a head loss or before an
exit. The head knows it has when the worker answers the checkpoint ask it sends right
behind the actor-kill (`FORGET_ASK` in the task-ID field: a worker answers an ask for an
actor it does not host at once, in order, with checkpointed and a failure). Until then
the removal is on its way: a worker lost first has it sent again elsewhere (the frame may
have been lost with the link), and the drivers that called a killed actor do not hear it
ended (`ended`), so the driver that killed it keeps its kill, and sends create and kill
again to a head that restarts meanwhile (which forgets the removals it had on their way).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from ._events import (
    ActorBuild,
    ActorCreate,
    ActorKill,
    ActorRestore,
    Checkpoint,
    Checkpointed,
    Error,
)
from ._head_records import ActorRecord, Peer
from ._head_wire import Wire

__all__ = ["FORGETS_KEPT", "FORGET_ASK", "Stores"]

#: Ended actors whose checkpoints wait for a worker with a store to remove them, at most.
FORGETS_KEPT: Final = 10_000
#: The task-ID field of the checkpoint ask that follows a removal's actor-kill (no
#: checkpoint covers that many calls): its answer says the actor-kill arrived.
FORGET_ASK: Final = (1 << 64) - 1


class Stores:
    """Numbered builds and the removal of ended actors' checkpoints (see the module)."""

    def __init__(self, wire: Wire, holds: Callable[[Peer], bool]) -> None:
        self._wire = wire
        self._holds = holds  # whether a worker holds a live copy not placed yet (busy)
        self._builds = 0  # actor builds this head asked for
        #: Ended actors whose checkpoints no worker with a store was there to remove.
        self._unforgotten: dict[int, None] = {}
        #: Removals sent and not known to have arrived: actor -> the worker's link.
        self._sent: dict[int, int] = {}
        #: Ended actors whose drivers hear it once the removal arrived.
        self._untold: dict[int, ActorRecord] = {}

    def build(self, worker: Peer, frame: ActorCreate | ActorRestore) -> None:
        """Send ``frame`` to ``worker``; to one with a store, numbered first."""
        send = self._wire.links.send
        if worker.checkpoints:
            self._builds += 1
            send(worker.link, ActorBuild(frame.object_id, self._builds, self._wire.epoch))
        send(worker.link, frame)

    def kill(self, worker: Peer, actor_id: int) -> None:
        """Actor-kill to the worker that hosts ``actor_id``: it removes the checkpoints."""
        self._wire.links.send(worker.link, ActorKill(actor_id))
        if worker.checkpoints:
            self._asked(worker, actor_id)

    def forget(self, actor_id: int) -> None:
        """``actor_id`` ended where no worker hosts it: a worker with a store removes what
        it may have written, now or when one comes."""
        # (Not one that drains: it may exit before the frame reaches it.)
        stores = [
            w
            for w in self._wire.workers()
            if w.checkpoints and not w.draining and not self._holds(w)
        ]
        if stores:
            worker = min(stores, key=lambda w: str(w.address))
            self._wire.links.send(worker.link, ActorKill(actor_id))
            self._asked(worker, actor_id)
            return
        unforgotten = self._unforgotten
        unforgotten[actor_id] = None
        if len(unforgotten) > FORGETS_KEPT:
            oldest = next(iter(unforgotten))
            del unforgotten[oldest]
            self._arrived(oldest)  # (given up: its drivers hear it ended)

    def store_came(self, worker: Peer) -> None:
        """``worker`` joined or was freed: with a store, it removes the checkpoints of the
        actors that ended while no worker with one was there."""
        unforgotten = self._unforgotten
        if unforgotten and worker.checkpoints and not worker.draining and not self._holds(worker):
            for actor_id in unforgotten:
                self._wire.links.send(worker.link, ActorKill(actor_id))
                self._asked(worker, actor_id)
            unforgotten.clear()

    def ended(self, actor: ActorRecord) -> None:
        """``actor`` ended: the drivers that called it hear so; after a kill, once its
        checkpoints' removal has arrived (the driver that killed it sends the kill again
        until it hears: to a head that restarts meanwhile). Other ends are told at once."""
        actor_id = actor.actor_id
        if actor.ending and (actor_id in self._sent or actor_id in self._unforgotten):
            self._untold[actor_id] = actor
        else:
            self._tell(actor)

    def answered(self, worker: Peer, event: Checkpointed) -> bool:
        """Whether ``event`` (checkpointed, from ``worker``) answers a removal's ask: the
        actor-kill before it arrived."""
        if event.task_id != FORGET_ASK:
            return False
        actor_id = event.object_id
        if self._sent.get(actor_id) == worker.link:
            del self._sent[actor_id]
            self._arrived(actor_id)
        return True

    def lost(self, worker: Peer) -> None:
        """``worker`` is lost: the removals sent it and not known to have arrived go again,
        elsewhere (or to the next worker with a store that comes)."""
        if not self._sent:
            return
        link = worker.link
        for actor_id in [a for a, to in self._sent.items() if to == link]:
            del self._sent[actor_id]
            self.forget(actor_id)

    def _asked(self, worker: Peer, actor_id: int) -> None:
        self._wire.links.send(worker.link, Checkpoint(actor_id, FORGET_ASK, None, None))
        self._sent[actor_id] = worker.link

    def _arrived(self, actor_id: int) -> None:
        actor = self._untold.pop(actor_id, None)
        if actor is not None:
            self._tell(actor)

    def _tell(self, actor: ActorRecord) -> None:
        wire = self._wire
        for link in actor.callers:
            if link in wire.peers:
                wire.links.send(link, Error(actor.actor_id, actor.why))
