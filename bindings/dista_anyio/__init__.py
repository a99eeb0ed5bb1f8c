"""dista_anyio: every Dista role over anyio, on its asyncio backend or on trio.

From inside a trio (or anyio) program, join a cluster on the program's own loop and await
refs there; cancelling the scope that awaits a ref cancels only that wait::

    async with dista_anyio.connect("127.0.0.1:7420"):
        value = await add.remote(1, 2)

The roles themselves are the runtime's (`dista_runtime._net.loop`); this adapts anyio's loop.
The runtime finds it by loop name: "anyio" (anyio on asyncio) and "trio" (anyio on trio).
"""

from ._connect import connect
from ._loop import AnyioLoop
from ._run import LoopThread, background, run, wait

__all__ = ["AnyioLoop", "LoopThread", "background", "connect", "run", "wait"]
