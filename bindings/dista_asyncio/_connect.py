"""Joining a cluster as a driver, from blocking code or from inside an asyncio app."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Protocol

import dista_proto as dp
from dista_runtime.binding import (
    Context,
    DistaError,
    clear_context,
    install_context,
    registry_snapshot,
)
from dista_runtime.memlink import memory_link

from ._driver import DriverHost, connect_driver
from ._head import HeadServer, serve_head
from ._loop import LoopThread

__all__ = ["LocalWorkers", "connect", "connect_blocking", "connect_local"]

#: How long a closing local head may take to stop its workers and flush.
_HEAD_CLOSE_S = 5.0
_JOIN_POLL_S = 0.002


class LocalWorkers(Protocol):
    """What `connect_local` needs of the worker processes it waits for (`LocalCluster`)."""

    #: How many workers to wait for.
    expected: int

    def why_lost(self, pid: int) -> str | None:
        """How process ``pid`` ended ("worker pid 4242 died: SIGSEGV"); None while it runs."""
        ...

    def failed(self) -> str:
        """Why the workers cannot start (they keep dying on start), or ''."""
        ...

    def head_exited(self) -> None:
        """The head stopped: no worker should be replaced from now on."""
        ...


def connect_blocking(host: str, port: int, timeout: float = 10.0) -> Context:
    """A driver on a background loop thread; `Context.close` ends both."""
    names, registry = registry_snapshot()
    thread = LoopThread()
    try:
        driver = thread.run(connect_driver(host, port, registry, dp.Role.DRIVER, timeout))
    except BaseException:
        thread.stop()
        raise
    context = Context(driver.session, names, (host, port))

    def close() -> None:
        if not thread.loop.is_closed():
            try:
                thread.run(driver.close(), timeout=5)
            except Exception:
                pass
            thread.stop()

    context.close.append(close)
    return context


async def connect(host: str, port: int, timeout: float = 10.0) -> Context:
    """Join as this process's driver on the running loop: ``await ref`` needs no thread.

    Close it with ``for close in context.close: close()`` (or `dista.shutdown`).
    """
    names, registry = registry_snapshot()
    driver: DriverHost = await connect_driver(host, port, registry, dp.Role.DRIVER, timeout)
    context = Context(driver.session, names, (host, port))
    context.close.append(lambda: driver.loop.create_task(driver.close()))
    context.close.append(lambda: clear_context(context))
    install_context(context)
    return context


def connect_local(
    listener: socket.socket,
    address: tuple[str, int],
    timeout: float = 10.0,
    workers: LocalWorkers | None = None,
) -> Context:
    """Serve a local cluster's head on ``listener`` and join it as the driver, both on one
    background loop thread; `Context.close` stops the head (it stops its workers) and it.

    With ``workers``, return once ``workers.expected`` workers have joined the head (within
    ``timeout`` in all), or raise `DistaError` as soon as they cannot start; the head asks
    ``workers.why_lost`` how a lost worker's process ended.
    """
    names, registry = registry_snapshot()
    thread = LoopThread()
    served: list[HeadServer] = []  # once the head serves the listener, it closes it
    deadline = time.monotonic() + timeout

    async def start() -> tuple[HeadServer, DriverHost]:
        why_lost = workers.why_lost if workers is not None else None
        server = await serve_head(sock=listener, local=True, why_lost=why_lost)
        served.append(server)
        if workers is not None:
            server.exited.add_done_callback(lambda _: workers.head_exited())
        try:
            driver = await _attach_driver(server, registry, timeout)
            if workers is not None:
                await _workers_joined(server, workers, deadline)
        except BaseException:
            server.head_stop("the driver could not connect")
            server.close_all()
            if server.server is not None:
                server.server.close()
            raise
        return server, driver

    try:
        server, driver = thread.run(start())
    except BaseException:
        if not served:
            listener.close()
        thread.stop()
        raise
    context = Context(driver.session, names, address)

    async def stop() -> None:
        await driver.close()  # the head's last driver left: it stops its workers, then exits
        try:
            await asyncio.wait_for(server.wait_closed(), _HEAD_CLOSE_S)
        except TimeoutError:
            server.head_stop("the local cluster shut down")
            server.close_all()

    def close() -> None:
        if not thread.loop.is_closed():
            try:
                thread.run(stop(), timeout=_HEAD_CLOSE_S + 5)
            except Exception:
                pass
            thread.stop()

    context.close.append(close)
    return context


async def _workers_joined(server: HeadServer, workers: LocalWorkers, deadline: float) -> None:
    """Until the head counts ``workers.expected`` workers; `DistaError` if they cannot start
    or ``deadline`` passes first."""
    while server.head.stats().workers < workers.expected:
        reason = workers.failed()
        if reason:
            raise DistaError(reason)
        if time.monotonic() >= deadline:
            joined = server.head.stats().workers
            raise DistaError(
                f"only {joined} of the local cluster's {workers.expected} workers joined "
                "its head in time (init's timeout)"
            )
        await asyncio.sleep(_JOIN_POLL_S)


async def _attach_driver(server: HeadServer, registry: int, timeout: float) -> DriverHost:
    """A driver linked to ``server`` on this loop in memory (`dista_runtime.memlink`), welcomed."""
    loop = asyncio.get_running_loop()
    driver = DriverHost(loop, registry, dp.Role.DRIVER)
    memory_link(loop.call_soon, driver.link_protocol(0), server.protocol())
    driver.act(driver.session.start())
    try:
        await asyncio.wait_for(asyncio.shield(driver.welcomed), timeout)
    except TimeoutError:
        driver.close_all()
        raise ConnectionError(
            f"the local head did not welcome its driver in {timeout} s"
        ) from None
    return driver
