"""Tasks and actors for the recovery tests (tests/processes/test_recovery.py): importable, so
the `dista worker` processes those tests start know them by name.

The DAG's values are pure functions of their position, so the test computes what a run
with no faults gives (`expected_dag`) and compares every result with it. A few results are
blobs over 64 KiB (`blob`): they stay on the worker that made them and are fetched from it
by the tasks that take them and by the driver.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

import dista_runtime as dista

#: Values of the DAG live in [0, MOD).
MOD = (1 << 61) - 1
#: The size of the DAG's large results: over 64 KiB, so they are stored on a worker.
LARGE = 80 * 1024
#: Every LARGE_EVERY-th task of a layer returns a blob instead of an int.
LARGE_EVERY = 100
#: A MiB, for the drain test's results.
MIB = 1 << 20


# -- the DAG -------------------------------------------------------------------------------


def mix(layer: int, i: int, a: int, b: int) -> int:
    """The value of task ``i`` of ``layer`` from its two inputs' values."""
    return (a * 1_000_003 + b * 7_919 + layer * 104_729 + i + 1) % MOD


def blob(value: int) -> bytes:
    """``value`` as a LARGE-byte blob: the value, then a fill that depends on it."""
    head = value.to_bytes(8, "little")
    block = hashlib.sha256(head).digest()
    return head + (block * (LARGE // len(block) + 1))[: LARGE - 8]


def value_of(x: int | bytes) -> int:
    """An input's value: an int as it is, a blob checked whole (a torn or mixed up blob
    fails the task that reads it, so it cannot go unnoticed)."""
    if isinstance(x, int):
        return x
    value = int.from_bytes(x[:8], "little")
    if len(x) != LARGE or x != blob(value):
        raise ValueError(f"a corrupt blob of {len(x)} bytes (value {value})")
    return value


def is_large(layer: int, i: int) -> bool:
    return layer > 0 and i % LARGE_EVERY == 0


def result(layer: int, i: int, value: int) -> int | bytes:
    return blob(value) if is_large(layer, i) else value


def partner(i: int, width: int) -> int:
    """The second input of task ``i``: another task of the previous layer."""
    return (i * 7 + 1) % width


def expected_dag(layers: int, width: int) -> list[list[int]]:
    """Every task's value in a run with no faults: ``[layer][i]``."""
    values = [[mix(0, i, i, 0) for i in range(width)]]
    for layer in range(1, layers):
        prev = values[-1]
        values.append([mix(layer, i, prev[i], prev[partner(i, width)]) for i in range(width)])
    return values


@dista.task
def seed(i: int) -> int:
    return mix(0, i, i, 0)


@dista.task
def node(layer: int, i: int, a: int | bytes, b: int | bytes, pause: float = 0.0) -> int | bytes:
    if pause:
        time.sleep(pause)
    return result(layer, i, mix(layer, i, value_of(a), value_of(b)))


# -- actors --------------------------------------------------------------------------------


@dista.actor(checkpoint_every=7)
class Recorder:
    """A counter and the list of what it was given, in order: with a checkpoint every 7
    calls, a restart that replayed a call or skipped one shows in both."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.n = 0
        self.seen: list[Any] = []

    def record(self, item: Any) -> int:
        """Count the call and keep ``item`` (a blob as ``("blob", its value)``, checked)."""
        self.n += 1
        self.seen.append(("blob", value_of(item)) if isinstance(item, bytes) else item)
        return self.n

    def state(self) -> tuple[str, int, list[Any]]:
        return self.name, self.n, list(self.seen)

    def pid(self) -> int:
        return os.getpid()


# -- workers holding, running, stopping ----------------------------------------------------


def pattern(i: int, size: int) -> bytes:
    """``size`` bytes that depend on ``i`` (fast to make: one block repeated)."""
    block = hashlib.sha256(i.to_bytes(8, "little")).digest() * 2048  # 64 KiB
    reps, rest = divmod(size, len(block))
    return block * reps + block[:rest]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dista.task
def chunk(i: int, size: int, marks: str) -> bytes:
    """``pattern(i, size)``; leaves ``marks/i`` holding this worker's pid (where it lies)."""
    data = pattern(i, size)
    Path(marks, str(i)).write_text(str(os.getpid()))
    return data


@dista.task
def counted(i: int, size: int, runs: str, pause: float = 0.0) -> tuple[int, bytes]:
    """Appends this worker's pid to ``runs/i`` (each run a line), sleeps ``pause``, then
    returns ``(i, pattern(i, size))``: the value never depends on which run it was."""
    with open(Path(runs, str(i)), "a") as f:
        f.write(f"{os.getpid()}\n")
    if pause:
        time.sleep(pause)
    return i, pattern(i, size)


@dista.task
def summarize(value: bytes | tuple[int, bytes]) -> tuple[int, str]:
    """The length and digest of a `chunk` (or of the bytes of a `counted`), read from
    wherever it lies."""
    data = value if isinstance(value, bytes) else value[1]
    return len(data), digest(data)


@dista.task
def marked_sleep(seconds: float, marker: str, value: int) -> tuple[int, int]:
    """Appends this worker's pid to ``marker`` (once per run), sleeps, returns
    ``(value, pid)``."""
    with open(marker, "a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(seconds)
    return value, os.getpid()


@dista.task
def pid() -> int:
    return os.getpid()
