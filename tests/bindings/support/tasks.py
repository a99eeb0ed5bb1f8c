"""Tasks the binding tests run (an importable module: workers know them by name)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import dista_runtime as dista


@dista.task
def mark_then_sleep(seconds: float, value: int, start: str, end: str = "") -> int:
    """Write ``start`` (this worker's pid), sleep, write ``end`` if it gets there."""
    Path(start).write_text(str(os.getpid()))
    time.sleep(seconds)
    if end:
        Path(end).write_text("ran to the end")
    return value


@dista.task
def pid_and_value(value: int) -> tuple[int, int]:
    return os.getpid(), value


@dista.task
def blob(mib: int) -> bytes:
    return os.urandom(1024) * (mib * 1024)


@dista.task
def length_and_sum(data: bytes) -> tuple[int, int]:
    return len(data), sum(data[:: 1 << 16])


@dista.task
async def async_add_nested(a: int, b: int) -> int:
    """An ``async def`` task for any worker loop: anyio sleeps on asyncio and trio alike,
    and it awaits a task it submits."""
    import anyio

    await anyio.sleep(0.01)
    return await add_plain.remote(a, b)


@dista.task
def add_plain(a: int, b: int) -> int:
    return a + b


@dista.actor(checkpoint_every=5)
class Tally:
    """An actor for every worker loop: its async method runs on the loop (anyio sleeps on
    asyncio and trio alike) and awaits a task it submits; calls never overlap."""

    def __init__(self) -> None:
        self.total = 0

    def add(self, k: int) -> int:
        self.total += k
        return self.total

    async def add_later(self, k: int) -> int:
        import anyio

        before = self.total
        await anyio.sleep(0.005)
        self.total = before + await add_plain.remote(k, 0)
        return self.total

    def pid(self) -> int:
        return os.getpid()


@dista.task
def tally_through(handle: dista.ActorHandle[Tally], k: int) -> int:
    """A task calling an actor through the handle it was given."""
    result: int = handle.add.remote(k).get()
    return result
