"""The wire layer's speed on one core: small frames encoded and decoded, and 64 MiB parts.

Run it from a checkout after ``python -m pip install .``::

    python benchmarks/frames.py

Every figure is the median of 5 timed runs (after one untimed warm-up run), with the process
pinned to one CPU where the platform allows it. Only the protocol work is timed: building the
input stream, slicing it into reads and checking the output happen outside the clock.

- Small frames: `Task` frames with a 16-byte argument (37 bytes on the wire). Encoding is
  `Connection.send` for each event and `data_to_send` once per batch of 10,000; decoding
  feeds a head-side connection (after a driver's hello) the same stream in 64 KiB reads, as
  a socket would deliver it, and drains `next_events` after each read.
- 64 MiB parts: the send side is an object server's connection sending a `Part` event over a
  memoryview of a 64 MiB buffer, and shows that `data_to_send` hands back that view itself
  (no copy). The receive side is a fetcher's connection fed the frame in 1 MiB reads, then
  `frame.Parts` reassembling the object. Both are compared with a plain memory copy of
  64 MiB into an already-touched buffer, measured in the same run.

Targets: at least 1,000,000 small frames/s decoded; parts received at memory-copy speed.
"""

from __future__ import annotations

import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

try:
    import dista_proto as dp
except ImportError:  # not installed: use the checkout this script lives in
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import dista_proto as dp
from dista_proto import frame as F

RUNS = 5
#: Small frames per batch (one `data_to_send` per batch) and batches per run.
BATCH = 10_000
BATCHES = 50
#: A realistic socket read for a stream of small frames.
SMALL_READ = 64 * 1024
ARGUMENT = bytes(range(16))
#: One part frame carries a whole 64 MiB part (the fetcher's default part size).
PART_BYTES = F.PART_SIZE
#: A realistic socket read for a large frame.
BIG_READ = 1 << 20
#: Sends of the 64 MiB part per timed run (the send side is too fast to time once).
PART_SENDS = 1_000
#: Driver number 1 << 40 | n, as the object ID layout in docs/wire.md has it.
FIRST_OBJECT = 1 << 40 | 1
TASK_ID = 0x5EED

TARGET_FRAMES_PER_S = 1_000_000


@dataclass(frozen=True, slots=True)
class Sample:
    """One timed run: how long it took and how much it moved."""

    ns: int
    frames: int
    nbytes: int


@dataclass(frozen=True, slots=True)
class Row:
    """A benchmark's median run."""

    name: str
    ns: float
    frames: int
    nbytes: int

    @property
    def frames_per_s(self) -> float:
        return self.frames * 1e9 / self.ns

    @property
    def mb_per_s(self) -> float:
        return self.nbytes * 1e3 / self.ns  # bytes/ns * 1e9 / 1e6

    @property
    def gb_per_s(self) -> float:
        return self.nbytes / self.ns

    @property
    def ns_per_frame(self) -> float:
        return self.ns / self.frames


def median_of(name: str, run: Callable[[], Sample]) -> Row:
    """Run once untimed, then RUNS times; the median run (by time)."""
    run()
    samples = []
    for _ in range(RUNS):
        gc.collect()
        samples.append(run())
    ns = statistics.median(s.ns for s in samples)
    first = samples[0]
    if any((s.frames, s.nbytes) != (first.frames, first.nbytes) for s in samples):
        raise RuntimeError(f"{name}: runs moved different amounts")
    return Row(name, ns, first.frames, first.nbytes)


# -- small frames ---------------------------------------------------------------------------


def driver_after_hello() -> tuple[dp.Connection, bytes]:
    """A driver's connection that has sent its hello, and the hello's bytes."""
    conn = dp.Connection(dp.Role.DRIVER)
    conn.send(dp.Hello(F.ROLE_DRIVER, registry_hash=0x1234))
    return conn, b"".join(conn.data_to_send())


def small_tasks() -> list[dp.Task]:
    return [dp.Task(FIRST_OBJECT + i, TASK_ID, ARGUMENT) for i in range(BATCH)]


def encode_small(events: list[dp.Task]) -> Sample:
    conn, _ = driver_after_hello()
    send, flush = conn.send, conn.data_to_send
    nbytes = 0
    start = time.perf_counter_ns()
    for _ in range(BATCHES):
        for event in events:
            send(event)
        for buffer in flush():
            nbytes += len(buffer)
    ns = time.perf_counter_ns() - start
    return Sample(ns, BATCH * BATCHES, nbytes)


def small_stream(events: list[dp.Task]) -> tuple[bytes, list[bytes]]:
    """A driver's hello, and BATCHES batches of task frames cut into SMALL_READ reads."""
    conn, hello = driver_after_hello()
    for _ in range(BATCHES):
        for event in events:
            conn.send(event)
    stream = b"".join(conn.data_to_send())
    return hello, [stream[i : i + SMALL_READ] for i in range(0, len(stream), SMALL_READ)]


def decode_small(hello: bytes, reads: list[bytes]) -> Sample:
    head = dp.Connection(dp.Role.HEAD)
    head.receive_data(hello)
    head.next_events()
    receive, drain = head.receive_data, head.next_events
    frames = 0
    start = time.perf_counter_ns()
    for data in reads:
        receive(data)
        frames += len(drain())
    ns = time.perf_counter_ns() - start
    if frames != BATCH * BATCHES or head.next_event() is not dp.NEED_DATA:
        raise RuntimeError(f"decoded {frames} frames, expected {BATCH * BATCHES}")
    return Sample(ns, frames, sum(map(len, reads)))


# -- 64 MiB parts -----------------------------------------------------------------------------


def touched(n: int) -> bytearray:
    """A buffer whose pages are all mapped already (bytearray(n) writes its zeros)."""
    buffer = bytearray(n)
    buffer[:] = b"\x01" * n
    return buffer


def send_part(view: memoryview) -> tuple[Sample, bool]:
    """PART_SENDS sends of one 64 MiB part; whether data_to_send returned the view itself."""
    conn = dp.Connection(dp.Role.OBJECT_SERVER)
    size = len(view)
    step = F.part_payload_size(F.PART_SIZE)
    no_copy = True
    start = time.perf_counter_ns()
    for _ in range(PART_SENDS):
        payload = view[:step]
        conn.send(dp.Part(FIRST_OBJECT, size, 0, payload))
        buffers = conn.data_to_send()
        no_copy = no_copy and buffers[-1] is payload
    ns = time.perf_counter_ns() - start
    return Sample(ns, PART_SENDS, PART_SENDS * size), no_copy


def part_reads(view: memoryview) -> list[bytes]:
    """The part frame for the whole buffer, as the fetcher's socket delivers it."""
    conn = dp.Connection(dp.Role.OBJECT_SERVER)
    conn.send(dp.Part(FIRST_OBJECT, len(view), 0, view))
    stream = b"".join(conn.data_to_send())
    return [stream[i : i + BIG_READ] for i in range(0, len(stream), BIG_READ)]


@dataclass(frozen=True, slots=True)
class Received:
    """One receive run, split into the connection's share and the reassembly's."""

    total: Sample
    connection_ns: int


def receive_part(reads: list[bytes], expect: memoryview) -> Received:
    conn = dp.Connection(dp.Role.FETCHER)
    parts = F.Parts()
    receive, drain = conn.receive_data, conn.next_events
    events: list[dp.Event] = []
    start = time.perf_counter_ns()
    for data in reads:
        receive(data)
        events += drain()
    mid = time.perf_counter_ns()
    for event in events:
        assert isinstance(event, dp.Part)
        parts.add_part(event.size, event.offset, event.data)
    obj = parts.take()
    end = time.perf_counter_ns()
    if len(events) != 1 or len(obj) != len(expect) or obj[-4096:] != expect[-4096:]:
        raise RuntimeError("the part did not arrive whole")
    return Received(Sample(end - start, 1, len(obj)), mid - start)


def copy_touched(dst: bytearray, src: bytearray) -> Sample:
    # The source is a bytearray on purpose: assigning any other buffer (bytes, memoryview)
    # to a bytearray slice makes CPython copy it into a temporary bytearray first.
    start = time.perf_counter_ns()
    dst[: len(src)] = src
    ns = time.perf_counter_ns() - start
    return Sample(ns, 1, len(src))


def copy_fresh(src: memoryview) -> Sample:
    start = time.perf_counter_ns()
    fresh = bytearray(src)
    ns = time.perf_counter_ns() - start
    del fresh
    return Sample(ns, 1, len(src))


# -- report -----------------------------------------------------------------------------------


def pin_to_one_core() -> str:
    if not hasattr(os, "sched_setaffinity"):
        return "not pinned (no sched_setaffinity on this platform)"
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return f"pinned to CPU {cpu}"


def print_small(rows: list[Row]) -> None:
    print(f"{'small frames (37 B each)':<44}{'frames/s':>12}{'MB/s':>10}{'ns/frame':>10}")
    for r in rows:
        print(f"{r.name:<44}{r.frames_per_s:>12,.0f}{r.mb_per_s:>10,.1f}{r.ns_per_frame:>10,.0f}")


def print_big(rows: list[Row], baseline: Row) -> None:
    print(f"{'64 MiB parts':<44}{'GB/s':>12}{'ms/part':>10}{'x copy':>10}")
    for r in rows:
        ratio = r.gb_per_s / baseline.gb_per_s
        print(f"{r.name:<44}{r.gb_per_s:>12,.2f}{r.ns_per_frame / 1e6:>10,.3f}{ratio:>10,.2f}")


def main() -> None:
    pinned = pin_to_one_core()
    print(
        f"Dista wire layer on {platform.python_implementation()} {platform.python_version()}"
        f" ({platform.machine()}, {pinned}); median of {RUNS} runs"
    )
    print("targets: >= 1,000,000 small frames/s decoded; parts received at memory-copy speed")
    print("(MB = 10^6 bytes and GB = 10^9 bytes, counted as they travel on the wire)\n")

    events = small_tasks()
    hello, reads = small_stream(events)
    encode = median_of(f"encode: send + data_to_send per {BATCH:,}", lambda: encode_small(events))
    decode = median_of(
        f"decode: {SMALL_READ // 1024} KiB reads + next_events", lambda: decode_small(hello, reads)
    )
    print_small([encode, decode])
    verdict = "met" if decode.frames_per_s >= TARGET_FRAMES_PER_S else "NOT met"
    print(f"decode target {TARGET_FRAMES_PER_S:,} frames/s: {verdict}\n")

    source = touched(PART_BYTES)
    view = memoryview(source)
    no_copy = True

    def send() -> Sample:
        nonlocal no_copy
        sample, same = send_part(view)
        no_copy = no_copy and same
        return sample

    sent = median_of("send: Part over a view + data_to_send", send)
    big_reads = part_reads(view)
    received: list[Received] = []

    def receive() -> Sample:
        result = receive_part(big_reads, view)
        received.append(result)
        return result.total

    recv = median_of(f"receive: {BIG_READ >> 20} MiB reads + Parts (total)", receive)
    timed = received[1:]  # the first was the warm-up
    conn_ns = statistics.median(r.connection_ns for r in timed)
    parts_ns = statistics.median(r.total.ns - r.connection_ns for r in timed)
    conn_row = Row("  of which Connection (reads + next_events)", conn_ns, 1, PART_BYTES)
    parts_row = Row("  of which Parts.add_part + take", parts_ns, 1, PART_BYTES)
    dst = touched(PART_BYTES)
    baseline = median_of("memory copy into a touched buffer", lambda: copy_touched(dst, source))
    fresh = median_of("memory copy into fresh memory", lambda: copy_fresh(view))
    print_big([sent, recv, conn_row, parts_row, baseline, fresh], baseline)
    print(
        f"send side: data_to_send returned the caller's 64 MiB view itself: "
        f"{'yes (no copy)' if no_copy else 'NO (copied)'}"
    )
    print(
        f"receive target (memory-copy speed, {baseline.gb_per_s:.2f} GB/s): "
        f"{recv.gb_per_s / baseline.gb_per_s:.0%} of it"
    )


if __name__ == "__main__":
    main()
