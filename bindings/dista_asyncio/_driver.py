"""A driver (or a task's client) over asyncio: the `Session` of `dista_runtime` on a loop."""

from __future__ import annotations

import asyncio
import threading

import dista_proto as dp
from dista_runtime.binding import Session, allocate, format_head, ready

from ._dial import dial
from ._host import Host

__all__ = ["DriverHost", "connect_driver"]


class DriverHost(Host):
    """Runs a `Driver` core on ``loop``; user threads reach it through ``session``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, registry_hash: int, role: dp.Role) -> None:
        super().__init__(loop)
        self.session = Session(
            dp.Driver(registry_hash=registry_hash, role=role, allocate=allocate), self
        )
        self._flush_scheduled = False
        self._io_thread = threading.get_ident()
        self.welcomed = loop.create_future()

    # SessionIO
    def schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            try:
                self.loop.call_soon_threadsafe(self._flush)
            except RuntimeError:
                pass  # the loop is closed: the session is over anyway

    def in_io_thread(self) -> bool:
        return threading.get_ident() == self._io_thread

    def _flush(self) -> None:
        self._flush_scheduled = False
        self.act(self.session.flush())

    # Host
    def get_buffer(self, link: int, sizehint: int) -> memoryview:
        return ready(self.session.get_buffer(link, sizehint))

    def updated(self, link: int, nbytes: int) -> list[dp.Decision]:
        return self._check_welcome(list(self.session.buffer_updated(link, nbytes)))

    def _check_welcome(self, out: list[dp.Decision]) -> list[dp.Decision]:
        if not self.welcomed.done() and self.session.welcomed.is_set():
            self.welcomed.set_result(None)
        return out

    def lost(self, link: int) -> list[dp.Decision]:
        out: list[dp.Decision] = list(self.session.lost(link))
        if self.session.closed:  # the head connection went
            if not self.welcomed.done():
                self.welcomed.set_exception(ConnectionError(self.session.closed))
            if not self.exited.done():
                self.exited.set_result(self.session.closed)
        return out

    def opened(self, link: int) -> list[dp.Decision]:
        return list(self.session.connected(link))

    async def close(self) -> None:
        self.session.close("the driver shut down")
        transport = self.transports.get(0)
        if transport is not None:
            transport.close()
        self.close_all()
        await asyncio.sleep(0)


async def connect_driver(
    host: str,
    port: int,
    registry_hash: int,
    role: dp.Role = dp.Role.DRIVER,
    timeout: float = 10.0,
) -> DriverHost:
    """Connect to the head at ``host:port`` and wait for its welcome."""
    loop = asyncio.get_running_loop()
    driver = DriverHost(loop, registry_hash, role)
    try:
        await asyncio.wait_for(dial(loop, lambda: driver.link_protocol(0), host, port), timeout)
    except (OSError, TimeoutError) as e:
        where = format_head(host, port)
        raise ConnectionError(f"cannot reach a Dista head at {where}: {e}") from e
    driver.act(driver.session.start())
    try:
        await asyncio.wait_for(asyncio.shield(driver.welcomed), timeout)
    except TimeoutError:
        driver.close_all()
        why = f"the head at {format_head(host, port)} did not welcome us in {timeout} s"
        raise ConnectionError(why) from None
    return driver
