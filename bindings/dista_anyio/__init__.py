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

from dista_runtime.binding import AsyncBackend

from . import _run
from ._connect import connect
from ._loop import AnyioLoop
from ._run import background, run, wait

__all__ = ["AnyioBackend", "AnyioLoop", "background", "backend_class"]
__all__ += ["connect", "run", "wait"]


class AnyioBackend(AsyncBackend):
    """Dista on anyio: this package's functions, as `dista_runtime.loops` uses them."""

    loop_type = AnyioLoop
    run = staticmethod(_run.run)
    background = staticmethod(_run.background)
    wait = staticmethod(_run.wait)
    connect = staticmethod(connect)


backend_class = AnyioBackend
