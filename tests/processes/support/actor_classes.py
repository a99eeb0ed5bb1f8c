"""Actors the real-process tests use: importable, so workers know them by name."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

import dista_runtime as dista


@dista.actor(checkpoint_every=10)
class Counter:
    def __init__(self, start: int = 0) -> None:
        self.n = start
        self.seen: list[int] = []

    def add(self, k: int, pause: float = 0.0) -> int:
        self.n += k
        if pause:
            time.sleep(pause)
        return self.n

    def value(self) -> int:
        return self.n

    def pid(self) -> int:
        return os.getpid()

    def fail(self, why: str) -> None:
        raise ValueError(why)

    def exit(self) -> None:
        sys.exit(3)

    def record(self, item: Any) -> int:
        self.seen.append(item)
        return len(self.seen)

    def items(self) -> list[int]:
        return list(self.seen)

    async def slow_add(self, k: int) -> int:
        before = self.n
        await asyncio.sleep(0.01)
        self.n = before + k  # another call in between would be lost: they never overlap
        return self.n

    def call_other(self, other: dista.ActorHandle[Any], k: int) -> int:
        result: int = other.add.remote(k).get()
        return result


@dista.actor
class Plain:
    """No periodic checkpoints: rebuilt from its constructor plus every kept call."""

    def __init__(self) -> None:
        self.n = 0

    def add(self, k: int) -> int:
        self.n += k
        return self.n

    def pid(self) -> int:
        return os.getpid()


@dista.actor
class Stateful:
    """State through __getstate__/__setstate__: a cache that is rebuilt, not saved."""

    def __init__(self) -> None:
        self.total = 0
        self.cache: dict[int, int] = {}

    def add(self, k: int) -> int:
        self.total += k
        self.cache[k] = self.total
        return self.total

    def cached(self) -> int:
        return len(self.cache)

    def pid(self) -> int:
        return os.getpid()

    def __getstate__(self) -> dict[str, int]:
        return {"total": self.total}

    def __setstate__(self, state: dict[str, int]) -> None:
        self.total = state["total"]
        self.cache = {}


@dista.actor
class Broken:
    def __init__(self) -> None:
        raise RuntimeError("cannot start")

    def add(self, k: int) -> int:
        return k


@dista.task
def call_actor(handle: dista.ActorHandle[Any], k: int) -> int:
    """A task calling an actor through the handle it was given."""
    result: int = handle.add.remote(k).get()
    return result


@dista.task
def double(x: int) -> int:
    return 2 * x


@dista.task
def fails() -> int:
    raise KeyError("no")


@dista.task
def sleep_then(seconds: float, value: int) -> int:
    time.sleep(seconds)
    return value


@dista.task
def pid_after(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


@dista.actor
class Sink:
    """Takes blobs, keeps their count: calls with large arguments and no checkpoints."""

    def __init__(self) -> None:
        self.count = 0

    def take(self, blob: bytes) -> int:
        self.count += 1
        return len(blob)


@dista.actor
class Grid:
    """A NumPy state: restored from a checkpoint, it must still be writable."""

    def __init__(self, size: int) -> None:
        import numpy as np

        self.cells = np.zeros(size, dtype=np.int64)

    def bump(self, index: int) -> int:
        self.cells[index] += 1
        return int(self.cells.sum())

    def pid(self) -> int:
        return os.getpid()


@dista.actor
class Stuck:
    def spin(self) -> int:
        return sum(range(10**12))  # C code: no interrupt reaches it

    def pid(self) -> int:
        return os.getpid()
