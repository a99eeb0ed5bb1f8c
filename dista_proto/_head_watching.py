"""What the head tells people: labels of IDs, peers' vitals, and a dashboard's snapshots.

Drivers send labels (kind 42: what their tasks, actor classes and methods are called) and
drivers and workers send vitals now and then (kind 43: process ID, resident bytes, and a
worker's checkpoints written); an observer asks for labels, or for a snapshot (kind 44:
the state as JSON, `_head_snapshot`, and the timeline records it has not seen). A
snapshot carries the labels the observer has not had on this connection, so a dashboard
names what it shows without asking twice. See docs/protocol.md, "Extensions: the
dashboard".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from ._events import Event, HeadStats, Labels, Snapshot, Vitals
from ._head_answers import Answers
from ._head_counts import Counts
from ._head_labels import LabelTable
from ._head_records import ActorRecord, Peer, TrackedObject
from ._head_resume import Resume
from ._head_scheduling import Scheduler
from ._head_snapshot import dumps, snapshot_document
from ._head_wire import Wire
from ._roles import Role
from .frame import MAX_LABELS

__all__ = ["SNAPSHOT_ROWS", "Watching"]

#: The most timeline rows one snapshot carries (61 bytes each); a dashboard further behind
#: asks again at once (the document says ``more``).
SNAPSHOT_ROWS: Final = 50_000
_Route = Callable[[Peer, Any], None]


class Watching:
    """Labels, vitals and snapshots (see the module docstring)."""

    def __init__(
        self,
        wire: Wire,
        counts: Counts,
        scheduler: Scheduler,
        answers: Answers,
        resume: Resume,
        *,
        stats: Callable[[], HeadStats],
        objects: dict[int, TrackedObject],
        actors: dict[int, ActorRecord],
        actor_names: dict[int, str],
        liveness_ns: Callable[[], int],
        wall_offset_ns: int,
    ) -> None:
        self._wire = wire
        self._counts = counts
        self._scheduler = scheduler
        self._answers = answers
        self._resume = resume
        self._stats = stats
        self._objects = objects
        self._actors = actors
        self._actor_names = actor_names
        self._liveness_ns = liveness_ns
        self._wall_offset_ns = wall_offset_ns
        self.labels: LabelTable = wire.labels
        self._told: dict[int, int] = {}  # observer link -> labels it has had
        #: Checkpoints written, bytes and ns, summed over every worker's vitals (a worker's
        #: own counts restart with it: only what grew since its last vitals is added).
        self.checkpoints: list[int] = [0, 0, 0]
        self._last: dict[int, tuple[int, int, int]] = {}  # worker link -> its last counts

    def routes(self, role: Role) -> dict[type[Event], _Route]:
        """What a peer of ``role`` may send here."""
        if role == Role.OBSERVER:
            return {Labels: self.on_ask_labels, Snapshot: self.on_snapshot}
        if role == Role.WORKER:
            return {Vitals: self.on_vitals}
        return {Labels: self.on_labels, Vitals: self.on_vitals}

    def forget(self, link: int) -> None:
        self._told.pop(link, None)
        self._last.pop(link, None)

    # -- from drivers and workers ----------------------------------------------------------

    def on_labels(self, peer: Peer, event: Labels) -> None:
        self.labels.learn(event.entries)

    def on_vitals(self, peer: Peer, event: Vitals) -> None:
        peer.pid = event.pid
        peer.rss = event.rss
        now = (event.checkpoints, event.checkpoint_bytes, event.checkpoint_ns)
        before = self._last.get(peer.link, (0, 0, 0))
        if any(n < b for n, b in zip(now, before, strict=True)):
            before = (0, 0, 0)  # (counts never go down on one connection: a forgery)
        for i, (n, b) in enumerate(zip(now, before, strict=True)):
            self.checkpoints[i] += n - b
        self._last[peer.link] = now

    # -- from observers --------------------------------------------------------------------

    def on_ask_labels(self, peer: Peer, event: Labels) -> None:
        entries = self.labels.entries_from(event.start, MAX_LABELS)
        self._answers.answer(peer, Labels(entries, event.start), 210 * len(entries))

    def on_snapshot(self, peer: Peer, event: Snapshot) -> None:
        told = self._told.get(peer.link, 0)
        fresh = self.labels.entries_from(told, len(self.labels))
        self._told[peer.link] = told + len(fresh)
        rows, last, more = self._scheduler.timeline.since(event.since, SNAPSHOT_ROWS)
        document = self.document()
        document["labels"] = {str(i): label for i, label in fresh}
        document["timeline"] = {"next": last, "more": more}
        text = dumps(document)
        self._answers.answer(peer, Snapshot(last, text, rows), len(text) + len(rows))

    def document(self) -> dict[str, Any]:
        """The state as a snapshot's document shows it (but labels and timeline)."""
        count, size, ns = self.checkpoints
        resume = self._resume
        counters = {
            "frames_refused": self._wire.refused,
            "resumes": resume.resumes,
            "head_restarts": len(resume.epochs_before),
            "actor_calls": self._counts.actor_calls,
            "checkpoints": count,
            "checkpoint_bytes": size,
            "checkpoint_seconds": ns / 1e9,
        }
        liveness = self._liveness_ns()
        extra = {
            "labels": self.labels,
            "counters": counters,
            "actor_names": self._actor_names,
            "silent_ns": max(liveness // 3, 1_000_000_000) if liveness else 0,
            "wall_offset_ns": self._wall_offset_ns,
        }
        counts = self._counts
        actors: Iterable[ActorRecord] = self._actors.values()
        return snapshot_document(
            self._wire,
            self._stats(),
            self._scheduler,
            self._objects,
            actors,
            (counts.by_function(), counts.by_owner()),
            extra,
        )
