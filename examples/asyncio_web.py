"""An aiohttp service whose handlers await Dista tasks on the service's own loop.

    python examples/asyncio_web.py --head HOST:PORT --port 8080
    curl 'localhost:8080/square?n=7'   # 49, computed on a worker
    curl 'localhost:8080/square?n=7&sleep=2'   # the same, the task taking 2 s
    curl 'localhost:8080/ping'         # answers at once, even while tasks run

The service joins the cluster with ``async with dista_asyncio.connect(...)`` on aiohttp's
own event loop: ``await task.remote(...)`` suspends only the handler that awaits, never the
loop, and no thread is started for Dista. Without ``--head`` (and no ``DISTA_ADDRESS``)
it starts a local cluster first. SIGTERM or Ctrl-C stops the service once the requests in
flight are answered, and leaves the cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator

import dista_asyncio
from aiohttp import web

import dista_runtime as dista


@dista.task
def square(n: int, seconds: float = 0.0) -> int:
    """``n * n``, taking ``seconds`` first (as real work would)."""
    time.sleep(seconds)
    return n * n


async def handle_square(request: web.Request) -> web.Response:
    n = int(request.query.get("n", "0"))
    seconds = float(request.query.get("sleep", "0"))
    value = await square.remote(n, seconds)  # the loop serves other requests meanwhile
    return web.json_response({"n": n, "square": value})


async def handle_ping(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


@contextlib.asynccontextmanager
async def cluster(head: str | None) -> AsyncIterator[None]:
    if head:
        async with dista_asyncio.connect(head):
            yield
    else:
        with dista.init(workers=2):  # a local cluster; refs are awaited all the same
            yield


async def main(head: str | None, port: int) -> None:
    async with cluster(head):
        app = web.Application()
        app.router.add_get("/square", handle_square)
        app.router.add_get("/ping", handle_ping)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port)
        await site.start()
        print(f"serving on http://127.0.0.1:{port}", flush=True)
        stopping = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stopping.set)
        try:
            await stopping.wait()
        finally:
            await runner.cleanup()  # the requests in flight finish first


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--head", default=os.environ.get("DISTA_ADDRESS"))
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args()
    asyncio.run(main(args.head, args.port))
