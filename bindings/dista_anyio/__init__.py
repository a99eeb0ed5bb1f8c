"""dista_anyio: every Dista role over anyio, on its asyncio backend or on trio.

From inside a trio (or anyio) program, join a cluster on the program's own loop and await
refs there; cancelling the scope that awaits a ref cancels only that wait::

    async with dista_anyio.connect("127.0.0.1:7420"):
        value = await add.remote(1, 2)

The roles themselves are the runtime's; this adapts anyio's loop to its contract
(`dista_runtime.binding`): `AnyioBackend` is what the runtime loads (``backend_class``),
`AnyioLoop` its loop. The runtime finds it by loop name: "anyio" (anyio on asyncio) and
"trio" (anyio on trio).
"""

from collections.abc import Coroutine
from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar, TypeVar

from dista_runtime import Cluster
from dista_runtime.binding import AsyncBackend, Latch, Loop, LoopThread, Start, Stop

from . import _connect, _run
from ._connect import connect
from ._loop import AnyioLoop
from ._run import background, run, wait

__all__ = ["AnyioBackend", "AnyioLoop", "background", "backend_class"]
__all__ += ["connect", "run", "wait"]

T = TypeVar("T")


class AnyioBackend(AsyncBackend):
    """Dista on anyio: this package's functions, as `dista_runtime.loops` uses them."""

    loop_type: ClassVar[type[Loop]] = AnyioLoop

    @staticmethod
    def run(start: Start[T], stop: Stop | None = None, *, loop: str = "anyio") -> T:
        return _run.run(start, stop, loop=loop)

    @staticmethod
    def background(*, loop: str = "anyio") -> LoopThread[AnyioLoop]:
        return _run.background(loop=loop)

    @staticmethod
    def wait(latch: Latch[T], timeout: float | None = None) -> Coroutine[Any, Any, T]:
        return _run.wait(latch, timeout)

    @staticmethod
    def connect(
        address: str | None = None, *, timeout: float = 10.0, cancel_remote: bool = False
    ) -> AbstractAsyncContextManager[Cluster]:
        return _connect.connect(address, timeout=timeout, cancel_remote=cancel_remote)


backend_class = AnyioBackend
