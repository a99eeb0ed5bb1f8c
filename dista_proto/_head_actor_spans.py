"""Actor calls in the head's timeline: each call's span, recorded like a finished task.

A worker sends a span before each answer, for an actor call as for a task (the page: "span
worker to head, before the result"). A worker hosting an actor runs nothing else, so the
head routes what it sends to the actor's part, which once dropped spans: no actor call
reached `dista timeline`. `Head` routes a hosting worker's spans here instead: a span of a
call the worker's actor has outstanding becomes a timeline record for the call's caller,
under `actor_call_task_id` (class and method), with the worker's three stamps and the time
it came as ``settled`` (its answer follows it in the same write). Other spans (marks, a
call answered before, a forged ID) record nothing.
"""

from __future__ import annotations

from typing import Final

from ._events import Span
from ._head_records import Peer
from ._head_wire import Wire
from ._timeline import TimelineLog, actor_call_task_id

__all__ = ["ActorSpans"]

#: The (type, method) pairs whose timeline task IDs are kept (a hash per call costs about a
#: microsecond; a driver naming endless methods only refills the table).
_KEPT_IDS: Final = 1024


class ActorSpans:
    """Turns a hosting worker's spans into timeline records of its actor's calls."""

    __slots__ = ("_ids", "_timeline", "_wire")

    def __init__(self, wire: Wire, timeline: TimelineLog) -> None:
        self._wire = wire
        self._timeline = timeline
        self._ids: dict[tuple[int, int], int] = {}  # (type, method) -> the record's task ID

    def on_span(self, worker: Peer, span: Span) -> None:
        actor = worker.actor
        if span.mark or actor is None:
            return  # marks are about tasks' slots; a hosting worker lends none
        oid = span.object_id
        call = actor.by_oid.get(oid)
        if call is None:
            return  # answered before (run again after a restore), or not its call at all
        key = (actor.type_id, call.method)
        task_id = self._ids.get(key)
        if task_id is None:
            if len(self._ids) >= _KEPT_IDS:
                self._ids.clear()
            task_id = self._ids[key] = actor_call_task_id(*key)
        # The head keeps no submitted, queued or dispatched time per call: 0 is unknown.
        self._timeline.add(
            call.owner, oid, task_id, 0, 0, 0, self._wire.now, span.arrived, span.started,
            span.ended, worker.address,
        )  # fmt: skip
