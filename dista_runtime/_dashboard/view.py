"""The page's view model: the head's snapshot with every ID resolved to what a person reads.

Pure: `page_state` takes the latest snapshot and what the `Board` accumulated (names,
departed workers, the interned tables its timeline rows point into) and returns a JSON-ready
dict. The browser only lays it out: a task is ``module.function`` (its hex if the head has
not named it), a worker ``host:port (pid N)``, a driver ``driver N (host, pid N)``; u64 IDs
are hex strings (JSON numbers are doubles in a browser); times are µs from ``base_ms``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from .fields import (
    Record,
    as_float,
    as_int,
    as_str,
    driver_label,
    hex_id,
    maybe_int,
    records,
    sub,
    worker_label,
)

__all__ = ["Departure", "Tables", "page_state"]

JSON = dict[str, object]


class Departure(NamedTuple):
    """A worker no longer in the snapshot: shown as lost or drained for a while."""

    address: str
    pid: int | None
    why: str  # "lost" | "drained"
    at_ns: int  # wall-clock ns, on the head's clock


class Tables(NamedTuple):
    """What the board accumulated beside the latest snapshot."""

    names: Mapping[int, str]
    departed: Mapping[str, Departure]
    functions: list[int]  # a row's function index -> task_id
    row_workers: list[str]  # a row's worker index -> address
    base_ns: int


def name_of(names: Mapping[int, str], task_id: int | None) -> str | None:
    if task_id is None:
        return None
    return names.get(task_id) or hex_id(task_id)


def _us(tables: Tables, wall_ns: int) -> int:
    return (wall_ns - tables.base_ns) // 1000


def page_state(
    snapshot: Record, tables: Tables, *, version: int, up: bool, why: str, rows: JSON
) -> JSON:
    """The whole view model but the timeline rows, which go incrementally (`Board`)."""
    names = tables.names
    now_ns = as_int(snapshot, "time_ns") or tables.base_ns
    actors = _actors(snapshot, names)
    worker_names = {
        as_str(w, "address"): worker_label(as_str(w, "address"), maybe_int(w, "pid"))
        for w in records(snapshot, "workers")
    }
    for gone in tables.departed.values():
        worker_names.setdefault(gone.address, worker_label(gone.address, gone.pid))
    drivers = records(snapshot, "drivers")
    driver_names = {as_int(d, "number"): driver_label(d) for d in drivers}
    epoch = maybe_int(snapshot, "epoch")
    return {
        "version": version,
        "up": up,
        "why": why,
        "epoch": hex_id(epoch) if epoch is not None else None,
        "stopping": snapshot.get("stopping") is True,
        "base_ms": tables.base_ns // 1_000_000,
        "now_us": _us(tables, now_ns),
        "totals": dict(sub(snapshot, "totals")),
        "counters": dict(sub(snapshot, "counters")),
        "names": [name_of(names, task_id) for task_id in tables.functions],
        "row_workers": [[a, worker_names.get(a, a)] for a in tables.row_workers],
        "workers": _workers(snapshot, tables, names, actors, now_ns),
        # A task's own session (a client) shows once it submits something.
        "drivers": [
            row for row in map(_driver, drivers) if row["kind"] != "client" or row["submitted"]
        ],
        "queues": _queues(snapshot, names, driver_names),
        "functions": _functions(snapshot, names),
        "objects": _objects(snapshot, names, worker_names, driver_names),
        "actors": [_actor_row(a, worker_names) for a in actors],
        "rows": rows,
    }


def _workers(
    snapshot: Record, tables: Tables, names: Mapping[int, str], actors: list[JSON], now_ns: int
) -> list[JSON]:
    hosted = {actor["id"]: actor for actor in actors}
    found: list[JSON] = []
    for w in records(snapshot, "workers"):
        address, pid = as_str(w, "address"), maybe_int(w, "pid")
        slots, running = as_int(w, "slots"), as_int(w, "running")
        actor_id = maybe_int(w, "actor")
        actor = hosted.get(hex_id(actor_id)) if actor_id is not None else None
        found.append(
            {
                "address": address,
                "label": worker_label(address, pid),
                "host": as_str(w, "host"),
                "pid": pid,
                "rss": maybe_int(w, "rss"),
                "slots": slots,
                "busy": running,
                "free": max(0, slots - running),
                "blocked": as_int(w, "blocked"),
                "tasks": [
                    {
                        "object": hex_id(as_int(t, "object_id")),
                        "name": name_of(names, as_int(t, "task_id")),
                        "running_s": as_float(t, "running_s"),
                    }
                    for t in records(w, "tasks")
                ],
                "holding": as_int(w, "holding"),
                "held_bytes": as_int(w, "held_bytes"),
                "actor": _actor_title(actor) if actor else _maybe_hex(actor_id),
                "state": as_str(w, "state") or "ready",
                "why": as_str(w, "why"),
                "checkpoints": w.get("checkpoints") is True,
                "silent_s": as_float(w, "silent_s"),
                "ago_s": None,
            }
        )
    live = {w["address"] for w in found}
    departed = sorted(tables.departed.values(), key=lambda d: -d.at_ns)
    found.extend(_departed(gone, now_ns) for gone in departed if gone.address not in live)
    return found


def _departed(gone: Departure, now_ns: int) -> JSON:
    return {
        "address": gone.address,
        "label": worker_label(gone.address, gone.pid),
        "host": gone.address.rpartition(":")[0],
        "pid": gone.pid,
        "rss": None,
        "slots": 0,
        "busy": 0,
        "free": 0,
        "blocked": 0,
        "tasks": [],
        "holding": 0,
        "held_bytes": 0,
        "actor": None,
        "state": gone.why,
        "why": "",
        "checkpoints": False,
        "silent_s": 0.0,
        "ago_s": max(0.0, (now_ns - gone.at_ns) / 1e9),
    }


def _maybe_hex(value: int | None) -> str | None:
    return hex_id(value) if value is not None else None


def _driver(d: Record) -> JSON:
    waiting, queued, running = as_int(d, "waiting"), as_int(d, "queued"), as_int(d, "running")
    return {
        "number": as_int(d, "number"),
        "label": driver_label(d),
        "kind": as_str(d, "kind") or "driver",
        "rss": maybe_int(d, "rss"),
        "submitted": as_int(d, "submitted"),
        "finished": as_int(d, "finished"),
        "failed": as_int(d, "failed"),
        "retried": as_int(d, "retried"),
        "waiting": waiting,
        "queued": queued,
        "running": running,
        "outstanding": waiting + queued + running,
        "objects": as_int(d, "objects"),
        "bytes": as_int(d, "bytes"),
    }


def _driver_name(driver_names: Mapping[int, str], number: int | None) -> str | None:
    if number is None:
        return None
    return driver_names.get(number, f"driver {number}")


def _queues(
    snapshot: Record, names: Mapping[int, str], driver_names: Mapping[int, str]
) -> list[JSON]:
    found: list[JSON] = [
        {
            "driver": _driver_name(driver_names, as_int(q, "driver")),
            "function": name_of(names, as_int(q, "task_id")),
            "state": as_str(q, "state"),
            "count": as_int(q, "count"),
            "reason": as_str(q, "reason"),
        }
        for q in records(snapshot, "queues")
    ]
    # The longest waits first: the question the table answers is "what is stuck, and why".
    found.sort(key=lambda q: (str(q["driver"]), -as_int(q, "count")))
    return found


def _functions(snapshot: Record, names: Mapping[int, str]) -> list[JSON]:
    waiting: dict[int, dict[str, int]] = {}
    for q in records(snapshot, "queues"):
        counts = waiting.setdefault(as_int(q, "task_id"), {"waiting": 0, "queued": 0})
        state = as_str(q, "state")
        if state in counts:
            counts[state] += as_int(q, "count")
    found: list[JSON] = []
    for f in records(snapshot, "functions"):
        task_id = as_int(f, "task_id")
        counts = waiting.get(task_id, {"waiting": 0, "queued": 0})
        found.append(
            {
                "id": hex_id(task_id),
                "name": name_of(names, task_id),
                "submitted": as_int(f, "submitted"),
                "finished": as_int(f, "finished"),
                "failed": as_int(f, "failed"),
                "retried": as_int(f, "retried"),
                **counts,
            }
        )
    found.sort(key=lambda f: str(f["name"]))
    return found


def _objects(
    snapshot: Record,
    names: Mapping[int, str],
    worker_names: Mapping[str, str],
    driver_names: Mapping[int, str],
) -> JSON:
    objects = sub(snapshot, "objects")
    return {
        "count": as_int(objects, "count"),
        "bytes": as_int(objects, "bytes"),
        "by_worker": [
            {
                "worker": worker_names.get(as_str(o, "address"), as_str(o, "address")),
                "count": as_int(o, "count"),
                "bytes": as_int(o, "bytes"),
            }
            for o in records(objects, "by_worker")
        ],
        "by_driver": [
            {
                "driver": _driver_name(driver_names, as_int(o, "driver")),
                "count": as_int(o, "count"),
                "bytes": as_int(o, "bytes"),
            }
            for o in records(objects, "by_driver")
        ],
        "largest": [
            {
                "object": hex_id(as_int(o, "object_id")),
                "bytes": as_int(o, "bytes"),
                "driver": _driver_name(driver_names, maybe_int(o, "driver")),
                "where": worker_names.get(as_str(o, "where"), as_str(o, "where")),
                "function": name_of(names, maybe_int(o, "task_id")),
            }
            for o in records(objects, "largest")
        ],
    }


def _actors(snapshot: Record, names: Mapping[int, str]) -> list[JSON]:
    return [
        {
            "id": hex_id(as_int(a, "actor_id")),
            # (the head names it: a class sent by value is labelled by actor ID)
            "class": as_str(a, "class") or name_of(names, as_int(a, "type_id")),
            "name": as_str(a, "name"),
            "state": as_str(a, "state"),
            "worker": a.get("worker") if isinstance(a.get("worker"), str) else None,
            "calls": as_int(a, "calls"),
            "unanswered": as_int(a, "unanswered"),
            "checkpoints": as_int(a, "checkpoints"),
            "covered": as_int(a, "covered"),
            "restarts": as_int(a, "restarts"),
            "why": as_str(a, "why"),
        }
        for a in records(snapshot, "actors")
    ]


def _actor_title(actor: JSON) -> str:
    own = actor["name"]
    return f"{actor['class']} '{own}'" if own else str(actor["class"])


def _actor_row(actor: JSON, worker_names: Mapping[str, str]) -> JSON:
    where = actor["worker"]
    return {**actor, "worker": worker_names.get(where, where) if isinstance(where, str) else None}
