"""Stamps leave a core on the wall clock, once: ``now`` is monotonic, and a core given
``wall_offset_ns`` adds it where a stamp leaves (a worker's spans, the head's timeline
records; docs/protocol.md, "Time"). 0, an unknown stamp, stays 0."""

from __future__ import annotations

import dista_proto as dp
from dista_proto import frame as F

NUMBER = 5
OFFSET = 1_790_000_000_000_000_000  # wall minus monotonic: a 2026 wall clock
ARRIVED, STARTED, ENDED, BLOCKED = 1_000, 2_000, 3_000, 2_500  # monotonic ns


def _events(conn: dp.Connection, decisions: list[dp.Decision], link: int) -> list[dp.Event]:
    for d in decisions:
        if isinstance(d, dp.Write) and d.link == link:
            conn.receive_data(b"".join(bytes(b) for b in d.buffers))
    return conn.next_events()


BEAT = 10_000  # the worker's heartbeat period


def _worker_with_a_task(oid: int) -> tuple[dp.Worker, dp.Connection]:
    worker = dp.Worker(
        registry_hash=9,
        address=dp.Address("127.0.0.1", 1),
        heartbeat_ns=BEAT,
        wall_offset_ns=OFFSET,
    )
    worker.start(0)
    head = dp.Connection(dp.Role.HEAD)
    _events(head, worker.decisions(), dp.HEAD_LINK)  # its hello
    head.send(dp.Task(oid, 7, b""))
    worker.receive_data(dp.HEAD_LINK, b"".join(bytes(b) for b in head.data_to_send()), ARRIVED)
    assert [type(d) for d in worker.decisions()] == [dp.RunTask]
    return worker, head


def test_a_workers_spans_leave_on_the_wall_clock() -> None:
    oid = NUMBER << 40 | 1
    worker, head = _worker_with_a_task(oid)
    worker.task_blocked(oid, BLOCKED)
    worker.task_done(oid, [b"v"], STARTED, ENDED)
    spans = [e for e in _events(head, worker.decisions(), dp.HEAD_LINK) if isinstance(e, dp.Span)]
    assert spans == [
        dp.Span(oid, ARRIVED + OFFSET, BLOCKED + OFFSET, BLOCKED + OFFSET, dp.SPAN_BLOCKED),
        dp.Span(oid, ARRIVED + OFFSET, STARTED + OFFSET, ENDED + OFFSET),
    ]


def test_unknown_stamps_stay_unknown_and_heartbeats_carry_none() -> None:
    oid = NUMBER << 40 | 2
    worker, head = _worker_with_a_task(oid)
    worker.task_done(oid, [b"v"], 0, 0)  # an answer kept from before (an actor's): no run
    worker.on_timer(BEAT)  # a heartbeat is due
    spans = [e for e in _events(head, worker.decisions(), dp.HEAD_LINK) if isinstance(e, dp.Span)]
    assert spans == [dp.Span(oid, ARRIVED + OFFSET, 0, 0), dp.Span(0, 0, 0, 0, dp.SPAN_ALIVE)]


def test_the_heads_timeline_stamps_leave_on_the_wall_clock() -> None:
    head = dp.Head(epoch=1, first_number=NUMBER, worker_slots=1, prefetch=0, wall_offset_ns=OFFSET)
    address = dp.Address("127.0.0.1", 1)
    worker_link, driver_link = head.connection_made(0), head.connection_made(0)
    worker, driver = dp.Connection(dp.Role.WORKER), dp.Connection(dp.Role.DRIVER)
    worker.send(dp.Hello(F.ROLE_WORKER, 9, address))
    head.receive_data(worker_link, b"".join(bytes(b) for b in worker.data_to_send()), 10)
    driver.send(dp.Hello(F.ROLE_DRIVER, 9))
    oid = NUMBER << 40 | 1
    driver.send(dp.Task(oid, 7, b""))
    head.receive_data(driver_link, b"".join(bytes(b) for b in driver.data_to_send()), 20)
    decisions = head.decisions()
    assert any(isinstance(e, dp.Task) for e in _events(worker, decisions, worker_link))
    assert any(isinstance(e, dp.Welcome) for e in _events(driver, decisions, driver_link))
    # The worker's stamps come on the wall clock already (its span): left as they are.
    span = dp.Span(oid, 100 + OFFSET, 200 + OFFSET, 300 + OFFSET)
    worker.send(span)
    worker.send(dp.Result(oid, b"v"))
    head.receive_data(worker_link, b"".join(bytes(b) for b in worker.data_to_send()), 40)
    driver.send(dp.Timeline())
    head.receive_data(driver_link, b"".join(bytes(b) for b in driver.data_to_send()), 50)
    (answer,) = [
        e for e in _events(driver, head.decisions(), driver_link) if isinstance(e, dp.Timeline)
    ]
    assert isinstance(answer, dp.Timeline) and answer.records is not None
    (record,) = answer.records
    # Submitted, queued and dispatched at 20, settled at 40: each moved once.
    assert record[2:9] == (
        20 + OFFSET,
        20 + OFFSET,
        20 + OFFSET,
        40 + OFFSET,
        100 + OFFSET,
        200 + OFFSET,
        300 + OFFSET,
    )
