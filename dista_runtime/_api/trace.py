"""Timeline records as a Chrome trace: open the file in Perfetto or chrome://tracing.

The head's timeline (`dista_proto.TimelineRecord`) says when each finished task was
submitted, queued, dispatched and settled (head clock) and when it arrived, started and ended
on its worker (that worker's clock), all in wall-clock nanoseconds. Rather than ship a viewer,
we write the JSON object form of the Chrome trace event format, which both viewers open.

Slices are named ``module.function``: a task this process submitted with a name of its own
(``f.options(name=...)``, or a callable run undecorated: `dista_runtime._api.labels`) by that
name; else by its task ID, which this process's registry maps back to the function for
every task it imported (`task_label`); other tasks that travelled by value share one ID,
so they are all "by-value task"; an actor call is
``module.Class.method`` for the actor classes this process defined or imported (its record's
task ID hashes the class's and the method's, `dista_proto.actor_call_task_id`); any other
is its ID.

Layout:

- one process per worker (labelled ``worker host:port``) holding the tasks' "run" slices
  (started → ended), and one "head" process holding their "queued" slices (submitted →
  dispatched: waiting for inputs, then for a free slot);
- complete events (``"ph": "X"``) must nest properly on one thread, and tasks on one worker
  (several slots) or waiting at the head overlap freely, so each process's slices are spread
  over lanes (threads): greedily, earliest start first, each into the lowest lane that is
  free, which uses as few lanes as the busiest moment needs;
- timestamps are microseconds after the earliest stamp shown (the Chrome format's unit), so
  the numbers stay small; ``otherData.base_ns`` keeps that stamp to recover wall-clock time.

A stamp of 0 means unknown (a record from a head that did not see the span, say): a slice
missing either end, or ending before it starts, is left out rather than drawn wrong. Head and
worker stamps come from different clocks, so slices on different processes can be skewed by
however far those clocks disagree; durations within one process are exact.
"""

from __future__ import annotations

import heapq
import json
import os
from collections.abc import Iterable, Mapping
from typing import Final, NamedTuple

import dista_proto as dp
from dista_proto import TimelineRecord

from .._values import registry as _registry
from .labels import label_of

__all__ = ["BY_VALUE_LABEL", "chrome_trace", "task_label", "write_chrome_trace"]

#: What the timeline calls tasks that travelled by value (they all share one task ID).
BY_VALUE_LABEL: Final = "by-value task"

#: The pid of the head's process track; workers are numbered after it.
HEAD_PID: Final = 0

_NS_PER_US: Final = 1_000
_NS_PER_MS: Final = 1_000_000

Event = dict[str, object]


class _Slice(NamedTuple):
    start: int  # wall-clock ns
    end: int
    key: str  # the process it belongs on: "head" or the worker's "host:port"
    category: str
    record: TimelineRecord


def chrome_trace(
    records: Iterable[TimelineRecord], task_names: Mapping[int, str] | None = None
) -> dict[str, object]:
    """The Chrome trace (JSON object form) of ``records``, ready for `json.dump`.

    ``task_names`` maps task IDs to the names to show; a task not in it is named by
    `task_label` (``module.function`` for the tasks this process registered, else
    ``task 0x…``). Events come metadata first (process and lane names), then slices by start.
    """
    return _document(*_events(records, task_names or {}))


def write_chrome_trace(
    records: Iterable[TimelineRecord],
    path: str | os.PathLike[str],
    task_names: Mapping[int, str] | None = None,
) -> int:
    """Write the Chrome trace of ``records`` to ``path``; return how many events it holds.

    The count includes the metadata events; it is what a caller can print ("wrote N events")
    without reading the file back. The JSON is compact: a full timeline is 100,000 records.
    """
    events, base = _events(records, task_names or {})
    with open(path, "w", encoding="utf-8") as f:
        json.dump(_document(events, base), f, separators=(",", ":"))
        f.write("\n")
    return len(events)


def _events(
    records: Iterable[TimelineRecord], names: Mapping[int, str]
) -> tuple[list[Event], int]:
    """The trace's events, and the stamp (ns) their timestamps count from."""
    slices = sorted(_slices(records), key=lambda s: (s.start, s.end, s.record.object_id))
    base = min((s.start for s in slices), default=0)

    workers = sorted({s.key for s in slices if s.category == "run"}, key=_address_order)
    pids = {"head": HEAD_PID} | {key: n for n, key in enumerate(workers, HEAD_PID + 1)}
    lanes = _assign_lanes(slices)

    metadata: list[Event] = []
    lane_counts: dict[str, int] = {}
    for s, lane in zip(slices, lanes, strict=True):
        lane_counts[s.key] = max(lane_counts.get(s.key, 0), lane + 1)
    for key, pid in pids.items():
        if key not in lane_counts:
            continue  # the head, when no record had both its stamps
        label = "head" if key == "head" else f"worker {key}"
        metadata.append(_meta("process_name", pid, 0, {"name": label}))
        metadata.append(_meta("process_sort_index", pid, 0, {"sort_index": pid}))
        lane_label = "queue" if key == "head" else "lane"
        for lane in range(lane_counts[key]):
            metadata.append(_meta("thread_name", pid, lane, {"name": f"{lane_label} {lane}"}))
            metadata.append(_meta("thread_sort_index", pid, lane, {"sort_index": lane}))

    events: list[Event] = [
        {
            "name": label_of(s.record.object_id)
            or names.get(s.record.task_id)
            or task_label(s.record.task_id),
            "cat": s.category,
            "ph": "X",
            "ts": (s.start - base) / _NS_PER_US,
            "dur": (s.end - s.start) / _NS_PER_US,
            "pid": pids[s.key],
            "tid": lane,
            "args": _args(s.record),
        }
        for s, lane in zip(slices, lanes, strict=True)
    ]
    return metadata + events, base


def task_label(task_id: int) -> str:
    """How the timeline names ``task_id``: ``module.function`` for a task this process
    registered (imported), `BY_VALUE_LABEL` for one that travelled by value,
    ``module.Class.method`` for a call to an actor class it knows, else its ID as
    ``task 0x…``."""
    if task_id & dp.TASK_ID_MASK == _registry.BY_VALUE_ID:
        return BY_VALUE_LABEL
    fn = _registry.lookup(task_id)
    if fn is None:
        return _registry.call_label(task_id) or f"task {task_id:#x}"
    return f"{fn.__module__}.{fn.__qualname__}"


def _document(events: list[Event], base: int) -> dict[str, object]:
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"base_ns": base}}


def _slices(records: Iterable[TimelineRecord]) -> Iterable[_Slice]:
    """Each record's run and queued slices, leaving out any whose stamps are unknown."""
    for r in records:
        if _known(r.started, r.ended):
            yield _Slice(r.started, r.ended, str(r.address), "run", r)
        if _known(r.submitted, r.dispatched):
            yield _Slice(r.submitted, r.dispatched, "head", "queued", r)


def _known(start: int, end: int) -> bool:
    """Both stamps are known (0 is unknown) and in order, so the slice can be drawn."""
    return start != 0 and end != 0 and end >= start


def _assign_lanes(slices: list[_Slice]) -> list[int]:
    """A lane per slice (``slices`` sorted by start) so that slices in one lane never overlap.

    Interval partitioning: per process, a heap of (end, lane) for busy lanes and a heap of
    free lane numbers. A lane frees only once its slice ended strictly before the next one
    starts: the microsecond floats could otherwise put a touching pair a rounding error
    apart in the wrong order, which a viewer reads as bad nesting.
    """
    busy: dict[str, list[tuple[int, int]]] = {}
    free: dict[str, list[int]] = {}
    count: dict[str, int] = {}
    lanes: list[int] = []
    for s in slices:
        b = busy.setdefault(s.key, [])
        f = free.setdefault(s.key, [])
        while b and b[0][0] < s.start:
            heapq.heappush(f, heapq.heappop(b)[1])
        if f:
            lane = heapq.heappop(f)
        else:
            lane = count.get(s.key, 0)
            count[s.key] = lane + 1
        heapq.heappush(b, (s.end, lane))
        lanes.append(lane)
    return lanes


def _args(r: TimelineRecord) -> dict[str, object]:
    """What the viewer shows for a selected slice: the IDs and the phases' lengths in ms.

    ``queue_ms`` is submitted → dispatched (head clock), ``transfer_ms`` arrived → started
    (worker clock: fetching and decoding inputs), ``run_ms`` started → ended. Each is left out
    when a stamp it needs is unknown; mixing clocks would make a skew look like a delay.
    """
    args: dict[str, object] = {
        "object_id": f"{r.object_id:#x}",
        "task_id": f"{r.task_id:#x}",
        "worker": str(r.address),
    }
    for name, start, end in (
        ("queue_ms", r.submitted, r.dispatched),
        ("transfer_ms", r.arrived, r.started),
        ("run_ms", r.started, r.ended),
    ):
        if _known(start, end):
            args[name] = (end - start) / _NS_PER_MS
    return args


def _meta(name: str, pid: int, tid: int, args: dict[str, object]) -> Event:
    return {"name": name, "ph": "M", "ts": 0.0, "pid": pid, "tid": tid, "args": args}


def _address_order(key: str) -> tuple[tuple[int, ...], str, int]:
    """Sort "host:port" keys by numeric IPv4 address, then port, so pids follow addresses."""
    host, _, port = key.rpartition(":")
    parts = host.split(".")
    numeric = tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else ()
    return numeric, host, int(port) if port.isdigit() else 0
