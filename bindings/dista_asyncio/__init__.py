"""dista_asyncio: every Dista role over asyncio (uvloop when installed).

From inside an asyncio app, join a cluster on the app's own loop and await refs there::

    async with dista_asyncio.connect("127.0.0.1:7420"):
        value = await add.remote(1, 2)

The roles themselves are the runtime's; this adapts asyncio's loop to its contract
(`dista_runtime.binding`): `AsyncioBackend` is what the runtime loads (``backend_class``),
`AsyncioLoop` its loop.
"""

from __future__ import annotations

from dista_runtime.binding import AsyncBackend

from . import _run
from ._connect import connect
from ._loop import AsyncioLoop, new_event_loop
from ._run import LoopThread, background, run, wait

__all__ = ["AsyncioBackend", "AsyncioLoop", "LoopThread", "background", "backend_class"]
__all__ += ["connect", "new_event_loop", "run", "wait"]


class AsyncioBackend(AsyncBackend):
    """Dista on asyncio: this package's functions, as `dista_runtime.loops` uses them."""

    loop_type = AsyncioLoop
    run = staticmethod(_run.run)
    background = staticmethod(_run.background)
    wait = staticmethod(_run.wait)
    connect = staticmethod(connect)


backend_class = AsyncioBackend
