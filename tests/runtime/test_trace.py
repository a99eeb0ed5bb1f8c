"""`chrome_trace`: well-formed Chrome trace events, lanes that never overlap, gaps skipped."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
from hypothesis import given, settings

from dista_proto import Address, TimelineRecord
from dista_runtime._api.trace import HEAD_PID, chrome_trace, write_chrome_trace

T0 = 1_700_000_000_000_000_000  # a plausible wall clock, in ns
MS = 1_000_000
W1 = Address("10.0.0.2", 9000)
W2 = Address("10.0.0.10", 9000)


def rec(
    object_id: int,
    started: int,
    ended: int,
    *,
    task_id: int = 0xAB,
    submitted: int | None = None,
    queued: int | None = None,
    dispatched: int | None = None,
    settled: int | None = None,
    arrived: int | None = None,
    address: Address = W1,
) -> TimelineRecord:
    """A record whose stamps default around the run: offsets in ns from T0, where 0 means
    unknown (so a known run starts well after 3 ms, leaving room for the defaults)."""

    def stamp(value: int | None, default: int) -> int:
        value = default if value is None else value
        return 0 if value == 0 else T0 + value

    return TimelineRecord(
        object_id,
        task_id,
        stamp(submitted, started - 3 * MS),
        stamp(queued, started - 2 * MS),
        stamp(dispatched, started - 2 * MS),
        stamp(settled, ended + MS),
        stamp(arrived, started - MS),
        stamp(started, started),
        stamp(ended, ended),
        address,
    )


def slices(trace: dict[str, object]) -> list[dict[str, Any]]:
    events = trace["traceEvents"]
    assert isinstance(events, list)
    return [e for e in events if e["ph"] == "X"]


def metadata(trace: dict[str, object]) -> dict[tuple[str, int, int], Any]:
    events = trace["traceEvents"]
    assert isinstance(events, list)
    return {(e["name"], e["pid"], e["tid"]): e["args"] for e in events if e["ph"] == "M"}


def check_well_formed(trace: dict[str, object]) -> None:
    assert json.loads(json.dumps(trace)) == trace
    assert trace["displayTimeUnit"] == "ms"
    events = trace["traceEvents"]
    assert isinstance(events, list)
    for e in events:
        assert {"ph", "ts", "pid", "tid", "name"} <= e.keys(), e
        assert e["ph"] in {"X", "M"}
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert isinstance(e["name"], str) and e["name"]
        if e["ph"] == "X":
            assert isinstance(e["ts"], float) and isinstance(e["dur"], float)
            assert e["ts"] >= 0 and e["dur"] >= 0
    # every track a slice lands on is labelled
    labels = metadata(trace)
    for e in slices(trace):
        assert ("process_name", e["pid"], 0) in labels
        assert ("thread_name", e["pid"], e["tid"]) in labels


def check_no_overlap(trace: dict[str, object]) -> None:
    tracks: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for e in slices(trace):
        tracks[e["pid"], e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    for spans in tracks.values():
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert end <= start


def test_empty() -> None:
    trace = chrome_trace([])
    check_well_formed(trace)
    assert trace["traceEvents"] == []


def test_one_task_run_and_queued_slices() -> None:
    r = rec(0x10, 5 * MS, 9 * MS, task_id=0xAB)
    trace = chrome_trace([r])
    check_well_formed(trace)
    by_cat = {e["cat"]: e for e in slices(trace)}
    assert set(by_cat) == {"run", "queued"}
    run, queued = by_cat["run"], by_cat["queued"]
    # relative to the earliest stamp shown (submitted), in microseconds
    assert trace["otherData"] == {"base_ns": r.submitted}
    assert queued["ts"] == 0.0 and queued["dur"] == 1000.0
    assert run["ts"] == 3000.0 and run["dur"] == 4000.0
    assert queued["pid"] == HEAD_PID and run["pid"] != HEAD_PID
    assert run["name"] == queued["name"] == "task 0xab"
    assert run["args"] == {
        "object_id": "0x10",
        "task_id": "0xab",
        "worker": "10.0.0.2:9000",
        "queue_ms": 1.0,
        "transfer_ms": 1.0,
        "run_ms": 4.0,
    }
    labels = metadata(trace)
    assert labels["process_name", run["pid"], 0] == {"name": "worker 10.0.0.2:9000"}
    assert labels["process_name", HEAD_PID, 0] == {"name": "head"}


def test_names_applied() -> None:
    records = [rec(1, 10 * MS, 11 * MS, task_id=0xA), rec(2, 10 * MS, 11 * MS, task_id=0xB)]
    trace = chrome_trace(records, {0xA: "mod:square", 0xB: ""})
    names = {e["args"]["object_id"]: e["name"] for e in slices(trace)}
    assert names == {"0x1": "mod:square", "0x2": "task 0xb"}  # an empty name falls back


def test_overlapping_tasks_get_lanes() -> None:
    # three overlapping on W1, then one after the first two ended: it reuses lane 0
    records = [
        rec(1, 10 * MS, 20 * MS),
        rec(2, 12 * MS, 18 * MS),
        rec(3, 15 * MS, 30 * MS),
        rec(4, 21 * MS, 25 * MS),
        rec(5, 10 * MS, 40 * MS, address=W2),
    ]
    trace = chrome_trace(records)
    check_well_formed(trace)
    check_no_overlap(trace)
    run = {e["args"]["object_id"]: e for e in slices(trace) if e["cat"] == "run"}
    assert [run[f"0x{i}"]["tid"] for i in range(1, 5)] == [0, 1, 2, 0]
    assert run["0x5"]["tid"] == 0 and run["0x5"]["pid"] != run["0x1"]["pid"]
    # workers numbered by address (10.0.0.2 before 10.0.0.10, not as strings)
    assert run["0x1"]["pid"] < run["0x5"]["pid"]
    assert ("thread_name", run["0x1"]["pid"], 2) in metadata(trace)
    assert ("thread_name", run["0x1"]["pid"], 3) not in metadata(trace)


def test_touching_slices_take_separate_lanes() -> None:
    # one ends exactly when the next starts: float rounding must not make them overlap
    trace = chrome_trace([rec(1, 10 * MS, 15 * MS), rec(2, 15 * MS, 16 * MS)])
    run = sorted((e for e in slices(trace) if e["cat"] == "run"), key=lambda e: e["ts"])
    assert [e["tid"] for e in run] == [0, 1]


def test_missing_stamps_skipped() -> None:
    records = [
        rec(1, 10 * MS, 0, submitted=0),  # ended unknown, submitted unknown: nothing
        rec(2, 10 * MS, 12 * MS, dispatched=0),  # run only
        rec(3, 0, 12 * MS, submitted=5 * MS, dispatched=6 * MS),  # started unknown: queued only
        rec(4, 13 * MS, 12 * MS),  # ends before it starts: queued only
    ]
    trace = chrome_trace(records)
    check_well_formed(trace)
    got = sorted((e["args"]["object_id"], e["cat"]) for e in slices(trace))
    assert got == [("0x2", "run"), ("0x3", "queued"), ("0x4", "queued")]
    args = {e["args"]["object_id"]: e["args"] for e in slices(trace)}
    assert "queue_ms" not in args["0x2"]
    assert "run_ms" not in args["0x3"] and "transfer_ms" not in args["0x3"]
    assert "run_ms" not in args["0x4"]


def test_no_head_track_without_queue_stamps() -> None:
    trace = chrome_trace([rec(1, 10 * MS, 12 * MS, submitted=0)])
    assert ("process_name", HEAD_PID, 0) not in metadata(trace)
    assert {e["pid"] for e in slices(trace)} == {HEAD_PID + 1}


def test_write_round_trips(tmp_path: Path) -> None:
    records = [rec(i, (10 + i) * MS, (13 + i) * MS) for i in range(5)]
    path = tmp_path / "trace.json"
    n = write_chrome_trace(records, path, {0xAB: "work"})
    with path.open() as f:
        loaded = json.load(f)
    assert loaded == chrome_trace(records, {0xAB: "work"})
    assert n == len(loaded["traceEvents"])
    write_chrome_trace(records, str(path))  # a str path works too


STAMP = st.one_of(st.just(0), st.integers(T0, T0 + 10**12))
ADDRESSES = st.sampled_from([W1, W2, Address("192.168.1.1", 1)])
RECORDS = st.lists(
    st.builds(
        TimelineRecord,
        st.integers(0, 2**64 - 1),
        st.integers(0, 2**64 - 1),
        STAMP,
        STAMP,
        STAMP,
        STAMP,
        STAMP,
        STAMP,
        STAMP,
        ADDRESSES,
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(RECORDS)
def test_random_records_well_formed_and_lanes_disjoint(records: list[TimelineRecord]) -> None:
    trace = chrome_trace(records)
    check_well_formed(trace)
    check_no_overlap(trace)
    # every slice whose stamps are known appears; no other does
    expected = sum(
        (r.started != 0 and r.ended >= r.started)
        + (r.submitted != 0 and r.dispatched >= r.submitted)
        for r in records
    )
    assert len(slices(trace)) == expected
