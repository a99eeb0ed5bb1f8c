"""dista_asyncio: every Dista role over asyncio (uvloop when installed).

From inside an asyncio app, join a cluster on the app's own loop and await refs there::

    async with dista_asyncio.connect("127.0.0.1:7420"):
        value = await add.remote(1, 2)

The roles themselves are the runtime's; this adapts asyncio's loop to its contract
(`dista_runtime.binding`): `AsyncioBackend` is what the runtime loads (``backend_class``),
`AsyncioLoop` its loop.
"""

from __future__ import annotations

from collections.abc import Coroutine
from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar, TypeVar

from dista_runtime import Cluster
from dista_runtime.binding import AsyncBackend, Latch, Loop, Start, Stop

from . import _connect, _run
from ._connect import connect
from ._loop import AsyncioLoop, new_event_loop
from ._run import LoopThread, background, run, wait

__all__ = ["AsyncioBackend", "AsyncioLoop", "LoopThread", "background", "backend_class"]
__all__ += ["connect", "new_event_loop", "run", "wait"]

T = TypeVar("T")


class AsyncioBackend(AsyncBackend):
    """Dista on asyncio: this package's functions, as `dista_runtime.loops` uses them."""

    loop_type: ClassVar[type[Loop]] = AsyncioLoop

    @staticmethod
    def run(start: Start[T], stop: Stop | None = None, *, loop: str = "asyncio") -> T:
        return _run.run(start, stop, loop=loop)

    @staticmethod
    def background(*, loop: str = "asyncio") -> LoopThread:
        return _run.background(loop=loop)

    @staticmethod
    def wait(latch: Latch[T], timeout: float | None = None) -> Coroutine[Any, Any, T]:
        return _run.wait(latch, timeout)

    @staticmethod
    def connect(
        address: str | None = None, *, timeout: float = 10.0, cancel_remote: bool = False
    ) -> AbstractAsyncContextManager[Cluster]:
        return _connect.connect(address, timeout=timeout, cancel_remote=cancel_remote)


backend_class = AsyncioBackend
