"""Calls the checkpoint an actor came back from includes already, after a head restart.

Theory of operation. A caller keeps each of its calls until told a checkpoint covers it,
so after a head restart it sends again calls the actor's newest checkpoint may include. The
worker's answer to the restore says which: after the count of calls, per caller, the newest
call the state includes (8 bytes per call ID; that call and every earlier one of its caller
are in it). Those calls take no place in the actor's order, and the worker does not count
them either. Numbered, they would take places no call ran at, and a later head restoring
from the same checkpoint would see those places as free: the replay after its restart would
put a call whose answer was lost there, ahead of calls answered after it (the state it
builds would contradict their answers).

So at the restore, and for each such call a caller brings later:

- one answered before (sent again for the actor's state only) is dropped;
- one whose answer was lost with the head is sent to the actor unnumbered, ahead of the
  numbered calls, and again on every start until answered: the worker answers it from the
  answers the checkpoint keeps (`KeptAnswers`), or says it is covered;

and each of their callers hears covered (it lets the answered ones go).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque

from ._conventions import ID_BITS, kept_size
from ._encode import actor_call_frame
from ._events import ActorCall, Covered
from ._head_counts import Counts
from ._head_objects import Objects
from ._head_records import ActorRecord, ActorState, CallRecord, Peer
from ._head_wire import Wire
from ._lifecycle import CallCause

__all__ = ["CoveredCalls", "read_covers"]


def read_covers(value: bytes) -> dict[int, int]:
    """The restore answer's covers after its count (and the ninth byte that says no
    checkpoint covers them): caller number -> newest call ID."""
    covers: dict[int, int] = {}
    for at in range(9 if len(value) % 8 == 1 else 8, len(value) - 7, 8):
        oid = int.from_bytes(value[at : at + 8], "little")
        covers[oid >> ID_BITS] = oid
    return covers


class CoveredCalls:
    """The calls a restored checkpoint includes: out of the order. `Actors` holds it."""

    def __init__(
        self, wire: Wire, objects: Objects, counts: Counts, answered_at: dict[int, int]
    ) -> None:
        self._wire = wire
        self._objects = objects
        self._counts = counts
        self._answered_at = answered_at

    def set_aside(self, actor: ActorRecord, covers: dict[int, int]) -> None:
        """At the restore (no call sent yet): take the calls ``covers`` includes out of
        the order, the rest numbered as if they had never been there."""
        actor.restored_covers = covers
        if not covers:
            return
        aside: list[int] = []  # their numbers, in order
        kept: deque[CallRecord] = deque()
        told: dict[int, int] = {}  # caller's link -> the newest the checkpoint has
        for call in actor.calls:
            top = covers.get(call.oid >> ID_BITS, 0)
            if call.oid > top:
                call.seq -= len(aside)
                kept.append(call)
                continue
            aside.append(call.seq)
            actor.kept_bytes -= kept_size(call.argument)
            told[call.owner] = top
            if call.oid in actor.by_oid:
                call.seq = 0
                actor.unnumbered[call.oid] = call
            else:
                self._answered_at.pop(call.oid, None)
        if not aside:
            return
        actor.calls.clear()
        actor.calls.extend(kept)
        actor.seq -= len(aside)
        pending: dict[int, list[tuple[int, int]]] = {}
        for at, asks in actor.pending.items():
            pending.setdefault(at - bisect_right(aside, at), []).extend(asks)
        actor.pending = pending
        for link, top in told.items():
            self._tell(actor, link, top)

    def take(self, peer: Peer, actor: ActorRecord, event: ActorCall, answered: bool) -> bool:
        """A call a caller brings after the restore: True if the checkpoint has it (then
        it is dropped if ``answered``, else sent unnumbered)."""
        top = actor.restored_covers.get(peer.number, 0)
        oid = event.object_id
        if oid > top or oid >> ID_BITS != peer.number:
            return False
        actor.newest_from[peer.number] = max(oid, actor.newest_from.get(peer.number, 0))
        actor.callers.add(peer.link)
        self._tell(actor, peer.link, top)
        if not answered and oid not in actor.by_oid:
            call = CallRecord(0, oid, event.task_id, event.argument, peer.link)
            self._counts.move_call(call, CallCause.TAKE)
            actor.by_oid[oid] = call
            actor.unnumbered[oid] = call
            # As a numbered call would be: to the worker it is built on, not one kept for
            # it nor one it moves off (it goes where it lands, with the start).
            built = actor.state is ActorState.STARTING or actor.state is ActorState.READY
            if built and actor.worker is not None and not (actor.restoring or actor.moving):
                self._send(actor, actor.worker, call)
        return True

    def send(self, actor: ActorRecord) -> None:
        """On a start: the calls that wait for their answer, ahead of the numbered ones."""
        worker = actor.worker
        if worker is not None:
            for call in actor.unnumbered.values():
                self._send(actor, worker, call)

    def _send(self, actor: ActorRecord, worker: Peer, call: CallRecord) -> None:
        """As `Actors.send_calls` sends a numbered call (the same frame, the same mark)."""
        self._objects.store_mark(call.oid, worker)
        frame = actor_call_frame(call.oid, call.method, actor.actor_id, call.argument)
        self._wire.links.send_encoded(worker.link, frame)

    def _tell(self, actor: ActorRecord, link: int, top: int) -> None:
        number = top >> ID_BITS
        if top > actor.covered_of.get(number, 0):
            actor.covered_of[number] = top
        if link in self._wire.peers:
            self._wire.links.send(link, Covered(actor.actor_id, top))
