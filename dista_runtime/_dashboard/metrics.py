"""Prometheus metrics over the board's latest snapshot (``/metrics``).

A custom collector reads the snapshot at scrape time, so the numbers are the head's own
(its counters are monotonic since it started: a head restart is a counter reset, which
Prometheus expects). It lives in its own `CollectorRegistry`: a process that also exports
its own metrics through the global one gets no ``dista_*`` there it did not ask for.

Importing this module needs ``prometheus_client`` (the ``dashboard`` extra); the server
imports it only when ``/metrics`` is asked for, and answers 503 without it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .board import Board
from .fields import (
    Record,
    as_float,
    as_int,
    as_str,
    driver_label,
    maybe_int,
    records,
    sub,
    worker_label,
)
from .view import Departure, name_of

__all__ = ["BoardCollector", "metrics_text"]

#: Every state a worker is counted in, so a state with none still reads 0 (a query for
#: ``dista_workers{state="lost"}`` finds a series rather than nothing).
WORKER_STATES = ("ready", "draining", "silent", "lost", "drained")

#: (metric, help, key in snapshot["counters"]): monotonic counts of the head.
HEAD_COUNTERS = (
    ("dista_actor_calls", "Actor calls the head routed.", "actor_calls"),
    ("dista_checkpoints", "Actor checkpoints written.", "checkpoints"),
    ("dista_checkpoint_bytes", "Bytes of actor checkpoints written.", "checkpoint_bytes"),
    ("dista_checkpoint_seconds", "Seconds spent writing checkpoints.", "checkpoint_seconds"),
    ("dista_head_restarts", "Times the head restarted from its journal.", "head_restarts"),
    ("dista_resumes", "Sessions resumed after a head restart.", "resumes"),
    (
        "dista_frames_refused",
        "Frames the head refused (malformed or not allowed).",
        "frames_refused",
    ),
)

#: (metric suffix, help, key in snapshot["functions"][i]).
TASK_COUNTERS = (
    ("submitted", "Tasks submitted", "submitted"),
    ("finished", "Tasks their worker answered (a raised exception included)", "finished"),
    ("failed", "Tasks whose result is an error", "failed"),
    ("retried", "Tasks run again after their worker was lost", "retried"),
)


class BoardCollector(Collector):
    """The ``dista_*`` metrics of one board, read at each scrape."""

    def __init__(self, board: Board) -> None:
        self.board = board

    def collect(self) -> Iterator[Metric]:
        snapshot, up = self.board.latest()
        head_up = GaugeMetricFamily("dista_head_up", "1 if the head answers the dashboard.")
        head_up.add_metric([], 1.0 if up else 0.0)
        yield head_up
        if not up:
            return  # the last numbers would be stale yet look current: say only "down"
        yield from _tasks(snapshot, self.board.names())
        yield from _queues(snapshot)
        yield from _holdings(snapshot)
        yield from _workers(snapshot, self.board.departed())
        counters = sub(snapshot, "counters")
        for metric, text, key in HEAD_COUNTERS:
            family = CounterMetricFamily(metric, text)
            family.add_metric([], as_float(counters, key))
            yield family


def metrics_text(board: Board) -> bytes:
    """The Prometheus text exposition of ``board``'s metrics."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BoardCollector(board))
    return generate_latest(registry)


def _tasks(snapshot: Record, names: Mapping[int, str]) -> Iterator[Metric]:
    functions = records(snapshot, "functions")
    for suffix, text, key in TASK_COUNTERS:
        family = CounterMetricFamily(
            f"dista_tasks_{suffix}", f"{text}, by function.", labels=["function"]
        )
        for f in functions:
            family.add_metric([str(name_of(names, as_int(f, "task_id")))], as_int(f, key))
        yield family
    totals = sub(snapshot, "totals")
    for key, text in (("pending", "not running yet"), ("running", "running now")):
        gauge = GaugeMetricFamily(f"dista_tasks_{key}", f"Tasks {text}.")
        gauge.add_metric([], as_int(totals, key))
        yield gauge


def _queues(snapshot: Record) -> Iterator[Metric]:
    # By state and cause only: a label per function and driver would multiply the series,
    # and so would the reason's sentence (its counts change as workers come and go).
    counts: Counter[tuple[str, str]] = Counter()
    for q in records(snapshot, "queues"):
        counts[as_str(q, "state"), as_str(q, "cause")] += as_int(q, "count")
    family = GaugeMetricFamily(
        "dista_queue_tasks",
        "Tasks not running, by state and cause (inputs, no-worker, draining, actors, busy, "
        "sending).",
        labels=["state", "cause"],
    )
    for (state, reason), count in sorted(counts.items()):
        family.add_metric([state, reason], count)
    yield family


def _holdings(snapshot: Record) -> Iterator[Metric]:
    objects = sub(snapshot, "objects")
    for metric, key, text in (
        ("dista_objects", "count", "Objects the cluster holds."),
        ("dista_object_bytes", "bytes", "Bytes of the objects the cluster holds."),
    ):
        total = GaugeMetricFamily(metric, text)
        total.add_metric([], as_int(objects, key))
        yield total
    workers = {as_str(w, "address"): w for w in records(snapshot, "workers")}
    by_worker = [
        (worker_label(address, maybe_int(workers.get(address, {}), "pid")), o)
        for o in records(objects, "by_worker")
        for address in (as_str(o, "address"),)
    ]
    drivers = {as_int(d, "number"): driver_label(d) for d in records(snapshot, "drivers")}
    by_driver = [
        (drivers.get(as_int(o, "driver"), f"driver {as_int(o, 'driver')}"), o)
        for o in records(objects, "by_driver")
    ]
    for holder, held in (("worker", by_worker), ("driver", by_driver)):
        count = GaugeMetricFamily(
            f"dista_{holder}_objects", f"Objects held, by {holder}.", labels=[holder]
        )
        size = GaugeMetricFamily(
            f"dista_{holder}_bytes", f"Bytes of objects held, by {holder}.", labels=[holder]
        )
        for label, o in held:
            count.add_metric([label], as_int(o, "count"))
            size.add_metric([label], as_int(o, "bytes"))
        yield count
        yield size


def _workers(snapshot: Record, departed: list[Departure]) -> Iterator[Metric]:
    states: Counter[str] = Counter(as_str(w, "state") for w in records(snapshot, "workers"))
    present = {as_str(w, "address") for w in records(snapshot, "workers")}
    states.update(gone.why for gone in departed if gone.address not in present)
    family = GaugeMetricFamily(
        "dista_workers",
        "Workers by state (lost and drained: the last ten minutes).",
        labels=["state"],
    )
    for state in sorted(set(WORKER_STATES) | set(states)):
        family.add_metric([state], states[state])
    yield family
