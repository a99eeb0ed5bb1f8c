"""Joining a cluster from inside an anyio or trio program, on the program's own loop."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from dista_runtime import Cluster
from dista_runtime.binding import joining

from ._loop import AnyioLoop
from ._run import wait

__all__ = ["connect"]


@asynccontextmanager
async def connect(
    address: str | None = None, *, timeout: float = 10.0, cancel_remote: bool = False
) -> AsyncIterator[Cluster]:
    """``async with dista_anyio.connect("HOST:PORT") as cluster:`` join the head there as
    this process's driver, on the running loop (anyio on asyncio, or trio): ``await ref``
    needs no thread.

    ``address`` is what `dista.init` takes (None: ``DISTA_ADDRESS``). A cancelled
    ``await ref`` (its scope or task group cancelled) stops waiting and leaves the
    connection sound; with ``cancel_remote`` it cancels the ref's task too.
    """
    failed: list[Exception] = []
    async with anyio.create_task_group() as group:  # the connection's reader and writer
        try:
            running = AnyioLoop(group)
            async with joining(running, address, timeout, cancel_remote, wait) as cluster:
                yield cluster
        except Exception as e:  # noqa: BLE001  (raised as it is below, not in a group)
            failed.append(e)
        group.cancel_scope.cancel()  # what the connection still runs (its socket closes)
    if failed:
        raise failed[0]
