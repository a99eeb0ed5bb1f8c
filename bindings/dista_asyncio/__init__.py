"""dista_asyncio: every Dista role over asyncio (uvloop when installed).

From inside an asyncio app, join a cluster on the app's own loop and await refs there::

    context = await dista_asyncio.connect("127.0.0.1", 7420)
    value = await add.remote(1, 2)
"""

from __future__ import annotations

from ._connect import connect, connect_blocking, connect_local
from ._driver import DriverHost, connect_driver
from ._head import HeadServer, serve_head
from ._host import HIGH_WATER, LOW_WATER
from ._loop import LoopThread, new_event_loop, run
from ._observer import ask_head
from ._worker import WorkerHost, run_worker

__all__ = [
    "HIGH_WATER",
    "LOW_WATER",
    "DriverHost",
    "HeadServer",
    "LoopThread",
    "WorkerHost",
    "ask_head",
    "connect",
    "connect_blocking",
    "connect_local",
    "connect_driver",
    "new_event_loop",
    "run",
    "run_worker",
    "serve_head",
]
