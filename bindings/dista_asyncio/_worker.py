"""A worker over asyncio: the `Worker` core, its object server and its client session.

Where tasks run, and how they come back, is `dista_runtime.execution`'s; this gives it the
asyncio loop (call soon, call soon from a thread, start a coroutine) and the streams.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import dista_proto as dp
from dista_runtime.binding import (
    Context,
    allocate,
    clear_context,
    format_head,
    install_context,
    install_worker_hooks,
    ready,
    registry_snapshot,
    unix_path,
)
from dista_runtime.execution import Execution

from ._dial import dial
from ._driver import DriverHost, connect_driver
from ._host import Host, LinkBase

__all__ = ["CURRENT", "WorkerHost", "run_worker"]

#: The worker this process runs, if any (for introspection from inside tasks).
CURRENT: WorkerHost | None = None


class WorkerHost(Host):
    def __init__(self, loop: asyncio.AbstractEventLoop, core: dp.Worker, threads: int) -> None:
        super().__init__(loop)
        self.core = core
        self.execution = Execution(core, threads, loop, self.act, asyncio.current_task)
        self.runners = self.execution.runners
        self.inline = self.execution.inline
        self.client: DriverHost | None = None

    def protocol(self) -> LinkBase:
        return self.link_protocol(self.core.connection_made(time.time_ns()))

    def get_buffer(self, link: int, sizehint: int) -> memoryview:
        return ready(self.core.get_buffer(link, sizehint))

    def updated(self, link: int, nbytes: int) -> list[dp.Decision]:
        self.core.buffer_updated(link, nbytes, time.time_ns())
        return self._decisions()

    def lost(self, link: int) -> list[dp.Decision]:
        self.core.connection_lost(link, time.time_ns())
        return self._decisions()

    def opened(self, link: int) -> list[dp.Decision]:
        self.core.connected(link, time.time_ns())
        return self._decisions()

    def _decisions(self) -> list[dp.Decision]:
        return self.execution.decisions()

    def other(self, decision: dp.Decision) -> None:
        self.execution.handle(decision)


def _advertised_host(head_host: str) -> str:
    import ipaddress
    import socket

    if unix_path(head_host) is not None:
        return "127.0.0.1"  # a head on this machine

    try:
        if ipaddress.ip_address(head_host).is_loopback:
            return "127.0.0.1"
    except ValueError:
        head_host = socket.gethostbyname(head_host)
        if ipaddress.ip_address(head_host).is_loopback:
            return "127.0.0.1"
    # The interface that routes to the head is the one the head's other peers can reach.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((head_host, 9))
        host: str = probe.getsockname()[0]
        return host


async def run_worker(
    head_host: str,
    head_port: int,
    *,
    host: str | None = None,
    threads: int = 1,
    client: bool = True,
    ready: asyncio.Future[Any] | None = None,
) -> str:
    """Serve the head at ``head_host:head_port`` until it stops us; the reason we stopped.

    The registry is whatever tasks this process has imported by now. ``host`` is where the
    object server listens and what the head tells fetchers (default: the interface that
    reaches the head; loopback for a head on loopback).
    """
    loop = asyncio.get_running_loop()
    bind = host or _advertised_host(head_host)
    names, registry = registry_snapshot()
    box: list[WorkerHost] = []
    server = await loop.create_server(lambda: box[0].protocol(), bind, 0)
    port = server.sockets[0].getsockname()[1]
    core = dp.Worker(registry_hash=registry, address=dp.Address(bind, port), allocate=allocate)
    worker = WorkerHost(loop, core, threads)
    box.append(worker)
    global CURRENT
    CURRENT = worker
    install_worker_hooks(
        worker.runners.blocking, worker.execution.awaiting, worker.inline.session_used
    )
    # The client first: a task may submit work as soon as the head knows this worker.
    if client:
        try:
            worker.client = await connect_driver(head_host, head_port, registry, dp.Role.CLIENT)
        except ConnectionError:
            worker.client = None
        else:
            ctx = Context(worker.client.session, names, (head_host, head_port))
            clear_context()
            install_context(ctx)
    try:
        await dial(loop, lambda: worker.link_protocol(0), head_host, head_port)
    except OSError as e:
        server.close()
        raise ConnectionError(
            f"cannot reach the head at {format_head(head_host, head_port)}: {e}"
        ) from e
    core.start(time.time_ns())
    worker.act(worker._decisions())
    if ready is not None and not ready.done():
        ready.set_result((bind, port))
    reason: str = await worker.exited
    server.close()
    if worker.client is not None:
        await worker.client.close()
    worker.close_all()
    await asyncio.sleep(0)
    return reason
