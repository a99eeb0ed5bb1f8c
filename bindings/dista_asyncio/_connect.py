"""Joining a cluster from inside an asyncio app, on the app's own loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from dista_runtime import Cluster
from dista_runtime.binding import joining

from ._loop import AsyncioLoop
from ._run import wait

__all__ = ["connect"]


@asynccontextmanager
async def connect(
    address: str | None = None, *, timeout: float = 10.0, cancel_remote: bool = False
) -> AsyncIterator[Cluster]:
    """``async with dista_asyncio.connect("HOST:PORT") as cluster:`` join the head there as
    this process's driver, on the running loop: ``await ref`` needs no thread.

    ``address`` is what `dista.init` takes (None: ``DISTA_ADDRESS``). A cancelled
    ``await ref`` stops waiting; with ``cancel_remote`` it cancels the ref's task too.
    """
    running = AsyncioLoop(asyncio.get_running_loop())
    async with joining(running, address, timeout, cancel_remote, wait) as cluster:
        yield cluster
