"""A dashboard's snapshot of the head: its state as one JSON document (docs/protocol.md,
"Extensions: the dashboard", has the fields).

Built only when an observer asks (a dashboard asks about once a second), from the parts'
records in one walk over the tracked objects: counts and bytes by worker and by driver, the
largest objects, and every task not running grouped by driver, function and *why it waits*
(`Reasons`), which is the question a person brings to a dashboard. Nothing here is kept
between snapshots, and nothing on a task's path pays for it.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable
from typing import Any, Final

from ._events import HeadStats
from ._head_labels import LabelTable
from ._head_records import ActorRecord, ActorState, ObjState, Peer, TaskState, TrackedObject
from ._head_registries import BY_VALUE
from ._head_scheduling import Scheduler
from ._head_wire import Wire
from ._roles import Role

__all__ = ["LARGEST_SHOWN", "Reasons", "snapshot_document"]

#: The largest objects a snapshot names, and the running tasks it lists per worker.
LARGEST_SHOWN: Final = 20
RUNNING_SHOWN: Final = 8
_HELD: Final = (ObjState.INLINE, ObjState.STORED)
_WAITS: Final = {TaskState.WAITING: "waiting", TaskState.QUEUED: "queued"}


class Reasons:
    """Why tasks queued under one key (a registry, or its by-value queue) are not running:
    a cause (a word, for metrics) and a sentence, worked out once per key per snapshot."""

    def __init__(self, wire: Wire, scheduler: Scheduler) -> None:
        self._workers = wire.workers()
        self._scheduler = scheduler
        self._known: dict[int, tuple[str, str]] = {}

    def queued(self, key: int) -> tuple[str, str]:
        reason = self._known.get(key)
        if reason is None:
            reason = self._known[key] = self._why(key)
        return reason

    def _why(self, key: int) -> tuple[str, str]:
        able = [w for w in self._workers if self._scheduler.may_run(w, key)]
        if not able:
            if key >= BY_VALUE:
                return "no-worker", (
                    "no worker runs by-value code for its driver: start a worker that "
                    "imports the driver's task modules, or one that accepts any (the default)"
                )
            return "no-worker", (
                "no worker has its task modules: start workers that import them "
                "(dista worker --import PACKAGE); it fails if none comes in time"
            )
        live = [w for w in able if not w.draining]
        if not live:
            return "draining", f"every worker that can run it is draining ({_n(able, 'worker')})"
        free = [w for w in live if w.actor is None]
        if not free:
            return "actors", (
                f"every worker that can run it hosts an actor ({_n(live, 'worker')}): start "
                "another worker"
            )
        if all(w.free <= 0 for w in free):
            slots = sum(w.free + len(w.running) - w.blocked for w in free)
            others = len(live) - len(free)
            also = f"; {others} more {'host' if others > 1 else 'hosts'} an actor" * bool(others)
            return "busy", (
                f"every worker that can run it is busy ({_n(free, 'worker')}, {slots} "
                f"slot{'s' * (slots != 1)}{also})"
            )
        return "sending", "being sent to a worker"


def _n(items: list[Peer], word: str) -> str:
    return f"{len(items)} {word}{'s' * (len(items) != 1)}"


def _waiting_on(obj: TrackedObject, labels: LabelTable) -> str:
    task = obj.task
    assert task is not None
    for source in task.inputs:
        if source.state is ObjState.PENDING:
            maker = source.task
            if maker is not None:
                return f"waiting for its inputs: results of {labels.name(maker.function)}"
            return "waiting for its inputs: an object whose worker was lost comes back"
    return "waiting for its inputs"


def _actor_rows(
    actors: Iterable[ActorRecord], names: dict[int, str], labels: LabelTable
) -> list[dict[str, Any]]:
    rows = []
    for a in actors:
        if a.state is ActorState.DEAD:
            continue
        rows.append(
            {
                "actor_id": a.actor_id,
                "type_id": a.type_id,
                "name": names.get(a.actor_id, ""),
                "class": labels.get(a.actor_id) or labels.name(a.type_id),
                "state": a.state.name.lower(),
                "worker": str(a.worker.address) if a.worker is not None else None,
                "calls": a.seq,
                "unanswered": len(a.by_oid),
                "checkpoints": a.checkpoints,
                "covered": a.covered,
                "restarts": a.restarts,
                "why": a.why if a.state is ActorState.WAITING else (a.failure or ""),
            }
        )
    return rows


def snapshot_document(
    wire: Wire,
    stats: HeadStats,
    scheduler: Scheduler,
    objects: dict[int, TrackedObject],
    actors: Iterable[ActorRecord],
    tallies: tuple[dict[int, list[int]], dict[int, list[int]]],
    extra: dict[str, Any],
) -> dict[str, Any]:
    """The snapshot's document but ``labels`` and ``timeline`` (`Watching` adds them):
    ``tallies`` per function and per owner link (`Counts`), ``extra`` the counters,
    actor names and liveness the caller keeps."""
    labels: LabelTable = extra["labels"]
    now = wire.now
    by_function, by_owner = tallies
    reasons = Reasons(wire, scheduler)
    held: dict[int, list[int]] = {}  # worker link -> [objects, bytes]
    owned: dict[int, list[int]] = {}  # owner link -> [objects, bytes]
    waits: dict[int, list[int]] = {}  # owner link -> [waiting, queued, running]
    groups: dict[tuple[int, int, str, tuple[str, str]], int] = {}
    for obj in objects.values():
        mine = owned.get(obj.owner)
        if mine is None:
            mine = owned[obj.owner] = [0, 0]
        mine[0] += 1
        if obj.state in _HELD:
            mine[1] += obj.size
            if obj.holder is not None:
                theirs = held.get(obj.holder.link)
                if theirs is None:
                    theirs = held[obj.holder.link] = [0, 0]
                theirs[0] += 1
                theirs[1] += obj.size
        task = obj.task
        if task is None or task.oid != obj.oid:
            continue
        counts = waits.get(task.owner)
        if counts is None:
            counts = waits[task.owner] = [0, 0, 0]
        state = _WAITS.get(task.state)
        if state is None:
            counts[2] += task.state is TaskState.RUNNING
            continue
        counts[state == "queued"] += 1
        if state == "waiting":
            why = ("inputs", _waiting_on(obj, labels))
        else:
            why = reasons.queued(task.registry)
        key = (task.owner, task.function, state, why)
        groups[key] = groups.get(key, 0) + 1
    largest = heapq.nlargest(
        LARGEST_SHOWN, (o for o in objects.values() if o.state in _HELD), key=lambda o: o.size
    )
    peers = list(wire.peers.values())
    workers = [p for p in peers if p.role == Role.WORKER]
    drivers = [p for p in peers if p.role in (Role.DRIVER, Role.CLIENT)]
    number = {p.link: p.number for p in drivers}
    silent_ns: int = extra["silent_ns"]
    return {
        "version": 1,
        "epoch": wire.epoch,
        "stopping": wire.stopping,
        "time_ns": now + extra["wall_offset_ns"],
        "totals": stats._asdict(),
        "counters": extra["counters"],
        "workers": [
            _worker(w, held.get(w.link, [0, 0]), scheduler, now, silent_ns) for w in workers
        ],
        "departed": [
            {
                "address": str(p.address),
                "pid": p.pid or None,
                "why": "drained"
                if p.draining
                else "silent"
                if why.startswith("silent")
                else "lost",
                "detail": why,
                "ago_s": (now - at) / 1e9,
            }
            for p, why, at in wire.departed
        ],
        "drivers": [
            _driver(d, by_owner.get(d.link), waits.get(d.link), owned.get(d.link)) for d in drivers
        ],
        "queues": [
            {
                "driver": number.get(o, 0),
                "task_id": f,
                "state": s,
                "count": n,
                "cause": cause,
                "reason": why,
            }
            for (o, f, s, (cause, why)), n in sorted(groups.items(), key=lambda kv: -kv[1])
        ],
        "objects": {
            "count": len(objects),
            "bytes": stats.held_bytes,
            "by_worker": [
                {"address": str(w.address), "count": held[w.link][0], "bytes": held[w.link][1]}
                for w in workers
                if w.link in held
            ],
            "by_driver": [
                {"driver": number[link], "count": c, "bytes": b}
                for link, (c, b) in owned.items()
                if link in number
            ],
            "largest": [
                {
                    "object_id": o.oid,
                    "bytes": o.size,
                    "driver": number.get(o.owner, 0),
                    "where": str(o.holder.address) if o.holder is not None else "head",
                    "task_id": o.maker or None,
                }
                for o in largest
            ],
        },
        "actors": _actor_rows(actors, extra["actor_names"], labels),
        "functions": [
            {"task_id": f, "submitted": s, "finished": d, "failed": x, "retried": r}
            for f, (s, d, x, r) in by_function.items()
        ],
    }


def _worker(
    w: Peer, held: list[int], scheduler: Scheduler, now: int, silent_ns: int
) -> dict[str, Any]:
    quiet = now - w.heard if w.heard else 0
    state = "draining" if w.draining else "silent" if silent_ns and quiet > silent_ns else "ready"
    running = list(w.running.values())[:RUNNING_SHOWN]
    return {
        "link": w.link,
        "address": str(w.address),
        "host": w.host,
        "pid": w.pid or None,
        "rss": w.rss or None,
        "slots": scheduler.worker_slots,
        "running": len(w.running),
        "blocked": w.blocked,
        "free": max(w.free, 0),
        "holding": held[0],
        "held_bytes": held[1],
        "actor": w.actor.actor_id if w.actor is not None else None,
        "state": state,
        "why": w.why,
        "checkpoints": w.checkpoints,
        "registry": w.registry,
        "silent_s": quiet / 1e9,
        "tasks": [
            {
                "object_id": t.oid,
                "task_id": t.function,
                "running_s": (now - t.dispatched) / 1e9 if t.dispatched else 0.0,
            }
            for t in running
        ],
    }


def _driver(
    d: Peer, tally: list[int] | None, waits: list[int] | None, owned: list[int] | None
) -> dict[str, Any]:
    submitted, finished, failed, retried = tally or (0, 0, 0, 0)
    waiting, queued, running = waits or (0, 0, 0)
    count, size = owned or (0, 0)
    return {
        "link": d.link,
        "number": d.number,
        "kind": "client" if d.role == Role.CLIENT else "driver",
        "host": d.host,
        "pid": d.pid or None,
        "rss": d.rss or None,
        "registry": d.registry,
        "submitted": submitted,
        "finished": finished,
        "failed": failed,
        "retried": retried,
        "waiting": waiting,
        "queued": queued,
        "running": running,
        "objects": count,
        "bytes": size,
    }


def dumps(document: dict[str, Any]) -> str:
    return json.dumps(document, separators=(",", ":"))
