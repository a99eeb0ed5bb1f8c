"""The well-behaved driver's tasks and actor under attack (tests/processes/test_hostile.py,
benchmarks/fuzz.py): importable, so `dista worker --import tests.processes.support.hostile_tasks`
knows them by name, and nothing here travels by value (a hostile worker of any registry
may be sent by-value tasks; it is never sent these).

Every value is a pure function of its arguments, so the driver checks each result exactly.
"""

from __future__ import annotations

import hashlib
import os
import time

import dista_runtime as dista

#: The size of a stored result: far over the 64 KiB inline threshold, so it stays on the
#: worker that made it and is fetched from that worker's object server.
BLOB = 1 << 20


def blob_bytes(seed: int, size: int = BLOB) -> bytes:
    """``size`` bytes that depend on ``seed`` (one 64 KiB block repeated: fast to make)."""
    block = hashlib.sha256(seed.to_bytes(8, "little")).digest() * 2048
    reps, rest = divmod(size, len(block))
    return block * reps + block[:rest]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dista.task
def add(a: int, b: int) -> int:
    return a + b


@dista.task
def step(x: int, k: int) -> int:
    """One link of a task-after chain: every link's value depends on the one before."""
    return (x * 31 + k) % 1_000_000_007


@dista.task
def blob(seed: int) -> bytes:
    return blob_bytes(seed)


@dista.task
def summarize(data: bytes) -> tuple[int, str]:
    """The length and digest of a blob, read by a worker from wherever it lies."""
    return len(data), digest(data)


@dista.task
def slow(value: int, seconds: float) -> int:
    time.sleep(seconds)
    return value


#: The actor checkpoints where the run gives it a store (`hostile_run.run`), as a long-lived
#: actor is meant to: else the head keeps every call for a rebuild, up to its keep budget,
#: and the good driver's own calls grow the head during the run, the attack aside.
CHECKPOINT_EVERY = 500 if os.environ.get("DISTA_CHECKPOINT_URI") else 0


@dista.actor(checkpoint_every=CHECKPOINT_EVERY)
class Tally:
    """A running sum: a call lost, replayed or reordered shows in the answers."""

    def __init__(self) -> None:
        self.total = 0

    def add(self, k: int) -> int:
        self.total += k
        return self.total
