"""Joining a cluster from inside an anyio or trio program, on the program's own loop."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

import anyio
import sniffio

from dista_runtime.binding import Cluster, begin, joined

from ._loop import AnyioLoop, name_thread
from ._run import wait

__all__ = ["connect"]

#: How long a closing connection may take to send what it still has queued.
_CLOSE_S: Final = 5.0


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
    # `AnyioLoop` names this thread's async library for sniffio: as it was, once we leave.
    named = name_thread(sniffio.current_async_library())
    try:
        async with anyio.create_task_group() as group:  # the connection's reader and writer
            try:
                driver, where = begin(AnyioLoop(group), address, timeout, cancel_remote)
                await wait(driver.welcomed)  # if not, ending the group closes its socket
                cluster = joined(driver, where)
                try:
                    yield cluster
                finally:
                    cluster.shutdown()
            except Exception as e:  # noqa: BLE001  (raised as it is below, not in a group)
                failed.append(e)
            group.cancel_scope.deadline = anyio.current_time() + _CLOSE_S
    finally:
        name_thread(named)
    if failed:
        raise failed[0]
