"""`Board`: names resolved, rows windowed and capped, departures kept, readers woken."""

from __future__ import annotations

import json
import threading

from dista_runtime._dashboard import Board, Row
from tests.support.fake_board import FUNCTIONS, FakeCluster, feed, task_id

T0 = 1_700_000_000_123_456_789  # wall-clock ns, above 2**53 as real stamps are
SECOND = 1_000_000_000


def row(
    n: int,
    *,
    start: int,
    end: int,
    worker: str = "10.0.0.10:7000",
    failed: bool = False,
    task: str = "etl.load_shard",
) -> Row:
    return Row(
        object_id=(1 << 63) | n,
        task_id=task_id(task),
        submitted_ns=start - 2_000_000,
        dispatched_ns=start - 1_000,
        started_ns=start,
        ended_ns=end,
        worker=worker,
        failed=failed,
    )


def test_the_state_names_every_id_a_person_reads() -> None:
    board = Board()
    cluster = FakeCluster(workers=8, seed=1)
    board.update(cluster.snapshot(T0), [row(1, start=T0 - SECOND, end=T0)])
    state = board.state()
    json.dumps(state)  # JSON-ready throughout
    worker = state["workers"][0]  # type: ignore[index]
    assert worker["label"] == "10.0.0.10:7000 (pid 4000)"
    assert worker["actor"] == "ParameterServer 'ps-main'"
    named = {f[0] for f in FUNCTIONS} | {hex(task_id("<unnamed>"))}
    assert {t["name"] for t in worker["tasks"]} <= named
    drivers = state["drivers"]  # type: ignore[index]
    assert drivers[0]["label"] == "driver 1 (10.0.9.1, pid 900)"
    assert drivers[2]["label"] == "client 3 (10.0.9.3, pid 902)"
    queue = state["queues"][0]  # type: ignore[index]
    assert queue["driver"].startswith(("driver ", "client ")) and queue["reason"]
    functions = {f["name"] for f in state["functions"]}  # type: ignore[attr-defined]
    assert "model.train_step" in functions
    assert hex(task_id("<unnamed>")) in functions  # no name: its hex
    largest = state["objects"]["largest"][0]  # type: ignore[index]
    assert largest["object"].startswith("0x")
    assert largest["where"] == "head" or "(pid " in largest["where"]
    actor = state["actors"][0]  # type: ignore[index]
    assert actor["class"] == "ParameterServer" and actor["name"] == "ps-main"
    assert actor["worker"] == "10.0.0.10:7000 (pid 4000)"
    assert state["epoch"] == hex(cluster.epoch)
    assert state["base_ms"] * 1_000_000 == T0 // 1_000_000 * 1_000_000  # type: ignore[operator]


def test_names_accumulate_over_snapshots() -> None:
    board = Board()
    cluster = FakeCluster(workers=2)
    board.update(cluster.snapshot(T0), [])
    second = cluster.snapshot(T0 + SECOND)
    assert second["labels"] == {}  # each name is sent once
    board.update(second, [row(1, start=T0, end=T0 + SECOND, task="model.evaluate")])
    assert board.state()["names"] == ["model.evaluate"]


def test_rows_are_microseconds_from_the_base_with_ids_as_hex() -> None:
    board = Board()
    board.update(
        FakeCluster(workers=1).snapshot(T0),
        [
            row(7, start=T0 + 1_500_000, end=T0 + 4_000_000, failed=True),
        ],
    )
    rows, next_seq = board.rows_after(0)
    base_ns = board.state()["base_ms"] * 1_000_000  # type: ignore[operator]
    assert next_seq == 1
    function, worker, start, duration, queued, dispatched, failed, object_id = rows[0]
    assert (function, worker, failed) == (0, 0, 1)
    assert start == (T0 + 1_500_000 - base_ns) // 1000 and duration == 2500
    assert (queued, dispatched) == (2000, 1)
    assert object_id == hex((1 << 63) | 7)
    assert board.state()["row_workers"] == [["10.0.0.10:7000", "10.0.0.10:7000 (pid 4000)"]]


def test_rows_older_than_the_window_or_over_the_cap_are_dropped() -> None:
    board = Board(window_s=10, max_rows=5)
    cluster = FakeCluster(workers=1)
    old = [row(n, start=T0 + n * SECOND, end=T0 + n * SECOND + 1) for n in range(3)]
    board.update(cluster.snapshot(T0 + 3 * SECOND), old)
    assert [r[7] for r in board.rows_after(0)[0]] == [hex((1 << 63) | n) for n in range(3)]
    new = [row(n, start=T0 + n * SECOND, end=T0 + n * SECOND + 1) for n in range(3, 9)]
    board.update(cluster.snapshot(T0 + 9 * SECOND), new)
    rows, next_seq = board.rows_after(0)
    assert next_seq == 9 and len(rows) == 5  # the cap: the oldest four went
    board.update(cluster.snapshot(T0 + 16 * SECOND), [])
    rows, _ = board.rows_after(0)
    assert [r[7] for r in rows] == [hex((1 << 63) | n) for n in (6, 7, 8)]  # the window
    state = board.state()
    assert state["rows"]["count"] == 3  # type: ignore[index]
    # A reader at 7 gets only what came after it.
    assert [r[7] for r in board.rows_after(7)[0]] == [hex((1 << 63) | 7), hex((1 << 63) | 8)]
    assert board.rows_after(9) == ([], 9)
    assert len(board.rows_after(0, limit=2)[0]) == 2
    assert board.rows_after(6, until=7)[0] == board.rows_after(6, limit=1)[0]


def test_departed_workers_are_shown_lost_or_drained_for_the_window() -> None:
    board = Board(window_s=600)
    cluster = FakeCluster(workers=4)
    board.update(cluster.snapshot(T0), [])
    drained, vanished = cluster.addresses[1], cluster.addresses[2]
    cluster.lose(drained, "drained")
    cluster.addresses.remove(vanished)  # gone without the head saying so
    board.update(cluster.snapshot(T0 + SECOND), [])
    states = {w["address"]: w["state"] for w in board.state()["workers"]}  # type: ignore[attr-defined]
    assert states[drained] == "drained" and states[vanished] == "lost"
    gone = next(w for w in board.state()["workers"] if w["address"] == vanished)  # type: ignore[attr-defined]
    assert gone["label"] == f"{vanished} (pid {cluster.pids[vanished]})"
    board.update(cluster.snapshot(T0 + 5 * SECOND), [])
    gone = next(w for w in board.state()["workers"] if w["address"] == vanished)  # type: ignore[attr-defined]
    assert gone["ago_s"] == 4.0
    # Back on its port: ready again, no longer departed.
    cluster.addresses.append(vanished)
    board.update(cluster.snapshot(T0 + 6 * SECOND), [])
    assert {d.address for d in board.departed()} == {drained}
    board.update(cluster.snapshot(T0 + 700 * SECOND), [])
    assert board.departed() == []


def test_unreachable_keeps_the_picture_and_says_why() -> None:
    board = Board()
    assert board.state()["up"] is False
    feed(board, workers=2, rows=10, span_s=1, now_ns=T0)
    assert board.state()["up"] is True
    board.unreachable("connection refused")
    state = board.state()
    assert (state["up"], state["why"]) == (False, "connection refused")
    assert len(state["workers"]) == 2  # type: ignore[arg-type]


def test_readers_wait_for_a_change_and_share_one_encoding() -> None:
    board = Board()
    version = board.version
    assert board.wait(version, timeout=0.01) == version  # nothing changed
    woke: list[int] = []
    reader = threading.Thread(target=lambda: woke.append(board.wait(version, timeout=10)))
    reader.start()
    board.update(FakeCluster(workers=1).snapshot(T0), [])
    reader.join(5)
    assert woke == [version + 1]
    first = board.state_json()
    assert board.state_json()[1] is first[1]  # built once per version
    assert json.loads(first[1])["version"] == version + 1


def test_a_hundred_thousand_rows_fit() -> None:
    board = Board()
    feed(board, workers=64, rows=100_000, span_s=540, now_ns=T0)
    rows, _ = board.rows_after(0)
    assert 99_000 <= len(rows) <= 100_000
    assert len(board.state()["workers"]) == 64  # type: ignore[arg-type]


def test_a_snapshot_missing_fields_shows_blanks() -> None:
    board = Board()
    board.update({"time_ns": T0, "workers": [{"address": "h:1"}, "junk"], "labels": {"x": 1}}, [])
    state = board.state()
    assert [w["label"] for w in state["workers"]] == ["h:1"]  # type: ignore[attr-defined]
    assert state["queues"] == [] and state["objects"]["count"] == 0  # type: ignore[index]
