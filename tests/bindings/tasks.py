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
