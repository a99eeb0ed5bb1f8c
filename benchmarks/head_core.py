"""The head core's speed and memory on one core: tasks through it, and queued tasks it holds.

Run it from a checkout after ``python -m pip install .``::

    python benchmarks/head_core.py

Nothing here opens a socket. One head, worker cores and driver cores are wired by in-memory
pipes, and bytes move the way a binding moves them: whatever a core's `decisions()` asked to
write to a link is joined into one read for the other end, and the receiving core gets it in
one `receive_data` call, followed by one `decisions()` call.

Throughput (median of 5 timed runs after one untimed warm-up, each on a fresh cluster):

- 2 `Worker` cores, ``Head(worker_slots=64)``, and 1, 2 or 4 `Driver` cores. A driver
  submits 1,000 tasks at a time (16-byte argument) and submits another 1,000 whenever fewer
  than 1,000 of its tasks are unanswered, so the head always has work queued. A worker runs
  each task the moment its `RunTask` decision appears (`task_done` with a 16-byte result,
  sent inline), and a driver releases each result as soon as its value arrives, as a runtime
  does when the user drops the reference after reading it. A run ends when every result has
  reached its driver and every pipe is empty; the head must then track no object at all.
- The same with task-after chains: every task takes the previous one's result as its input
  (the first is a plain task), so the head can only ever dispatch one task per driver.
- "end to end" is wall time for the whole run: driver, head and worker cores and the pipes.
  "head only" counts just the time inside `Head.receive_data` and `Head.decisions`.

Memory (one run each, with no worker connected, so that nothing is ever dispatched):

- One driver's 1,000,000 tasks are encoded before measuring and fed to the head 1,000 tasks
  (37,000 bytes) per `receive_data` call. The head's share is measured with `tracemalloc`:
  its traced memory after the last call (current) and at its highest (peak), minus what was
  traced before the first call, divided by the number of tasks (the cyclic collector is
  paused while tracing, which changes only the time). The same stream is first fed to another
  fresh head without tracing, with the collector on, to time it (tracing slows Python down
  several times) and to see the process's resident memory grow.
- The same for 1,000,000 task-after tasks (16-byte value) WAITING on an unfinished input:
  one chain, each task on the one before it (the first on a queued plain task). With
  ``--fan-in``, also 1,000,000 all waiting on one queued plain task (about 45 s more).

Targets: >= 50,000 tasks/s through the head core (head time); < 1 KiB of head memory per
queued task. The whole script takes about two minutes.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

try:
    import dista_proto as dp
except ImportError:  # not installed: use the checkout this script lives in
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import dista_proto as dp

RUNS = 5
#: Tasks a driver submits at once, and the fewest unanswered before it submits more.
BATCH = 1_000
WORKERS = 2
WORKER_SLOTS = 64
#: Tasks per timed run, shared evenly between the drivers.
TASKS = 40_000
CHAIN_TASKS = 10_000
DRIVER_COUNTS = (1, 2, 4)
#: Tasks the head holds for the memory figures.
QUEUED = 1_000_000
ARGUMENT = bytes(range(16))
RESULT = bytes(range(16, 32))
REGISTRY = 0xD15A
TASK_ID = 7

TARGET_TASKS_PER_S = 50_000
TARGET_BYTES_PER_TASK = 1024


# -- throughput -------------------------------------------------------------------------------


def unexpected(core: str, decision: dp.Decision) -> NoReturn:
    """The workload asks for nothing but writes, runs and values: anything else is a bug."""
    raise RuntimeError(f"unexpected decision for {core}: {decision!r}")


class Submitter:
    """A driver core and the runtime around it: submits in batches, releases what it reads."""

    def __init__(self, core: dp.Driver, tasks: int, chain: bool) -> None:
        self.core = core
        self.left = tasks  # not submitted yet
        self.unanswered = 0
        self.received = 0
        self.chain = chain
        self.tail = 0  # the chain's last submitted task
        self.tail_arrived = False  # its value came before the next batch could chain on it

    def submit_batch(self) -> None:
        n = min(BATCH, self.left)
        core = self.core
        if self.chain:
            old_tail = prev = self.tail
            for _ in range(n):
                if prev == 0:
                    prev = core.submit(TASK_ID, ARGUMENT)
                else:
                    prev = core.submit_after(TASK_ID, (prev,), value=ARGUMENT)
            self.tail = prev
            if self.tail_arrived:
                self.tail_arrived = False
                core.release(old_tail)
        else:
            submit = core.submit
            for _ in range(n):
                submit(TASK_ID, ARGUMENT)
        self.left -= n
        self.unanswered += n

    def on_decision(self, decision: dp.Decision) -> None:
        if isinstance(decision, dp.ObjectValue):
            self.received += 1
            self.unanswered -= 1
            if decision.object_id == self.tail and self.left:
                self.tail_arrived = True  # the next batch's first task still needs it
            else:
                self.core.release(decision.object_id)
        elif not isinstance(decision, dp.Welcomed):
            unexpected("a driver", decision)


class Cluster:
    """One head, worker cores and submitters, wired by in-memory pipes (no sockets)."""

    def __init__(self, drivers: int, tasks: int, *, chain: bool = False) -> None:
        self.now = 1_000
        self.head = dp.Head(epoch=1, first_number=1, worker_slots=WORKER_SLOTS, prefetch=0)
        self.head_ns = 0
        self.head_calls = 0  # receive_data calls
        self.to_head: dict[int, list[bytes]] = {}  # head link -> reads waiting for the head
        self.to_peer: dict[int, list[bytes]] = {}  # head link -> reads waiting for its peer
        self.workers: dict[int, dp.Worker] = {}
        self.drivers: dict[int, Submitter] = {}
        for i in range(WORKERS):
            worker = dp.Worker(registry_hash=REGISTRY, address=dp.Address(f"10.0.0.{i + 1}", 7000))
            link = self._connect()
            self.workers[link] = worker
            worker.start(self.now)
            self._worker_decisions(link, worker)
        share, extra = divmod(tasks, drivers)
        for i in range(drivers):
            core = dp.Driver(registry_hash=REGISTRY)
            link = self._connect()
            self.drivers[link] = Submitter(core, share + (i < extra), chain)
            core.start(self.now)
            self._driver_decisions(link, self.drivers[link])
        self.move()  # hellos and welcomes
        if not all(s.core.ready for s in self.drivers.values()):
            raise RuntimeError("a driver was not welcomed")
        self.head_ns = self.head_calls = 0

    def _connect(self) -> int:
        link = self.head.connection_made(self.now)
        self.to_head[link] = []
        self.to_peer[link] = []
        return link

    def _worker_decisions(self, link: int, worker: dp.Worker) -> None:
        now = self.now
        while decisions := worker.decisions():
            for d in decisions:
                if isinstance(d, dp.RunTask):
                    worker.task_done(d.object_id, (RESULT,), now, now)
                elif isinstance(d, dp.Write):
                    self.to_head[link].append(b"".join(d.buffers))
                elif isinstance(d, dp.CancelTask):
                    pass  # a withdrawal for an idle worker: every task here already ran
                else:
                    unexpected("a worker", d)

    def _driver_decisions(self, link: int, submitter: Submitter) -> None:
        while decisions := submitter.core.decisions():
            for d in decisions:
                if isinstance(d, dp.Write):
                    self.to_head[link].append(b"".join(d.buffers))
                else:
                    submitter.on_decision(d)

    def move(self) -> None:
        """Turns of an event loop until no pipe holds bytes: head first, then its peers."""
        head = self.head
        clock = time.perf_counter_ns
        to_head, to_peer = self.to_head, self.to_peer
        while True:
            self.now += 1
            now = self.now
            moved = False
            for link, reads in to_head.items():
                if not reads:
                    continue
                data = reads[0] if len(reads) == 1 else b"".join(reads)
                reads.clear()
                start = clock()
                head.receive_data(link, data, now)
                decisions = head.decisions()
                self.head_ns += clock() - start
                self.head_calls += 1
                moved = True
                for d in decisions:
                    if not isinstance(d, dp.Write):
                        unexpected("the head", d)
                    to_peer[d.link].append(b"".join(d.buffers))
            for link, reads in to_peer.items():
                if not reads:
                    continue
                data = reads[0] if len(reads) == 1 else b"".join(reads)
                reads.clear()
                moved = True
                worker = self.workers.get(link)
                if worker is not None:
                    worker.receive_data(0, data, now)
                    self._worker_decisions(link, worker)
                else:
                    submitter = self.drivers[link]
                    submitter.core.receive_data(0, data, now)
                    self._driver_decisions(link, submitter)
            if not moved:
                return

    def run(self) -> None:
        """Submit, move and answer until every result is back and every pipe is empty."""
        submitters = list(self.drivers.items())
        while True:
            for link, s in submitters:
                if s.left and s.unanswered < BATCH:
                    s.submit_batch()
                    self._driver_decisions(link, s)
            self.move()
            if all(not s.left and not s.unanswered for _, s in submitters):
                break
        stats = self.head.stats()
        if stats.objects or stats.pending or stats.running or stats.held_bytes:
            raise RuntimeError(f"the head still tracks work after the run: {stats}")


@dataclass(frozen=True, slots=True)
class Sample:
    """One timed run."""

    total_ns: int
    head_ns: int
    head_calls: int


@dataclass(frozen=True, slots=True)
class Row:
    """A configuration's median run (by total time; head time is its own median)."""

    name: str
    tasks: int
    total_ns: float
    head_ns: float
    head_calls: float

    @property
    def end_to_end(self) -> float:
        return self.tasks * 1e9 / self.total_ns

    @property
    def head_only(self) -> float:
        return self.tasks * 1e9 / self.head_ns


def one_run(drivers: int, tasks: int, chain: bool) -> Sample:
    cluster = Cluster(drivers, tasks, chain=chain)
    gc.collect()
    start = time.perf_counter_ns()
    cluster.run()
    total = time.perf_counter_ns() - start
    return Sample(total, cluster.head_ns, cluster.head_calls)


def throughput(name: str, drivers: int, tasks: int, chain: bool) -> Row:
    one_run(drivers, tasks, chain)  # warm-up
    samples = [one_run(drivers, tasks, chain) for _ in range(RUNS)]
    return Row(
        name,
        tasks,
        statistics.median(s.total_ns for s in samples),
        statistics.median(s.head_ns for s in samples),
        statistics.median(s.head_calls for s in samples),
    )


# -- memory -----------------------------------------------------------------------------------


def welcomed_driver(head: dp.Head) -> tuple[dp.Driver, int]:
    """A driver the head has numbered, and its link on the head."""
    driver = dp.Driver(registry_hash=REGISTRY)
    link = head.connection_made(0)
    driver.start(0)
    for d in driver.decisions():
        assert isinstance(d, dp.Write)
        head.receive_data(link, b"".join(d.buffers), 0)
    for d in head.decisions():
        assert isinstance(d, dp.Write)
        driver.receive_data(0, b"".join(d.buffers), 0)
    driver.decisions()
    if not driver.ready:
        raise RuntimeError("the driver was not welcomed")
    return driver, link


def encode_queue(driver: dp.Driver, tasks: int, kind: str) -> list[bytes]:
    """The driver's ``tasks`` submissions (after a root task for task-after), in batches."""
    reads: list[bytes] = []
    prev = root = driver.submit(TASK_ID, ARGUMENT) if kind != "plain" else 0
    submitted = 0
    while submitted < tasks:
        n = min(BATCH, tasks - submitted)
        if kind == "plain":
            for _ in range(n):
                driver.submit(TASK_ID, ARGUMENT)
        elif kind == "fan-in":
            for _ in range(n):
                driver.submit_after(TASK_ID, (root,), value=ARGUMENT)
        else:
            for _ in range(n):
                prev = driver.submit_after(TASK_ID, (prev,), value=ARGUMENT)
        submitted += n
        for d in driver.decisions():
            assert isinstance(d, dp.Write)
            reads.append(b"".join(d.buffers))
    return reads


def rss_bytes() -> int:
    """Resident memory of this process, where /proc says it (else 0)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


@dataclass(frozen=True, slots=True)
class Memory:
    name: str
    tasks: int
    feed_ns: int
    current: int
    peak: int
    rss: int


def feed(head: dp.Head, link: int, reads: list[bytes]) -> int:
    start = time.perf_counter_ns()
    for data in reads:
        head.receive_data(link, data, 1)
        head.decisions()
    return time.perf_counter_ns() - start


def memory(name: str, kind: str, tasks: int = QUEUED) -> Memory:
    # Every fresh head numbers its first driver 1, so one driver's stream serves them all.
    driver, _ = welcomed_driver(dp.Head(epoch=1, first_number=1))
    reads = encode_queue(driver, tasks, kind)
    # Untraced: the time it takes, and what the process's resident memory does.
    head = dp.Head(epoch=1, first_number=1)
    _, link = welcomed_driver(head)
    gc.collect()
    rss_before = rss_bytes()
    feed_ns = feed(head, link, reads)
    rss = rss_bytes() - rss_before
    check_held(head, kind, tasks)
    del head
    # Traced: what the head allocated and kept. The collector is paused (it only costs time
    # here, as the head makes no cyclic garbage) and run once before reading the figures.
    head = dp.Head(epoch=1, first_number=1)
    _, link = welcomed_driver(head)
    gc.collect()
    gc.disable()
    try:
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        feed(head, link, reads)
        gc.collect()
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        gc.enable()
    check_held(head, kind, tasks)
    del head
    gc.collect()
    return Memory(name, tasks, feed_ns, current - base, peak - base, rss)


def check_held(head: dp.Head, kind: str, tasks: int) -> None:
    stats = head.stats()
    expected = tasks if kind == "plain" else tasks + 1
    if stats.objects != expected or stats.pending != expected or stats.running:
        raise RuntimeError(f"{kind}: the head should hold {expected} tasks, not {stats}")


# -- report -----------------------------------------------------------------------------------


def pin_to_one_core() -> str:
    if not hasattr(os, "sched_setaffinity"):
        return "not pinned (no sched_setaffinity on this platform)"
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return f"pinned to CPU {cpu}"


def timed(what: Callable[[], None]) -> float:
    start = time.perf_counter()
    what()
    return time.perf_counter() - start


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def print_throughput(rows: list[Row]) -> None:
    print(
        f"{'tasks through the head core':<31}{'tasks':>7}{'end to end':>13}{'head only':>12}"
        f"{'head µs/task':>14}{'tasks/read':>12}{'>= 50k/s':>10}"
    )
    for r in rows:
        print(
            f"{r.name:<31}{r.tasks:>7,}{r.end_to_end:>11,.0f}/s{r.head_only:>10,.0f}/s"
            f"{r.head_ns / r.tasks / 1e3:>14.2f}{r.tasks / r.head_calls:>12.1f}"
            f"{verdict(r.head_only >= TARGET_TASKS_PER_S):>10}"
        )
    print(
        "(end to end: wall time of driver, head and worker cores together on this one CPU;\n"
        " head only: time inside Head.receive_data and Head.decisions; tasks/read: tasks per\n"
        " Head.receive_data call, over all the head's reads: submissions, answers, releases)"
    )


def print_memory(rows: list[Memory]) -> None:
    print(
        f"{'tasks held by the head':<34}{'tasks':>10}{'fed at':>12}{'B/task':>8}"
        f"{'peak':>7}{'RSS':>6}{'< 1 KiB':>9}"
    )
    for m in rows:
        rate = m.tasks * 1e9 / m.feed_ns
        rss = f"{m.rss / m.tasks:>6,.0f}" if m.rss else f"{'n/a':>6}"
        ok = m.current / m.tasks < TARGET_BYTES_PER_TASK
        print(
            f"{m.name:<34}{m.tasks:>10,}{rate:>10,.0f}/s{m.current / m.tasks:>8,.0f}"
            f"{m.peak / m.tasks:>7,.0f}{rss}{verdict(ok):>9}"
        )
    print(
        "(B/task: tracemalloc, the head's memory after the last read, per task; peak: its\n"
        " highest during the feed; RSS: resident growth of the process in the untraced feed;\n"
        " fed at: tasks per second of head time for the untraced feed, cyclic GC on)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--fan-in",
        action="store_true",
        help="also measure 1,000,000 task-after tasks all waiting on one task (about 45 s more)",
    )
    args = parser.parse_args()
    pinned = pin_to_one_core()
    print(
        f"Dista head core on {platform.python_implementation()} {platform.python_version()}"
        f" ({platform.machine()}, {pinned})"
    )
    print(
        f"targets: >= {TARGET_TASKS_PER_S:,} tasks/s through the head core (head time); "
        f"< {TARGET_BYTES_PER_TASK:,} B of head memory per queued task"
    )
    print(
        f"setup: {WORKERS} Worker cores, Head(worker_slots={WORKER_SLOTS}); drivers submit "
        f"{BATCH:,} tasks at a time\n       (16-byte arguments and results) and release each "
        f"result on arrival; median of {RUNS} runs\n"
    )
    rows: list[Row] = []

    def measure() -> None:
        for n in DRIVER_COUNTS:
            name = f"plain tasks, {n} driver{'s' if n > 1 else ''}"
            rows.append(throughput(name, n, TASKS, chain=False))
        rows.append(throughput("task-after chain, 1 driver", 1, CHAIN_TASKS, chain=True))
        rows.append(throughput("task-after chains, 4 drivers", 4, CHAIN_TASKS, chain=True))

    spent = timed(measure)
    print_throughput(rows)
    print(f"[{spent:.0f} s]\n")

    held: list[Memory] = []

    def measure_memory() -> None:
        held.append(memory("queued plain tasks, no workers", "plain"))
        if args.fan_in:
            held.append(memory("task-after waiting, all on one", "fan-in"))
        held.append(memory("task-after waiting, one chain", "chain"))

    spent = timed(measure_memory)
    print_memory(held)
    print(f"[{spent:.0f} s]")


if __name__ == "__main__":
    main()
