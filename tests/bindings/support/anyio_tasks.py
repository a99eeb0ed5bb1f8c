"""Tasks the anyio binding's tests run on workers (an importable module: known by name).

The ``async def`` ones use anyio, so they run on a worker's loop whichever it is (asyncio,
or trio for a worker started with ``--loop trio``).
"""

from __future__ import annotations

import threading
from pathlib import Path

import anyio

import dista_runtime as dista


def _library() -> str:
    try:
        import sniffio
    except ImportError:
        return "asyncio"
    return sniffio.current_async_library()


@dista.task
async def where_async(delay: float = 0.0) -> tuple[str, str]:
    """(the async library running this task, its thread's name)."""
    await anyio.sleep(delay)
    return _library(), threading.current_thread().name


@dista.task
def where_plain() -> str:
    """The name of the thread running this task."""
    return threading.current_thread().name


@dista.task
def plus_one(n: int) -> int:
    return n + 1


@dista.task
async def awaits_children(n: int) -> int:
    """Awaits ``n`` tasks of its own, one at a time, on the worker's loop."""
    total = 0
    for i in range(n):
        total += await plus_one.remote(i)
    return total


@dista.task
async def mark_then_sleep_async(seconds: float, start: str, end: str) -> int:
    """Write ``start``, sleep on the worker's loop, write ``end`` if it gets there."""
    Path(start).write_text("started")
    await anyio.sleep(seconds)
    Path(end).write_text("ran to the end")
    return 1
