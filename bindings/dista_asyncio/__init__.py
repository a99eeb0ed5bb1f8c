"""dista_asyncio: every Dista role over asyncio (uvloop when installed).

From inside an asyncio app, join a cluster on the app's own loop and await refs there::

    async with dista_asyncio.connect("127.0.0.1:7420"):
        value = await add.remote(1, 2)

The roles themselves are the runtime's (`dista_runtime._net.loop`); this adapts asyncio's loop.
"""

from __future__ import annotations

from ._connect import connect
from ._loop import AsyncioLoop, new_event_loop
from ._run import LoopThread, background, run, wait

__all__ = ["AsyncioLoop", "LoopThread", "background", "connect", "new_event_loop", "run", "wait"]
