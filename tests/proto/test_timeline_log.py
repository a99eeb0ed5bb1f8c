"""The head's packed timeline (`dista_proto._timeline`): what goes in comes out, by owner,
oldest first, within its cap, in a quarter of the memory of named tuples."""

from __future__ import annotations

import tracemalloc

import dista_proto as dp
from dista_proto._timeline import TimelineLog

STAMP = 1_790_000_000_000_000_000  # a nanosecond wall-clock stamp of 2026


def record(i: int, port: int = 40000) -> dp.TimelineRecord:
    t = STAMP + i * 10
    address = dp.Address("10.0.0.7", port)
    return dp.TimelineRecord(
        (5 << 40) | i, (1 << 63) | i, t, t + 1, t + 2, t + 3, t + 4, t + 5, t + 6, address
    )


def split(r: dp.TimelineRecord) -> tuple[int | dp.Address, ...]:
    return (*r[:9], r.address)


def test_records_come_back_whole_by_owner_and_in_order() -> None:
    log = TimelineLog(100)
    for i in range(10):
        log.add(1 if i % 2 else 2, *split(record(i, 40000 + i % 3)))
    assert log.all() == tuple(record(i, 40000 + i % 3) for i in range(10))
    assert log.take(1) == tuple(record(i, 40000 + i % 3) for i in range(1, 10, 2))
    assert len(log) == 5 and log.take(1) == ()
    log.rename(2, 7)
    assert log.take(2) == () and len(log.take(7)) == 5 and len(log) == 0


def test_the_oldest_go_past_the_cap() -> None:
    log = TimelineLog(3)
    for i in range(5):
        log.add(1, *split(record(i)))
    assert log.all() == (record(2), record(3), record(4))


def test_a_record_costs_a_quarter_of_a_named_tuple() -> None:
    tracemalloc.start()
    try:
        log = TimelineLog(10_000)
        before = tracemalloc.get_traced_memory()[0]
        for i in range(10_000):
            log.add(1, *split(record(i)))
        packed = (tracemalloc.get_traced_memory()[0] - before) / 10_000
    finally:
        tracemalloc.stop()
    assert packed < 160, packed  # a named tuple of these ints: about 500 bytes
