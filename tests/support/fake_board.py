"""Realistic fake head snapshots and timeline rows for the dashboard, without a cluster.

`FakeCluster` makes N workers with slots, drivers, functions (one left unnamed, as a
function the head has no name for), queues with reasons, actors and objects, and rows that
fill every worker slot over a time span (a few of them failed). Used by the dashboard's
tests, the browser test (100,000 rows, 64 workers), and by hand:

    python -m tests.support.fake_board --workers 64 --rows 100000 --port 8265
"""

from __future__ import annotations

import argparse
import hashlib
import random
import time

from dista_runtime._dashboard import Board, Row, serve

__all__ = ["FUNCTIONS", "FakeCluster", "feed", "task_id"]

#: (name, relative weight, mean seconds): what the fake drivers run.
FUNCTIONS = (
    ("etl.load_shard", 5, 0.8),
    ("etl.parse_rows", 8, 0.3),
    ("features.embed_batch", 4, 1.5),
    ("model.train_step", 3, 2.5),
    ("model.evaluate", 1, 4.0),
    ("reports.render_chart", 2, 0.6),
    ("ParameterServer.push", 3, 0.1),
    ("<unnamed>", 1, 0.5),  # no entry in "labels": shown as its hex ID
)
ACTOR_CLASSES = ("ParameterServer", "Counter", "ModelCache")
REASONS = (  # as the head words them (dista_proto._head_snapshot.Reasons)
    ("waiting", "inputs", "waiting for its inputs: results of model.train_step"),
    ("queued", "busy", "every worker that can run it is busy (64 workers, 256 slots)"),
    ("queued", "no-worker", "no worker has its task modules: start workers that import them"),
    ("queued", "actors", "every worker that can run it hosts an actor (2 workers)"),
)
MiB = 1 << 20


def task_id(name: str) -> int:
    """A stable u64 for a name, as the head's IDs look (above 2**53: hex in the browser)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big") | 1 << 63


class FakeCluster:
    """A cluster's worth of fake state; `snapshot` and `rows` answer as a head would."""

    def __init__(self, workers: int = 8, slots: int = 4, drivers: int = 3, seed: int = 0) -> None:
        self.random = random.Random(seed)
        self.slots = slots
        self.epoch = self.random.getrandbits(64)
        self.addresses = [f"10.0.{k // 200}.{k % 200 + 10}:7{k:03d}" for k in range(workers)]
        self.pids = {a: 4000 + 17 * k for k, a in enumerate(self.addresses)}
        self.drivers = drivers
        self.departed: list[dict[str, object]] = []
        self.done: dict[int, list[int]] = {task_id(f[0]): [0, 0, 0] for f in FUNCTIONS}
        self.names_sent = False
        self._lane_free: dict[tuple[str, int], int] = {}
        self._next: dict[tuple[str, int], tuple[str, float, float]] = {}
        self._scale = 1e9  # ns per unit of FUNCTIONS' mean seconds; `rows` sets it

    def names(self) -> dict[str, str]:
        found = {str(task_id(f[0])): f[0] for f in FUNCTIONS if f[0] != "<unnamed>"}
        found.update({str(task_id(c)): c for c in ACTOR_CLASSES})
        return found

    def rows(self, count: int, start_ns: int, end_ns: int) -> list[Row]:
        """About ``count`` rows filling every worker slot from ``start_ns`` to ``end_ns``;
        this sets the pace `more` keeps."""
        lanes = [(a, s) for a in self.addresses for s in range(self.slots)]
        per_lane = max(1, count // len(lanes))
        found: list[Row] = []
        scales = []
        for k, lane in enumerate(lanes):
            t = max(start_ns, self._lane_free.get(lane, start_ns))
            n = per_lane + (1 if k < count - per_lane * len(lanes) else 0)
            # Durations and gaps drawn at random, then scaled so the lane's n rows end a
            # little before end_ns (each lane its own little), and one more task runs on.
            runs = [self._draw() for _ in range(n)]
            room = (end_ns - t) * self.random.uniform(0.985, 0.999)
            scale = room / max(1e-9, sum(d + g for _, d, g in runs))
            scales.append(scale)
            for name, run, pause in runs:
                started = t + int(pause * scale)
                t = started + int(run * scale)
                found.append(self._row(name, lane[0], started, t))
            self._lane_free[lane] = t
            self._next[lane] = self._draw()
        self._scale = sum(scales) / len(scales)
        found.sort(key=lambda r: r.ended_ns)  # the head sends rows as they finish
        return found

    def more(self, end_ns: int) -> list[Row]:
        """The rows that finished by ``end_ns`` since the last call, at the same pace: each
        slot goes on from its own last task, so slots do not finish in step."""
        found: list[Row] = []
        for lane in [(a, s) for a in self.addresses for s in range(self.slots)]:
            t = self._lane_free.setdefault(lane, end_ns)
            while True:
                name, run, pause = self._next.pop(lane, None) or self._draw()
                started = t + int(pause * self._scale)
                ended = started + int(run * self._scale)
                if ended > end_ns:
                    self._next[lane] = (name, run, pause)  # still running
                    break
                found.append(self._row(name, lane[0], started, ended))
                t = ended
            self._lane_free[lane] = t
        found.sort(key=lambda r: r.ended_ns)
        return found

    def _draw(self) -> tuple[str, float, float]:
        name, _, mean = self.random.choices(FUNCTIONS, [f[1] for f in FUNCTIONS])[0]
        return name, mean * self.random.lognormvariate(0, 0.5), self.random.expovariate(5.0)

    def _row(self, name: str, worker: str, started: int, ended: int) -> Row:
        rng = self.random
        failed = rng.random() < 0.01
        counts = self.done[task_id(name)]
        counts[0] += 1
        counts[1] += 1
        counts[2] += failed
        return Row(
            object_id=rng.getrandbits(64),
            task_id=task_id(name),
            submitted_ns=started - int(rng.expovariate(1.0) * 2e9),
            dispatched_ns=started - int(rng.random() * 2e6),
            started_ns=started,
            ended_ns=ended,
            worker=worker,
            failed=failed,
        )

    def lose(self, address: str, why: str = "lost") -> None:
        """Take a worker out, as the head reports it in "departed"."""
        self.addresses.remove(address)
        pid = self.pids[address]
        self.departed.append({"address": address, "pid": pid, "why": why, "ago_s": 0.5})

    def snapshot(self, time_ns: int) -> dict[str, object]:
        functions = [(f[0], task_id(f[0])) for f in FUNCTIONS]
        workers = [self._worker(k, a, functions) for k, a in enumerate(self.addresses)]
        actors = [
            {
                "actor_id": task_id(f"actor {k}"),
                "type_id": task_id(ACTOR_CLASSES[k % len(ACTOR_CLASSES)]),
                "name": ("ps-main", "", "cache")[k % 3],
                "state": ("alive", "alive", "waiting")[k % 3],
                "worker": self.addresses[k] if k % 3 != 2 else None,
                "calls": 1000 * (k + 1),
                "unanswered": k,
                "checkpoints": 4 * k,
                "covered": 900 * (k + 1),
                "restarts": k // 2,
                "why": "" if k % 3 != 2 else "every worker that serves its registry is busy",
            }
            for k in range(min(3, len(self.addresses)))
        ]
        if actors:
            workers[0]["actor"] = actors[0]["actor_id"]
        queues = [
            {
                "driver": d + 1,
                "task_id": functions[(d + k) % 6][1],
                "state": state,
                "count": 40 * (k + 1) + 7 * d,
                "cause": cause,
                "reason": reason,
            }
            for d in range(self.drivers)
            for k, (state, cause, reason) in enumerate(REASONS)
            if (d + k) % 2 == 0 or k == 1
        ]
        pending = sum(int(str(q["count"])) for q in queues)
        running = sum(int(str(w["running"])) for w in workers)
        held = sum(int(str(w["held_bytes"])) for w in workers)
        names = {} if self.names_sent else self.names()
        self.names_sent = True
        departed, self.departed = self.departed, []
        return {
            "version": 1,
            "epoch": self.epoch,
            "stopping": False,
            "time_ns": time_ns,
            "totals": {
                "objects": 120 * len(workers),
                "held_bytes": held,
                "pending": pending,
                "running": running,
                "workers": len(workers),
            },
            "counters": {
                "frames_refused": 2,
                "resumes": 1,
                "head_restarts": 0,
                "actor_calls": 6000,
                "checkpoints": 12,
                "checkpoint_bytes": 48 * MiB,
                "checkpoint_seconds": 3.25,
            },
            "workers": workers,
            "departed": departed,
            "drivers": [self._driver(d) for d in range(self.drivers)],
            "queues": queues,
            "objects": self._objects(held),
            "actors": actors,
            "functions": [
                {
                    "task_id": tid,
                    "submitted": self.done[tid][0] + 30,
                    "finished": self.done[tid][1],
                    "failed": self.done[tid][2],
                    "retried": 1 if name == "model.train_step" else 0,
                }
                for name, tid in functions
            ],
            "labels": names,
            "timeline": {"next": 0, "more": False},
        }

    def _worker(self, k: int, address: str, functions: list[tuple[str, int]]) -> dict[str, object]:
        rng = self.random
        running = rng.randint(0, self.slots)
        return {
            "link": 100 + k,
            "address": address,
            "host": address.rpartition(":")[0],
            "pid": self.pids[address],
            "rss": (180 + rng.randint(0, 900)) * MiB,
            "slots": self.slots,
            "running": running,
            "blocked": 0,
            "holding": rng.randint(0, 400),
            "held_bytes": rng.randint(0, 2000) * MiB,
            "actor": None,
            "state": "draining" if k == 5 else "silent" if k == 6 else "ready",
            "why": "2 tasks still running" if k == 5 else "",
            "checkpoints": k % 4 == 0,
            "registry": 0x3F2A9C1E,
            "silent_s": 7.5 if k == 6 else 0.1,
            "tasks": [
                {
                    "object_id": rng.getrandbits(64),
                    "task_id": functions[(k + i) % 6][1],
                    "running_s": rng.random() * 5,
                }
                for i in range(running)
            ],
        }

    def _driver(self, d: int) -> dict[str, object]:
        submitted = sum(c[0] for c in self.done.values()) // self.drivers + 300 * (d + 1)
        finished = submitted - 250 * (d + 1)
        return {
            "link": 10 + d,
            "number": d + 1,
            "kind": "client" if d == 2 else "driver",
            "host": f"10.0.9.{d + 1}",
            "pid": 900 + d,
            "rss": 300 * MiB,
            "registry": 0x3F2A9C1E,
            "submitted": submitted,
            "finished": finished,
            "failed": sum(c[2] for c in self.done.values()) // self.drivers,
            "retried": d,
            "waiting": 40 * (d + 1),
            "queued": 150 * (d + 1),
            "running": 60 * (d + 1),
            "objects": 500 + d,
            "bytes": (d + 1) * 300 * MiB,
        }

    def _objects(self, held: int) -> dict[str, object]:
        rng = self.random
        return {
            "count": 120 * len(self.addresses),
            "bytes": held,
            "by_worker": [
                {"address": a, "count": 120, "bytes": held // max(1, len(self.addresses))}
                for a in self.addresses
            ],
            "by_driver": [
                {"driver": d + 1, "count": 400 + d, "bytes": (d + 1) * 300 * MiB}
                for d in range(self.drivers)
            ],
            "largest": [
                {
                    "object_id": rng.getrandbits(64),
                    "bytes": (200 - 9 * k) * MiB,
                    "driver": k % self.drivers + 1,
                    "where": self.addresses[k % len(self.addresses)] if k % 5 else "head",
                    "task_id": task_id(FUNCTIONS[k % 5][0]) if k % 4 else None,
                }
                for k in range(min(20, 4 + len(self.addresses)))
            ],
        }


def feed(
    board: Board,
    *,
    workers: int,
    rows: int,
    span_s: float,
    seed: int = 0,
    now_ns: int | None = None,
) -> FakeCluster:
    """One update of ``board``: a snapshot of ``workers`` workers, ``rows`` rows over the
    ``span_s`` seconds before ``now_ns`` (the wall clock by default)."""
    cluster = FakeCluster(workers=workers, seed=seed)
    now = now_ns if now_ns is not None else time.time_ns()
    made = cluster.rows(rows, now - int(span_s * 1e9), now)
    board.update(cluster.snapshot(now), made)
    return cluster


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve a dashboard fed with fake data.")
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--span", type=float, default=540.0, help="seconds of rows")
    parser.add_argument("--port", type=int, default=8265)
    args = parser.parse_args()
    board = Board()
    cluster = feed(board, workers=args.workers, rows=args.rows, span_s=args.span)
    server = serve(board, "127.0.0.1", args.port)
    print(server.url, flush=True)
    try:
        while True:
            time.sleep(1.0)
            now = time.time_ns()
            board.update(cluster.snapshot(now), cluster.more(now))
    except KeyboardInterrupt:
        server.close()


if __name__ == "__main__":
    main()
