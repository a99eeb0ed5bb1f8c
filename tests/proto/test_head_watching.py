"""What the head tells people (docs/protocol.md, "Extensions: the dashboard"): labels of
IDs, peers' vitals, and a snapshot that names every queued task's reason to wait, counts
tasks by function and driver, and carries the timeline records not seen yet."""

from __future__ import annotations

import json
from typing import Any

import dista_proto as dp
from dista_proto import frame as F

from .support.security_peers import REGISTRY, Net, Raw

F1, F2 = 0xF1, 0xF2  # two tasks' IDs
BY_VALUE = 0xB7


def _observer(net: Net) -> Raw:
    o = net.connect()
    o.send(dp.Hello(F.ROLE_OBSERVER))
    return o


def _snapshot(o: Raw, since: int = 0) -> tuple[dict[str, Any], list[dp.SnapshotRow], int]:
    o.send(dp.Snapshot(since))
    (answer,) = o.take()
    assert isinstance(answer, dp.Snapshot) and answer.document is not None
    return json.loads(answer.document), dp.snapshot_rows(answer.rows), answer.since


def _run(w: Raw, oid: int, error: str | None = None) -> None:
    w.send(dp.Span(oid, 1_000, 2_000, 5_000))
    w.send(dp.Error(oid, error) if error else dp.Result(oid, b"r"))


def test_labels_are_learned_kept_first_and_told_to_observers() -> None:
    net = Net()
    d = net.driver()
    d.send(dp.Labels(((F1, "app.f"), (F2, "app.g"))))
    other = net.driver()
    other.send(dp.Labels(((F1, "evil.rename"),)))  # the first label given stays
    o = _observer(net)
    o.send(dp.Labels(start=1))
    assert o.take() == [dp.Labels(((F2, "app.g"),), 1)]
    doc, _, _ = _snapshot(o)
    assert doc["labels"] == {str(F1): "app.f", str(F2): "app.g"}
    doc, _, _ = _snapshot(o)
    assert doc["labels"] == {}  # told once per connection


def test_vitals_name_processes_and_sum_checkpoints() -> None:
    net = Net()
    d = net.driver()
    d.send(dp.Vitals(4242, 50 << 20))
    w = net.worker()
    w.send(dp.Vitals(777, 80 << 20, 2, 1000, 3_000_000_000))
    w.send(dp.Vitals(777, 81 << 20, 3, 1500, 4_000_000_000))
    doc, _, _ = _snapshot(_observer(net))
    (worker,) = doc["workers"]
    assert (worker["pid"], worker["rss"], worker["address"]) == (777, 81 << 20, "10.0.0.1:7000")
    (driver,) = doc["drivers"]
    assert (driver["pid"], driver["rss"], driver["kind"]) == (4242, 50 << 20, "driver")
    counters = doc["counters"]
    assert (counters["checkpoints"], counters["checkpoint_bytes"]) == (3, 1500)
    assert counters["checkpoint_seconds"] == 4.0
    # Status names the worker by its address and pid.
    o = _observer(net)
    o.send(dp.Status())
    (status,) = o.take()
    assert isinstance(status, dp.Status) and status.text is not None
    assert "pid 777" in status.text


def test_every_queued_task_says_why_it_waits() -> None:
    net = Net(worker_slots=1, prefetch=0)
    d = net.driver()
    d.send(dp.Labels(((F1, "app.f"), (F2, "app.g"))))
    o = _observer(net)
    d.send(dp.Task(d.oid(1), F1, b"x"), dp.Task(d.oid(2), F1, b"x"))
    doc, _, _ = _snapshot(o)
    (queue,) = doc["queues"]
    assert (queue["driver"], queue["task_id"], queue["state"], queue["count"]) == (
        d.number, F1, "queued", 2,
    )  # fmt: skip
    assert "no worker has its task modules" in queue["reason"]
    w = net.worker()
    assert [type(e) for e in w.take()] == [dp.Task]  # one slot: the other waits
    d.send(dp.TaskAfter(d.oid(3), F2, (d.oid(1),)))
    doc, _, _ = _snapshot(o)
    reasons = {(q["task_id"], q["state"]): q["reason"] for q in doc["queues"]}
    assert reasons[F1, "queued"] == "every worker that can run it is busy (1 worker, 1 slot)"
    assert reasons[F2, "waiting"] == "waiting for its inputs: results of app.f"
    (driver,) = doc["drivers"]
    assert (driver["waiting"], driver["queued"], driver["running"]) == (1, 1, 1)
    w.send(dp.Drain())
    doc, _, _ = _snapshot(o)
    reasons = {(q["task_id"], q["state"]): q["reason"] for q in doc["queues"]}
    assert reasons[F1, "queued"] == "every worker that can run it is draining (1 worker)"


def test_tallies_and_timeline_rows_follow_the_tasks() -> None:
    net = Net(worker_slots=4)
    d = net.driver()
    w = net.worker()
    o = _observer(net)
    d.send(dp.Task(d.oid(1), F1, b"x"), dp.Task(d.oid(2), F1, b"x"), dp.Task(d.oid(3), F2, b"x"))
    assert len(w.take()) == 3
    _run(w, d.oid(1))
    _run(w, d.oid(2), error="ValueError: no")
    doc, rows, since = _snapshot(o)
    assert [(r.object_id, r.function, r.failed) for r in rows] == [
        (d.oid(1), F1, False), (d.oid(2), F1, True),
    ]  # fmt: skip
    assert rows[0].address == dp.Address("10.0.0.1", 7000)
    assert rows[0].started == 2_000 and rows[0].ended == 5_000
    functions = {f["task_id"]: f for f in doc["functions"]}
    assert (functions[F1]["submitted"], functions[F1]["finished"], functions[F1]["failed"]) == (
        2, 2, 1,
    )  # fmt: skip
    assert functions[F2]["finished"] == 0
    (driver,) = doc["drivers"]
    assert (driver["submitted"], driver["finished"], driver["failed"]) == (3, 2, 1)
    assert doc["timeline"] == {"next": since, "more": False}
    _, rows, since_after = _snapshot(o, since)
    assert rows == [] and since_after == since  # nothing new
    _run(w, d.oid(3))
    _, rows, _ = _snapshot(o, since)
    assert [r.object_id for r in rows] == [d.oid(3)]


def test_a_lost_workers_tasks_count_as_retried_and_it_departs() -> None:
    net = Net()
    d = net.driver()
    w = net.worker()
    d.send(dp.Task(d.oid(1), F1, b"x"))
    w.send(dp.Vitals(555, 1))
    net.head.connection_lost(w.link, 0, "worker pid 555 died: SIGKILL")
    net.pump()
    doc, _, _ = _snapshot(_observer(net))
    assert {f["task_id"]: f["retried"] for f in doc["functions"]} == {F1: 1}
    (gone,) = doc["departed"]
    assert (gone["address"], gone["pid"], gone["why"]) == ("10.0.0.1:7000", 555, "lost")
    assert "SIGKILL" in gone["detail"]


def test_functions_sent_by_value_are_told_apart_by_their_digest() -> None:
    net = Net(by_value_task=BY_VALUE, portable_tasks=[BY_VALUE])  # type: ignore[arg-type]
    d = net.driver()
    one, two = bytes(range(1, 17)), bytes(range(2, 18))
    d.send(dp.Task(d.oid(1), BY_VALUE, one + b"rest"), dp.Task(d.oid(2), BY_VALUE, two + b"r"))
    doc, _, _ = _snapshot(_observer(net))
    ids = {f["task_id"] for f in doc["functions"]}
    assert ids == {dp.function_id(BY_VALUE, one, -1), dp.function_id(BY_VALUE, two, -1)}
    assert dp.function_id(BY_VALUE, one, -1) == int.from_bytes(one[:8], "little")


def test_bad_labels_and_snapshots_are_refused_as_protocol_errors() -> None:
    net = Net()
    d = net.driver()
    frame = bytearray(dp.encode_event(dp.Labels(((F1, "ok"),))))
    frame[-2:] = b"\x00\x07"  # a control character in a label
    net.head.receive_data(d.link, bytes(frame), 0)
    net.pump()
    assert d.closed is not None and "label" in d.closed
    # A driver may not ask for snapshots (observers do), and gets told so.
    d2 = net.driver()
    d2.send(dp.Snapshot(0))
    assert d2.closed is not None
    assert REGISTRY  # (the helpers' registry: drivers and workers share it)
