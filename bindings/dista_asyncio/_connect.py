"""Joining a cluster as a driver, from blocking code or from inside an asyncio app."""

from __future__ import annotations

import dista_proto as dp
from dista_runtime import _context, _registry

from ._driver import DriverHost, connect_driver
from ._loop import LoopThread

__all__ = ["connect", "connect_blocking"]


def connect_blocking(host: str, port: int, timeout: float = 10.0) -> _context.Context:
    """A driver on a background loop thread; `Context.close` ends both."""
    names, registry = _registry.snapshot()
    thread = LoopThread()
    try:
        driver = thread.run(connect_driver(host, port, registry, dp.Role.DRIVER, timeout))
    except BaseException:
        thread.stop()
        raise
    context = _context.Context(driver.session, names, (host, port))

    def close() -> None:
        if not thread.loop.is_closed():
            try:
                thread.run(driver.close(), timeout=5)
            except Exception:
                pass
            thread.stop()

    context.close.append(close)
    return context


async def connect(host: str, port: int, timeout: float = 10.0) -> _context.Context:
    """Join as this process's driver on the running loop: ``await ref`` needs no thread.

    Close it with ``for close in context.close: close()`` (or `dista.shutdown`).
    """
    names, registry = _registry.snapshot()
    driver: DriverHost = await connect_driver(host, port, registry, dp.Role.DRIVER, timeout)
    context = _context.Context(driver.session, names, (host, port))
    context.close.append(lambda: driver.loop.create_task(driver.close()))
    context.close.append(lambda: _context.clear(context))
    _context.install(context)
    return context
