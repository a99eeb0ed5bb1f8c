"""The head's dealings with its workers' checkpoint stores, for actors.

Theory of operation. Workers whose hello carried `HELLO_CHECKPOINTS` reach a checkpoint
store; the head tells them two things about it beyond the page:

- **Builds are numbered** (`build`). Before each actor-create or actor-restore to such a
  worker goes actor-build (Dista's kind 38): this head's epoch and a count from 1. The
  store orders the incarnation that build begins by it, so builds are ordered as the heads
  asked for them, not as they ran: a create a cut-off worker had queued and runs late
  fences off no copy a head counts on (docs/protocol.md, "Fenced checkpoints").
- **Ended actors' checkpoints go** (`forget`). An actor that ends where no worker hosts it
  (waiting, or its host lost) may have left checkpoints: actor-kill for an actor it does not
  host makes a worker with a store remove them (one that does not drain: it may exit before
  the frame reaches it). With none connected, the next one that joins or is freed does
  (`store_came`); the newest `FORGETS_KEPT` wait for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from ._events import ActorBuild, ActorCreate, ActorKill, ActorRestore
from ._head_records import Peer
from ._head_wire import Wire

__all__ = ["FORGETS_KEPT", "Stores"]

#: Ended actors whose checkpoints wait for a worker with a store to remove them, at most.
FORGETS_KEPT: Final = 10_000


class Stores:
    """Numbered builds and the removal of ended actors' checkpoints (see the module)."""

    def __init__(self, wire: Wire, holds: Callable[[Peer], bool]) -> None:
        self._wire = wire
        self._holds = holds  # whether a worker holds a live copy not placed yet (busy)
        self._builds = 0  # actor builds this head asked for
        #: Ended actors whose checkpoints no worker with a store was there to remove.
        self._unforgotten: dict[int, None] = {}

    def build(self, worker: Peer, frame: ActorCreate | ActorRestore) -> None:
        """Send ``frame`` to ``worker``; to one with a store, numbered first."""
        send = self._wire.links.send
        if worker.checkpoints:
            self._builds += 1
            send(worker.link, ActorBuild(frame.object_id, self._builds, self._wire.epoch))
        send(worker.link, frame)

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
            return
        unforgotten = self._unforgotten
        unforgotten[actor_id] = None
        if len(unforgotten) > FORGETS_KEPT:
            del unforgotten[next(iter(unforgotten))]

    def store_came(self, worker: Peer) -> None:
        """``worker`` joined or was freed: with a store, it removes the checkpoints of the
        actors that ended while no worker with one was there."""
        unforgotten = self._unforgotten
        if unforgotten and worker.checkpoints and not worker.draining and not self._holds(worker):
            for actor_id in unforgotten:
                self._wire.links.send(worker.link, ActorKill(actor_id))
            unforgotten.clear()
